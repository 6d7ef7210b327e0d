//! A check's report for people (text) and programs (JSON), with what a repair did.

use std::fmt::Write;

use super::{RepairOutcome, Report, Severity};
use crate::json::{Object, Value};

impl Report {
    /// How many findings of `severity` there are (those a repair fixed left out).
    fn count(&self, severity: Severity, outcome: Option<&RepairOutcome>) -> usize {
        self.findings
            .iter()
            .enumerate()
            .filter(|(i, f)| {
                f.severity == severity && !outcome.is_some_and(|o| matches!(o.of(*i), Some(Ok(_))))
            })
            .count()
    }

    /// The report as text, one finding a block: `SEVERITY  kind  path`, what it means, and
    /// the repair (offered, done or not done) or that it is left for a person; then a
    /// summary line.
    pub fn to_text(&self, outcome: Option<&RepairOutcome>) -> String {
        let mut out = String::new();
        let mut repairable = 0;
        for (i, finding) in self.findings.iter().enumerate() {
            let label = match outcome.and_then(|o| o.of(i)) {
                Some(Ok(_)) => "repaired",
                _ => finding.severity.as_str(),
            };
            let _ = writeln!(
                out,
                "{label:<8}  {}  {}",
                finding.kind,
                finding.path.display()
            );
            let _ = writeln!(out, "          {}", finding.what);
            match (outcome.and_then(|o| o.of(i)), &finding.repair) {
                (Some(Ok(done)), _) => {
                    let _ = writeln!(out, "          repaired: {done}");
                }
                (Some(Err(why)), _) => {
                    let _ = writeln!(out, "          not repaired: {why}");
                }
                (None, Some(repair)) => {
                    repairable += 1;
                    let _ = writeln!(out, "          --repair would {}", repair.describe());
                }
                (None, None) if finding.severity > Severity::Note => {
                    let _ = writeln!(out, "          left for a person");
                }
                (None, None) => {}
            }
        }
        let plural = |n: usize, word: &str| match n {
            1 => format!("1 {word}"),
            n => format!("{n} {word}s"),
        };
        let _ = write!(
            out,
            "checked {} and {}: {}, {}, {}",
            plural(self.sessions, "session file"),
            plural(self.blobs, "blob"),
            plural(self.count(Severity::Error, outcome), "error"),
            plural(self.count(Severity::Warning, outcome), "warning"),
            plural(self.count(Severity::Note, outcome), "note"),
        );
        if let Some(outcome) = outcome {
            let done = outcome.results.iter().filter(|r| r.result.is_ok()).count();
            let _ = write!(out, " left; {} repaired", plural(done, "finding"));
            if let Some(dir) = &outcome.kept_in {
                let _ = write!(out, " (copies and a manifest in {})", dir.display());
            }
            let pruned = &outcome.pruned.removed;
            if !pruned.is_empty() {
                let bytes: u64 = pruned.iter().map(|(_, b)| b).sum();
                let _ = write!(
                    out,
                    "; let go of {} ({bytes} bytes)",
                    plural(pruned.len(), "older repair run")
                );
            }
        } else if repairable > 0 {
            let _ = write!(out, "; `gjcfs check --repair` repairs {repairable} of them");
        }
        out.push('\n');
        out
    }

    /// The report as one JSON object: `sessions`, `blobs`, `errors`, `warnings`, `notes`
    /// (what is left), `findings` (each `severity`, `kind`, `path`, `what`, `repair` —
    /// what a repair does, or `null` — and, after a repair, `repaired` and `result`), and
    /// `repairDir`.
    pub fn to_json(&self, outcome: Option<&RepairOutcome>) -> Value {
        let mut findings = Vec::with_capacity(self.findings.len());
        for (i, finding) in self.findings.iter().enumerate() {
            let mut f = Object::with_capacity(7);
            f.insert("severity", Value::string(finding.severity.as_str()));
            f.insert("kind", Value::string(finding.kind));
            f.insert(
                "path",
                Value::string(finding.path.to_string_lossy().into_owned()),
            );
            f.insert("what", Value::string(finding.what.as_str()));
            f.insert(
                "repair",
                finding
                    .repair
                    .as_ref()
                    .map_or(Value::Null, |r| Value::string(r.describe())),
            );
            if let Some(result) = outcome.and_then(|o| o.of(i)) {
                let (done, text) = match result {
                    Ok(text) => (true, text),
                    Err(text) => (false, text),
                };
                f.insert("repaired", Value::Bool(done));
                f.insert("result", Value::string(text.as_str()));
            }
            findings.push(Value::Object(f));
        }
        let number = |n: usize| Value::number(n as f64);
        let mut out = Object::with_capacity(7);
        out.insert("sessions", number(self.sessions));
        out.insert("blobs", number(self.blobs));
        out.insert("errors", number(self.count(Severity::Error, outcome)));
        out.insert("warnings", number(self.count(Severity::Warning, outcome)));
        out.insert("notes", number(self.count(Severity::Note, outcome)));
        out.insert("findings", Value::Array(findings));
        out.insert(
            "repairDir",
            outcome
                .and_then(|o| o.kept_in.as_ref())
                .map_or(Value::Null, |d| {
                    Value::string(d.to_string_lossy().into_owned())
                }),
        );
        if let Some(outcome) = outcome {
            let pruned = outcome.pruned.removed.iter();
            let dirs = pruned.map(|(d, _)| Value::string(d.to_string_lossy().into_owned()));
            out.insert("prunedRuns", Value::Array(dirs.collect()));
        }
        Value::Object(out)
    }
}
