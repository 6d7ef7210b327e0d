//! Listings a kernel may keep across opens of a directory ([`KeptListing`]), decided at
//! each open from what the directory lists now.
//!
//! A kernel that keeps a listing (FUSE's `FOPEN_CACHE_DIR`) fills its copy from the reads
//! of whichever handles of the directory are open while the copy is incomplete, each entry
//! at its offset. So a copy is only as good as every handle that could have added to it:
//! - an open whose listing is the one the copy was last renewed with, while every open
//!   handle of the directory lists the same, reuses the copy ([`KeptListing::Unchanged`]);
//! - any other open renews it ([`KeptListing::Renewed`]: the kernel drops the copy and
//!   fills a new one), and the copy is trusted again only if every handle open at that
//!   moment lists what this open lists; otherwise (a handle opened before a change is still
//!   open and may add its older entries) every open renews it until those handles are
//!   released;
//! - a listing longer than [`KEPT_MAX`] entries is not kept ([`KeptListing::No`], which
//!   drops any copy): a kept listing gives no attributes, so `ls -l` would look every name
//!   up one request at a time instead of getting them a few hundred a request.
//!
//! A listing is compared by a 64-bit hash of its entries (name, number and kind, in
//! order; an entry's offset is its position). The kernel's copy goes with its inode, so
//! what is known of a directory is dropped when the kernel forgets it.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use parking_lot::Mutex;

use super::DirEntry;

/// The longest listing a kernel is told to keep.
pub const KEPT_MAX: usize = 256;

/// What a kernel may keep of a directory's listing, as an open of it tells
/// ([`crate::Vfs::opendir`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeptListing {
    /// Nothing: any copy kept from before is dropped, and this open's listing is not kept.
    No,
    /// This open's listing, in place of any copy kept from before.
    Renewed,
    /// The copy kept from before, which is this open's listing.
    Unchanged,
}

/// What is known of each directory whose listing a kernel may have kept.
#[derive(Default)]
pub(super) struct KeptListings {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    dirs: HashMap<u64, Dir>,
    /// The directory of each open handle that may add to a kept copy.
    handles: HashMap<u64, u64>,
}

#[derive(Default)]
struct Dir {
    /// The listing the kernel's copy holds, once only handles listing it could fill it.
    trusted: Option<u64>,
    /// The open handles (number, listing) that may add to the copy.
    open: Vec<(u64, u64)>,
}

impl KeptListings {
    /// Handle `fh` opened directory `ino`, which lists `entries`: what the kernel may keep.
    pub fn opened(&self, ino: u64, fh: u64, entries: &[DirEntry]) -> KeptListing {
        let mut state = self.state.lock();
        if entries.len() > KEPT_MAX {
            if let Some(dir) = state.dirs.get_mut(&ino) {
                dir.trusted = None;
            }
            return KeptListing::No;
        }
        let listing = listing_hash(entries);
        state.handles.insert(fh, ino);
        let dir = state.dirs.entry(ino).or_default();
        dir.open.push((fh, listing));
        let all_alike = dir.open.iter().all(|&(_, other)| other == listing);
        if all_alike && dir.trusted == Some(listing) {
            KeptListing::Unchanged
        } else {
            dir.trusted = all_alike.then_some(listing);
            KeptListing::Renewed
        }
    }

    /// Directory handle `fh` was released.
    pub fn released(&self, fh: u64) {
        let mut state = self.state.lock();
        let Some(ino) = state.handles.remove(&fh) else {
            return;
        };
        if let Some(dir) = state.dirs.get_mut(&ino) {
            dir.open.retain(|&(open, _)| open != fh);
            if dir.open.is_empty() && dir.trusted.is_none() {
                state.dirs.remove(&ino);
            }
        }
    }

    /// The kernel dropped references to `ino`; when it dropped the last, its copy of the
    /// listing went with the inode. Not told which, the copy is no longer trusted: the next
    /// open renews it.
    pub fn forgotten(&self, ino: u64) {
        let mut state = self.state.lock();
        if let Some(dir) = state.dirs.get_mut(&ino) {
            dir.trusted = None;
            if dir.open.is_empty() {
                state.dirs.remove(&ino);
            }
        }
    }
}

/// A hash of `entries` as a listing gives them: each one's name, number and kind, in order.
fn listing_hash(entries: &[DirEntry]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    entries.len().hash(&mut hasher);
    for entry in entries {
        entry.ino.hash(&mut hasher);
        std::mem::discriminant(&entry.kind).hash(&mut hasher);
        entry.name.hash(&mut hasher);
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeKind;

    fn listing(names: &[&str]) -> Vec<DirEntry> {
        names
            .iter()
            .enumerate()
            .map(|(i, name)| DirEntry {
                ino: 100 + i as u64,
                kind: NodeKind::File,
                name: (*name).to_owned(),
            })
            .collect()
    }

    #[test]
    fn the_same_listing_reuses_the_copy_and_a_change_renews_it() {
        let kept = KeptListings::default();
        let before = listing(&["a", "b"]);
        let after = listing(&["a", "b", "c"]);
        assert_eq!(kept.opened(7, 1, &before), KeptListing::Renewed);
        kept.released(1);
        assert_eq!(kept.opened(7, 2, &before), KeptListing::Unchanged);
        kept.released(2);
        assert_eq!(kept.opened(7, 3, &after), KeptListing::Renewed);
        kept.released(3);
        assert_eq!(kept.opened(7, 4, &after), KeptListing::Unchanged);
        // Another directory with the same entries has a copy of its own.
        assert_eq!(kept.opened(8, 5, &after), KeptListing::Renewed);
    }

    #[test]
    fn a_renumbered_entry_is_a_change() {
        let kept = KeptListings::default();
        let before = listing(&["context.json"]);
        let mut after = before.clone();
        after[0].ino += 1;
        assert_eq!(kept.opened(7, 1, &before), KeptListing::Renewed);
        kept.released(1);
        assert_eq!(kept.opened(7, 2, &after), KeptListing::Renewed);
    }

    #[test]
    fn while_a_handle_of_an_older_listing_is_open_every_open_renews_the_copy() {
        let kept = KeptListings::default();
        let before = listing(&["a"]);
        let after = listing(&["a", "b"]);
        assert_eq!(kept.opened(7, 1, &before), KeptListing::Renewed);
        kept.released(1);
        // Handle 2 lists the old entries and may still add them to a copy.
        assert_eq!(kept.opened(7, 2, &before), KeptListing::Unchanged);
        assert_eq!(kept.opened(7, 3, &after), KeptListing::Renewed);
        kept.released(3);
        assert_eq!(kept.opened(7, 4, &after), KeptListing::Renewed);
        kept.released(4);
        kept.released(2);
        // Only handles of the new listing are open from here: renewed once, then kept.
        assert_eq!(kept.opened(7, 5, &after), KeptListing::Renewed);
        assert_eq!(kept.opened(7, 6, &after), KeptListing::Unchanged);
    }

    #[test]
    fn a_long_listing_is_not_kept_and_drops_the_copy() {
        let kept = KeptListings::default();
        let short = listing(&["a"]);
        let names: Vec<String> = (0..=KEPT_MAX).map(|i| i.to_string()).collect();
        let long = listing(&names.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(kept.opened(7, 1, &short), KeptListing::Renewed);
        kept.released(1);
        assert_eq!(kept.opened(7, 2, &long), KeptListing::No);
        kept.released(2);
        assert_eq!(kept.opened(7, 3, &short), KeptListing::Renewed);
    }

    #[test]
    fn a_forgotten_directory_renews_its_copy_and_nothing_is_held_for_it() {
        let kept = KeptListings::default();
        let entries = listing(&["a"]);
        assert_eq!(kept.opened(7, 1, &entries), KeptListing::Renewed);
        kept.released(1);
        kept.forgotten(7);
        assert!(kept.state.lock().dirs.is_empty());
        assert_eq!(kept.opened(7, 2, &entries), KeptListing::Renewed);
        kept.released(2);
        kept.released(99);
        assert!(kept.state.lock().handles.is_empty());
    }
}
