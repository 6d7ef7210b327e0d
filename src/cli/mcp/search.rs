//! `search_sessions` and `files_touched`: `gjcfs search` and `gjcfs files` for a model.

use std::path::PathBuf;

use gjcfs_search::{FileTouch, Hit, Role};
use serde_json::{json, Map, Value};

use super::answer::{from_engine, page_note, range, title, Answer, ToolError};
use super::params::{self, FilesTouched, SearchSessions};
use super::resume::resume_command;
use crate::cli::files::{self, FilesRequest};
use crate::cli::search::{find, SearchRequest};
use crate::cli::store::StoreArgs;

/// The hits of the query, best first, one page of them, with the sessions they are in and
/// the command that resumes each.
pub fn search_sessions(store: &StoreArgs, p: SearchSessions) -> Answer {
    let limit = params::limit(p.limit).map_err(ToolError::Invalid)?;
    let role = match p.role.as_deref() {
        None => None,
        Some("user") => Some(Role::User),
        Some("assistant") => Some(Role::Assistant),
        Some("tool") => Some(Role::Tool),
        Some(other) => {
            return Err(ToolError::invalid(format!(
                "role {other:?}: expected \"user\", \"assistant\" or \"tool\""
            )))
        }
    };
    let request = SearchRequest {
        query: p.query.clone(),
        substring: p.substring,
        cwd: p.cwd.map(PathBuf::from),
        all: p.all,
        range: range(p.since.as_deref(), p.until.as_deref())?,
        role,
        session: None,
        // One more than the page: whether there are more.
        limit: p.offset.saturating_add(limit).saturating_add(1),
        index: None,
    };
    let found = find(&request, store, &|_| {})?;
    let more = found.hits.len() > p.offset + limit;
    let hits: Vec<&Hit> = found.hits.iter().skip(p.offset).take(limit).collect();
    let mut sessions = Map::new();
    for hit in &hits {
        sessions.entry(hit.session_id.clone()).or_insert_with(|| {
            json!({
                "title": title(hit.title.as_deref(), hit.first_prompt.as_deref()),
                "cwd": hit.cwd,
                "resume": resume_command(store, &hit.session_id, &hit.cwd),
            })
        });
    }
    let hits: Vec<Value> = hits.iter().map(|hit| hit_answer(hit)).collect();
    let note = if hits.is_empty() {
        Value::String(match &found.workspace {
            Some(ws) => format!(
                "no hits in the sessions of workspace {ws}; all=true searches every workspace"
            ),
            None => "no hits in the store".to_owned(),
        })
    } else {
        page_note(p.offset, hits.len(), None, more)
    };
    Ok(json!({
        "query": p.query,
        "workspace": found.workspace,
        "hits": hits,
        "sessions": sessions,
        "more": note,
    }))
}

/// A hit as `gjcfs search --json` gives it, less what a model has no use for (the file's
/// path, the score, the highlights' offsets).
fn hit_answer(hit: &Hit) -> Value {
    let mut value = from_engine(&gjcfs_search::hit_json(hit));
    if let Value::Object(o) = &mut value {
        for key in ["path", "score", "highlights", "title", "cwd"] {
            o.remove(key);
        }
    }
    value
}

/// The touches of a file or of the files under a directory, newest first, one page of
/// them, with the sessions they are in and the command that resumes each.
pub fn files_touched(store: &StoreArgs, p: FilesTouched) -> Answer {
    let limit = params::limit(p.limit).map_err(ToolError::Invalid)?;
    if p.path.is_empty() {
        return Err(ToolError::invalid("path: give a file or a directory"));
    }
    let request = FilesRequest {
        path: PathBuf::from(&p.path),
        cwd: p.cwd.map(PathBuf::from),
        all: p.all,
        range: range(p.since.as_deref(), p.until.as_deref())?,
        limit: p.offset.saturating_add(limit),
        index: None,
    };
    let found = files::find(&request, store)?;
    let touches: Vec<&FileTouch> = found.touches.touches.iter().skip(p.offset).collect();
    let mut sessions = Map::new();
    for touch in &touches {
        sessions.entry(touch.session_id.clone()).or_insert_with(|| {
            json!({
                "title": title(touch.title.as_deref(), touch.first_prompt.as_deref()),
                "cwd": touch.cwd,
                "resume": resume_command(store, &touch.session_id, &touch.cwd),
            })
        });
    }
    let total = found.touches.total;
    let note = if total == 0 {
        Value::String(match &found.workspace {
            Some(ws) => format!(
                "no session of workspace {ws} read or changed {}; all=true looks in every \
                 workspace",
                found.path
            ),
            None => format!("no session of the store read or changed {}", found.path),
        })
    } else {
        page_note(p.offset, touches.len(), Some(total), false)
    };
    let touches: Vec<Value> = touches
        .iter()
        .map(|touch| {
            let mut value = from_engine(&gjcfs_search::touch_json(touch));
            if let Value::Object(o) = &mut value {
                for key in ["path", "title", "firstPrompt", "cwd"] {
                    o.remove(key);
                }
            }
            value
        })
        .collect();
    Ok(json!({
        "path": found.path,
        "workspace": found.workspace,
        "touches": touches,
        "sessions": sessions,
        "total": total,
        "more": note,
    }))
}
