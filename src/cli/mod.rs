//! Command-line interface: argument parsing and one module per subcommand.

mod agent;
mod append;
mod context;
mod entries;
#[path = "../../platform/fuse/mod.rs"]
mod fuse;
mod generate;
mod history;
mod ls;
mod mount;
mod output;
mod search;
mod show;
mod store;
mod usage;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use gjcfs::corpus::{self, Format, Limit};

/// Inspect and work with GJC agent sessions.
#[derive(Parser)]
#[command(name = "gjcfs", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the context the agent would send to the model, as JSON.
    ///
    /// The session is loaded leniently (malformed lines are skipped with a warning),
    /// migrated in memory and never written.
    Context {
        /// The session file (.jsonl).
        file: PathBuf,
        /// Build the context at this entry instead of the current leaf.
        #[arg(long, value_name = "ID")]
        leaf: Option<String>,
        /// The agent directory whose blob store holds the session's images
        /// [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
        #[arg(long, value_name = "DIR")]
        agent_dir: Option<PathBuf>,
    },
    /// List sessions, newest first: id, modified time, message count, cwd and title.
    ///
    /// Without --all, the sessions of one workspace (the current directory, or --cwd): its
    /// managed scope and its legacy directory. Message counts marked + are estimates from
    /// the start of large files.
    Ls {
        /// List the sessions of every workspace.
        #[arg(long)]
        all: bool,
        /// The workspace whose sessions to list [default: the current directory].
        #[arg(long, value_name = "DIR", conflicts_with = "all")]
        cwd: Option<PathBuf>,
        /// One JSON object per session and line.
        #[arg(long)]
        json: bool,
        /// The agent directory [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
        #[arg(long, value_name = "DIR")]
        agent_dir: Option<PathBuf>,
    },
    /// Append entries read from standard input to a session file.
    ///
    /// Each line is one JSON object: an entry without id, parentId and timestamp (for example
    /// {"type":"label","targetId":"…","label":"checkpoint"}), or a bare message
    /// ({"role":"user","content":"hi"}). Each becomes a child of the current leaf and the new
    /// leaf, written with the agent's own rules. The first invalid line stops the command
    /// with its line number; the lines before it stay appended.
    Append {
        /// The session file (.jsonl); it must exist.
        file: PathBuf,
        /// The agent directory whose blob store receives large images
        /// [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
        #[arg(long, value_name = "DIR")]
        agent_dir: Option<PathBuf>,
    },
    /// Print the session's records after patch replay and migration, one JSON object a line.
    ///
    /// The first line is the header. The output is what a full rewrite of the file would
    /// contain; the file itself is never written.
    Entries {
        /// The session file (.jsonl).
        file: PathBuf,
    },
    /// List recent prompts from the agent's prompt history (<agentDir>/history.db), newest
    /// first; `history search` searches it.
    ///
    /// Each line is `DATE TIME  CWD  PROMPT` (UTC); with --json, one JSON object a line.
    History(history::HistoryArgs),
    /// Write a synthetic but realistic session file, for tests, benchmarks and demos.
    ///
    /// The file is written exactly as the agent writes sessions: a header, then a
    /// conversation of user, assistant (text, thinking, tool calls, usage with cost) and tool
    /// result messages, with every other entry type mixed in (model and thinking-level
    /// changes, compactions, branch summaries, labels, custom entries, tool selections, ...)
    /// and occasional branches. The same options always produce the same bytes.
    ///
    /// Examples:
    ///   gjcfs generate big.jsonl --size 100MB
    ///   gjcfs generate small.jsonl --entries 2000 --seed 7
    ///   gjcfs generate legacy.jsonl --size 20MiB --version 1
    #[command(verbatim_doc_comment)]
    Generate {
        /// Where to write the session (replaced if it exists).
        out: PathBuf,
        #[command(flatten)]
        limit: LimitArgs,
        /// Seed of the random generator.
        #[arg(long, default_value_t = 0, value_name = "S")]
        seed: u64,
        /// Session format: 5 (current) or 1 (legacy: no ids, linear, firstKeptEntryIndex).
        #[arg(long, value_enum, default_value = "5", value_name = "VERSION")]
        version: VersionArg,
        /// The workspace written into the header's `cwd` (kept as generated if absent).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// Write the session into the managed scope of `--cwd` (prepared and bound if
        /// new) in this agent directory; OUT is then the file's name inside the scope.
        #[arg(long, value_name = "AGENT_DIR", requires = "cwd")]
        scope: Option<PathBuf>,
    },
    /// Mount the session store as a filesystem and serve it in the foreground.
    ///
    /// Layout: sessions/<id>/{header.json, entries/NNNNNN-<id>.json, entries/new, leaf,
    /// context.json, errors}. `echo ID > leaf` branches (an empty write resets the leaf);
    /// each JSON line written to entries/new is appended. Ctrl-C or SIGTERM unmounts.
    Mount {
        /// An existing empty directory.
        mountpoint: PathBuf,
        /// The agent directory whose sessions to show
        /// [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
        #[arg(long, value_name = "DIR")]
        agent_dir: Option<PathBuf>,
        /// Show the sessions of this one directory instead.
        #[arg(long, value_name = "DIR")]
        session_dir: Option<PathBuf>,
        /// Refuse every write (EROFS).
        #[arg(long)]
        read_only: bool,
        /// Let other users reach the mount (needs root or user_allow_other in
        /// /etc/fuse.conf); file permissions still apply.
        #[arg(long)]
        allow_other: bool,
    },
    /// Render a session for reading: the context at its leaf as Markdown (md), every entry
    /// of its tree one a line (tree), or its token usage and cost (usage, JSON).
    ///
    /// The session is loaded leniently, migrated in memory and never written. Image blobs
    /// are linked, not printed.
    ///
    /// Examples:
    ///   gjcfs show 019b9267 --format tree
    ///   gjcfs show path/to/session.jsonl --format md > context.md
    #[command(verbatim_doc_comment)]
    Show(show::ShowArgs),
    /// Token usage and cost summed over every session of the store, each reply counted once:
    /// a fork or branched copy repeats its parent's entries, and the copies are not counted
    /// again.
    ///
    /// Examples:
    ///   gjcfs usage
    ///   gjcfs usage --by day
    ///   gjcfs usage --by model --json
    #[command(verbatim_doc_comment)]
    Usage(usage::UsageArgs),
    /// Search every session of the store at once, through an index kept in the cache
    /// directory and brought up to date first.
    ///
    /// Plain words must all occur (whole words, any case); "quoted phrases" must occur as
    /// written; --substring matches any text. Hits are ranked by relevance, then newest
    /// first. A query that cannot be searched exits with status 2.
    ///
    /// Examples:
    ///   gjcfs search parser "torn line"
    ///   gjcfs search --substring 'rror: cann' --all --role tool
    ///   gjcfs search migration --since 2026-01-01 --json
    #[command(verbatim_doc_comment)]
    Search(search::SearchArgs),
    /// Unmount a `gjcfs mount` (its server then closes every session and exits).
    Umount {
        /// The mountpoint.
        mountpoint: PathBuf,
    },
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct LimitArgs {
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

#[derive(Clone, Copy, ValueEnum)]
enum VersionArg {
    #[value(name = "5")]
    V5,
    #[value(name = "1")]
    V1,
}

pub fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Context {
            file,
            leaf,
            agent_dir,
        } => context::run(&file, leaf.as_deref(), agent_dir.as_deref()),
        Command::Entries { file } => entries::run(&file),
        Command::Ls {
            all,
            cwd,
            json,
            agent_dir,
        } => ls::run(all, cwd.as_deref(), json, agent_dir.as_deref()),
        Command::Append { file, agent_dir } => append::run(&file, agent_dir.as_deref()),
        Command::History(args) => history::run(args),
        Command::Generate {
            out,
            limit,
            seed,
            version,
            cwd,
            scope,
        } => {
            let format = match version {
                VersionArg::V5 => Format::V5,
                VersionArg::V1 => Format::V1,
            };
            let target = generate::Target {
                cwd: cwd.as_deref(),
                scope: scope.as_deref(),
            };
            generate::run(&out, limit.limit(), seed, format, target)
        }
        Command::Mount {
            mountpoint,
            agent_dir,
            session_dir,
            read_only,
            allow_other,
        } => mount::run(
            &mountpoint,
            mount::Options {
                agent_dir: agent_dir.as_deref(),
                session_dir: session_dir.as_deref(),
                read_only,
                allow_other,
            },
        ),
        Command::Umount { mountpoint } => mount::umount(&mountpoint),
        Command::Show(args) => show::run(args),
        Command::Usage(args) => usage::run(args),
        Command::Search(args) => search::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if output::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err)
            if err
                .downcast_ref::<gjcfs::engine::search::QueryError>()
                .is_some() =>
        {
            eprintln!("gjcfs: error: {}", output::error_line(&err));
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("gjcfs: error: {}", output::error_line(&err));
            ExitCode::FAILURE
        }
    }
}
