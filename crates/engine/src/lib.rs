//! The session storage engine: the JSONL format, patch replay, migrations, the entry tree and
//! context reconstruction. The format itself is described in `docs/FORMAT.md`.
//!
//! The modules are folders in layers, bottom up: [`storage`] (the seam all file I/O goes
//! through), [`format`](mod@format) (records, lines, migrations, blobs), [`session`] (the tree and the
//! context), [`read`] (lenient loading and strict inspection), [`store`] and [`history`]
//! (the agent's directories and prompt history), [`manager`] and [`check`] (writing and
//! checking), [`views`] (renderings). The order is stated in `docs/ARCHITECTURE.md`
//! ("Inside the engine") and checked by the tests.
//!
//! Most callers need only what the crate's root re-exports: [`SessionManager`] to read and
//! write one session, [`load_session`] to read one leniently, [`Session`] and
//! [`SessionContext`], the storage backends ([`FileStorage`], [`MemoryStorage`]) and
//! [`StorageConfig`], the prompt history ([`HistoryStorage`]) and the agent's directories
//! ([`AgentDirs`]).
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
// Every public item says what it is: the crate is the API of the layers above it.
#![deny(missing_docs)]

// `clippy.toml` forbids direct file I/O outside the storage seam (`storage`).
pub mod check;
pub mod format;
pub mod history;
pub mod manager;
pub mod read;
pub mod redact;
pub mod session;
pub mod storage;
pub mod store;
pub mod views;

pub use gjcfs_json as json;
pub use storage::io_cause;

pub use format::record::{Header, Record, RecordType};
pub use history::{HistoryEntry, HistoryError, HistoryStorage};
pub use manager::{
    PersistError, ReadRules, SessionError, SessionManager, SessionResult, StorageConfig,
};
pub use read::load::{load_entries_from_file, load_session, LoadError, LoadStatus, LoadedSession};
pub use session::context::SessionContext;
pub use session::tree::{EntryNotFound, Session, Tree};
pub use storage::{FileStorage, FileVersion, MemoryStorage, SessionStorage};
pub use store::agent_dir::{AgentDirError, AgentDirs};
