//! [`ListingCache`]: what a listing read of each file, kept in memory (the mount) or saved
//! between runs (the command, [`crate::store::saved`]), so that the next listing reads only
//! the files that changed.

use std::io;
use std::path::{Path, PathBuf};

use super::{session_info, SessionInfo};
use crate::storage::SessionStorage;
use crate::store::saved::{self, ByVersion, Decoder, Encoder, Saved};

/// The saved listing's file name in a store's cache directory, where every program that
/// lists the store (the commands, the mount) keeps it.
pub const SAVED_LISTING_FILE: &str = "listing";

/// What a listing read of each file, so that the next listing of the same store reads only
/// the files that changed. A file is not read again while its version (identity, length and
/// modification time) is what it was: an append changes the length, a rewrite (a rename over
/// the file) the identity. Only the files of the last listing are kept; a file that is no
/// session is kept as such.
///
/// It can be saved to a file and loaded in another run ([`ListingCache::load`],
/// [`ListingCache::save`]); what it keeps of a file counts only while the file's version is
/// the one saved with it.
#[derive(Debug, Default)]
pub struct ListingCache {
    kept: ByVersion<Option<SessionInfo>>,
    /// Where the saved listing is, until the first listing reads it.
    saved: Option<PathBuf>,
}

impl ListingCache {
    /// The [`SessionInfo`] of every path that is a session, in the order given, reading
    /// only the files that changed since the last call.
    pub(super) fn list(
        &mut self,
        storage: &dyn SessionStorage,
        paths: &[PathBuf],
        progress: &dyn Fn(usize, usize),
    ) -> Vec<SessionInfo> {
        if let Some(at) = self.saved.take() {
            self.kept = ByVersion::load(storage, &at, paths.len());
        }
        let mut infos = Vec::with_capacity(paths.len());
        let mut listed = std::collections::HashSet::with_capacity(paths.len());
        // By the path's bytes: hashing a `Path` walks its components.
        // The versions are taken before the files are read: a change made while one is read
        // makes the next listing read it again.
        let versions = saved::versions(storage, paths);
        for (done, (path, version)) in paths.iter().zip(versions).enumerate() {
            if let Some(version) = version {
                let info = match self.kept.get(path, &version) {
                    Some(info) => Some(info.clone()),
                    None => session_info(storage, path).ok().inspect(|info| {
                        self.kept.insert(path, version, info.clone());
                    }),
                };
                if let Some(info) = info {
                    listed.insert(path.as_os_str());
                    infos.extend(info);
                }
            }
            progress(done + 1, paths.len());
        }
        self.kept.retain(|path| listed.contains(path.as_os_str()));
        infos
    }

    /// Keeps `info` for its file instead of what the listing read: what a caller learned
    /// of the file by reading more of it (an exact message count, a first prompt further
    /// in). It counts while the file keeps the version the listing saw.
    pub fn complete(&mut self, info: &SessionInfo) {
        self.kept.replace(&info.path, Some(info.clone()));
    }

    /// The listing saved at `path` by [`ListingCache::save`], read by the first listing:
    /// an empty one when there is none, it cannot be read as one, or it is longer than the
    /// files then listed justify (1 MiB and 16 KiB a file; never read whole).
    pub fn load(path: &Path) -> Self {
        ListingCache {
            kept: ByVersion::default(),
            saved: Some(path.to_owned()),
        }
    }

    /// Saves the listing at `path` if it changed since it was loaded: a file in the user's
    /// cache, replaced whole.
    pub fn save(&mut self, storage: &dyn SessionStorage, path: &Path) -> io::Result<()> {
        self.kept.save(storage, path)
    }
}

impl Saved for SessionInfo {
    const KIND: &'static [u8; 8] = b"listing\0";
    /// 2: each file's version has its change time.
    const FORMAT: u32 = 2;

    fn encode(&self, e: &mut Encoder) {
        e.str(&self.id);
        e.str(&self.cwd);
        e.opt_str(self.title.as_deref());
        e.opt_str(self.parent_session.as_deref());
        e.str(&self.created);
        e.i64(self.modified_ms);
        e.u64(self.size);
        e.u64(self.message_count as u64);
        e.bool(self.message_count_is_estimate);
        e.str(&self.first_message);
    }

    fn decode(d: &mut Decoder, path: &Path) -> Option<Self> {
        Some(SessionInfo {
            path: path.to_owned(),
            id: d.str()?.to_owned(),
            cwd: d.str()?.to_owned(),
            title: d.opt_str()?.map(str::to_owned),
            parent_session: d.opt_str()?.map(str::to_owned),
            created: d.str()?.to_owned(),
            modified_ms: d.i64()?,
            size: d.u64()?,
            message_count: usize::try_from(d.u64()?).ok()?,
            message_count_is_estimate: d.bool()?,
            first_message: d.str()?.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;
    use crate::store::discovery::list_dir_cached;

    fn session(id: &str, title: Option<&str>) -> String {
        let title = title.map_or(String::new(), |t| format!(r#","title":"{t}""#));
        format!(
            "{{\"type\":\"session\",\"version\":5,\"id\":\"{id}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"{title}}}\n\
             {{\"type\":\"message\",\"id\":\"m1\",\"parentId\":null,\"timestamp\":\"t\",\"message\":{{\"role\":\"user\",\"content\":\"hello\"}}}}\n"
        )
    }

    #[test]
    fn a_saved_listing_reads_only_what_changed_and_keeps_what_was_completed() {
        let storage = MemoryStorage::new();
        let dir = Path::new("/s");
        let saved_at = Path::new("/cache/listing");
        storage.ensure_dir(dir).unwrap();
        storage.put_file(&dir.join("a.jsonl"), session("a", Some("Tïtle")).as_bytes());
        storage.put_file(&dir.join("b.jsonl"), session("b", None).as_bytes());
        storage.put_file(&dir.join("c.jsonl"), b"not a session\n");
        let mut cache = ListingCache::load(saved_at);
        let first = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
        assert_eq!(first.len(), 2);
        let mut completed = first[0].clone();
        completed.message_count = 41;
        cache.complete(&completed);
        cache.save(&storage, saved_at).unwrap();

        // Another run: no session is read but the one that changed, and what was completed
        // stays while its file does not change.
        let opens = |s: &MemoryStorage| {
            s.op_log()
                .iter()
                .filter(|op| op.starts_with("open"))
                .count()
        };
        let mut cache = ListingCache::load(saved_at);
        let before = opens(&storage);
        let again = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
        assert_eq!(opens(&storage), before + 1, "only the saved listing read");
        let mut want = first.clone();
        want[0] = completed.clone();
        assert_eq!(again, want);
        storage.put_file(&dir.join("b.jsonl"), session("b", Some("new")).as_bytes());
        let after = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
        assert_eq!(opens(&storage), before + 2, "one file read again");
        let b = after.iter().find(|i| i.id == "b").unwrap();
        assert_eq!(b.title.as_deref(), Some("new"));
        // Unchanged since it was loaded and listed: saving writes nothing.
        cache.save(&storage, saved_at).unwrap();
        let mut reloaded = ListingCache::load(saved_at);
        let writes = storage.op_count();
        reloaded.save(&storage, saved_at).unwrap();
        assert_eq!(storage.op_count(), writes);
    }

    #[test]
    fn a_damaged_saved_listing_is_no_listing() {
        let storage = MemoryStorage::new();
        let dir = Path::new("/s");
        let saved_at = Path::new("/cache/listing");
        storage.ensure_dir(dir).unwrap();
        storage.put_file(&dir.join("a.jsonl"), session("a", None).as_bytes());
        let mut cache = ListingCache::load(saved_at);
        let first = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
        cache.save(&storage, saved_at).unwrap();
        let bytes = storage.file(saved_at).unwrap();
        for cut in [0, 8, bytes.len() / 2, bytes.len() - 1] {
            storage.put_file(saved_at, &bytes[..cut]);
            let mut cache = ListingCache::load(saved_at);
            let before = storage.op_log().len();
            let again = list_dir_cached(&storage, dir, &mut cache, &|_, _| {}).unwrap();
            assert_eq!(again, first, "cut at {cut}");
            let read = storage.op_log()[before..]
                .iter()
                .any(|op| op.starts_with("open"));
            assert!(read, "cut at {cut}: the file is read again");
        }
    }
}
