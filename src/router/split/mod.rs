//! Splitting a multi-key command whose keys span several slots (MGET, MSET, DEL, UNLINK, EXISTS,
//! TOUCH) into one command per slot, and merging the parts' replies in the client's key order.
//! (Sending the parts, batched per node, is `send`.)

mod send;

use std::ops::Range;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use smallvec::{smallvec, SmallVec};

use crate::cluster::key_slot;
use crate::commands::policy::SplitMerge;
use crate::commands::CommandSpec;
use crate::protocol::{reply_frame_len, write_array_len, write_bulk, Limits};
use crate::router::replies::{display_name, error_text, integer, split_header};
use crate::router::reply::{error_with_prefix, redcar_error};
use crate::router::routes::{forwarded_key_bytes, Route};

/// Keys a split holds without allocating (a 10-key MGET or MSET, say); more spill to the heap.
const INLINE_KEYS: usize = 16;

/// A planned split: one part per slot, in order of each slot's first key. Planning allocates
/// nothing below [`INLINE_KEYS`] keys (the split itself is boxed once, by the plan); the parts'
/// commands are encoded later, once, into one buffer in the order they are sent
/// ([`Split::encode`]), so each node's parts are one slice of it.
#[derive(Debug, PartialEq, Eq)]
pub struct Split {
    merge: SplitMerge,
    /// The command's name as the client sent it (for error messages).
    command: Bytes,
    pub(super) write: bool,
    /// Each key's argument index in the client's command, in the client's key order.
    key_args: SmallVec<[usize; INLINE_KEYS]>,
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
    pub route: Option<Arc<Route>>,
    pub slot: u16,
    /// This part's command in [`Split::payload`] (once encoded).
    pub bytes: Range<usize>,
    /// This part's keys in [`Split::positions`].
    keys: Range<usize>,
}

/// Builds the split of `args`, whose keys are at `keys`; an error reply (Redis's arity wording)
/// when a key lacks its value (MSET with an odd count).
pub(super) fn plan(
    spec: &CommandSpec,
    merge: SplitMerge,
    args: &[Bytes],
    keys: &[usize],
) -> Result<Split, Bytes> {
    plan_routed(spec, merge, args, keys, |_| None)
}

/// [`plan`] with keys of several routes: one part per (route, slot), keys as each route's
/// backend stores them (`strip_prefix`).
pub(super) fn plan_routed(
    spec: &CommandSpec,
    merge: SplitMerge,
    args: &[Bytes],
    keys: &[usize],
    route_of: impl Fn(&[u8]) -> Option<Arc<Route>>,
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
    for &index in keys {
        let route = route_of(&args[index]);
        let Some(key) = forwarded_key_bytes(route.as_deref(), &args[index]) else {
            return Err(redcar_error(format_args!(
                "key '{}' is only the prefix of its route (strip_prefix would leave an empty key)",
                String::from_utf8_lossy(&args[index])
            )));
        };
        let slot = key_slot(key);
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
        command: args[0].clone(),
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
    /// arguments the split was planned from; each key goes out as its part's backend stores it
    /// (`strip_prefix`).
    pub(super) fn encode(&mut self, args: &[Bytes], order: &[usize]) {
        let step = self.merge.step();
        // Headers: at most 16 bytes per argument (`$` + length + two CRLFs) and per part.
        let size = args[1..].iter().map(|a| a.len() + 16).sum::<usize>()
            + self.parts.len() * (args[0].len() + 32);
        let mut out = BytesMut::with_capacity(size);
        for &index in order {
            let part = &mut self.parts[index];
            let start = out.len();
            write_array_len(&mut out, 1 + part.keys.len() * step);
            write_bulk(&mut out, &args[0]);
            for &position in &self.positions[part.keys.clone()] {
                let arg = self.key_args[position];
                // Checked non-empty while planning.
                let key =
                    forwarded_key_bytes(part.route.as_deref(), &args[arg]).unwrap_or_default();
                write_bulk(&mut out, key);
                for value in &args[arg + 1..arg + step] {
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
    pub(super) fn merge_replies(&self, replies: &[Bytes], node: impl Fn(&Part) -> String) -> Bytes {
        let merged = match self.merge {
            SplitMerge::Values => self.merge_values(replies),
            SplitMerge::AllOk => replies
                .iter()
                .position(|r| &r[..] != b"+OK\r\n")
                .map_or(Ok(Bytes::from_static(b"+OK\r\n")), Err),
            SplitMerge::Sum => sum(replies),
        };
        merged.unwrap_or_else(|failed| self.failure(failed, &replies[failed], node))
    }

    /// MGET: each part's values put back at their keys' positions, copied once into the reply.
    /// `Err`: the index of a part whose reply is not an array of one value per key.
    fn merge_values(&self, replies: &[Bytes]) -> Result<Bytes, usize> {
        let limits = reply_limits();
        // Where each key's value is: (part, offset, length), in the client's key order.
        let mut values: SmallVec<[(usize, usize, usize); 16]> =
            smallvec![(0, 0, 0); self.key_args.len()];
        let mut size = 16;
        for (index, (part, reply)) in self.parts.iter().zip(replies).enumerate() {
            let (count, mut at) = split_header(reply, b'*').ok_or(index)?;
            if count != part.keys.len() {
                return Err(index);
            }
            for &position in &self.positions[part.keys.clone()] {
                let len = reply_frame_len(&reply[at..], &limits)
                    .ok()
                    .flatten()
                    .ok_or(index)?;
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
        let name = display_name(std::slice::from_ref(&self.command), 1);
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
fn sum(replies: &[Bytes]) -> Result<Bytes, usize> {
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
