//! `check` at the root: the report of `gjcfs check` on the mounted store (never a repair:
//! a read never writes).
//!
//! A check reads every session and every blob, so the rendered report is kept for
//! [`REPORT_KEPT`] and served again meanwhile (a `cat` asks for the size, then the bytes);
//! it may lag a change of the store by that much.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::content::Bytes;
use super::SessionSource;
use super::VfsError;
use gjcfs_engine::check::{check_store, CheckTarget};
use gjcfs_engine::storage::SessionStorage;

/// How long a report is served again before the store is checked anew.
pub const REPORT_KEPT: Duration = Duration::from_secs(10);

pub struct CheckView {
    target: CheckTarget,
    storage: Arc<dyn SessionStorage>,
    report: Mutex<Option<(Instant, Bytes)>>,
}

impl CheckView {
    pub fn new(
        source: &SessionSource,
        blob_dir: &std::path::Path,
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
            },
            storage,
            report: Mutex::new(None),
        }
    }

    /// The report's text, as of at most [`REPORT_KEPT`] ago.
    pub fn bytes(&self) -> Result<Bytes, VfsError> {
        let mut kept = self.report.lock();
        if let Some((at, bytes)) = &*kept {
            if at.elapsed() < REPORT_KEPT {
                return Ok(bytes.clone());
            }
        }
        let report = check_store(self.storage.as_ref(), &self.target, &|_| {})
            .map_err(|e| super::errors::from_io(&e, format!("check: {e}")))?;
        let bytes = Arc::new(report.to_text(None).into_bytes());
        *kept = Some((Instant::now(), bytes.clone()));
        Ok(bytes)
    }
}
