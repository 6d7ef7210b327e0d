//! Moving a session to another directory, forking it, and branching a new session off it.

use std::path::{Path, PathBuf};

use crate::format::ids;
use crate::format::migrate::{migrate, CURRENT_SESSION_VERSION};
use crate::format::record::{Record, RecordType};
use crate::format::time;
use crate::json::{Object, Value};
use crate::read::load::{load_entries_from_storage, LoadStatus};
use crate::session::tree::Session;

use super::appends::members;
use super::{
    build_entry, new_header, session_file_name, Base, PersistError, SessionError, SessionManager,
    SessionResult, State, StorageConfig,
};

impl SessionManager {
    /// `moveTo`: moves the session file into `dest_dir` (same name, never replacing a file
    /// there) and records `new_cwd` with a `header_patch`; if the file existed or the session
    /// has an assistant message, a full rewrite then folds the new cwd into the header. A move
    /// to the current cwd does nothing.
    pub fn move_to(&self, new_cwd: &str, dest_dir: &Path) -> SessionResult<()> {
        let mut state = self.state.lock();
        state.check_writable()?;
        if state.cwd == new_cwd {
            return Ok(());
        }
        let old = state.file.clone();
        let new = old
            .as_ref()
            .and_then(|f| f.file_name())
            .map(|name| dest_dir.join(name));
        let existed = old.as_deref().is_some_and(|f| state.storage().exists(f));
        if let (Some(old), Some(new)) = (&old, &new) {
            if existed {
                if state.storage().exists(new) {
                    return Err(SessionError::AlreadyExists { path: new.clone() });
                }
                state.close_writer();
                let moved = state
                    .storage()
                    .ensure_dir(dest_dir)
                    .and_then(|()| state.storage().rename(old, new));
                if let Err(e) = moved {
                    return Err(PersistError::new(old, e).into());
                }
            }
        }
        state.file = new;
        state.session_dir = Some(dest_dir.to_owned());
        state.cwd = new_cwd.to_owned();
        state
            .session
            .header_mut()
            .insert("cwd", Value::string(new_cwd));
        if existed || state.has_assistant {
            state.full_rewrite()?;
        }
        Ok(())
    }

    /// `fork`: copies the session to a new file (same directory) whose `parentSession` is this
    /// session's id, and switches to it. Returns `(old file, new file)`.
    pub fn fork(&self) -> SessionResult<(PathBuf, PathBuf)> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let old = state
            .file
            .clone()
            .filter(|_| state.persist)
            .ok_or(SessionError::NoFile)?;
        let old_header = state.session.header();
        let old_id = old_header.id().unwrap_or_default().to_owned();
        let mut h = Object::with_capacity(8);
        h.insert("type", Value::string("session"));
        h.insert("version", Value::number(CURRENT_SESSION_VERSION as f64));
        h.insert("id", Value::string(ids::new_session_id()));
        if let Some(title) = old_header.title() {
            h.insert("title", Value::string(title));
        }
        if let Some(source) = old_header.title_source() {
            h.insert("titleSource", Value::string(source));
        }
        h.insert("timestamp", Value::string(time::now_iso()));
        h.insert("cwd", Value::string(state.cwd.as_str()));
        h.insert("parentSession", Value::string(old_id));
        let header = Record::new(h);
        let new = old.with_file_name(session_file_name(&header));
        let mut records = vec![header];
        records.extend(state.session.entries().cloned());
        state.publish_new(Session::from_records(records), &new)?;
        Ok((old, new))
    }

    /// `createBranchedSession`: a new session holding the path to `leaf_id` (labels
    /// recreated after it), written at once; the manager switches to it. `parentSession` is
    /// the old file's path. Returns the new file (none in memory).
    pub fn create_branched_session(&self, leaf_id: &str) -> SessionResult<Option<PathBuf>> {
        let mut state = self.state.lock();
        state.check_writable()?;
        let path: Vec<Record> = state
            .session
            .branch_path(Some(leaf_id))?
            .into_iter()
            .filter(|r| r.record_type() != RecordType::Label)
            .cloned()
            .collect();
        let old_file = state.file.clone().filter(|_| state.persist);
        let parent = old_file.as_ref().map(|f| f.to_string_lossy().into_owned());
        let header = new_header(
            &ids::new_session_id(),
            &state.cwd.clone(),
            parent.as_deref(),
        );
        let mut records = vec![header];
        let mut on_path: Vec<String> = Vec::new();
        for record in &path {
            if let Some(id) = record.id() {
                on_path.push(id.to_owned());
            }
        }
        records.extend(path);
        let mut parent_id = on_path.last().cloned();
        let now = time::now_iso();
        for target in &on_path {
            let Some(label) = state.session.label(target).map(str::to_owned) else {
                continue;
            };
            let id = ids::new_entry_id(|c| {
                on_path.iter().any(|p| p == c) || records.iter().any(|r| r.id() == Some(c))
            });
            let fields = members([
                ("targetId", Some(Value::string(target.as_str()))),
                ("label", Some(Value::string(label))),
            ]);
            let base = Base {
                id: &id,
                parent_id: parent_id.as_deref(),
                timestamp: &now,
            };
            records.push(build_entry("label", &fields, &base));
            parent_id = Some(id);
        }
        let session = Session::from_records(records);
        match (&old_file, &state.session_dir) {
            (Some(_), Some(dir)) => {
                let new = dir.join(session_file_name(&session.records()[0]));
                state.publish_new(session, &new)?;
                Ok(Some(new))
            }
            _ => {
                state.adopt(session, None, false);
                Ok(None)
            }
        }
    }

    /// `forkFrom`: a new session in `dest_dir` holding every entry of the session file at
    /// `source` (loaded leniently and migrated), with `parentSession` = the source's id;
    /// written at once.
    pub fn fork_from(
        source: &Path,
        cwd: &str,
        dest_dir: &Path,
        config: StorageConfig,
    ) -> SessionResult<Self> {
        let loaded = load_entries_from_storage(config.storage.as_ref(), source)?;
        if loaded.status != LoadStatus::Loaded {
            return Err(crate::read::load::LoadError::NotASession {
                path: source.into(),
            }
            .into());
        }
        let mut records = loaded.records;
        migrate(&mut records);
        let not_a_session = || crate::read::load::LoadError::NotASession {
            path: source.into(),
        };
        let source_header = records[0].as_header().ok_or_else(not_a_session)?;
        let (source_id, title, title_source) = (
            source_header.id().unwrap_or_default().to_owned(),
            source_header.title().map(str::to_owned),
            source_header.title_source().map(str::to_owned),
        );
        let mut header = new_header(&ids::new_session_id(), cwd, Some(&source_id)).into_fields();
        if let Some(title) = title {
            header.insert("title", Value::string(title));
        }
        if let Some(source) = title_source {
            header.insert("titleSource", Value::string(source));
        }
        let header = Record::new(header);
        let file = dest_dir.join(session_file_name(&header));
        records[0] = header;
        let mut state = State::fresh(config, cwd, Some(dest_dir.to_owned()), true);
        state.adopt(Session::from_records(records), Some(file), false);
        state.full_rewrite()?;
        Ok(Self::from_state(state))
    }
}

impl State {
    /// Writes `session` to a new file at `path` (never replacing one) and switches to it.
    fn publish_new(&mut self, session: Session, path: &Path) -> SessionResult<()> {
        if self.storage().exists(path) {
            return Err(SessionError::AlreadyExists {
                path: path.to_owned(),
            });
        }
        self.adopt(session, Some(path.to_owned()), false);
        self.full_rewrite()?;
        Ok(())
    }
}
