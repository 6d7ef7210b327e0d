//! One session in memory: the entry tree with its leaf and labels ([`tree`]), the context
//! sent to the model at a leaf ([`context`]) and the session's usage figures ([`usage`]).

pub mod context;
pub mod tree;
pub mod usage;
