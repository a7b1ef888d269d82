//! Longest-prefix match of a key against the routes' prefixes, without allocating.
//!
//! Prefixes are kept longest first, so the first one a key starts with is the longest match. A
//! linear scan: route tables are tens of entries, and a scan of short byte comparisons beats a
//! trie's pointer chasing at that size. Case-insensitive matching folds ASCII only (keys are
//! bytes, not text), comparing in place.

/// The prefixes of a route table, each with the index of its route.
#[derive(Debug, Default)]
pub(crate) struct PrefixMatcher {
    /// Longest first; ties keep the order of the config.
    prefixes: Vec<(Box<[u8]>, usize)>,
    ignore_case: bool,
}

impl PrefixMatcher {
    /// `prefixes[i]` belongs to route `i`.
    pub(crate) fn new<'a>(prefixes: impl IntoIterator<Item = &'a [u8]>, ignore_case: bool) -> Self {
        let mut prefixes: Vec<(Box<[u8]>, usize)> = prefixes
            .into_iter()
            .enumerate()
            .map(|(route, prefix)| (Box::from(prefix), route))
            .collect();
        // Stable: equal lengths keep their config order.
        prefixes.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        PrefixMatcher {
            prefixes,
            ignore_case,
        }
    }

    /// The route whose prefix is the longest one `key` starts with.
    pub(crate) fn find(&self, key: &[u8]) -> Option<usize> {
        let matches = |prefix: &[u8]| match key.get(..prefix.len()) {
            Some(head) if self.ignore_case => head.eq_ignore_ascii_case(prefix),
            Some(head) => head == prefix,
            None => false,
        };
        self.prefixes
            .iter()
            .find(|(prefix, _)| matches(prefix))
            .map(|&(_, route)| route)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matcher(prefixes: &[&str], ignore_case: bool) -> PrefixMatcher {
        PrefixMatcher::new(prefixes.iter().map(|p| p.as_bytes()), ignore_case)
    }

    #[test]
    fn the_longest_matching_prefix_wins_whatever_the_config_order() {
        let m = matcher(&["user:", "user:vip:", "u"], false);
        assert_eq!(m.find(b"user:vip:7"), Some(1));
        assert_eq!(m.find(b"user:7"), Some(0));
        assert_eq!(m.find(b"us"), Some(2));
        assert_eq!(m.find(b"session"), None);
    }

    #[test]
    fn a_key_shorter_than_a_prefix_or_equal_to_it() {
        let m = matcher(&["sess:"], false);
        assert_eq!(m.find(b"sess"), None);
        assert_eq!(m.find(b"sess:"), Some(0));
        assert_eq!(m.find(b""), None);
    }

    #[test]
    fn case_is_significant_unless_ignored() {
        let exact = matcher(&["Sess:"], false);
        assert_eq!(exact.find(b"sess:1"), None);
        assert_eq!(exact.find(b"Sess:1"), Some(0));
        let folded = matcher(&["Sess:"], true);
        assert_eq!(folded.find(b"SESS:1"), Some(0));
        assert_eq!(folded.find(b"sess:1"), Some(0));
        // Only ASCII folds: other bytes compare as they are.
        let bytes = matcher(&["\u{e9}:"], true);
        assert_eq!(bytes.find("\u{c9}:x".as_bytes()), None);
    }

    #[test]
    fn an_empty_table_matches_nothing() {
        let m = matcher(&[], false);
        assert_eq!(m.find(b"anything"), None);
    }
}
