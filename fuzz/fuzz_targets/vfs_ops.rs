//! Fuzz target: sequences of operations on the mount model over a store in memory, with
//! faults and crashes (see `vfs_ops.rs`).

#![no_main]

#[path = "../vfs_ops.rs"]
mod vfs_ops;
#[path = "../../tests/integration/common/vfs_io.rs"]
mod vfs_io;

libfuzzer_sys::fuzz_target!(|data: &[u8]| vfs_ops::vfs_ops(data));
