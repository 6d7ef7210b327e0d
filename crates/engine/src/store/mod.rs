//! The agent's store of sessions: where the agent keeps its files ([`agent_dir`]), the managed
//! v2 scopes ([`scope`]), the older encoded directories and their migration ([`legacy`]),
//! listing ([`discovery`]), terminal breadcrumbs ([`breadcrumb`]) and the usage of the whole
//! store ([`usage`]). What a listing or a usage scan read of each file is kept while the file
//! keeps its version — in memory for the mount, and between runs in the store's cache
//! directory ([`saved`]: the checked encoding, each file replaced whole).

pub mod agent_dir;
pub mod breadcrumb;
pub mod discovery;
pub mod legacy;
pub mod saved;
pub mod scope;
pub mod usage;
