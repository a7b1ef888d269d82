//! Turning Redis replies (INFO text, CLUSTER NODES/SLOTS, SLOWLOG, LATENCY, CONFIG GET) into
//! the plain data of [`model`](super::model); pure, so every check can be tested on canned text.

use std::collections::HashMap;

use redcar_protocol::protocol::Frame;

use super::model::{ClusterNode, LatencyEvent, NodeSlowEntry, Role, SlotOwner};

/// `INFO` / `CLUSTER INFO` text → `field → value`. Section headers and blank lines are skipped.
pub(crate) fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A compound INFO value such as `calls=3,usec=10` or `ip=..,port=..,lag=0` → its fields.
pub(crate) fn parse_fields(value: &str) -> HashMap<&str, &str> {
    value
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .collect()
}

/// `CLUSTER NODES` text → the nodes with a usable address. `seed_host` replaces an empty host
/// (a node that does not know its own IP yet prints `:port`).
pub(crate) fn parse_cluster_nodes(text: &str, seed_host: &str) -> Vec<ClusterNode> {
    text.lines()
        .filter_map(|line| parse_node_line(line, seed_host))
        .collect()
}

/// `<id> <ip:port@cport[,hostname]> <flags> <primary> <ping> <pong> <epoch> <link> <slot>...`
fn parse_node_line(line: &str, seed_host: &str) -> Option<ClusterNode> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return None;
    }
    let flags: Vec<&str> = fields[2].split(',').collect();
    // A node in handshake or without an address cannot be connected to (yet).
    if flags.iter().any(|f| *f == "noaddr" || *f == "handshake") {
        return None;
    }
    let endpoint = fields[1].split(['@', ',']).next()?;
    let (host, port) = endpoint.rsplit_once(':')?;
    port.parse::<u16>().ok().filter(|p| *p != 0)?;
    let host = if host.is_empty() { seed_host } else { host };
    let role = if flags.contains(&"slave") {
        Role::Replica
    } else {
        Role::Primary
    };
    Some(ClusterNode {
        id: fields[0].to_string(),
        addr: format!("{host}:{port}"),
        role,
        primary_id: (fields[3] != "-").then(|| fields[3].to_string()),
        failed: flags.iter().any(|f| *f == "fail" || *f == "fail?"),
        slots: fields[8..].iter().map(|s| slot_count(s)).sum(),
    })
}

/// `5`, `0-5460` → number of slots; `[5-<-id]` (a migration in progress) → 0.
fn slot_count(field: &str) -> u32 {
    if field.starts_with('[') {
        return 0;
    }
    match field.split_once('-') {
        Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
            (Ok(a), Ok(b)) if b >= a => b - a + 1,
            _ => 0,
        },
        None => u32::from(field.parse::<u16>().is_ok()),
    }
}

/// `CLUSTER SLOTS` → sorted ranges with their primary's `host:port`. An empty host means "the
/// node you asked" (Redis 7); a `?` host means unknown, and that range counts as unowned.
pub(crate) fn parse_cluster_slots(reply: &Frame, answered_by: &str) -> Option<Vec<SlotOwner>> {
    let answering_host = answered_by.rsplit_once(':').map_or("", |(h, _)| h);
    let mut owners = Vec::new();
    for entry in reply.as_array()? {
        let fields = entry.as_array()?;
        let start = u16::try_from(fields.first()?.as_integer()?).ok()?;
        let end = u16::try_from(fields.get(1)?.as_integer()?).ok()?;
        let primary = fields.get(2)?.as_array()?;
        let host = text(primary.first()?);
        let port = primary.get(1)?.as_integer()?;
        if host == "?" {
            continue;
        }
        let host = if host.is_empty() {
            answering_host
        } else {
            &host
        };
        owners.push(SlotOwner {
            start,
            end,
            primary: format!("{host}:{port}"),
        });
    }
    owners.sort();
    Some(owners)
}

/// `SLOWLOG GET` → entries: `[id, unix time, micros, [args...], client addr, client name]`.
pub(crate) fn parse_slowlog(reply: &Frame) -> Vec<NodeSlowEntry> {
    let Some(entries) = reply.as_array() else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|entry| {
            let fields = entry.as_array()?;
            let micros = u64::try_from(fields.get(2)?.as_integer()?).ok()?;
            let command = text(fields.get(3)?.as_array()?.first()?).to_ascii_uppercase();
            Some(NodeSlowEntry { command, micros })
        })
        .collect()
}

/// `LATENCY LATEST` → events: `[event, unix time, latest ms, all-time max ms, ...]`.
pub(crate) fn parse_latency(reply: &Frame) -> Vec<LatencyEvent> {
    let Some(events) = reply.as_array() else {
        return Vec::new();
    };
    events
        .iter()
        .filter_map(|event| {
            let fields = event.as_array()?;
            Some(LatencyEvent {
                event: text(fields.first()?),
                latest_ms: u64::try_from(fields.get(2)?.as_integer()?).ok()?,
                max_ms: u64::try_from(fields.get(3)?.as_integer()?).ok()?,
            })
        })
        .collect()
}

/// `CONFIG GET name` → its value (`[name, value]`); `None` for an unknown parameter.
pub(crate) fn parse_config_value(reply: &Frame) -> Option<String> {
    reply.as_array()?.get(1).map(text)
}

/// A bulk or simple string as text (lossy: only used for display and comparisons).
pub(crate) fn text(frame: &Frame) -> String {
    frame
        .as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
