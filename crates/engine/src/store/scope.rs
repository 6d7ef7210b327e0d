//! Managed v2 session scopes: one directory per workspace under
//! `<agentDir>/sessions/`, named by a digest of the workspace's canonical identity, and bound
//! to it by a binding file.
//!
//! Invariants:
//! - Identity (POSIX): the `realpath` of the workspace, which must be an existing local
//!   directory with a UTF-8 path; platform tag `posix`. A path on a network filesystem is
//!   [`ScopeError::NetworkUnsupported`], never guessed at.
//! - Identity (Windows): the final path of the workspace directory as the system spells it
//!   (`GetFinalPathNameByHandleW`, normalised, with a drive letter) without the `\\?\`
//!   prefix, so drive-letter and case aliases, `\\?\` spellings, 8.3 names, `subst` drives
//!   and junctions give one identity; platform tag `win32`. A UNC path, or one on a remote
//!   drive, is [`ScopeError::NetworkUnsupported`].
//! - Digest: SHA-256 of `gjc-managed-session-scope␀identity-v1␀<platform>␀<path>`, in lower-case
//!   RFC 4648 base32 without padding (52 characters); the directory is `v2-<digest>`.
//! - The binding file holds exactly [`binding_bytes`]; anything else — other bytes, a symlink,
//!   a non-regular file, more than one hard link — fails closed.
//! - Every directory the scope verifies is a real directory (not a symlink) owned by the
//!   effective user with mode exactly `0700`; files exactly `0600`; no POSIX ACL (an
//!   `ENOTSUP`/`EOPNOTSUPP` answer from the ACL attribute call only means the filesystem
//!   cannot store one). On Windows the same checks read the DACL: owner-only is a DACL that
//!   grants only the current user (and SYSTEM and Administrators), see
//!   `storage::sys::windows`. Where the platform cannot make the ACL or the
//!   network-filesystem check (macOS and the other Unixes today), the scope is refused: the
//!   check fails closed.
//! - An existing transcript is trusted as managed only through
//!   [`verify_transcript_scope`]: its sessions root is a real directory, its scope directory
//!   is owner-only, and the scope's binding is valid and names the directory it is in
//!   (`scope_dir_name` of the bound identity is the directory's name). Every path that opens
//!   or reads a managed transcript goes through it, failing closed.

use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::io_cause::{io_cause, IoCause};
use crate::storage::{
    check_owner_only, served_elsewhere, write_new_durable, EntryKind, Exposure, FileStorage,
    PrivacyError, SessionStorage,
};

/// The file that binds a scope directory to its workspace.
pub const BINDING_FILE: &str = ".gjc-managed-session-scope.v2.json";
/// The scope's internal directory.
pub const INTERNAL_DIR: &str = ".gjc-managed-session-internal";
const INTERNAL_SUBDIRS: [&str; 3] = ["locks", "receipts", "tombstones"];
/// The platform tag of identities: `posix` (Linux, macOS), `win32` (Windows, the agent's
/// runtime's name for it).
const PLATFORM: &str = if cfg!(windows) { "win32" } else { "posix" };

/// Why a workspace's identity could not be resolved, or its scope could not be verified or
/// prepared.
#[derive(Debug, thiserror::Error)]
pub enum ScopeError {
    /// The workspace path cannot be canonicalised, is not a directory, or its canonical path
    /// is not UTF-8.
    #[error("{path}: workspace is not an existing directory with a UTF-8 path")]
    InvalidWorkspace {
        /// The workspace path, as given.
        path: PathBuf,
    },
    /// The workspace is on a network filesystem (on Windows, a UNC path or a remote drive).
    #[error("{path}: workspaces on network filesystems are not supported (network_unsupported)")]
    NetworkUnsupported {
        /// The workspace path, as given.
        path: PathBuf,
    },
    /// The workspace path leads onto a FUSE filesystem, which is never looked up: its
    /// server may not answer (a network filesystem is [`ScopeError::NetworkUnsupported`]).
    #[error("{path}: {why} (served_elsewhere)")]
    ServedElsewhere {
        /// The workspace path, as given.
        path: PathBuf,
        /// Which mount it leads onto.
        why: crate::storage::ServedElsewhere,
    },
    /// The binding file is missing where one is required, unreadable, a symlink, hard-linked,
    /// or does not hold a well-formed binding in the canonical encoding.
    #[error("{path}: binding_invalid: {why}")]
    BindingInvalid {
        /// The binding file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The binding is well-formed but names another workspace than the expected one, or its
    /// identity does not name the scope directory it is in.
    #[error("{path}: binding_conflict: the scope is bound to {bound}")]
    BindingConflict {
        /// The binding file, or the scope directory whose name does not match.
        path: PathBuf,
        /// The canonical path the binding names.
        bound: String,
    },
    /// A path the scope relies on is not what it must be: a transcript not inside a scope
    /// directory, a sessions root that is not a real directory.
    #[error("{path}: unsafe: {why}")]
    Unsafe {
        /// The offending path.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A path that must be private is not ([`check_owner_only`]).
    #[error("{path}: unsafe: {exposure}")]
    Exposed {
        /// The directory or file that is not owner-only.
        path: PathBuf,
        /// How it is exposed.
        exposure: Exposure,
    },
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The path it failed on.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ScopeError + '_ {
    move |source| ScopeError::Io {
        path: path.to_owned(),
        source,
    }
}

fn unsafe_path(path: &Path, why: impl Into<String>) -> ScopeError {
    ScopeError::Unsafe {
        path: path.to_owned(),
        why: why.into(),
    }
}

/// The canonical identity of a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The platform tag: `posix` (Linux, macOS) or `win32` (Windows).
    pub platform: &'static str,
    /// The workspace's canonical path: its `realpath` on POSIX, its final path without the
    /// `\\?\` prefix on Windows.
    pub canonical_path: String,
}

/// The canonical identity of the workspace at `cwd`, on disk ([`resolve_identity_in`]).
pub fn resolve_identity(cwd: &Path) -> Result<Identity, ScopeError> {
    resolve_identity_in(&FileStorage, cwd)
}

/// The canonical identity of the workspace at `cwd` in `storage`: its canonical path, which
/// must be an existing directory with a UTF-8 path that is not on a network filesystem.
/// The path is resolved without stepping onto a FUSE or network mount
/// ([`SessionStorage::canonicalize_local`]): one that leads there is refused unanswered.
pub fn resolve_identity_in(
    storage: &dyn SessionStorage,
    cwd: &Path,
) -> Result<Identity, ScopeError> {
    let invalid = || ScopeError::InvalidWorkspace {
        path: cwd.to_owned(),
    };
    let real = storage
        .canonicalize_local(cwd)
        .map_err(|e| match served_elsewhere(&e) {
            Some(why) if why.network => ScopeError::NetworkUnsupported {
                path: cwd.to_owned(),
            },
            Some(why) => ScopeError::ServedElsewhere {
                path: cwd.to_owned(),
                why: why.clone(),
            },
            None => invalid(),
        })?;
    if storage.lstat(&real).map_err(|_| invalid())?.kind != EntryKind::Dir {
        return Err(invalid());
    }
    if storage.is_network_fs(&real).map_err(io_err(&real))? {
        return Err(ScopeError::NetworkUnsupported {
            path: cwd.to_owned(),
        });
    }
    let canonical_path = real.to_str().ok_or_else(invalid)?.to_owned();
    Ok(Identity {
        platform: PLATFORM,
        canonical_path,
    })
}

/// The 52-character scope digest of an identity.
pub fn digest(platform: &str, canonical_path: &str) -> String {
    let mut hasher = Sha256::new();
    for (i, part) in [
        "gjc-managed-session-scope",
        "identity-v1",
        platform,
        canonical_path,
    ]
    .iter()
    .enumerate()
    {
        if i > 0 {
            hasher.update([0u8]);
        }
        hasher.update(part.as_bytes());
    }
    data_encoding::BASE32_NOPAD
        .encode(&hasher.finalize())
        .to_ascii_lowercase()
}

/// `v2-<digest>`.
pub fn scope_dir_name(identity: &Identity) -> String {
    format!("v2-{}", digest(identity.platform, &identity.canonical_path))
}

/// The exact bytes of a scope's binding file.
pub fn binding_bytes(identity: &Identity) -> Vec<u8> {
    use crate::json::{to_compact, Object, Value};
    let mut o = Object::with_capacity(6);
    o.insert("schemaVersion", Value::number(1.0));
    o.insert("layoutVersion", Value::number(2.0));
    o.insert("identityVersion", Value::number(1.0));
    o.insert("platform", Value::string(identity.platform));
    o.insert(
        "canonicalPath",
        Value::string(identity.canonical_path.as_str()),
    );
    o.insert(
        "identityDigest",
        Value::string(digest(identity.platform, &identity.canonical_path)),
    );
    let mut bytes = to_compact(&Value::Object(o)).into_bytes();
    bytes.push(b'\n');
    bytes
}

/// Checks binding-file bytes against the identity the scope should have.
pub fn check_binding(path: &Path, bytes: &[u8], identity: &Identity) -> Result<(), ScopeError> {
    let invalid = |why: &str| ScopeError::BindingInvalid {
        path: path.to_owned(),
        why: why.to_owned(),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8"))?;
    let value = crate::json::parse(text.strip_suffix('\n').unwrap_or(text))
        .map_err(|e| invalid(&e.to_string()))?;
    let obj = value.as_object().ok_or_else(|| invalid("not an object"))?;
    let num = |k| obj.get(k).and_then(crate::json::Value::as_f64);
    if num("schemaVersion") != Some(1.0)
        || num("layoutVersion") != Some(2.0)
        || num("identityVersion") != Some(1.0)
    {
        return Err(invalid("unknown schema, layout or identity version"));
    }
    let (Some(platform), Some(canonical), Some(digest_text)) = (
        obj.get_str("platform"),
        obj.get_str("canonicalPath"),
        obj.get_str("identityDigest"),
    ) else {
        return Err(invalid("missing or mistyped fields"));
    };
    let digest_ok = digest_text.len() == 52
        && digest_text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b));
    if !digest_ok {
        return Err(invalid("malformed identity digest"));
    }
    let expected_digest = digest(identity.platform, &identity.canonical_path);
    if platform != identity.platform
        || canonical != identity.canonical_path
        || digest_text != expected_digest
    {
        return Err(ScopeError::BindingConflict {
            path: path.to_owned(),
            bound: canonical.to_owned(),
        });
    }
    if bytes != binding_bytes(identity).as_slice() {
        return Err(invalid("not in the canonical encoding"));
    }
    Ok(())
}

/// Checks the binding `bytes` of the scope directory `scope` on their own: they must be a
/// valid binding whose identity names `scope` (`v2-<digest>` of its canonical path).
/// Returns that identity.
pub fn check_scope_binding(scope: &Path, bytes: &[u8]) -> Result<Identity, ScopeError> {
    let path = scope.join(BINDING_FILE);
    let invalid = |why: &str| ScopeError::BindingInvalid {
        path: path.clone(),
        why: why.to_owned(),
    };
    let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8"))?;
    let value = crate::json::parse(text.strip_suffix('\n').unwrap_or(text))
        .map_err(|e| invalid(&e.to_string()))?;
    let obj = value.as_object().ok_or_else(|| invalid("not an object"))?;
    if obj.get_str("platform") != Some(PLATFORM) {
        return Err(invalid(&format!("not a {PLATFORM} binding")));
    }
    let canonical = obj
        .get_str("canonicalPath")
        .ok_or_else(|| invalid("no canonicalPath"))?;
    let identity = Identity {
        platform: PLATFORM,
        canonical_path: canonical.to_owned(),
    };
    check_binding(&path, bytes, &identity)?;
    let name = scope.file_name().and_then(|n| n.to_str());
    if name != Some(scope_dir_name(&identity).as_str()) {
        return Err(ScopeError::BindingConflict {
            path: scope.to_owned(),
            bound: identity.canonical_path,
        });
    }
    Ok(identity)
}

/// Verifies the managed scope an existing transcript lives in, and returns the scope's
/// identity: the sessions root (the scope's parent) is a real directory, not a symlink; the
/// scope directory is owner-only (`0700`, ours, no ACL, not a symlink); its binding file is
/// a regular file with one link ([`read_binding`]) holding a valid binding whose identity
/// names the directory ([`check_scope_binding`]). Fails closed.
pub fn verify_transcript_scope(
    storage: &dyn SessionStorage,
    transcript: &Path,
) -> Result<Identity, ScopeError> {
    let scope = transcript
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .ok_or_else(|| unsafe_path(transcript, "not inside a scope directory"))?;
    let root = scope
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if storage.lstat(root).map_err(io_err(root))?.kind != EntryKind::Dir {
        return Err(unsafe_path(
            root,
            "the sessions root is not a real directory",
        ));
    }
    verify_owner_only(storage, scope, true)?;
    let binding = scope.join(BINDING_FILE);
    let bytes = read_binding(storage, &binding)?.ok_or_else(|| ScopeError::BindingInvalid {
        path: binding.clone(),
        why: "the scope has no binding".into(),
    })?;
    check_scope_binding(scope, &bytes)
}

/// Checks that `path` is a real directory (or file) owned by us with exactly the mode, no
/// ACL and (a file) one link ([`check_owner_only`]).
pub fn verify_owner_only(
    storage: &dyn SessionStorage,
    path: &Path,
    dir: bool,
) -> Result<(), ScopeError> {
    check_owner_only(storage, path, dir).map_err(|e| match e {
        PrivacyError::Io(source) => io_err(path)(source),
        PrivacyError::Exposed(exposure) => ScopeError::Exposed {
            path: path.to_owned(),
            exposure,
        },
    })
}

/// Creates `dir` as an owner-only directory if missing, then verifies it; a directory whose
/// only fault is group or other permission bits is re-secured once.
fn ensure_owner_only_dir(storage: &dyn SessionStorage, dir: &Path) -> Result<(), ScopeError> {
    match storage.create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err(dir)(e)),
    }
    match verify_owner_only(storage, dir, true) {
        Err(ScopeError::Exposed {
            exposure: Exposure::Mode { .. },
            ..
        }) => {
            if storage.lstat(dir).map_err(io_err(dir))?.kind == EntryKind::Dir {
                storage.set_mode(dir, 0o700).map_err(io_err(dir))?;
            }
            verify_owner_only(storage, dir, true)
        }
        other => other,
    }
}

/// Reads the binding at `path` without following a symlink: `None` when there is none yet.
pub fn read_binding(
    storage: &dyn SessionStorage,
    path: &Path,
) -> Result<Option<Vec<u8>>, ScopeError> {
    let invalid = |why: &str| ScopeError::BindingInvalid {
        path: path.to_owned(),
        why: why.to_owned(),
    };
    let file = match storage.open_read_at(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if io_cause(&e) == IoCause::Symlink => return Err(invalid("is a symlink")),
        Err(e) => return Err(invalid(&e.to_string())),
    };
    if file.links().map_err(|e| invalid(&e.to_string()))? > 1 {
        return Err(invalid("has more than one hard link"));
    }
    let bytes = file.read_all().map_err(|e| invalid(&e.to_string()))?;
    Ok(Some(bytes))
}

/// Publishes the binding without replacing an existing one, or validates the existing one.
fn publish_binding(
    storage: &dyn SessionStorage,
    scope: &Path,
    identity: &Identity,
) -> Result<(), ScopeError> {
    let path = scope.join(BINDING_FILE);
    release_stale_links(storage, scope, &path)?;
    if let Some(bytes) = read_binding(storage, &path)? {
        check_binding(&path, &bytes, identity)?;
        return storage.sync_file(&path).map_err(io_err(&path));
    }
    let temp = scope.join(format!(".binding.{}.tmp", crate::format::ids::snowflake()));
    let linked = write_new_durable(storage, &temp, &binding_bytes(identity))
        .and_then(|()| storage.hard_link(&temp, &path));
    let unlinked = storage.unlink(&temp);
    // Published but still linked from the temp name: the binding has two links and would
    // not verify; fail, and the next preparation releases the stale link.
    let linked = linked.and(unlinked);
    match linked {
        Ok(()) => storage.sync_dir(scope).map_err(io_err(scope)),
        // Someone else published first: theirs must match.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let bytes = read_binding(storage, &path)?.unwrap_or_default();
            check_binding(&path, &bytes, identity)
        }
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// Removes the temp names (`.binding.*.tmp`) that are still hard links to the published
/// binding at `path` — left by a publish that linked the binding but failed to remove its
/// temp name — so that the binding has one link again. A temp that is another file (a
/// publish under way elsewhere) is left alone.
fn release_stale_links(
    storage: &dyn SessionStorage,
    scope: &Path,
    path: &Path,
) -> Result<(), ScopeError> {
    let binding = match storage.lstat(path) {
        Ok(stat) if stat.kind == EntryKind::File && stat.links > 1 => stat.id,
        _ => return Ok(()),
    };
    let mut released = false;
    for temp in storage.list_files(scope).map_err(io_err(scope))? {
        let name = temp.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with(".binding.") && name.ends_with(".tmp")) {
            continue;
        }
        if storage.lstat(&temp).is_ok_and(|stat| stat.id == binding) {
            storage.unlink(&temp).map_err(io_err(&temp))?;
            released = true;
        }
    }
    if released {
        storage.sync_dir(scope).map_err(io_err(scope))?;
    }
    Ok(())
}

/// Prepares the scope of `identity` under `sessions_root` on disk ([`prepare_scope_in`]).
pub fn prepare_scope(sessions_root: &Path, identity: &Identity) -> Result<PathBuf, ScopeError> {
    prepare_scope_in(&FileStorage, sessions_root, identity)
}

/// Prepares the scope of `identity` under `sessions_root` in `storage` for writing and
/// returns its path: the agent directory, the sessions root, the scope directory and its
/// internal directories exist and are owner-only, and the scope is bound to `identity`.
pub fn prepare_scope_in(
    storage: &dyn SessionStorage,
    sessions_root: &Path,
    identity: &Identity,
) -> Result<PathBuf, ScopeError> {
    if let Some(agent_dir) = sessions_root.parent() {
        storage.ensure_dir(agent_dir).map_err(io_err(agent_dir))?;
    }
    ensure_owner_only_dir(storage, sessions_root)?;
    let scope = sessions_root.join(scope_dir_name(identity));
    ensure_owner_only_dir(storage, &scope)?;
    publish_binding(storage, &scope, identity)?;
    let internal = scope.join(INTERNAL_DIR);
    ensure_owner_only_dir(storage, &internal)?;
    for sub in INTERNAL_SUBDIRS {
        ensure_owner_only_dir(storage, &internal.join(sub))?;
    }
    Ok(scope)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(path: &str) -> Identity {
        Identity {
            platform: PLATFORM,
            canonical_path: path.to_owned(),
        }
    }

    #[test]
    fn binding_bytes_are_canonical_and_checked() {
        // The pinned vector is a posix identity, whatever the platform running the test.
        let id = Identity {
            platform: "posix",
            canonical_path: "/workspace/a-b/c".to_owned(),
        };
        let bytes = binding_bytes(&id);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            "{\"schemaVersion\":1,\"layoutVersion\":2,\"identityVersion\":1,\"platform\":\"posix\",\"canonicalPath\":\"/workspace/a-b/c\",\"identityDigest\":\"ckdstvtkkadas65jsj3gvlcstjat5o5yuwifaq2p3qrc5lmran5q\"}\n"
        );
        let p = Path::new("/b");
        check_binding(p, &bytes, &id).unwrap();
        assert!(matches!(
            check_binding(p, &bytes, &identity("/other")),
            Err(ScopeError::BindingConflict { .. })
        ));
        let spaced = String::from_utf8(bytes.clone())
            .unwrap()
            .replace(",\"", ", \"");
        assert!(matches!(
            check_binding(p, spaced.as_bytes(), &id),
            Err(ScopeError::BindingInvalid { .. })
        ));
        let no_newline = &bytes[..bytes.len() - 1];
        assert!(matches!(
            check_binding(p, no_newline, &id),
            Err(ScopeError::BindingInvalid { .. })
        ));
        assert!(matches!(
            check_binding(p, b"{}", &id),
            Err(ScopeError::BindingInvalid { .. })
        ));
        let bad_digest = String::from_utf8(bytes).unwrap().replace("ckdst", "CKDST");
        assert!(matches!(
            check_binding(p, bad_digest.as_bytes(), &id),
            Err(ScopeError::BindingInvalid { .. })
        ));
    }

    #[test]
    fn the_platform_tag_is_part_of_the_identity() {
        assert_eq!(PLATFORM, if cfg!(windows) { "win32" } else { "posix" });
        let win = Identity {
            platform: "win32",
            canonical_path: r"C:\work\p".to_owned(),
        };
        let posix = Identity {
            platform: "posix",
            ..win.clone()
        };
        assert_ne!(scope_dir_name(&win), scope_dir_name(&posix));
        let bytes = String::from_utf8(binding_bytes(&win)).unwrap();
        assert!(
            bytes.contains(r#""platform":"win32","canonicalPath":"C:\\work\\p""#),
            "{bytes}"
        );
        let p = Path::new("/b");
        check_binding(p, bytes.as_bytes(), &win).unwrap();
        assert!(matches!(
            check_binding(p, bytes.as_bytes(), &posix),
            Err(ScopeError::BindingConflict { .. })
        ));
    }
}
