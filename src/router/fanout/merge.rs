//! Merging the per-primary replies of a fan-out command into the client's reply; any failed part
//! becomes an error naming its node.
//!
//! The first failed part wins: its node's error, or the transport failure, is what the client sees,
//! so one bad primary cannot hide behind the others' good answers. Writes that go to every primary
//! (FLUSH, SCRIPT LOAD, broadcasts) say in the error that other primaries may already have applied
//! them, because nothing here can undo that. SCAN, RANDOMKEY, SLOWLOG and INFO have merges of their
//! own and never reach [`merge`].

use bytes::{Bytes, BytesMut};

use super::gather::{failure, NodeReply};
use super::scan_cursor::ScanCursor;
use crate::commands::policy::FanOut;
use crate::protocol::write_integer;
use crate::router::replies::{array_items, bulk, encode_array, encode_bulk, integer};
use crate::router::reply::redcar_error;

/// The client's reply for `kind` from every primary's reply.
///
/// `name` is the display name used in errors (`SCRIPT LOAD`, `PUBSUB NUMSUB`); `replies` holds one
/// entry per primary asked, in the order they were asked. Never fails itself: an unmergeable set of
/// replies becomes an error reply.
pub(super) fn merge(kind: FanOut, name: &str, replies: &[NodeReply]) -> Bytes {
    let consequence = match kind {
        FanOut::Flush => "; other primaries may have been flushed",
        FanOut::ScriptLoad | FanOut::Broadcast => "; other primaries may have applied it",
        _ => "",
    };
    let failed = replies
        .iter()
        .find(|r| r.reply.as_ref().map_or(true, |b| b.starts_with(b"-")));
    if let Some(failed) = failed {
        return failure(name, failed, consequence);
    }
    let merged = match kind {
        FanOut::DbSize => sum(replies),
        FanOut::Keys => concat(replies),
        FanOut::ScriptExists => all_have(replies),
        FanOut::Flush | FanOut::ScriptLoad | FanOut::Broadcast => agree(name, replies),
        FanOut::PubSub => super::pubsub_merge::merge_pubsub(name, replies),
        FanOut::Scan | FanOut::RandomKey | FanOut::Slowlog | FanOut::Info => {
            Err(redcar_error("not merged here (see its own module)"))
        }
    };
    merged.unwrap_or_else(|reply| reply)
}

/// The replies of parts that all succeeded (checked by [`merge`]).
fn bodies(replies: &[NodeReply]) -> impl Iterator<Item = (&NodeReply, &Bytes)> {
    replies
        .iter()
        .filter_map(|r| r.reply.as_ref().ok().map(|b| (r, b)))
}

/// An error naming the node whose reply was not the shape the merge expects.
fn unexpected(name: &str, part: &NodeReply) -> Bytes {
    failure(name, part, "")
}

/// DBSIZE: the sum of the integers.
fn sum(replies: &[NodeReply]) -> Result<Bytes, Bytes> {
    let mut total: i64 = 0;
    for (part, body) in bodies(replies) {
        let n = integer(body).ok_or_else(|| unexpected("DBSIZE", part))?;
        total = total.saturating_add(n);
    }
    let mut out = BytesMut::new();
    write_integer(&mut out, total);
    Ok(out.freeze())
}

/// KEYS: every array's elements, primary after primary.
fn concat(replies: &[NodeReply]) -> Result<Bytes, Bytes> {
    let mut all = Vec::new();
    for (part, body) in bodies(replies) {
        all.extend(array_items(body).ok_or_else(|| unexpected("KEYS", part))?);
    }
    Ok(encode_array(all.iter().map(|k| &k[..])))
}

/// SCRIPT EXISTS: per sha1, 1 only when every primary says 1.
fn all_have(replies: &[NodeReply]) -> Result<Bytes, Bytes> {
    let mut merged: Option<Vec<bool>> = None;
    for (part, body) in bodies(replies) {
        let bad = || unexpected("SCRIPT EXISTS", part);
        let flags = array_items(body)
            .ok_or_else(bad)?
            .iter()
            .map(|item| integer(item).map(|n| n == 1))
            .collect::<Option<Vec<bool>>>()
            .ok_or_else(bad)?;
        merged = Some(match merged {
            None => flags,
            Some(so_far) if so_far.len() == flags.len() => {
                so_far.iter().zip(&flags).map(|(a, b)| *a && *b).collect()
            }
            Some(_) => return Err(bad()),
        });
    }
    let flags = merged.unwrap_or_default();
    let items: Vec<&[u8]> = flags
        .iter()
        .map(|&has| if has { &b":1\r\n"[..] } else { &b":0\r\n"[..] })
        .collect();
    Ok(encode_array(items.into_iter()))
}

/// The reply every primary gave, or an error naming the first that differs.
fn agree(name: &str, replies: &[NodeReply]) -> Result<Bytes, Bytes> {
    agree_among(name, "primaries", replies)
}

/// The reply every node asked gave, or an error naming the first that differs from the first.
pub(super) fn agree_among(name: &str, nodes: &str, replies: &[NodeReply]) -> Result<Bytes, Bytes> {
    let mut all = bodies(replies);
    let Some((first_part, first)) = all.next() else {
        return Err(redcar_error(format_args!("{name}: no node replied")));
    };
    match all.find(|(_, body)| body != &first) {
        None => Ok(first.clone()),
        Some((other, body)) => Err(redcar_error(format_args!(
            "{name}: {nodes} replied differently ({}: {}, {}: {})",
            first_part.addr,
            String::from_utf8_lossy(first).trim_end(),
            other.addr,
            String::from_utf8_lossy(body).trim_end()
        ))),
    }
}

/// SCAN: the node's `[cursor, keys]` with the node cursor replaced by the client cursor.
///
/// `at` is the client's cursor as decoded and `shards` the number of primaries it was made for.
/// When the node's cursor comes back 0 the scan moves to the next primary; the last primary's 0
/// ends the scan with client cursor 0. A node cursor too large to fit the encoding is an error
/// rather than a wrapped value, which would restart the scan somewhere else.
pub(super) fn scan_reply(at: ScanCursor, shards: usize, part: &NodeReply) -> Bytes {
    let bad = || failure("SCAN", part, "");
    let Ok(reply) = &part.reply else {
        return bad();
    };
    let Some(items) = array_items(reply).filter(|items| items.len() == 2) else {
        return bad();
    };
    let node_next = bulk(&items[0]).and_then(|c| std::str::from_utf8(&c).ok()?.parse::<u64>().ok());
    let Some(node_next) = node_next else {
        return bad();
    };
    let Some(next) = at.next(node_next, shards) else {
        return redcar_error(format_args!(
            "SCAN cursor {node_next} from {} is too large to encode",
            part.addr
        ));
    };
    let cursor = encode_bulk(next.to_string().as_bytes());
    encode_array([&cursor[..], &items[1][..]].into_iter())
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
