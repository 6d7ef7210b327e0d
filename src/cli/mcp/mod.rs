//! `gjcfs mcp`: the session store as tools for the agent itself, served over stdio with
//! the Model Context Protocol (the official SDK, `rmcp`).
//!
//! Every tool answers through the same code as the command it mirrors (`search`, `ls`,
//! `context`, `show --format tree`, `usage`, `history search`, `files`), so the answers are
//! theirs. Rules:
//! - Read-only: no tool writes a session, and nothing is read that is not of the store
//!   (a session is named by its id, never by a path).
//! - Answers are sized for a model's context: every list has a limit (default
//!   [`params::DEFAULT_LIMIT`], at most [`params::MAX_LIMIT`]), every message a cap, and
//!   each answer says in `more` what it left out and which call gives the rest.
//! - Bad arguments, unknown sessions and entries are MCP errors (invalid params) with a
//!   message that says what to change; a store that cannot be read is an internal error.
//!   A tool that fails, even by panicking, fails alone: the server serves until its input
//!   closes, then exits with status 0.
//! - At most [`CALLS_AT_ONCE`] tools run at once (each on a blocking thread): what the
//!   server holds is bounded by that many sessions loaded, whatever the client sends.

mod answer;
mod params;
mod read;
mod resume;
mod search;
mod sessions;
mod totals;

use std::sync::Arc;

use anyhow::{Context, Result};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ErrorData as McpError, ServerHandler, ServiceExt};
use tokio::sync::Semaphore;

use answer::{Answer, ToolError};
use params::{
    FilesTouched, HistorySearch, ListSessions, ReadSession, SearchSessions, SessionTree, Usage,
};

use super::store::StoreArgs;

/// How many tool calls are answered at once; the others wait their turn.
pub const CALLS_AT_ONCE: usize = 2;

/// `gjcfs mcp`'s arguments.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub store: StoreArgs,
}

pub fn run(mut args: Args) -> Result<()> {
    args.store.long_running = true;
    // A store that is not there is said at once, not at the first call.
    args.store.check()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the server's runtime")?;
    runtime.block_on(async {
        let server = Memory::new(args.store)
            .serve(rmcp::transport::stdio())
            .await
            .context("the client did not initialize the session")?;
        server.waiting().await.context("serving")?;
        Ok::<_, anyhow::Error>(())
    })?;
    // A blocking read of standard input may still be parked; the process ends here.
    runtime.shutdown_background();
    Ok(())
}

/// The server: the store, and the tools over it.
#[derive(Clone)]
pub struct Memory {
    store: Arc<StoreArgs>,
    calls: Arc<Semaphore>,
    tool_router: ToolRouter<Self>,
}

impl Memory {
    fn new(store: StoreArgs) -> Self {
        Memory {
            store: Arc::new(store),
            calls: Arc::new(Semaphore::new(CALLS_AT_ONCE)),
            tool_router: Self::tool_router(),
        }
    }

    /// Runs `tool` on a blocking thread when its turn comes, and gives its answer as the
    /// protocol's.
    async fn answer(
        &self,
        tool: impl FnOnce(&StoreArgs) -> Answer + Send + 'static,
    ) -> Result<CallToolResult, McpError> {
        let _turn = self
            .calls
            .acquire()
            .await
            .map_err(|_| McpError::internal_error("the server is stopping", None))?;
        let store = Arc::clone(&self.store);
        let answer = tokio::task::spawn_blocking(move || {
            let answer = tool(&store);
            // What the call read (a session, a listing of the store) is let go: the server
            // goes back to what it holds between calls.
            gjcfs_engine::storage::return_freed_memory();
            answer
        })
        .await;
        match answer {
            Ok(Ok(value)) => Ok(CallToolResult::structured(value)),
            Ok(Err(ToolError::Invalid(message))) => Err(McpError::invalid_params(message, None)),
            Ok(Err(ToolError::Failed(message))) => Err(McpError::internal_error(message, None)),
            Err(_) => Err(McpError::internal_error(
                "the tool failed unexpectedly (a bug in gjcfs); the server goes on",
                None,
            )),
        }
    }
}

#[tool_router]
impl Memory {
    #[tool(
        description = "Search every past session of the GJC agent for words or phrases: \
            \"have I solved this before?\", \"what did we decide about X?\". Words must all \
            occur (any case); \"quoted phrases\" as written; substring=true matches any \
            text. By default only sessions started in the current workspace; all=true \
            searches every workspace. Answers up to `limit` hits (default 20), best first: \
            session id, entry id, kind (user, assistant, tool...), time and a short snippet; \
            `sessions` gives each hit session's title, cwd and the shell command that \
            resumes it. Read a hit in context with read_session(session, around_entry=entry).",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_sessions(
        &self,
        Parameters(p): Parameters<SearchSessions>,
    ) -> Result<CallToolResult, McpError> {
        self.answer(move |store| search::search_sessions(store, p))
            .await
    }

    #[tool(
        description = "Read a past session: the messages the agent would send to the model \
            at its current leaf (or at `leaf`), each with its index, entry id, role, time and \
            text (tool calls, tool output and thinking included as text). Default: the last \
            20 messages; `offset`/`limit` page through them, `around_entry` centres the \
            window on one entry (a search hit). Each message shows at most `max_chars` \
            characters (default 2000); a cut message ends with the exact call that reads on. \
            `more` says which calls give the messages before and after.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_session(
        &self,
        Parameters(p): Parameters<ReadSession>,
    ) -> Result<CallToolResult, McpError> {
        self.answer(move |store| read::read_session(store, p)).await
    }

    #[tool(
        description = "List past sessions, newest first: id, title, cwd, created and \
            modified times, message count, and the shell command that resumes it. By \
            default the sessions of the current workspace; all=true lists every workspace. \
            since/until filter by modification time. Up to `limit` (default 20); `total` and \
            `more` say how many there are and how to page.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_sessions(
        &self,
        Parameters(p): Parameters<ListSessions>,
    ) -> Result<CallToolResult, McpError> {
        self.answer(move |store| sessions::list_sessions(store, p))
            .await
    }

    #[tool(
        description = "The branches of one session: each end of a branch (the current \
            leaf first, then newest first) with its entry id, time, how many entries lead to \
            it, the entry where it leaves the current branch, and a one-line preview. Pass \
            an end's entry as read_session's `leaf` to read that branch.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn session_tree(
        &self,
        Parameters(p): Parameters<SessionTree>,
    ) -> Result<CallToolResult, McpError> {
        self.answer(move |store| sessions::session_tree(store, p))
            .await
    }

    #[tool(
        description = "Which past sessions read or changed a file, or any file under a \
            directory, newest first: the agent-session view of `git blame` (\"which session \
            touched this file?\"). Counts the read, edit and write tool calls and the file \
            lists of compactions and branch summaries; a relative path is taken from the \
            current directory. By default only sessions of the current workspace; all=true \
            looks in every workspace. Answers up to `limit` touches (default 20): session, \
            entry, time, action (read or changed), tool, the path as written and resolved; \
            `sessions` gives each session's title, cwd and resume command.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn files_touched(
        &self,
        Parameters(p): Parameters<FilesTouched>,
    ) -> Result<CallToolResult, McpError> {
        self.answer(move |store| search::files_touched(store, p))
            .await
    }

    #[tool(
        description = "Token usage and cost over every session of the store, each reply \
            counted once (forks do not count their parent's replies again): totals, and \
            with `by` (session, day, week, month, project or model) the groups, largest cost \
            first (newest first for days, weeks and months), up to `limit`.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn usage(&self, Parameters(p): Parameters<Usage>) -> Result<CallToolResult, McpError> {
        self.answer(move |store| totals::usage(store, p)).await
    }

    #[tool(
        description = "Search the prompts the user typed into the agent (its prompt \
            history), in any session: prefix matches of every word first, then prompts that \
            hold every word anywhere. Each with its time and working directory; up to \
            `limit` (default 20), each cut at 2000 characters.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn history_search(
        &self,
        Parameters(p): Parameters<HistorySearch>,
    ) -> Result<CallToolResult, McpError> {
        self.answer(move |store| totals::history_search(store, p))
            .await
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Memory {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("gjcfs", env!("CARGO_PKG_VERSION"))
                    .with_title("GJC session memory"),
            )
            .with_instructions(
                "The GJC agent's own past sessions, read-only. search_sessions finds where \
                 something was discussed; read_session reads it in context; list_sessions and \
                 session_tree show what exists; files_touched says which sessions read or \
                 changed a file; usage and history_search cover cost and typed prompts.",
            )
    }
}
