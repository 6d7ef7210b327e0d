//! `gjcfs entries FILE`.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::Result;
use gjcfs::engine::load_session;

use super::output::warn_skipped;

pub fn run(file: &Path) -> Result<()> {
    let loaded = load_session(file)?;
    warn_skipped(file, &loaded.skipped);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    for record in loaded.session.records() {
        line.clear();
        record.write_line(&mut line);
        out.write_all(&line)?;
    }
    out.flush()?;
    Ok(())
}
