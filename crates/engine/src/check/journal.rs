//! The manifest of a repair run (`manifest.jsonl` in its repair directory), written as the
//! run goes, and the runs that did not finish, which the next check reports.
//!
//! Each change is recorded, the line appended and synced, before it is made; after it, a
//! line says it was done or left; the last line says the run is complete. A run stopped at
//! any point (killed, a crash, a failing disk) so leaves a manifest naming every change it
//! made or was about to make. The lines:
//! - `{"step":1,"state":"begun","path":…,"kind":…,"repair":…}` before change 1;
//! - `{"step":1,"state":"done","result":…}` after it, or `"state":"left"` with why it was
//!   not made;
//! - `{"state":"complete","steps":N}` at the end of the run.
//!
//! Manifests of earlier versions were written whole at the end of a run, one line a change
//! (`path`, `kind`, `repair`, `done`), and so are complete.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use super::{Finding, Repair, Report, Severity, REPAIRS_DIR_NAME};
use crate::json::{self, Object, Value};
use crate::storage::{EntryKind, OpenMode, SessionStorage, StorageWriter};

/// The manifest's name in a repair directory: one JSON line per event of the run, `begun`
/// before each change, `done` or `left` after it, `complete` at the end.
pub const MANIFEST_NAME: &str = "manifest.jsonl";

/// The manifest of one repair run, created with its directory when the first change is
/// recorded.
pub(super) struct Journal<'a> {
    storage: &'a dyn SessionStorage,
    dir: &'a Path,
    writer: Option<Box<dyn StorageWriter>>,
    /// Why the manifest cannot be written any more: no change is made after that.
    broken: Option<String>,
    steps: usize,
}

impl<'a> Journal<'a> {
    pub(super) fn new(storage: &'a dyn SessionStorage, dir: &'a Path) -> Self {
        Journal {
            storage,
            dir,
            writer: None,
            broken: None,
            steps: 0,
        }
    }

    /// Records, durably, that the repair of `finding` is about to be made; its step number.
    pub(super) fn begin(&mut self, finding: &Finding, repair: &Repair) -> io::Result<usize> {
        let step = self.steps + 1;
        let mut line = Object::with_capacity(5);
        line.insert("step", Value::number(step as f64));
        line.insert("state", Value::string("begun"));
        line.insert(
            "path",
            Value::string(finding.path.to_string_lossy().into_owned()),
        );
        line.insert("kind", Value::string(finding.kind));
        line.insert("repair", Value::string(repair.describe()));
        self.append(line)?;
        self.steps = step;
        Ok(step)
    }

    /// Records, durably, what became of step `step`: done, or left and why.
    pub(super) fn end(&mut self, step: usize, result: &Result<String, String>) -> io::Result<()> {
        let (state, text) = match result {
            Ok(done) => ("done", done),
            Err(why) => ("left", why),
        };
        let mut line = Object::with_capacity(3);
        line.insert("step", Value::number(step as f64));
        line.insert("state", Value::string(state));
        line.insert("result", Value::string(text.as_str()));
        self.append(line)
    }

    /// Records that the run is complete (when it recorded anything) and closes the
    /// manifest.
    pub(super) fn complete(mut self) -> io::Result<()> {
        if self.steps == 0 {
            return Ok(());
        }
        let mut line = Object::with_capacity(2);
        line.insert("state", Value::string("complete"));
        line.insert("steps", Value::number(self.steps as f64));
        self.append(line)?;
        match self.writer.take() {
            Some(writer) => writer.close(),
            None => Ok(()),
        }
    }

    /// Appends one line and syncs it; the first creates the directory and the manifest.
    fn append(&mut self, line: Object) -> io::Result<()> {
        if let Some(why) = &self.broken {
            return Err(io::Error::other(why.clone()));
        }
        let mut bytes = json::to_compact(&Value::Object(line)).into_bytes();
        bytes.push(b'\n');
        let written = self.writer().and_then(|w| {
            w.write_all(&bytes)?;
            w.fsync()
        });
        if let Err(e) = &written {
            // A line may be torn: nothing more is written after it.
            self.broken = Some(format!("the manifest could not be written: {e}"));
        }
        written
    }

    fn writer(&mut self) -> io::Result<&mut Box<dyn StorageWriter>> {
        if self.writer.is_none() {
            self.writer = Some(self.create()?);
        }
        Ok(self.writer.as_mut().expect("opened above"))
    }

    /// The repair directory and its empty manifest, their entries durable.
    fn create(&self) -> io::Result<Box<dyn StorageWriter>> {
        let storage = self.storage;
        storage.ensure_dir(self.dir)?;
        let repairs = self.dir.parent();
        for dir in [repairs, repairs.and_then(Path::parent)]
            .into_iter()
            .flatten()
        {
            storage.sync_dir(dir)?;
        }
        let writer = storage.open_writer(&self.dir.join(MANIFEST_NAME), OpenMode::CreateNew)?;
        storage.sync_dir(self.dir)?;
        Ok(writer)
    }
}

/// What a manifest says of its run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Run {
    complete: bool,
    /// The changes begun, by step: (path, repair).
    begun: BTreeMap<u64, (String, String)>,
    /// The steps said done or left.
    ended: Vec<u64>,
}

impl Run {
    fn of(text: &str) -> Run {
        let mut run = Run::default();
        for line in text.lines() {
            let Ok(Value::Object(line)) = json::parse(line) else {
                continue;
            };
            let step = line.get("step").and_then(Value::as_f64).map(|s| s as u64);
            match (line.get_str("state"), step) {
                (Some("complete"), _) => run.complete = true,
                (Some("begun"), Some(step)) => {
                    let text = |key| line.get_str(key).unwrap_or("?").to_owned();
                    run.begun.insert(step, (text("path"), text("repair")));
                }
                (Some("done" | "left"), Some(step)) => run.ended.push(step),
                // A manifest written whole at the end of its run.
                (None, None) if line.contains_key("done") => run.complete = true,
                _ => {}
            }
        }
        run
    }

    /// The changes begun and not said done or left: (path, repair).
    fn unconfirmed(&self) -> Vec<&(String, String)> {
        let ended = |step: &u64| self.ended.contains(step);
        self.begun
            .iter()
            .filter(|(step, _)| !ended(step))
            .map(|(_, change)| change)
            .collect()
    }
}

/// Reports each repair directory under `<base>/gjcfs-repairs` whose run did not finish.
pub(super) fn report_unfinished(storage: &dyn SessionStorage, base: &Path, report: &mut Report) {
    let Ok(entries) = storage.list_entries(&base.join(REPAIRS_DIR_NAME)) else {
        return;
    };
    for (dir, kind) in entries {
        if kind != EntryKind::Dir {
            continue;
        }
        let what = match storage.read(&dir.join(MANIFEST_NAME)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => NOTHING_BEGUN.to_owned(),
            Err(e) => format!("the manifest of a repair cannot be read ({e})"),
            Ok(bytes) => match unfinished(&Run::of(&String::from_utf8_lossy(&bytes))) {
                Some(what) => what,
                None => continue,
            },
        };
        report.add(Severity::Warning, "unfinished_repair", dir, what, None);
    }
}

/// Whether the run of the repair directory `dir` is complete: its manifest says so.
pub(super) fn is_complete(storage: &dyn SessionStorage, dir: &Path) -> bool {
    storage
        .read(&dir.join(MANIFEST_NAME))
        .is_ok_and(|bytes| Run::of(&String::from_utf8_lossy(&bytes)).complete)
}

/// What is said of a repair directory whose manifest records no change.
const NOTHING_BEGUN: &str = "a repair stopped (or is starting now) before its manifest \
     recorded any change, so before it changed anything: remove the directory";

/// What to say of a run that is not complete; `None` for a complete one.
fn unfinished(run: &Run) -> Option<String> {
    if run.complete {
        return None;
    }
    if run.begun.is_empty() {
        return Some(NOTHING_BEGUN.to_owned());
    }
    let unconfirmed = run.unconfirmed();
    if unconfirmed.is_empty() {
        return Some(
            "a repair stopped (or is still running) after every change it began was \
             confirmed in its manifest, which says what each was: remove the directory \
             when its copies are no longer needed"
                .to_owned(),
        );
    }
    let changes: Vec<String> = unconfirmed
        .iter()
        .map(|(path, repair)| format!("{path}: {repair}"))
        .collect();
    Some(format!(
        "a repair stopped (or is still running) before it confirmed {} it began, which \
         may or may not have been made: {}. Look at each (the directory keeps a copy of \
         every file whose bytes were to change, and what was moved); then remove the \
         directory",
        match changes.len() {
            1 => "a change".to_owned(),
            n => format!("{n} changes"),
        },
        changes.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_complete_when_it_says_so_or_was_written_whole() {
        let begun = r#"{"step":1,"state":"begun","path":"/a","kind":"k","repair":"r"}"#;
        let done = r#"{"step":1,"state":"done","result":"ok"}"#;
        let complete = r#"{"state":"complete","steps":1}"#;
        let whole = r#"{"path":"/a","kind":"k","repair":"r","done":"ok"}"#;
        assert!(Run::of(&format!("{begun}\n{done}\n{complete}\n")).complete);
        assert!(Run::of(&format!("{whole}\n")).complete);
        let stopped = Run::of(&format!("{begun}\n{done}\n"));
        assert!(!stopped.complete && stopped.unconfirmed().is_empty());
        assert_eq!(unfinished(&Run::of("")).as_deref(), Some(NOTHING_BEGUN));
        let torn = Run::of(&format!("{begun}\n{{\"step\":1,\"sta"));
        assert_eq!(torn.unconfirmed(), [&("/a".to_owned(), "r".to_owned())]);
        let said = unfinished(&torn).unwrap();
        assert!(said.contains("/a: r"), "{said}");
    }
}
