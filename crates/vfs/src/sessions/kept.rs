//! What the model keeps of the sessions that are no longer loaded: each one's rendering
//! with its bytes let go ([`Rendered::strip`]: the names and sizes of its files, its entry
//! table), with the version of the file it was rendered from. While the file keeps that
//! version, lookups, attributes and listings of the session are answered from it, with no
//! load and no render; the bytes of the files themselves are the kernel's to keep.
//!
//! At most [`KEPT_BYTES`] are kept (as [`Rendered::stripped_size`] counts them); past that
//! the sessions used longest ago are let go.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::content::Rendered;
use gjcfs_engine::storage::FileVersion;

/// How many bytes the kept renderings hold together, at most.
pub const KEPT_BYTES: usize = 64 << 20;

struct Entry {
    path: PathBuf,
    version: FileVersion,
    rendered: Rendered,
    size: usize,
    used: u64,
}

#[derive(Default)]
pub(super) struct Kept {
    by_sid: HashMap<String, Entry>,
    bytes: usize,
    /// Counts every use: the order sessions were last used in.
    clock: u64,
}

impl Kept {
    /// Keeps `rendered` (stripped) as session `sid` rendered from its file `path` at
    /// `version`, letting go of the sessions used longest ago past [`KEPT_BYTES`].
    pub(super) fn put(&mut self, sid: &str, path: &Path, version: FileVersion, rendered: Rendered) {
        let mut rendered = rendered;
        rendered.strip();
        let size = rendered.stripped_size();
        self.clock += 1;
        let entry = Entry {
            path: path.to_owned(),
            version,
            rendered,
            size,
            used: self.clock,
        };
        if let Some(old) = self.by_sid.insert(sid.to_owned(), entry) {
            self.bytes -= old.size;
        }
        self.bytes += size;
        if self.bytes > KEPT_BYTES {
            self.shrink();
        }
    }

    /// Lets go of the sessions used longest ago until a tenth of the budget is free.
    fn shrink(&mut self) {
        let mut by_use: Vec<(u64, String)> = self
            .by_sid
            .iter()
            .map(|(sid, e)| (e.used, sid.clone()))
            .collect();
        by_use.sort_unstable();
        for (_, sid) in by_use {
            if self.bytes <= KEPT_BYTES / 10 * 9 {
                break;
            }
            if let Some(e) = self.by_sid.remove(&sid) {
                self.bytes -= e.size;
            }
        }
    }

    /// Takes what is kept of `sid` out (the session is being loaded), with the version of
    /// the file it was rendered from.
    pub(super) fn take(&mut self, sid: &str) -> Option<(FileVersion, Rendered)> {
        let e = self.by_sid.remove(sid)?;
        self.bytes -= e.size;
        Some((e.version, e.rendered))
    }

    /// The file `sid` was rendered from, if it is kept.
    pub(super) fn path_of(&self, sid: &str) -> Option<PathBuf> {
        self.by_sid.get(sid).map(|e| e.path.clone())
    }

    /// `f` of what is kept of `sid`, if it was rendered from its file at `version`.
    pub(super) fn with<R>(
        &mut self,
        sid: &str,
        version: &FileVersion,
        f: impl FnOnce(&Rendered) -> Option<R>,
    ) -> Option<R> {
        self.clock += 1;
        let clock = self.clock;
        let e = self.by_sid.get_mut(sid).filter(|e| e.version == *version)?;
        e.used = clock;
        f(&e.rendered)
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gjcfs_engine::format::lines::parse_line;
    use gjcfs_engine::read::load::build_session;
    use gjcfs_engine::storage::FileId;

    fn rendered() -> Rendered {
        let header = "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}";
        let record = parse_line(true, header.as_bytes()).unwrap().unwrap();
        Rendered::new(&build_session(vec![record], None).session, false)
    }

    fn version(len: u64) -> FileVersion {
        FileVersion {
            id: FileId { dev: 1, ino: 2 },
            len,
            mtime_ns: 3,
            ctime_ns: 4,
        }
    }

    #[test]
    fn a_kept_rendering_answers_only_for_its_version_and_the_budget_holds() {
        let mut kept = Kept::default();
        kept.put("a", Path::new("/s/a"), version(1), rendered());
        assert_eq!(
            kept.with("a", &version(1), |r| Some(r.header.len())),
            Some(rendered().header.len())
        );
        assert_eq!(kept.with("a", &version(2), |_| Some(())), None);
        assert_eq!(kept.path_of("a").as_deref(), Some(Path::new("/s/a")));
        let one = kept.bytes();
        let fits = KEPT_BYTES / one;
        for n in 0..fits + 10 {
            kept.put(&format!("s{n}"), Path::new("/s/x"), version(1), rendered());
            // The first one stays in use.
            kept.with("a", &version(1), |_| Some(()));
        }
        assert!(kept.bytes() <= KEPT_BYTES);
        assert!(
            kept.with("a", &version(1), |_| Some(())).is_some(),
            "used lately"
        );
        assert!(
            kept.with("s0", &version(1), |_| Some(())).is_none(),
            "used longest ago"
        );
        assert!(kept.take("a").is_some());
        assert!(kept.take("a").is_none());
    }
}
