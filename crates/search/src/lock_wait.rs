//! How long one operation on the index may wait, in all, for the write lock another
//! connection holds (a watcher indexing a large session, a flood of appends, a process
//! stopped in the middle of a transaction): [`BUSY_TIMEOUT`] over every transaction it
//! begins, not for each. Past it the operation's next transaction fails as busy at once,
//! and a search answers from what the index holds and says so
//! ([`super::UpdateReport::busy`]).
//!
//! Each transaction takes the write lock with its first statement (SQLite's busy handler
//! retries for at most what is left), so an operation that begins many — one file at a
//! time, a removal after another — can never add their waits up.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rusqlite::{ffi, Connection};

use super::schema::BUSY_TIMEOUT;

/// What one operation has left to wait for the write lock.
#[derive(Debug)]
pub(crate) struct LockWait {
    left: Cell<Duration>,
}

impl LockWait {
    pub(crate) fn new() -> LockWait {
        LockWait {
            left: Cell::new(BUSY_TIMEOUT),
        }
    }

    /// A new operation starts: [`BUSY_TIMEOUT`] left again.
    pub(crate) fn restart(&self) {
        self.left.set(BUSY_TIMEOUT);
    }

    /// Runs `take`, the statement that takes the write lock on `conn`, waiting for the lock
    /// at most what is left (nothing left: a busy error at once), and counts the wait.
    pub(crate) fn waiting<T>(
        &self,
        conn: &Connection,
        take: impl FnOnce() -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let left = self.left.get();
        if left.is_zero() {
            return Err(rusqlite::Error::SqliteFailure(
                ffi::Error::new(ffi::SQLITE_BUSY),
                Some("the index's write lock stayed taken for the operation's whole wait".into()),
            ));
        }
        conn.busy_timeout(left)?;
        let started = Instant::now();
        let result = take();
        self.left.set(left.saturating_sub(started.elapsed()));
        conn.busy_timeout(BUSY_TIMEOUT)?;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_add_up_to_the_busy_timeout_and_then_fail_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let holder = Connection::open(&path).unwrap();
        holder
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x); BEGIN IMMEDIATE")
            .unwrap();
        let conn = Connection::open(&path).unwrap();
        let wait = LockWait::new();
        wait.left.set(Duration::from_millis(300));
        let write = || conn.execute("INSERT INTO t VALUES (1)", []);
        let started = Instant::now();
        let first = wait.waiting(&conn, write).unwrap_err();
        assert!(crate::index_file::is_busy(&first), "{first}");
        assert!(started.elapsed() >= Duration::from_millis(250));
        let again = Instant::now();
        let second = wait.waiting(&conn, write).unwrap_err();
        assert!(crate::index_file::is_busy(&second), "{second}");
        assert!(
            again.elapsed() < Duration::from_millis(100),
            "nothing left to wait"
        );
        holder.execute_batch("ROLLBACK").unwrap();
        wait.restart();
        assert_eq!(wait.waiting(&conn, write).unwrap(), 1);
    }
}
