//! Command-line interface: argument parsing and one module per subcommand.

mod agent;
mod append;
mod context;
mod entries;
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
use gjcfs_corpus::{self as corpus, Format, Limit};

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
    /// migrated and put through the agent's load-time OpenAI replay sanitizer in memory, and
    /// never written. Images stored as blobs and cold-spilled content (the text a compaction
    /// moved into the blob store) are read back from the agent directory's blob store.
    Context {
        /// The session file (.jsonl), or a session id (or a unique prefix of one) looked up
        /// in the agent directory.
        file: PathBuf,
        /// Build the context at this entry instead of the current leaf.
        #[arg(long, value_name = "ID")]
        leaf: Option<String>,
        /// The agent directory whose blob store holds the session's images and cold-spilled
        /// content [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
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
        /// Take a missing agent directory as an empty store (else an error).
        #[arg(long)]
        allow_empty: bool,
    },
    /// Append entries read from standard input to a session file.
    ///
    /// Each line is one JSON object: an entry without id, parentId and timestamp (for example
    /// {"type":"label","targetId":"…","label":"checkpoint"}), or a bare message
    /// ({"role":"user","content":"hi"}). Each becomes a child of the current leaf and the new
    /// leaf, written with the agent's own rules. The first invalid line stops the command
    /// with its line number; the lines before it stay appended.
    Append {
        /// The session file (.jsonl; it must exist), or a session id (or a unique prefix
        /// of one) looked up in the agent directory.
        file: PathBuf,
        /// The agent directory whose blob store receives large images
        /// [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
        #[arg(long, value_name = "DIR")]
        agent_dir: Option<PathBuf>,
    },
    /// Print the session's records after patch replay and migration, one JSON object a line.
    ///
    /// The first line is the header. The records are printed as stored: blob references,
    /// cold-spill notices and their `evictedContent` markers as in the file, which is what a
    /// full rewrite keeps of them (the agent's rewrite also drops OpenAI replay payloads, and
    /// replaces the reference to a missing blob by a placeholder). The file itself is never
    /// written.
    Entries {
        /// The session file (.jsonl), or a session id (or a unique prefix of one) looked up
        /// in the agent directory.
        file: PathBuf,
        /// Put cold-spilled content back in place of the eviction notices, read from the
        /// agent directory's blob store (the markers stay).
        #[arg(long)]
        rehydrate: bool,
        /// The agent directory whose sessions an id is looked up in and whose blob store
        /// holds cold-spilled content [default: $GJC_CODING_AGENT_DIR, else ~/.gjc/agent].
        #[arg(long, value_name = "DIR")]
        agent_dir: Option<PathBuf>,
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
    /// Layout:
    ///   sessions/<id>/header.json        the header, pretty JSON
    ///   sessions/<id>/session.jsonl      the transcript's own bytes (tail -f follows it)
    ///   sessions/<id>/entries/NNNNNN-<id>.json   each entry (also <id>.json)
    ///   sessions/<id>/entries/new        append point: each JSON line becomes an entry
    ///   sessions/<id>/leaf               the leaf; `echo ID > leaf` branches (kept in the file)
    ///   sessions/<id>/context.json       the context at the leaf (context.md as Markdown)
    ///   sessions/<id>/tree.txt           the entry tree; usage.json: tokens and cost
    ///   sessions/<id>/labels/<label>     symlinks to labelled entries
    ///   sessions/<id>/errors             why the last writes failed
    ///   sessions/<id>/blobs/<sha256>     the blobs the session references
    ///   projects/<encoded-cwd>/<id>      the sessions of each workspace
    ///   by-date/<YYYY-MM-DD>/<HH-MM title (id8)>, recent/<NNN title (id8)>
    ///   blobs/<sha256>, history/{README,prompts.jsonl,search/<query>}, usage.json
    ///
    /// Reading never writes. A leaf moved through `leaf` is recorded in the session file
    /// (a `custom` record the agent's context ignores), so the agent resumes there.
    /// Ctrl-C, SIGTERM or SIGHUP stops it: writes are refused at once, the mount is
    /// detached, every session is flushed and closed, and the server exits within a few
    /// seconds even if files are still open (they then fail with ENOTCONN).
    ///
    /// The mountpoint must be an empty directory (a missing one is created), neither
    /// inside the store (the agent directory, its sessions, blobs, history, --session-dir)
    /// nor containing it.
    #[command(verbatim_doc_comment)]
    Mount {
        /// An empty directory (created if missing).
        mountpoint: PathBuf,
        /// Serve a missing agent or session directory as an empty store (else an error).
        #[arg(long)]
        allow_empty: bool,
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
        /// /etc/fuse.conf). The kernel still enforces the permissions shown (files 0600,
        /// directories 0700, owned by the mounting user): other users are refused (EACCES)
        /// every directory and file, so they can neither read nor append to sessions.
        /// Without it, other users cannot reach the mount at all.
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
        } => store::resolve_in(&file, agent_dir.as_deref())
            .and_then(|file| context::run(&file, leaf.as_deref(), agent_dir.as_deref())),
        Command::Entries {
            file,
            rehydrate,
            agent_dir,
        } => store::resolve_in(&file, agent_dir.as_deref())
            .and_then(|file| entries::run(&file, rehydrate, agent_dir.as_deref())),
        Command::Ls {
            all,
            cwd,
            json,
            agent_dir,
            allow_empty,
        } => ls::run(all, cwd.as_deref(), json, agent_dir.as_deref(), allow_empty),
        Command::Append { file, agent_dir } => store::resolve_in(&file, agent_dir.as_deref())
            .and_then(|file| append::run(&file, agent_dir.as_deref())),
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
            allow_empty,
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
                allow_empty,
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
        Err(err) if output::is_bad_query(&err) => {
            eprintln!("gjcfs: error: {}", output::error_line(&err));
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("gjcfs: error: {}", output::error_line(&err));
            ExitCode::FAILURE
        }
    }
}
