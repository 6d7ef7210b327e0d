//! `list_sessions` and `session_tree`: the store's sessions, and one session's branches.

use std::path::{Path, PathBuf};

use gjcfs_engine::format::time::parse_iso_millis;
use gjcfs_engine::session::tree::Session;
use gjcfs_engine::views::tree::{tree_rows, TreeRow};
use gjcfs_engine::LoadedSession;
use serde_json::{json, Value};

use super::answer::{from_engine, or_nothing, page_note, range, title, Answer, ToolError};
use super::params::{self, ListSessions, SessionTree};
use super::resume::resume_command;
use crate::cli::ls::{listing, to_json};
use crate::cli::store::StoreArgs;

/// The sessions `gjcfs ls` lists, newest first, modified in the range, one page of them.
pub fn list_sessions(store: &StoreArgs, p: ListSessions) -> Answer {
    let limit = params::limit(p.limit).map_err(ToolError::Invalid)?;
    let range = range(p.since.as_deref(), p.until.as_deref())?;
    let cwd = p.cwd.as_deref().map(PathBuf::from);
    let all = p.all || store.session_dir.is_some();
    let rows = match or_nothing(
        listing(all, cwd.as_deref(), store),
        |why| json!({ "sessions": [], "total": 0, "more": why }),
    )? {
        Ok(rows) => rows,
        Err(empty) => return Ok(empty),
    };
    let in_range: Vec<_> = rows
        .iter()
        .filter(|(info, _)| range.contains(Some(info.modified_ms)))
        .collect();
    let sessions: Vec<Value> = in_range
        .iter()
        .skip(p.offset)
        .take(limit)
        .map(|(info, provenance)| {
            let mut value = from_engine(&to_json(info, *provenance, None));
            if let Value::Object(o) = &mut value {
                for key in ["path", "usage", "messageCountIsEstimate", "firstMessage"] {
                    o.remove(key);
                }
                o.insert(
                    "title".into(),
                    title(info.title.as_deref(), info.first_prompt()).into(),
                );
                o.insert(
                    "resume".into(),
                    resume_command(store, &info.id, &info.cwd).into(),
                );
            }
            value
        })
        .collect();
    let shown = sessions.len();
    Ok(json!({
        "sessions": sessions,
        "total": in_range.len(),
        "more": page_note(p.offset, shown, Some(in_range.len()), false),
    }))
}

/// The session's branches: each end of a branch (an entry without children), newest
/// first, with where it leaves the path to the current leaf and how long it is.
pub fn session_tree(store: &StoreArgs, p: SessionTree) -> Answer {
    let limit = params::limit(p.limit).map_err(ToolError::Invalid)?;
    let path = session_file(store, &p.session)?;
    let loaded = load(&path)?;
    let session = &loaded.session;
    let rows = tree_rows(session, None);
    let on_leaf_path = leaf_path(&rows);
    let mut ends: Vec<usize> = (0..rows.len()).filter(|&r| rows[r].is_branch_end).collect();
    let time = |r: usize| {
        session
            .record(rows[r].index)
            .timestamp()
            .and_then(parse_iso_millis)
    };
    ends.sort_by_key(|&r| std::cmp::Reverse((rows[r].is_leaf, time(r), r)));
    let total = ends.len();
    let branches: Vec<Value> = ends
        .iter()
        .take(limit)
        .map(|&r| branch(session, &rows, &on_leaf_path, r))
        .collect();
    let header = session.header();
    let cwd = header.cwd().unwrap_or_default();
    let id = header.id().unwrap_or_default();
    Ok(json!({
        "session": id,
        "title": title(header.title(), None),
        "cwd": cwd,
        "entries": rows.len(),
        "leaf": rows.iter().find(|r| r.is_leaf).map(|r| entry_id(session, r)),
        "branches": branches,
        "total": total,
        "more": page_note(0, branches.len(), Some(total), false),
        "resume": resume_command(store, id, cwd),
    }))
}

/// One branch end: its entry, what it says, how many entries lead to it, and the entry
/// where it leaves the path to the current leaf (`null` when it is on it).
fn branch(session: &Session, rows: &[TreeRow], on_leaf_path: &[bool], end: usize) -> Value {
    let mut length = 0;
    let mut at = Some(end);
    let mut fork = None;
    while let Some(r) = at {
        if on_leaf_path[r] && fork.is_none() && r != end {
            fork = Some(r);
        }
        length += 1;
        at = rows[r].parent;
    }
    let row = &rows[end];
    json!({
        "entry": entry_id(session, row),
        "isLeaf": row.is_leaf,
        "time": session.record(row.index).timestamp(),
        "entries": length,
        "branchesFrom": if on_leaf_path[end] { None } else { fork.map(|r| entry_id(session, &rows[r])) },
        "says": row.text,
    })
}

/// Which rows are on the path from a root to the current leaf.
fn leaf_path(rows: &[TreeRow]) -> Vec<bool> {
    let mut on = vec![false; rows.len()];
    let mut at = rows.iter().position(|r| r.is_leaf);
    while let Some(r) = at.filter(|&r| !on[r]) {
        on[r] = true;
        at = rows[r].parent;
    }
    on
}

fn entry_id(session: &Session, row: &TreeRow) -> Option<String> {
    session.record(row.index).id().map(str::to_owned)
}

/// The file of the store's session `id` (or unique id prefix): never a path the caller
/// names, only a session of the store.
pub fn session_file(store: &StoreArgs, id: &str) -> Result<PathBuf, ToolError> {
    if id.is_empty() {
        return Err(ToolError::invalid(
            "session: give a session id or a prefix of one",
        ));
    }
    store
        .session_by_id(id)
        .map_err(|e| ToolError::Invalid(crate::cli::output::error_line(&e)))
}

/// The session at `path`, loaded leniently (lines that are not JSON are skipped), migrated
/// in memory and never written.
pub fn load(path: &Path) -> Result<LoadedSession, ToolError> {
    gjcfs_engine::load_session(path)
        .map_err(|e| ToolError::Failed(format!("{}: {e}", path.display())))
}
