//! The lease lock `locks/<op>.lock` that migrations and retirements run under.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::format::time::now_millis;
use crate::json::{self, Value};
use crate::storage::{sys, OpenMode, SessionStorage, StorageWriter};

use super::capture::{capture, sync_dir, Stat};
use super::records::{object, string};
use super::{
    io_err, LegacyError, LOCK_CHECK_INTERVAL, LOCK_HEARTBEAT_MS, LOCK_LEASE_MS, LOCK_POLL,
};

/// What a lock file holds.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LockRecord {
    pub(super) attempt_id: String,
    pub(super) pid: i64,
    pub(super) boot_id: Option<String>,
    pub(super) process_start_id: String,
    pub(super) created_at: i64,
    pub(super) heartbeat_at: i64,
    pub(super) lease_expires_at: i64,
    pub(super) released: bool,
}

impl LockRecord {
    fn bytes(&self) -> Vec<u8> {
        let mut pairs = vec![
            ("attemptId", string(self.attempt_id.clone())),
            ("pid", Value::number(self.pid as f64)),
        ];
        if let Some(boot) = &self.boot_id {
            pairs.push(("bootId", string(boot.clone())));
        }
        pairs.extend([
            ("processStartId", string(self.process_start_id.clone())),
            ("createdAt", Value::number(self.created_at as f64)),
            ("heartbeatAt", Value::number(self.heartbeat_at as f64)),
            (
                "leaseExpiresAt",
                Value::number(self.lease_expires_at as f64),
            ),
        ]);
        if self.released {
            pairs.push(("released", Value::Bool(true)));
        }
        let mut bytes = json::to_compact(&object(pairs)).into_bytes();
        bytes.push(b'\n');
        bytes
    }

    fn parse(bytes: &[u8]) -> Option<Self> {
        let value = json::parse(std::str::from_utf8(bytes).ok()?).ok()?;
        let o = value.as_object()?;
        let int = |key: &str| {
            o.get(key)
                .and_then(Value::as_f64)
                .filter(|n| n.is_finite() && n.fract() == 0.0)
                .map(|n| n as i64)
        };
        Some(LockRecord {
            attempt_id: o.get_str("attemptId")?.to_owned(),
            pid: int("pid")?,
            boot_id: o.get_str("bootId").map(str::to_owned),
            process_start_id: o.get_str("processStartId")?.to_owned(),
            created_at: int("createdAt")?,
            heartbeat_at: int("heartbeatAt")?,
            lease_expires_at: int("leaseExpiresAt")?,
            released: o.get("released").and_then(Value::as_bool) == Some(true),
        })
    }
}

/// The kernel's boot id, where the platform has one.
pub(super) fn boot_id() -> Option<&'static str> {
    static BOOT: OnceLock<Option<String>> = OnceLock::new();
    BOOT.get_or_init(sys::boot_id).as_deref()
}

/// An id of this process that another process with the same pid would not have.
pub fn current_process_start_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        sys::process_start_id(std::process::id() as i64)
            .unwrap_or_else(|| format!("uuid:{}", uuid::Uuid::new_v4()))
    })
}

/// Whether the process that wrote `record` certainly no longer runs.
pub(super) fn owner_gone(record: &LockRecord) -> bool {
    if let (Some(theirs), Some(ours)) = (record.boot_id.as_deref(), boot_id()) {
        if theirs != ours {
            return true;
        }
    }
    let Ok(pid) = i32::try_from(record.pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // pid is positive, so this never addresses a process group.
    if !sys::os::process_exists(pid) {
        return true;
    }
    let actual = if pid as u32 == std::process::id() {
        Some(current_process_start_id().to_owned())
    } else {
        sys::process_start_id(pid as i64)
    };
    actual.is_some_and(|id| id != record.process_start_id)
}

/// Whether the lock at `path` (as `observed`) may be taken over: released, or its lease
/// expired and its holder certainly no longer runs, or unreadable and older than a lease.
fn is_stale(storage: &dyn SessionStorage, path: &Path, observed: &Stat) -> bool {
    match capture(storage, path)
        .ok()
        .and_then(|s| LockRecord::parse(&s.bytes))
    {
        Some(owner) => {
            owner.released || (owner.lease_expires_at < now_millis() && owner_gone(&owner))
        }
        None => {
            let mtime_ms = observed.version.modified_ms();
            mtime_ms + LOCK_LEASE_MS < now_millis()
        }
    }
}

/// What a migration lock file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// A migration under way holds it.
    Held,
    /// Released by the migration that took it: the agent leaves such files behind.
    Released,
    /// Never released, and whoever took it is gone (its lease ran out and its process no
    /// longer runs), or it cannot be read and is older than a lease: a crash left it.
    Stale,
}

/// What the migration lock file at `path` is; `None` when it cannot be looked at. Reads
/// only.
pub fn lock_state(storage: &dyn SessionStorage, path: &Path) -> Option<LockState> {
    let observed = Stat::of(&storage.lstat(path).ok()?);
    let released = capture(storage, path)
        .ok()
        .and_then(|s| LockRecord::parse(&s.bytes))
        .is_some_and(|owner| owner.released);
    Some(match (released, is_stale(storage, path, &observed)) {
        (true, _) => LockState::Released,
        (false, true) => LockState::Stale,
        (false, false) => LockState::Held,
    })
}

/// How many stale locks one acquisition removes before it gives up.
const MAX_RECLAIMS: u32 = 16;

/// A held `locks/<op>.lock`.
#[derive(Debug)]
pub(super) struct MigrationLock<'a> {
    pub(super) storage: &'a dyn SessionStorage,
    pub(super) path: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) file: Box<dyn StorageWriter>,
    pub(super) record: LockRecord,
    pub(super) last_check: Instant,
    pub(super) released: bool,
}

impl<'a> MigrationLock<'a> {
    /// Takes the lock, waiting up to `wait` for a live holder. A lock that was released, or
    /// whose lease expired and whose holder certainly no longer runs (or that cannot be
    /// parsed and is older than a lease), is taken over.
    pub(super) fn acquire(
        storage: &'a dyn SessionStorage,
        dir: &Path,
        op: &str,
        subject: &Path,
        wait: Duration,
    ) -> Result<Self, LegacyError> {
        let path = dir.join(format!("{op}.lock"));
        let deadline = Instant::now() + wait;
        let mut reclaims = 0;
        loop {
            let now = now_millis();
            let record = LockRecord {
                attempt_id: uuid::Uuid::new_v4().to_string(),
                pid: std::process::id() as i64,
                boot_id: boot_id().map(str::to_owned),
                process_start_id: current_process_start_id().to_owned(),
                created_at: now,
                heartbeat_at: now,
                lease_expires_at: now + LOCK_LEASE_MS,
                released: false,
            };
            match storage.open_writer(&path, OpenMode::CreateNew) {
                Ok(mut file) => {
                    if let Err(e) = file.write_all(&record.bytes()).and_then(|()| file.fsync()) {
                        drop(file);
                        let _ = storage.unlink(&path);
                        return Err(io_err(&path)(e));
                    }
                    let lock = MigrationLock {
                        storage,
                        path,
                        dir: dir.to_owned(),
                        file,
                        record,
                        last_check: Instant::now(),
                        released: false,
                    };
                    sync_dir(storage, dir)?;
                    return Ok(lock);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // A stale lock just removed is tried for again even when the wait is
                    // over (a slow reclaim must not turn a free lock into "busy"); only a
                    // live holder makes the caller wait, up to `wait`. The bound keeps a
                    // stream of stale locks from looping forever.
                    if Self::reclaim_if_stale(storage, dir, &path) && reclaims < MAX_RECLAIMS {
                        reclaims += 1;
                        continue;
                    }
                }
                Err(e) => return Err(io_err(&path)(e)),
            }
            if Instant::now() >= deadline {
                return Err(LegacyError::MigrationBusy {
                    path: subject.to_owned(),
                    lock: path,
                });
            }
            std::thread::sleep(LOCK_POLL);
        }
    }

    /// Removes the lock at `path` if it is stale; true when it was removed.
    fn reclaim_if_stale(storage: &dyn SessionStorage, dir: &Path, path: &Path) -> bool {
        let Ok(observed) = storage.lstat(path).map(|s| Stat::of(&s)) else {
            // Gone meanwhile: just try again.
            return true;
        };
        if !is_stale(storage, path, &observed) {
            return false;
        }
        // Move the observed file aside and remove it only if it is still the one observed;
        // a lock created meanwhile by someone else is put back.
        let aside = dir.join(format!(".gjc-lock-{}.stale", uuid::Uuid::new_v4()));
        if storage.rename(path, &aside).is_err() {
            return false;
        }
        let same = storage.lstat(&aside).is_ok_and(|s| s.id == observed.id());
        if !same {
            let _ = storage.hard_link(&aside, path);
        }
        let _ = storage.unlink(&aside);
        let _ = sync_dir(storage, dir);
        same
    }

    fn busy(&self) -> LegacyError {
        LegacyError::MigrationBusy {
            path: self.path.clone(),
            lock: self.path.clone(),
        }
    }

    fn rewrite(&mut self, record: &LockRecord) -> io::Result<()> {
        let bytes = record.bytes();
        self.file.write_at(&bytes, 0)?;
        self.file.truncate(bytes.len() as u64)?;
        self.file.fsync()
    }

    /// Fencing: fails with `migration_busy` unless the lock file is still ours; renews the
    /// lease when less than a heartbeat of it is left.
    pub(super) fn assert_owned(&mut self) -> Result<(), LegacyError> {
        self.last_check = Instant::now();
        let named = self.file.is_file_at(&self.path).map_err(|_| self.busy())?;
        let current = capture(self.storage, &self.path)
            .ok()
            .and_then(|s| LockRecord::parse(&s.bytes));
        let ours = !self.released
            && named
            && current
                .as_ref()
                .is_some_and(|c| !c.released && c.attempt_id == self.record.attempt_id);
        if !ours {
            return Err(self.busy());
        }
        let now = now_millis();
        if current.is_some_and(|c| c.lease_expires_at < now + LOCK_HEARTBEAT_MS) {
            let mut renewed = self.record.clone();
            renewed.heartbeat_at = now;
            renewed.lease_expires_at = now + LOCK_LEASE_MS;
            self.rewrite(&renewed).map_err(io_err(&self.path))?;
            self.record = renewed;
        }
        Ok(())
    }

    /// [`Self::assert_owned`] at most once a second, for long copies.
    pub(super) fn heartbeat(&mut self) -> Result<(), LegacyError> {
        if self.last_check.elapsed() >= LOCK_CHECK_INTERVAL {
            self.assert_owned()?;
        }
        Ok(())
    }

    /// Marks the lock released (the file stays, as the original leaves it).
    pub(super) fn release(mut self) -> Result<(), LegacyError> {
        self.release_in_place()
    }

    /// Marks the lock released. When the released record cannot be written, the lock file
    /// (still ours) is removed instead, so that a record saying it is held by this live
    /// process does not block the next attempt until its lease runs out.
    fn release_in_place(&mut self) -> Result<(), LegacyError> {
        self.assert_owned()?;
        let now = now_millis();
        let mut done = self.record.clone();
        done.released = true;
        done.heartbeat_at = now;
        done.lease_expires_at = now;
        self.released = true;
        if let Err(e) = self.rewrite(&done) {
            if self.file.is_file_at(&self.path).unwrap_or(false) {
                let _ = self.storage.unlink(&self.path);
            }
            let _ = self.storage.sync_dir(&self.dir);
            return Err(io_err(&self.path)(e));
        }
        sync_dir(self.storage, &self.dir)
    }
}

impl Drop for MigrationLock<'_> {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.release_in_place();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_records_round_trip() {
        let record = LockRecord {
            attempt_id: "a".into(),
            pid: 42,
            boot_id: None,
            process_start_id: "42:7".into(),
            created_at: 1,
            heartbeat_at: 2,
            lease_expires_at: 3,
            released: true,
        };
        let bytes = record.bytes();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            "{\"attemptId\":\"a\",\"pid\":42,\"processStartId\":\"42:7\",\"createdAt\":1,\"heartbeatAt\":2,\"leaseExpiresAt\":3,\"released\":true}\n"
        );
        assert_eq!(LockRecord::parse(&bytes), Some(record));
    }
}
