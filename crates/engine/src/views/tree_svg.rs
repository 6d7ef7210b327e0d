//! `tree.svg`: the entry tree drawn, from the rows of `tree.txt` ([`super::tree::tree_rows`]).
//!
//! Format (invariants):
//! - One `<svg>` (SVG 1.1, no script, no style sheet, no external reference), one row per
//!   entry in `tree.txt`'s order, [`ROW_HEIGHT`] pixels high: a dot in the entry's column
//!   ([`COLUMN_WIDTH`] pixels per nested side branch, plus one for a side branch) and the
//!   row's text beside it. A line joins each entry to its parent: down its parent's column,
//!   then across to its own. The current leaf's dot is filled and its text bold.
//! - Every branch end (an entry without children) whose id is a usable file name is a link,
//!   `<a href="<prefix><id>.html">`: the page of the context at that entry; the current leaf
//!   links to the page of the current context instead (`current`); a drawing given no
//!   prefix or no current page leaves those unlinked. Ids in links are percent-encoded;
//!   every text and attribute is escaped as in [`super::html`].

use std::io::{self, Write};

use super::escape::{attr, text};
use super::tree::{tree_rows, TreeRow};
use crate::format::blob::BlobStore;
use crate::session::tree::Session;

/// The height of a row, in pixels.
pub const ROW_HEIGHT: usize = 20;
/// The width of a column, in pixels.
pub const COLUMN_WIDTH: usize = 16;
/// How many characters of a row's text are drawn.
const TEXT_CHARS: usize = 100;
/// A tree of more rows than this is drawn with its straight runs folded.
pub const MAX_ROWS: usize = 2_000;

/// Where the links of the drawing point (`None`: that kind of entry is not linked).
#[derive(Clone, Copy)]
pub struct TreeLinks<'a> {
    /// Prepended to `<entry id>.html` (the id percent-encoded) for a branch end.
    pub leaves: Option<&'a str>,
    /// The page of the context at the current leaf.
    pub current: Option<&'a str>,
}

/// Whether an id can be the stem of a page file (`<id>.html`, `<id>.leaves/`) on every
/// system the pages are written on: 1 to 200 ASCII letters, digits, `-`, `_` and `.`, not
/// starting with `.` or `-`, and not a name Windows reserves for a device (`CON`, `NUL`,
/// `COM1`, …, with any extension). Session ids (UUIDs) and entry ids (hex) always are;
/// anything else is never made a file name.
pub fn portable_stem(id: &str) -> bool {
    const DEVICES: [&str; 4] = ["CON", "PRN", "AUX", "NUL"];
    let base = id
        .split('.')
        .next()
        .unwrap_or_default()
        .to_ascii_uppercase();
    let numbered = ["COM", "LPT"].iter().any(|d| {
        base.strip_prefix(d)
            .is_some_and(|n| n.len() == 1 && n.as_bytes()[0].is_ascii_digit())
    });
    (1..=200).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && !id.starts_with(['.', '-'])
        && !DEVICES.contains(&base.as_str())
        && !numbered
}

/// The page file of the context at entry `id` (`<id>.html`), if its id can name one
/// ([`portable_stem`]): what the mount lists in `leaves/` and an export writes.
pub fn leaf_page_name(id: &str) -> Option<String> {
    portable_stem(id).then(|| format!("{id}.html"))
}

/// `s` percent-encoded for a URL path segment (only ASCII letters, digits and `-._~` stay).
pub fn percent_encoded(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The ids of the branch ends that have a page ([`leaf_page_name`]), in drawing order.
pub fn branch_ends(session: &Session) -> Vec<String> {
    tree_rows(session, None)
        .into_iter()
        .filter(|row| row.is_branch_end)
        .filter_map(|row| session.record(row.index).id().map(str::to_owned))
        .filter(|id| leaf_page_name(id).is_some())
        .collect()
}

/// Writes the drawing.
pub fn write_tree_svg<W: Write + ?Sized>(
    session: &Session,
    cold: Option<&BlobStore>,
    links: &TreeLinks<'_>,
    out: &mut W,
) -> io::Result<()> {
    let rows = fold_runs(tree_rows(session, cold));
    let column = |row: &super::tree::TreeRow| row.depth + usize::from(row.side);
    let columns = rows.iter().map(column).max().unwrap_or(0) + 1;
    let width = columns * COLUMN_WIDTH + TEXT_CHARS * 7 + 20;
    let height = rows.len().max(1) * ROW_HEIGHT + 10;
    writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"monospace\" \
         font-size=\"12\">"
    )?;
    let x_of = |c: usize| c * COLUMN_WIDTH + 10;
    let y_of = |r: usize| r * ROW_HEIGHT + 15;
    for (r, row) in rows.iter().enumerate() {
        if let Some(p) = row.parent {
            let (px, py) = (x_of(column(&rows[p])), y_of(p));
            let (x, y) = (x_of(column(row)), y_of(r));
            writeln!(
                out,
                "<path d=\"M{px} {py} V{y} H{x}\" fill=\"none\" stroke=\"#999\"/>"
            )?;
        }
    }
    for (r, row) in rows.iter().enumerate() {
        let (x, y) = (x_of(column(row)), y_of(r));
        let shown: String = row.text.chars().take(TEXT_CHARS).collect();
        let id = session.record(row.index).id();
        let href = match (id, links.leaves) {
            _ if row.is_leaf => links.current.map(str::to_owned),
            (Some(id), Some(leaves)) if row.is_branch_end && leaf_page_name(id).is_some() => {
                Some(format!("{leaves}{}.html", percent_encoded(id)))
            }
            _ => None,
        };
        if let Some(href) = &href {
            write!(out, "<a href=\"{}\">", attr(href))?;
        }
        let (fill, weight) = if row.is_leaf {
            ("#1d4ed8", " font-weight=\"bold\"")
        } else {
            ("#fff", "")
        };
        // A link reads as one: blue and underlined.
        let look = if href.is_some() {
            " fill=\"#1d4ed8\" text-decoration=\"underline\""
        } else {
            ""
        };
        write!(
            out,
            "<circle cx=\"{x}\" cy=\"{y}\" r=\"4\" fill=\"{fill}\" stroke=\"#1d4ed8\"/>\
             <text x=\"{}\" y=\"{}\"{weight}{look}>{}</text>",
            x + 10,
            y + 4,
            text(&shown)
        )?;
        if href.is_some() {
            write!(out, "</a>")?;
        }
        writeln!(out)?;
    }
    writeln!(out, "</svg>")
}

/// The rows to draw: all of them up to [`MAX_ROWS`]; past that, only the rows where the tree
/// does something — its roots, the entries with more than one child and their children, the
/// branch ends and the leaf — each joined to its nearest drawn ancestor, with the number of
/// entries folded between them written before its text.
fn fold_runs(rows: Vec<TreeRow>) -> Vec<TreeRow> {
    if rows.len() <= MAX_ROWS {
        return rows;
    }
    let mut children = vec![0usize; rows.len()];
    for row in &rows {
        if let Some(p) = row.parent {
            children[p] += 1;
        }
    }
    let kept: Vec<bool> = rows
        .iter()
        .enumerate()
        .map(|(r, row)| {
            row.parent.is_none_or(|p| children[p] > 1) || children[r] != 1 || row.is_leaf
        })
        .collect();
    let mut new_index = vec![usize::MAX; rows.len()];
    let mut folded = Vec::new();
    for (r, row) in rows.iter().enumerate() {
        if !kept[r] {
            continue;
        }
        // Up to the nearest drawn ancestor, counting the entries folded on the way.
        let (mut at, mut hidden) = (row.parent, 0usize);
        while let Some(p) = at.filter(|&p| !kept[p]) {
            hidden += 1;
            at = rows[p].parent;
        }
        new_index[r] = folded.len();
        let text = if hidden > 0 {
            format!(
                "(… {} entries) {}",
                super::thousands(hidden as u64),
                row.text
            )
        } else {
            row.text.clone()
        };
        folded.push(TreeRow {
            index: row.index,
            depth: row.depth,
            side: row.side,
            parent: at.map(|p| new_index[p]),
            is_branch_end: row.is_branch_end,
            is_leaf: row.is_leaf,
            text,
        });
    }
    folded
}

/// The drawing as bytes.
pub fn tree_svg(session: &Session, cold: Option<&BlobStore>, links: &TreeLinks<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    write_tree_svg(session, cold, links, &mut out).expect("writing to a Vec cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(parent: Option<usize>, is_leaf: bool) -> TreeRow {
        TreeRow {
            index: 0,
            depth: 0,
            side: false,
            parent,
            is_branch_end: false,
            is_leaf,
            text: "t".to_owned(),
        }
    }

    #[test]
    fn straight_runs_of_a_large_tree_are_folded() {
        // A root, a run of 3,000 entries, a fork into two branch ends.
        let mut rows = vec![row(None, false)];
        for r in 0..3000 {
            rows.push(row(Some(r), false));
        }
        let fork = rows.len() - 1;
        rows.push(row(Some(fork), false));
        rows.push(row(Some(fork), true));
        let folded = fold_runs(rows);
        let texts: Vec<&str> = folded.iter().map(|r| r.text.as_str()).collect();
        assert_eq!(texts, ["t", "(… 2,999 entries) t", "t", "t"]);
        let parents: Vec<Option<usize>> = folded.iter().map(|r| r.parent).collect();
        assert_eq!(parents, [None, Some(0), Some(1), Some(1)]);
        // Small trees are drawn whole.
        let small = vec![row(None, false), row(Some(0), false), row(Some(1), true)];
        assert_eq!(fold_runs(small).len(), 3);
    }

    #[test]
    fn ids_are_percent_encoded_and_unusable_ones_have_no_page() {
        assert_eq!(percent_encoded("a1b2-c.d"), "a1b2-c.d");
        assert_eq!(percent_encoded("x\"><y é"), "x%22%3E%3Cy%20%C3%A9");
        assert_eq!(leaf_page_name("5f3a9c01").as_deref(), Some("5f3a9c01.html"));
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "-x",
            ".hidden",
            "a\nb",
            "a\\b",
            "C:x",
            "a:b",
            "CON",
            "nul.txt",
            "com1",
            "LPT9.html",
            "é",
        ] {
            assert_eq!(leaf_page_name(bad), None, "{bad:?}");
        }
        assert!(portable_stem("019b9267-1bf8-79e5-aa13-1591931e315b"));
        assert!(portable_stem("console") && portable_stem("com10") && portable_stem("a.b"));
        assert!(!portable_stem(&"a".repeat(201)));
    }
}
