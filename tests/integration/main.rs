//! The integration tests of gjcfs, one binary with a module per part: the engine through its
//! public API, the command line, and real mounts (`mount*`), sharing the helpers in
//! `common/`.
//!
//! Unix only: the tests mount the FUSE filesystem, make FIFOs, set modes and POSIX ACLs,
//! and mount tmpfs filesystems to fill, none of which Windows has. The engine's and the
//! model's own tests (`cargo test -p gjcfs-engine -p gjcfs-vfs`) run on Windows.
#![cfg(unix)]

#[macro_use]
mod common;

mod cache_bounds;
mod check;
mod check_strict;
mod cli;
mod code_shape;
mod cold_spill;
mod conformance;
mod context;
mod corpus;
mod cost;
mod crash;
mod demo_agent;
mod docs_paths;
mod entry_bounds;
mod export;
mod fault_injection;
mod files;
// A real full disk is a tmpfs, mounted the Linux way.
#[cfg(target_os = "linux")]
mod full_disk;
mod fuzz_regressions;
mod history;
mod history_cli;
mod html;
mod html_browser;
mod identity;
mod inspect;
mod legacy;
mod legacy_refusals;
mod liveness;
mod load;
mod managed;
mod manager;
mod mcp;
mod mount;
mod mount_files;
mod mount_lifecycle;
mod mount_log;
mod mount_views;
mod mount_walk;
mod page_parts;
mod peer_cases;
mod properties;
mod redact;
mod refresh;
mod repair_bounds;
mod repair_crash;
mod resume;
mod scope;
mod search;
mod search_trust;
mod shell;
mod terminal;
mod titles;
mod tree;
mod unseen_rewrites;
mod vfs;
mod vfs_kept;
mod vfs_model;
mod views;
mod views_cli;
mod writers;
