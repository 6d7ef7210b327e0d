//! `index.html`: the store's sessions as one page — the usage chart, then the sessions by
//! project and by day — each linking to its page.
//!
//! Format (invariants):
//! - The same document shell as a session's page ([`super::html`]: UTF-8, the
//!   Content-Security-Policy, inline style, no script, nothing fetched).
//! - A header with the number of sessions and the store's usage (each reply counted once
//!   across forks), and the cost and tokens per day drawn ([`super::usage_chart`]).
//! - "By project": one `<section>` per project (the sessions' `cwd`, in byte order), a table
//!   of its sessions newest first (by start time, then id); "By day": one section per UTC
//!   day a session started (newest first), with the project as a column. A row is the
//!   session's title (the one rule of every surface,
//!   [`shown_title`](crate::store::discovery::shown_title), its first line on one line as
//!   [`super::title_line`] makes it), linked to its page; its
//!   start time; its message count; and its own cost and tokens (what the session records,
//!   copies from its parent included, as `gjcfs ls --long` shows it).
//! - Every string is escaped as in [`super::html`]; links are the caller's, escaped.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::escape::{attr, text};
use super::html::CONTENT_SECURITY_POLICY;
use super::page_style::STYLE;
use super::usage_chart::{tokens, write_usage_svg};
use super::{one_line, title_line, token_count};
use crate::session::usage::UsageSum;
use crate::store::usage::StoreUsage;

/// How many characters of a title a row shows.
const TITLE_CHARS: usize = 100;

/// One session of the index.
pub struct IndexEntry {
    /// The session's id, shown when it has no title.
    pub id: String,
    /// The session's title, else its first prompt (empty with neither).
    pub title: String,
    /// The header's `cwd`: the project the session is listed under.
    pub cwd: String,
    /// The header's ISO timestamp.
    pub created: String,
    /// How many message entries the session holds (on every branch).
    pub messages: usize,
    /// The session's own usage (copies from its parent included), shown as its
    /// tokens and cost.
    pub usage: UsageSum,
    /// The session's page, relative to the index.
    pub href: String,
}

/// Writes the index of `sessions` and `store` (its `by_day` is drawn).
pub fn write_index_html<W: Write + ?Sized>(
    sessions: &[IndexEntry],
    store: &StoreUsage,
    out: &mut W,
) -> io::Result<()> {
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CONTENT_SECURITY_POLICY}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Sessions</title>\n<style>{STYLE}\
         table{{border-collapse:collapse;width:100%}}td,th{{text-align:left;padding:.15rem .5rem;\
         border-bottom:1px solid #eee;vertical-align:top}}td.n{{text-align:right}}</style>\n\
         </head>\n<body>\n<header>\n<h1>Sessions</h1>\n<p>{} sessions; {} replies counted \
         (copies in forks once): {} tokens, ${:.4}</p>\n",
        sessions.len(),
        super::thousands(store.totals.records),
        token_count(tokens(&store.totals)),
        store.totals.totals.cost
    )?;
    write_usage_svg(&store.by_day, out)?;
    out.write_all(b"\n</header>\n<main>\n<h2 id=\"projects\">By project</h2>\n")?;
    let mut order: Vec<&IndexEntry> = sessions.iter().collect();
    order.sort_by(|a, b| (&b.created, &a.id).cmp(&(&a.created, &b.id)));
    let mut by_project: BTreeMap<&str, Vec<&IndexEntry>> = BTreeMap::new();
    let mut by_day: BTreeMap<&str, Vec<&IndexEntry>> = BTreeMap::new();
    for entry in &order {
        by_project.entry(&entry.cwd).or_default().push(entry);
        let day = entry.created.get(..10).unwrap_or("unknown");
        by_day.entry(day).or_default().push(entry);
    }
    for (project, entries) in &by_project {
        writeln!(
            out,
            "<section class=\"project\">\n<h3><code>{}</code></h3>",
            text(project)
        )?;
        table(out, entries, false)?;
        out.write_all(b"</section>\n")?;
    }
    out.write_all(b"<h2 id=\"days\">By day</h2>\n")?;
    for (day, entries) in by_day.iter().rev() {
        writeln!(out, "<section class=\"day\">\n<h3>{}</h3>", text(day))?;
        table(out, entries, true)?;
        out.write_all(b"</section>\n")?;
    }
    out.write_all(b"</main>\n</body>\n</html>\n")
}

fn table<W: Write + ?Sized>(out: &mut W, entries: &[&IndexEntry], project: bool) -> io::Result<()> {
    let extra = if project { "<th>project</th>" } else { "" };
    writeln!(
        out,
        "<table>\n<tr><th>session</th><th>started</th>{extra}<th>messages</th><th>tokens</th><th>cost</th></tr>"
    )?;
    for e in entries {
        // The first line only, as every surface shows a title.
        let shown = title_line(Some(&e.title), None, TITLE_CHARS);
        let shown = if shown.is_empty() {
            format!("(untitled) {}", one_line(&e.id, usize::MAX))
        } else {
            shown
        };
        let project = if project {
            format!("<td><code>{}</code></td>", text(&e.cwd))
        } else {
            String::new()
        };
        writeln!(
            out,
            "<tr><td><a href=\"{}\">{}</a></td><td><time>{}</time></td>{project}\
             <td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">${:.4}</td></tr>",
            attr(&e.href),
            text(&shown),
            text(&one_line(&e.created, usize::MAX)),
            e.messages,
            token_count(tokens(&e.usage)),
            e.usage.totals.cost
        )?;
    }
    out.write_all(b"</table>\n")
}

/// The index as bytes.
pub fn index_html(sessions: &[IndexEntry], store: &StoreUsage) -> Vec<u8> {
    let mut out = Vec::new();
    write_index_html(sessions, store, &mut out).expect("writing to a Vec cannot fail");
    out
}
