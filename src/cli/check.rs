//! `gjcfs check [--repair] [--json]`: the store checked for damage, and what is safe to
//! repair repaired (`gjcfs_engine::check`).

use std::io::Write;
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use clap::Args;
use gjcfs_engine::check::{
    check_store, prune, repair, repairs_dir, CheckProgress, CheckTarget, RepairOptions, Severity,
};
use gjcfs_engine::json;
use gjcfs_engine::storage::FileStorage;

use super::exit::Exit;
use super::progress::Progress;
use super::store::StoreArgs;

/// Progress is shown for stores of at least this many session files.
const PROGRESS_FROM: usize = 200;

#[derive(Args)]
pub struct CheckArgs {
    /// Repair what is safe to repair: cut a torn last line the rules allow, move away the
    /// temp file of an interrupted rewrite whose session is intact, put back a backup whose
    /// session is missing (with --restore-deleted), restore owner-only modes, move away a migration lock a crash
    /// left. A copy of every file whose bytes change is kept, and what is removed is moved,
    /// into <store>/gjcfs-repairs/<time>/ with a manifest that records each change before it
    /// is made (a run that did not finish is reported by the next check); no session is ever
    /// deleted.
    #[arg(long)]
    repair: bool,
    /// With --repair: also rename a rewrite's backup back to its session file when that is
    /// missing. Without it such a backup is reported and left, since the session may have
    /// been deleted on purpose after the rewrite was interrupted.
    #[arg(long, requires = "repair")]
    restore_deleted: bool,
    /// Before checking, remove the oldest complete repair runs in <store>/gjcfs-repairs/,
    /// keeping the newest N (0: none). Runs that did not finish are kept: the check reports
    /// them. (Every --repair keeps the newest 10 complete runs, within 1 GB.)
    #[arg(long, value_name = "N")]
    prune_repairs: Option<usize>,
    /// Print one JSON object: {"sessions","blobs","errors","warnings","notes","findings",
    /// "repairDir"}, each finding {"severity","kind","path","what","repair"} (and
    /// "repaired","result" with --repair).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreArgs,
}

pub fn run(args: CheckArgs) -> Result<Exit> {
    args.store.check()?;
    let dirs = args.store.agent_dirs()?;
    let (target, base) = match &args.store.session_dir {
        Some(dir) => (
            CheckTarget {
                sessions_root: None,
                session_dir: Some(dir.clone()),
                blob_dir: dirs.blob_dir(),
                history_db: Some(dirs.history_db()),
                repair_base: Some(dir.clone()),
            },
            dir.clone(),
        ),
        None => (
            CheckTarget {
                sessions_root: Some(dirs.sessions_root()),
                session_dir: None,
                blob_dir: dirs.blob_dir(),
                history_db: Some(dirs.history_db()),
                repair_base: Some(dirs.agent_dir().to_owned()),
            },
            dirs.agent_dir().to_owned(),
        ),
    };
    let bar: OnceLock<Progress> = OnceLock::new();
    let progress = |p: CheckProgress| {
        let bar =
            bar.get_or_init(|| Progress::files("checking sessions", p.files_total, PROGRESS_FROM));
        bar.set(p.files_done as u64);
        if p.files_done == p.files_total {
            bar.finish();
        }
    };
    if let Some(keep) = args.prune_repairs {
        let pruned = prune(&FileStorage, &base, keep, u64::MAX);
        let bytes: u64 = pruned.removed.iter().map(|(_, b)| b).sum();
        eprintln!(
            "gjcfs: removed {} repair run(s), {bytes} bytes",
            pruned.removed.len()
        );
        if let Some(why) = pruned.stopped {
            bail!("pruning repair runs stopped: {why}");
        }
    }
    let report = check_store(&FileStorage, &target, &progress)
        .with_context(|| format!("cannot check {}", args.store.describe().unwrap_or_default()))?;
    let outcome = args.repair.then(|| {
        let options = RepairOptions {
            restore_deleted: args.restore_deleted,
        };
        repair(&FileStorage, &report, &base, &repairs_dir(&base), options)
    });
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(
            out,
            "{}",
            json::to_compact(&report.to_json(outcome.as_ref()))
        )?;
    } else {
        write!(out, "{}", report.to_text(outcome.as_ref()))?;
    }
    out.flush()?;
    let worst = match &outcome {
        Some(outcome) => outcome.worst_left(&report),
        None => report.worst(),
    };
    Ok(match worst {
        None | Some(Severity::Note) => Exit::Done,
        Some(Severity::Warning) => Exit::WarningsLeft,
        Some(Severity::Error) => Exit::ErrorsLeft,
    })
}
