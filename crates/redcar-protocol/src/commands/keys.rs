//! Finding the key (and shard channel) arguments of a command line from its Redis 7 key specs.
//!
//! Mirrors Redis' `getKeysUsingKeySpecs` (db.c) so redcar routes by exactly the
//! arguments Redis itself hashes, but never panics on short or malformed input.
//!
//! Called on the command path for every keyed command (the router plans by the slot of the indices
//! found), so the common case, one key at a fixed index, is a branch and a bounds check with no
//! loop. What holds: indices are always within `args` and never 0 (the name); on any error `out` is
//! exactly as it was, so a caller can retry with another selection; an `INCOMPLETE` or unknown spec
//! is reported as [`KeyScan::Incomplete`] rather than guessed at.

use super::spec::{key_flags, BeginSearch, CommandSpec, FindKeys, KeySpec};
use crate::protocol::Args;

/// Whether the indices found are all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyScan {
    /// Every key position the specs describe was found.
    Complete,
    /// Some spec is `INCOMPLETE` or `unknown` (SORT's STORE/BY/GET, MIGRATE's KEYS form):
    /// there may be more keys than reported. Routing by the found ones is still safe in a
    /// cluster, because the node rejects cross-slot commands itself.
    Incomplete,
}

/// The arguments don't fit the command's key specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Too few arguments, a non-numeric or negative key count, or a key count pointing past
    /// the end. Redis would reply with an arity or syntax error; let it.
    #[error("arguments do not match the command's key specification")]
    Invalid,
}

/// Which specs to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Select {
    /// Real keys only: what `key_indices` reports.
    Keys,
    /// Keys and shard channels (`not_key` specs): what decides the slot.
    Both,
}

impl Select {
    /// Whether this selection follows `spec`.
    fn wants(self, spec: &KeySpec) -> bool {
        let not_key = spec.flags & key_flags::NOT_KEY != 0;
        match self {
            Select::Keys => !not_key,
            Select::Both => true,
        }
    }
}

/// Pushes the index (into `args`, where `args[0]` is the command name) of every key.
/// Specs flagged `NOT_KEY` (shard channels) are skipped, as Redis does for keys.
/// On error `out` is left as it was.
#[inline]
pub fn key_indices(
    spec: &CommandSpec,
    args: Args<'_>,
    out: &mut Vec<usize>,
) -> Result<KeyScan, KeyError> {
    scan(spec, args, out, Select::Keys)
}

/// Pushes every argument that determines the slot: keys and shard channels, in spec order.
#[inline]
pub fn routing_indices(
    spec: &CommandSpec,
    args: Args<'_>,
    out: &mut Vec<usize>,
) -> Result<KeyScan, KeyError> {
    scan(spec, args, out, Select::Both)
}

/// The shared walk over `spec`'s key specs in Redis's order; the result is `Incomplete` if any
/// followed spec is.
fn scan(
    spec: &CommandSpec,
    args: Args<'_>,
    out: &mut Vec<usize>,
    select: Select,
) -> Result<KeyScan, KeyError> {
    let start_len = out.len();
    let mut result = KeyScan::Complete;
    for ks in spec.key_specs.iter().filter(|ks| select.wants(ks)) {
        match one_spec(ks, args, out) {
            Ok(KeyScan::Complete) => {}
            Ok(KeyScan::Incomplete) => result = KeyScan::Incomplete,
            Err(err) => {
                out.truncate(start_len);
                return Err(err);
            }
        }
    }
    Ok(result)
}

/// Applies one key spec. Arithmetic is in i64 so a huge key count can't overflow.
fn one_spec(ks: &KeySpec, args: Args<'_>, out: &mut Vec<usize>) -> Result<KeyScan, KeyError> {
    // One key at a fixed place (GET, SET, INCR, HGET... most of the traffic): no range to walk.
    if let (
        BeginSearch::Index(at),
        FindKeys::Range {
            last_key: 0,
            step: 1..,
            ..
        },
    ) = (ks.begin, ks.find)
    {
        let at = usize::try_from(at)
            .ok()
            .filter(|&at| at >= 1 && at < args.len());
        out.push(at.ok_or(KeyError::Invalid)?);
        return Ok(match ks.flags & key_flags::INCOMPLETE {
            0 => KeyScan::Complete,
            _ => KeyScan::Incomplete,
        });
    }
    let argc = args.len() as i64;
    let first = match ks.begin {
        BeginSearch::Index(i) => i64::from(i),
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => match find_keyword(args, keyword, start_from) {
            Some(at) => at + 1,
            // An optional keyword (GEORADIUS STORE) that isn't there: no keys, not an error.
            None => return Ok(KeyScan::Complete),
        },
        BeginSearch::Unknown => return Ok(KeyScan::Incomplete),
    };
    let open_ended = matches!(ks.find, FindKeys::Range { last_key, .. } if last_key < 0);
    let (first, last, step) = match ks.find {
        FindKeys::Range {
            last_key,
            step,
            limit,
        } => (first, range_last(first, argc, last_key, limit), step),
        FindKeys::KeyNum {
            key_num_idx,
            first_key,
            step,
        } => {
            let count = key_count(args, first + i64::from(key_num_idx))?;
            if count == 0 {
                // Redis treats this as an invalid spec and falls back to the command's own
                // key finder, which reports no keys (EVAL "..." 0); the command decides.
                return Ok(KeyScan::Complete);
            }
            let first = first + i64::from(first_key);
            (first, first + count - 1, step)
        }
        FindKeys::Unknown => return Ok(KeyScan::Incomplete),
    };
    if step <= 0 || first < 1 {
        return Err(KeyError::Invalid);
    }
    if open_ended && last < first {
        // Like Redis for variadic commands: a "to the end" range over no arguments finds no
        // keys (PFMERGE dest with no sources); the other specs still count.
        return Ok(KeyScan::Complete);
    }
    if first >= argc || last >= argc || last < first {
        return Err(KeyError::Invalid);
    }
    let (first, last) = (first as usize, last as usize);
    out.extend((first..=last).step_by(step as usize));
    Ok(if ks.flags & key_flags::INCOMPLETE != 0 {
        KeyScan::Incomplete
    } else {
        KeyScan::Complete
    })
}

#[cfg(test)]
#[path = "keys_tests.rs"]
mod tests;

/// Last key index of a range spec. With `last_key < 0` and a `limit`, only `1/limit` of the
/// remaining arguments are keys (XREAD STREAMS k1 k2 id1 id2: limit 2 → the first half).
fn range_last(first: i64, argc: i64, last_key: i32, limit: i32) -> i64 {
    let last_key = i64::from(last_key);
    if last_key >= 0 {
        first + last_key
    } else if limit <= 0 {
        argc + last_key
    } else {
        first + ((argc - first) / i64::from(limit) + last_key)
    }
}

/// Index of `keyword` (case-insensitive), scanning forward from `start_from` when positive
/// or backwards from `argc + start_from` otherwise. Like Redis, a forward scan never looks
/// at the last argument (a trailing keyword has no keys after it) and index 0 (the name)
/// is never considered.
fn find_keyword(args: Args<'_>, keyword: &str, start_from: i32) -> Option<i64> {
    let argc = args.len() as i64;
    let matches = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| args.get(i))
            .is_some_and(|arg| arg.eq_ignore_ascii_case(keyword.as_bytes()))
    };
    if start_from > 0 {
        (i64::from(start_from)..argc - 1).find(|&i| matches(i))
    } else {
        let start = argc + i64::from(start_from);
        (1..=start.min(argc - 1)).rev().find(|&i| matches(i))
    }
}

/// The key count at `idx`: must exist and parse as a non-negative integer (Redis' string2ll).
fn key_count(args: Args<'_>, idx: i64) -> Result<i64, KeyError> {
    let arg = usize::try_from(idx)
        .ok()
        .and_then(|i| args.get(i))
        .ok_or(KeyError::Invalid)?;
    let count: i64 = std::str::from_utf8(arg)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse().ok())
        .ok_or(KeyError::Invalid)?;
    // More keys than arguments can never fit; rejecting early also keeps the index
    // arithmetic far from overflow.
    if count < 0 || count > args.len() as i64 {
        return Err(KeyError::Invalid);
    }
    Ok(count)
}
