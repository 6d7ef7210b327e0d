//! The legacy directory names a workspace may have been stored under, and the directories
//! to scan.

use std::io;
use std::path::{Path, PathBuf};

use crate::storage::{without_verbatim_prefix, EntryKind, FileStorage, SessionStorage};
use crate::store::agent_dir::normalize;
use crate::store::scope::INTERNAL_DIR;

use super::{absolute, io_err, LegacyError, LegacyRoots, Workspace, MAX_DISCOVERED_LEGACY_DIRS};

pub(super) fn encode_relative(text: &str) -> String {
    text.chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect()
}

/// `--<path without its leading separator, with / \ : as ->--`.
pub fn encode_absolute(path: &str) -> String {
    let trimmed = path.strip_prefix(['/', '\\']).unwrap_or(path);
    format!("--{}--", encode_relative(trimmed))
}

/// `target` relative to `root` with `/` separators (`""` when equal), or `None` when it is
/// not inside `root`.
pub(super) fn relative_to(root: &Path, target: &Path) -> Option<String> {
    let rel = target.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

pub(super) fn lexical_root(root: &Path) -> PathBuf {
    absolute(root).unwrap_or_else(|_| normalize(root))
}

pub(super) fn canonical_root(storage: &dyn SessionStorage, root: &Path) -> PathBuf {
    storage
        .canonicalize(root)
        .ok()
        .filter(|p| storage.lstat(p).is_ok_and(|s| s.kind == EntryKind::Dir))
        .unwrap_or_else(|| lexical_root(root))
}

/// The legacy directory names a workspace may have been stored under, in the original's
/// order: the absolute encodings of the canonical and the lexical cwd, then the home-relative
/// forms (`-<rel>`, `---<rel>--` or `----`, `--<encHome>-<rel>--` or `--<encHome>--`), then
/// the temp-relative forms (`-tmp[-<rel>]`, `---tmp[-<rel>]--`). A relative form is taken
/// against the root's real path first, else against its lexical spelling.
pub fn legacy_dir_names(
    canonical_cwd: &str,
    lexical_cwd: &Path,
    roots: &LegacyRoots,
) -> Vec<String> {
    legacy_dir_names_in(&FileStorage, canonical_cwd, lexical_cwd, roots)
}

/// [`legacy_dir_names`], the roots' real paths taken in `storage`.
pub(super) fn legacy_dir_names_in(
    storage: &dyn SessionStorage,
    canonical_cwd: &str,
    lexical_cwd: &Path,
    roots: &LegacyRoots,
) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    // A `\\?\` spelling names the same directory as the plain one; a legacy name never
    // holds the `?`.
    let lexical_cwd = &without_verbatim_prefix(lexical_cwd);
    let mut add = |name: String| {
        if !names.contains(&name) {
            names.push(name);
        }
    };
    add(encode_absolute(canonical_cwd));
    if let Some(lexical) = lexical_cwd.to_str() {
        add(encode_absolute(lexical));
    }
    let canonical = Path::new(canonical_cwd);
    let relative = |root: &Path| {
        relative_to(&canonical_root(storage, root), canonical)
            .or_else(|| relative_to(&lexical_root(root), lexical_cwd))
    };
    if let Some(home) = &roots.home {
        if let (Some(rel), Some(home_text)) = (relative(home), home.to_str()) {
            let enc_home = encode_relative(home_text);
            let enc_rel = encode_relative(&rel);
            add(format!("-{enc_rel}"));
            if rel.is_empty() {
                add("----".to_owned());
                add(format!("--{enc_home}--"));
            } else {
                add(format!("---{enc_rel}--"));
                add(format!("--{enc_home}-{enc_rel}--"));
            }
        }
    }
    if let Some(tmp) = &roots.tmp {
        if let Some(rel) = relative(tmp) {
            let suffix = if rel.is_empty() {
                String::new()
            } else {
                format!("-{}", encode_relative(&rel))
            };
            add(format!("-tmp{suffix}"));
            add(format!("---tmp{suffix}--"));
        }
    }
    names
}

/// The legacy directories to scan for `ws`: its own names, then up to 256 other directories
/// of the sessions root whose names start with `-` (sorted; symlinks, `v2-*` and the internal
/// directory excluded). Directories that do not exist are included; they list as empty.
pub fn legacy_dirs(
    sessions_root: &Path,
    ws: &Workspace,
    roots: &LegacyRoots,
) -> Result<Vec<String>, LegacyError> {
    legacy_dirs_in(&FileStorage, sessions_root, ws, roots)
}

/// [`legacy_dirs`] in `storage`.
pub(super) fn legacy_dirs_in(
    storage: &dyn SessionStorage,
    sessions_root: &Path,
    ws: &Workspace,
    roots: &LegacyRoots,
) -> Result<Vec<String>, LegacyError> {
    let mut names =
        legacy_dir_names_in(storage, &ws.identity.canonical_path, &ws.lexical_cwd, roots);
    let entries = match storage.list_dirs(sessions_root) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(names),
        Err(e) => return Err(io_err(sessions_root)(e)),
    };
    let mut discovered = Vec::new();
    for path in entries {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let name = name.to_owned();
        if name.starts_with('-')
            && !name.starts_with("v2-")
            && name != INTERNAL_DIR
            && !names.contains(&name)
        {
            discovered.push(name);
        }
    }
    discovered.sort();
    discovered.truncate(MAX_DISCOVERED_LEGACY_DIRS);
    names.extend(discovered);
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::scope::{scope_dir_name, Identity};

    fn roots(home: &str, tmp: &str) -> LegacyRoots {
        LegacyRoots {
            home: Some(PathBuf::from(home)),
            tmp: Some(PathBuf::from(tmp)),
        }
    }

    fn names(cwd: &str, roots: &LegacyRoots) -> Vec<String> {
        legacy_dir_names(cwd, Path::new(cwd), roots)
    }

    // The roots below do not exist, so relative forms are taken lexically.
    const HOME: &str = "/nonexistent-gjcfs-home/alice";
    const TMP: &str = "/nonexistent-gjcfs-tmp";

    #[test]
    fn absolute_names_strip_one_leading_separator_and_encode_separators() {
        assert_eq!(encode_absolute("/home/alice/proj"), "--home-alice-proj--");
        assert_eq!(encode_absolute("C:\\Users\\a b"), "--C--Users-a b--");
        assert_eq!(encode_absolute("\\\\server\\share"), "---server-share--");
        assert_eq!(encode_absolute("/"), "----");
    }

    #[test]
    #[cfg_attr(windows, ignore = "POSIX paths: `/a` is not absolute on Windows")]
    fn home_relative_names_have_the_historical_shapes() {
        let r = roots(HOME, TMP);
        let cwd = format!("{HOME}/proj/x");
        assert_eq!(
            names(&cwd, &r),
            [
                "--nonexistent-gjcfs-home-alice-proj-x--",
                "-proj-x",
                "---proj-x--",
                "---nonexistent-gjcfs-home-alice-proj-x--",
            ]
        );
        // Home itself.
        assert_eq!(
            names(HOME, &r),
            [
                "--nonexistent-gjcfs-home-alice--",
                "-",
                "----",
                "---nonexistent-gjcfs-home-alice--",
            ]
        );
        // A sibling of home is not home-relative.
        assert_eq!(
            names("/nonexistent-gjcfs-home/alicebob", &r),
            ["--nonexistent-gjcfs-home-alicebob--"]
        );
    }

    #[test]
    #[cfg_attr(windows, ignore = "POSIX paths: `/a` is not absolute on Windows")]
    fn temp_relative_names_have_the_historical_shapes() {
        let r = roots(HOME, TMP);
        assert_eq!(
            names(&format!("{TMP}/build/a"), &r),
            [
                "--nonexistent-gjcfs-tmp-build-a--",
                "-tmp-build-a",
                "---tmp-build-a--",
            ]
        );
        assert_eq!(
            names(TMP, &r),
            ["--nonexistent-gjcfs-tmp--", "-tmp", "---tmp--"]
        );
    }

    #[test]
    #[cfg_attr(windows, ignore = "POSIX paths: `/a` is not absolute on Windows")]
    fn lexical_and_canonical_spellings_both_count() {
        let r = LegacyRoots::default();
        let got = legacy_dir_names(
            "/nonexistent-gjcfs/real/p",
            Path::new("/nonexistent-gjcfs/alias/p"),
            &r,
        );
        assert_eq!(
            got,
            [
                "--nonexistent-gjcfs-real-p--",
                "--nonexistent-gjcfs-alias-p--"
            ]
        );
        // The lexical spelling decides a relative form when the canonical one is outside.
        let r = roots("/nonexistent-gjcfs/alias", TMP);
        let got = legacy_dir_names(
            "/nonexistent-gjcfs/real/p",
            Path::new("/nonexistent-gjcfs/alias/p"),
            &r,
        );
        assert!(got.contains(&"-p".to_owned()), "{got:?}");
    }

    /// Windows: the canonical spelling of a real directory, and a `\\?\` spelling of it,
    /// give names without `?`, and the same names.
    #[cfg(windows)]
    #[test]
    fn windows_names_never_hold_the_verbatim_prefix() {
        let tmp = tempfile::tempdir().unwrap();
        let canonical = FileStorage.canonicalize(tmp.path()).unwrap();
        let text = canonical.to_str().unwrap();
        assert!(!text.contains('?'), "{text}");
        let verbatim = PathBuf::from(format!(r"\\?\{text}"));
        let r = LegacyRoots::default();
        let plain = legacy_dir_names(text, &canonical, &r);
        let got = legacy_dir_names(text, &verbatim, &r);
        assert_eq!(got, plain);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got.iter().all(|n| !n.contains('?')), "{got:?}");
        assert!(got[0].starts_with("--") && got[0].contains("--"), "{got:?}");
    }

    #[test]
    fn colliding_paths_share_a_legacy_name_but_not_a_scope() {
        let r = LegacyRoots::default();
        let scope = |p: &str| {
            scope_dir_name(&Identity {
                platform: "posix",
                canonical_path: p.into(),
            })
        };
        assert_eq!(names("/x/a-b/c", &r), ["--x-a-b-c--"]);
        assert_eq!(names("/x/a/b-c", &r), ["--x-a-b-c--"]);
        assert_eq!(names("/x/a/b/c", &r), ["--x-a-b-c--"]);
        assert_ne!(scope("/x/a-b/c"), scope("/x/a/b-c"));
        assert_ne!(scope("/x/a--b/c"), scope("/x/a/b--c"));
    }
}
