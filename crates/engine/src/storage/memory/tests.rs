use super::*;

#[test]
fn is_locked_tells_a_held_lock_without_taking_one() {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/d")).unwrap();
    crate::storage::check_is_locked(&storage, Path::new("/d"));
}

#[test]
fn appending_to_a_file_that_must_exist_creates_nothing() {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/d")).unwrap();
    let file = Path::new("/d/f");
    let err = storage
        .open_writer(file, OpenMode::AppendExisting)
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert_eq!(storage.file(file), None);
    storage.put_file(file, b"a");
    let mut w = storage.open_writer(file, OpenMode::AppendExisting).unwrap();
    w.write_all(b"b").unwrap();
    assert_eq!(storage.file(file).unwrap(), b"ab");
}

#[test]
fn faults_fail_the_numbered_operation_and_short_writes_tear() {
    let storage = MemoryStorage::new();
    let dir = Path::new("/d");
    storage.ensure_dir(dir).unwrap();
    let file = dir.join("f");
    let mut w = storage.open_writer(&file, OpenMode::Append).unwrap();
    w.write_all(b"line\n").unwrap();
    storage.set_fault(Some(Fault {
        at: storage.op_count(),
        kind: FaultKind::ShortWrite,
    }));
    let err = w.write_all(b"abcdef\n").unwrap_err();
    let native = |errno| super::super::sys::os::errno_error(errno).raw_os_error();
    assert_eq!(err.raw_os_error(), native(libc::ENOSPC));
    assert_eq!(storage.file(&file).unwrap(), b"line\nabc");
    storage.set_fault(Some(Fault {
        at: storage.op_count(),
        kind: FaultKind::Errno(libc::EIO),
    }));
    assert_eq!(
        storage
            .rename(&file, &dir.join("g"))
            .unwrap_err()
            .raw_os_error(),
        native(libc::EIO)
    );
    assert!(storage.file(&file).is_some());
    assert_eq!(
        storage.op_log(),
        ["ensure_dir", "open_writer", "write", "write", "rename"]
    );
}

#[test]
fn entries_are_private_until_a_test_says_otherwise_and_links_are_counted() {
    use crate::storage::check_private_file;
    let storage = MemoryStorage::new();
    let dir = Path::new("/d");
    storage.ensure_dir(dir).unwrap();
    let (a, b) = (dir.join("a"), dir.join("b"));
    storage.put_file(&a, b"x");
    check_private_file(&storage, &a).unwrap();
    storage.hard_link(&a, &b).unwrap();
    assert_eq!(storage.lstat(&a).unwrap().links, 2);
    let err = check_private_file(&storage, &a).unwrap_err();
    assert!(err.to_string().contains("more than one hard link"), "{err}");
    assert_eq!(
        storage.hard_link(&a, &b).unwrap_err().kind(),
        io::ErrorKind::AlreadyExists
    );
    storage.unlink(&b).unwrap();
    storage.set_owner(&a, 0);
    assert!(check_private_file(&storage, &a).is_err());
    storage.set_owner(&a, MEMORY_USER);
    storage.set_mode(&a, 0o644).unwrap();
    assert!(check_private_file(&storage, &a).is_err());
}

#[test]
fn directories_move_whole_never_over_anything_and_leave_only_when_empty() {
    let storage = MemoryStorage::new();
    let (a, b) = (Path::new("/d/a"), Path::new("/d/b"));
    storage.ensure_dir(&a.join("sub")).unwrap();
    storage.put_file(&a.join("sub/f"), b"x");
    storage.ensure_dir(Path::new("/d/c")).unwrap();
    assert_eq!(
        storage
            .rename_no_replace(a, Path::new("/d/c"))
            .unwrap_err()
            .kind(),
        io::ErrorKind::AlreadyExists
    );
    storage.rename_no_replace(a, b).unwrap();
    assert!(!storage.exists(a));
    assert_eq!(storage.file(&b.join("sub/f")).unwrap(), b"x");
    assert_eq!(
        storage.list_entries(b).unwrap(),
        [(b.join("sub"), EntryKind::Dir)]
    );
    // The moved file's entry is as durable as it was before the move.
    storage.crash();
    assert_eq!(storage.file(&b.join("sub/f")).unwrap(), b"x");
    assert_eq!(
        storage
            .remove_dir(&b.join("sub"))
            .unwrap_err()
            .raw_os_error(),
        super::super::sys::os::errno_error(libc::ENOTEMPTY).raw_os_error()
    );
    crate::storage::remove_tree(&storage, b).unwrap();
    assert!(!storage.exists(b) && storage.paths().is_empty());
}

#[test]
fn positional_writes_overwrite_in_place() {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/d")).unwrap();
    let file = Path::new("/d/f");
    let mut w = storage.open_writer(file, OpenMode::CreateNew).unwrap();
    w.write_all(b"abcdef").unwrap();
    w.write_at(b"XY", 1).unwrap();
    w.truncate(4).unwrap();
    assert_eq!(storage.file(file).unwrap(), b"aXYd");
    let stat = storage.lstat(file).unwrap();
    assert_eq!(stat.len, 4);
    let open = storage.open_read_at(file).unwrap();
    assert_eq!(open.mtime_ns().unwrap(), stat.mtime_ns);
}

#[test]
fn writers_opened_before_a_crash_reach_nothing_and_hold_no_lock() {
    let storage = MemoryStorage::new();
    storage.ensure_dir(Path::new("/d")).unwrap();
    let file = Path::new("/d/f");
    storage.put_file(file, b"kept\n");
    let mut w = storage.open_writer(file, OpenMode::Append).unwrap();
    w.lock().unwrap();
    w.write_all(b"lost\n").unwrap();
    storage.crash();
    assert_eq!(storage.file(file).unwrap(), b"kept\n");
    let ops = storage.op_count();
    let eio = crate::storage::sys::os::errno_error(libc::EIO).raw_os_error();
    assert_eq!(w.write_all(b"late\n").unwrap_err().raw_os_error(), eio);
    assert_eq!(w.fsync().unwrap_err().raw_os_error(), eio);
    assert_eq!(
        storage.op_count(),
        ops,
        "a dead writer's calls are not counted"
    );
    // The lock went with the process: a writer of the new life takes it at once.
    let mut again = storage.open_writer(file, OpenMode::Append).unwrap();
    again.lock().unwrap();
    drop(w);
    again.write_all(b"new\n").unwrap();
    again.fsync().unwrap();
    storage.crash();
    assert_eq!(storage.file(file).unwrap(), b"kept\nnew\n");
}

#[test]
fn a_same_length_rewrite_with_its_mtime_put_back_is_another_version() {
    let storage = MemoryStorage::new();
    let dir = Path::new("/d");
    storage.ensure_dir(dir).unwrap();
    let file = dir.join("f");
    storage.put_file(&file, b"secret\n");
    let before = storage.version(&file).unwrap();
    let mut w = storage
        .open_writer(&file, OpenMode::AppendExisting)
        .unwrap();
    w.write_at(b"******\n", 0).unwrap();
    w.close().unwrap();
    storage
        .set_modified_ms(&file, before.modified_ms())
        .unwrap();
    let after = storage.version(&file).unwrap();
    assert_eq!(storage.file(&file).unwrap(), b"******\n");
    assert_eq!(
        (after.id, after.len, after.mtime_ns),
        (before.id, before.len, before.mtime_ns)
    );
    assert_ne!(after, before);
    let read = storage.open_read_at(&file).unwrap();
    assert_eq!(read.ctime_ns().unwrap(), after.ctime_ns);
    assert_eq!(read.mtime_ns().unwrap(), before.mtime_ns);
}

#[test]
fn renames_mode_changes_links_and_truncations_move_the_change_time_on() {
    let storage = MemoryStorage::new();
    let dir = Path::new("/d");
    storage.ensure_dir(dir).unwrap();
    let (a, b, c) = (dir.join("a"), dir.join("b"), dir.join("c"));
    storage.put_file(&a, b"abc");
    let mut last = storage.version(&a).unwrap();
    let mut changed = |path: &Path, what: &str| {
        let now = storage.version(path).unwrap();
        assert!(now.ctime_ns > last.ctime_ns, "{what}");
        last = now;
    };
    storage.rename(&a, &b).unwrap();
    changed(&b, "rename");
    storage.set_mode(&b, 0o644).unwrap();
    changed(&b, "mode");
    storage.hard_link(&b, &c).unwrap();
    changed(&b, "link");
    let mut w = storage.open_writer(&b, OpenMode::AppendExisting).unwrap();
    changed(&b, "a writer opened");
    let opened = storage.version(&b).unwrap();
    w.truncate(1).unwrap();
    drop(w);
    changed(&b, "truncate");
    assert!(storage.version(&b).unwrap().mtime_ns > opened.mtime_ns);
}
