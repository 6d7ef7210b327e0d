//! `gjcfs ls [--all] [--cwd DIR] [--json]`: sessions like the agent's session picker.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use gjcfs::engine::discovery::{list_all, list_dir, SessionInfo};
use gjcfs::engine::json::{self, Object, Value};
use gjcfs::engine::scope::{resolve_identity, scope_dir_name};
use gjcfs::engine::storage::{FileStorage, SessionStorage};
use gjcfs::engine::time::format_iso_millis;

/// The legacy directory name of a workspace: `--<path without the leading />--` with `/`,
/// `\` and `:` turned into `-`.
fn legacy_dir_name(cwd: &str) -> String {
    let body: String = cwd
        .trim_start_matches(['/', '\\'])
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{body}--")
}

pub fn run(all: bool, cwd: Option<&Path>, as_json: bool, agent_dir: Option<&Path>) -> Result<()> {
    let sessions_root = super::agent::agent_dirs(agent_dir)?.sessions_root();
    let storage: Arc<dyn SessionStorage> = Arc::new(FileStorage);
    let infos = if all {
        list_all(storage.as_ref(), &sessions_root)?
    } else {
        let cwd = match cwd {
            Some(dir) => dir.to_owned(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        let identity = resolve_identity(&cwd)?;
        let mut infos = Vec::new();
        for dir in [
            scope_dir_name(&identity),
            legacy_dir_name(&identity.canonical_path),
        ] {
            if let Ok(found) = list_dir(storage.as_ref(), &sessions_root.join(dir)) {
                infos.extend(found);
            }
        }
        infos.sort_by(|a, b| {
            b.modified_ms
                .cmp(&a.modified_ms)
                .then_with(|| a.path.cmp(&b.path))
        });
        infos
    };
    let mut out = BufWriter::new(std::io::stdout().lock());
    for info in &infos {
        if as_json {
            writeln!(out, "{}", json::to_compact(&to_json(info)))?;
        } else {
            writeln!(out, "{}", table_row(info))?;
        }
    }
    out.flush()?;
    Ok(())
}

fn display_title(info: &SessionInfo) -> String {
    let text = info
        .title
        .clone()
        .unwrap_or_else(|| info.first_message.clone());
    let line = text.lines().next().unwrap_or_default().trim().to_owned();
    let mut short: String = line.chars().take(60).collect();
    if line.chars().count() > 60 {
        short.push('…');
    }
    short
}

fn table_row(info: &SessionInfo) -> String {
    let modified = format_iso_millis(info.modified_ms);
    let count = if info.message_count_is_estimate {
        format!("{}+", info.message_count)
    } else {
        info.message_count.to_string()
    };
    format!(
        "{}  {}  {:>5}  {}  {}",
        info.id,
        &modified[..16].replace('T', " "),
        count,
        info.cwd,
        display_title(info)
    )
}

fn to_json(info: &SessionInfo) -> Value {
    let mut o = Object::with_capacity(9);
    o.insert("id", Value::string(info.id.as_str()));
    o.insert(
        "title",
        info.title.as_deref().map_or(Value::Null, Value::string),
    );
    o.insert("cwd", Value::string(info.cwd.as_str()));
    o.insert("created", Value::string(info.created.as_str()));
    o.insert(
        "modified",
        Value::string(format_iso_millis(info.modified_ms)),
    );
    o.insert("messageCount", Value::number(info.message_count as f64));
    o.insert(
        "messageCountIsEstimate",
        Value::Bool(info.message_count_is_estimate),
    );
    o.insert("firstMessage", Value::string(info.first_message.as_str()));
    o.insert(
        "path",
        Value::string(info.path.to_string_lossy().into_owned()),
    );
    Value::Object(o)
}

#[cfg(test)]
mod tests {
    use super::legacy_dir_name;

    #[test]
    fn legacy_names_encode_separators() {
        assert_eq!(legacy_dir_name("/home/u/a-b"), "--home-u-a-b--");
        assert_eq!(legacy_dir_name("/x:y\\z"), "--x-y-z--");
    }
}
