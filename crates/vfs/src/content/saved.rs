//! A stripped rendering ([`Rendered::strip`]) written to a saved file and read back, so
//! that a later run answers lookups, attributes and listings of a session whose transcript
//! is unchanged without loading it (`sessions/saved_renderings.rs`).
//!
//! What is written is what a stripped rendering holds: the generation, the header and the
//! leaf, the entry table (left out when asked: it is made again when needed), the sizes of the entry files and of the files rendered from the transcript,
//! the blob references, labels, branch ends and page count. Bytes of a rendering under
//! `--redact` are never saved. Read back, whatever names a file or a place in the session
//! is checked (entries in file order within the records the rendering covers, blob
//! references that are hashes, names that are file names): anything else is no rendering.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use hashbrown::HashTable;

use super::{EntryFile, EntryTable, Generation, Rendered};
use crate::layout::usable_name;
use crate::rendered_file::{FileMemo, RenderedFile};
use gjcfs_engine::format::blob::is_valid_hash;
use gjcfs_engine::store::saved::{Decoder, Encoder};

/// The fewest bytes an entry of a saved entry table takes: its id's length, its number,
/// its time and its place.
pub(crate) const MIN_ENTRY_BYTES: usize = 8 + 8 + 9 + 8;

fn opt_i64(e: &mut Encoder, n: Option<i64>) {
    e.bool(n.is_some());
    e.i64(n.unwrap_or(0));
}

fn read_opt_i64(d: &mut Decoder) -> Option<Option<i64>> {
    let some = d.bool()?;
    let n = d.i64()?;
    Some(some.then_some(n))
}

fn strings(e: &mut Encoder, items: Option<&[String]>) {
    e.bool(items.is_some());
    let items = items.unwrap_or_default();
    e.u64(items.len() as u64);
    for item in items {
        e.str(item);
    }
}

fn read_strings(d: &mut Decoder) -> Option<Option<Vec<String>>> {
    let some = d.bool()?;
    let n = d.count(8)?;
    let mut items = Vec::with_capacity(n);
    for _ in 0..n {
        items.push(d.str()?.to_owned());
    }
    Some(some.then_some(items))
}

fn usize_of(d: &mut Decoder) -> Option<usize> {
    usize::try_from(d.u64()?).ok()
}

impl EntryTable {
    fn encode(&self, e: &mut Encoder) {
        e.u64(self.entries.len() as u64);
        for entry in &self.entries {
            e.str(&entry.id);
            e.u64(entry.number as u64);
            opt_i64(e, entry.mtime_ms);
            e.u64(entry.record_index as u64);
        }
        e.u64(self.covered as u64);
        e.u64(self.next_number as u64);
        opt_i64(e, self.newest_ms);
    }

    fn decode(d: &mut Decoder) -> Option<Self> {
        let n = d.count(MIN_ENTRY_BYTES)?;
        let mut table = EntryTable {
            entries: Vec::with_capacity(n),
            by_id: HashTable::new(),
            hasher: RandomState::new(),
            covered: 0,
            next_number: 0,
            newest_ms: None,
        };
        for _ in 0..n {
            let entry = EntryFile {
                id: d.str()?.into(),
                number: usize_of(d)?,
                mtime_ms: read_opt_i64(d)?,
                record_index: usize_of(d)?,
            };
            // The last entry with an id is the one it names, as when the table was made.
            let hash = table.hasher.hash_one(&*entry.id);
            let (entries, hasher) = (&table.entries, &table.hasher);
            match table
                .by_id
                .find_entry(hash, |&at| entries[at].id == entry.id)
            {
                Ok(mut found) => *found.get_mut() = entries.len(),
                Err(_) => {
                    table.by_id.insert_unique(hash, entries.len(), |&at| {
                        hasher.hash_one(&*entries[at].id)
                    });
                }
            }
            table.entries.push(entry);
        }
        table.covered = usize_of(d)?;
        table.next_number = usize_of(d)?;
        table.newest_ms = read_opt_i64(d)?;
        // Places in file order within what it covers, numbers below the next one.
        let in_order = table
            .entries
            .windows(2)
            .all(|w| w[0].record_index < w[1].record_index && w[0].number < w[1].number);
        let within = table.entries.last().is_none_or(|last| {
            last.record_index < table.covered && last.number < table.next_number
        });
        (in_order && within).then_some(table)
    }
}

impl Rendered {
    /// Writes what a stripped rendering holds, its entry table and the sizes of its entry
    /// files only `with_table`; nothing for one under `--redact`.
    pub(crate) fn encode_stripped(&self, e: &mut Encoder, with_table: bool) -> bool {
        if self.redact {
            return false;
        }
        e.u64(self.generation.records as u64);
        e.opt_str(self.generation.leaf.as_deref());
        e.bytes(&self.header);
        opt_i64(e, self.header_mtime_ms);
        e.bytes(&self.leaf);
        let table = self.table.as_ref().filter(|_| with_table);
        e.bool(table.is_some());
        if let Some(table) = table {
            table.encode(e);
        }
        let sizes = match with_table {
            true => self.entry_sizes.len(),
            false => 0,
        };
        e.u64(sizes as u64);
        for (index, size) in self.entry_sizes.iter().take(sizes) {
            e.u64(*index as u64);
            e.u64(*size);
        }
        let files: Vec<(&RenderedFile, u64)> = self.files.lens().collect();
        e.u64(files.len() as u64);
        for (file, len) in files {
            file.encode(e);
            e.u64(len);
        }
        strings(e, self.blob_refs.as_deref());
        let labels: Option<Vec<String>> = self.labels.as_ref().map(|labels| {
            labels
                .iter()
                .flat_map(|(name, id)| [name.clone(), id.clone()])
                .collect()
        });
        strings(e, labels.as_deref());
        strings(e, self.branch_ends.as_deref());
        e.bool(self.page_count.is_some());
        e.u64(self.page_count.unwrap_or(0) as u64);
        true
    }

    /// Reads what [`Rendered::encode_stripped`] wrote: a stripped rendering.
    pub(crate) fn decode_stripped(d: &mut Decoder) -> Option<Rendered> {
        let generation = Generation {
            records: usize_of(d)?,
            leaf: d.opt_str()?.map(str::to_owned),
        };
        let header = Arc::new(d.bytes()?.to_vec());
        let header_mtime_ms = read_opt_i64(d)?;
        let leaf = Arc::new(d.bytes()?.to_vec());
        let table = match d.bool()? {
            true => Some(EntryTable::decode(d)?),
            false => None,
        };
        let n = d.count(16)?;
        let mut entry_sizes = HashMap::with_capacity(n);
        for _ in 0..n {
            entry_sizes.insert(usize_of(d)?, d.u64()?);
        }
        let mut files = FileMemo::default();
        for _ in 0..d.count(16)? {
            let file = RenderedFile::decode(d)?;
            files.put_len(file, d.u64()?);
        }
        let blob_refs = read_strings(d)?;
        let labels = match read_strings(d)? {
            Some(flat) if flat.len() % 2 == 0 => Some(
                flat.chunks(2)
                    .map(|pair| (pair[0].clone(), pair[1].clone()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            Some(_) => return None,
            None => None,
        };
        let branch_ends = read_strings(d)?;
        let counted = d.bool()?;
        let page_count = Some(usize_of(d)?).filter(|_| counted);
        // What names files or places in the session is checked: a saved file is not
        // trusted past its format.
        let covered = table.as_ref().map_or(generation.records, |t| t.covered);
        let names_ok = |names: &Option<Vec<String>>, ok: &dyn Fn(&str) -> bool| {
            names.iter().flatten().all(|n| ok(n))
        };
        let usable = |name: &str| usable_name(name) && usable_name(&format!("{name}.html"));
        let sound = covered == generation.records
            && entry_sizes.keys().all(|&at| at < covered)
            && names_ok(&blob_refs, &|h| is_valid_hash(h))
            && names_ok(&branch_ends, &usable)
            && labels.iter().flatten().all(|(name, _)| usable_name(name));
        if !sound {
            return None;
        }
        Some(Rendered {
            generation,
            redact: false,
            redacted: None,
            header,
            header_mtime_ms,
            leaf,
            table,
            entry_sizes,
            files,
            blob_refs,
            labels,
            branch_ends,
            page_count,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::View;
    use gjcfs_engine::read::replay::parse_session_entries;
    use gjcfs_engine::session::tree::Session;

    /// A rendering of a session of `n` messages, its entry table made, some sizes known.
    pub(crate) fn rendering(n: usize) -> Rendered {
        let mut text =
            String::from("{\"type\":\"session\",\"version\":5,\"id\":\"s\",\"cwd\":\"/w\"}\n");
        for i in 0..n {
            let parent = match i {
                0 => "null".to_owned(),
                _ => format!("\"m{}\"", i - 1),
            };
            text.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"m{i}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:0{}.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{i}\"}}}}\n",
                i % 10
            ));
        }
        let session = Session::from_records(parse_session_entries(&text).unwrap().records);
        let mut rendered = Rendered::new(&session, false);
        rendered.table = Some(EntryTable::new(&session));
        rendered.entry_sizes.insert(1, 77);
        rendered.files.put_len(RenderedFile::View(View::Tree), 12);
        rendered
            .files
            .put_len(RenderedFile::LeafPage("m0".into()), 34);
        rendered.labels = Some(BTreeMap::from([("l".to_owned(), "m0".to_owned())]));
        rendered.branch_ends = Some(vec!["m0".to_owned()]);
        rendered.page_count = Some(1);
        rendered
    }

    #[test]
    fn a_stripped_rendering_reads_back_as_written() {
        let rendered = rendering(30);
        let mut e = Encoder::new(b"testtest", 1);
        assert!(rendered.encode_stripped(&mut e, true));
        let bytes = e.finish();
        let mut d = Decoder::new(&bytes, b"testtest", 1).unwrap();
        let back = Rendered::decode_stripped(&mut d).unwrap();
        assert!(d.is_done());
        assert_eq!(back.generation, rendered.generation);
        assert_eq!(back.header, rendered.header);
        assert_eq!(back.leaf, rendered.leaf);
        let names = |r: &Rendered| -> Vec<String> {
            r.known_entries()
                .unwrap()
                .iter()
                .map(EntryFile::name)
                .collect()
        };
        assert_eq!(names(&back), names(&rendered));
        assert_eq!(
            back.known_entry("m3").map(|e| e.map(|e| e.record_index)),
            Some(Some(4))
        );
        assert_eq!(
            back.known_newest_entry_ms(),
            rendered.known_newest_entry_ms()
        );
        assert_eq!(back.known_len(&RenderedFile::View(View::Tree)), Some(12));
        assert_eq!(
            back.known_len(&RenderedFile::LeafPage("m0".into())),
            Some(34)
        );
        assert_eq!(
            back.known_label_target("l"),
            rendered.known_label_target("l")
        );
        assert_eq!(back.known_branch_ends(), rendered.known_branch_ends());
        assert_eq!(back.known_page_count(), Some(1));
        // Cut anywhere, it is no rendering.
        for cut in 0..bytes.len() {
            if let Some(mut d) = Decoder::new(&bytes[..cut], b"testtest", 1) {
                assert!(Rendered::decode_stripped(&mut d).is_none_or(|_| !d.is_done()));
            }
        }
        // Names that are no file names, and places past the records, are refused.
        let refused = |change: &dyn Fn(&mut Rendered)| {
            let mut bad = rendering(3);
            change(&mut bad);
            let mut e = Encoder::new(b"testtest", 1);
            assert!(bad.encode_stripped(&mut e, true));
            let bytes = e.finish();
            let mut d = Decoder::new(&bytes, b"testtest", 1).unwrap();
            Rendered::decode_stripped(&mut d).is_none()
        };
        assert!(refused(
            &|r| r.blob_refs = Some(vec!["../../etc/passwd".into()])
        ));
        assert!(refused(&|r| r.branch_ends = Some(vec!["a/b".into()])));
        assert!(refused(&|r| {
            r.labels = Some(BTreeMap::from([("..".to_owned(), "m0".to_owned())]))
        }));
        assert!(refused(&|r| {
            r.entry_sizes.insert(99, 1);
        }));
        assert!(refused(&|r| r.generation.records = 1));
        assert!(!refused(&|r| r.blob_refs = Some(vec!["a".repeat(64)])));
        let mut redacted = rendering(1);
        redacted.redact = true;
        assert!(!redacted.encode_stripped(&mut Encoder::new(b"testtest", 1), true));
    }
}
