//! Reading a `CLUSTER NODES` reply into each node's config epoch and health, refusing malformed
//! lines loudly.
//!
//! `CLUSTER SLOTS` says who owns what but not how recent that claim is; the config epoch in
//! `CLUSTER NODES` is Redis's own tie-breaker (the higher epoch wins a slot), so the refresher
//! joins the two replies by node id.

use std::collections::HashMap;

use super::parse::SlotRange;
use super::SLOT_COUNT;
use crate::protocol::Frame;

/// What redcar needs from one `CLUSTER NODES` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeState {
    /// The node's config epoch: which claim to a slot is the most recent (Redis bumps it on
    /// failover and on slot moves).
    pub(crate) config_epoch: u64,
    /// Flagged `fail` (the cluster agreed; `fail?` is only one node's suspicion), `handshake` or
    /// `noaddr`: the node cannot serve, so it is not offered as a replica.
    pub(crate) unusable: bool,
    /// Flagged `slave`: a replica in this node's view (whether or not `CLUSTER SLOTS` lists it).
    pub(crate) replica: bool,
    /// A member with an address: not `handshake` (being met, under a temporary id) nor `noaddr`.
    /// Such a node that owns no slot and is not a replica in this node's view is one whose role
    /// has not reached it yet: a new replica, right after `CLUSTER REPLICATE` or cluster creation.
    pub(crate) member: bool,
}

/// Node id → state.
pub(crate) type NodeStates = HashMap<String, NodeState>;

/// Parses the reply (a bulk string with one line per node).
///
/// Only a bulk string is accepted (RESP2 and RESP3 both send one); an error reply is reported as
/// the node's failure.
pub(crate) fn parse_cluster_nodes_reply(reply: &Frame) -> Result<NodeStates, String> {
    if let Frame::Error(message) = reply {
        return Err(format!(
            "CLUSTER NODES failed: {}",
            String::from_utf8_lossy(message)
        ));
    }
    let text = reply
        .as_bytes()
        .ok_or("CLUSTER NODES reply is not a string")?;
    let text = std::str::from_utf8(text).map_err(|_| "CLUSTER NODES reply is not UTF-8")?;
    parse_cluster_nodes(text)
}

/// Parses the text of `CLUSTER NODES`. Any malformed line makes the whole reply an error: a
/// half-read list could hide the epoch that matters.
pub(crate) fn parse_cluster_nodes(text: &str) -> Result<NodeStates, String> {
    let mut states = NodeStates::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (id, state) = parse_line(line).map_err(|e| format!("CLUSTER NODES line {i}: {e}"))?;
        if states.insert(id.to_string(), state).is_some() {
            return Err(format!("CLUSTER NODES line {i}: node {id} is listed twice"));
        }
    }
    if states.is_empty() {
        return Err("CLUSTER NODES lists no node".to_string());
    }
    Ok(states)
}

/// `<id> <ip:port@cport[,hostname]> <flags> <master-id|-> <ping-sent> <pong-recv> <config-epoch>
/// <link-state> <slot>...`
fn parse_line(line: &str) -> Result<(&str, NodeState), String> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let [id, addr, flags, master, ping, pong, epoch, link, slots @ ..] = fields.as_slice() else {
        return Err(format!("expected at least 8 fields, got {}", fields.len()));
    };
    node_id(id)?;
    address(addr)?;
    if *master != "-" {
        node_id(master).map_err(|e| format!("master {e}"))?;
    }
    number("ping-sent", ping)?;
    number("pong-recv", pong)?;
    let config_epoch = number("config-epoch", epoch)?;
    if !matches!(*link, "connected" | "disconnected") {
        return Err(format!("link state `{link}` is not connected/disconnected"));
    }
    for slot in slots {
        slot_field(slot)?;
    }
    let unusable = flag_list(flags)?.any(|flag| matches!(flag, "fail" | "handshake" | "noaddr"));
    let replica = flag_list(flags)?.any(|flag| flag == "slave");
    let member = !flag_list(flags)?.any(|flag| matches!(flag, "handshake" | "noaddr"));
    Ok((
        id,
        NodeState {
            config_epoch,
            unusable,
            replica,
            member,
        },
    ))
}

/// Node ids are 40 hex digits.
fn node_id(id: &str) -> Result<(), String> {
    if id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(());
    }
    Err(format!("id `{id}` is not 40 hex digits"))
}

/// `ip:port@cport[,hostname]`; the ip is empty for a node whose address is not known yet.
fn address(addr: &str) -> Result<(), String> {
    let endpoint = addr.split(',').next().unwrap_or(addr);
    let ip_port = endpoint.split('@').next().unwrap_or(endpoint);
    let port = ip_port
        .rsplit_once(':')
        .map(|(_, port)| port.parse::<u16>());
    match port {
        Some(Ok(_)) => Ok(()),
        _ => Err(format!("address `{addr}` is not ip:port@cport")),
    }
}

/// Flags are comma separated and never empty (`noflags` stands for none). Unknown flags are
/// accepted: a newer server may add some, and they do not change the epoch.
fn flag_list(flags: &str) -> Result<impl Iterator<Item = &str>, String> {
    if flags.split(',').any(str::is_empty) {
        return Err(format!("flags `{flags}` has an empty flag"));
    }
    Ok(flags.split(','))
}

/// A decimal `u64` field; `what` names it in the error.
fn number(what: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{what} `{value}` is not a number"))
}

/// `N`, `N-M`, or a migration in progress: `[N->-id]` / `[N-<-id]`.
fn slot_field(field: &str) -> Result<(), String> {
    if let Some(inner) = field.strip_prefix('[').and_then(|f| f.strip_suffix(']')) {
        let (slot, peer) = inner
            .split_once("->-")
            .or_else(|| inner.split_once("-<-"))
            .ok_or_else(|| format!("slot migration `{field}` is malformed"))?;
        slot_number(slot)?;
        return node_id(peer);
    }
    match field.split_once('-') {
        Some((start, end)) if slot_number(start)? <= slot_number(end)? => Ok(()),
        Some(_) => Err(format!("slot range `{field}` is reversed")),
        None => slot_number(field).map(|_| ()),
    }
}

/// A slot number, refused outside 0..=16383.
fn slot_number(value: &str) -> Result<u16, String> {
    value
        .parse::<u16>()
        .ok()
        .filter(|&slot| usize::from(slot) < SLOT_COUNT)
        .ok_or_else(|| format!("slot `{value}` is not in 0-16383"))
}

/// The slots of the node that answered `CLUSTER NODES` (its `myself` line), when it is a
/// primary: the ranges it owns, and the slots it is migrating out or importing (Redis shows
/// those markers on a node's own line only).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct OwnSlots {
    /// The slot ranges the node owns, inclusive, as listed on its line.
    pub(crate) owned: Vec<(u16, u16)>,
    /// Slots it is migrating to or importing from another node (the `[slot->-id]` and `[slot-<-id]`
    /// markers).
    pub(crate) moving: Vec<u16>,
}

/// [`OwnSlots`] from the text of `CLUSTER NODES`; `None` when no primary's line is `myself` or
/// that line is malformed.
pub(crate) fn own_slots(text: &str) -> Option<OwnSlots> {
    let line = text.lines().find(|line| {
        line.split_ascii_whitespace()
            .nth(2)
            .is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
    })?;
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let [_, _, flags, _, _, _, _, _, slots @ ..] = fields.as_slice() else {
        return None;
    };
    if !flags.split(',').any(|f| f == "master") {
        return None;
    }
    let mut own = OwnSlots::default();
    for field in slots {
        slot_field(field).ok()?;
        if let Some(inner) = field.strip_prefix('[') {
            let end = inner.find("->-").or_else(|| inner.find("-<-"))?;
            own.moving.push(slot_number(&inner[..end]).ok()?);
            continue;
        }
        let (start, end) = field.split_once('-').unwrap_or((field, field));
        own.owned
            .push((slot_number(start).ok()?, slot_number(end).ok()?));
    }
    Some(own)
}

/// Checks that every node of `CLUSTER SLOTS` has an id `CLUSTER NODES` lists, so the two replies
/// describe the same cluster view (they come from one node, but a server too old to send ids
/// cannot be joined).
pub(crate) fn check_join(ranges: &[SlotRange], states: &NodeStates) -> Result<(), String> {
    let nodes = ranges
        .iter()
        .flat_map(|r| r.primary.iter().chain(r.replicas.iter()));
    for node in nodes {
        let Some(id) = &node.id else {
            return Err(format!("CLUSTER SLOTS gives no id for {}", node.addr));
        };
        if !states.contains_key(id) {
            return Err(format!(
                "node {id} ({}) of CLUSTER SLOTS is not in CLUSTER NODES",
                node.addr
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::parse::SlotNode;

    const A: &str = "07c37dfeb235213a872192d90877d0cd55635b91";
    const B: &str = "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1";
    const C: &str = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca";

    fn sample() -> String {
        format!(
            "{A} 127.0.0.1:30001@40001,node-a myself,master - 0 1426238316000 1 connected 0-5460\n\
             {B} 127.0.0.1:30002@40002 master,fail? - 1426238316232 1426238317000 2 connected 5461-16383 [42->-{A}]\n\
             {C} 127.0.0.1:30004@40004 slave,fail {A} 1426238316232 0 1 disconnected\n"
        )
    }

    #[test]
    fn reads_epochs_and_flags_by_id() {
        let states = parse_cluster_nodes(&sample()).expect("valid");
        assert_eq!(states.len(), 3);
        assert_eq!(states[A].config_epoch, 1);
        assert_eq!(states[B].config_epoch, 2);
        // `fail?` is one node's suspicion: still usable. `fail` is the cluster's verdict.
        assert!(!states[B].unusable);
        assert!(states[C].unusable);
        assert!(states[C].replica && !states[A].replica);
        assert!(states[A].member && states[B].member && states[C].member);
    }

    #[test]
    fn handshake_and_noaddr_nodes_are_unusable() {
        let text = format!(
            "{A} :0@0 handshake - 0 0 0 connected\n{B} :0@0 master,noaddr - 0 0 3 disconnected\n"
        );
        let states = parse_cluster_nodes(&text).expect("valid");
        assert!(states[A].unusable);
        assert!(states[B].unusable);
        assert!(!states[A].member && !states[B].member);
        assert_eq!(states[B].config_epoch, 3);
    }

    #[test]
    fn the_reply_frame_is_a_bulk_string() {
        let reply = Frame::Bulk(bytes::Bytes::from(sample()));
        assert_eq!(parse_cluster_nodes_reply(&reply).map(|s| s.len()), Ok(3));
        let error = Frame::Error(bytes::Bytes::from_static(b"ERR unknown command"));
        let message = parse_cluster_nodes_reply(&error).expect_err("error reply");
        assert!(message.contains("unknown command"), "{message}");
        assert!(parse_cluster_nodes_reply(&Frame::Integer(1)).is_err());
    }

    #[test]
    fn malformed_lines_are_errors_not_skipped() {
        let good = format!("{A} 127.0.0.1:30001@40001 master - 0 0 1 connected 0-16383");
        assert!(parse_cluster_nodes(&good).is_ok());
        let bad = [
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 1"),
            "abc 127.0.0.1:30001@40001 master - 0 0 1 connected".to_string(),
            format!("{A} 127.0.0.1 master - 0 0 1 connected"),
            format!("{A} 127.0.0.1:30001@40001 master,,x - 0 0 1 connected"),
            format!("{A} 127.0.0.1:30001@40001 slave nope 0 0 1 connected"),
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 -1 connected"),
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 x connected"),
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 1 linked"),
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 1 connected 0-16384"),
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 1 connected 9-3"),
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 1 connected [5-x-{B}]"),
            format!("{A} 127.0.0.1:30001@40001 master - 0 0 1 connected\n{A} :0@0 master - 0 0 1 connected"),
            String::new(),
        ];
        for text in bad {
            assert!(parse_cluster_nodes(&text).is_err(), "accepted: {text:?}");
        }
    }

    #[test]
    fn own_line_gives_owned_ranges_and_migration_markers() {
        let text = format!(
            "{A} 127.0.0.1:30001@40001 master - 0 0 1 connected 0-5460\n\
             {B} 127.0.0.1:30002@40002 myself,master - 0 0 2 connected 5461-9000 9002 [9001->-{A}] [3-<-{A}]\n"
        );
        let own = own_slots(&text).expect("a primary answered");
        assert_eq!(own.owned, vec![(5461, 9000), (9002, 9002)]);
        assert_eq!(own.moving, vec![9001, 3]);
        let replica = format!("{C} 127.0.0.1:30004@40004 myself,slave {A} 0 0 1 connected\n");
        assert_eq!(own_slots(&replica), None);
        assert_eq!(own_slots(&sample()).map(|o| o.moving), Some(vec![]));
        let bad = format!("{A} 127.0.0.1:30001@40001 myself,master - 0 0 1 connected [x->-{B}]");
        assert_eq!(own_slots(&bad), None);
    }

    fn node(addr: &str, id: Option<&str>) -> SlotNode {
        SlotNode {
            addr: addr.to_string(),
            id: id.map(String::from),
        }
    }

    #[test]
    fn join_needs_every_slots_node_in_nodes() {
        let states = parse_cluster_nodes(&sample()).expect("valid");
        let mut ranges = vec![SlotRange {
            start: 0,
            end: 16383,
            primary: Some(node("127.0.0.1:30001", Some(A))),
            replicas: vec![node("127.0.0.1:30004", Some(C))],
        }];
        assert_eq!(check_join(&ranges, &states), Ok(()));
        ranges[0].replicas.push(node("127.0.0.1:30009", None));
        assert!(check_join(&ranges, &states).is_err());
        ranges[0].replicas[1].id = Some("f".repeat(40));
        assert!(check_join(&ranges, &states).is_err());
    }
}
