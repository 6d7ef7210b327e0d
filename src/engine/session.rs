//! A loaded session: its records, the id index, the tree, the leaf pointer and labels
//! (details §7).
//!
//! Invariants:
//! - `records[0]` is the header; the other records are in file order. Records of type
//!   `session` after the first are kept (and written back) but are not entries.
//! - `by_id` maps an entry id to the *last* entry carrying it, as the original's index does;
//!   `parents[i]` is the index of the entry `records[i].parentId` names through `by_id`.
//! - The leaf is an entry index or `None` (an empty session, or after [`Session::reset_leaf`]).
//!   After loading it is the last entry in file order, whatever its type.
//! - Labels come from `label` entries in file order: a truthy label sets, an empty or absent
//!   one clears.

use std::collections::{BTreeMap, HashMap};

use super::json::{self, Value};
use super::record::{Header, Record, RecordType};

/// An entry id that is not in the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Entry {0} not found")]
pub struct EntryNotFound(pub String);

/// A session held in memory.
#[derive(Debug, Clone)]
pub struct Session {
    records: Vec<Record>,
    by_id: HashMap<Box<str>, usize>,
    parents: Vec<Option<usize>>,
    labels: HashMap<String, String>,
    leaf: Option<usize>,
    /// Whether two entries share an id (set conservatively: never cleared by a rollback).
    duplicate_ids: bool,
}

/// The entry tree: roots and children as record indices (no recursion, so any depth works).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub roots: Vec<usize>,
    /// `children[i]`: the children of record `i`, oldest first.
    pub children: Vec<Vec<usize>>,
}

impl Session {
    /// Indexes `records` (header first, already migrated). The leaf is the last entry.
    pub fn from_records(records: Vec<Record>) -> Self {
        let mut session = Session {
            records,
            by_id: HashMap::new(),
            parents: Vec::new(),
            labels: HashMap::new(),
            leaf: None,
            duplicate_ids: false,
        };
        session.reindex();
        session
    }

    /// Rebuilds every index from the records and puts the leaf on the last entry.
    pub fn reindex(&mut self) {
        self.by_id.clear();
        self.labels.clear();
        self.duplicate_ids = false;
        for (i, record) in self.records.iter().enumerate() {
            if let Some(id) = record.id().filter(|_| !record.is_header()) {
                self.duplicate_ids |= self.by_id.insert(id.into(), i).is_some();
            }
        }
        self.parents = (0..self.records.len())
            .map(|i| self.resolve_parent(i))
            .collect();
        for i in 0..self.records.len() {
            self.apply_label(i);
        }
        self.leaf = self.entry_indices().last();
    }

    fn resolve_parent(&self, i: usize) -> Option<usize> {
        let record = &self.records[i];
        if record.is_header() {
            return None;
        }
        self.by_id.get(record.parent_id()?).copied()
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

    /// Indices of the entries (every record but `session` ones), in file order.
    pub fn entry_indices(&self) -> impl DoubleEndedIterator<Item = usize> + '_ {
        (0..self.records.len()).filter(|&i| !self.records[i].is_header())
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    pub fn into_records(self) -> Vec<Record> {
        self.records
    }

    pub fn record(&self, index: usize) -> &Record {
        &self.records[index]
    }

    pub fn header(&self) -> Header<'_> {
        Header(self.records[0].fields())
    }

    /// All entries in file order (`getEntries`).
    pub fn entries(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| !r.is_header())
    }

    pub fn entry_count(&self) -> usize {
        self.entry_indices().count()
    }

    /// Whether any two entries share an id.
    pub fn has_duplicate_ids(&self) -> bool {
        self.duplicate_ids
    }

    /// The index of the entry with `id` (the last one, if several share it).
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).copied()
    }

    pub fn get_entry(&self, id: &str) -> Option<&Record> {
        self.index_of(id).map(|i| &self.records[i])
    }

    /// The record index of an entry's parent, when the parent is in the session.
    pub fn parent_of(&self, index: usize) -> Option<usize> {
        self.parents.get(index).copied().flatten()
    }

    pub fn leaf(&self) -> Option<usize> {
        self.leaf
    }

    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.and_then(|i| self.records[i].id())
    }

    pub fn leaf_entry(&self) -> Option<&Record> {
        self.leaf.map(|i| &self.records[i])
    }

    /// Appends an entry as the new leaf and returns its index.
    pub fn push_entry(&mut self, record: Record) -> usize {
        let index = self.records.len();
        if let Some(id) = record.id() {
            self.duplicate_ids |= self.by_id.insert(id.into(), index).is_some();
        }
        self.records.push(record);
        let parent = self.resolve_parent(index);
        self.parents.push(parent);
        self.apply_label(index);
        self.leaf = Some(index);
        index
    }

    /// Removes the last entry (an append that could not be persisted) and restores `leaf`.
    pub fn pop_entry(&mut self, leaf: Option<usize>) -> Option<Record> {
        if self.records.len() <= 1 {
            return None;
        }
        let record = self.records.pop()?;
        self.parents.pop();
        let index = self.records.len();
        if let Some(id) = record.id() {
            if self.by_id.get(id) == Some(&index) {
                self.by_id.remove(id);
                // An earlier entry with the same id is named by it again.
                if let Some(earlier) = (1..index).rev().find(|&i| self.records[i].id() == Some(id))
                {
                    self.by_id.insert(id.into(), earlier);
                }
            }
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
    pub fn header_mut(&mut self) -> &mut super::json::Object {
        self.records[0].fields_mut()
    }

    /// Replaces the `message` of the `message` entry at `index` (entry patches, sanitizing).
    pub fn replace_message(&mut self, index: usize, message: super::json::Object) {
        self.records[index]
            .fields_mut()
            .insert("message", Value::Object(message));
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

    pub fn labels(&self) -> &HashMap<String, String> {
        &self.labels
    }

    /// Label name → entry id, for labels usable as file names ([`is_label_file_name`]): the
    /// entries that currently carry a label (as [`Session::label`] resolves them) and are in
    /// the session. When several entries carry the same label, the one labelled last (in file
    /// order) wins. Labels that are not usable file names, and labels of ids not in the
    /// session, are skipped.
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
            let usable = is_label_file_name(label) && self.by_id.contains_key(target.as_str());
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
            .map(|r| r.timestamp().and_then(super::time::parse_iso_millis))
            .collect();
        let key = |i: &usize| (times[*i].is_none(), times[*i]);
        for list in &mut children {
            list.sort_by_key(key);
        }
        roots.sort_by_key(key);
        Tree { roots, children }
    }
}

/// Whether a label can name a file (`labels/<label>`): not empty, no `/` or NUL, and neither
/// `.` nor `..`.
pub fn is_label_file_name(label: &str) -> bool {
    !label.is_empty() && label != "." && label != ".." && !label.contains(['/', '\0'])
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
    use crate::engine::replay::parse_session_entries;

    #[test]
    fn label_targets_resolve_the_latest_label_and_skip_unusable_names() {
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
            ("c", "a/b"),     // not a file name
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
        assert_eq!(targets, [("x".to_owned(), "b".to_owned())]);
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
    fn label_file_names() {
        for good in ["checkpoint", "a b", "..x", ".hidden", "日本"] {
            assert!(is_label_file_name(good), "{good}");
        }
        for bad in ["", ".", "..", "a/b", "/", "nul\0"] {
            assert!(!is_label_file_name(bad), "{bad:?}");
        }
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
