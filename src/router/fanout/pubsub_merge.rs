//! PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB over every primary: each node
//! knows only the subscriptions of its own clients, so the answers are merged.
//!
//! The merge follows the subcommand: NUMPAT sums one integer per node, NUMSUB sums the counts per
//! channel (each node lists the channels in the order asked, so the lists must match exactly),
//! CHANNELS and SHARDCHANNELS take the union in first-seen order. Any part that is not the shape
//! Redis sends becomes an error naming its node rather than a silently short answer. Counts
//! saturate instead of overflowing.

use std::collections::HashSet;

use bytes::{Bytes, BytesMut};

use super::gather::{failure, NodeReply};
use crate::protocol::write_integer;
use crate::router::replies::{array_items, encode_array, integer};

/// `name` is the display name (`PUBSUB NUMSUB`), which says how to merge.
///
/// `replies` are the parts that reached a node; failed parts were turned into an error by the
/// caller (`merge`) before this runs, so only well-formed bodies are expected here.
pub(super) fn merge_pubsub(name: &str, replies: &[NodeReply]) -> Result<Bytes, Bytes> {
    let bodies = replies
        .iter()
        .filter_map(|r| Some((r, r.reply.as_ref().ok()?)));
    if name.ends_with("NUMPAT") {
        let mut total: i64 = 0;
        for (part, body) in bodies {
            total = total.saturating_add(integer(body).ok_or_else(|| failure(name, part, ""))?);
        }
        let mut out = BytesMut::new();
        write_integer(&mut out, total);
        return Ok(out.freeze());
    }
    if name.ends_with("NUMSUB") {
        return sum_counts(name, bodies);
    }
    // CHANNELS / SHARDCHANNELS: the union, in first-seen order.
    let mut seen = HashSet::new();
    let mut all = Vec::new();
    for (part, body) in bodies {
        for channel in array_items(body).ok_or_else(|| failure(name, part, ""))? {
            if seen.insert(channel.clone()) {
                all.push(channel);
            }
        }
    }
    Ok(encode_array(all.iter().map(|c| &c[..])))
}

/// NUMSUB: `[channel, count, …]` in the order asked, the same from every node; counts summed.
///
/// Fails (naming the node) when a node lists different channels, or a different count of them, than
/// the first node did: the counts could not be matched up.
fn sum_counts<'a>(
    name: &str,
    bodies: impl Iterator<Item = (&'a NodeReply, &'a Bytes)>,
) -> Result<Bytes, Bytes> {
    let mut merged: Option<(Vec<Bytes>, Vec<i64>)> = None;
    for (part, body) in bodies {
        let bad = || failure(name, part, "");
        let items = array_items(body).ok_or_else(bad)?;
        let channels: Vec<Bytes> = items.iter().step_by(2).cloned().collect();
        let counts = items
            .iter()
            .skip(1)
            .step_by(2)
            .map(|n| integer(n))
            .collect::<Option<Vec<i64>>>()
            .ok_or_else(bad)?;
        if channels.len() != counts.len() {
            return Err(bad());
        }
        merged = Some(match merged {
            None => (channels, counts),
            Some((first, so_far)) if first == channels => {
                let sums = so_far.iter().zip(&counts).map(|(a, b)| a + b).collect();
                (first, sums)
            }
            Some(_) => return Err(bad()),
        });
    }
    let (channels, counts) = merged.unwrap_or_default();
    let mut out = BytesMut::new();
    crate::protocol::write_array_len(&mut out, channels.len() * 2);
    for (channel, count) in channels.iter().zip(counts) {
        out.extend_from_slice(channel);
        write_integer(&mut out, count);
    }
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn part(reply: &'static [u8]) -> NodeReply {
        NodeReply {
            addr: Arc::from("127.0.0.1:1"),
            reply: Ok(Bytes::from_static(reply)),
        }
    }

    #[test]
    fn channels_are_deduplicated_and_counts_summed() {
        let channels = [
            part(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
            part(b"*2\r\n$1\r\nb\r\n$1\r\nc\r\n"),
        ];
        assert_eq!(
            merge_pubsub("PUBSUB CHANNELS", &channels).expect("merged"),
            Bytes::from_static(b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n")
        );
        let numsub = [
            part(b"*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n:0\r\n"),
            part(b"*4\r\n$1\r\na\r\n:2\r\n$1\r\nb\r\n:5\r\n"),
        ];
        assert_eq!(
            merge_pubsub("PUBSUB NUMSUB", &numsub).expect("merged"),
            Bytes::from_static(b"*4\r\n$1\r\na\r\n:3\r\n$1\r\nb\r\n:5\r\n")
        );
        let numpat = [part(b":1\r\n"), part(b":2\r\n")];
        assert_eq!(
            merge_pubsub("PUBSUB NUMPAT", &numpat).expect("merged"),
            Bytes::from_static(b":3\r\n")
        );
    }

    #[test]
    fn malformed_parts_are_errors_naming_the_node() {
        let bad = [part(b"+OK\r\n")];
        let error = merge_pubsub("PUBSUB NUMSUB", &bad).expect_err("malformed");
        assert!(error.starts_with(b"-ERR redcar: PUBSUB NUMSUB failed on 127.0.0.1:1"));
    }
}
