//! A session's files rendered from its transcript ([`RenderedFile`]: `context.json`, the
//! views, the leaf pages and the earlier pages) and what a rendering keeps of them
//! ([`FileMemo`]): the size of every one rendered, and the bytes of some.
//!
//! Which bytes are kept: `context.json` while at most [`KEPT_MAX`] long (a longer one, a
//! session with a tool output of hundreds of megabytes, is rendered for each open and
//! dropped with its last reader); every view; the [`PAGES_KEPT`] leaf pages and earlier
//! pages read last (a `getattr` then a `read` of each). A size outlives the bytes: a
//! `stat` never renders a file again while its session's generation holds.

use std::collections::HashMap;

use super::inode::Node;
use super::layout::{view_of, View};
use gjcfs_engine::store::saved::{Decoder, Encoder};

/// A file's bytes, shared by whoever holds them.
pub type Bytes = std::sync::Arc<Vec<u8>>;

/// The longest `context.json` kept rendered between reads.
pub const KEPT_MAX: usize = 16 << 20;

/// How many leaf pages, and how many earlier pages, keep their bytes.
const PAGES_KEPT: usize = 4;

/// The tags of [`RenderedFile::encode`].
const CONTEXT: u64 = 0;
const FIRST_VIEW: u64 = 1;
const LEAF_PAGE: u64 = 16;
const EARLIER_PAGE: u64 = 17;

/// One file of a session rendered from its transcript alone.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RenderedFile {
    /// `context.json`.
    Context,
    View(View),
    /// `leaves/<id>.html`, the page of the context at branch end `id`.
    LeafPage(String),
    /// `pages/<n>.html`, one of the pages before the last.
    EarlierPage(usize),
}

impl RenderedFile {
    /// The session of `node` and the rendered file it is, if it is one (not the header,
    /// which is rendered from the transcript too but kept whole).
    pub fn of(node: &Node) -> Option<(&str, RenderedFile)> {
        if let Some((sid, view)) = view_of(node) {
            return Some((sid, RenderedFile::View(view)));
        }
        match node {
            Node::Context(s) => Some((s, RenderedFile::Context)),
            Node::LeafPage(s, id) => Some((s, RenderedFile::LeafPage(id.clone()))),
            Node::PageFile(s, n) => Some((s, RenderedFile::EarlierPage(*n))),
            _ => None,
        }
    }

    /// Whether its bytes are kept once rendered, `len` long (pages are kept by use,
    /// [`PAGES_KEPT`] of each kind).
    fn kept_whole(&self, len: usize) -> bool {
        match self {
            RenderedFile::Context => len <= KEPT_MAX,
            RenderedFile::View(_) => true,
            RenderedFile::LeafPage(_) | RenderedFile::EarlierPage(_) => false,
        }
    }

    /// Writes it in a saved file: a tag (`context.json`, the views by number, a leaf page
    /// and its id, an earlier page and its number).
    pub fn encode(&self, e: &mut Encoder) {
        match self {
            RenderedFile::Context => e.u64(CONTEXT),
            RenderedFile::View(view) => e.u64(FIRST_VIEW + *view as u64),
            RenderedFile::LeafPage(id) => {
                e.u64(LEAF_PAGE);
                e.str(id);
            }
            RenderedFile::EarlierPage(n) => {
                e.u64(EARLIER_PAGE);
                e.u64(*n as u64);
            }
        }
    }

    /// Reads what [`RenderedFile::encode`] wrote; `None` for anything else.
    pub fn decode(d: &mut Decoder) -> Option<Self> {
        Some(match d.u64()? {
            CONTEXT => RenderedFile::Context,
            LEAF_PAGE => RenderedFile::LeafPage(d.str()?.to_owned()),
            EARLIER_PAGE => RenderedFile::EarlierPage(usize::try_from(d.u64()?).ok()?),
            tag => {
                let at = usize::try_from(tag.checked_sub(FIRST_VIEW)?).ok()?;
                RenderedFile::View(*View::ALL.get(at)?)
            }
        })
    }

    fn is_leaf_page(&self) -> bool {
        matches!(self, RenderedFile::LeafPage(_))
    }
}

/// The sizes of the files rendered in one generation of a session, and the bytes kept.
#[derive(Debug, Default)]
pub struct FileMemo {
    lens: HashMap<RenderedFile, u64>,
    /// `context.json` and the views.
    kept: HashMap<RenderedFile, Bytes>,
    /// The pages read last, least recently first.
    pages: Vec<(RenderedFile, Bytes)>,
}

impl FileMemo {
    /// The size of `file`, if it was rendered.
    pub fn len(&self, file: &RenderedFile) -> Option<u64> {
        self.lens.get(file).copied()
    }

    /// The sizes of every file rendered.
    pub fn lens(&self) -> impl Iterator<Item = (&RenderedFile, u64)> {
        self.lens.iter().map(|(file, len)| (file, *len))
    }

    /// The bytes of `file`, if they are kept.
    pub fn bytes(&self, file: &RenderedFile) -> Option<Bytes> {
        match self.kept.get(file) {
            Some(bytes) => Some(bytes.clone()),
            None => self
                .pages
                .iter()
                .find(|(f, _)| f == file)
                .map(|(_, b)| b.clone()),
        }
    }

    /// Keeps what rendering `file` gave: its size, and its bytes as [`FileMemo`] keeps
    /// them.
    pub fn put(&mut self, file: RenderedFile, bytes: &Bytes) {
        self.lens.insert(file.clone(), bytes.len() as u64);
        if file.kept_whole(bytes.len()) {
            self.kept.insert(file, bytes.clone());
            return;
        }
        if matches!(file, RenderedFile::Context) {
            return;
        }
        let kind = file.is_leaf_page();
        if self
            .pages
            .iter()
            .filter(|(f, _)| f.is_leaf_page() == kind)
            .count()
            == PAGES_KEPT
        {
            let oldest = self
                .pages
                .iter()
                .position(|(f, _)| f.is_leaf_page() == kind);
            if let Some(at) = oldest {
                self.pages.remove(at);
            }
        }
        self.pages.push((file, bytes.clone()));
    }

    /// Keeps the size of `file`, known without its bytes (read from a saved file).
    pub fn put_len(&mut self, file: RenderedFile, len: u64) {
        self.lens.insert(file, len);
    }

    /// Lets go of every byte kept, keeping the sizes.
    pub fn strip(&mut self) {
        self.kept.clear();
        self.pages.clear();
    }

    /// The length of the ids of the leaf pages whose sizes it holds, together (what a
    /// stripped rendering holds for them beside their sizes).
    pub fn leaf_page_ids_len(&self) -> usize {
        self.lens
            .keys()
            .map(|f| match f {
                RenderedFile::LeafPage(id) => id.len(),
                _ => 0,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn bytes(len: usize) -> Bytes {
        Arc::new(vec![b'x'; len])
    }

    #[test]
    fn sizes_outlive_bytes_and_pages_are_kept_by_use() {
        let mut memo = FileMemo::default();
        memo.put(RenderedFile::View(View::Tree), &bytes(3));
        memo.put(RenderedFile::Context, &bytes(KEPT_MAX + 1));
        assert!(memo.bytes(&RenderedFile::View(View::Tree)).is_some());
        assert!(
            memo.bytes(&RenderedFile::Context).is_none(),
            "too long to keep"
        );
        assert_eq!(memo.len(&RenderedFile::Context), Some(KEPT_MAX as u64 + 1));
        for n in 1..=PAGES_KEPT + 1 {
            memo.put(RenderedFile::EarlierPage(n), &bytes(n));
            memo.put(RenderedFile::LeafPage(format!("e{n}")), &bytes(n));
        }
        assert!(
            memo.bytes(&RenderedFile::EarlierPage(1)).is_none(),
            "the oldest page"
        );
        assert!(memo.bytes(&RenderedFile::LeafPage("e1".into())).is_none());
        assert!(memo.bytes(&RenderedFile::EarlierPage(2)).is_some());
        assert!(memo.bytes(&RenderedFile::LeafPage("e5".into())).is_some());
        assert_eq!(memo.len(&RenderedFile::EarlierPage(1)), Some(1));
        let leaf_pages = memo.lens().filter(|(f, _)| f.is_leaf_page()).count();
        assert_eq!((leaf_pages, memo.leaf_page_ids_len()), (5, 10));
        memo.strip();
        assert!(memo.bytes(&RenderedFile::View(View::Tree)).is_none());
        assert_eq!(memo.len(&RenderedFile::View(View::Tree)), Some(3));
        assert_eq!(memo.lens().count(), 2 + 2 * (PAGES_KEPT + 1));
    }
}
