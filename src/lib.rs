//! gjcfs: the GJC coding agent's session store — a faithful engine for its JSONL session
//! files, and a filesystem view over it.

pub mod corpus;
pub mod engine;
pub mod vfs;
