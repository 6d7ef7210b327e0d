use super::*;

#[test]
fn only_a_request_shorter_than_the_kernel_makes_them_ends_its_write() {
    let page = page_size();
    let max = 1 << 20;
    assert_eq!(part_of(max, max), Part::MayContinue);
    // Cut at the page limit, with the writer's buffer not page-aligned.
    assert_eq!(part_of(max - page + 1, max), Part::MayContinue);
    assert_eq!(part_of(max - page, max), Part::Last);
    assert_eq!(part_of(100, max), Part::Last);
    let linux = request_max(Kernel::Linux);
    assert!(linux <= MAX_WRITE as usize && linux >= page, "{linux}");
    assert_eq!(
        part_of(page + 1, request_max(Kernel::MacFuse)),
        Part::MayContinue
    );
    assert_eq!(part_of(page, request_max(Kernel::MacFuse)), Part::Last);
}

#[test]
fn a_panicking_handler_answers_eio() {
    let result: Result<(), Errno> = call("test", 1, || panic!("boom"));
    assert_eq!(result, Err(Errno::EIO));
    assert_eq!(call("test", 1, || Ok(7)), Ok(7));
    assert_eq!(
        call::<()>("test", 1, || Err(VfsError::InvalidArgument("x".into()))),
        Err(Errno::EINVAL)
    );
}

#[test]
fn every_model_error_has_its_errno() {
    let cases = [
        (VfsError::NotFound, libc::ENOENT),
        (VfsError::NotADirectory, libc::ENOTDIR),
        (VfsError::IsADirectory, libc::EISDIR),
        (VfsError::ReadOnly, libc::EROFS),
        (VfsError::NotPermitted, libc::EPERM),
        (VfsError::AccessDenied, libc::EACCES),
        (VfsError::InvalidArgument(String::new()), libc::EINVAL),
        (VfsError::BadHandle, libc::EBADF),
        (VfsError::Refused(String::new()), libc::EACCES),
        (VfsError::Unreadable(String::new()), libc::EIO),
        (VfsError::TooLarge(String::new()), libc::EFBIG),
        (VfsError::Stale, libc::ESTALE),
    ];
    let storage = |cause| VfsError::Storage {
        cause,
        reason: String::new(),
    };
    let causes = [
        (IoCause::NoSpace, libc::ENOSPC),
        (IoCause::QuotaExceeded, libc::EDQUOT),
        (IoCause::ReadOnlyFilesystem, libc::EROFS),
        (IoCause::PermissionDenied, libc::EACCES),
        (IoCause::NotPermitted, libc::EPERM),
        (IoCause::NotFound, libc::ENOENT),
        (IoCause::FileTooLarge, libc::EFBIG),
        (IoCause::Symlink, libc::EACCES),
        (IoCause::NotRegularFile, libc::EACCES),
        (IoCause::Other, libc::EIO),
    ];
    let cases = cases
        .into_iter()
        .chain(causes.map(|(cause, code)| (storage(cause), code)));
    for (error, code) in cases {
        assert_eq!(i32::from(to_errno(&error)), code, "{error:?}");
    }
}

fn options(read_only: bool, allow_other: bool, auto_unmount: bool) -> MountOptions {
    MountOptions {
        uid: 1,
        gid: 1,
        threads: 1,
        read_only,
        allow_other,
        auto_unmount,
    }
}

#[test]
fn linux_mounts_with_a_subtype_and_its_auto_unmount_watcher() {
    let (list, acl) = mount_options(&options(false, false, true), Kernel::Linux);
    assert_eq!(
        list,
        [
            MountOption::FSName("gjcfs".into()),
            MountOption::Subtype("gjcfs".into()),
            MountOption::NoAtime,
            MountOption::DefaultPermissions,
            MountOption::AutoUnmount,
        ]
    );
    // auto_unmount needs allow_other, limited to root and the owner.
    assert_eq!(acl, SessionACL::RootAndOwner);
    let (list, acl) = mount_options(&options(true, true, true), Kernel::Linux);
    assert!(list.contains(&MountOption::RO));
    assert_eq!(acl, SessionACL::All);
    let (list, acl) = mount_options(&options(false, false, false), Kernel::Linux);
    assert!(!list.contains(&MountOption::AutoUnmount));
    assert_eq!(acl, SessionACL::Owner);
}

#[test]
fn macfuse_gets_no_option_it_does_not_know() {
    for (read_only, allow_other) in [(false, false), (true, true)] {
        let (list, acl) = mount_options(&options(read_only, allow_other, true), Kernel::MacFuse);
        assert!(!list.contains(&MountOption::AutoUnmount), "{list:?}");
        assert!(
            !list.iter().any(|o| matches!(o, MountOption::Subtype(_))),
            "{list:?}"
        );
        assert!(list.contains(&MountOption::CUSTOM("volname=gjcfs".into())));
        assert!(list.contains(&MountOption::CUSTOM("noappledouble".into())));
        assert!(list.contains(&MountOption::DefaultPermissions));
        assert_eq!(list.contains(&MountOption::RO), read_only);
        let wanted = if allow_other {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        assert_eq!(acl, wanted);
    }
}

#[test]
fn a_listing_read_from_any_offset_goes_on_where_the_whole_one_is() {
    let entries: Vec<DirEntry> = (0..5)
        .map(|i| DirEntry {
            ino: 10 + i,
            kind: NodeKind::File,
            name: format!("f{i}"),
        })
        .collect();
    let whole: Vec<(u64, u64, String)> = listing_from(1, &entries, 0)
        .map(|(next, e)| (next, e.ino, e.name.clone()))
        .collect();
    assert_eq!(whole.len(), 7);
    assert_eq!((whole[0].1, whole[0].2.as_str()), (1, "."));
    assert_eq!((whole[1].1, whole[1].2.as_str()), (1, ".."));
    // Each entry's offset is where the next read starts: offsets count 1, 2, 3, ...
    for (i, (next, ..)) in whole.iter().enumerate() {
        assert_eq!(*next, i as u64 + 1);
    }
    for offset in 0..10u64 {
        let from: Vec<(u64, u64, String)> = listing_from(1, &entries, offset)
            .map(|(next, e)| (next, e.ino, e.name.clone()))
            .collect();
        let expected: Vec<_> = whole.iter().skip(offset as usize).cloned().collect();
        assert_eq!(from, expected, "from offset {offset}");
    }
    assert_eq!(listing_from(1, &entries, u64::MAX).count(), 0);
}
