//! `SLOWLOG GET | LEN | RESET` through redcar: every primary's slow log merged with redcar's own,
//! so one command shows both where the nodes were slow and where the proxy path was.
//!
//! redcar's entries look like Redis's (`id`, `timestamp`, `duration µs`, `args`, `client`,
//! `client name`); their arguments are the command and its first key, and their client name is
//! `redcar@<node>` so they can be told apart and traced to the node.
//!
//! What holds: `SLOWLOG RESET` clears every primary's log and redcar's own; `LEN` is the sum of all
//! of them; `GET count` merges all entries newest first and cuts to `count` (10 when absent,
//! everything when negative, as in Redis). A node that fails or answers an error fails the whole
//! command with its address, since a merged log missing one node would look complete.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::gather::{collect, send_to_all, NodeReply};
use crate::metrics::SlowEntry;
use crate::protocol::{Frame, Limits, Request};
use crate::router::reply::redcar_error;
use crate::router::{Call, Fanout};
use crate::upstream::Lane;
use crate::upstream::Node;

/// Redis's default number of entries for `SLOWLOG GET` without a count.
const DEFAULT_COUNT: usize = 10;

impl<'r> Fanout<'r> {
    /// Served for every SLOWLOG subcommand the command table lets through (GET, LEN, RESET); a
    /// count that is not an integer is refused before any node is asked.
    pub(super) fn start_slowlog(
        self,
        request: &Request,
        primaries: &[Arc<Node>],
        lane: Lane,
    ) -> Call<'r> {
        let args = request.args();
        let sub = args
            .get(1)
            .map(|a| a.to_ascii_lowercase())
            .unwrap_or_default();
        let count = match args.get(2).map(|c| {
            std::str::from_utf8(c)
                .ok()
                .and_then(|c| c.parse::<i64>().ok())
        }) {
            None => Some(DEFAULT_COUNT),
            Some(Some(n)) if n < 0 => Some(usize::MAX),
            Some(Some(n)) => usize::try_from(n).ok(),
            Some(None) => None,
        };
        let Some(count) = count else {
            return Call::ready(redcar_error("SLOWLOG GET: count must be an integer"));
        };
        let sent = send_to_all(primaries.iter(), request, lane);
        let op_timeout = self.fwd.core.op_timeout();
        Call::slow(async move {
            let mut frames = Vec::with_capacity(sent.len());
            for NodeReply { addr, reply } in collect(sent, op_timeout).await {
                let parsed = reply.and_then(|bytes| {
                    Frame::from_bytes(bytes, &Limits::default()).map_err(|e| e.to_string())
                });
                match parsed {
                    Ok(Frame::Error(e)) => {
                        return redcar_error(format_args!(
                            "SLOWLOG failed on {addr}: {}",
                            String::from_utf8_lossy(&e)
                        ))
                    }
                    Ok(frame) => frames.push(frame),
                    Err(why) => {
                        return redcar_error(format_args!("SLOWLOG failed on {addr}: {why}"))
                    }
                }
            }
            let log = &self.fwd.core.metrics.slowlog;
            match sub.as_slice() {
                b"len" => len_reply(&frames, log.len()),
                b"reset" => {
                    log.reset();
                    Frame::Simple(Bytes::from_static(b"OK")).to_bytes()
                }
                _ => get_reply(frames, &log.entries(), count),
            }
        })
    }
}

/// `SLOWLOG LEN`: every node's length plus redcar's own (`own`); a node's non-integer reply counts
/// as 0.
fn len_reply(frames: &[Frame], own: usize) -> Bytes {
    let nodes: i64 = frames.iter().filter_map(Frame::as_integer).sum();
    Frame::Integer(nodes + own as i64).to_bytes()
}

/// All entries, newest first by timestamp, cut to `count`.
fn get_reply(frames: Vec<Frame>, own: &[SlowEntry], count: usize) -> Bytes {
    let mut entries: Vec<Frame> = frames
        .into_iter()
        .filter_map(|frame| match frame {
            Frame::Array(items) => Some(items),
            _ => None,
        })
        .flatten()
        .chain(own.iter().map(entry_frame))
        .collect();
    entries.sort_by_key(|entry| std::cmp::Reverse(timestamp(entry)));
    entries.truncate(count);
    let mut out = BytesMut::new();
    Frame::Array(entries).encode(&mut out);
    out.freeze()
}

/// An entry's Unix timestamp (its second field), or 0 for an entry not in Redis's shape, which then
/// sorts last.
fn timestamp(entry: &Frame) -> i64 {
    entry
        .as_array()
        .and_then(|fields| fields.get(1))
        .and_then(Frame::as_integer)
        .unwrap_or(0)
}

/// A redcar slow-log entry in Redis's shape.
fn entry_frame(entry: &SlowEntry) -> Frame {
    let bulk = |text: &str| Frame::Bulk(Bytes::from(text.to_string()));
    let mut args = vec![bulk(&entry.command.replace('|', " ").to_ascii_uppercase())];
    if !entry.key.is_empty() {
        args.push(bulk(&entry.key));
    }
    Frame::Array(vec![
        Frame::Integer(entry.id as i64),
        Frame::Integer(entry.time as i64),
        Frame::Integer(entry.duration_us as i64),
        Frame::Array(args),
        bulk(&entry.client),
        bulk(&format!("redcar@{}", entry.node)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node_entry(id: i64, time: i64) -> Frame {
        Frame::Array(vec![
            Frame::Integer(id),
            Frame::Integer(time),
            Frame::Integer(15000),
            Frame::Array(vec![Frame::Bulk(Bytes::from_static(b"KEYS"))]),
            Frame::Bulk(Bytes::from_static(b"127.0.0.1:5000")),
            Frame::Bulk(Bytes::new()),
        ])
    }

    fn own(time: u64) -> SlowEntry {
        SlowEntry {
            id: 7,
            time,
            duration_us: 12000,
            command: "get".to_string(),
            key: "user:1".to_string(),
            node: "127.0.0.1:7000".to_string(),
            client: "127.0.0.1:5555".to_string(),
        }
    }

    #[test]
    fn get_merges_newest_first_and_cuts_to_count() {
        let nodes = vec![
            Frame::Array(vec![node_entry(1, 100), node_entry(0, 50)]),
            Frame::Array(vec![node_entry(4, 300)]),
        ];
        let merged = get_reply(nodes, &[own(200)], 3);
        let frame = Frame::from_bytes(merged, &Limits::default()).expect("valid reply");
        let times: Vec<i64> = frame
            .as_array()
            .expect("array")
            .iter()
            .map(timestamp)
            .collect();
        assert_eq!(times, vec![300, 200, 100]);
        let ours = &frame.as_array().expect("array")[1];
        let fields = ours.as_array().expect("entry");
        assert_eq!(
            fields[5].as_bytes().map(|b| &b[..]),
            Some(&b"redcar@127.0.0.1:7000"[..])
        );
        assert_eq!(
            fields[3].as_array().map(<[Frame]>::len),
            Some(2),
            "command and key"
        );
    }

    #[test]
    fn len_adds_nodes_and_redcar() {
        let reply = len_reply(&[Frame::Integer(3), Frame::Integer(4)], 2);
        assert_eq!(&reply[..], b":9\r\n");
    }
}
