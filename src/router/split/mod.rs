//! Splitting a multi-key command whose keys span several slots (MGET, MSET, DEL, UNLINK, EXISTS,
//! TOUCH) into one command per slot, and merging the parts' replies in the client's key order.
//! (Sending the parts, batched per node, is `send`, the [`Splitter`] room; waiting for the
//! batches' replies, `gather`.)

mod gather;
mod send;

use std::ops::Range;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use smallvec::{smallvec, SmallVec};

use crate::cluster::key_slot;
use crate::commands::policy::SplitMerge;
use crate::commands::CommandSpec;
use crate::protocol::{reply_frame_len, write_array_len, write_bulk, Args, Limits};
use crate::router::replies::{display_name, error_text, integer, split_header};
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::routes::forwarded_key_bytes;
use crate::router::Forwarder;
use crate::router::Route;

/// The split room: sends a planned [`Split`]'s parts, batched per node, through the forwarder it
/// borrows, and merges their replies (`send`).
#[derive(Clone, Copy)]
pub(in crate::router) struct Splitter<'r> {
    /// The forwarder the parts are sent through.
    fwd: &'r Forwarder,
}

impl<'r> Splitter<'r> {
    pub(in crate::router) fn new(fwd: &'r Forwarder) -> Splitter<'r> {
        Splitter { fwd }
    }
}

/// Keys a split holds without allocating (a 10-key MGET or MSET, say); more spill to the heap.
const INLINE_KEYS: usize = 16;

/// A planned split: one part per slot, in order of each slot's first key. Planning allocates
/// nothing below [`INLINE_KEYS`] keys (the split itself is boxed once, by the plan); the parts'
/// commands are encoded later, once, into one buffer in the order they are sent
/// ([`Split::encode`]), so each node's parts are one slice of it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Split {
    /// How the parts' replies become the client's reply (MGET's array, MSET's `+OK`, DEL's sum...).
    merge: SplitMerge,
    /// The command's name as the client sent it (for error messages).
    command: Bytes,
    /// Whether the command writes: a write's parts go to primaries and are never sent again once
    /// they may have run.
    pub(super) write: bool,
    /// Each key's argument index in the client's command, in the client's key order.
    key_args: SmallVec<[usize; INLINE_KEYS]>,
    /// One part per slot, in order of each slot's first key.
    pub(super) parts: SmallVec<[Part; INLINE_KEYS]>,
    /// Each part's key positions (in the client's key order), part after part.
    positions: SmallVec<[usize; INLINE_KEYS]>,
    /// Each part's command, encoded back to back in sending order; empty until encoded.
    pub(super) payload: Bytes,
}

/// The command for one slot (of one route's backend).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Part {
    /// The route whose backend serves this part; `None`: the catch-all backend.
    pub(crate) route: Option<Arc<Route>>,
    /// The slot every key of the part hashes to.
    pub(crate) slot: u16,
    /// This part's command in [`Split::payload`] (once encoded).
    pub(crate) bytes: Range<usize>,
    /// This part's keys in [`Split::positions`].
    keys: Range<usize>,
}

/// What planning found hashing a command's keys in order before it saw they span slots: the
/// first `same` keys are in slot `first`, the key after them in `next`. The split takes those
/// slots from here instead of hashing those keys again.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hashed {
    /// How many leading keys are in `first`.
    pub(crate) same: usize,
    /// The slot of the first `same` keys.
    pub(crate) first: u16,
    /// The slot of the key after them.
    pub(crate) next: u16,
}

impl Hashed {
    /// The slot of the key at `position` (in key order) whose bytes are `key`.
    #[inline]
    fn slot(hashed: Option<Hashed>, position: usize, key: &[u8]) -> u16 {
        match hashed {
            Some(h) if position < h.same => h.first,
            Some(h) if position == h.same => h.next,
            _ => key_slot(key),
        }
    }
}

/// Builds the split of `args`, whose keys are at `keys`; an error reply (Redis's arity wording)
/// when a key lacks its value (MSET with an odd count). `hashed`: the slots of the first keys
/// when the planner computed them already.
pub(super) fn plan(
    spec: &CommandSpec,
    merge: SplitMerge,
    args: Args<'_>,
    keys: &[usize],
    hashed: Option<Hashed>,
) -> Result<Split, Bytes> {
    plan_parts(spec, merge, args, keys, |_| None, hashed)
}

/// [`plan`] with keys of several routes: one part per (route, slot), keys as each route's
/// backend stores them (`strip_prefix`).
pub(super) fn plan_routed(
    spec: &CommandSpec,
    merge: SplitMerge,
    args: Args<'_>,
    keys: &[usize],
    route_of: impl Fn(&[u8]) -> Option<Arc<Route>>,
) -> Result<Split, Bytes> {
    plan_parts(spec, merge, args, keys, route_of, None)
}

/// [`plan_routed`]; `hashed` only where every key goes to the catch-all backend unchanged.
fn plan_parts(
    spec: &CommandSpec,
    merge: SplitMerge,
    args: Args<'_>,
    keys: &[usize],
    route_of: impl Fn(&[u8]) -> Option<Arc<Route>>,
    hashed: Option<Hashed>,
) -> Result<Split, Bytes> {
    let step = merge.step();
    if keys.iter().any(|&i| i + step > args.len()) || (step == 2 && args.len().is_multiple_of(2)) {
        return Err(error_with_prefix(
            "ERR ",
            format_args!("wrong number of arguments for '{}' command", spec.name),
        ));
    }
    // Each key's part, in the client's key order; meanwhile `keys.end` counts a part's keys.
    let mut parts: SmallVec<[Part; INLINE_KEYS]> = SmallVec::new();
    let mut part_of: SmallVec<[usize; INLINE_KEYS]> = SmallVec::with_capacity(keys.len());
    for (position, &index) in keys.iter().enumerate() {
        let route = route_of(&args[index]);
        let Some(key) = forwarded_key_bytes(route.as_deref(), &args[index]) else {
            return Err(redcar_error(format_args!(
                "key '{}' is only the prefix of its route (strip_prefix would leave an empty key)",
                String::from_utf8_lossy(&args[index])
            )));
        };
        let slot = Hashed::slot(hashed, position, key);
        let same = |p: &Part| p.slot == slot && same_route(&p.route, &route);
        let part = match parts.iter().position(same) {
            Some(part) => part,
            None => {
                parts.push(Part {
                    route,
                    slot,
                    bytes: 0..0,
                    keys: 0..0,
                });
                parts.len() - 1
            }
        };
        parts[part].keys.end += 1;
        part_of.push(part);
    }
    // Counting sort: each part's key positions become one contiguous run of `positions`.
    let mut next = 0;
    for part in &mut parts {
        let count = part.keys.end;
        part.keys = next..next;
        next += count;
    }
    let mut positions: SmallVec<[usize; INLINE_KEYS]> = smallvec![0; keys.len()];
    for (position, &part) in part_of.iter().enumerate() {
        let run = &mut parts[part].keys;
        positions[run.end] = position;
        run.end += 1;
    }
    Ok(Split {
        merge,
        command: args.bytes(0).unwrap_or_default(),
        write: spec.flags & crate::commands::spec::flags::WRITE != 0,
        key_args: SmallVec::from_slice(keys),
        parts,
        positions,
        payload: Bytes::new(),
    })
}

/// For cutting replies the node connection framed already (under the configured limits): only
/// the bulk size is left unbounded here.
pub(super) fn reply_limits() -> Limits {
    Limits {
        max_bulk_len: usize::MAX,
        ..Limits::default()
    }
}

/// The length of the reply frame at the start of `replies`, which a node connection framed
/// already; `None` if they end before it does. The replies parts get (`+OK`, an array of bulk
/// strings, a count) are measured here directly; anything else by the general scan.
pub(super) fn part_reply_len(replies: &[u8]) -> Option<usize> {
    if replies.starts_with(b"+OK\r\n") {
        return Some(5);
    }
    if let Some((count, mut at)) = small_header(replies, b'*') {
        for _ in 0..count {
            at += value_len(replies.get(at..)?)?;
        }
        return Some(at);
    }
    reply_frame_len(replies, &reply_limits()).ok().flatten()
}

/// The length of the value at the start of `reply` (an MGET element): a bulk string or nil
/// measured directly, anything else by the general scan.
fn value_len(reply: &[u8]) -> Option<usize> {
    if let Some((len, header)) = small_header(reply, b'$') {
        let end = header + len + 2;
        if reply.get(end - 2..end) == Some(&b"\r\n"[..]) {
            return Some(end);
        }
    } else if reply.starts_with(b"$-1\r\n") {
        return Some(5);
    }
    reply_frame_len(reply, &reply_limits()).ok().flatten()
}

/// `*n\r\n` or `$n\r\n` (`kind`) at the start of `reply` with `n` of 1 to 9 digits: `n` and
/// the header's length; `None` for anything else (which the general scan then reads).
#[inline]
fn small_header(reply: &[u8], kind: u8) -> Option<(usize, usize)> {
    if reply.first() != Some(&kind) {
        return None;
    }
    let mut n = 0;
    for (i, &byte) in reply.iter().enumerate().skip(1).take(10) {
        match byte {
            b'0'..=b'9' if i < 10 => n = n * 10 + usize::from(byte - b'0'),
            b'\r' if i > 1 => return (reply.get(i + 1) == Some(&b'\n')).then_some((n, i + 2)),
            _ => return None,
        }
    }
    None
}

/// Where argument `arg`'s payload ends in `raw` (the encoding `args` are slices of); `None`
/// when it is not a slice of it (an empty argument never is).
fn end_in(raw: &[u8], arg: &[u8]) -> Option<usize> {
    let offset = (arg.as_ptr() as usize).checked_sub(raw.as_ptr() as usize)?;
    let end = offset.checked_add(arg.len())?;
    (!arg.is_empty() && end.checked_add(2)? <= raw.len()).then_some(end)
}

/// The frames of arguments `arg..arg + step` (a key, and its value for MSET) in `raw`, headers
/// included: from the end of the argument before them to the end of their last one.
fn frames(raw: &[u8], args: Args<'_>, arg: usize, step: usize) -> Option<Range<usize>> {
    let start = end_in(raw, &args[arg.checked_sub(1)?])? + 2;
    let end = end_in(raw, &args[arg + step - 1])? + 2;
    (start < end && raw[start] == b'$').then_some(start..end)
}

/// The command name's frame (`$4\r\nMSET\r\n`) in `raw`: after the array header.
fn name_frame(raw: &[u8], args: Args<'_>) -> Option<Range<usize>> {
    let end = end_in(raw, &args[0])? + 2;
    let start = raw.iter().position(|&b| b == b'\n')? + 1;
    (raw[0] == b'*' && start < end && raw[start] == b'$').then_some(start..end)
}

fn same_route(a: &Option<Arc<Route>>, b: &Option<Arc<Route>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl Split {
    /// Encodes every part's command (the command name followed by each key of the part, and
    /// its value for MSET) into one buffer, parts in `order` (each part once), and sets each
    /// part's `bytes`: consecutive parts in `order` are adjacent in the buffer. `args` are the
    /// arguments the split was planned from, and `raw` the request they are slices of (its
    /// RESP encoding; empty when they are not): a key (with its value) that goes out as the
    /// client sent it is copied from there as it stands, headers included, in one piece; a key
    /// its backend stores differently (`strip_prefix`) is encoded afresh.
    pub(super) fn encode(&mut self, args: Args<'_>, raw: &[u8], order: &[usize]) {
        let step = self.merge.step();
        let name = name_frame(raw, args);
        // The client's frames, or at most 16 bytes of header per argument; plus per part its
        // array header (at most 24 bytes) and the command name.
        let size = if raw.is_empty() {
            args.skip(1).iter().map(|a| a.len() + 16).sum::<usize>()
        } else {
            raw.len()
        } + self.parts.len() * (args[0].len() + 40);
        let mut out = BytesMut::with_capacity(size);
        for &index in order {
            let part = &mut self.parts[index];
            let start = out.len();
            let count = 1 + part.keys.len() * step;
            match u8::try_from(count) {
                Ok(digit @ 0..=9) => out.extend_from_slice(&[b'*', b'0' + digit, b'\r', b'\n']),
                _ => write_array_len(&mut out, count),
            }
            match &name {
                Some(frame) => out.extend_from_slice(&raw[frame.clone()]),
                None => write_bulk(&mut out, &args[0]),
            }
            for &position in &self.positions[part.keys.clone()] {
                let arg = self.key_args[position];
                // Checked non-empty while planning.
                let key =
                    forwarded_key_bytes(part.route.as_deref(), &args[arg]).unwrap_or_default();
                let unchanged = key.as_ptr() == args[arg].as_ptr() && key.len() == args[arg].len();
                if let Some(span) = unchanged.then(|| frames(raw, args, arg, step)).flatten() {
                    out.extend_from_slice(&raw[span]);
                    continue;
                }
                write_bulk(&mut out, key);
                for value in args.skip(arg + 1).take(step - 1) {
                    write_bulk(&mut out, value);
                }
            }
            part.bytes = start..out.len();
        }
        self.payload = out.freeze();
    }

    /// Each part's backend (`None`: catch-all), slot and key positions (tests).
    #[cfg(test)]
    pub(super) fn parts_summary(&self) -> Vec<(Option<String>, u16, Vec<usize>)> {
        self.parts
            .iter()
            .map(|p| {
                let backend = p.route.as_ref().map(|r| r.target.backend.to_string());
                (backend, p.slot, self.positions[p.keys.clone()].to_vec())
            })
            .collect()
    }

    /// Ties every part to `route` (all keys of one route).
    pub(super) fn route_all(&mut self, route: &Arc<Route>) {
        for part in &mut self.parts {
            part.route = Some(route.clone());
        }
    }

    /// Part `index`'s command.
    pub(super) fn part_payload(&self, index: usize) -> Bytes {
        // Parts are encoded by `encode` once their nodes are known; an unencoded part would go
        // out as nothing, and its reply would never come.
        debug_assert!(
            !self.parts[index].bytes.is_empty(),
            "split part {index} sent before it was encoded"
        );
        self.payload.slice(self.parts[index].bytes.clone())
    }

    /// The client's reply from the parts' replies (same order as `parts`); `node` names the
    /// node of a failed part in the error.
    pub(super) fn merge_replies(&self, replies: &[&[u8]], node: impl Fn(&Part) -> String) -> Bytes {
        let merged = match self.merge {
            SplitMerge::Values => self.merge_values(replies),
            SplitMerge::AllOk => replies
                .iter()
                .position(|r| *r != b"+OK\r\n")
                .map_or(Ok(Bytes::from_static(b"+OK\r\n")), Err),
            SplitMerge::Sum => sum(replies),
        };
        merged.unwrap_or_else(|failed| self.failure(failed, replies[failed], node))
    }

    /// MGET: each part's values put back at their keys' positions, copied once into the reply.
    /// `Err`: the index of a part whose reply is not an array of one value per key.
    fn merge_values(&self, replies: &[&[u8]]) -> Result<Bytes, usize> {
        // Where each key's value is: (part, offset, length), in the client's key order.
        let mut values: SmallVec<[(usize, usize, usize); 16]> =
            smallvec![(0, 0, 0); self.key_args.len()];
        let mut size = 16;
        for (index, (part, reply)) in self.parts.iter().zip(replies).enumerate() {
            let (count, mut at) = small_header(reply, b'*')
                .or_else(|| split_header(reply, b'*'))
                .ok_or(index)?;
            if count != part.keys.len() {
                return Err(index);
            }
            for &position in &self.positions[part.keys.clone()] {
                let len = value_len(&reply[at..]).ok_or(index)?;
                values[position] = (index, at, len);
                at += len;
                size += len;
            }
            if at != reply.len() {
                return Err(index);
            }
        }
        let mut out = BytesMut::with_capacity(size);
        write_array_len(&mut out, self.key_args.len());
        for &(index, at, len) in &values {
            out.extend_from_slice(&replies[index][at..at + len]);
        }
        Ok(out.freeze())
    }

    /// `-ERR redcar: <CMD> failed for the keys in slot <n> (<node>): <why>[; consequence]`.
    fn failure(&self, failed: usize, reply: &[u8], node: impl Fn(&Part) -> String) -> Bytes {
        let why = error_text(reply).unwrap_or_else(|| "unexpected reply".to_string());
        let name = display_name([&self.command[..]], 1);
        let consequence = match name.as_str() {
            "MSET" => "; some keys may have been written",
            "DEL" | "UNLINK" => "; keys in other slots may have been deleted",
            _ => "",
        };
        let part = &self.parts[failed];
        redcar_error(format_args!(
            "{name} failed for the keys in slot {} ({}): {why}{consequence}",
            part.slot,
            node(part)
        ))
    }
}

/// DEL, UNLINK, EXISTS, TOUCH: the sum of the parts' counts (`Err`: the index of a part whose
/// reply is not a count).
fn sum(replies: &[&[u8]]) -> Result<Bytes, usize> {
    let mut total: i64 = 0;
    for (index, reply) in replies.iter().enumerate() {
        total = total.saturating_add(integer(reply).ok_or(index)?);
    }
    let mut out = BytesMut::new();
    crate::protocol::write_integer(&mut out, total);
    Ok(out.freeze())
}

#[cfg(test)]
mod tests;
