//! Checking a store for the damage a long life leaves, and repairing what is safe to
//! repair (`gjcfs check [--repair]`, the mount's `check` file).
//!
//! [`check_store`] reads the store — it never writes — and reports each finding with its
//! file, what it means and how bad it is ([`Severity`]):
//! - transcripts: a torn last line, malformed lines, records and bytes the strict checks
//!   refuse (each named by its line), a file that is not a session, a version newer than
//!   5, entries whose parent is not in the session, references to blobs the blob store
//!   lacks or holds damaged; in a managed scope also a mode wider than `0600`, another
//!   owner, more than one link, an ACL;
//! - the store's own directories (agent directory, sessions root, session directory) that
//!   other users can write;
//! - managed scopes: the binding (missing, damaged, naming another directory), the scope's
//!   mode and owner, migration locks a crash left, files that are not sessions;
//! - leftovers of interrupted full rewrites: temp files and backups;
//! - legacy directories: each legacy session with or without its managed copy (notes);
//! - the blob store: blobs whose bytes do not match their name, blobs no session
//!   references, temp files of interrupted writes, modes;
//! - the prompt history database and its companions: a mode that lets group or others read
//!   or write it (never repaired: the agent made it);
//! - earlier repairs that did not finish: a repair directory whose manifest is not marked
//!   complete, with the changes it began and did not confirm.
//!
//! [`repair`] fixes only what is safe ([`Repair`]): it cuts a torn last line the rules of
//! [`crate::manager::cut_torn_tail`] allow, moves away a temp file no process writes (a
//! rewrite's only when its session is intact), puts back a backup whose session is
//! missing (only when asked: [`RepairOptions::restore_deleted`]), restores owner-only modes, and moves away a migration lock a crash left. Before
//! a file's bytes change a copy of the whole file is kept, and what is removed is moved,
//! not deleted, into one directory per repair ([`repairs_dir`]) with a manifest that
//! records each change, durably, before it is made, and marks it done after. It never
//! deletes or rewrites a session, never touches a legacy directory, and checks each
//! precondition again right before it acts. It acts only where no other user can change
//! the directories on the way from the store's base (module `safe_dirs`), so nothing outside the
//! store is ever changed, and restores a mode only on the entry the check found. Everything else is left for a
//! person, and the report says what to do.

mod blobs;
mod journal;
mod kept;
mod privacy;
mod repair;
mod report;
mod safe_dirs;
mod store;
mod strict;

use std::path::PathBuf;

use crate::storage::Expected;

pub use journal::MANIFEST_NAME;
pub use kept::{kept_runs, prune, KeptRun, Pruned, KEEP_BYTES, KEEP_RUNS};
pub use repair::{repair, repairs_dir, RepairOptions, RepairOutcome, Repaired, REPAIRS_DIR_NAME};
pub use store::check_store;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Nothing is wrong; worth knowing.
    Note,
    /// Nothing of a session is at risk, but something is left over or looser than it
    /// should be.
    Warning,
    /// A session, or what the store holds for it, is damaged.
    Error,
}

impl Severity {
    /// The severity's lower-case name as reports show it: `note`, `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// What [`repair`] would do about a finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repair {
    /// Cut off the torn last line (`len` bytes from `offset`), keeping a copy of the file.
    CutTornTail {
        /// Where the torn line starts, in bytes from the start of the file.
        offset: u64,
        /// How long the torn line is, in bytes (up to the end of the file).
        len: u64,
    },
    /// Move the leftover file into the repair directory.
    MoveAway,
    /// Rename the backup to the session file it is of, which is missing.
    RestoreBackup {
        /// The missing session file's path, which the backup is renamed to.
        to: PathBuf,
    },
    /// Set the permission bits from `from` to `to`.
    RestoreMode {
        /// The permission bits the check found (e.g. `0o644`).
        from: u32,
        /// The permission bits to set: `0o600` for a file, `0o700` for a directory, or the
        /// found bits without group and other write for a store directory.
        to: u32,
        /// The entry the check found (its kind, identity, owner and `from`): the repair is
        /// left when what is at the path now is not that entry, or a file with other links.
        found: Expected,
    },
}

impl Repair {
    /// What the repair does, in a few words.
    pub fn describe(&self) -> String {
        match self {
            Repair::CutTornTail { offset, len } => {
                format!("cut off the {len} bytes from byte {offset}, keeping a copy of the file")
            }
            Repair::MoveAway => "move it into the repair directory".to_owned(),
            Repair::RestoreBackup { to } => format!("rename it back to {}", to.display()),
            Repair::RestoreMode { from, to, .. } => {
                format!("set its mode from {from:o} to {to:o}")
            }
        }
    }
}

/// One thing found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// A stable name of the kind of finding (`torn_tail`, `orphaned_temp`, …).
    pub kind: &'static str,
    /// The file or directory the finding is about (a transcript, a temp file, a backup, a
    /// scope, a blob, …); the one [`Finding::repair`] acts on.
    pub path: PathBuf,
    /// What it means, and for what is left for a person, what to do.
    pub what: String,
    /// What `--repair` does about it; `None`: left for a person.
    pub repair: Option<Repair>,
}

/// What [`check_store`] looks at.
#[derive(Debug, Clone)]
pub struct CheckTarget {
    /// The agent's sessions root, every directory of which is checked.
    pub sessions_root: Option<PathBuf>,
    /// One directory of sessions (instead of, or besides, the sessions root).
    pub session_dir: Option<PathBuf>,
    /// The blob store.
    pub blob_dir: PathBuf,
    /// The prompt history database, whose mode is checked (`wide_history`). `None`: not
    /// looked at.
    pub history_db: Option<PathBuf>,
    /// The directory whose `gjcfs-repairs/` holds the repair directories of earlier runs
    /// (the `base` of [`repair`] and [`repairs_dir`]): each run there that did not finish is
    /// reported (`unfinished_repair`). `None`: not looked at.
    pub repair_base: Option<PathBuf>,
}

/// What [`check_store`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Everything found, in the order it was found.
    pub findings: Vec<Finding>,
    /// How many session files were read.
    pub sessions: usize,
    /// How many blobs were read.
    pub blobs: usize,
}

impl Report {
    /// The worst severity found, `None` when nothing was.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    fn add(
        &mut self,
        severity: Severity,
        kind: &'static str,
        path: impl Into<PathBuf>,
        what: String,
        repair: Option<Repair>,
    ) {
        self.findings.push(Finding {
            severity,
            kind,
            path: path.into(),
            what,
            repair,
        });
    }
}

/// How far a check is, for a progress line.
#[derive(Debug, Clone, Copy)]
pub struct CheckProgress {
    /// How many transcripts have been checked so far.
    pub files_done: usize,
    /// How many transcripts the check reads in all.
    pub files_total: usize,
}
