//! Which replies to a read say "no such key": what a replica's answer must look like for the
//! slot's primary to be asked again (`router.replica_miss_check`).
//!
//! A replica answers from the keys it holds. During a slot migration the source's replica still
//! serves the slot after some keys moved to the target, and answers for those keys as if they
//! did not exist — not only `nil`: `LRANGE` gives an empty array, `EXISTS`/`SCARD`/`STRLEN` 0,
//! `TTL` -2, `TYPE` `none`, `SCAN`-style commands an ended scan, `XINFO` an error, and a read of
//! several keys a reply short of the moved ones. Such a reply is sent to the primary to confirm.
//!
//! What each read answers for an absent key was measured on a real redis-server, not written by
//! hand: `absent_tests.rs` runs every read command of the table (`absent_samples.rs`) on absent
//! keys, in RESP2 and RESP3, and for reads of several keys also with each key absent alone, and
//! keeps each command's reply `class`es in the generated `absent_table.rs` (it fails when the
//! table and the node disagree; `REDCAR_WRITE_ABSENT=1` rewrites it). A reply no class describes
//! (a script's, `SUNION`'s with one key moved) makes the command opaque: all its replies from a
//! replica are confirmed (`class::OPAQUE`, `class::OPAQUE_WITH_KEYS`).
//!
//! Cost: `may_be_absent` looks at a reply's first bytes and lets through only nils, empty
//! strings, integers, aggregates, errors and `+none`; only those are matched against the command's
//! classes ([`means_absent`]: the request's arguments found again in its bytes, one table lookup,
//! then byte compares; aggregates are walked only for the classes about their items).

use bytes::Bytes;

use super::keys::key_indices;
use super::lookup::lookup;
use super::spec::CommandSpec;
use crate::protocol::{header_value, reply_frame_len, Args, Limits, Request};

pub(crate) use super::absent_class as class;

/// Commands the table does not know (module commands, `custom_commands`): the common shapes.
const UNKNOWN: u16 = class::NIL
    | class::EMPTY
    | class::EMPTY_STRING
    | class::ZERO
    | class::NIL_ITEMS
    | class::ZERO_ITEMS;

/// `SSCAN`/`HSCAN`/`ZSCAN` of an absent key (the same in RESP2 and RESP3).
const SCAN_DONE_REPLY: &[u8] = b"*2\r\n$1\r\n0\r\n*0\r\n";
/// `LCS … IDX` with nothing in common, in RESP2 and in RESP3.
const NO_MATCH_RESP2: &[u8] = b"*4\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n";
const NO_MATCH_RESP3: &[u8] = b"%2\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n";

/// The replies that mean "absent" for one command: a set of [`class`] bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Absence(u16);

impl Absence {
    /// The command's classes from the generated table; commands it does not know get the
    /// common shapes (nil, empty, zero, …).
    pub(crate) fn of(spec: &CommandSpec) -> Absence {
        Absence::of_name(spec.name)
    }

    /// By the table's name (`"lrange"`, `"object|encoding"`).
    pub(crate) fn of_name(name: &str) -> Absence {
        let table = super::absent_table::ABSENT;
        match table.binary_search_by(|(known, _)| (*known).cmp(name)) {
            Ok(at) => Absence(table[at].1),
            Err(_) => Absence(UNKNOWN),
        }
    }

    /// Whether `reply` is one of these classes. `at_most` bounds the keys the command named (its
    /// arguments after the name); `keys` counts them exactly, and is called only for the classes
    /// about several keys, when `at_most` allows more than one.
    pub(crate) fn matches(
        self,
        reply: &[u8],
        at_most: usize,
        keys: impl FnOnce() -> usize,
    ) -> bool {
        use class::*;
        let set = self.0;
        if set & OPAQUE != 0 || (set & CLASS_BITS & class_bits(reply)) != 0 {
            return true;
        }
        if at_most < 2 || set & (OPAQUE_WITH_KEYS | FEWER_THAN_KEYS | SOME_NIL_ITEM) == 0 {
            return false;
        }
        let below = small_int(reply).is_some_and(|n| n > 0 && (n as usize) < at_most);
        let wants = (set & OPAQUE_WITH_KEYS != 0)
            || (set & FEWER_THAN_KEYS != 0 && below)
            || (set & SOME_NIL_ITEM != 0 && reply.first() == Some(&b'*'));
        if !wants {
            return false;
        }
        let keys = keys();
        (set & OPAQUE_WITH_KEYS != 0 && keys > 1)
            || (set & FEWER_THAN_KEYS != 0
                && small_int(reply).is_some_and(|n| n > 0 && (n as usize) < keys))
            || (set & SOME_NIL_ITEM != 0 && keys > 1 && any_item(reply, is_nil))
    }
}

/// The classes [`class_bits`] tells from the reply alone (not those about several keys).
const CLASS_BITS: u16 = (1 << 12) - 1;

/// The cheap test every reply to a read from a replica takes first: false for what can never
/// mean "absent" (a non-empty string, `+OK`, a double, …), by its first bytes.
#[inline]
pub(crate) fn may_be_absent(reply: &[u8]) -> bool {
    match reply.first() {
        Some(b':' | b'*' | b'%' | b'~' | b'-' | b'_') => true,
        Some(b'$') => matches!(reply, b"$-1\r\n" | b"$0\r\n\r\n"),
        Some(b'+') => reply == b"+none\r\n",
        _ => false,
    }
}

/// Whether `reply`, a node's answer to `request` (a command's whole encoding, as forwarded),
/// says one of its keys does not exist, by the command's `Absence`. Runs `may_be_absent`
/// first (and for a reply it stops, whether the command is one whose every reply counts, by
/// its name's length and bytes), so it may be asked of any reply.
pub fn means_absent(request: &Bytes, reply: &[u8]) -> bool {
    if !may_be_absent(reply) && !is_opaque(request) {
        return false;
    }
    let Some(request) = Request::reparse(request) else {
        return false;
    };
    says_absent(lookup(request.args()), request.args(), reply)
}

/// [`means_absent`] for a command already parsed: `spec` is its table entry (`None`: a command
/// the builtin table does not know), `args` its arguments, the name first.
pub(crate) fn says_absent(spec: Option<&CommandSpec>, args: Args<'_>, reply: &[u8]) -> bool {
    let absence = spec.map_or(Absence(UNKNOWN), Absence::of);
    let at_most = args.len().saturating_sub(1);
    absence.matches(reply, at_most, || match spec {
        Some(spec) => {
            let mut keys = Vec::new();
            match key_indices(spec, args, &mut keys) {
                Ok(_) => keys.len(),
                Err(_) => at_most,
            }
        }
        None => at_most,
    })
}

/// Whether `request` is a command all of whose replies count ([`class::OPAQUE`]: scripts), by
/// its name alone: a few bytes read from the front of the request and a compare with the
/// table's short list.
fn is_opaque(request: &[u8]) -> bool {
    let Some((_, at)) = header_value(request, b'*') else {
        return false;
    };
    let Some((len, name_at)) = request.get(at..).and_then(|rest| header_value(rest, b'$')) else {
        return false;
    };
    let Some(name) = usize::try_from(len)
        .ok()
        .and_then(|len| request.get(at + name_at..at + name_at + len))
    else {
        return false;
    };
    super::absent_table::OPAQUE_COMMANDS
        .iter()
        .any(|opaque| opaque.len() == name.len() && opaque.as_bytes().eq_ignore_ascii_case(name))
}

/// The one class that describes `reply` to a read of `keys` keys, most specific first; `None`
/// for a reply no class describes (the generator then makes the command opaque).
#[cfg(test)]
pub(crate) fn class_of(reply: &[u8], keys: usize) -> Option<u16> {
    use class::*;
    let bits = class_bits(reply);
    if bits != 0 {
        return Some(bits);
    }
    if small_int(reply).is_some_and(|n| n > 0 && (n as usize) < keys) {
        return Some(FEWER_THAN_KEYS);
    }
    (reply.first() == Some(&b'*') && any_item(reply, is_nil)).then_some(SOME_NIL_ITEM)
}

/// The class `reply` belongs to by itself (0: none of those, [`CLASS_BITS`]); arrays of
/// items are walked for [`class::NIL_ITEMS`] and [`class::ZERO_ITEMS`].
fn class_bits(reply: &[u8]) -> u16 {
    use class::*;
    match reply {
        b"$-1\r\n" | b"*-1\r\n" | b"_\r\n" => NIL,
        b"*0\r\n" | b"~0\r\n" | b"%0\r\n" => EMPTY,
        b"$0\r\n\r\n" => EMPTY_STRING,
        b":0\r\n" => ZERO,
        b":-1\r\n" => MINUS_ONE,
        b":-2\r\n" => MINUS_TWO,
        b"+none\r\n" => NONE,
        SCAN_DONE_REPLY => SCAN_DONE,
        NO_MATCH_RESP2 | NO_MATCH_RESP3 => NO_MATCH,
        [b'-', ..] => ERROR,
        [b'*', ..] if all_items(reply, is_nil) => NIL_ITEMS,
        [b'*', ..] if all_items(reply, |item| item == b":0\r\n") => ZERO_ITEMS,
        _ => 0,
    }
}

fn is_nil(item: &[u8]) -> bool {
    matches!(item, b"$-1\r\n" | b"*-1\r\n" | b"_\r\n")
}

/// An integer reply's value.
fn small_int(reply: &[u8]) -> Option<i64> {
    header_value(reply, b':').map(|(n, _)| n)
}

/// True when `reply` is a non-empty array and `test` holds for every item.
fn all_items(reply: &[u8], test: impl Fn(&[u8]) -> bool) -> bool {
    let mut seen = 0;
    let all = items(reply, |item| {
        seen += 1;
        test(item)
    });
    all == Some(true) && seen > 0
}

/// True when `reply` is an array and `test` holds for some item.
fn any_item(reply: &[u8], test: impl Fn(&[u8]) -> bool) -> bool {
    items(reply, |item| !test(item)) == Some(false)
}

/// Calls `each` on the items of the array `reply` while it returns true: `Some(true)` when it
/// did for all of them, `Some(false)` when one stopped it, `None` when `reply` is not an array
/// (or malformed).
fn items(reply: &[u8], mut each: impl FnMut(&[u8]) -> bool) -> Option<bool> {
    let (count, mut at) = header_value(reply, b'*')?;
    let limits = Limits::default();
    for _ in 0..count.max(0) {
        let rest = reply.get(at..)?;
        let len = reply_frame_len(rest, &limits).ok().flatten()?;
        if !each(&rest[..len]) {
            return Some(false);
        }
        at += len;
    }
    Some(true)
}

#[cfg(test)]
#[path = "absent_tests.rs"]
mod tests;
