//! The agent's store of sessions: where the agent keeps its files ([`agent_dir`]), the managed
//! v2 scopes ([`scope`]), the older encoded directories and their migration ([`legacy`]),
//! listing ([`discovery`]), terminal breadcrumbs ([`breadcrumb`]) and the usage of the whole
//! store ([`usage`]).

pub mod agent_dir;
pub mod breadcrumb;
pub mod discovery;
pub mod legacy;
pub(crate) mod saved;
pub mod scope;
pub mod usage;
