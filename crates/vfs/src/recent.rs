//! The queries a person asked lately, which `ls history/search/` and `ls search/` list.

use std::collections::VecDeque;

use parking_lot::Mutex;

/// How many queries are kept.
pub const RECENT_QUERIES: usize = 20;

/// The last [`RECENT_QUERIES`] distinct queries, oldest first; asking one again makes it
/// the newest.
#[derive(Debug, Default)]
pub(super) struct RecentQueries(Mutex<VecDeque<String>>);

impl RecentQueries {
    /// Notes `query` as the newest, dropping the oldest beyond [`RECENT_QUERIES`].
    pub fn note(&self, query: &str) {
        let mut queries = self.0.lock();
        queries.retain(|q| q != query);
        queries.push_back(query.to_owned());
        while queries.len() > RECENT_QUERIES {
            queries.pop_front();
        }
    }

    /// The queries kept, oldest first.
    pub fn list(&self) -> Vec<String> {
        self.0.lock().iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_asked_again_is_the_newest_and_the_oldest_go() {
        let recent = RecentQueries::default();
        for n in 0..RECENT_QUERIES + 2 {
            recent.note(&format!("q{n}"));
        }
        recent.note("q5");
        let list = recent.list();
        assert_eq!(list.len(), RECENT_QUERIES);
        assert_eq!(list.first().map(String::as_str), Some("q2"));
        assert_eq!(list.last().map(String::as_str), Some("q5"));
        assert_eq!(list.iter().filter(|q| *q == "q5").count(), 1);
    }
}
