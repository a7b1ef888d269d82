//! Reading a `CLUSTER SLOTS` reply into plain slot ranges, refusing malformed entries loudly.
//! (`CLUSTER SHARDS` is read into the same ranges by `shards`.)
//!
//! Why loudly: a reply that is not the shape Redis documents fails the whole parse with the
//! entry's index and what was wrong, and the refresher then keeps its current map and asks another
//! node. Quietly skipping a bad entry would leave its slots unowned in a map that looks valid, and
//! every command for them would fail with CLUSTERDOWN. Slots are checked against 0..16384 and
//! ranges must not be reversed; coverage is judged later, when the ranges become a topology (a
//! map that leaves slots unowned is partial), where a later entry for a slot wins over an earlier
//! one.

use crate::protocol::Frame;

/// One entry of `CLUSTER SLOTS`: a slot range, its primary and replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotRange {
    /// First slot of the range, 0..=16383.
    pub(crate) start: u16,
    /// Last slot of the range, inclusive; never below `start`.
    pub(crate) end: u16,
    /// `None` when the reply names the primary with an unknown endpoint (`?`): the range then stays
    /// unowned rather than routed to a guess.
    pub(crate) primary: Option<SlotNode>,
    /// The range's replicas in the reply's order; replicas with unknown endpoints are left out.
    pub(crate) replicas: Vec<SlotNode>,
}

/// A node of a `CLUSTER SLOTS` entry: the address to use (it honours
/// `cluster-preferred-endpoint-type`) and the node id, which joins it with `CLUSTER NODES`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlotNode {
    /// `host:port`, with brackets around an IPv6 host, ready to connect to.
    pub(crate) addr: String,
    /// Absent only in replies of servers older than Redis 4.
    pub(crate) id: Option<String>,
}

/// Parses the reply. `answered_by` is the `host:port` that was asked: an empty host in the reply
/// means "the node you asked" (Redis 7 `cluster-preferred-endpoint-type`), and `?` means the
/// endpoint is unknown, so that node is left out (a range with no known primary stays unowned).
pub(crate) fn parse_cluster_slots(
    reply: &Frame,
    answered_by: &str,
) -> Result<Vec<SlotRange>, String> {
    if let Frame::Error(message) = reply {
        return Err(format!(
            "CLUSTER SLOTS failed: {}",
            String::from_utf8_lossy(message)
        ));
    }
    let entries = reply
        .as_array()
        .ok_or("CLUSTER SLOTS reply is not an array")?;
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            parse_entry(entry, answered_by).map_err(|e| format!("CLUSTER SLOTS entry {i}: {e}"))
        })
        .collect()
}

/// One `[start, end, primary, replica...]` entry; errors name the field that was wrong, and the
/// caller adds the entry's index.
fn parse_entry(entry: &Frame, answered_by: &str) -> Result<SlotRange, String> {
    let fields = entry.as_array().ok_or("not an array")?;
    if fields.len() < 3 {
        return Err(format!(
            "expected start, end and a primary, got {} fields",
            fields.len()
        ));
    }
    let start = slot_number(&fields[0])?;
    let end = slot_number(&fields[1])?;
    if start > end {
        return Err(format!("slot range {start}-{end} is reversed"));
    }
    let primary = endpoint(&fields[2], answered_by)?;
    let replicas = fields[3..]
        .iter()
        .map(|f| endpoint(f, answered_by))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    Ok(SlotRange {
        start,
        end,
        primary,
        replicas,
    })
}

/// A slot number, refused outside 0..=16383 (a bigger one would index past the slot table).
fn slot_number(frame: &Frame) -> Result<u16, String> {
    let n = frame.as_integer().ok_or("slot is not an integer")?;
    u16::try_from(n)
        .ok()
        .filter(|&slot| usize::from(slot) < super::SLOT_COUNT)
        .ok_or_else(|| format!("slot {n} is out of range 0-16383"))
}

/// `[host, port, id, ...]` → the node, or `None` for an unknown (`?`) endpoint.
fn endpoint(frame: &Frame, answered_by: &str) -> Result<Option<SlotNode>, String> {
    let fields = frame.as_array().ok_or("node is not an array")?;
    let host = fields
        .first()
        .and_then(Frame::as_bytes)
        .ok_or("node host is missing")?;
    let port = fields
        .get(1)
        .and_then(Frame::as_integer)
        .and_then(|p| u16::try_from(p).ok())
        .ok_or("node port is missing or invalid")?;
    let host = std::str::from_utf8(host).map_err(|_| "node host is not UTF-8")?;
    let id = node_id(fields.get(2))?;
    Ok(node_addr(host, port, answered_by).map(|addr| SlotNode { addr, id }))
}

/// `host:port` of a node as a topology reply names it: `?` is an unknown endpoint (`None`), an
/// empty host the node that answered, and an IPv6 host gets brackets.
pub(super) fn node_addr(host: &str, port: u16, answered_by: &str) -> Option<String> {
    if host == "?" {
        return None;
    }
    let host = if host.is_empty() {
        answered_by.rsplit_once(':').map_or(answered_by, |(h, _)| h)
    } else {
        host
    };
    if host.contains(':') && !host.starts_with('[') {
        Some(format!("[{host}]:{port}"))
    } else {
        Some(format!("{host}:{port}"))
    }
}

/// The optional third field of a node: its id, a non-empty string when present.
pub(super) fn node_id(frame: Option<&Frame>) -> Result<Option<String>, String> {
    let Some(frame) = frame else {
        return Ok(None);
    };
    let id = frame.as_bytes().ok_or("node id is not a string")?;
    let id = std::str::from_utf8(id).map_err(|_| "node id is not UTF-8")?;
    if id.is_empty() {
        return Err("node id is empty".to_string());
    }
    Ok(Some(id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn node(host: &str, port: i64) -> Frame {
        Frame::Array(vec![
            Frame::Bulk(Bytes::from(host.to_string())),
            Frame::Integer(port),
            Frame::Bulk(Bytes::from_static(b"0123456789abcdef")),
        ])
    }

    fn addr(node: &Option<SlotNode>) -> Option<&str> {
        node.as_ref().map(|n| n.addr.as_str())
    }

    fn addrs(nodes: &[SlotNode]) -> Vec<&str> {
        nodes.iter().map(|n| n.addr.as_str()).collect()
    }

    fn entry(start: i64, end: i64, nodes: Vec<Frame>) -> Frame {
        let mut fields = vec![Frame::Integer(start), Frame::Integer(end)];
        fields.extend(nodes);
        Frame::Array(fields)
    }

    #[test]
    fn parses_ranges_primaries_and_replicas() {
        let reply = Frame::Array(vec![
            entry(
                0,
                5460,
                vec![node("127.0.0.1", 7000), node("127.0.0.1", 7003)],
            ),
            entry(5461, 16383, vec![node("127.0.0.1", 7001)]),
        ]);
        let ranges = parse_cluster_slots(&reply, "127.0.0.1:7000").expect("valid reply");
        assert_eq!(ranges.len(), 2);
        assert_eq!(addr(&ranges[0].primary), Some("127.0.0.1:7000"));
        assert_eq!(addrs(&ranges[0].replicas), vec!["127.0.0.1:7003"]);
        assert_eq!((ranges[1].start, ranges[1].end), (5461, 16383));
        assert!(ranges[1].replicas.is_empty());
    }

    #[test]
    fn empty_host_means_the_node_that_answered() {
        let reply = Frame::Array(vec![entry(0, 16383, vec![node("", 7005)])]);
        let ranges = parse_cluster_slots(&reply, "10.1.2.3:7000").expect("valid reply");
        assert_eq!(addr(&ranges[0].primary), Some("10.1.2.3:7005"));
    }

    #[test]
    fn unknown_endpoint_is_left_out() {
        let reply = Frame::Array(vec![entry(
            0,
            16383,
            vec![node("?", 7005), node("127.0.0.1", 7006)],
        )]);
        let ranges = parse_cluster_slots(&reply, "127.0.0.1:7000").expect("valid reply");
        assert_eq!(ranges[0].primary, None);
        assert_eq!(addrs(&ranges[0].replicas), vec!["127.0.0.1:7006"]);
    }

    #[test]
    fn node_ids_are_kept_and_optional_for_old_servers() {
        let old_style = Frame::Array(vec![
            Frame::Bulk(Bytes::from_static(b"127.0.0.1")),
            Frame::Integer(7001),
        ]);
        let reply = Frame::Array(vec![entry(
            0,
            16383,
            vec![node("127.0.0.1", 7000), old_style],
        )]);
        let ranges = parse_cluster_slots(&reply, "127.0.0.1:7000").expect("valid reply");
        let primary = ranges[0].primary.as_ref().expect("primary");
        assert_eq!(primary.id.as_deref(), Some("0123456789abcdef"));
        assert_eq!(ranges[0].replicas[0].id, None);
    }

    #[test]
    fn malformed_entries_are_errors_not_skipped() {
        let out_of_range = Frame::Array(vec![entry(0, 16384, vec![node("127.0.0.1", 7000)])]);
        assert!(parse_cluster_slots(&out_of_range, "x:1").is_err());
        let reversed = Frame::Array(vec![entry(10, 5, vec![node("127.0.0.1", 7000)])]);
        assert!(parse_cluster_slots(&reversed, "x:1").is_err());
        let no_primary = Frame::Array(vec![entry(0, 5, vec![])]);
        assert!(parse_cluster_slots(&no_primary, "x:1").is_err());
        let bad_port = Frame::Array(vec![entry(0, 5, vec![node("127.0.0.1", 70000)])]);
        assert!(parse_cluster_slots(&bad_port, "x:1").is_err());
        let empty_id = Frame::Array(vec![
            Frame::Bulk(Bytes::from_static(b"127.0.0.1")),
            Frame::Integer(7000),
            Frame::Bulk(Bytes::new()),
        ]);
        let empty_id = Frame::Array(vec![entry(0, 5, vec![empty_id])]);
        assert!(parse_cluster_slots(&empty_id, "x:1").is_err());
        let error = Frame::Error(Bytes::from_static(
            b"ERR This instance has cluster support disabled",
        ));
        let message = parse_cluster_slots(&error, "x:1").expect_err("error reply");
        assert!(message.contains("cluster support disabled"), "{message}");
    }
}
