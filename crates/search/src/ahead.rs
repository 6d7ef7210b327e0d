//! How far the threads reading files for an update run ahead of the thread writing them
//! ([`super::update`]): the files are claimed in their order, and a file is claimed only
//! while the files read but not yet written hold at most [`AHEAD_BYTES`] — or none, so
//! that the writer's next file is always claimed and a file larger than the budget still
//! goes. A reader thus keeps reading while the writer flushes a segment or commits, and
//! the sessions held parsed meanwhile stay few.

use parking_lot::{Condvar, Mutex};

/// The bytes of transcript read ahead of the writer at most (beyond the one file that
/// always may be).
pub const AHEAD_BYTES: u64 = 32 << 20;

/// The files of one update, claimed in order by the readers and released by the writer.
#[derive(Debug)]
pub struct Ahead<'a> {
    lens: &'a [u64],
    budget: u64,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    next: usize,
    in_flight: u64,
    closed: bool,
}

impl<'a> Ahead<'a> {
    /// The files of lengths `lens`, read ahead by at most `budget` bytes.
    pub fn new(lens: &'a [u64], budget: u64) -> Self {
        Ahead {
            lens,
            budget,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        }
    }

    /// The next file to read, once there is room for it; `None` when every file is
    /// claimed or the writer stopped.
    pub fn claim(&self) -> Option<usize> {
        let mut state = self.state.lock();
        loop {
            if state.closed {
                return None;
            }
            let k = state.next;
            let len = *self.lens.get(k)?;
            if state.in_flight == 0 || state.in_flight.saturating_add(len) <= self.budget {
                state.next += 1;
                state.in_flight += len;
                return Some(k);
            }
            self.changed.wait(&mut state);
        }
    }

    /// File `k` is written: its bytes leave the budget.
    pub fn written(&self, k: usize) {
        let mut state = self.state.lock();
        state.in_flight -= self.lens[k];
        self.changed.notify_all();
    }

    /// The writer stopped: every reader waiting or to come gets `None`.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.changed.notify_all();
    }
}

/// Closes its [`Ahead`] when dropped: [`Closer::always`] on the writer's way out (an
/// error's too), [`Closer::on_panic`] when a reader panics (its file would never come, and
/// the others would wait for room forever).
pub struct Closer<'b, 'a> {
    ahead: &'b Ahead<'a>,
    always: bool,
}

impl<'b, 'a> Closer<'b, 'a> {
    pub fn always(ahead: &'b Ahead<'a>) -> Self {
        Closer {
            ahead,
            always: true,
        }
    }

    pub fn on_panic(ahead: &'b Ahead<'a>) -> Self {
        Closer {
            ahead,
            always: false,
        }
    }
}

impl Drop for Closer<'_, '_> {
    fn drop(&mut self) {
        if self.always || std::thread::panicking() {
            self.ahead.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    #[test]
    fn files_are_claimed_in_order_within_the_budget() {
        let lens = [4, 4, 4, 10, 1];
        let ahead = Ahead::new(&lens, 8);
        assert_eq!(ahead.claim(), Some(0));
        assert_eq!(ahead.claim(), Some(1));
        // 8 in flight: the third waits until the first is written.
        std::thread::scope(|s| {
            let third = s.spawn(|| ahead.claim());
            std::thread::sleep(Duration::from_millis(50));
            assert!(!third.is_finished(), "no room: it waits");
            ahead.written(0);
            assert_eq!(third.join().unwrap(), Some(2));
        });
        ahead.written(1);
        ahead.written(2);
        // Larger than the budget, but nothing else is in flight.
        assert_eq!(ahead.claim(), Some(3));
        ahead.written(3);
        assert_eq!(ahead.claim(), Some(4));
        assert_eq!(ahead.claim(), None, "every file claimed");
    }

    #[test]
    fn a_closed_budget_wakes_and_refuses_every_reader() {
        let lens = [8, 8, 8];
        let ahead = Ahead::new(&lens, 8);
        assert_eq!(ahead.claim(), Some(0));
        std::thread::scope(|s| {
            let waiting = s.spawn(|| ahead.claim());
            std::thread::sleep(Duration::from_millis(50));
            drop(Closer::on_panic(&ahead));
            std::thread::sleep(Duration::from_millis(50));
            assert!(!waiting.is_finished(), "no panic: still waiting");
            drop(Closer::always(&ahead));
            assert_eq!(waiting.join().unwrap(), None);
        });
        assert_eq!(ahead.claim(), None);
    }

    #[test]
    fn a_reader_that_panics_stops_the_others() {
        let lens = [8, 8, 8];
        let ahead = Ahead::new(&lens, 8);
        std::thread::scope(|s| {
            let panicking = s.spawn(|| {
                let _closer = Closer::on_panic(&ahead);
                assert_eq!(ahead.claim(), Some(0));
                panic!("a reader's bug");
            });
            assert!(panicking.join().is_err());
            // File 0 never comes and is never written: without the close this would wait.
            assert_eq!(ahead.claim(), None);
        });
    }

    #[test]
    fn readers_never_hold_more_than_the_budget_beyond_one_file() {
        let lens: Vec<u64> = (0..200).map(|i| (i * 7 % 13) + 1).collect();
        let ahead = Ahead::new(&lens, 20);
        let held = AtomicU64::new(0);
        let most = AtomicU64::new(0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            for _ in 0..3 {
                let tx = tx.clone();
                let (ahead, held, most, lens) = (&ahead, &held, &most, &lens);
                s.spawn(move || {
                    while let Some(k) = ahead.claim() {
                        let now = held.fetch_add(lens[k], Ordering::SeqCst) + lens[k];
                        most.fetch_max(now, Ordering::SeqCst);
                        tx.send(k).unwrap();
                    }
                });
            }
            drop(tx);
            // The writer takes the files in order.
            let mut ready = std::collections::BTreeSet::new();
            let mut next = 0;
            for k in rx {
                ready.insert(k);
                while ready.remove(&next) {
                    held.fetch_sub(lens[next], Ordering::SeqCst);
                    ahead.written(next);
                    next += 1;
                }
            }
            assert_eq!(next, lens.len(), "every file written, in order");
        });
        assert!(most.load(Ordering::SeqCst) <= 20, "{most:?}");
    }
}
