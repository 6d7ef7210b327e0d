//! `gjcfs generate OUT.jsonl (--entries N | --size SIZE) [--seed S] [--version 5|1]
//! [--cwd DIR [--scope AGENT_DIR]]`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gjcfs_corpus::{self as corpus, Format, Limit, Options};
use gjcfs_engine::json::{self, Value};

use super::agent::agent_dirs;

/// Where the session goes besides OUT.
pub struct Target<'a> {
    /// The header's `cwd`.
    pub cwd: Option<&'a Path>,
    /// An agent directory: OUT is a name inside the managed scope of `cwd` there.
    pub scope: Option<&'a Path>,
}

pub fn run(out: &Path, limit: Limit, seed: u64, format: Format, target: Target<'_>) -> Result<()> {
    let options = Options {
        seed,
        limit,
        format,
    };
    let out = match target.scope {
        Some(agent_dir) => scoped_path(out, agent_dir, target.cwd)?,
        None => out.to_owned(),
    };
    let summary = corpus::generate_file(&out, &options)
        .with_context(|| format!("cannot write {}", out.display()))?;
    if let Some(cwd) = target.cwd {
        set_header_cwd(&out, cwd)?;
    }
    if target.scope.is_some() {
        // A managed transcript is a private file.
        fs::set_permissions(&out, fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot chmod {}", out.display()))?;
    }
    eprintln!(
        "gjcfs: wrote {} ({format} session, seed {seed}): {} entries, {} bytes",
        out.display(),
        summary.entries,
        summary.bytes
    );
    Ok(())
}

/// `<scope of cwd>/<name>`, the scope prepared and bound as the agent does it.
fn scoped_path(out: &Path, agent_dir: &Path, cwd: Option<&Path>) -> Result<PathBuf> {
    let Some(cwd) = cwd else {
        bail!("--scope needs --cwd");
    };
    let name = match out.file_name() {
        Some(name) if out.parent().is_none_or(|p| p.as_os_str().is_empty()) => name,
        _ => bail!("with --scope, OUT is a file name, not a path"),
    };
    let dirs = agent_dirs(Some(agent_dir))?;
    let identity = gjcfs_engine::scope::resolve_identity(cwd)?;
    let scope = gjcfs_engine::scope::prepare_scope(&dirs.sessions_root(), &identity)?;
    Ok(scope.join(name))
}

/// Rewrites the first line (the header) with `cwd` set to the absolute `cwd`.
fn set_header_cwd(file: &Path, cwd: &Path) -> Result<()> {
    let cwd = std::path::absolute(cwd)?;
    let Some(cwd) = cwd.to_str() else {
        bail!("{}: not a UTF-8 path", cwd.display());
    };
    let text = fs::read_to_string(file)?;
    let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let mut header = json::parse(first).context("the generated header is not JSON")?;
    match &mut header {
        Value::Object(fields) => fields.insert("cwd", Value::from(cwd)),
        _ => bail!("the generated header is not an object"),
    }
    let mut bytes = Vec::with_capacity(text.len() + cwd.len());
    json::write_compact(&header, &mut bytes);
    bytes.push(b'\n');
    bytes.extend_from_slice(rest.as_bytes());
    fs::write(file, bytes).with_context(|| format!("cannot write {}", file.display()))
}
