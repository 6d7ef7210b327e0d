//! The agent's store of sessions: where the agent keeps its files ([`agent_dir`]), the managed
//! v2 scopes ([`scope`]), the older encoded directories and their migration ([`legacy`]),
//! listing ([`discovery`]), terminal breadcrumbs ([`breadcrumb`]), the usage of the whole
//! store ([`usage`]) and what is kept of it between runs ([`saved`]).

pub mod agent_dir;
pub mod breadcrumb;
pub mod discovery;
pub mod legacy;
pub mod saved;
pub mod scope;
pub mod usage;
