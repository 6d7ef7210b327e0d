//! Stores in memory ([`MemoryStorage`]) for the tests that fail or crash their storage.

use std::path::{Path, PathBuf};

use gjcfs::engine::storage::{MemoryStorage, SessionStorage};
use gjcfs::engine::store::scope::{binding_bytes, scope_dir_name, Identity, BINDING_FILE};

pub use super::vfs_io::{config, SESSIONS_ROOT};

/// A managed transcript holding a question (`q0`) and its answer (`a0`), in the bound scope
/// of the workspace `/w`.
pub fn managed_transcript(storage: &MemoryStorage) -> PathBuf {
    let identity = Identity {
        platform: "posix",
        canonical_path: "/w".into(),
    };
    let scope = Path::new(SESSIONS_ROOT).join(scope_dir_name(&identity));
    storage.ensure_dir(&scope).unwrap();
    storage.put_file(&scope.join(BINDING_FILE), &binding_bytes(&identity));
    let path = scope.join("2026-01-01T00-00-00-000Z_s.jsonl");
    let text = crate::common::SessionText::new()
        .message("q0", None, "user", "q")
        .message("a0", Some("q0"), "assistant", "a")
        .text();
    storage.put_file(&path, text.as_bytes());
    path
}
