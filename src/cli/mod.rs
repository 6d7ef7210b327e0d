//! Command-line interface: argument parsing and one module per subcommand.

mod agent;
mod append;
mod check;
mod completions;
mod context;
mod entries;
mod exit;
mod export;
mod files;
mod generate;
mod history;
mod ls;
mod man;
mod mcp;
// Windows mounts through the Dokan server program; the module is built everywhere so that
// what it passes and reads back is tested everywhere.
#[cfg_attr(not(windows), allow(dead_code))]
mod dokan_server;
#[cfg(unix)]
mod mount;
#[cfg(windows)]
#[path = "mount_windows.rs"]
mod mount;
mod output;
mod progress;
mod range;
mod search;
mod show;
mod store;
mod style;
mod usage;
mod zone;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use exit::Exit;

/// Inspect and work with GJC agent sessions.
#[derive(Parser)]
#[command(name = "gjcfs", version, about, long_about = None)]
struct Cli {
    /// When to colour the output: auto (on a terminal, unless NO_COLOR is set or TERM is
    /// dumb), always or never.
    #[arg(long, global = true, value_enum, value_name = "WHEN", default_value_t = style::ColorWhen::Auto)]
    color: style::ColorWhen,
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
    Context(context::Args),
    /// List sessions, newest first: id, modified time, message count, cwd and title.
    ///
    /// Without --all, the sessions of one workspace (the current directory, or --cwd): its
    /// managed scope, its legacy directories and its project-local sessions. Message
    /// counts are exact; the title is the session's, else its first prompt.
    Ls(ls::Args),
    /// Append entries read from standard input to a session file.
    ///
    /// Each line is one JSON object: an entry without id, parentId and timestamp (for example
    /// {"type":"label","targetId":"…","label":"checkpoint"}), or a bare message
    /// ({"role":"user","content":"hi"}). Each becomes a child of the current leaf and the new
    /// leaf, written with the agent's own rules. The first invalid line stops the command
    /// with its line number; the lines before it stay appended.
    Append(append::Args),
    /// Print the session's records after patch replay and migration, one JSON object a line.
    ///
    /// The first line is the header. The records are printed as stored: blob references,
    /// cold-spill notices and their `evictedContent` markers as in the file, which is what a
    /// full rewrite keeps of them (the agent's rewrite also drops OpenAI replay payloads, and
    /// replaces the reference to a missing blob by a placeholder). The file itself is never
    /// written.
    Entries(entries::Args),
    /// List recent prompts from the agent's prompt history, newest first
    ///
    /// The history is <agentDir>/history.db; `history search` searches it. Each line is
    /// `DATE TIME  CWD  PROMPT` (UTC); with --json, one JSON object a line.
    History(history::HistoryArgs),
    /// Write a synthetic but realistic session file, for tests, benchmarks and demos
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
    Generate(generate::Args),
    /// Mount the session store as a filesystem and serve it in the foreground
    ///
    /// Layout:
    ///   sessions/<id>/header.json        the header, pretty JSON
    ///   sessions/<id>/session.jsonl      the transcript's own bytes (tail -f follows it)
    ///   sessions/<id>/entries/NNNNNN-<id>.json   each entry (also <id>.json)
    ///   sessions/<id>/entries/new        append point: each JSON line becomes an entry
    ///   sessions/<id>/leaf               the leaf; `echo ID > leaf` branches (kept in the file)
    ///   sessions/<id>/context.json       the context at the leaf (context.md as Markdown,
    ///                                    context.html as a page)
    ///   sessions/<id>/tree.txt           the entry tree; usage.json: tokens and cost
    ///   sessions/<id>/labels/<label>     symlinks to labelled entries
    ///   sessions/<id>/errors             why the last writes failed
    ///   sessions/<id>/blobs/<sha256>     the blobs the session references
    ///   projects/<encoded-cwd>/<id>      the sessions of each workspace
    ///   by-date/<YYYY-MM-DD>/<HH-MM title (id8)>, recent/<NNN title (id8)>
    ///   search/<query>/NNN-<session>-<entry>.json, search/<query>/results.jsonl
    ///   files/<path>/                    a directory per component of each file the
    ///                                    sessions read or changed (as `gjcfs files`)
    ///   files/<path>/NNN-<session>-<entry>   symlinks to the touching entries, newest first
    ///   files/<path>/touches.jsonl       the touches, as `gjcfs files --json` prints them
    ///   blobs/<sha256>, history/{README,prompts.jsonl,search/<query>}, usage.json
    ///   check                            the report of `gjcfs check` (never a repair)
    ///   .ignore                          what rg and fd skip: the places derived from sessions
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
    Mount(mount::Args),
    /// Render a session for reading: its context as Markdown, its tree, or its usage
    ///
    /// The context at its leaf as Markdown (md), every entry of its tree one a line (tree),
    /// or its token usage and cost (usage, JSON). The session is loaded leniently, migrated
    /// in memory and never written. Image blobs are linked, not printed.
    ///
    /// Examples:
    ///   gjcfs show 019b9267 --format tree
    ///   gjcfs show path/to/session.jsonl --format md > context.md
    #[command(verbatim_doc_comment)]
    Show(show::ShowArgs),
    /// Token usage and cost over the whole store, each reply counted once
    ///
    /// Summed over every session of the store: a fork or branched copy repeats its parent's
    /// entries, and the copies are not counted again. Grouped by session (with its title),
    /// day, ISO week, month, project or model (each grouping's groups add up to the total),
    /// each row broken down by model with --breakdown, and limited to the replies of a time
    /// range. Days and dates are those of --timezone, the machine's own zone by default.
    ///
    /// Examples:
    ///   gjcfs usage
    ///   gjcfs usage --by day --since 2026-11-01
    ///   gjcfs usage --by day --since 7d --timezone Europe/Berlin --breakdown
    ///   gjcfs usage --by week --since 2026-10-01 --until 2026-11-01
    ///   gjcfs usage --by session --json
    #[command(verbatim_doc_comment)]
    Usage(usage::UsageArgs),
    /// Search every session of the store at once
    ///
    /// Through an index kept in the cache directory and brought up to date first. Plain
    /// words must all occur (whole words, any case); "quoted phrases" must occur as
    /// written; --substring matches any text. Hits are ranked by relevance, then newest
    /// first. A query that cannot be searched exits with status 2.
    ///
    /// Examples:
    ///   gjcfs search parser "torn line"
    ///   gjcfs search --substring 'rror: cann' --all --role tool
    ///   gjcfs search migration --since 2026-01-01 --json
    #[command(verbatim_doc_comment)]
    Search(search::SearchArgs),
    /// Which sessions read or changed a file, or any file under a directory, newest first
    ///
    /// The agent-session view of `git blame`: every read, edit and write tool call, and the
    /// file lists of compactions and branch summaries, whose path (resolved against the
    /// session's cwd) is PATH or lies under it. Through the index `gjcfs search` keeps,
    /// brought up to date first. Each line is `ID8  TITLE  TIME  ACTION  TOOL  ENTRY  PATH`
    /// (ACTION: read or changed); with --json, one JSON object a line.
    ///
    /// Examples:
    ///   gjcfs files src/main.rs
    ///   gjcfs files crates/engine --all --since 2026-01-01
    ///   gjcfs files /etc/hosts --all --json --limit 100
    #[command(verbatim_doc_comment)]
    Files(files::FilesArgs),
    /// Write sessions as files: self-contained HTML pages, Markdown, or the transcripts
    ///
    /// One file per session, named by its id (<id>.html, <id>.md, <id>.jsonl), written whole
    /// and owner-only. An HTML page needs nothing beside it: its images are embedded, it
    /// runs no script and loads nothing.
    ///
    /// Examples:
    ///   gjcfs export 019b9267 --out ~/shared
    ///   gjcfs export --all --format md --out backup/
    #[command(verbatim_doc_comment)]
    Export(export::Args),
    /// Serve the session store to an agent as MCP tools, over standard input and output
    ///
    /// A Model Context Protocol server that gives the agent its own past sessions:
    /// search_sessions, read_session, list_sessions, session_tree, files_touched, usage
    /// and history_search. Read-only; it serves until its input closes, then exits 0.
    ///
    /// For the GJC agent, an mcp.json of
    ///   {"mcpServers": {"gjcfs": {"command": "gjcfs", "args": ["mcp"]}}}
    /// given with `gjc --mcp-config /absolute/path/mcp.json`.
    #[command(verbatim_doc_comment)]
    Mcp(mcp::Args),
    /// Unmount a `gjcfs mount` (its server then closes every session and exits).
    Umount(mount::UmountArgs),
    /// Check the store for damage, and with --repair repair what is safe to repair
    ///
    /// Looks at every session file (a torn last line, malformed lines, a file that is not a
    /// session, entries whose parent is missing, blobs referenced but missing or damaged),
    /// the managed scopes (bindings, owner-only modes, migration locks a crash left, files
    /// that do not belong), what interrupted rewrites left (temp files, backups), legacy
    /// sessions with and without their managed copy, and the blob store. Reading never
    /// changes anything; --repair changes only what is safe, keeping copies.
    ///
    /// Exit status: 0 nothing wrong (notes at most), 3 warnings left, 4 errors left (after
    /// --repair: what it did not repair), 1 the check could not run, 2 a usage error.
    ///
    /// Examples:
    ///   gjcfs check
    ///   gjcfs check --repair
    ///   gjcfs check --session-dir ./sessions --json
    #[command(verbatim_doc_comment)]
    Check(check::CheckArgs),
    /// Print the completion script of a shell for every command and flag
    ///
    /// Examples:
    ///   gjcfs completions bash > ~/.local/share/bash-completion/completions/gjcfs
    ///   gjcfs completions zsh > ~/.zfunc/_gjcfs
    ///   gjcfs completions fish > ~/.config/fish/completions/gjcfs.fish
    ///   gjcfs completions powershell >> $PROFILE
    #[command(verbatim_doc_comment)]
    Completions(completions::Args),
    /// Write a man page for every command into a directory
    ///
    /// Examples:
    ///   gjcfs man --out ~/.local/share/man/man1
    #[command(verbatim_doc_comment)]
    Man(man::Args),
}

pub fn run() -> ExitCode {
    // clap's own help and errors follow --color too.
    style::set(style::from_args(std::env::args_os()).unwrap_or_default());
    let cli = Cli::parse();
    style::set(cli.color);
    let result = match cli.command {
        Command::Context(args) => context::command(args),
        Command::Entries(args) => entries::command(args),
        Command::Ls(args) => ls::command(args),
        Command::Append(args) => append::command(args),
        Command::History(args) => history::run(args),
        Command::Generate(args) => generate::command(args),
        Command::Mount(args) => mount::command(args),
        Command::Umount(args) => mount::umount_command(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Show(args) => show::run(args),
        Command::Export(args) => export::run(args),
        Command::Usage(args) => usage::run(args),
        Command::Search(args) => search::run(args),
        Command::Files(args) => files::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => man::run(args),
        Command::Check(args) => match check::run(args) {
            Ok(exit) => return exit.into(),
            Err(e) => Err(e),
        },
    };
    let exit = match result {
        Ok(()) => Exit::Done,
        Err(err) if output::is_broken_pipe(&err) => Exit::Done,
        Err(err) if output::is_nothing_found(&err) => {
            eprintln!("gjcfs: {err}");
            Exit::Failed
        }
        Err(err) if output::is_usage_error(&err) => {
            output::error(&err);
            Exit::Usage
        }
        Err(err) => {
            output::error(&err);
            Exit::Failed
        }
    };
    exit.into()
}
