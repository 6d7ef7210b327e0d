//! A loaded session: its records, the id index, the tree, the leaf pointer and labels.
//!
//! Invariants:
//! - `records[0]` is the header; the other records are in file order. Records of type
//!   `session` after the first are kept (and written back) but are not entries.
//! - `by_id` maps an entry id to the *last* entry carrying it, as the original's index does;
//!   `parents[i]` is the index of the entry `records[i].parentId` names through `by_id`, and
//!   `dangling` lists, by id, the entries whose string `parentId` names no entry. Adding
//!   records keeps all three exactly as indexing every record afresh would make them.
//! - `duplicates` counts the entries whose id an earlier entry already carries.
//! - The leaf is an entry index or `None` (an empty session, or after [`Session::reset_leaf`]).
//!   After loading it is the last entry in file order, whatever its type.
//! - Labels come from `label` entries in file order: a truthy label sets, an empty or absent
//!   one clears.
//!
//! Building the index of a large session reads the id and parent id of every record;
//! [`Session::from_summarized`] reads them from the [`Summary`] taken when each record was
//! parsed (see [`crate::format::summary`]).

use std::collections::{BTreeMap, HashMap};

use crate::format::record::{Header, Record, RecordType};
use crate::format::sanitize::sanitize_record;
use crate::format::summary::{Key, Summary};
use crate::json::{self, Value};

/// An entry id that is not in the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Entry {0} not found")]
pub struct EntryNotFound(pub String);

/// A session held in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    records: Vec<Record>,
    index: Index,
    labels: HashMap<String, String>,
    leaf: Option<usize>,
}

/// The id index and the parent links of a session's records.
#[derive(Debug, Clone, PartialEq, Default)]
struct Index {
    by_id: IdMap<usize>,
    parents: Vec<Option<usize>>,
    dangling: IdMap<Vec<usize>>,
    duplicates: usize,
}

/// A map keyed by entry ids. Ids come from the session's own file; the hasher is seeded
/// per process, like the standard one, and several times faster on short keys.
type IdMap<V> = HashMap<Key, V, foldhash::fast::RandomState>;

/// What the index reads of record `i`: whether it is a header, its id, its parent id.
type KeyOf<'k> = dyn Fn(usize) -> (bool, Option<&'k str>, Option<&'k str>) + 'k;

impl Index {
    /// Indexes records `from..to` (the ones before are indexed): their ids, then their
    /// parents, re-resolving earlier parents that a new id now names.
    fn extend<'k>(&mut self, from: usize, to: usize, key: &KeyOf<'k>) {
        let mut moved = false;
        self.by_id.reserve(to.saturating_sub(from));
        self.parents.reserve(to.saturating_sub(from));
        for i in from..to {
            if let (false, Some(id), _) = key(i) {
                if let Some(earlier) = self.by_id.insert(Key::new(id), i) {
                    self.duplicates += 1;
                    moved |= earlier < from;
                }
            }
        }
        if moved {
            // An id now names a later entry, which takes the earlier one's children.
            self.parents.clear();
            self.dangling.clear();
            self.resolve(0, to, key);
            return;
        }
        let found: Vec<Key> = self
            .dangling
            .keys()
            .filter(|id| self.by_id.contains_key(id.as_str()))
            .cloned()
            .collect();
        for id in found {
            let parent = self.by_id.get(id.as_str()).copied();
            for child in self.dangling.remove(id.as_str()).unwrap_or_default() {
                self.parents[child] = parent;
            }
        }
        self.resolve(from, to, key);
    }

    /// Resolves the parents of records `from..to` (`parents` holds the ones before).
    fn resolve<'k>(&mut self, from: usize, to: usize, key: &KeyOf<'k>) {
        for i in from..to {
            let parent = match key(i) {
                (false, _, Some(parent)) => parent,
                _ => {
                    self.parents.push(None);
                    continue;
                }
            };
            let found = self.by_id.get(parent).copied();
            if found.is_none() {
                self.dangling.entry(Key::new(parent)).or_default().push(i);
            }
            self.parents.push(found);
        }
    }
}

/// The entry tree: roots and children as record indices (no recursion, so any depth works).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    /// The record indices of the root entries, oldest first.
    pub roots: Vec<usize>,
    /// `children[i]`: the children of record `i`, oldest first.
    pub children: Vec<Vec<usize>>,
}

impl Session {
    /// Indexes `records` (header first, already migrated). The leaf is the last entry.
    pub fn from_records(records: Vec<Record>) -> Self {
        let mut session = Self::unindexed(records);
        let records = &session.records;
        let key = |i: usize| {
            (
                records[i].is_header(),
                records[i].id(),
                records[i].parent_id(),
            )
        };
        session.index.extend(0, records.len(), &key);
        session.finish_index(0);
        session
    }

    /// [`Session::from_records`], reading each record's id and parent id from `summaries`
    /// (one per record, taken from the records as they are now).
    pub fn from_summarized(records: Vec<Record>, summaries: &[Summary]) -> Self {
        assert_eq!(records.len(), summaries.len(), "one summary per record");
        let mut session = Self::unindexed(records);
        let records = &session.records;
        let key = |i: usize| {
            let summary = &summaries[i];
            (records[i].is_header(), summary.id(), summary.parent_id())
        };
        session.index.extend(0, records.len(), &key);
        session.finish_index(0);
        session
    }

    fn unindexed(records: Vec<Record>) -> Self {
        Session {
            records,
            index: Index::default(),
            labels: HashMap::new(),
            leaf: None,
        }
    }

    /// Applies the labels of the records from `from` on and puts the leaf on the last entry.
    fn finish_index(&mut self, from: usize) {
        for i in from..self.records.len() {
            self.apply_label(i);
        }
        let last_entry = self.entry_indices().next_back();
        self.leaf = last_entry;
    }

    fn apply_label(&mut self, i: usize) {
        let record = &self.records[i];
        if record.record_type() != RecordType::Label {
            return;
        }
        let Some(target) = record.get_str("targetId") else {
            return;
        };
        match record.get("label") {
            Some(label) if label.is_truthy() => {
                let text = match label {
                    Value::String(s) => s.to_string_lossy().into_owned(),
                    other => json::to_compact(other),
                };
                self.labels.insert(target.to_owned(), text);
            }
            _ => {
                self.labels.remove(target);
            }
        }
    }

    /// Runs the load-time OpenAI replay sanitizer (`format::sanitize`) over every entry, in
    /// place; the `entry_patch` records describing the change.
    pub fn sanitize_openai_replay(&mut self) -> Vec<Record> {
        let all: Vec<usize> = self.entry_indices().collect();
        self.sanitize_entries(all)
    }

    /// [`Session::sanitize_openai_replay`] for the records at `candidates` only (every record
    /// the sanitizer would change must be among them), in the order given.
    pub fn sanitize_entries(&mut self, candidates: impl IntoIterator<Item = usize>) -> Vec<Record> {
        let mut patches = Vec::new();
        for i in candidates {
            if let Some((message, patch)) = sanitize_record(&self.records[i]) {
                self.replace_message(i, message);
                patches.push(patch);
            }
        }
        patches
    }

    /// Indices of the entries (every record but `session` ones), in file order.
    pub fn entry_indices(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        (0..self.records.len()).filter(|&i| !self.records[i].is_header())
    }

    /// Every record, the header first, the rest in file order.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Every record (as [`Session::records`]), taking them out of the session.
    pub fn into_records(self) -> Vec<Record> {
        self.records
    }

    /// The record at `index` (0 is the header). Panics when `index` is out of range.
    pub fn record(&self, index: usize) -> &Record {
        &self.records[index]
    }

    /// The view of the first record, the header.
    pub fn header(&self) -> Header<'_> {
        Header(self.records[0].fields())
    }

    /// All entries in file order (`getEntries`).
    pub fn entries(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| !r.is_header())
    }

    /// How many entries there are (every record but `session` ones).
    pub fn entry_count(&self) -> usize {
        self.entry_indices().count()
    }

    /// Whether any two entries share an id.
    pub fn has_duplicate_ids(&self) -> bool {
        self.index.duplicates > 0
    }

    /// The index of the entry with `id` (the last one, if several share it).
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.by_id.get(id).copied()
    }

    /// The entry with `id` (the last one, if several share it), `getEntry`.
    pub fn get_entry(&self, id: &str) -> Option<&Record> {
        self.index_of(id).map(|i| &self.records[i])
    }

    /// The record index of an entry's parent, when the parent is in the session.
    pub fn parent_of(&self, index: usize) -> Option<usize> {
        self.index.parents.get(index).copied().flatten()
    }

    /// The record index of the leaf entry; `None` for an empty session or after
    /// [`Session::reset_leaf`].
    pub fn leaf(&self) -> Option<usize> {
        self.leaf
    }

    /// The leaf entry's id; `None` when there is no leaf or it has no string id.
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.and_then(|i| self.records[i].id())
    }

    /// The leaf entry, if there is a leaf.
    pub fn leaf_entry(&self) -> Option<&Record> {
        self.leaf.map(|i| &self.records[i])
    }

    /// Appends an entry as the new leaf and returns its index.
    pub fn push_entry(&mut self, record: Record) -> usize {
        let index = self.records.len();
        self.records.push(record);
        self.index_records(index);
        self.apply_label(index);
        self.leaf = Some(index);
        index
    }

    /// Appends records that follow the session's records in its file (entries, and
    /// headers after the first), indexed as a load of the whole file would index them; the
    /// leaf goes to the last entry, as after a load.
    pub fn extend(&mut self, records: Vec<Record>) {
        let from = self.records.len();
        self.records.extend(records);
        self.index_records(from);
        self.finish_index(from);
    }

    /// Indexes the records from `from` on.
    fn index_records(&mut self, from: usize) {
        let records = &self.records;
        let key = |i: usize| {
            (
                records[i].is_header(),
                records[i].id(),
                records[i].parent_id(),
            )
        };
        self.index.extend(from, records.len(), &key);
    }

    /// Removes the last entry (an append that could not be persisted) and restores `leaf`.
    pub fn pop_entry(&mut self, leaf: Option<usize>) -> Option<Record> {
        if self.records.len() <= 1 {
            return None;
        }
        let index = self.records.len() - 1;
        let id = self.records[index]
            .id()
            .filter(|_| !self.records[index].is_header());
        let shared = id.is_some_and(|id| {
            (1..index).any(|i| !self.records[i].is_header() && self.records[i].id() == Some(id))
        });
        let named = self.index.parents[..index].contains(&Some(index));
        let record = self.records.pop()?;
        if shared || named {
            // The entry took over an id or children from earlier records: index afresh.
            self.index = Index::default();
            self.index_records(0);
        } else if !record.is_header() {
            self.index.parents.pop();
            if let Some(id) = record.id() {
                self.index.by_id.remove(id);
            }
            if let Some(parent) = record.parent_id() {
                if let Some(children) = self.index.dangling.get_mut(parent) {
                    children.retain(|&child| child != index);
                    if children.is_empty() {
                        self.index.dangling.remove(parent);
                    }
                }
            }
        } else {
            self.index.parents.pop();
        }
        if record.record_type() == RecordType::Label {
            self.labels.clear();
            for i in 0..self.records.len() {
                self.apply_label(i);
            }
        }
        self.leaf = leaf;
        Some(record)
    }

    /// Mutable access to the header's members.
    pub fn header_mut(&mut self) -> &mut crate::json::Object {
        self.records[0].fields_mut()
    }

    /// Replaces the `message` of the `message` entry at `index` (entry patches, sanitizing).
    pub fn replace_message(&mut self, index: usize, message: Value) {
        self.records[index].fields_mut().insert("message", message);
    }

    /// Moves the leaf to an existing entry (`branch`).
    pub fn branch(&mut self, id: &str) -> Result<(), EntryNotFound> {
        let index = self
            .index_of(id)
            .ok_or_else(|| EntryNotFound(id.to_owned()))?;
        self.leaf = Some(index);
        Ok(())
    }

    /// Sets the leaf to null: the next entry appended is a new root (`resetLeaf`).
    pub fn reset_leaf(&mut self) {
        self.leaf = None;
    }

    /// The label of an entry.
    pub fn label(&self, id: &str) -> Option<&str> {
        self.labels.get(id).map(String::as_str)
    }

    /// Entry id → its current label, never empty (a truthy label that is not a string is
    /// held as its compact JSON). The ids need not be in the session.
    pub fn labels(&self) -> &HashMap<String, String> {
        &self.labels
    }

    /// Label name → entry id: the entries that currently carry a label (as
    /// [`Session::label`] resolves them) and are in the session. When several entries carry
    /// the same label, the one labelled last (in file order) wins. Labels of ids not in the
    /// session are skipped.
    pub fn label_targets(&self) -> BTreeMap<String, String> {
        // The position of the label entry that set each current label.
        let mut set_at: HashMap<&str, usize> = HashMap::new();
        for (i, record) in self.records.iter().enumerate() {
            if record.record_type() == RecordType::Label {
                if let Some(target) = record.get_str("targetId") {
                    set_at.insert(target, i);
                }
            }
        }
        let mut winners: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
        for (target, label) in &self.labels {
            let usable = !label.is_empty() && self.index_of(target).is_some();
            let at = set_at.get(target.as_str()).copied().unwrap_or_default();
            if usable
                && winners
                    .get(label.as_str())
                    .is_none_or(|&(prev, _)| at > prev)
            {
                winners.insert(label, (at, target));
            }
        }
        winners
            .into_iter()
            .map(|(label, (_, target))| (label.to_owned(), target.to_owned()))
            .collect()
    }

    /// Root-to-`from` path as record indices; cycles and unknown parents end the walk.
    pub fn path_to(&self, from: usize) -> Vec<usize> {
        let mut visited = vec![false; self.records.len()];
        let mut path = Vec::new();
        let mut at = Some(from);
        while let Some(i) = at {
            if visited[i] {
                break;
            }
            visited[i] = true;
            path.push(i);
            at = self.parent_of(i);
        }
        path.reverse();
        path
    }

    /// `getBranch(fromId?)`: the path from the root to `from_id`, or to the leaf.
    pub fn branch_path(&self, from_id: Option<&str>) -> Result<Vec<&Record>, EntryNotFound> {
        let from = match from_id {
            Some(id) => Some(
                self.index_of(id)
                    .ok_or_else(|| EntryNotFound(id.to_owned()))?,
            ),
            None => self.leaf,
        };
        Ok(from
            .map(|i| self.path_to(i))
            .unwrap_or_default()
            .into_iter()
            .map(|i| &self.records[i])
            .collect())
    }

    /// `getTree()`: every indexed entry under its parent. Entries whose parent is null, themselves,
    /// missing, or would close a cycle are roots; children (and roots) are ordered by
    /// timestamp, stably, with unparsable timestamps last.
    pub fn tree(&self) -> Tree {
        let n = self.records.len();
        let mut children = vec![Vec::new(); n];
        // Each entry is attached at most once and has no parent yet when it is, so the edge
        // closes a cycle exactly when the parent is already in the entry's own tree.
        let mut forest = DisjointSets::new(n);
        let mut roots = Vec::new();
        for i in self.entry_indices() {
            // A duplicated id is represented by its last entry only.
            let indexed = self.records[i].id().and_then(|id| self.index_of(id));
            if indexed.is_some_and(|j| j != i) {
                continue;
            }
            let parent = self.parent_of(i).filter(|&p| p != i);
            match parent {
                Some(p) if forest.union(i, p) => children[p].push(i),
                _ => roots.push(i),
            }
        }
        // The original compares `getTime()` differences, which are NaN for an unparsable
        // timestamp; that comparator is no order, and its result is unspecified. Sorting needs
        // a total order, so unparsable timestamps go after all valid ones, in file order.
        let times: Vec<Option<i64>> = self
            .records
            .iter()
            .map(|r| {
                r.get("timestamp")
                    .and_then(crate::format::time::date_millis)
            })
            .collect();
        let key = |i: &usize| (times[*i].is_none(), times[*i]);
        for list in &mut children {
            list.sort_by_key(key);
        }
        roots.sort_by_key(key);
        Tree { roots, children }
    }
}

/// Union-find over record indices.
struct DisjointSets(Vec<usize>);

impl DisjointSets {
    fn new(n: usize) -> Self {
        DisjointSets((0..n).collect())
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    /// Joins the sets of `a` and `b`; false when they were already one set.
    fn union(&mut self, a: usize, b: usize) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        self.0[ra] = rb;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::replay::parse_session_entries;

    #[test]
    fn label_targets_resolve_the_latest_label_of_each_entry() {
        let mut text =
            String::from("{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/\"}\n");
        for id in ["a", "b", "c"] {
            text.push_str(&format!(
                "{{\"type\":\"custom\",\"id\":\"{id}\",\"parentId\":null,\"timestamp\":\"t\"}}\n"
            ));
        }
        for (n, (target, label)) in [
            ("a", "x"),    // "x" names a …
            ("b", "x"),    // … then b, labelled later
            ("a", "y"),    // a's label becomes "y": "x" still names b
            ("c", "gone"), // set, then cleared
            ("c", ""),
            ("b", "x"),       // set again: b stays the latest "x"
            ("zz", "orphan"), // no such entry
            ("c", "a/b"),     // not a file name, still a label
            ("a", ".."),
        ]
        .iter()
        .enumerate()
        {
            text.push_str(&format!(
                "{{\"type\":\"label\",\"id\":\"l{n}\",\"parentId\":null,\"timestamp\":\"t\",\"targetId\":\"{target}\",\"label\":\"{label}\"}}\n"
            ));
        }
        let session = Session::from_records(parse_session_entries(&text).unwrap().records);
        let targets: Vec<(String, String)> = session.label_targets().into_iter().collect();
        let pair = |l: &str, id: &str| (l.to_owned(), id.to_owned());
        assert_eq!(targets, [pair("..", "a"), pair("a/b", "c"), pair("x", "b")]);
        assert_eq!(session.label("a"), Some(".."));
        assert_eq!(session.label("c"), Some("a/b"));

        // A later label on another entry takes the name over.
        let text = text + "{\"type\":\"label\",\"id\":\"m\",\"parentId\":null,\"timestamp\":\"t\",\"targetId\":\"c\",\"label\":\"x\"}\n";
        let session = Session::from_records(parse_session_entries(&text).unwrap().records);
        assert_eq!(
            session.label_targets().get("x").map(String::as_str),
            Some("c")
        );
    }

    #[test]
    fn tree_orders_siblings_with_unparsable_timestamps_last() {
        // More than twenty siblings with mixed timestamps: enough for the standard sort to
        // notice a comparator that is not a total order.
        let mut text = String::from(
            "{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/\"}\n\
             {\"type\":\"custom\",\"id\":\"root\",\"parentId\":null}\n",
        );
        for i in 0..40 {
            let ts = if i % 3 == 0 {
                "bad".to_owned()
            } else {
                format!("2026-01-01T00:00:{:02}.000Z", (i * 7) % 50)
            };
            text.push_str(&format!(
                "{{\"type\":\"custom\",\"id\":\"c{i}\",\"parentId\":\"root\",\"timestamp\":\"{ts}\"}}\n"
            ));
        }
        let session = Session::from_records(parse_session_entries(&text).unwrap().records);
        let tree = session.tree();
        assert_eq!(tree.roots, [1]);
        let order: Vec<usize> = tree.children[1].iter().map(|&i| i - 2).collect();
        let mut valid: Vec<usize> = (0..40).filter(|i| i % 3 != 0).collect();
        valid.sort_by_key(|i| ((i * 7) % 50, *i));
        let invalid = (0..40).filter(|i| i % 3 == 0);
        assert_eq!(order, valid.into_iter().chain(invalid).collect::<Vec<_>>());
    }
}
