//! What is kept of each session between runs: its stripped rendering ([`Rendered::strip`]:
//! the names and sizes of its files, its entry table, its header and leaf), per version of
//! its transcript, saved in the store's cache directory. A later run answers lookups,
//! attributes and listings of an unchanged session from it without loading or rendering
//! anything, so a walk that only stats (`du`, `find -ls`, `ls -lR`) renders nothing of a
//! session rendered for that version before, in this run or an earlier one.
//!
//! It counts only for the transcript's version it was rendered from (its device, inode,
//! length and times: [`FileVersion`]) and for the program that rendered it (the
//! [`SavedRenderings::renderer`], which a new build changes): anything else is loaded and
//! rendered as before. A read renders the file anyway and serves it only when it has the
//! size given (`snapshots.rs`): a size that is wrong costs a stale reply, never a file cut
//! short, and the session's saved rendering is forgotten.
//!
//! The file is the engine's saved format ([`gjcfs_engine::store::saved`]): read without
//! trusting it, replaced whole, never read past what the store's size justifies. A
//! session's rendering is saved within [`RENDERING_MAX`] bytes: a larger one is saved
//! without its entry table, which a later run then makes again when asked for. A store's
//! renderings take at most [`KEPT_BYTES`] together, in memory as in the file.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gjcfs_engine::storage::{FileVersion, SessionStorage};
use gjcfs_engine::store::saved::{ByVersion, Decoder, Encoder, Saved};

use crate::content::{Rendered, MIN_ENTRY_BYTES};
use crate::rendered_file::RenderedFile;

/// How often the renderings kept since are saved, at most (and when the model closes).
const SAVE_EVERY: Duration = Duration::from_secs(60);

/// Where the renderings are saved, and what renders them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedRenderings {
    /// The saved file (in the user's cache directory, beside the saved listing).
    pub path: PathBuf,
    /// Names the renderer: renderings saved by another one are not used. Rendering depends on
    /// the program and on nothing else but the session and its blobs, so it is taken
    /// from the program's version and its executable ([`SavedRenderings::for_this_program`]).
    pub renderer: u64,
}

impl SavedRenderings {
    /// Renderings saved at `path` for this program: its version and its executable as it
    /// is on `storage` (its identity, length and times), so that a rebuilt program
    /// renders afresh. `None` when the executable cannot be found.
    pub fn for_this_program(storage: &dyn SessionStorage, path: PathBuf) -> Option<Self> {
        use std::hash::{Hash, Hasher};
        let exe = std::env::current_exe().ok()?;
        let v = crate::disk::version(storage, &exe)?;
        let mut hasher = std::hash::DefaultHasher::new();
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        (v.id.dev, v.id.ino, v.len, v.mtime_ns, v.ctime_ns).hash(&mut hasher);
        Some(SavedRenderings {
            path,
            renderer: hasher.finish(),
        })
    }
}

/// The most bytes a session's saved rendering takes: within what the saved format lets a
/// store keep per session file.
pub const RENDERING_MAX: usize = 12 << 10;

/// The most bytes the saved renderings of a store take together (in memory and in the
/// saved file): past it, no more are kept.
pub const KEPT_BYTES: usize = 64 << 20;

/// The kind of an encoded stripped rendering.
const RENDERING_KIND: &[u8; 8] = b"stripped";

/// One session's stripped rendering, encoded, and the renderer that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SavedRendering {
    renderer: u64,
    bytes: Vec<u8>,
}

impl SavedRendering {
    /// `rendered`, encoded within [`RENDERING_MAX`] bytes (without its entry table if need
    /// be); `None` under `--redact`.
    fn of(rendered: &Rendered, renderer: u64) -> Option<Self> {
        let encode = |with_table| {
            let mut e = Encoder::new(RENDERING_KIND, 1);
            rendered
                .encode_stripped(&mut e, with_table)
                .then(|| e.finish())
        };
        // A table of more entries than can fit is not encoded to learn it.
        let entries = rendered.known_entries().map_or(0, <[_]>::len);
        let with_table = entries.saturating_mul(MIN_ENTRY_BYTES) <= RENDERING_MAX;
        let bytes = encode(with_table)?;
        let bytes = match bytes.len() <= RENDERING_MAX {
            true => bytes,
            false if with_table => encode(false).filter(|b| b.len() <= RENDERING_MAX)?,
            false => return None,
        };
        Some(SavedRendering { renderer, bytes })
    }

    fn rendering(&self) -> Option<Rendered> {
        let mut d = Decoder::new(&self.bytes, RENDERING_KIND, 1)?;
        let rendered = Rendered::decode_stripped(&mut d)?;
        d.is_done().then_some(rendered)
    }
}

impl Saved for SavedRendering {
    const KIND: &'static [u8; 8] = b"rendered";
    const FORMAT: u32 = 1;

    fn encode(&self, e: &mut Encoder) {
        e.u64(self.renderer);
        e.bytes(&self.bytes);
    }

    fn decode(d: &mut Decoder, _path: &Path) -> Option<Self> {
        Some(SavedRendering {
            renderer: d.u64()?,
            bytes: d.bytes()?.to_vec(),
        })
    }
}

/// The saved renderings of every session, read from the saved file at their first use.
pub(super) struct RenderingStore {
    saved: SavedRenderings,
    known: Option<ByVersion<SavedRendering>>,
    /// About how many bytes `known` holds: the saved file's length when it was read, and
    /// every rendering kept since.
    bytes: usize,
    saved_at: Option<Instant>,
}

impl RenderingStore {
    pub(super) fn new(saved: SavedRenderings) -> Self {
        RenderingStore {
            saved,
            known: None,
            bytes: 0,
            saved_at: None,
        }
    }

    /// What is known, read from the saved file the first time (for a store of `files`
    /// sessions, which bounds what is read).
    fn known(
        &mut self,
        storage: &dyn SessionStorage,
        files: usize,
    ) -> &mut ByVersion<SavedRendering> {
        if self.known.is_none() {
            let len = crate::disk::version(storage, &self.saved.path).map_or(0, |v| v.len);
            self.bytes = usize::try_from(len).unwrap_or(usize::MAX);
        }
        self.known
            .get_or_insert_with(|| ByVersion::load(storage, &self.saved.path, files))
    }

    /// The stripped rendering of the session whose transcript `path` has `version`, if this
    /// renderer saved one for that version.
    pub(super) fn get(
        &mut self,
        (storage, files): (&dyn SessionStorage, usize),
        path: &Path,
        version: &FileVersion,
    ) -> Option<Rendered> {
        let renderer = self.saved.renderer;
        let saved = self.known(storage, files).get(path, version)?;
        (saved.renderer == renderer).then(|| saved.rendering())?
    }

    /// Keeps `rendered`, rendered from the transcript `path` at `version`, in the place of
    /// what was kept for `path`, while what is kept stays within [`KEPT_BYTES`] (else what
    /// was kept stays).
    pub(super) fn put(
        &mut self,
        (storage, files): (&dyn SessionStorage, usize),
        path: &Path,
        version: FileVersion,
        rendered: &Rendered,
    ) {
        let Some(saved) = SavedRendering::of(rendered, self.saved.renderer) else {
            return;
        };
        let len = |saved: &SavedRendering| saved.bytes.len() + path.as_os_str().len() + 64;
        if self.known(storage, files).get(path, &version) == Some(&saved) {
            return;
        }
        let old = self.known(storage, files).remove(path);
        self.bytes -= old.as_ref().map_or(0, |(_, old)| len(old)).min(self.bytes);
        let (version, saved) = match self.bytes + len(&saved) <= KEPT_BYTES {
            true => (version, saved),
            // No room: what was kept stays.
            false => match old {
                Some(old) => old,
                None => return,
            },
        };
        self.bytes += len(&saved);
        if let Some(known) = &mut self.known {
            known.insert(path, version, saved);
        }
    }

    /// Forgets what is known of the session whose transcript is `path` (a size found
    /// wrong).
    pub(super) fn forget(&mut self, path: &Path) {
        if let Some(known) = &mut self.known {
            known.remove(path);
        }
    }

    /// Whether a save is due: renderings were read or kept, and the last save (if any) was
    /// [`SAVE_EVERY`] ago.
    fn due(&self) -> bool {
        self.known.is_some() && self.saved_at.is_none_or(|at| at.elapsed() >= SAVE_EVERY)
    }

    /// Saves what changed since the last save, keeping only the transcripts `listed`
    /// accepts. A file that cannot be written costs the next run its speed only.
    fn save(&mut self, storage: &dyn SessionStorage, listed: impl Fn(&Path) -> bool) {
        let Some(known) = &mut self.known else {
            return;
        };
        known.retain(listed);
        let _ = known.save(storage, &self.saved.path);
        self.saved_at = Some(Instant::now());
    }
}

/// The saved renderings. Their lock is taken after the listing's and before what is kept
/// of the sessions, never with either, and is held while the saved file is read (once) or
/// written (at most every [`SAVE_EVERY`]): only lookups of unloaded sessions wait for that.
impl super::Sessions {
    /// Keeps the sessions' renderings between runs at `saved`; `None`: not kept.
    pub(crate) fn saving_renderings(mut self, saved: Option<SavedRenderings>) -> Self {
        self.saved = saved.map(|saved| parking_lot::Mutex::new(RenderingStore::new(saved)));
        self
    }

    /// Puts the saved rendering of session `sid` among what is kept of the sessions, when
    /// nothing is kept of it and one was saved for its transcript as it is.
    pub(super) fn restore_saved(&self, sid: &str) {
        let Some(saved) = &self.saved else { return };
        if self.kept.lock().path_of(sid).is_some() {
            return;
        }
        let Some((path, files)) = ({
            let listing = self.listing.lock();
            listing.get(sid).map(|l| (l.path.clone(), listing.len()))
        }) else {
            return;
        };
        let Some(version) = crate::disk::version(self.storage(), &path) else {
            return;
        };
        let rendered = saved.lock().get((self.storage(), files), &path, &version);
        if let Some(rendered) = rendered {
            self.kept.lock().put(sid, &path, version, rendered);
        }
    }

    /// The size of `file`, a rendered file of session `sid` not loaded, as kept of the
    /// session rendered from the transcript at `version` (else as it is now), in this run
    /// or an earlier one: no load, no render.
    pub(crate) fn kept_size(
        &self,
        sid: &str,
        file: &RenderedFile,
        version: Option<&FileVersion>,
    ) -> Option<u64> {
        if self.cache.lock().slots.contains_key(sid) {
            return None;
        }
        self.restore_saved(sid);
        let path = self.kept.lock().path_of(sid)?;
        let now;
        let version = match version {
            Some(version) => version,
            None => {
                now = crate::disk::version(self.storage(), &path)?;
                &now
            }
        };
        self.kept.lock().with(sid, version, |r| r.known_len(file))
    }

    /// Whether session `sid` is loaded (the model's tests look).
    #[cfg(all(test, unix))]
    pub(crate) fn is_loaded(&self, sid: &str) -> bool {
        self.cache.lock().slots.contains_key(sid)
    }

    /// Saves `rendered`, rendered from the transcript `path` at `version`, for later runs.
    pub(super) fn save_rendering(&self, path: &Path, version: FileVersion, rendered: &Rendered) {
        let Some(saved) = &self.saved else { return };
        let files = self.listing.lock().len();
        saved
            .lock()
            .put((self.storage(), files), path, version, rendered);
    }

    /// Forgets what is kept and saved of session `sid` (a size of it was found wrong).
    pub(crate) fn forget_saved(&self, sid: &str) {
        self.kept.lock().take(sid);
        let path = self.listing.lock().get(sid).map(|l| l.path.clone());
        if let (Some(saved), Some(path)) = (&self.saved, path) {
            saved.lock().forget(&path);
        }
    }

    /// Saves the renderings kept since the last save, of the sessions listed: `now`, or when
    /// [`SAVE_EVERY`] passed since the last save.
    pub(super) fn save_renderings(&self, now: bool) {
        let Some(saved) = &self.saved else { return };
        if !now && !saved.lock().due() {
            return;
        }
        let listed: std::collections::HashSet<PathBuf> = self
            .listing
            .lock()
            .values()
            .map(|l| l.path.clone())
            .collect();
        saved.lock().save(self.storage(), |p| listed.contains(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::saved_tests::rendering;

    fn version(len: u64) -> FileVersion {
        FileVersion {
            id: gjcfs_engine::storage::FileId { dev: 1, ino: 2 },
            len,
            mtime_ns: 3,
            ctime_ns: 4,
        }
    }

    #[test]
    fn a_rendering_replaces_its_sessions_and_the_budget_holds() {
        let storage = gjcfs_engine::storage::MemoryStorage::new();
        let at = (&storage as &dyn SessionStorage, 10);
        let mut store = RenderingStore::new(SavedRenderings {
            path: PathBuf::from("/cache/renderings"),
            renderer: 1,
        });
        let (a, b) = (Path::new("/s/a.jsonl"), Path::new("/s/b.jsonl"));
        let rendered = rendering(10);
        for n in 1..=100 {
            store.put(at, a, version(n), &rendered);
        }
        assert!(store.get(at, a, &version(99)).is_none(), "replaced");
        assert!(store.get(at, a, &version(100)).is_some());
        let one = store.bytes;
        assert!(one > 0 && one < RENDERING_MAX + 100, "{one}: counted once");
        // Another renderer's are not used.
        store.saved.renderer = 2;
        assert!(store.get(at, a, &version(100)).is_none());
        store.saved.renderer = 1;
        // Full: nothing more is kept, and a replacement takes the room it frees.
        store.bytes = KEPT_BYTES - 10;
        store.put(at, b, version(1), &rendered);
        assert!(store.get(at, b, &version(1)).is_none(), "no room");
        store.put(at, a, version(101), &rendered);
        assert!(
            store.get(at, a, &version(101)).is_some(),
            "the room of its own"
        );
        store.forget(a);
        assert!(store.get(at, a, &version(101)).is_none());
    }

    #[test]
    fn a_rendering_too_large_is_saved_without_its_entry_table() {
        let small = SavedRendering::of(&rendering(10), 1).unwrap();
        assert!(small.rendering().unwrap().known_entries().is_some());
        let large = rendering(2_000);
        let saved = SavedRendering::of(&large, 1).unwrap();
        assert!(saved.bytes.len() <= RENDERING_MAX);
        let back = saved.rendering().unwrap();
        assert!(back.known_entries().is_none(), "made again when needed");
        assert_eq!(back.header, large.header);
        assert_eq!(
            back.known_len(&RenderedFile::View(crate::layout::View::Tree)),
            Some(12)
        );
    }
}
