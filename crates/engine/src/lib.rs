//! The session storage engine: the JSONL format, patch replay, migrations, the entry tree and
//! context reconstruction. The format itself is described in `docs/FORMAT.md`.
//!
//! Its modules form layers (storage, the format, the tree, reading a file, the agent's
//! store, writing and checking, renderings), listed in `docs/ARCHITECTURE.md` ("Inside the
//! engine") and checked by the tests. [`load`] and [`inspect`] are the lenient and strict
//! ways in from a file.
//!
//! Storage: [`scope`] is the managed v2 layout, [`legacy`] finds a workspace's sessions in
//! the older encoded directories and migrates them into it (copy-retain).
//!
//! Read-only renderings of a session (context as Markdown, the entry tree, usage) are in
//! [`views`].
//!
//! Beside sessions: [`agent_dir`] says where the agent keeps its files, and [`history`] is
//! the agent's SQLite prompt history.
// A library never prints: it returns errors and emits events; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

// `clippy.toml` forbids direct file I/O outside the storage seam (`storage`).
pub mod agent_dir;
pub mod blob;
pub mod breadcrumb;
pub mod check;
pub mod cold_spill;
pub mod context;
pub mod discovery;
pub mod history;
pub mod ids;
pub mod inspect;
pub use storage::io_cause;
pub mod js_text;
pub use gjcfs_json as json;
pub mod leaf_marker;
pub mod legacy;
pub mod lines;
pub mod load;
pub mod manager;
pub mod migrate;
pub mod persist;
pub mod record;
pub mod replay;
pub mod resume;
pub mod sanitize;
pub mod scope;
pub mod session;
pub mod storage;
pub mod store_usage;
pub mod summary;
pub mod time;
pub mod usage;
pub mod views;

pub use agent_dir::{AgentDirError, AgentDirs};
pub use context::SessionContext;
pub use history::{HistoryEntry, HistoryError, HistoryStorage};
pub use load::{load_entries_from_file, load_session, LoadError, LoadStatus, LoadedSession};
pub use record::{Header, Record, RecordType};
pub use session::{EntryNotFound, Session, Tree};
