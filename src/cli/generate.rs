//! `gjcfs generate OUT.jsonl (--entries N | --size SIZE) [--seed S] [--version 5|1]
//! [--cwd DIR [--scope AGENT_DIR]]`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gjcfs_corpus::{self as corpus, Format, Limit, Options};
use gjcfs_engine::storage::{FileStorage, SessionStorage};

use super::agent::agent_dirs;

/// `gjcfs generate`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the session (replaced if it exists).
    pub out: PathBuf,
    #[command(flatten)]
    pub limit: LimitArgs,
    /// Seed of the random generator.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Session format: 5 (current) or 1 (legacy: no ids, linear, firstKeptEntryIndex).
    #[arg(long, value_enum, default_value = "5", value_name = "VERSION")]
    pub version: VersionArg,
    /// The workspace written into the header's `cwd` (kept as generated if absent).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Write the session into the managed scope of `--cwd` (prepared and bound if
    /// new) in this agent directory; OUT is then the file's name inside the scope.
    #[arg(long, value_name = "AGENT_DIR", requires = "cwd")]
    pub scope: Option<PathBuf>,
}

#[derive(clap::Args)]
#[group(required = true, multiple = false)]
pub struct LimitArgs {
    /// Write exactly N entries after the header.
    #[arg(long, value_name = "N")]
    entries: Option<u64>,
    /// Write about this many bytes: a number with an optional unit B, KB, MB, GB (powers of
    /// 1000) or KiB, MiB, GiB (powers of 1024), e.g. 100MB. The file ends at most a
    /// couple of kilobytes past the size.
    #[arg(long, value_name = "SIZE", value_parser = corpus::parse_size)]
    size: Option<u64>,
}

impl LimitArgs {
    fn limit(&self) -> Limit {
        match (self.entries, self.size) {
            (Some(n), _) => Limit::Entries(n),
            (None, Some(bytes)) => Limit::Bytes(bytes),
            // clap's group requires exactly one of the two.
            (None, None) => Limit::Entries(0),
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum VersionArg {
    #[value(name = "5")]
    V5,
    #[value(name = "1")]
    V1,
}

pub fn command(args: Args) -> Result<()> {
    let format = match args.version {
        VersionArg::V5 => Format::V5,
        VersionArg::V1 => Format::V1,
    };
    let target = Target {
        cwd: args.cwd.as_deref(),
        scope: args.scope.as_deref(),
    };
    run(&args.out, args.limit.limit(), args.seed, format, target)
}

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
        cwd: target.cwd.map(header_cwd).transpose()?,
    };
    let out = match target.scope {
        Some(agent_dir) => scoped_path(out, agent_dir, target.cwd)?,
        None => out.to_owned(),
    };
    let summary = corpus::generate_file(&out, &options)
        .with_context(|| format!("cannot write {}", out.display()))?;
    if target.scope.is_some() {
        // A managed transcript is a private file.
        FileStorage
            .set_mode(&out, 0o600)
            .with_context(|| format!("cannot make {} private", out.display()))?;
    }
    eprintln!(
        "gjcfs: wrote {} ({format} session, seed {seed}): {} entries, {} bytes",
        out.display(),
        summary.entries,
        summary.bytes,
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
    let identity = gjcfs_engine::store::scope::resolve_identity(cwd)?;
    let scope = gjcfs_engine::store::scope::prepare_scope(&dirs.sessions_root(), &identity)?;
    Ok(scope.join(name))
}

/// `cwd` as the header's `cwd`: made absolute, and UTF-8.
fn header_cwd(cwd: &Path) -> Result<String> {
    let absolute =
        std::path::absolute(cwd).with_context(|| format!("{}: cannot resolve", cwd.display()))?;
    match absolute.into_os_string().into_string() {
        Ok(text) => Ok(text),
        Err(path) => bail!("{}: not a UTF-8 path", Path::new(&path).display()),
    }
}
