//! The model's write side: `entries/new` appends, `leaf` moves (by handle or by a path's
//! truncation), attribute changes, the end of writes, and the refusals of every other
//! change.

use std::sync::atomic::Ordering;

use super::fs::{NamespaceChange, Vfs};
use super::handles::{Handle, Part};
use super::inode::Node;
use super::sessions::EntriesChanged;
use super::{Attr, VfsError};
use gjcfs_engine::format::record::parse_object_line;
use gjcfs_engine::json::Object;
use gjcfs_engine::manager::leaf_marker::persist_leaf;

/// What a change of attributes asks for ([`Vfs::set_attr`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttrChange {
    /// A new size (a truncation).
    pub size: Option<u64>,
    /// Whether anything else is to change: mode, owner, times or attributes. Times set
    /// alone (`touch` on an open file, the kernel's own updates) count too: the data's
    /// times stay authoritative.
    pub others: bool,
}

impl Vfs {
    /// Refuses every write from now on (`EROFS`), as a read-only mount does: the server is
    /// shutting down. A write already under way finishes before this returns.
    pub fn stop_writes(&self) {
        // Truncations already answered are applied first.
        self.apply_pending_resets(std::time::Duration::ZERO);
        self.stopped.store(true, Ordering::SeqCst);
        drop(self.write_gate.write());
    }

    /// Applies the resets of `leaf` files truncated by path at least `age` ago that no
    /// write took over (see [`Vfs::pending_resets`]).
    pub(super) fn apply_pending_resets(&self, age: std::time::Duration) {
        let due: Vec<String> = {
            let mut pending = self.pending_resets.lock();
            let due: Vec<String> = pending
                .iter()
                .filter(|(_, at)| at.elapsed() >= age)
                .map(|(sid, _)| sid.clone())
                .collect();
            for sid in &due {
                pending.remove(sid);
            }
            due
        };
        for sid in due {
            // A failure is in the session's errors file.
            let _ = self.set_leaf(&sid, b"");
        }
    }

    /// Whether `leaf` of `sid` was truncated by path and reads as empty until its reset.
    pub(super) fn reset_pending(&self, sid: &str) -> bool {
        self.pending_resets.lock().contains_key(sid)
    }

    /// Whether `caller` may write: the store's owner or root.
    pub(super) fn check_writer(&self, caller: Option<u32>) -> Result<(), VfsError> {
        match (self.config.owner_uid, caller) {
            (Some(owner), Some(uid)) if uid != owner && uid != 0 => Err(VfsError::AccessDenied),
            _ => Ok(()),
        }
    }

    pub(super) fn writes_stopped(&self) -> bool {
        self.config.read_only || self.stopped.load(Ordering::SeqCst)
    }

    pub(super) fn leaf_moved_ms(&self, sid: &str) -> Option<i64> {
        self.leaf_moves.lock().get(sid).copied()
    }

    /// Writes `data` at `offset` (`leaf`) or appends it (`entries/new`, offsets ignored:
    /// each complete line is one entry), as the whole of its `write(2)`. Returns the count
    /// of bytes taken.
    pub fn write(&self, fh: u64, offset: u64, data: &[u8]) -> Result<usize, VfsError> {
        self.write_part(fh, offset, data, Part::Last, None)
    }

    /// [`Vfs::write`] for one request of a `write(2)` the kernel may have split: the lines
    /// of a request that may continue are checked and held, and appended with the last
    /// request of their `write(2)` (or at the close), all together or not at all. `writer`
    /// names the writing process where the platform says (see [`Vfs::flush`]).
    pub fn write_part(
        &self,
        fh: u64,
        offset: u64,
        data: &[u8],
        part: Part,
        writer: Option<u64>,
    ) -> Result<usize, VfsError> {
        if self.writes_stopped() {
            return Err(VfsError::ReadOnly);
        }
        match self.handles.get(fh)? {
            Handle::Read(_)
            | Handle::View(_)
            | Handle::Version(_)
            | Handle::Transcript(_)
            | Handle::Dir(_) => Err(VfsError::BadHandle),
            Handle::Leaf(leaf) => {
                let mut leaf = leaf.lock();
                leaf.writer.note(writer);
                if let Err(e) = leaf.write_at(offset, data) {
                    self.errors.push(&leaf.sid, &format!("leaf: {e}"));
                    return Err(e);
                }
                if !leaf.buf.ends_with(b"\n") {
                    return Ok(data.len());
                }
                // A complete line is checked now, so the writer sees a bad id as a failed
                // write (shells do not check close); it takes effect at flush.
                let (sid, content) = (leaf.sid.clone(), leaf.buf.clone());
                if let Err(e) = self.check_leaf(&sid, &content) {
                    leaf.dirty = false;
                    return Err(e);
                }
                Ok(data.len())
            }
            Handle::New(line) => {
                let mut line = line.lock();
                if let Some(refused) = line.refused() {
                    return Err(refused.clone());
                }
                line.writer.note(writer);
                // Lines of earlier requests of this write(2), which the kernel counts as
                // written: dropping them must fail the handle for good.
                let misled = line.holds_lines();
                let done = line.push(data);
                let sid = line.sid.clone();
                let taken = if done.overflowed {
                    let limit = super::handles::LINE_MAX;
                    let reason = format!("a line longer than {limit} bytes was refused whole");
                    Err(VfsError::TooLarge(reason))
                } else {
                    self.check_lines(&sid, &done.lines)
                        .and_then(|()| line.hold(done.lines))
                };
                let refused = match taken {
                    Err(e) => {
                        self.note_refused_new(&sid, &e, misled);
                        e
                    }
                    Ok(()) if part == Part::MayContinue => return Ok(data.len()),
                    Ok(()) => {
                        let lines = line.take_lines();
                        // A failure is in `errors` already (the write's own reason).
                        match self.append_lines(&sid, &lines, false) {
                            Ok(()) => return Ok(data.len()),
                            Err(e) if misled => {
                                self.note_refused_new(&sid, &e, true);
                                e
                            }
                            Err(e) => e,
                        }
                    }
                };
                if misled {
                    line.refuse(refused.clone());
                } else {
                    line.drop_held();
                }
                Err(refused)
            }
        }
    }

    /// Records in `errors` what a refused write to `entries/new` cost: nothing of it is
    /// appended, and with `misled` (the kernel had been told its first part was written)
    /// the open file refuses everything until it is closed.
    fn note_refused_new(&self, sid: &str, error: &VfsError, misled: bool) {
        let tail = match misled {
            true => {
                "; nothing of that write is appended, and this open file refuses every \
                     write until it is closed"
            }
            false => "; nothing of that write is appended",
        };
        self.errors
            .push(sid, &format!("entries/new: {error}{tail}"));
        self.announce(sid, EntriesChanged::None);
    }

    /// Checks lines written to `entries/new` as the append will: each must be a JSON object
    /// the session takes as an entry (see [`gjcfs_engine::manager::external_entry`]).
    fn check_lines(&self, sid: &str, lines: &[Vec<u8>]) -> Result<(), VfsError> {
        let objects = parse_lines(lines)?;
        if objects.is_empty() {
            return Ok(());
        }
        self.with_session(sid, |loaded| {
            for (n, object) in &objects {
                loaded.manager.check_external(object).map_err(|e| {
                    VfsError::InvalidArgument(format!("line {n} of the write: {e}"))
                })?;
            }
            Ok(())
        })
    }

    /// Appends lines held by an `entries/new` handle all at once through the manager's
    /// validation: if any is not a valid entry none is appended. `accepted`: see
    /// [`Vfs::with_writer`].
    fn append_lines(&self, sid: &str, lines: &[Vec<u8>], accepted: bool) -> Result<(), VfsError> {
        let objects: Vec<Object> = match parse_lines(lines) {
            Ok(objects) => objects.into_iter().map(|(_, object)| object).collect(),
            Err(e) => {
                self.note_refused_new(sid, &e, false);
                return Err(e);
            }
        };
        if objects.is_empty() {
            return Ok(());
        }
        let appended = self.with_writer(sid, "entries/new", accepted, |manager| {
            manager.append_external_all(objects).map(drop)
        });
        self.announce(sid, EntriesChanged::None);
        appended
    }

    /// Records a refused write and answers `EINVAL`.
    fn refuse(&self, sid: &str, what: &str, reason: String) -> VfsError {
        self.errors.push(sid, &format!("{what}: {reason}"));
        self.announce(sid, EntriesChanged::None);
        VfsError::InvalidArgument(reason)
    }

    /// Applies what a handle holds: a `leaf` write moves the leaf, the lines written to
    /// `entries/new` are appended (all together). Errors are reported here (close's
    /// result). An fsync does the same. `closer` names the closing process where the
    /// platform says: the close of a copy of the descriptor by a process that is not the
    /// last writer (a child that inherited it) applies nothing, so a forked child's exit
    /// never cuts a line or a `write(2)` its parent is still writing.
    pub fn flush(&self, fh: u64, closer: Option<u64>) -> Result<(), VfsError> {
        self.apply(fh, false, closer)
    }

    fn apply(&self, fh: u64, releasing: bool, closer: Option<u64>) -> Result<(), VfsError> {
        let Ok(handle) = self.handles.get(fh) else {
            return Ok(());
        };
        match handle {
            Handle::Read(_)
            | Handle::View(_)
            | Handle::Version(_)
            | Handle::Transcript(_)
            | Handle::Dir(_) => Ok(()),
            Handle::Leaf(leaf) => {
                let mut leaf = leaf.lock();
                if !leaf.dirty || !(leaf.written || releasing) || leaf.writer.foreign(closer) {
                    return Ok(());
                }
                // An empty leaf (a reset) is applied at the close only: an editor that
                // truncates, flushes or fsyncs, then writes, makes one move, not two.
                if !releasing && leaf.buf.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                leaf.dirty = false;
                let (sid, buf) = (leaf.sid.clone(), leaf.buf.clone());
                self.set_leaf(&sid, &buf)
            }
            Handle::New(line) => {
                let mut line = line.lock();
                if line.writer.foreign(closer) {
                    return Ok(());
                }
                if let Some(refused) = line.refused() {
                    return Err(refused.clone());
                }
                let batch = line.take_batch();
                let sid = line.sid.clone();
                self.append_lines(&sid, &batch, true)
            }
        }
    }

    /// The entry a `leaf` content names (`None`: reset), or the recorded failure. A leaf is
    /// named as `ls entries` and `labels/` show it: the entry id, its file name (with or
    /// without `.json`), a label, or a unique prefix of an id.
    fn check_leaf(&self, sid: &str, buf: &[u8]) -> Result<Option<String>, VfsError> {
        let Ok(text) = std::str::from_utf8(buf) else {
            return Err(self.refuse(sid, "leaf", "not UTF-8".into()));
        };
        let name = text.strip_suffix('\n').unwrap_or(text).trim();
        if name.is_empty() {
            return Ok(None);
        }
        if name.contains('\n') {
            return Err(self.refuse(sid, "leaf", "more than one line".into()));
        }
        let found = self.with_session(sid, |loaded| Ok(resolve_leaf(loaded, name)))?;
        match found {
            Resolved::One(id) => Ok(Some(id)),
            Resolved::None => Err(self.refuse(sid, "leaf", format!("no entry is named {name:?}"))),
            Resolved::Many(ids) => Err(self.refuse(
                sid,
                "leaf",
                format!("{name:?} is ambiguous: it begins {}", candidates(&ids)),
            )),
        }
    }

    /// Moves the leaf and records the move in the session file (a leaf marker, see
    /// [`gjcfs_engine::manager::leaf_marker`]), so that the agent, a remount and every tool find it.
    fn set_leaf(&self, sid: &str, buf: &[u8]) -> Result<(), VfsError> {
        let target = self.check_leaf(sid, buf)?;
        // Opened for writing, a legacy session is its managed copy: the same entries, with
        // the same ids.
        self.with_writer(sid, "leaf", true, |manager| {
            persist_leaf(manager, target.as_deref())
        })?;
        self.leaf_moves
            .lock()
            .insert(sid.to_owned(), gjcfs_engine::format::time::now_millis());
        self.announce(sid, EntriesChanged::None);
        Ok(())
    }

    /// Flushes what is still pending and forgets the handle.
    pub fn release(&self, fh: u64) -> Result<(), VfsError> {
        let flushed = self.apply(fh, true, None);
        if let Some(Handle::Dir(_)) = self.handles.remove(fh) {
            self.kept_listings.released(fh);
        }
        flushed
    }

    /// A change of attributes (`setattr`, `SetEndOfFile`, `SetFileTime`, …): a change of
    /// anything but the size (mode, owner, times, attributes) is refused; a size truncates
    /// ([`Vfs::set_size`]); no change answers the attributes.
    pub fn set_attr(
        &self,
        ino: u64,
        fh: Option<u64>,
        change: AttrChange,
        caller_uid: Option<u32>,
    ) -> Result<Attr, VfsError> {
        match change.size {
            _ if change.others => self.set_other_attr(ino),
            Some(size) => self.set_size(ino, fh, size, caller_uid),
            None => self.getattr(ino),
        }
    }

    /// Truncation (`setattr` with a size). On an open `leaf` handle it truncates what the
    /// handle will write; without a handle, `leaf` truncated to 0 resets the leaf at once.
    fn set_size(
        &self,
        ino: u64,
        fh: Option<u64>,
        size: u64,
        caller_uid: Option<u32>,
    ) -> Result<Attr, VfsError> {
        if self.writes_stopped() {
            return Err(VfsError::ReadOnly);
        }
        self.check_writer(caller_uid)?;
        let node = self.node(ino)?;
        match &node {
            Node::Leaf(s) => {
                let handle = fh.and_then(|fh| self.handles.get(fh).ok());
                match handle {
                    Some(Handle::Leaf(leaf)) => leaf.lock().truncate(size)?,
                    _ if size == 0 => {
                        self.pending_resets
                            .lock()
                            .insert(s.clone(), std::time::Instant::now());
                        self.announce(s, EntriesChanged::None);
                    }
                    _ => return Err(VfsError::InvalidArgument("leaf: size must be 0".into())),
                }
            }
            Node::EntriesNew(_) if size == 0 => {}
            n if n.is_dir() => return Err(VfsError::IsADirectory),
            _ => return Err(VfsError::AccessDenied),
        }
        self.attr_of(&node)
    }

    /// Attribute changes other than size (mode, owner, times): never allowed.
    fn set_other_attr(&self, ino: u64) -> Result<Attr, VfsError> {
        self.node(ino)?;
        Err(if self.config.read_only {
            VfsError::ReadOnly
        } else {
            VfsError::NotPermitted
        })
    }

    /// Namespace changes (create, mkdir, unlink, rmdir, rename, link, symlink) in `parent`:
    /// the layout is fixed, so each is refused with the reason that fits.
    pub fn change_namespace(&self, parent: u64, change: NamespaceChange) -> VfsError {
        let Ok(dir) = self.node(parent) else {
            return VfsError::NotFound;
        };
        if !dir.is_dir() {
            return VfsError::NotADirectory;
        }
        if self.config.read_only {
            return VfsError::ReadOnly;
        }
        match change {
            NamespaceChange::Create => VfsError::AccessDenied,
            NamespaceChange::Remove | NamespaceChange::Rename | NamespaceChange::Link => {
                VfsError::NotPermitted
            }
        }
    }
}

/// What a `leaf` content names.
enum Resolved {
    One(String),
    None,
    Many(Vec<String>),
}

/// The entry `name` names in a loaded session: an entry id, an entry file name (with or
/// without `.json`), a label's file name, or a unique prefix of an entry id.
fn resolve_leaf(loaded: &mut super::slots::Loaded, name: &str) -> Resolved {
    let manager = loaded.manager.clone();
    if manager.read(|s| s.index_of(name).is_some()) {
        return Resolved::One(name.to_owned());
    }
    let file = if name.ends_with(".json") {
        name.to_owned()
    } else {
        format!("{name}.json")
    };
    if let Some(entry) = loaded.rendered.find_entry(&manager, &file) {
        return Resolved::One(entry.id.to_string());
    }
    let label = loaded.rendered.labels(&manager).get(name).cloned();
    if let Some(id) = label.or_else(|| {
        let encoded = super::layout::label_file_name(name);
        loaded.rendered.labels(&manager).get(&encoded).cloned()
    }) {
        return Resolved::One(id);
    }
    let mut matching: Vec<String> = manager.read(|s| {
        s.entries()
            .filter_map(|r| r.id())
            .filter(|id| id.starts_with(name))
            .map(str::to_owned)
            .collect()
    });
    matching.sort();
    matching.dedup();
    match matching.len() {
        0 => Resolved::None,
        1 => Resolved::One(matching.remove(0)),
        _ => Resolved::Many(matching),
    }
}

/// The first few candidates of an ambiguous name, for `errors`.
fn candidates(ids: &[String]) -> String {
    const SHOWN: usize = 8;
    let shown: Vec<&str> = ids.iter().take(SHOWN).map(String::as_str).collect();
    let more = ids.len().saturating_sub(SHOWN);
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// The JSON objects of lines written to `entries/new`, each with its line number in the
/// write (blank lines are skipped); the first line that is not one is refused.
fn parse_lines(lines: &[Vec<u8>]) -> Result<Vec<(usize, Object)>, VfsError> {
    let mut objects = Vec::with_capacity(lines.len());
    for (n, line) in lines.iter().enumerate() {
        let refused = |why: String| VfsError::InvalidArgument(format!("line {}: {why}", n + 1));
        let Ok(text) = std::str::from_utf8(line) else {
            return Err(refused("not UTF-8".into()));
        };
        if text.trim().is_empty() {
            continue;
        }
        let object = parse_object_line(text).map_err(|e| refused(e.to_string()))?;
        objects.push((n + 1, object));
    }
    Ok(objects)
}
