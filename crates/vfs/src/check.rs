//! `check` at the root: the report of `gjcfs check` on the mounted store (never a repair:
//! a read never writes).
//!
//! A check reads every session and every blob, so the report is kept with what the store
//! looked like when it was made: every entry of the sessions root, of its directories and
//! of the blob store, as `lstat` sees it (identity, type, mode, owner, links, length,
//! modification and change times — a `chmod` or an ACL changes the change time). The
//! store is checked anew only when that differs. For [`REPORT_KEPT`] after a look, the
//! report is served without looking again (a `cat` asks for the size, then the bytes).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::content::Bytes;
use super::SessionSource;
use super::VfsError;
use gjcfs_engine::check::{check_store, CheckTarget};
use gjcfs_engine::storage::{EntryKind, EntryStat, SessionStorage};

/// How long a report is served again before the store is looked at again.
pub const REPORT_KEPT: Duration = Duration::from_secs(1);

/// Every entry a check looks at, by path, as `lstat` saw it.
type Look = Vec<(PathBuf, EntryStat)>;

pub struct CheckView {
    target: CheckTarget,
    storage: Arc<dyn SessionStorage>,
    /// The last report, when the store was last looked at, and what it looked like.
    report: Mutex<Option<(Instant, Look, Bytes)>>,
}

impl CheckView {
    pub fn new(
        source: &SessionSource,
        blob_dir: &std::path::Path,
        history_db: &std::path::Path,
        storage: Arc<dyn SessionStorage>,
    ) -> Self {
        let (sessions_root, session_dir) = match source {
            SessionSource::SessionsRoot(root) => (Some(root.clone()), None),
            SessionSource::Dir(dir) => (None, Some(dir.clone())),
        };
        CheckView {
            target: CheckTarget {
                sessions_root,
                session_dir,
                blob_dir: blob_dir.to_owned(),
                history_db: Some(history_db.to_owned()),
                // Repairs are the command's: their directories are not looked at.
                repair_base: None,
            },
            storage,
            report: Mutex::new(None),
        }
    }

    /// The report's text, as of at most [`REPORT_KEPT`] ago.
    pub fn bytes(&self) -> Result<Bytes, VfsError> {
        let mut kept = self.report.lock();
        if let Some((at, _, bytes)) = &*kept {
            if at.elapsed() < REPORT_KEPT {
                return Ok(bytes.clone());
            }
        }
        let look = self.look();
        if let Some((at, seen, bytes)) = &mut *kept {
            if *seen == look {
                *at = Instant::now();
                return Ok(bytes.clone());
            }
        }
        let report = check_store(self.storage.as_ref(), &self.target, &|_| {})
            .map_err(|e| super::errors::from_io(&e, format!("check: {e}")))?;
        let bytes = Arc::new(report.to_text(None).into_bytes());
        *kept = Some((Instant::now(), look, bytes.clone()));
        Ok(bytes)
    }

    /// What the store looks like now: its directories (the sessions root or the session
    /// directory, the blob store), their entries, and the entries of the root's
    /// directories.
    fn look(&self) -> Look {
        let storage = self.storage.as_ref();
        let mut look = Vec::new();
        let at = |path: &Path, look: &mut Look| {
            if let Ok(stat) = storage.lstat(path) {
                look.push((path.to_owned(), stat));
            }
        };
        let tops = [
            self.target.sessions_root.as_ref(),
            self.target.session_dir.as_ref(),
            Some(&self.target.blob_dir),
        ];
        for top in tops.into_iter().flatten() {
            at(top, &mut look);
            for (entry, kind) in storage.list_entries(top).unwrap_or_default() {
                at(&entry, &mut look);
                if kind == EntryKind::Dir && Some(top) == self.target.sessions_root.as_ref() {
                    for (inner, _) in storage.list_entries(&entry).unwrap_or_default() {
                        at(&inner, &mut look);
                    }
                }
            }
        }
        look
    }
}
