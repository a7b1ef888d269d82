//! Reading a `CLUSTER SHARDS` reply (Redis 7) into the slot ranges `CLUSTER SLOTS` would give,
//! refusing malformed entries loudly.
//!
//! `CLUSTER SHARDS` names each node once, with the shard's slots as a flat list of ranges, where
//! `CLUSTER SLOTS` repeats every node of a shard for each of its ranges: on a fragmented map of
//! many shards it is a fraction of the size. Its entries are maps (in RESP2, arrays of
//! alternating names and values):
//!
//! ```text
//! 1) 1) "slots"  2) 1) (integer) 0  2) (integer) 5460  3) ...
//!    3) "nodes"  4) 1) 1) "id" 2) "e10b..." 3) "port" 4) (integer) 30001 5) "ip" 6) "127.0.0.1"
//!                      7) "endpoint" 8) "127.0.0.1" 9) "role" 10) "master"
//!                      11) "replication-offset" 12) (integer) 72156 13) "health" 14) "online"
//! ```
//!
//! The ranges are those of `CLUSTER SLOTS`: a shard without slots gives none, and a replica is
//! listed only with health `online` (`fail` is a failed node, `loading` a replica that has not
//! synced yet — exactly the replicas `CLUSTER SLOTS` leaves out).

use super::parse::{node_addr, SlotNode, SlotRange};
use crate::protocol::Frame;

/// Parses the reply. `answered_by` is the `host:port` that was asked (an empty endpoint means
/// that node); `tls`: the nodes are reached over TLS, so a node's `tls-port` is its address.
pub(crate) fn parse_cluster_shards(
    reply: &Frame,
    answered_by: &str,
    tls: bool,
) -> Result<Vec<SlotRange>, String> {
    if let Frame::Error(message) = reply {
        return Err(format!(
            "CLUSTER SHARDS failed: {}",
            String::from_utf8_lossy(message)
        ));
    }
    let shards = reply
        .as_array()
        .ok_or("CLUSTER SHARDS reply is not an array")?;
    let mut ranges = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        parse_shard(shard, answered_by, tls, &mut ranges)
            .map_err(|e| format!("CLUSTER SHARDS entry {i}: {e}"))?;
    }
    ranges.sort_unstable_by_key(|r| r.start);
    Ok(ranges)
}

/// One shard's ranges, each with the shard's primary and online replicas.
///
/// Appends one range per `[start, end]` pair of the shard's flat `slots` list. A shard with two
/// primaries is refused (two owners for the same slots cannot be routed); a shard whose primary has
/// an unknown endpoint gives ranges with no primary, which stay unowned.
fn parse_shard(
    shard: &Frame,
    answered_by: &str,
    tls: bool,
    ranges: &mut Vec<SlotRange>,
) -> Result<(), String> {
    let fields = Fields::of(shard)?;
    let slots = fields
        .get("slots")?
        .as_array()
        .ok_or("slots is not an array")?;
    let nodes = fields
        .get("nodes")?
        .as_array()
        .ok_or("nodes is not an array")?;
    if slots.len() % 2 != 0 {
        return Err(format!("slots has an odd length {}", slots.len()));
    }
    let mut primary = None;
    let mut replicas = Vec::new();
    for (j, node) in nodes.iter().enumerate() {
        let node = parse_node(node, answered_by, tls).map_err(|e| format!("node {j}: {e}"))?;
        match node {
            ShardNode::Primary(n) if primary.is_some() => {
                return Err(format!("a second primary {:?}", n.map(|n| n.addr)));
            }
            ShardNode::Primary(n) => primary = Some(n),
            ShardNode::Replica(Some(n)) => replicas.push(n),
            ShardNode::Replica(None) | ShardNode::Unusable => {}
        }
    }
    let primary = primary.flatten();
    for pair in slots.chunks_exact(2) {
        let start = slot_number(&pair[0])?;
        let end = slot_number(&pair[1])?;
        if start > end {
            return Err(format!("slot range {start}-{end} is reversed"));
        }
        ranges.push(SlotRange {
            start,
            end,
            primary: primary.clone(),
            replicas: replicas.clone(),
        });
    }
    Ok(())
}

/// What one node of a shard is to the map: `None` inside is an unknown endpoint (`?`).
enum ShardNode {
    /// The shard's primary, whatever its health (Redis routes to it while it is flagged; outlier
    /// detection decides separately whether redcar does).
    Primary(Option<SlotNode>),
    /// An `online` replica, offered for reads.
    Replica(Option<SlotNode>),
    /// A replica that failed or has not synced yet.
    Unusable,
}

/// One node entry. Fields are looked up by name, not position, so new fields from a newer server
/// are harmless; `id`, `role`, `health`, `endpoint` and a port are required. With `tls`, `tls-port`
/// is preferred over `port` (and the other way round without), falling back to whichever the node
/// lists.
fn parse_node(node: &Frame, answered_by: &str, tls: bool) -> Result<ShardNode, String> {
    let fields = Fields::of(node)?;
    let id = text(fields.get("id")?, "id")?;
    if id.is_empty() {
        return Err("id is empty".to_string());
    }
    let role = text(fields.get("role")?, "role")?;
    let health = text(fields.get("health")?, "health")?;
    let endpoint = text(fields.get("endpoint")?, "endpoint")?;
    let (first, second) = if tls {
        ("tls-port", "port")
    } else {
        ("port", "tls-port")
    };
    let port = fields
        .find(first)
        .or_else(|| fields.find(second))
        .ok_or("node has neither port nor tls-port")?;
    let port = port
        .as_integer()
        .and_then(|p| u16::try_from(p).ok())
        .ok_or("port is not a port number")?;
    let node = node_addr(endpoint, port, answered_by).map(|addr| SlotNode {
        addr,
        id: Some(id.to_string()),
    });
    match (role, health) {
        ("master", _) => Ok(ShardNode::Primary(node)),
        ("replica", "online") => Ok(ShardNode::Replica(node)),
        ("replica", "fail" | "loading") => Ok(ShardNode::Unusable),
        ("replica", other) => Err(format!("health `{other}` is unknown")),
        (other, _) => Err(format!("role `{other}` is unknown")),
    }
}

/// A map in its RESP2 form: an array of alternating names and values. Unknown names are
/// ignored (a newer server may add some, as 7.0.? added `hostname`).
struct Fields<'a>(&'a [Frame]);

impl<'a> Fields<'a> {
    /// Refuses an odd number of items (a name without its value), which would shift every pair
    /// after it.
    fn of(frame: &'a Frame) -> Result<Fields<'a>, String> {
        let items = frame.as_array().ok_or("not an array")?;
        if items.len() % 2 != 0 {
            return Err(format!(
                "{} items do not make name/value pairs",
                items.len()
            ));
        }
        Ok(Fields(items))
    }

    /// The value of the first pair named `name`, if any (names are compared byte for byte).
    fn find(&self, name: &str) -> Option<&'a Frame> {
        self.0
            .chunks_exact(2)
            .find(|pair| {
                pair[0]
                    .as_bytes()
                    .is_some_and(|n| n.as_ref() == name.as_bytes())
            })
            .map(|pair| &pair[1])
    }

    /// As [`Fields::find`], with an error naming the missing field.
    fn get(&self, name: &str) -> Result<&'a Frame, String> {
        self.find(name)
            .ok_or_else(|| format!("`{name}` is missing"))
    }
}

/// A string field as UTF-8; `what` names it in the error.
fn text<'a>(frame: &'a Frame, what: &str) -> Result<&'a str, String> {
    let bytes = frame
        .as_bytes()
        .ok_or_else(|| format!("{what} is not a string"))?;
    std::str::from_utf8(bytes).map_err(|_| format!("{what} is not UTF-8"))
}

/// A slot number, refused outside 0..=16383.
fn slot_number(frame: &Frame) -> Result<u16, String> {
    let n = frame.as_integer().ok_or("slot is not an integer")?;
    u16::try_from(n)
        .ok()
        .filter(|&slot| usize::from(slot) < super::SLOT_COUNT)
        .ok_or_else(|| format!("slot {n} is out of range 0-16383"))
}

#[cfg(test)]
#[path = "shards_tests.rs"]
mod tests;
