//! Splitting a multi-key command whose keys span several slots (MGET, MSET, DEL, UNLINK, EXISTS,
//! TOUCH) into one command per slot, and merging the parts' replies in the client's key order.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::call::Call;
use super::replies::{array_items, display_name, encode_array, error_text, integer};
use super::reply::{error_with_prefix, redcar_error};
use super::routes::{forwarded_key, Route};
use super::Router;
use crate::cluster::key_slot;
use crate::commands::policy::SplitMerge;
use crate::commands::CommandSpec;
use crate::protocol::{write_array_len, write_bulk};

/// A planned split: one part per slot, in order of each slot's first key.
#[derive(Debug, PartialEq, Eq)]
pub struct Split {
    merge: SplitMerge,
    /// `MGET`, `DEL`, ...: for error messages.
    name: String,
    write: bool,
    /// Keys in the client's command.
    keys: usize,
    parts: Vec<Part>,
}

/// The command for one slot (of one route's backend).
#[derive(Debug, PartialEq, Eq)]
struct Part {
    /// The route whose backend serves this part; `None`: the catch-all backend.
    route: Option<Arc<Route>>,
    slot: u16,
    payload: Bytes,
    /// Position (in the client's key order) of each key of this part, in the part's order.
    positions: Vec<usize>,
}

/// What one part produced, and where it went (for error messages).
pub(super) struct PartReply {
    slot: u16,
    addr: String,
    reply: Bytes,
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
    let mut groups: Vec<Group> = Vec::new();
    for (position, &index) in keys.iter().enumerate() {
        let route = route_of(&args[index]);
        let Some(key) = forwarded_key(route.as_deref(), &args[index]) else {
            return Err(redcar_error(format_args!(
                "key '{}' is only the prefix of its route (strip_prefix would leave an empty key)",
                String::from_utf8_lossy(&args[index])
            )));
        };
        let slot = key_slot(&key);
        let same = |g: &&mut Group| g.slot == slot && same_route(&g.route, &route);
        match groups.iter_mut().find(same) {
            Some(group) => group.keys.push((position, key)),
            None => groups.push(Group {
                route,
                slot,
                keys: vec![(position, key)],
            }),
        }
    }
    let parts = groups
        .into_iter()
        .map(|group| Part {
            payload: encode_part(args, keys, &group.keys, step),
            positions: group.keys.iter().map(|(p, _)| *p).collect(),
            route: group.route,
            slot: group.slot,
        })
        .collect();
    Ok(Split {
        merge,
        name: display_name(args, 1),
        write: spec.flags & crate::commands::spec::flags::WRITE != 0,
        keys: keys.len(),
        parts,
    })
}

/// Keys (position in the client's order, key as forwarded) bound for one (route, slot).
struct Group {
    route: Option<Arc<Route>>,
    slot: u16,
    keys: Vec<(usize, Bytes)>,
}

fn same_route(a: &Option<Arc<Route>>, b: &Option<Arc<Route>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

/// The command name followed by each key of the part (and its value for MSET).
fn encode_part(args: &[Bytes], keys: &[usize], part: &[(usize, Bytes)], step: usize) -> Bytes {
    let mut out = BytesMut::new();
    write_array_len(&mut out, 1 + part.len() * step);
    write_bulk(&mut out, &args[0]);
    for (position, key) in part {
        let index = keys[*position];
        write_bulk(&mut out, key);
        for arg in &args[index + 1..index + step] {
            write_bulk(&mut out, arg);
        }
    }
    out.freeze()
}

impl Router {
    /// Queues every part now (so they keep their place among the client's commands and parts for
    /// one node pipeline on its connection), then merges the replies.
    pub(super) fn start_split(&self, split: Split, lane: usize) -> Call<'_> {
        let mut calls = Vec::with_capacity(split.parts.len());
        for part in &split.parts {
            let target = part.route.as_ref().map(|r| r.target.clone());
            let state = target.as_ref().map_or(&self.cluster, |t| &t.state);
            let mut addr = state
                .topology()
                .as_ref()
                .and_then(|t| t.shard(part.slot))
                .map_or_else(|| "no owner".to_string(), |s| s.primary.addr().to_string());
            if let Some(target) = &target {
                addr = format!("backend {}, {addr}", target.backend);
            }
            let payload = part.payload.clone();
            let call = self.forward_to(target, payload, Some(part.slot), split.write, lane);
            if let Some(route) = &part.route {
                self.mirror(
                    route,
                    part.payload.clone(),
                    Some(part.slot),
                    split.write,
                    lane,
                );
            }
            calls.push((part.slot, addr, call));
        }
        Call::slow(async move {
            let mut replies = Vec::with_capacity(calls.len());
            for (slot, addr, call) in calls {
                let reply = call.settle().await;
                replies.push(PartReply { slot, addr, reply });
            }
            split.merge_replies(&replies)
        })
    }
}

impl Split {
    /// Each part's backend (`None`: catch-all), slot and key positions (tests).
    #[cfg(test)]
    pub(super) fn parts_summary(&self) -> Vec<(Option<String>, u16, Vec<usize>)> {
        self.parts
            .iter()
            .map(|p| {
                let backend = p.route.as_ref().map(|r| r.target.backend.to_string());
                (backend, p.slot, p.positions.clone())
            })
            .collect()
    }

    /// Ties every part to `route` (all keys of one route).
    pub(super) fn route_all(&mut self, route: &Arc<Route>) {
        for part in &mut self.parts {
            part.route = Some(route.clone());
        }
    }

    /// The client's reply from the parts' replies (same order as `parts`).
    pub(super) fn merge_replies(&self, replies: &[PartReply]) -> Bytes {
        let merged = match self.merge {
            SplitMerge::Values => self.merge_values(replies),
            SplitMerge::AllOk => replies
                .iter()
                .find(|r| &r.reply[..] != b"+OK\r\n")
                .map_or(Ok(Bytes::from_static(b"+OK\r\n")), Err),
            SplitMerge::Sum => sum(replies),
        };
        merged.unwrap_or_else(|failed| self.failure(failed))
    }

    /// MGET: each part's values put back at their keys' positions.
    fn merge_values<'a>(&self, replies: &'a [PartReply]) -> Result<Bytes, &'a PartReply> {
        let mut values: Vec<Bytes> = vec![Bytes::new(); self.keys];
        for (part, reply) in self.parts.iter().zip(replies) {
            let items = array_items(&reply.reply).ok_or(reply)?;
            if items.len() != part.positions.len() {
                return Err(reply);
            }
            for (&position, item) in part.positions.iter().zip(items) {
                values[position] = item;
            }
        }
        Ok(encode_array(values.iter().map(|v| &v[..])))
    }

    /// `-ERR redcar: <CMD> failed for the keys in slot <n> (<node>): <why>[; consequence]`.
    fn failure(&self, failed: &PartReply) -> Bytes {
        let why = error_text(&failed.reply).unwrap_or_else(|| "unexpected reply".to_string());
        let consequence = match self.name.as_str() {
            "MSET" => "; some keys may have been written",
            "DEL" | "UNLINK" => "; keys in other slots may have been deleted",
            _ => "",
        };
        redcar_error(format_args!(
            "{} failed for the keys in slot {} ({}): {why}{consequence}",
            self.name, failed.slot, failed.addr
        ))
    }
}

/// DEL, UNLINK, EXISTS, TOUCH: the sum of the parts' counts.
fn sum(replies: &[PartReply]) -> Result<Bytes, &PartReply> {
    let mut total: i64 = 0;
    for reply in replies {
        total = total.saturating_add(integer(&reply.reply).ok_or(reply)?);
    }
    let mut out = BytesMut::new();
    crate::protocol::write_integer(&mut out, total);
    Ok(out.freeze())
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;
