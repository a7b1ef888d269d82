//! The keys a command touches and what it does with each (Redis 7 key-spec flags), exactly as
//! Redis's ACL check finds them (`getKeysFromCommandWithSpecs` in db.c), and the channels of
//! the pub/sub commands.
//!
//! Routing (`keys.rs`) may be generous where Redis is not: here every corner follows Redis,
//! because a user's key rules must allow and refuse what a redis-server with the same rules
//! would. The key specs are used when they describe the command completely and their flags are
//! reliable; otherwise (a spec that does not fit the arguments, an `INCOMPLETE` or unknown one,
//! `VARIABLE_FLAGS`) the command's own key finder is followed, as Redis falls back to its
//! `getkeys_proc`: SET and BITFIELD (read or write depends on the options), SORT and SORT_RO,
//! MIGRATE, the `numkeys` commands (EVAL, FCALL, ZUNION, LMPOP, ...) and XREAD. Keys found by
//! those finders carry no flags unless Redis gives them some, and a key without flags matches
//! any key pattern, read or write (Redis's rule).

use super::spec::{key_flags as k, BeginSearch, CommandSpec, FindKeys, KeySpec};
use crate::protocol::Args;

/// One key argument: its index (`args[0]` is the command name) and its key-spec flags.
pub type KeyUse = (usize, u32);

/// How a pub/sub command names channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channels {
    /// Every argument is a channel (SUBSCRIBE, SSUBSCRIBE).
    Subscribe,
    /// Every argument is a pattern, matched literally against the user's channel rules
    /// (PSUBSCRIBE).
    PatternSubscribe,
    /// The first argument is the channel (PUBLISH, SPUBLISH).
    Publish,
}

/// Which arguments of `spec` are channels the ACL checks; `None` for every other command
/// (unsubscribing is never refused, as in Redis).
pub fn acl_channels(spec: &CommandSpec) -> Option<Channels> {
    match spec.name {
        "subscribe" | "ssubscribe" => Some(Channels::Subscribe),
        "psubscribe" => Some(Channels::PatternSubscribe),
        "publish" | "spublish" => Some(Channels::Publish),
        _ => None,
    }
}

/// Whether Redis considers `spec` to have keys at all (`doesCommandHaveKeys`).
pub fn has_acl_keys(spec: &CommandSpec) -> bool {
    has_key_finder(spec.name) || spec.key_specs.iter().any(|ks| ks.flags & k::NOT_KEY == 0)
}

/// Pushes every key of the command line with its flags, as Redis's ACL check sees them.
/// `out` is cleared first.
pub fn acl_keys(spec: &CommandSpec, args: Args<'_>, out: &mut Vec<KeyUse>) {
    out.clear();
    let has_keyspec = spec.key_specs.iter().any(|ks| ks.flags & k::NOT_KEY == 0);
    let variable = spec
        .key_specs
        .iter()
        .any(|ks| ks.flags & k::VARIABLE_FLAGS != 0);
    if has_keyspec && !variable {
        if from_specs(spec.key_specs, args, out).is_ok() {
            return;
        }
        out.clear();
    }
    from_key_finder(spec.name, args, out);
}

/// The commands that have a key finder of their own in Redis 7.0.
fn has_key_finder(name: &str) -> bool {
    matches!(
        name,
        "set"
            | "bitfield"
            | "sort"
            | "sort_ro"
            | "migrate"
            | "xread"
            | "xreadgroup"
            | "georadius"
            | "georadiusbymember"
    ) || numkeys_layout(name).is_some()
}

/// A key spec that does not fit the arguments (or cannot be followed): Redis then asks the
/// command's own key finder.
struct Invalid;

/// Every spec in order (Redis's `getKeysUsingKeySpecs` without partial results).
fn from_specs(specs: &[KeySpec], args: Args<'_>, out: &mut Vec<KeyUse>) -> Result<(), Invalid> {
    let argc = args.len() as i64;
    for ks in specs.iter().filter(|ks| ks.flags & k::NOT_KEY == 0) {
        let first = match ks.begin {
            BeginSearch::Index(at) => i64::from(at),
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => match keyword_at(args, keyword, start_from) {
                Some(at) => at + 1,
                None => continue, // an optional keyword that is not there: no keys
            },
            BeginSearch::Unknown => return Err(Invalid),
        };
        let (first, last, step) = match ks.find {
            FindKeys::Range {
                last_key,
                step,
                limit,
            } => {
                let last = if last_key >= 0 {
                    first + i64::from(last_key)
                } else if limit == 0 {
                    argc + i64::from(last_key)
                } else {
                    first + ((argc - first) / i64::from(limit) + i64::from(last_key))
                };
                (first, last, step)
            }
            FindKeys::KeyNum {
                key_num_idx,
                first_key,
                step,
            } => {
                let count = usize::try_from(first + i64::from(key_num_idx))
                    .ok()
                    .and_then(|i| args.get(i))
                    .and_then(string2ll)
                    .filter(|&n| n >= 0)
                    .ok_or(Invalid)?;
                let first = first + i64::from(first_key);
                (first, first + count - 1, step)
            }
            FindKeys::Unknown => return Err(Invalid),
        };
        if last >= argc || last < first || first >= argc || first < 1 || step < 1 {
            return Err(Invalid);
        }
        let step = step as usize;
        out.extend(
            (first as usize..=last as usize)
                .step_by(step)
                .map(|i| (i, ks.flags)),
        );
        if ks.flags & k::INCOMPLETE != 0 {
            return Err(Invalid);
        }
    }
    Ok(())
}

/// Where a key spec's keyword is: scanning forward from `start_from` up to (not including) the
/// last argument, or backwards from `argc + start_from` down to (not including) argument 1.
fn keyword_at(args: Args<'_>, keyword: &str, start_from: i32) -> Option<i64> {
    let argc = args.len() as i64;
    let is_keyword = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| args.get(i))
            .is_some_and(|a| a.eq_ignore_ascii_case(keyword.as_bytes()))
    };
    if start_from > 0 {
        (i64::from(start_from)..argc - 1)
            .take_while(|&i| i >= 1)
            .find(|&i| is_keyword(i))
    } else {
        let start = argc + i64::from(start_from);
        let mut i = start;
        while i != 1 {
            if i >= argc || i < 1 {
                return None;
            }
            if is_keyword(i) {
                return Some(i);
            }
            i -= 1;
        }
        None
    }
}

/// The command's own key finder (Redis's `getkeys_proc`); none: no keys.
fn from_key_finder(name: &str, args: Args<'_>, out: &mut Vec<KeyUse>) {
    if let Some((store, count_at, first)) = numkeys_layout(name) {
        return numkeys(args, store, count_at, first, out);
    }
    match name {
        "set" => out.push((1, set_flags(args))),
        "bitfield" => out.push((1, bitfield_flags(args))),
        "sort_ro" => out.push((1, k::RO | k::ACCESS)),
        "sort" => sort(args, out),
        "migrate" => migrate(args, out),
        "xread" | "xreadgroup" => xread(args, out),
        _ => {}
    }
}

/// The `numkeys` commands' layout: the store key's index (0: none), the index of the count and
/// of the first key.
fn numkeys_layout(name: &str) -> Option<(usize, usize, usize)> {
    Some(match name {
        "eval" | "eval_ro" | "evalsha" | "evalsha_ro" | "fcall" | "fcall_ro" => (0, 2, 3),
        "blmpop" | "bzmpop" => (0, 2, 3),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            (0, 1, 2)
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => (1, 2, 3),
        _ => return None,
    })
}

/// `numkeys` keys from `first` (C's `atoi` reads the count: `1x` is 1), none when the count is
/// below 1 or more than the arguments hold; plus the store key. No flags (Redis gives none).
fn numkeys(args: Args<'_>, store: usize, count_at: usize, first: usize, out: &mut Vec<KeyUse>) {
    let count = args.get(count_at).map_or(0, atoi);
    let room = args.len().saturating_sub(first) as i64;
    if count < 1 || count > room {
        return;
    }
    out.extend((first..first + count as usize).map(|i| (i, 0)));
    if store > 0 {
        out.push((store, 0));
    }
}

/// SET reads the old value only with `GET` (from the fourth argument on).
fn set_flags(args: Args<'_>) -> u32 {
    if args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get")) {
        k::RW | k::ACCESS | k::UPDATE
    } else {
        k::OW | k::UPDATE
    }
}

/// BITFIELD is a read while it only has `GET`s and `OVERFLOW`s, complete ones.
fn bitfield_flags(args: Args<'_>) -> u32 {
    let mut i = 2;
    while let Some(arg) = args.get(i) {
        let left = args.len() - i - 1;
        if arg.eq_ignore_ascii_case(b"get") && left >= 2 {
            i += 3;
        } else if arg.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            i += 2;
        } else {
            return k::RW | k::ACCESS | k::UPDATE; // a write, or a syntax error: not a read
        }
    }
    k::RO | k::ACCESS
}

/// SORT: the sorted key, and the last `STORE` destination (`BY` and `GET` patterns are not
/// keys to the ACL).
fn sort(args: Args<'_>, out: &mut Vec<KeyUse>) {
    out.push((1, k::RO | k::ACCESS));
    let mut store = None;
    let mut i = 2;
    while let Some(arg) = args.get(i) {
        if arg.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"get") || arg.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    out.extend(store.map(|at| (at, k::OW | k::UPDATE)));
}

/// MIGRATE: the key at 3, or with `KEYS` (and an empty key at 3) every argument after it.
fn migrate(args: Args<'_>, out: &mut Vec<KeyUse>) {
    let (mut first, mut count) = (3, 1);
    let mut i = 6;
    while let Some(arg) = args.get(i) {
        if arg.eq_ignore_ascii_case(b"keys") {
            if args.get(3).is_some_and(|key| key.is_empty()) {
                first = i + 1;
                count = args.len() - first;
            }
            break;
        }
        if arg.eq_ignore_ascii_case(b"auth") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"auth2") {
            i += 2;
        }
        i += 1;
    }
    let flags = k::RW | k::ACCESS | k::DELETE;
    out.extend(
        (first..first + count)
            .filter(|&i| i < args.len())
            .map(|i| (i, flags)),
    );
}

/// XREAD / XREADGROUP: the first half of what follows `STREAMS` (the options before it read
/// as Redis reads them); none when the rest is not keys and IDs in pairs.
fn xread(args: Args<'_>, out: &mut Vec<KeyUse>) {
    let mut i = 1;
    let mut streams = None;
    while let Some(arg) = args.get(i) {
        if arg.eq_ignore_ascii_case(b"block") || arg.eq_ignore_ascii_case(b"count") {
            i += 1;
        } else if arg.eq_ignore_ascii_case(b"group") {
            i += 2;
        } else if arg.eq_ignore_ascii_case(b"streams") {
            streams = Some(i);
            break;
        } else if !arg.eq_ignore_ascii_case(b"noack") {
            break;
        }
        i += 1;
    }
    let Some(at) = streams else { return };
    let rest = args.len() - at - 1;
    if rest == 0 || !rest.is_multiple_of(2) {
        return;
    }
    out.extend((at + 1..at + 1 + rest / 2).map(|i| (i, 0)));
}

/// Redis's strict integer parse (`string2ll`): an optional `-`, no `+`, no spaces, no leading
/// zeros.
fn string2ll(text: &[u8]) -> Option<i64> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    let well_formed = match digits {
        [b'0'] => text.len() == 1,
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !well_formed {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// C's `atoi`: leading white space, a sign, then as many digits as there are (0 if none).
fn atoi(text: &[u8]) -> i64 {
    let text = match text.iter().position(|b| !b" \t\n\r\x0b\x0c".contains(b)) {
        Some(start) => &text[start..],
        None => return 0,
    };
    let (negative, digits) = match text.first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    let value = digits
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0i64, |n, &d| {
            n.saturating_mul(10).saturating_add(i64::from(d - b'0'))
        });
    if negative {
        -value
    } else {
        value
    }
}

#[cfg(test)]
#[path = "acl_keys_tests.rs"]
mod tests;
