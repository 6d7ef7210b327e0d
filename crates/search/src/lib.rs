//! Full-text search over every session of a store: a cache of the replayed records' text
//! in SQLite FTS5, kept up to date with the session files.
//!
//! What is indexed: one document per replayed record that holds text ([`text`]: user,
//! assistant and thinking text, tool calls and results, custom messages, compaction and
//! branch summaries, labels) and one per session title — what `gjcfs entries` holds after
//! patch replay, never a superseded line. Each document keeps its session, entry id, type
//! and kind (message role), time, workspace (the header's `cwd`) and whether it is on the
//! path from the root to the leaf. Beside the text, the files each record read or changed
//! ([`touches`]: the `read`, `edit` and `write` tool calls of assistant messages, the file
//! lists of compactions and branch summaries), which [`SearchIndex::files_touched`] answers
//! for a path or a directory: which sessions touched this file; and
//! [`SearchIndex::touched_names`], the names the touched paths hold under a directory (the
//! tree of the touched files, which the mount's `files/` shows).
//!
//! Storage (one SQLite file, [`FORMAT`] in `PRAGMA user_version`, [`APPLICATION_ID`] in
//! `PRAGMA application_id`):
//! - `files`: one row per session file — its path, what tells whether it changed (device,
//!   inode, length, modification and change times) and which bytes were indexed (a
//!   [`ReadMark`]), the session's id, cwd, title, leaf and first prompt (as far as a title
//!   shows it: [`PROMPT_CHARS`]);
//! - `docs`: one row per entry (and title), its text included where it has some (from 64
//!   bytes on compressed: `stored_text.rs`), its kind only where that is not its type;
//!   Documents are numbered in the order they were written: a first build writes the
//!   sessions oldest first (by modification time), and later updates come after, so the
//!   highest numbers are the newest — the window a common query is ranked over ([`rank`]);
//! - `touches`: one row per file an entry touched ([`touches`]), by its document: the
//!   action (`read`, `changed`), the tool or record type, the path as written and resolved
//!   against the session's cwd (lexically, never opened), indexed by the resolved path, so
//!   that a file or a directory's range of paths is looked up, not scanned. It is written
//!   and deleted with its document, in the same transaction: a file read whole has its
//!   rows replaced, an appended entry adds its own, an entry patch replaces those of the
//!   message it edits, and a removed file loses them; the entry's time and whether it is
//!   on the leaf path are its document's;
//! - `words`: FTS5 over each document's words ([`words`]: the lower-cased text split into
//!   runs of letters and digits, given space-separated to the `ascii` tokenizer, so the
//!   index and every query split text by one definition; words and phrases). It is
//!   contentless: the text is held once, in `docs`, and a row is deleted by giving its
//!   words again;
//! - `terms`: every word `words` was given, once, and `term_grams`, each word's distinct
//!   trigrams: the vocabulary a substring query finds its candidate words in
//!   ([`substring`]). A word is added in the transaction of the first document that holds
//!   it, and dropped in the one that deletes the last;
//! - `meta`: `files_gen`, which every transaction that may change `files` increments
//!   first; `listing`: what the last update saw of the store's directories (`listing.rs`),
//!   with the `files_gen` it agrees with.
//!
//! Invariants:
//! - A document deleted (its file removed or read again) is erased from the file's bytes
//!   where its rows live: both FTS5 tables have the `secure-delete` option, every
//!   connection `PRAGMA secure_delete`, the vocabulary loses the words no document holds,
//!   and after an operation that deleted text the write-ahead log is checkpointed and
//!   truncated (`update::scrub_log`; when readers or a writer keep it, the next
//!   operation does). Copies SQLite's page rebuilds left in a page's unused space are not
//!   reached (README, "A deleted session's text is erased from the index").
//! - The index is a cache: a missing file, a file of another format or application, or one
//!   that is not a readable SQLite database is replaced by a new empty index on open;
//!   nothing in it is trusted before those checks.
//! - After [`SearchIndex::update`], the index holds exactly the documents (and touches) a
//!   full read of each file would give (`prepare.rs`), for every file of the store, and
//!   none of a file no longer in it. A file whose device, inode, length and both times are
//!   those indexed is not read. A file that only grew — same identity, longer, the same
//!   last bytes before where indexing stopped — has its complete new lines read and
//!   replayed on top of what is indexed (`update.rs`); anything else is read again whole.
//! - Telling whether anything changed ([`SearchIndex::update_dirs`]) costs a `stat` of each
//!   file, on several threads, compared in order with the listing (`listing.rs`) the last
//!   update recorded: each directory's settled version and its files' names and stats. A
//!   directory whose version is the one recorded is not listed again; any other is. A
//!   listing counts only while its `files_gen` is that of `meta`, so one that counts
//!   agrees with the index; an update that changed stats alone writes them into it, one
//!   that changed more records it anew, and neither records one when another connection
//!   changed the index meanwhile. When anything differs, the stamps (path, device, inode,
//!   length, both times) of `files` are read from one covering index and compared;
//!   the rest of a file's row is read only when it changed.
//! - [`SearchIndex::search_dirs`] (and [`SearchIndex::files_touched_dirs`]) runs the
//!   search during that check and keeps its answer only when nothing changed.
//! - [`SearchIndex::search`] (and [`SearchIndex::files_touched`]) checks the file of
//!   every hit it returns; a file that changed since it was indexed is brought up to date
//!   and the search run again, so no hit comes from a file as it was (`answer.rs`).
//! - Each update of a file is one SQLite transaction: another reader sees a file before or
//!   after it, never half indexed. Several processes may share one index (WAL mode, a busy
//!   timeout); within a process a [`SearchIndex`] is `Sync`, one lock serialising its calls.

// A library never prints: it returns errors and reports progress; the programs decide.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

mod ahead;
mod answer;
mod append;
mod by_bm25;
mod claim;
mod doc_rows;
mod error;
mod file_rows;
mod filters;
mod in_window;
mod index;
mod index_file;
mod index_id;
mod instances;
mod json;
mod listing;
mod lock_wait;
mod matches;
mod occurrences;
mod prepare;
pub mod query;
pub mod rank;
mod run;
mod saved_listing;
mod scan;
mod schema;
pub mod snippet;
mod stamps;
mod store;
mod stored_text;
pub mod substring;
pub mod text;
mod touch_rows;
mod touched;
mod touched_names;
pub mod touches;
mod trust;
mod update;
mod watch;
pub mod words;

pub use error::SearchError;
pub use filters::{Filters, Role};
pub use index::{
    index_exists, remove_index, Change, Hit, Progress, SearchIndex, SessionChange, UpdateReport,
};
pub use index_file::{default_index_dir, INDEX_FILE};
pub use json::{hit_json, touch_json};
pub use prepare::PROMPT_CHARS;
pub use query::{Query, QueryError};
pub use schema::{APPLICATION_ID, BUSY_TIMEOUT, FORMAT};
pub use snippet::Snippet;
pub use store::Store;
pub use touched::{FileTouch, TouchFilters, Touches};
pub use touches::Action;
pub use watch::Watching;

use index::{distinct, FileState, Inner, Source};
use stamps::{Stamp, Stamps};

#[cfg(test)]
// The test makes its store with the standard library (files, a directory's time), not through
// the code under test.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod tests;

#[cfg(test)]
// As `tests`: the sessions are written with the standard library.
#[allow(clippy::disallowed_methods, clippy::disallowed_types)]
mod touch_tests;
