//! The `gjcfs` command.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let code = cli::run();
    // The explicit close path of the prompt history (Windows has no exit hook for it).
    match gjcfs_engine::history::flush_all() {
        Ok(()) => code,
        Err(e) => {
            eprintln!("gjcfs: {e}");
            ExitCode::FAILURE
        }
    }
}
