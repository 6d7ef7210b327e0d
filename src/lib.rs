//! gjcfs: the GJC coding agent's session store — a faithful engine for its JSONL session
//! files, and a filesystem view over it. This crate is the `gjcfs` command; as a library it
//! only names the layers for tests, benchmarks and fuzz targets.

pub use gjcfs_corpus as corpus;
pub use gjcfs_engine as engine;
#[cfg(unix)]
pub use gjcfs_fuse as fuse;
pub use gjcfs_search as search;
pub use gjcfs_vfs as vfs;
