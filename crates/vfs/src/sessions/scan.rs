//! Listing the store: one scan at a time, reading only the files that changed since the
//! last one, titles carried over for unchanged files, and sessions whose id cannot name a
//! directory left out and reported once.

use std::collections::HashMap;
use std::path::PathBuf;

use super::Sessions;
use crate::layout::safe_session_name;
use crate::slots::Listed;
use crate::SessionSource;
use gjcfs_engine::store::discovery::{list_all_cached, list_dir_cached, SessionInfo};

impl Sessions {
    /// Lists the store again (one scan at a time, no other lock held meanwhile), calling
    /// `progress(done, total)` after each transcript file read.
    pub(crate) fn rescan(&self, progress: &dyn Fn(usize, usize)) {
        // One scan at a time, until its listing is in place (a slower scan never puts an
        // older listing over a newer one); what a scan read, the next one need not read.
        let mut cache = self.scan.lock();
        let storage = self.storage();
        let infos: Vec<SessionInfo> = match &self.source {
            SessionSource::SessionsRoot(root) => {
                list_all_cached(storage, root, &mut cache, progress).unwrap_or_default()
            }
            SessionSource::Dir(dir) => {
                list_dir_cached(storage, dir, &mut cache, progress).unwrap_or_default()
            }
        };
        let (usable, unsafe_ids): (Vec<SessionInfo>, Vec<SessionInfo>) = infos
            .into_iter()
            .partition(|info| safe_session_name(&info.id));
        self.leave_out(unsafe_ids);
        // The titles the last listing found, for files unchanged since (a title may take a
        // read past the file's first 4 KiB): looked up before, never under, the lock.
        let known: HashMap<String, (PathBuf, i64, String)> = self.with_listing(|listing| {
            listing
                .iter()
                .map(|(id, l)| (id.clone(), (l.path.clone(), l.modified_ms, l.title.clone())))
                .collect()
        });
        let fresh: Vec<(String, Listed)> = usable
            .into_iter()
            .map(|mut info| {
                let title = match known.get(&info.id) {
                    Some((path, ms, title)) if *path == info.path && *ms == info.modified_ms => {
                        title.clone()
                    }
                    _ => {
                        if info.message_count > 0 {
                            info.find_first_prompt(storage);
                        }
                        info.shown_title().to_owned()
                    }
                };
                let listed = Listed {
                    path: info.path,
                    cwd: info.cwd,
                    modified_ms: info.modified_ms,
                    seen: None,
                    title,
                    created: info.created,
                };
                (info.id, listed)
            })
            .collect();
        let mut listing = self.listing.lock();
        let previous = std::mem::take(&mut *listing);
        *listing = fresh
            .into_iter()
            .map(|(id, mut listed)| {
                listed.seen = previous
                    .get(&id)
                    .filter(|old| old.path == listed.path)
                    .and_then(|old| old.seen);
                (id, listed)
            })
            .collect();
        drop(listing);
        self.listing_changed();
    }

    /// Reports each session of `infos` (its id cannot name a directory) the first time.
    fn leave_out(&self, infos: Vec<SessionInfo>) {
        let mut notices = self.notices.lock();
        for info in infos {
            if notices.1.insert(info.path.clone()) {
                notices.0.push(format!(
                    "{}: left out: its session id {:?} cannot name a directory",
                    info.path.display(),
                    info.id
                ));
            }
        }
    }

    /// What the scans left out and why, since the last call.
    pub(crate) fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut self.notices.lock().0)
    }
}
