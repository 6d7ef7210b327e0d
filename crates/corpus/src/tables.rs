//! The fixed tables the generator draws from: models, workspaces, tools, labels, rules.

pub(crate) struct ModelSpec {
    pub(crate) api: &'static str,
    pub(crate) provider: &'static str,
    pub(crate) model: &'static str,
    /// Dollars per million tokens: input, output, cache read, cache write.
    pub(crate) price: [f64; 4],
}

pub(crate) const MODELS: &[ModelSpec] = &[
    ModelSpec {
        api: "anthropic-messages",
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        price: [3.0, 15.0, 0.3, 3.75],
    },
    ModelSpec {
        api: "anthropic-messages",
        provider: "anthropic",
        model: "claude-opus-4-5",
        price: [5.0, 25.0, 0.5, 6.25],
    },
    ModelSpec {
        api: "openai-responses",
        provider: "openai",
        model: "gpt-5.1-codex",
        price: [1.25, 10.0, 0.125, 0.0],
    },
];

pub(crate) const CWDS: &[&str] = &[
    "/home/dev/projects/gjc",
    "/Users/dev/work/api-server",
    "/home/dev/src/pi-mono",
    "/work/proj",
];

pub(crate) const THINKING_LEVELS: &[&str] = &["off", "minimal", "low", "medium", "high", "xhigh"];
pub(crate) const TOOLS: &[&str] = &["read", "bash", "edit", "write", "grep", "find", "ls"];
pub(crate) const LABELS: &[&str] = &[
    "checkpoint",
    "before refactor",
    "good state",
    "bug repro",
    "wip",
];
pub(crate) const RULES: &[&str] = &[
    "no-console-log",
    "prefer-const",
    "no-any",
    "test-before-commit",
    "small-diffs",
];
pub(crate) const MCP_TOOLS: &[&str] = &[
    "github.search_issues",
    "github.create_pull_request",
    "linear.list_issues",
    "sentry.get_event",
    "postgres.query",
];
pub(crate) const BUILTIN_TOOLS: &[&str] =
    &["search_tool_bm25", "web_fetch", "web_search", "notebook"];
