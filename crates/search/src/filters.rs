//! Which documents a search considers.

/// Message roles, as a search filters them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    /// Tool results and bash or python executions.
    Tool,
}

impl Role {
    /// The document kinds of the role.
    pub fn kinds(self) -> &'static [&'static str] {
        match self {
            Role::User => &["user"],
            Role::Assistant => &["assistant"],
            Role::Tool => &["toolResult", "bashExecution", "pythonExecution"],
        }
    }
}

/// Which documents a search considers, and how many hits it returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filters {
    /// Only sessions whose header `cwd` is this.
    pub cwd: Option<String>,
    /// Only documents at or after this time (milliseconds since the epoch).
    pub since_ms: Option<i64>,
    /// Only documents before this time.
    pub until_ms: Option<i64>,
    pub role: Option<Role>,
    /// Only sessions whose id starts with this.
    pub session: Option<String>,
    pub limit: usize,
}

impl Default for Filters {
    fn default() -> Self {
        Filters {
            cwd: None,
            since_ms: None,
            until_ms: None,
            role: None,
            session: None,
            limit: 20,
        }
    }
}
