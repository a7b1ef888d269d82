//! Redis's glob matching (`stringmatchlen` in util.c) for key and channel patterns, corner
//! cases included: a `[` that is never closed matches up to the pattern's end, a range's
//! bounds are compared as C's signed `char`s (so bytes from 0x80 on sort below ASCII), a
//! trailing `\` matches itself, and `*` tries every split.
//!
//! Why copy Redis rather than use a glob crate: a user's key and channel patterns decide what
//! it may touch, and redcar checks them in front of nodes that would check the same patterns; any
//! difference in a corner case would be a key one side allows and the other refuses, or worse, one
//! redcar allows that the rules meant to deny. Used when a command's keys or channels are checked
//! against a user's patterns. The `give_up` shortcut bounds the work of a pattern with many `*` to
//! what Redis itself spends, so a pattern in the config cannot become a slow path.

/// Whether `text` matches `pattern`, exactly as Redis decides it (case-sensitive).
pub(crate) fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let mut give_up = false;
    match_from(pattern, text, &mut give_up)
}

/// The byte at `i`, or 0 past the end (Redis's strings end with a NUL it may look at).
fn at(bytes: &[u8], i: usize) -> u8 {
    bytes.get(i).copied().unwrap_or(0)
}

/// C's `char` is signed on the platforms Redis is built for.
fn signed(byte: u8) -> i32 {
    i32::from(byte as i8)
}

/// `give_up` is set once a `*` found that no suffix of the text matches the rest of the
/// pattern: every other way of splitting at an earlier `*` would fail too.
fn match_from(pattern: &[u8], text: &[u8], give_up: &mut bool) -> bool {
    let (mut p, mut t) = (0, 0);
    while p < pattern.len() && t < text.len() {
        match pattern[p] {
            b'*' => {
                while at(pattern, p + 1) == b'*' && p + 1 < pattern.len() {
                    p += 1;
                }
                if p + 1 == pattern.len() {
                    return true;
                }
                while t < text.len() {
                    if match_from(&pattern[p + 1..], &text[t..], give_up) {
                        return true;
                    }
                    if *give_up {
                        return false;
                    }
                    t += 1;
                }
                *give_up = true;
                return false;
            }
            b'?' => t += 1,
            b'[' => {
                let (matched, end) = class(pattern, p + 1, text[t]);
                if !matched {
                    return false;
                }
                p = end;
                t += 1;
            }
            c => {
                let c = if c == b'\\' && pattern.len() - p >= 2 {
                    p += 1;
                    pattern[p]
                } else {
                    c
                };
                if c != text[t] {
                    return false;
                }
                t += 1;
            }
        }
        p += 1;
        if t == text.len() {
            while at(pattern, p) == b'*' && p < pattern.len() {
                p += 1;
            }
            break;
        }
    }
    p >= pattern.len() && t == text.len()
}

/// A `[...]` class starting at `from` (after the `[`) against byte `c`: whether it matched,
/// and the index of its closing `]` (or of its last byte, when it is never closed).
fn class(pattern: &[u8], from: usize, c: u8) -> (bool, usize) {
    let mut p = from;
    let negate = at(pattern, p) == b'^' && p < pattern.len();
    if negate {
        p += 1;
    }
    let mut matched = false;
    loop {
        let left = pattern.len().saturating_sub(p);
        if at(pattern, p) == b'\\' && left >= 2 {
            p += 1;
            matched |= pattern[p] == c;
        } else if left == 0 {
            p -= 1; // never closed: the class ends with the pattern
            break;
        } else if pattern[p] == b']' {
            break;
        } else if left >= 3 && pattern[p + 1] == b'-' {
            let (mut start, mut end) = (signed(pattern[p]), signed(pattern[p + 2]));
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            matched |= (start..=end).contains(&signed(c));
            p += 2;
        } else {
            matched |= pattern[p] == c;
        }
        p += 1;
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs_match_as_in_redis() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", false),
            ("", "", true),
            ("", "a", false),
            ("a*", "a", true),
            ("a*", "abc", true),
            ("app:*", "app:1", true),
            ("app:*", "ap", false),
            ("*:1", "app:1", true),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("a[bc]d", "acd", true),
            ("a[^bc]d", "acd", false),
            ("a[^bc]d", "aed", true),
            ("a[a-c]", "ab", true),
            ("a[c-a]", "ab", true),
            ("a[a-c]", "ad", false),
            ("a\\*", "a*", true),
            ("a\\*", "ab", false),
            ("a\\", "a\\", true),
            ("a[", "a[", false),
            ("a[b", "ab", true),
            ("a[b", "ac", false),
            ("a[\\]]", "a]", true),
            ("*a*b*", "xxaxxbxx", true),
            ("*a*b*", "xxbxxaxx", false),
            ("a**", "a", true),
            ("k*", "", false),
            ("a*b", "ab", true),
            ("[a-]", "-", false),
            ("[a-]", "b", false),
            ("x[a-]", "x]", true),
        ];
        for &(pattern, text, expected) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern:?} vs {text:?}"
            );
        }
    }

    #[test]
    fn many_stars_against_a_long_text_end_quickly() {
        let pattern = "*a".repeat(40) + "b";
        let text = "a".repeat(5000);
        assert!(!matches(pattern.as_bytes(), text.as_bytes()));
    }
}

/// The same patterns given to a real redis-server's `KEYS` (which uses the same matcher).
#[cfg(test)]
mod against_redis {
    use super::matches;
    use crate::commands::test_server::{Reply, TestServer};

    #[test]
    fn keys_agrees_with_redis_on_every_pattern_and_key() {
        let Some(mut server) = TestServer::start() else {
            return;
        };
        let keys: &[&[u8]] = &[
            b"a",
            b"ab",
            b"abc",
            b"a]",
            b"a[",
            b"a-",
            b"-",
            b"x]",
            b"a*",
            b"a\\",
            b"app:1",
            b"b",
            b"\xc3\xa9",
            b"a\xff",
            b"[",
            b"]",
            b"ac",
            b"aed",
        ];
        for key in keys {
            server.call(&[b"SET", key, b"v"]);
        }
        let patterns: &[&[u8]] = &[
            b"a*",
            b"a?",
            b"a[",
            b"a[b",
            b"a[^b]",
            b"a[a-c]",
            b"a[c-a]",
            b"[a-]",
            b"x[a-]",
            b"a\\*",
            b"a\\",
            b"*]",
            b"a[\\]]",
            b"?",
            b"a[\x80-\xff]",
            b"a[ -\xff]",
            b"[]",
            b"*[",
            b"a[^",
            b"*c",
            b"a**",
            b"[\xc3-\xc3]*",
        ];
        for pattern in patterns {
            let Reply::Array(Some(found)) = server.call(&[b"KEYS", pattern]) else {
                panic!("KEYS failed");
            };
            let mut theirs: Vec<Vec<u8>> = found
                .into_iter()
                .filter_map(|r| match r {
                    Reply::Bulk(Some(b)) => Some(b),
                    _ => None,
                })
                .collect();
            let mut ours: Vec<Vec<u8>> = keys
                .iter()
                .filter(|k| matches(pattern, k))
                .map(|k| k.to_vec())
                .collect();
            theirs.sort();
            ours.sort();
            assert_eq!(
                ours,
                theirs,
                "pattern {:?}",
                String::from_utf8_lossy(pattern)
            );
        }
    }
}
