//! Leaf moves that last: a `custom` record the agent's context builder ignores.
//!
//! The agent resumes a session at its file's last entry. To move the leaf of a session on
//! disk — so that the agent, a second mount and every later load find it there — a record
//! `{"type":"custom","customType":"gjcfs.leaf","data":{"target":<id>}}` is appended as a
//! child of the chosen entry. It becomes the last entry, so the leaf after every load sits
//! on the chosen branch, and since `custom` records add nothing to a context, the context
//! there is the context at the chosen entry. A reset (the next entry starts a new root) is
//! recorded the same way, as a marker without a parent (`"target":null`): the context
//! there is empty, as after a reset.

use crate::format::record::RecordType;
use crate::json::{Object, Value};
use crate::manager::{SessionManager, SessionResult};
use crate::session::tree::Session;

/// The `customType` of a leaf marker.
pub const LEAF_MARKER_TYPE: &str = "gjcfs.leaf";

/// Moves the leaf of `manager`'s session to entry `target` (`None`: resets it) and records
/// the move in the file. Nothing is written when the leaf already shows `target`
/// ([`shown_leaf`]). If the record cannot be written the leaf goes back where it was.
pub fn persist_leaf(manager: &SessionManager, target: Option<&str>) -> SessionResult<()> {
    if manager.read(|s| shown_leaf(s) == target) {
        return Ok(());
    }
    let before = manager.leaf_id();
    match target {
        Some(id) => manager.branch(id)?,
        None => manager.reset_leaf(),
    }
    let mut data = Object::with_capacity(1);
    data.insert("target", target.map_or(Value::Null, Value::string));
    match manager.append_custom_entry(LEAF_MARKER_TYPE, Some(Value::Object(data))) {
        Ok(_) => Ok(()),
        Err(e) => {
            match before.as_deref() {
                Some(id) => manager.branch(id)?,
                None => manager.reset_leaf(),
            }
            Err(e)
        }
    }
}

/// Whether the record at `index` is a leaf marker: not an entry a person wrote, but the
/// leaf pointer on its parent. Views show it as that, never as an entry of its own.
pub fn is_marker(session: &Session, index: usize) -> bool {
    let record = session.record(index);
    record.record_type() == RecordType::Custom
        && record.get_str("customType") == Some(LEAF_MARKER_TYPE)
}

/// The entry the leaf stands for: the leaf, or — when the leaf is a marker — the entry
/// the marker was appended to (markers on markers followed down); `None` after a reset.
pub fn shown_leaf(session: &Session) -> Option<&str> {
    let mut index = session.leaf()?;
    while is_marker(session, index) {
        index = session.parent_of(index)?;
    }
    session.record(index).id()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json;

    fn message(role: &str, text: &str) -> Value {
        json::parse(&format!(
            r#"{{"role":"{role}","content":"{text}","provider":"p","model":"m","timestamp":1}}"#
        ))
        .unwrap()
    }

    #[test]
    fn a_persisted_move_is_what_a_reload_finds_and_keeps_the_context() {
        let tmp = tempfile::tempdir().unwrap();
        let m = SessionManager::create(
            "/w",
            tmp.path(),
            crate::manager::StorageConfig::files(tmp.path().join("blobs")),
        );
        let q = m.append_message(message("user", "q")).unwrap();
        m.append_message(message("assistant", "a")).unwrap();
        m.append_message(message("user", "q2")).unwrap();
        let expected = m.read(|s| s.build_context_for(&q).to_value());
        persist_leaf(&m, Some(&q)).unwrap();
        assert_eq!(
            m.read(|s| shown_leaf(s).map(str::to_owned)),
            Some(q.clone())
        );
        let count = m.read(Session::entry_count);
        persist_leaf(&m, Some(&q)).unwrap();
        assert_eq!(m.read(Session::entry_count), count, "no second marker");
        let path = m.session_file().unwrap();
        m.close().unwrap();
        let reloaded = crate::load_session(&path).unwrap().session;
        assert_eq!(shown_leaf(&reloaded), Some(q.as_str()));
        assert_eq!(reloaded.build_context().to_value(), expected);
        assert!(is_marker(&reloaded, reloaded.leaf().unwrap()));

        // A reset is kept too: a marker without a parent, an empty context.
        let m = SessionManager::open(
            &path,
            "/w",
            crate::manager::StorageConfig::files(tmp.path().join("blobs")),
        )
        .unwrap();
        persist_leaf(&m, None).unwrap();
        m.close().unwrap();
        let reloaded = crate::load_session(&path).unwrap().session;
        assert_eq!(shown_leaf(&reloaded), None);
        assert!(reloaded
            .build_context()
            .to_value()
            .as_object()
            .unwrap()
            .get("messages")
            .unwrap()
            .as_array()
            .unwrap()
            .is_empty());
    }
}
