//! One session in memory: the entry tree with its leaf and labels ([`tree`]), the context
//! sent to the model at a leaf (`context`, re-exported as [`crate::SessionContext`]) and
//! the session's usage figures ([`usage`]).

pub(crate) mod context;
pub mod tree;
pub mod usage;
