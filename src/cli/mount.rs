//! `gjcfs mount MOUNTPOINT`: serves the session store through FUSE in the foreground until
//! Ctrl-C, SIGTERM or SIGHUP (or an outside unmount), then unmounts and closes every session.
//!
//! On a signal, writes are refused at once, the mount is detached (lazily if files are
//! open) and the server waits a moment for the open files to close; then every session is
//! flushed and closed and the process exits, which ends the connection of a detached mount
//! that some process still holds a file of.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use gjcfs_vfs::{SessionSource, Vfs, VfsConfig};

use super::output::terminal_safe;

/// How many sessions stay loaded at once.
const MAX_LOADED: usize = 64;
/// Threads serving kernel requests (Linux; one elsewhere).
const SERVER_THREADS: usize = if cfg!(target_os = "linux") { 4 } else { 1 };
/// How often loaded sessions are checked for changes made outside the mount.
const POLL_EVERY: Duration = Duration::from_millis(500);
/// How long a stopping server waits for the files still open on its detached mount to be
/// closed before it ends the connection.
const CLOSE_PATIENCE: Duration = Duration::from_secs(2);

pub struct Options<'a> {
    pub agent_dir: Option<&'a Path>,
    pub session_dir: Option<&'a Path>,
    pub read_only: bool,
    pub allow_other: bool,
    pub allow_empty: bool,
}

pub fn run(mountpoint: &Path, options: Options<'_>) -> Result<()> {
    let Options {
        agent_dir,
        session_dir,
        read_only,
        allow_other,
        allow_empty,
    } = options;
    let dirs = super::agent::agent_dirs(agent_dir)?;
    let source = match session_dir {
        Some(dir) => SessionSource::Dir(dir.to_owned()),
        None => SessionSource::SessionsRoot(dirs.sessions_root()),
    };
    let mountpoint = std::path::absolute(mountpoint)
        .with_context(|| format!("{}: cannot resolve", mountpoint.display()))?;
    check_fuse_installed()?;
    super::agent::check_store(&dirs, session_dir, allow_empty)?;
    let mut store = vec![
        ("the agent directory", dirs.agent_dir().to_owned()),
        ("the sessions directory", dirs.sessions_root()),
        ("the blob store", dirs.blob_dir()),
    ];
    if let Some(dir) = dirs.history_db().parent() {
        store.push(("the prompt history's directory", dir.to_owned()));
    }
    if let Some(dir) = session_dir {
        store.push(("the session directory", dir.to_owned()));
    }
    refuse_overlap(&mountpoint, &store)?;
    clear_stale_mount(&mountpoint)?;
    if !mountpoint.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&mountpoint)
            .with_context(|| format!("{}: cannot create the mountpoint", mountpoint.display()))?;
    }
    if !mountpoint.is_dir() {
        bail!("{}: not a directory", mountpoint.display());
    }
    let occupied = std::fs::read_dir(&mountpoint)
        .with_context(|| format!("{}: cannot read the mountpoint", mountpoint.display()))?
        .next()
        .is_some();
    if occupied {
        bail!(
            "{}: not empty (a mount would hide what it holds); choose an empty directory",
            mountpoint.display()
        );
    }

    // Signals are taken by one thread with sigwait; blocked before any other thread starts
    // so every thread inherits the mask.
    let signals = block_termination_signals()?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut signal = 0;
        // SAFETY: `signals` is an initialized set; `signal` is a valid out pointer.
        if unsafe { libc::sigwait(&signals, &mut signal) } == 0 {
            let _ = tx.send(signal);
        }
    });

    let vfs = Arc::new(Vfs::new(VfsConfig {
        source,
        blob_dir: dirs.blob_dir(),
        read_only,
        max_loaded: MAX_LOADED,
        history_db: dirs.history_db(),
        // SAFETY: getuid cannot fail.
        owner_uid: Some(unsafe { libc::getuid() }),
    }));
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let options = gjcfs_fuse::MountOptions {
        uid,
        gid,
        threads: SERVER_THREADS,
        read_only,
        allow_other,
        auto_unmount: allow_other || auto_unmount_allowed(),
    };
    let session = gjcfs_fuse::mount(vfs.clone(), &mountpoint, &options)
        .with_context(|| format!("{}: cannot mount", mountpoint.display()))?;
    eprintln!("gjcfs: mounted at {}", mountpoint.display());
    let served = vfs.summary();
    let served_dir = session_dir.unwrap_or(dirs.agent_dir());
    eprintln!(
        "gjcfs: serving {}: {} session(s) in {} workspace(s), prompt history: {}{}",
        terminal_safe(&served_dir.display().to_string()),
        served.sessions,
        served.workspaces,
        if served.history { "yes" } else { "no" },
        if read_only { " (read-only)" } else { "" }
    );

    let mut polled = Instant::now();
    let signalled = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(signal) => break Some(signal),
            Err(mpsc::RecvTimeoutError::Timeout) if !session.is_finished() => {
                if polled.elapsed() >= POLL_EVERY {
                    vfs.poll_outside_changes();
                    polled = Instant::now();
                }
                for notice in vfs.take_notices() {
                    eprintln!("gjcfs: {notice}");
                }
            }
            Err(_) => break None,
        }
    };
    let served = match signalled {
        Some(signal) => {
            // Nothing written from now on reaches a session.
            vfs.stop_writes();
            let name = match signal {
                libc::SIGINT => "SIGINT",
                libc::SIGHUP => "SIGHUP",
                _ => "SIGTERM",
            };
            eprintln!("gjcfs: {name}: writes refused from now on; unmounting");
            // Unmount ourselves (fuser's own unmount only closes the auto_unmount socket
            // and relies on a fusermount3 watcher being alive); the session thread then
            // ends, once the last file open on a detached mount is closed.
            unmount(&mountpoint);
            let started = Instant::now();
            while !session.is_finished() && started.elapsed() < CLOSE_PATIENCE {
                std::thread::sleep(Duration::from_millis(20));
            }
            if session.is_finished() {
                Some(session.join())
            } else {
                // The exit closes the device, which ends the connection: the files still
                // open fail from then on (ENOTCONN).
                eprintln!(
                    "gjcfs: files are still open on the detached mount; ending its connection"
                );
                None
            }
        }
        None => Some(session.join()),
    };
    let failures = vfs.close_all();
    for (sid, reason) in &failures {
        eprintln!("gjcfs: session {}: {reason}", terminal_safe(sid));
    }
    if let Some(served) = served {
        served.context("the filesystem session failed")?;
    }
    if !failures.is_empty() {
        bail!("{} session(s) could not be closed cleanly", failures.len());
    }
    eprintln!("gjcfs: unmounted {}", mountpoint.display());
    Ok(())
}

/// The packages that provide FUSE's userspace parts, for error messages.
const FUSE_PACKAGE: &str = "install the fuse3 package (Debian/Ubuntu: apt install fuse3)";

/// Fails with what to install when the FUSE device or `fusermount3` is missing.
fn check_fuse_installed() -> Result<()> {
    if !Path::new("/dev/fuse").exists() {
        bail!(
            "/dev/fuse does not exist: the kernel's FUSE module is not loaded (modprobe fuse) \
             or, in a container, the device was not passed in; {FUSE_PACKAGE}"
        );
    }
    if find_program("fusermount3").is_none() {
        bail!("fusermount3 was not found in PATH; {FUSE_PACKAGE}");
    }
    Ok(())
}

/// The first executable file named `name` in `PATH`.
fn find_program(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `path` (absolute) with every symlink resolved, as far as it exists: its nearest
/// existing ancestor canonicalized, the rest appended (`..` folded).
fn resolved(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut rest = Vec::new();
    let mut existing = path.to_owned();
    let mut out = loop {
        // A dead mount fails too (ENOTCONN); its parent is resolved instead.
        if let Ok(real) = existing.canonicalize() {
            break real;
        }
        match existing.components().next_back() {
            Some(last @ (Component::Normal(_) | Component::ParentDir | Component::CurDir)) => {
                rest.push(last.as_os_str().to_owned());
                existing.pop();
            }
            _ => break existing,
        }
    };
    for name in rest.iter().rev() {
        if name == ".." {
            out.pop();
        } else if name != "." {
            out.push(name);
        }
    }
    out
}

/// Refuses a mountpoint inside (or equal to) a directory the store is read from — the
/// server would wait on its own mount at the first access and never answer — and a store
/// inside the mountpoint, which the mount would hide.
fn refuse_overlap(mountpoint: &Path, store: &[(&str, PathBuf)]) -> Result<()> {
    let mount = resolved(mountpoint);
    for (what, dir) in store {
        let dir_path = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let dir = resolved(&dir_path);
        if mount.starts_with(&dir) {
            bail!(
                "{}: the mountpoint is inside {what} {}; mount outside the store",
                mountpoint.display(),
                dir_path.display()
            );
        }
        if dir.starts_with(&mount) {
            bail!(
                "{}: {what} {} is inside the mountpoint; mount outside the store",
                mountpoint.display(),
                dir_path.display()
            );
        }
    }
    Ok(())
}

/// `gjcfs umount MOUNTPOINT`: `fusermount3 -u`; the server sees its session end.
pub fn umount(mountpoint: &Path) -> Result<()> {
    let mountpoint = std::path::absolute(mountpoint)
        .with_context(|| format!("{}: cannot resolve", mountpoint.display()))?;
    if !is_mounted(&mountpoint) {
        bail!("{}: not mounted", mountpoint.display());
    }
    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(&mountpoint)
        .status()
        .context("cannot run fusermount3")?;
    if !status.success() {
        bail!("fusermount3 -u {} failed ({status})", mountpoint.display());
    }
    Ok(())
}

fn block_termination_signals() -> Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data initialized by sigemptyset before use; the calls only
    // touch the set and this thread's mask.
    unsafe {
        // A shell starts background jobs with SIGINT ignored, and an ignored signal is
        // discarded even while blocked: restore the default so sigwait receives it.
        for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(signal, libc::SIG_DFL);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            bail!(
                "cannot block signals: {}",
                std::io::Error::from_raw_os_error(rc)
            );
        }
        Ok(set)
    }
}

/// Whether fusermount3 will accept `auto_unmount` (it needs `allow_other`: root, or
/// `user_allow_other` in /etc/fuse.conf).
fn auto_unmount_allowed() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    std::fs::read_to_string("/etc/fuse.conf")
        .is_ok_and(|text| text.lines().any(|line| line.trim() == "user_allow_other"))
}

/// `/proc/mounts` escapes space, tab, newline and backslash as octal.
fn mounts_escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            ' ' => out.push_str("\\040"),
            '\t' => out.push_str("\\011"),
            '\n' => out.push_str("\\012"),
            '\\' => out.push_str("\\134"),
            c => out.push(c),
        }
    }
    out
}

fn is_mounted(path: &Path) -> bool {
    let wanted = mounts_escape(path);
    std::fs::read_to_string("/proc/mounts").is_ok_and(|text| {
        text.lines()
            .any(|line| line.split(' ').nth(1) == Some(wanted.as_str()))
    })
}

/// Whether a server answers for the filesystem at `path`: statfs always reaches it (a
/// dead mount's cached names and attributes may still answer a stat).
fn answers(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path and a zeroed out-struct.
    unsafe {
        let mut buf: libc::statvfs = std::mem::zeroed();
        libc::statvfs(c_path.as_ptr(), &mut buf) == 0
    }
}

/// How long a dead server's mount is given to go away by itself.
const STALE_PATIENCE: Duration = Duration::from_secs(2);

/// A mount left at the mountpoint by a crashed earlier run ("transport endpoint is not
/// connected") is detached before mounting again. The dead server's auto-unmount watcher
/// may be about to remove it: it is given a moment first, because a watcher that runs
/// after the new mount would unmount that one instead. A mount whose server still answers
/// is an error.
fn clear_stale_mount(mountpoint: &Path) -> Result<()> {
    let started = Instant::now();
    while is_mounted(mountpoint) {
        if answers(mountpoint) {
            bail!(
                "{}: already mounted and served; run `gjcfs umount {}` first",
                mountpoint.display(),
                mountpoint.display()
            );
        }
        if started.elapsed() >= STALE_PATIENCE {
            eprintln!(
                "gjcfs: {} holds a dead mount; detaching it",
                mountpoint.display()
            );
            lazy_unmount(mountpoint);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// `fusermount3 -u`, and if the mount is busy, `fusermount3 -uz` (detached now, gone when
/// the last open file closes).
fn unmount(mountpoint: &Path) {
    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(mountpoint)
        .status();
    if !matches!(status, Ok(s) if s.success()) && is_mounted(mountpoint) {
        eprintln!("gjcfs: unmount failed; detaching lazily");
        lazy_unmount(mountpoint);
    }
}

fn lazy_unmount(mountpoint: &Path) {
    let status = Command::new("fusermount3")
        .arg("-uz")
        .arg(mountpoint)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("gjcfs: fusermount3 -uz {} failed", mountpoint.display());
    }
}
