//! Progress of long work, on standard error, and only where someone watches: a terminal
//! (not `TERM=dumb`). Piped or redirected, nothing is drawn, so logs and scripts never see
//! a progress line. Every bar is cleared when its work ends.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar for one piece of work; drawing it is a no-op when it is hidden. Cheap to update
/// from many threads (it redraws at most 20 times a second).
pub struct Progress {
    bar: Option<ProgressBar>,
}

/// Whether progress can be drawn: standard error is a terminal that can move its cursor.
fn watched() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

impl Progress {
    fn new(total: u64, template: &str, shown: bool) -> Self {
        if !shown || !watched() {
            return Progress { bar: None };
        }
        let style = ProgressStyle::with_template(template)
            .expect("the templates are valid")
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
            .with_style(style);
        // Drawn on a timer too, so a slow first file still shows the bar and the rate.
        bar.enable_steady_tick(Duration::from_millis(250));
        Progress { bar: Some(bar) }
    }

    /// A count of files: `gjcfs: WHAT [bar] done/total files (rate/s, ETA)`, shown when
    /// there are at least `from` of them.
    pub fn files(what: &str, total: usize, from: usize) -> Self {
        Self::new(
            total as u64,
            &format!(
                "gjcfs: {} [{{bar:30}}] {{pos}}/{{len}} files ({{per_sec}}, ETA {{eta}})",
                what.replace(['{', '}'], "")
            ),
            total >= from,
        )
    }

    /// Bytes of many files: `gjcfs: WHAT [bar] done/total MiB (rate, ETA) FILES`, shown
    /// when there are at least `from` bytes.
    pub fn bytes(what: &str, total: u64, from: u64) -> Self {
        Self::new(
            total,
            &format!(
                "gjcfs: {} [{{bar:30}}] {{binary_bytes}}/{{binary_total_bytes}} \
                 ({{binary_bytes_per_sec}}, ETA {{eta}}) {{msg}}",
                what.replace(['{', '}'], "")
            ),
            total >= from,
        )
    }

    /// How much is done.
    pub fn set(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    /// The note after the bar (for [`Progress::bytes`]: how many files are done).
    pub fn note(&self, note: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(note);
        }
    }

    /// Ends the work and clears its line.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
