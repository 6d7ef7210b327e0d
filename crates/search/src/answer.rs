//! Answers the index gives from what it holds of files — a search's hits, the touches of a
//! path — and how every one of them is given: never from a file as it was. Each file an
//! answer came from is checked first, and one changed since it was indexed is brought up to
//! date and the question asked again ([`SearchIndex::answer_once`]); asked of a store, the
//! store is brought up to date around it ([`SearchIndex::answer_dirs`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::{index_file, update, Hit, Progress, SearchError, SearchIndex, UpdateReport};
use gjcfs_engine::storage::FileVersion;

/// An answer read from the index, made of items that each come from one indexed file.
pub(super) trait Answer: Clone {
    /// What the caller is given of it.
    type Out;
    /// The file of each item, with the stat it was indexed at.
    fn sources(&self) -> Vec<(&Path, &FileVersion)>;
    fn output(self) -> Self::Out;
}

/// How an answer is read from the index.
pub(super) type Ask<'a, A> = &'a dyn Fn(&Connection) -> rusqlite::Result<A>;

impl Answer for Vec<(Hit, FileVersion)> {
    type Out = Vec<Hit>;

    fn sources(&self) -> Vec<(&Path, &FileVersion)> {
        self.iter()
            .map(|(hit, stat)| (hit.path.as_path(), stat))
            .collect()
    }

    fn output(self) -> Vec<Hit> {
        self.into_iter().map(|(hit, _)| hit).collect()
    }
}

impl SearchIndex {
    /// [`SearchIndex::update_dirs`], then [`SearchIndex::answer_once`]: `ask` runs while
    /// the files are stat'ed, and again after the update if any file changed. An index a
    /// watcher keeps fresh ([`SearchIndex::is_fresh`]) is asked at once, with no file
    /// checked but the answer's.
    pub(super) fn answer_dirs<A: Answer>(
        &self,
        dirs: &[PathBuf],
        threads: usize,
        progress: &dyn Fn(Progress),
        ask: Ask<'_, A>,
    ) -> Result<(UpdateReport, A::Out), SearchError> {
        if let Some((out, busy)) = self.answer_vouched(dirs, ask)? {
            let report = UpdateReport {
                trusted: true,
                busy,
                ..UpdateReport::default()
            };
            return Ok((report, out));
        }
        let (mut report, early) = self.update_dirs_while(dirs, threads, progress, ask)?;
        let (out, busy) = self.recovering(|| self.answer_once(ask, early.clone()))?;
        report.busy |= busy;
        Ok((report, out))
    }

    /// The answer of `ask`, starting from `first`, an answer of it on the index as it is
    /// now, when there is one: every file it came from is checked, and while one changed
    /// since it was indexed, it is brought up to date and `ask` runs again. With whether a
    /// file could not be brought up to date because another connection held the write lock
    /// (its items are those indexed).
    pub(super) fn answer_once<A: Answer>(
        &self,
        ask: Ask<'_, A>,
        mut first: Option<A>,
    ) -> Result<(A::Out, bool), SearchError> {
        let mut inner = self.inner.lock();
        inner.lock_wait.restart();
        // Each file is checked once per question: one that changes again after it was
        // brought up to date keeps the items of the state just read.
        let mut checked: HashSet<PathBuf> = HashSet::new();
        loop {
            let answer = match first.take() {
                Some(answer) => answer,
                None => ask(&inner.conn).map_err(|e| self.sql_error(e))?,
            };
            let mut stale = Vec::new();
            for (path, indexed) in answer.sources() {
                if checked.insert(path.to_owned())
                    && inner.source.storage.version(path).ok().as_ref() != Some(indexed)
                {
                    stale.push(path.to_owned());
                }
            }
            if stale.is_empty() {
                return Ok((answer.output(), false));
            }
            self.sync_files(&mut inner)?;
            for path in &stale {
                match self.refresh_one(&mut inner, path) {
                    Err(SearchError::Sqlite { source, .. }) if index_file::is_busy(&source) => {
                        return Ok((answer.output(), true));
                    }
                    done => done?,
                };
            }
            update::scrub_log(&mut inner).map_err(|e| self.sql_error(e))?;
        }
    }
}
