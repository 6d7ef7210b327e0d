//! The sizes of a session's rendered files, kept per version of its transcript and saved
//! between runs, so that a `stat` of a view (what `du`, `find -ls` and `ls -lR` make of every
//! file) renders nothing once the view was rendered for that version, in this run or an
//! earlier one.
//!
//! A size counts only for the transcript's version it was rendered from (its device, inode,
//! length and times: [`FileVersion`]) and for the program that rendered it (the
//! [`SavedViewSizes::renderer`], which a new build changes): anything else is rendered as
//! before. A read renders the file anyway and serves it only when it has that size
//! (`snapshots.rs`): a size that is wrong costs a stale reply, never a file cut short.
//!
//! The file is the engine's saved format ([`gjcfs_engine::store::saved`]): read without
//! trusting it, replaced whole, never read past what the store's size justifies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gjcfs_engine::storage::{FileVersion, SessionStorage};
use gjcfs_engine::store::saved::{ByVersion, Decoder, Encoder, Saved};

use crate::content::Rendered;
use crate::inode::Node;
use crate::layout::{view_of, View};

/// How often sizes learnt since are saved, at most (and when the model closes).
const SAVE_EVERY: Duration = Duration::from_secs(60);

/// Where the sizes are saved, and what rendered them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedViewSizes {
    /// The saved file (in the user's cache directory, beside the saved listing).
    pub path: PathBuf,
    /// Names the renderer: sizes saved by another one are not used. Rendering depends on
    /// the program and on nothing else but the session and its blobs, so it is taken
    /// from the program's version and its executable ([`SavedViewSizes::for_this_program`]).
    pub renderer: u64,
}

impl SavedViewSizes {
    /// Sizes saved at `path` for this program: its version and its executable as it is on
    /// `storage` (its identity, length and times), so that a rebuilt program renders
    /// afresh. `None` when the executable cannot be found.
    pub fn for_this_program(storage: &dyn SessionStorage, path: PathBuf) -> Option<Self> {
        use std::hash::{Hash, Hasher};
        let exe = std::env::current_exe().ok()?;
        let v = crate::disk::version(storage, &exe)?;
        let mut hasher = std::hash::DefaultHasher::new();
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        (v.id.dev, v.id.ino, v.len, v.mtime_ns, v.ctime_ns).hash(&mut hasher);
        Some(SavedViewSizes {
            path,
            renderer: hasher.finish(),
        })
    }
}

/// Which rendered file of a session a size is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeOf<'a> {
    Context,
    View(View),
    LeafPage(&'a str),
    EarlierPage(usize),
}

impl<'a> SizeOf<'a> {
    /// The session and the rendered file `node` is, if it is one whose size is kept.
    pub(crate) fn node(node: &'a Node) -> Option<(&'a str, SizeOf<'a>)> {
        if let Some((sid, view)) = view_of(node) {
            return Some((sid, SizeOf::View(view)));
        }
        match node {
            Node::Context(s) => Some((s, SizeOf::Context)),
            Node::LeafPage(s, id) => Some((s, SizeOf::LeafPage(id))),
            Node::PageFile(s, n) => Some((s, SizeOf::EarlierPage(*n))),
            _ => None,
        }
    }
}

/// The sizes known of one session's rendered files, for one version of its transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ViewSizes {
    renderer: u64,
    context: Option<u64>,
    views: [Option<u64>; 5],
    /// Sorted by id.
    leaf_pages: Vec<(String, u64)>,
    /// Sorted by page.
    earlier_pages: Vec<(usize, u64)>,
}

impl ViewSizes {
    fn get(&self, of: SizeOf<'_>) -> Option<u64> {
        match of {
            SizeOf::Context => self.context,
            SizeOf::View(view) => self.views[view as usize],
            SizeOf::LeafPage(id) => {
                let at = self
                    .leaf_pages
                    .binary_search_by(|(k, _)| k.as_str().cmp(id));
                at.ok().map(|at| self.leaf_pages[at].1)
            }
            SizeOf::EarlierPage(n) => {
                let at = self.earlier_pages.binary_search_by_key(&n, |(k, _)| *k);
                at.ok().map(|at| self.earlier_pages[at].1)
            }
        }
    }

    /// Adds the sizes of the files `rendered` holds.
    fn add(&mut self, rendered: &Rendered) {
        self.context = rendered.known_context_len().or(self.context);
        for (view, kept) in View::ALL.into_iter().zip(&mut self.views) {
            *kept = rendered.known_view_len(view).or(*kept);
        }
        let leaves = rendered.known_leaf_page_lens().iter();
        let mut merged: BTreeMap<String, u64> = self.leaf_pages.drain(..).collect();
        merged.extend(leaves.map(|(id, len)| (id.clone(), *len)));
        self.leaf_pages = merged.into_iter().collect();
        let pages = rendered.known_earlier_page_lens().iter();
        let mut merged: BTreeMap<usize, u64> = self.earlier_pages.drain(..).collect();
        merged.extend(pages.map(|(n, len)| (*n, *len)));
        self.earlier_pages = merged.into_iter().collect();
    }

    /// Whether it knows no size at all.
    fn is_empty(&self) -> bool {
        self.context.is_none()
            && self.views.iter().all(Option::is_none)
            && self.leaf_pages.is_empty()
            && self.earlier_pages.is_empty()
    }
}

fn encode_opt(e: &mut Encoder, n: Option<u64>) {
    e.bool(n.is_some());
    e.u64(n.unwrap_or(0));
}

fn decode_opt(d: &mut Decoder) -> Option<Option<u64>> {
    let some = d.bool()?;
    let n = d.u64()?;
    Some(some.then_some(n))
}

impl Saved for ViewSizes {
    const KIND: &'static [u8; 8] = b"viewsize";
    const FORMAT: u32 = 1;

    fn encode(&self, e: &mut Encoder) {
        e.u64(self.renderer);
        encode_opt(e, self.context);
        for view in self.views {
            encode_opt(e, view);
        }
        e.u64(self.leaf_pages.len() as u64);
        for (id, len) in &self.leaf_pages {
            e.str(id);
            e.u64(*len);
        }
        e.u64(self.earlier_pages.len() as u64);
        for (n, len) in &self.earlier_pages {
            e.u64(*n as u64);
            e.u64(*len);
        }
    }

    fn decode(d: &mut Decoder, _path: &Path) -> Option<Self> {
        let renderer = d.u64()?;
        let context = decode_opt(d)?;
        let mut views = [None; 5];
        for view in &mut views {
            *view = decode_opt(d)?;
        }
        // An id's length and a size at least; a page and a size.
        let leaves = d.count(16)?;
        let mut leaf_pages = Vec::with_capacity(leaves);
        for _ in 0..leaves {
            leaf_pages.push((d.str()?.to_owned(), d.u64()?));
        }
        let pages = d.count(16)?;
        let mut earlier_pages = Vec::with_capacity(pages);
        for _ in 0..pages {
            earlier_pages.push((usize::try_from(d.u64()?).ok()?, d.u64()?));
        }
        let sorted = leaf_pages.is_sorted_by(|a, b| a.0 < b.0)
            && earlier_pages.is_sorted_by(|a, b| a.0 < b.0);
        sorted.then_some(ViewSizes {
            renderer,
            context,
            views,
            leaf_pages,
            earlier_pages,
        })
    }
}

/// The sizes known of every session, read from the saved file at their first use.
pub(super) struct Sizes {
    saved: SavedViewSizes,
    known: Option<ByVersion<ViewSizes>>,
    saved_at: Option<Instant>,
}

impl Sizes {
    pub(super) fn new(saved: SavedViewSizes) -> Self {
        Sizes {
            saved,
            known: None,
            saved_at: None,
        }
    }

    /// What is known, read from the saved file the first time (for a store of `files`
    /// sessions, which bounds what is read).
    fn known(&mut self, storage: &dyn SessionStorage, files: usize) -> &mut ByVersion<ViewSizes> {
        self.known
            .get_or_insert_with(|| ByVersion::load(storage, &self.saved.path, files))
    }

    /// The size of `of`, a file of the session whose transcript `path` has `version`, if
    /// this renderer rendered it for that version.
    pub(super) fn get(
        &mut self,
        (storage, files): (&dyn SessionStorage, usize),
        path: &Path,
        version: &FileVersion,
        of: SizeOf<'_>,
    ) -> Option<u64> {
        let renderer = self.saved.renderer;
        let sizes = self.known(storage, files).get(path, version)?;
        (sizes.renderer == renderer).then(|| sizes.get(of))?
    }

    /// Keeps the sizes `rendered` learnt, rendered from the transcript `path` at `version`,
    /// with those known already for that version.
    pub(super) fn learn(
        &mut self,
        (storage, files): (&dyn SessionStorage, usize),
        path: &Path,
        version: FileVersion,
        rendered: &Rendered,
    ) {
        let renderer = self.saved.renderer;
        let known = self.known(storage, files);
        let mut sizes = known
            .get(path, &version)
            .filter(|s| s.renderer == renderer)
            .cloned()
            .unwrap_or(ViewSizes {
                renderer,
                ..ViewSizes::default()
            });
        sizes.add(rendered);
        if !sizes.is_empty() {
            known.insert(path, version, sizes);
        }
    }

    /// Forgets what is known of the session whose transcript is `path` (a size found
    /// wrong).
    pub(super) fn forget(&mut self, path: &Path) {
        if let Some(known) = &mut self.known {
            known.retain(|p| p != path);
        }
    }

    /// Whether a save is due: sizes were read or learnt, and the last save (if any) was
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

/// The sizes of the sessions' rendered files. Their lock is taken after the listing's, never
/// with it, and is held while the saved file is read (once) or written (at most every
/// [`SAVE_EVERY`]): only lookups of sizes wait for that.
impl super::Sessions {
    /// Keeps the sizes of rendered files between runs at `saved`; `None`: not kept.
    pub(crate) fn saving_view_sizes(mut self, saved: Option<SavedViewSizes>) -> Self {
        self.sizes = saved.map(|saved| parking_lot::Mutex::new(Sizes::new(saved)));
        self
    }

    /// The size of `of`, a rendered file of session `sid`, if it was rendered for the
    /// transcript at `version` (else as the transcript is now): no load, no render.
    pub(crate) fn saved_size(
        &self,
        sid: &str,
        of: SizeOf<'_>,
        version: Option<&FileVersion>,
    ) -> Option<u64> {
        let sizes = self.sizes.as_ref()?;
        let (path, files) = {
            let listing = self.listing.lock();
            (listing.get(sid)?.path.clone(), listing.len())
        };
        let now;
        let version = match version {
            Some(version) => version,
            None => {
                now = crate::disk::version(self.storage(), &path)?;
                &now
            }
        };
        sizes
            .lock()
            .get((self.storage(), files), &path, version, of)
    }

    /// Keeps the sizes `rendered` learnt, rendered from the transcript `path` at `version`.
    pub(super) fn learn_sizes(&self, path: &Path, version: FileVersion, rendered: &Rendered) {
        let Some(sizes) = &self.sizes else { return };
        let files = self.listing.lock().len();
        sizes
            .lock()
            .learn((self.storage(), files), path, version, rendered);
    }

    /// Forgets the sizes kept of session `sid`'s rendered files (one was found wrong).
    pub(crate) fn forget_sizes(&self, sid: &str) {
        let Some(sizes) = &self.sizes else { return };
        if let Some(path) = self.listing.lock().get(sid).map(|l| l.path.clone()) {
            sizes.lock().forget(&path);
        }
    }

    /// Saves the sizes learnt since the last save, of the sessions listed: `now`, or when
    /// [`SAVE_EVERY`] passed since the last save.
    pub(super) fn save_sizes(&self, now: bool) {
        let Some(sizes) = &self.sizes else { return };
        if !now && !sizes.lock().due() {
            return;
        }
        let listed: std::collections::HashSet<PathBuf> = self
            .listing
            .lock()
            .values()
            .map(|l| l.path.clone())
            .collect();
        sizes.lock().save(self.storage(), |p| listed.contains(p));
    }
}
