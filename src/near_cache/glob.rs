//! Redis-style glob matching of keys (`*`, `?`, `[...]`, `\` escapes) for `near_cache.keys`.
//!
//! Patterns are checked once when the config is validated; matching then runs for every read
//! the near cache considers, without allocating, so it is written as a loop with one backtrack
//! point instead of recursion. The test `globs_match_as_redis_keys_does` lists the cases checked
//! against what `KEYS` matches.

/// Whether `pattern` is well formed: every `[` closed, no trailing `\`.
pub(crate) fn check(pattern: &[u8]) -> Result<(), &'static str> {
    let mut i = 0;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' if i + 1 == pattern.len() => return Err("ends with a lone \\"),
            b'\\' => i += 2,
            b'[' => match class_end(pattern, i + 1) {
                Some(end) => i = end + 1,
                None => return Err("a [ is never closed"),
            },
            _ => i += 1,
        }
    }
    Ok(())
}

/// Whether `key` matches `pattern` (checked with [`check`] at start-up; a malformed one
/// matches literally where it breaks).
pub(crate) fn matches(pattern: &[u8], key: &[u8]) -> bool {
    // Iterative with one backtrack point for the last `*`: linear in practice, no recursion.
    let (mut p, mut k) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while k < key.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p, k));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    k += 1;
                    continue;
                }
                b'[' => {
                    if let Some(end) = class_end(pattern, p + 1) {
                        if in_class(&pattern[p + 1..end], key[k]) {
                            p = end + 1;
                            k += 1;
                            continue;
                        }
                    } else if key[k] == b'[' {
                        p += 1;
                        k += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() && pattern[p + 1] == key[k] => {
                    p += 2;
                    k += 1;
                    continue;
                }
                c if c != b'\\' && c == key[k] => {
                    p += 1;
                    k += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            // Let the last `*` take one more byte and try again from there.
            Some((star_p, star_k)) => {
                star = Some((star_p, star_k + 1));
                p = star_p + 1;
                k = star_k + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// The index of the `]` closing a class that starts at `from` (after its `[`).
/// A `]` right after the `[` is taken as part of the class, not its end; escaped bytes are
/// skipped. `None` when the class is never closed.
fn class_end(pattern: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < pattern.len() {
        match pattern[i] {
            b'\\' => i += 2,
            b']' if i > from => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Whether `c` is in the class body `class` (`^` negates; `a-z` ranges; `\` escapes).
fn in_class(class: &[u8], c: u8) -> bool {
    let (negated, body) = match class.first() {
        Some(b'^') => (true, &class[1..]),
        _ => (false, class),
    };
    let mut found = false;
    let mut i = 0;
    while i < body.len() {
        let mut lo = body[i];
        if lo == b'\\' && i + 1 < body.len() {
            i += 1;
            lo = body[i];
        }
        if i + 2 < body.len() && body[i + 1] == b'-' {
            let hi = body[i + 2];
            let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
            found |= (lo..=hi).contains(&c);
            i += 3;
        } else {
            found |= lo == c;
            i += 1;
        }
    }
    found != negated
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_redis_keys_does() {
        let yes = |p: &str, k: &str| assert!(matches(p.as_bytes(), k.as_bytes()), "{p} ~ {k}");
        let no = |p: &str, k: &str| assert!(!matches(p.as_bytes(), k.as_bytes()), "{p} !~ {k}");
        yes("*", "");
        yes("*", "anything");
        yes("flag:*", "flag:dark-mode");
        no("flag:*", "flags");
        yes("user:*:profile", "user:42:profile");
        no("user:*:profile", "user:42:settings");
        yes("h?llo", "hello");
        no("h?llo", "hllo");
        yes("h[ae]llo", "hallo");
        no("h[ae]llo", "hillo");
        yes("h[^e]llo", "hallo");
        no("h[^e]llo", "hello");
        yes("h[a-b]llo", "hbllo");
        yes("a\\*b", "a*b");
        no("a\\*b", "axb");
        yes("*a*b*", "xxaxxbxx");
        no("*a*b*", "xxbxxaxx");
        yes("a*", "a");
    }

    #[test]
    fn malformed_globs_are_refused() {
        assert!(check(b"flag:*").is_ok());
        assert!(check(b"a[bc]").is_ok());
        assert!(check(b"a[bc").is_err());
        assert!(check(b"ab\\").is_err());
    }
}
