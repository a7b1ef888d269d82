//! The topology replies of one node of a [`Model`], byte for byte as redis-server 7.0 writes
//! them in RESP2 (`tests/it/bigmap.rs` checks them against a real cluster's): `CLUSTER SHARDS`,
//! `CLUSTER SLOTS`, `CLUSTER NODES`, `CLUSTER INFO`, and the digest redcar's check script
//! returns.

use std::fmt::Write;

use super::model::{Model, Node, Role};

fn bulk(out: &mut String, s: &str) {
    let _ = write!(out, "${}\r\n{s}\r\n", s.len());
}

fn int(out: &mut String, n: u64) {
    let _ = write!(out, ":{n}\r\n");
}

/// `health` as `CLUSTER SHARDS` says it.
fn health(node: &Node) -> &'static str {
    if node.failed {
        "fail"
    } else if !node.is_primary() && node.offset == 0 {
        "loading"
    } else {
        "online"
    }
}

/// `CLUSTER SHARDS`: every primary's shard (with or without slots), its nodes as maps.
pub fn shards(model: &Model) -> String {
    let mut out = String::new();
    let primaries: Vec<&Node> = model.primaries().collect();
    let _ = write!(out, "*{}\r\n", primaries.len());
    for primary in primaries {
        out.push_str("*4\r\n");
        bulk(&mut out, "slots");
        let slots = primary.slots();
        let _ = write!(out, "*{}\r\n", slots.len() * 2);
        for &(a, b) in slots {
            int(&mut out, u64::from(a));
            int(&mut out, u64::from(b));
        }
        bulk(&mut out, "nodes");
        let replicas: Vec<&Node> = model.replicas_of(&primary.id).collect();
        let _ = write!(out, "*{}\r\n", 1 + replicas.len());
        for node in std::iter::once(primary).chain(replicas) {
            shard_node(&mut out, node);
        }
    }
    out
}

fn shard_node(out: &mut String, node: &Node) {
    out.push_str("*14\r\n");
    bulk(out, "id");
    bulk(out, &node.id);
    bulk(out, "port");
    int(out, u64::from(node.port));
    bulk(out, "ip");
    bulk(out, &node.host);
    bulk(out, "endpoint");
    bulk(out, &node.host);
    bulk(out, "role");
    bulk(
        out,
        if node.is_primary() {
            "master"
        } else {
            "replica"
        },
    );
    bulk(out, "replication-offset");
    int(out, node.offset);
    bulk(out, "health");
    bulk(out, health(node));
}

/// `CLUSTER SLOTS`: contiguous ranges of one owner in slot order, each with the primary and the
/// replicas that are neither failed nor unsynced.
pub fn slots(model: &Model) -> String {
    let owners = model.slot_owners();
    let mut ranges: Vec<(usize, usize, usize)> = Vec::new();
    let mut slot = 0;
    while slot < owners.len() {
        let owner = owners[slot];
        let mut end = slot;
        while end + 1 < owners.len() && owners[end + 1] == owner {
            end += 1;
        }
        if let Some(owner) = owner {
            ranges.push((slot, end, owner));
        }
        slot = end + 1;
    }
    let mut out = format!("*{}\r\n", ranges.len());
    for (start, end, owner) in ranges {
        let primary = &model.nodes[owner];
        let replicas: Vec<&Node> = model
            .replicas_of(&primary.id)
            .filter(|r| !r.failed && r.offset != 0)
            .collect();
        let _ = write!(out, "*{}\r\n", 3 + replicas.len());
        int(&mut out, start as u64);
        int(&mut out, end as u64);
        for node in std::iter::once(primary).chain(replicas) {
            out.push_str("*4\r\n");
            bulk(&mut out, &node.host);
            int(&mut out, u64::from(node.port));
            bulk(&mut out, &node.id);
            out.push_str("*0\r\n");
        }
    }
    out
}

/// The text of `CLUSTER NODES` as node `me` sees it, `now_ms` its clock (for `pong-recv`).
pub fn nodes_text(model: &Model, me: &str, now_ms: u64) -> String {
    let mut text = String::new();
    for (i, node) in model.nodes.iter().enumerate() {
        let mut flags = String::new();
        if node.id == me {
            flags.push_str("myself,");
        }
        flags.push_str(if node.is_primary() { "master" } else { "slave" });
        if node.failed {
            flags.push_str(",fail");
        }
        let master = match &node.role {
            Role::Primary { .. } => "-",
            Role::Replica { of } => of.as_str(),
        };
        // Another node's last pong is up to a second old; a node's own line shows a whole
        // second, as Redis's does.
        let pong = if node.id == me {
            now_ms / 1000 * 1000
        } else {
            now_ms.saturating_sub((i as u64 * 37) % 1000)
        };
        let link = if node.failed {
            "disconnected"
        } else {
            "connected"
        };
        let _ = write!(
            text,
            "{} {}:{}@{} {flags} {master} 0 {pong} {} {link}",
            node.id,
            node.host,
            node.port,
            u32::from(node.port) + 10000,
            model.epoch_of(node)
        );
        for &(a, b) in node.slots() {
            if a == b {
                let _ = write!(text, " {a}");
            } else {
                let _ = write!(text, " {a}-{b}");
            }
        }
        text.push('\n');
    }
    text
}

/// `CLUSTER NODES` as a bulk reply.
pub fn nodes(model: &Model, me: &str, now_ms: u64) -> String {
    let text = nodes_text(model, me, now_ms);
    format!("${}\r\n{text}\r\n", text.len())
}

/// `CLUSTER INFO` of node `me` (its message counters made up, growing with `now_ms`).
pub fn info(model: &Model, me: &str, now_ms: u64) -> String {
    let owners = model.slot_owners();
    let assigned = owners.iter().filter(|o| o.is_some()).count();
    let failed = owners
        .iter()
        .filter(|o| o.is_some_and(|i| model.nodes[i].failed))
        .count();
    let size = model.primaries().filter(|p| !p.slots().is_empty()).count();
    let state = if assigned == 16384 && failed == 0 {
        "ok"
    } else {
        "fail"
    };
    let my_epoch = model.node(me).map_or(0, |n| model.epoch_of(n));
    let sent = now_ms / 100 % 1_000_000;
    let text = format!(
        "cluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{}\r\n\
         cluster_slots_pfail:0\r\ncluster_slots_fail:{failed}\r\ncluster_known_nodes:{}\r\n\
         cluster_size:{size}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{my_epoch}\r\n\
         cluster_stats_messages_ping_sent:{sent}\r\ncluster_stats_messages_pong_sent:{sent}\r\n\
         cluster_stats_messages_sent:{}\r\ncluster_stats_messages_ping_received:{sent}\r\n\
         cluster_stats_messages_pong_received:{sent}\r\ncluster_stats_messages_received:{}\r\n\
         total_cluster_links_buffer_limit_exceeded:0\r\n",
        assigned - failed,
        model.nodes.len(),
        model.current_epoch,
        sent * 2,
        sent * 2,
    );
    format!("${}\r\n{text}\r\n", text.len())
}

/// What redcar's digest script returns for this `CLUSTER NODES` text: SHA-1 of a newline and
/// each line, preceded by a newline, with its `ping-sent` and `pong-recv` fields cut out (the
/// script's Lua pattern `\n(%x+ %S+ %S+ %S+) %d+ %d+`, written out again here).
pub fn digest(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    for line in text.split('\n') {
        out.push('\n');
        let fields: Vec<&str> = line.splitn(7, ' ').collect();
        let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        let hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
        let plain = |s: &str| !s.is_empty() && !s.contains(['\t', '\r', '\x0b', '\x0c']);
        match fields.as_slice() {
            [id, addr, flags, master, ping, pong, rest @ ..]
                if hex(id) && plain(addr) && plain(flags) && plain(master) =>
            {
                // Each number as long as it runs; what follows stays.
                let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
                if !numeric(ping) || digits(pong) == 0 {
                    out.push_str(line);
                    continue;
                }
                let _ = write!(out, "{id} {addr} {flags} {master}");
                out.push_str(&pong[digits(pong)..]);
                if let Some(rest) = rest.first() {
                    out.push(' ');
                    out.push_str(rest);
                }
            }
            _ => out.push_str(line),
        }
    }
    format!("{:x}", <sha1::Sha1 as sha1::Digest>::digest(out.as_bytes()))
}
