//! File contents, computed by the engine from a loaded session and cached per generation.
//!
//! A generation is (record count, leaf id): every change the mount can make (an append, a
//! branch, a reset) changes it, and while it is unchanged every rendered byte stays valid.
//!
//! [`Rendered`] holds what a session shows in one generation: the header, the leaf,
//! the files rendered from the transcript (`context.json`, the views `context.md`,
//! `context.html`, `tree.txt`, `tree.svg`, `usage.json`, and the sub-pages
//! `pages/<n>.html` and `leaves/<entry>.html`: one memo of their sizes and of the bytes
//! kept, [`FileMemo`]) and the entry files (their table made when first needed).
//! Under `--redact` the pages for people are rendered from a redacted copy of the session.
//! Stripped of its bytes ([`Rendered::strip`]), it is what the model keeps of a session no
//! longer loaded (`sessions/kept.rs`), and its `known_` methods answer from that.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use gjcfs_engine::format::blob::{is_valid_hash, BlobStore, BLOB_REF_PREFIX};
use gjcfs_engine::format::record::Record;
use gjcfs_engine::format::time::parse_iso_millis;
use gjcfs_engine::json;
use gjcfs_engine::manager::SessionManager;
use gjcfs_engine::redact::{self, Report};
use gjcfs_engine::session::tree::Session;
use gjcfs_engine::views;
use hashbrown::HashTable;

mod saved;
#[cfg(test)]
pub(crate) use saved::tests as saved_tests;
pub(crate) use saved::MIN_ENTRY_BYTES;

use super::layout::{label_file_name, View};
use super::rendered_file::{FileMemo, RenderedFile};

pub use super::rendered_file::Bytes;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generation {
    records: usize,
    leaf: Option<String>,
}

impl Generation {
    pub fn of(session: &Session) -> Self {
        Generation {
            records: session.records().len(),
            leaf: session.leaf_id().map(str::to_owned),
        }
    }
}

/// One entry as a file. A session may have a million of them: an entry holds its id and
/// numbers, and its name is made from them when asked for.
#[derive(Debug, Clone)]
pub struct EntryFile {
    pub id: Box<str>,
    /// The entry's place in file order, which its name shows.
    number: usize,
    pub mtime_ms: Option<i64>,
    record_index: usize,
}

impl EntryFile {
    /// `NNNNNN-<id>.json`, the zero-padded place in file order.
    pub fn name(&self) -> String {
        entry_file_name(self.number, &self.id)
    }
}

/// Where the links of a session directory's own pages point: `leaves/` beside them.
const SESSION_PAGE_LINKS: views::tree_svg::TreeLinks<'static> = views::tree_svg::TreeLinks {
    leaves: Some("leaves/"),
    current: Some("context.html"),
};

/// The session a session's pages are rendered from: the one its manager holds, or under
/// `--redact` a redacted copy of it ([`redact::redacted_session`]).
enum Shown<'m> {
    Stored(&'m SessionManager),
    Redacted(Arc<Session>),
}

impl Shown<'_> {
    fn read<R>(&self, f: impl FnOnce(&Session) -> R) -> R {
        match self {
            Shown::Stored(manager) => manager.read(f),
            Shown::Redacted(session) => f(session),
        }
    }
}

/// A page in a directory beside `context.html` (`leaves/`, `pages/`): the context at
/// `leaf` (else the current one), its page `page` of messages linking to the others by
/// `page_links`, its images in `../blobs/`, its drawing's branch ends in `leaves`.
fn page_beside(
    (shown, blobs): (&Shown<'_>, &BlobStore),
    leaf: Option<&str>,
    leaves: Option<&str>,
    page: Option<usize>,
    page_links: Option<views::html::PageLinks<'_>>,
) -> Vec<u8> {
    shown.read(|session| {
        views::html::context_html(
            session,
            &views::html::PageOptions {
                images: views::html::Images::Link("../blobs/"),
                cold: Some(blobs),
                leaf,
                tree: Some(views::tree_svg::TreeLinks {
                    leaves,
                    current: Some("../context.html"),
                }),
                page,
                page_links,
            },
        )
    })
}

/// What a session shows, rendered for one generation.
#[derive(Debug)]
pub struct Rendered {
    pub generation: Generation,
    /// `--redact`: the pages for people (`context.md`, `context.html`, `pages/`, `leaves/`,
    /// `tree.txt`, `tree.svg`) are rendered from a redacted copy of the session, made when
    /// first needed and kept with the rendered bytes.
    redact: bool,
    redacted: Option<Arc<Session>>,
    pub header: Bytes,
    pub header_mtime_ms: Option<i64>,
    pub leaf: Bytes,
    /// The entry files, listed when first needed (reading `context.json` of a session of
    /// 100,000 entries does not need their names).
    table: Option<EntryTable>,
    /// Sizes of the entry files rendered so far (the bytes are not kept: a kernel caches
    /// entries itself, and a session of 100,000 entries read whole would hold them all).
    entry_sizes: HashMap<usize, u64>,
    /// The files rendered from the transcript: their sizes, and the bytes kept.
    files: FileMemo,
    blob_refs: Option<Vec<String>>,
    labels: Option<BTreeMap<String, String>>,
    /// The entries with a page in `leaves/`, in drawing order.
    branch_ends: Option<Vec<String>>,
    /// How many pages the context at the leaf fills.
    page_count: Option<usize>,
}

fn pretty_record(record: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    json::write_pretty_object(record.fields(), &mut out, 0);
    out.push(b'\n');
    out
}

/// `NNNNNN-<id>.json`.
pub fn entry_file_name(index: usize, id: &str) -> String {
    format!("{index:06}-{id}.json")
}

/// Every entry as a file, in file order, and by id.
///
/// Numbers are places in the file and never change while the file only grows: the table
/// is extended with the records appended since it was made ([`Rendered::advance`]), never
/// numbered afresh, so an append costs the entries it adds, not the entries before it.
#[derive(Debug)]
pub(super) struct EntryTable {
    entries: Vec<EntryFile>,
    /// Places in `entries`, found by the id of the entry there (kept once, in `entries`).
    by_id: HashTable<usize>,
    hasher: RandomState,
    /// How many of the session's records the table has seen (headers included).
    covered: usize,
    /// The number the next entry gets: every entry counts, with an id or without.
    next_number: usize,
    /// The newest entry time (the entries directory's mtime).
    newest_ms: Option<i64>,
}

impl EntryTable {
    fn new(session: &Session) -> Self {
        let mut table = EntryTable {
            entries: Vec::new(),
            by_id: HashTable::new(),
            hasher: RandomState::new(),
            covered: 0,
            next_number: 0,
            newest_ms: None,
        };
        table.extend(session);
        table
    }

    /// Numbers the records the table has not seen yet.
    fn extend(&mut self, session: &Session) {
        let records = session.records();
        for (index, record) in records.iter().enumerate().skip(self.covered) {
            if record.is_header() {
                continue;
            }
            let number = self.next_number;
            self.next_number += 1;
            // A leaf marker is the leaf pointer on its parent, not an entry to show.
            if gjcfs_engine::manager::leaf_marker::is_marker(session, index) {
                continue;
            }
            let Some(id) = record.id() else { continue };
            let mtime_ms = record.timestamp().and_then(parse_iso_millis);
            self.newest_ms = self.newest_ms.max(mtime_ms);
            let hash = self.hasher.hash_one(id);
            let (entries, hasher) = (&self.entries, &self.hasher);
            // The last entry with an id is the one it names, as in the session's index.
            match self.by_id.find_entry(hash, |&at| *entries[at].id == *id) {
                Ok(mut found) => *found.get_mut() = entries.len(),
                Err(_) => {
                    self.by_id.insert_unique(hash, entries.len(), |&at| {
                        hasher.hash_one(&*entries[at].id)
                    });
                }
            }
            self.entries.push(EntryFile {
                id: id.into(),
                number,
                mtime_ms,
                record_index: index,
            });
        }
        self.covered = records.len();
    }

    /// Whether `session` still holds the records the table numbered, at the same places
    /// (else it is numbered afresh):
    /// only the last one is looked at for the session the table was made from (whose
    /// records are only ever appended to), every one for a session loaded anew.
    fn numbers_hold(&self, session: &Session, same_session: bool) -> bool {
        let records = session.records();
        if records.len() < self.covered {
            return false;
        }
        let same = |e: &EntryFile| records[e.record_index].id() == Some(&*e.id);
        match same_session {
            true => self.entries.last().is_none_or(same),
            false => self.entries.iter().all(same),
        }
    }

    fn entry(&self, id: &str) -> Option<&EntryFile> {
        let entries = &self.entries;
        self.by_id
            .find(self.hasher.hash_one(id), |&at| &*entries[at].id == id)
            .map(|&at| &entries[at])
    }

    /// The entry named `name`: `NNNNNN-<id>.json` or `<id>.json`.
    fn find(&self, name: &str) -> Option<&EntryFile> {
        let stem = name.strip_suffix(".json")?;
        if let Some(entry) = self.entry(stem) {
            return Some(entry);
        }
        let (_, id) = stem.split_once('-')?;
        let entry = self.entry(id)?;
        (entry.name() == name).then_some(entry)
    }
}

impl Rendered {
    pub fn new(session: &Session, redact: bool) -> Self {
        let leaf = match gjcfs_engine::manager::leaf_marker::shown_leaf(session) {
            Some(id) => format!("{id}\n").into_bytes(),
            None => Vec::new(),
        };
        Rendered {
            generation: Generation::of(session),
            redact,
            redacted: None,
            header: Arc::new(pretty_record(&session.records()[0])),
            header_mtime_ms: session.header().timestamp().and_then(parse_iso_millis),
            leaf: Arc::new(leaf),
            table: None,
            entry_sizes: HashMap::new(),
            files: FileMemo::default(),
            blob_refs: None,
            labels: None,
            branch_ends: None,
            page_count: None,
        }
    }

    /// Lets go of every rendered byte but the header's and the leaf's, keeping the names and
    /// sizes: what the model keeps of a session that is no longer loaded, to answer
    /// lookups, attributes and listings while its file is unchanged (the `known_` methods).
    pub fn strip(&mut self) {
        self.files.strip();
        self.redacted = None;
    }

    /// About how many bytes a stripped rendering holds.
    pub fn stripped_size(&self) -> usize {
        let table = self
            .table
            .as_ref()
            .map_or(0, |t| t.entries.iter().map(|e| e.id.len() + 80).sum());
        let strings = |items: &mut dyn Iterator<Item = usize>| items.map(|n| n + 32).sum::<usize>();
        512 + self.header.len()
            + self.leaf.len()
            + table
            + 32 * self.entry_sizes.len()
            + strings(&mut self.blob_refs.iter().flatten().map(String::len))
            + strings(&mut self.labels.iter().flatten().map(|(k, v)| k.len() + v.len()))
            + strings(&mut self.branch_ends.iter().flatten().map(String::len))
            + self.files.lens().count() * 32
            + self.files.leaf_page_ids_len()
    }

    /// The size of `file`, if it was rendered.
    pub fn known_len(&self, file: &RenderedFile) -> Option<u64> {
        self.files.len(file)
    }

    /// The entry table, if it was made.
    pub fn known_entries(&self) -> Option<&[EntryFile]> {
        self.table.as_ref().map(|t| &t.entries[..])
    }

    /// The newest entry time, if the entry table was made: `Some(None)` for no time.
    pub fn known_newest_entry_ms(&self) -> Option<Option<i64>> {
        self.table.as_ref().map(|t| t.newest_ms)
    }

    /// The entry named `name`, if the entry table was made: `Some(None)` for no such entry.
    pub fn known_find_entry(&self, name: &str) -> Option<Option<&EntryFile>> {
        self.table.as_ref().map(|t| t.find(name))
    }

    /// The entry `id`, if the entry table was made: `Some(None)` for no such entry.
    pub fn known_entry(&self, id: &str) -> Option<Option<&EntryFile>> {
        self.table.as_ref().map(|t| t.entry(id))
    }

    /// The size of entry `id`'s file, if it was rendered.
    pub fn known_entry_size(&self, id: &str) -> Option<u64> {
        let index = self.table.as_ref()?.entry(id)?.record_index;
        self.entry_sizes.get(&index).copied()
    }

    /// The branch ends, if they were found.
    pub fn known_branch_ends(&self) -> Option<&[String]> {
        self.branch_ends.as_deref()
    }

    /// How many pages the context fills, if counted.
    pub fn known_page_count(&self) -> Option<usize> {
        self.page_count
    }

    /// The labels, if they were read.
    pub fn known_labels(&self) -> Option<&BTreeMap<String, String>> {
        self.labels.as_ref()
    }

    /// The blob references, if they were found.
    pub fn known_blob_refs(&self) -> Option<&[String]> {
        self.blob_refs.as_deref()
    }

    /// The target of `labels/<label>`, if the labels and the entry table are known:
    /// `Some(None)` for no such label.
    pub fn known_label_target(&self, label: &str) -> Option<Option<String>> {
        let labels = self.labels.as_ref()?;
        let Some(id) = labels.get(label) else {
            return Some(None);
        };
        let entry = self.table.as_ref()?.entry(id);
        Some(entry.map(|e| format!("../entries/{}", e.name())))
    }

    /// Renders `session` as it is now, keeping what was made before that still holds: the
    /// entry table (extended, so that entry names never change while the file only grows)
    /// and the sizes of entries not in `edited` (record indices whose message a patch
    /// replaced). `same_session`: `session` is the one rendered before, grown since;
    /// otherwise it was loaded anew, and the table is checked whole.
    pub fn advance(&mut self, session: &Session, same_session: bool, edited: &[usize]) {
        let table = self.table.take();
        let mut sizes = std::mem::take(&mut self.entry_sizes);
        *self = Rendered::new(session, self.redact);
        let Some(mut table) = table.filter(|t| t.numbers_hold(session, same_session)) else {
            return;
        };
        table.extend(session);
        self.table = Some(table);
        if same_session {
            sizes.retain(|index, _| !edited.contains(index));
            self.entry_sizes = sizes;
        }
    }

    /// The newest entry time, for the entries directory.
    pub fn newest_entry_ms(&mut self, manager: &SessionManager) -> Option<i64> {
        self.table(manager).newest_ms
    }

    fn table(&mut self, manager: &SessionManager) -> &EntryTable {
        self.table
            .get_or_insert_with(|| manager.read(EntryTable::new))
    }

    /// The entry files in file order.
    pub fn entries(&mut self, manager: &SessionManager) -> &[EntryFile] {
        &self.table(manager).entries
    }

    /// The entry named `name`: `NNNNNN-<id>.json` or `<id>.json`.
    pub fn find_entry(&mut self, manager: &SessionManager, name: &str) -> Option<&EntryFile> {
        self.table(manager).find(name)
    }

    pub fn entry(&mut self, manager: &SessionManager, id: &str) -> Option<&EntryFile> {
        self.table(manager).entry(id)
    }

    /// The pretty JSON of entry `id`.
    pub fn entry_bytes(&mut self, manager: &SessionManager, id: &str) -> Option<Bytes> {
        let index = self.entry(manager, id)?.record_index;
        let blobs = manager.blobs();
        let bytes = Arc::new(manager.read(|s| {
            pretty_record(&gjcfs_engine::format::cold_spill::rehydrate_record(
                s.record(index),
                &blobs,
            ))
        }));
        self.entry_sizes.insert(index, bytes.len() as u64);
        Some(bytes)
    }

    /// The size of entry `id`'s file.
    pub fn entry_size(&mut self, manager: &SessionManager, id: &str) -> Option<u64> {
        let index = self.entry(manager, id)?.record_index;
        match self.entry_sizes.get(&index) {
            Some(&size) => Some(size),
            None => self.entry_bytes(manager, id).map(|b| b.len() as u64),
        }
    }

    /// The blobs the session's records reference (`blob:sha256:<hex>` anywhere in a
    /// record), sorted, each once.
    pub fn blob_refs(&mut self, manager: &SessionManager) -> &[String] {
        self.blob_refs.get_or_insert_with(|| {
            let mut found = std::collections::BTreeSet::new();
            manager.read(|session| {
                for record in session.records() {
                    let line = record.to_line();
                    let mut rest = line.as_str();
                    while let Some(at) = rest.find(BLOB_REF_PREFIX) {
                        let after = &rest[at + BLOB_REF_PREFIX.len()..];
                        if let Some(hash) = after.get(..64).filter(|h| is_valid_hash(h)) {
                            found.insert(hash.to_owned());
                        }
                        rest = after;
                    }
                }
            });
            found.into_iter().collect()
        })
    }

    /// The session the pages are rendered from (see [`Shown`]).
    fn shown<'m>(&mut self, manager: &'m SessionManager) -> Shown<'m> {
        if !self.redact {
            return Shown::Stored(manager);
        }
        let copy = self.redacted.get_or_insert_with(|| {
            let blobs = manager.blobs();
            // The mount counts nothing: what it redacts, `gjcfs export --redact` reports.
            let mut report = Report::default();
            Arc::new(manager.read(|s| redact::redacted_session(s, Some(&blobs), &mut report)))
        });
        Shown::Redacted(copy.clone())
    }

    /// The bytes of `file`, rendered unless kept; `None` when there is no such file (a
    /// leaf page of an entry that ends no branch, an earlier page past the last).
    pub fn file_bytes(&mut self, manager: &SessionManager, file: &RenderedFile) -> Option<Bytes> {
        if let Some(bytes) = self.files.bytes(file) {
            return Some(bytes);
        }
        let bytes = Arc::new(match file {
            RenderedFile::Context => self.render_context(manager),
            RenderedFile::View(view) => self.render_view(manager, *view),
            RenderedFile::LeafPage(id) => self.render_leaf_page(manager, id)?,
            RenderedFile::EarlierPage(n) => self.render_earlier_page(manager, *n)?,
        });
        self.files.put(file.clone(), &bytes);
        if matches!(file, RenderedFile::Context) && self.files.bytes(file).is_none() {
            // A context too large to keep built its messages for the rendering alone.
            gjcfs_engine::storage::return_freed_memory();
        }
        Some(bytes)
    }

    /// The size of `file`, rendering it only the first time.
    pub fn file_len(&mut self, manager: &SessionManager, file: &RenderedFile) -> Option<u64> {
        match self.files.len(file) {
            Some(len) => Some(len),
            None => self.file_bytes(manager, file).map(|b| b.len() as u64),
        }
    }

    /// `view` rendered.
    fn render_view(&mut self, manager: &SessionManager, view: View) -> Vec<u8> {
        let shown = self.shown(manager);
        // Cold-spilled content is shown as the agent shows it, from its blobs.
        let blobs = manager.blobs();
        shown.read(|session| match view {
            View::ContextMd => views::markdown::context_md_rehydrated(session, "blobs/", &blobs),
            View::ContextHtml => views::html::context_html(
                session,
                &views::html::PageOptions {
                    images: views::html::Images::Link("blobs/"),
                    cold: Some(&blobs),
                    leaf: None,
                    tree: Some(SESSION_PAGE_LINKS),
                    page: None,
                    page_links: Some(views::html::PageLinks {
                        dir: "pages/",
                        last: "context.html",
                    }),
                },
            ),
            View::TreeSvg => views::tree_svg::tree_svg(session, Some(&blobs), &SESSION_PAGE_LINKS),
            View::Tree => views::tree::tree_txt_rehydrated(session, &blobs),
            View::Usage => views::usage::session_usage_json(session),
        })
    }

    /// The entries with a page in `leaves/` (the branch ends whose ids name files).
    pub fn branch_ends(&mut self, manager: &SessionManager) -> &[String] {
        self.branch_ends
            .get_or_insert_with(|| manager.read(views::tree_svg::branch_ends))
    }

    /// The page of the context at branch end `id` (`leaves/<id>.html`), if it is one: the
    /// newest messages at that entry (the page names those it leaves out).
    fn render_leaf_page(&mut self, manager: &SessionManager, id: &str) -> Option<Vec<u8>> {
        if !self.branch_ends(manager).iter().any(|end| end == id) {
            return None;
        }
        let (shown, blobs) = (self.shown(manager), manager.blobs());
        Some(page_beside(
            (&shown, &blobs),
            Some(id),
            Some(""),
            None,
            None,
        ))
    }

    /// How many pages of [`views::html::PAGE_MESSAGES`] the context at the leaf fills.
    pub fn page_count(&mut self, manager: &SessionManager) -> usize {
        *self.page_count.get_or_insert_with(|| {
            let messages = manager.read(|s| s.build_context().messages.len());
            messages.div_ceil(views::html::PAGE_MESSAGES).max(1)
        })
    }

    /// `pages/<n>.html`: page `n` of the context at the leaf, one of the pages before the
    /// last (which is `context.html`).
    fn render_earlier_page(&mut self, manager: &SessionManager, n: usize) -> Option<Vec<u8>> {
        if n == 0 || n >= self.page_count(manager) {
            return None;
        }
        let links = views::html::PageLinks {
            dir: "",
            last: "../context.html",
        };
        let (shown, blobs) = (self.shown(manager), manager.blobs());
        Some(page_beside(
            (&shown, &blobs),
            None,
            Some("../leaves/"),
            Some(n),
            Some(links),
        ))
    }

    /// Label file name ([`label_file_name`]) → labelled entry id.
    pub fn labels(&mut self, manager: &SessionManager) -> &BTreeMap<String, String> {
        self.labels.get_or_insert_with(|| {
            manager
                .read(Session::label_targets)
                .into_iter()
                .map(|(label, id)| (label_file_name(&label), id))
                .collect()
        })
    }

    /// The target of `labels/<label>`: the labelled entry's file.
    pub fn label_target(&mut self, manager: &SessionManager, label: &str) -> Option<String> {
        let id = self.labels(manager).get(label)?.clone();
        Some(format!("../entries/{}", self.entry(manager, &id)?.name()))
    }

    /// `context.json`: the context at the leaf with blob references resolved.
    fn render_context(&self, manager: &SessionManager) -> Vec<u8> {
        let blobs = manager.blobs();
        let mut out = Vec::new();
        manager.with_context(|context| {
            context
                .with_blobs_resolved(&blobs)
                .write_pretty_into(&mut out)
        });
        out.push(b'\n');
        out
    }
}

#[cfg(test)]
mod tests {
    use gjcfs_engine::read::replay::parse_session_entries;

    use super::*;

    #[test]
    fn entries_are_found_by_id_and_by_name_the_last_of_an_id_winning() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/\"}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"1\"}}\n",
            "{\"type\":\"message\",\"id\":\"b\",\"parentId\":\"a\",\"message\":{\"role\":\"user\",\"content\":\"2\"}}\n",
            "{\"type\":\"message\",\"id\":\"a\",\"parentId\":\"b\",\"message\":{\"role\":\"user\",\"content\":\"3\"}}\n",
        );
        let session = Session::from_records(parse_session_entries(text).unwrap().records);
        let table = EntryTable::new(&session);
        let names: Vec<String> = table.entries.iter().map(EntryFile::name).collect();
        assert_eq!(names, ["000000-a.json", "000001-b.json", "000002-a.json"]);
        assert_eq!(
            table.entry("a").map(EntryFile::name).as_deref(),
            Some("000002-a.json")
        );
        assert_eq!(table.entry("b").map(|e| e.record_index), Some(2));
        assert!(table.entry("c").is_none());
        assert_eq!(table.find("000001-b.json").map(|e| &*e.id), Some("b"));
        assert_eq!(table.find("b.json").map(|e| &*e.id), Some("b"));
        assert!(
            table.find("000000-a.json").is_none(),
            "the id names the later entry"
        );
        assert!(table.find("000009-b.json").is_none());
    }
}
