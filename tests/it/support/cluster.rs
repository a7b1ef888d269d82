//! `RedisCluster`: a real Redis Cluster of `redis-server` children on loopback.
//!
//! Nodes are identified by their port everywhere in this API (ports are stable
//! across `restart()`; node ids are too, thanks to nodes.conf).

use std::fmt::Write as _;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::resp_client::{RespClient, Value};
use super::server::RedisServer;

pub const SLOTS: usize = 16384;
pub const DEFAULT_NODE_TIMEOUT_MS: u64 = 2000;
/// Deadline for the cluster to become healthy after creation.
pub const HEALTHY_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(50);

/// One contiguous slot range from `CLUSTER SLOTS`, with nodes given by port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub primary: u16,
    /// Sorted.
    pub replicas: Vec<u16>,
}

/// One line of `CLUSTER NODES`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub id: String,
    pub port: u16,
    pub flags: Vec<String>,
    /// `None` for primaries.
    pub master_id: Option<String>,
    pub link_connected: bool,
    /// Slot ranges owned (importing/migrating markers are skipped).
    pub slots: Vec<(u16, u16)>,
}

impl NodeInfo {
    pub fn is_primary(&self) -> bool {
        self.flags.iter().any(|f| f == "master")
    }
    pub fn is_failed(&self) -> bool {
        self.flags.iter().any(|f| f == "fail" || f == "fail?")
    }
}

/// An in-progress slot migration (between `start_migration` and `finish_migration`).
#[derive(Clone, Debug)]
pub struct Migration {
    pub slot: u16,
    pub from: u16,
    pub to: u16,
    pub from_id: String,
    pub to_id: String,
}

pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    primaries: usize,
    replicas_per_primary: usize,
    node_timeout_ms: u64,
}

impl RedisCluster {
    /// Start `primaries * (1 + replicas_per_primary)` nodes, create the cluster
    /// with `redis-cli --cluster create`, and wait until it is healthy.
    pub fn start(primaries: usize, replicas_per_primary: usize) -> RedisCluster {
        RedisCluster::start_with(primaries, replicas_per_primary, DEFAULT_NODE_TIMEOUT_MS)
    }

    pub fn start_with(
        primaries: usize,
        replicas_per_primary: usize,
        node_timeout_ms: u64,
    ) -> RedisCluster {
        assert!(
            primaries >= 3,
            "redis-cli --cluster create needs at least 3 primaries (got {primaries})"
        );
        let total = primaries * (1 + replicas_per_primary);
        // Start all nodes in parallel: spawning is mostly waiting.
        let nodes: Vec<RedisServer> = thread::scope(|s| {
            let handles: Vec<_> = (0..total)
                .map(|_| s.spawn(move || RedisServer::start_cluster_node(node_timeout_ms, &[])))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("cluster node start panicked"))
                .collect()
        });
        let cluster = RedisCluster {
            nodes,
            primaries,
            replicas_per_primary,
            node_timeout_ms,
        };
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster").arg("create");
        for n in &cluster.nodes {
            cmd.arg(n.addr());
        }
        cmd.arg("--cluster-replicas")
            .arg(replicas_per_primary.to_string())
            .arg("--cluster-yes");
        let t0 = Instant::now();
        let out = cmd.output().expect("run redis-cli --cluster create");
        if std::env::var_os("REDCAR_IT_VERBOSE").is_some() {
            eprintln!("redis-cli --cluster create took {:?}", t0.elapsed());
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !stdout.contains("[OK] All 16384 slots covered") {
            panic!(
                "redis-cli --cluster create failed ({}):\n{}\n{}",
                out.status,
                stdout,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        cluster.wait_healthy(HEALTHY_TIMEOUT);
        cluster
    }

    /// Comma-separated addresses of all nodes: `127.0.0.1:p1,127.0.0.1:p2,...`.
    pub fn seeds(&self) -> String {
        self.nodes
            .iter()
            .map(RedisServer::addr)
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    pub fn node_timeout_ms(&self) -> u64 {
        self.node_timeout_ms
    }

    pub fn node_by_port(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    pub fn node_by_port_mut(&mut self, port: u16) -> &mut RedisServer {
        self.nodes
            .iter_mut()
            .find(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// Nodes we have not killed (they may still be starting up after restart()).
    fn alive(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| n.pid().is_some())
    }

    /// Some live node that answers, for topology queries.
    pub fn any_node(&self) -> &RedisServer {
        self.alive()
            .find(|n| {
                RespClient::connect(n.addr())
                    .and_then(|mut c| c.cmd(&["PING"]))
                    .is_ok()
            })
            .expect("no live cluster node answers")
    }

    /// `CLUSTER KEYSLOT key` as computed by a real server.
    pub fn key_slot(&self, key: &str) -> u16 {
        let v = self.any_node().cmd(&["CLUSTER", "KEYSLOT", key]);
        v.as_int()
            .and_then(|i| u16::try_from(i).ok())
            .unwrap_or_else(|| panic!("CLUSTER KEYSLOT {key}: {v:?}"))
    }

    /// `CLUSTER MYID` of the node on `port`.
    pub fn node_id(&self, port: u16) -> String {
        self.node_by_port(port).cli(&["CLUSTER", "MYID"])
    }

    /// `CLUSTER SLOTS` as seen by the node on `port`.
    pub fn slots_seen_by(&self, port: u16) -> Result<Vec<SlotRange>, String> {
        let v = RespClient::connect(self.node_by_port(port).addr())
            .and_then(|mut c| c.cmd(&["CLUSTER", "SLOTS"]))
            .map_err(|e| format!("CLUSTER SLOTS on {port}: {e}"))?;
        parse_cluster_slots(&v)
    }

    /// `CLUSTER NODES` as seen by the node on `port`.
    pub fn nodes_seen_by(&self, port: u16) -> Result<Vec<NodeInfo>, String> {
        let v = RespClient::connect(self.node_by_port(port).addr())
            .and_then(|mut c| c.cmd(&["CLUSTER", "NODES"]))
            .map_err(|e| format!("CLUSTER NODES on {port}: {e}"))?;
        let text = v
            .as_str()
            .ok_or_else(|| format!("CLUSTER NODES on {port}: {v:?}"))?;
        Ok(parse_cluster_nodes(text))
    }

    /// The slot map as seen by some live node.
    pub fn slot_map(&self) -> Vec<SlotRange> {
        let port = self.any_node().port();
        self.slots_seen_by(port).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Port of the primary owning `slot` (per some live node's view).
    pub fn primary_port_for_slot(&self, slot: u16) -> u16 {
        self.slot_map()
            .iter()
            .find(|r| r.start <= slot && slot <= r.end)
            .map(|r| r.primary)
            .unwrap_or_else(|| panic!("slot {slot} is not covered"))
    }

    /// The primary owning `slot`.
    pub fn primary_for_slot(&self, slot: u16) -> &RedisServer {
        self.node_by_port(self.primary_port_for_slot(slot))
    }

    /// The primary owning `key`'s slot.
    pub fn primary_for_key(&self, key: &str) -> &RedisServer {
        self.primary_for_slot(self.key_slot(key))
    }

    /// Keys held by all primaries together (`DBSIZE` on each).
    pub fn primaries_dbsize(&self) -> i64 {
        self.primary_ports()
            .iter()
            .map(|&p| {
                self.node_by_port(p)
                    .cmd(&["DBSIZE"])
                    .as_int()
                    .expect("DBSIZE")
            })
            .sum()
    }

    /// Ports of the current primaries (nodes flagged master that own slots).
    pub fn primary_ports(&self) -> Vec<u16> {
        let mut v: Vec<u16> = self.slot_map().iter().map(|r| r.primary).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Replicas of the primary on `primary_port` (per `CLUSTER NODES` of some live node).
    pub fn replicas_of(&self, primary_port: u16) -> Vec<&RedisServer> {
        let any = self.any_node().port();
        let nodes = self.nodes_seen_by(any).unwrap_or_else(|e| panic!("{e}"));
        let pid = nodes
            .iter()
            .find(|n| n.port == primary_port)
            .map(|n| n.id.clone())
            .unwrap_or_else(|| panic!("node {primary_port} unknown to node {any}"));
        nodes
            .iter()
            .filter(|n| n.master_id.as_deref() == Some(pid.as_str()))
            .map(|n| self.node_by_port(n.port))
            .collect()
    }

    /// A key (`{prefix}N`-style, no hash tag) that hashes to a slot owned by `primary_port`.
    pub fn key_on_node(&self, prefix: &str, primary_port: u16) -> String {
        let map = self.slot_map();
        let node = self.any_node();
        let mut c = node.client();
        for i in 0..100_000 {
            let key = format!("{prefix}{i}");
            let slot = c.q(&["CLUSTER", "KEYSLOT", &key]).as_int().unwrap_or(-1);
            if map.iter().any(|r| {
                r.primary == primary_port && i64::from(r.start) <= slot && slot <= i64::from(r.end)
            }) {
                return key;
            }
        }
        panic!("no key with prefix {prefix} maps to node {primary_port}");
    }

    /// Poll `check` every 50 ms until it returns true; panic with `what` (and
    /// the node states) after `timeout`.
    pub fn wait_until(&self, timeout: Duration, what: &str, mut check: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while !check(self) {
            if Instant::now() > deadline {
                panic!(
                    "timed out after {timeout:?} waiting for: {what}\n{}",
                    self.describe()
                );
            }
            thread::sleep(POLL);
        }
    }

    /// Wait until every node reports `cluster_state:ok`, all nodes agree on a
    /// `CLUSTER SLOTS` map covering all 16384 slots with the expected number
    /// of primaries and replicas, and every replica's master link is up.
    pub fn wait_healthy(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(last) = self.health_problem() else {
                return;
            };
            if std::env::var_os("REDCAR_IT_VERBOSE").is_some() {
                eprintln!("waiting for healthy cluster: {last}");
            }
            if Instant::now() > deadline {
                panic!(
                    "cluster not healthy after {timeout:?}: {last}\n{}",
                    self.describe()
                );
            }
            thread::sleep(POLL);
        }
    }

    /// `None` if healthy (see [`wait_healthy`](Self::wait_healthy)), else what is wrong.
    pub fn health_problem(&self) -> Option<String> {
        let mut reference: Option<(u16, Vec<SlotRange>)> = None;
        for n in &self.nodes {
            if n.pid().is_none() {
                return Some(format!("node {} is not running", n.port()));
            }
            let mut c = match RespClient::connect(n.addr()) {
                Ok(c) => c,
                Err(e) => return Some(format!("node {}: connect: {e}", n.port())),
            };
            let info = match c.cmd(&["CLUSTER", "INFO"]) {
                Ok(v) => v.to_text(),
                Err(e) => return Some(format!("node {}: CLUSTER INFO: {e}", n.port())),
            };
            if !info.contains("cluster_state:ok") {
                return Some(format!("node {}: cluster_state is not ok", n.port()));
            }
            let repl = match c.cmd(&["INFO", "replication"]) {
                Ok(v) => v.to_text(),
                Err(e) => return Some(format!("node {}: INFO replication: {e}", n.port())),
            };
            if repl.contains("role:slave") && !repl.contains("master_link_status:up") {
                return Some(format!("replica {}: master link not up", n.port()));
            }
            let slots = match c.cmd(&["CLUSTER", "SLOTS"]).map_err(|e| e.to_string()) {
                Ok(v) => match parse_cluster_slots(&v) {
                    Ok(s) => s,
                    Err(e) => return Some(format!("node {}: {e}", n.port())),
                },
                Err(e) => return Some(format!("node {}: CLUSTER SLOTS: {e}", n.port())),
            };
            let covered: usize = slots
                .iter()
                .map(|r| usize::from(r.end) - usize::from(r.start) + 1)
                .sum();
            if covered != SLOTS {
                return Some(format!("node {} sees {covered} slots covered", n.port()));
            }
            let mut prim: Vec<u16> = slots.iter().map(|r| r.primary).collect();
            prim.sort_unstable();
            prim.dedup();
            if prim.len() != self.primaries {
                return Some(format!(
                    "node {} sees {} primaries, expected {}",
                    n.port(),
                    prim.len(),
                    self.primaries
                ));
            }
            if let Some(r) = slots
                .iter()
                .find(|r| r.replicas.len() != self.replicas_per_primary)
            {
                return Some(format!(
                    "node {} sees {} replicas for slots {}-{}, expected {}",
                    n.port(),
                    r.replicas.len(),
                    r.start,
                    r.end,
                    self.replicas_per_primary
                ));
            }
            match &reference {
                None => reference = Some((n.port(), slots)),
                Some((rp, rs)) if *rs != slots => {
                    return Some(format!(
                        "nodes {rp} and {} disagree on CLUSTER SLOTS",
                        n.port()
                    ))
                }
                Some(_) => {}
            }
        }
        None
    }

    /// A multi-line description of every node's state, for panic messages.
    pub fn describe(&self) -> String {
        let mut s = String::from("cluster nodes:\n");
        for n in &self.nodes {
            let _ = write!(s, "  node {} (pid {:?}): ", n.port(), n.pid());
            if n.pid().is_none() {
                s.push_str("killed\n");
                continue;
            }
            match RespClient::connect_timeout(n.addr(), Duration::from_millis(500)) {
                Err(e) => {
                    let _ = writeln!(s, "unreachable: {e}");
                }
                Ok(mut c) => {
                    let _ = c.set_timeout(Duration::from_secs(2));
                    let info = c
                        .cmd(&["CLUSTER", "INFO"])
                        .map(|v| v.to_text())
                        .unwrap_or_default();
                    let repl = c
                        .cmd(&["INFO", "replication"])
                        .map(|v| v.to_text())
                        .unwrap_or_default();
                    let pick = |text: &str, k: &str| {
                        text.lines()
                            .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
                            .unwrap_or_else(|| "-".into())
                    };
                    let slots = c
                        .cmd(&["CLUSTER", "SLOTS"])
                        .map_err(|e| e.to_string())
                        .and_then(|v| parse_cluster_slots(&v));
                    let _ = writeln!(
                        s,
                        "state={} slots_assigned={} known_nodes={} epoch={} role={} master_link={}",
                        pick(&info, "cluster_state:"),
                        pick(&info, "cluster_slots_assigned:"),
                        pick(&info, "cluster_known_nodes:"),
                        pick(&info, "cluster_current_epoch:"),
                        pick(&repl, "role:"),
                        pick(&repl, "master_link_status:"),
                    );
                    match slots {
                        Ok(slots) => {
                            for r in slots {
                                let _ = writeln!(
                                    s,
                                    "      {}-{} -> {} replicas {:?}",
                                    r.start, r.end, r.primary, r.replicas
                                );
                            }
                        }
                        Err(e) => {
                            let _ = writeln!(s, "      CLUSTER SLOTS: {e}");
                        }
                    }
                }
            }
            let _ = writeln!(
                s,
                "      log tail:\n        {}",
                n.log_tail(5).replace('\n', "\n        ")
            );
        }
        s
    }

    /// Phase 1 of a slot migration: IMPORTING on `to`, MIGRATING on `from`.
    /// No keys are moved yet; requests for keys not on `from` now get `-ASK`.
    pub fn start_migration(&self, slot: u16, from: u16, to: u16) -> Migration {
        let m = Migration {
            slot,
            from,
            to,
            from_id: self.node_id(from),
            to_id: self.node_id(to),
        };
        let s = slot.to_string();
        expect_ok(
            self.node_by_port(to)
                .cmd(&["CLUSTER", "SETSLOT", &s, "IMPORTING", &m.from_id]),
            "SETSLOT IMPORTING",
        );
        expect_ok(
            self.node_by_port(from)
                .cmd(&["CLUSTER", "SETSLOT", &s, "MIGRATING", &m.to_id]),
            "SETSLOT MIGRATING",
        );
        m
    }

    /// Move specific keys of a started migration from `from` to `to` (MIGRATE ... KEYS).
    pub fn migrate_keys(&self, m: &Migration, keys: &[&[u8]]) {
        if keys.is_empty() {
            return;
        }
        let to_port = m.to.to_string();
        let mut args: Vec<&[u8]> = vec![
            b"MIGRATE",
            b"127.0.0.1",
            to_port.as_bytes(),
            b"",
            b"0",
            b"10000",
            b"KEYS",
        ];
        args.extend_from_slice(keys);
        let v = self
            .node_by_port(m.from)
            .client()
            .cmd(&args)
            .expect("MIGRATE");
        match &v {
            Value::Simple(s) if s == "OK" || s == "NOKEY" => {}
            other => panic!("MIGRATE slot {} {}->{}: {other:?}", m.slot, m.from, m.to),
        }
    }

    /// Move every key currently in the slot on `from` to `to`.
    pub fn migrate_all_keys(&self, m: &Migration) {
        let mut c = self.node_by_port(m.from).client();
        let slot = m.slot.to_string();
        loop {
            let v = c.q(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
            let keys: Vec<Vec<u8>> = v
                .as_array()
                .unwrap_or_else(|| panic!("GETKEYSINSLOT: {v:?}"))
                .iter()
                .filter_map(|k| k.as_bytes().map(<[u8]>::to_vec))
                .collect();
            if keys.is_empty() {
                return;
            }
            let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            self.migrate_keys(m, &refs);
        }
    }

    /// Phase 2: move all remaining keys, `SETSLOT NODE <to>` on the target, the
    /// source, then every other primary; wait until all live nodes agree.
    pub fn finish_migration(&self, m: Migration) {
        self.migrate_all_keys(&m);
        let s = m.slot.to_string();
        let setslot = ["CLUSTER", "SETSLOT", s.as_str(), "NODE", m.to_id.as_str()];
        expect_ok(
            self.node_by_port(m.to).cmd(&setslot),
            "SETSLOT NODE on target",
        );
        expect_ok(
            self.node_by_port(m.from).cmd(&setslot),
            "SETSLOT NODE on source",
        );
        for n in self.alive() {
            if n.port() == m.to || n.port() == m.from {
                continue;
            }
            let is_primary = n.info_field("replication", "role").as_deref() == Some("master");
            if is_primary {
                expect_ok(n.cmd(&setslot), "SETSLOT NODE on other primary");
            }
        }
        let what = format!(
            "all nodes to see slot {} owned by {} (from {})",
            m.slot, m.to, m.from
        );
        self.wait_until(Duration::from_secs(20), &what, |c| {
            c.alive().all(|n| {
                c.slots_seen_by(n.port())
                    .map(|map| {
                        map.iter()
                            .any(|r| r.start <= m.slot && m.slot <= r.end && r.primary == m.to)
                    })
                    .unwrap_or(false)
            })
        });
    }

    /// Full migration of one slot (with its keys) from primary `from` to primary `to`.
    pub fn migrate_slot(&self, slot: u16, from: u16, to: u16) {
        let m = self.start_migration(slot, from, to);
        self.finish_migration(m);
    }

    /// Manual failover: `CLUSTER FAILOVER` on the replica, then wait until all
    /// live nodes see it as the primary of its old primary's slots.
    pub fn failover(&self, replica_port: u16) {
        let map = self.slot_map();
        let old = self
            .nodes_seen_by(replica_port)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .find(|n| n.port == replica_port)
            .and_then(|n| n.master_id)
            .unwrap_or_else(|| panic!("node {replica_port} is not a replica"));
        let old_port = self
            .nodes_seen_by(replica_port)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .find(|n| n.id == old)
            .map(|n| n.port)
            .expect("old primary known");
        let slots: Vec<(u16, u16)> = map
            .iter()
            .filter(|r| r.primary == old_port)
            .map(|r| (r.start, r.end))
            .collect();
        expect_ok(
            self.node_by_port(replica_port)
                .cmd(&["CLUSTER", "FAILOVER"]),
            "CLUSTER FAILOVER",
        );
        let what = format!("{replica_port} to take over from {old_port}");
        self.wait_until(Duration::from_secs(20), &what, |c| {
            c.alive().all(|n| {
                c.slots_seen_by(n.port())
                    .map(|m| {
                        slots.iter().all(|(a, b)| {
                            m.iter()
                                .any(|r| r.start <= *a && *b <= r.end && r.primary == replica_port)
                        })
                    })
                    .unwrap_or(false)
            })
        });
    }
}

fn expect_ok(v: Value, what: &str) {
    if v != Value::Simple("OK".into()) {
        panic!("{what}: expected OK, got {v:?}");
    }
}

/// Parse a `CLUSTER SLOTS` reply (sorted by start slot; replicas sorted).
pub fn parse_cluster_slots(v: &Value) -> Result<Vec<SlotRange>, String> {
    let items = v
        .as_array()
        .ok_or_else(|| format!("CLUSTER SLOTS: unexpected reply {v:?}"))?;
    let mut out = Vec::with_capacity(items.len());
    for it in items {
        let parts = it
            .as_array()
            .filter(|p| p.len() >= 3)
            .ok_or_else(|| format!("CLUSTER SLOTS: bad entry {it:?}"))?;
        let num = |v: &Value| {
            v.as_int()
                .and_then(|i| u16::try_from(i).ok())
                .ok_or_else(|| format!("CLUSTER SLOTS: bad number {v:?}"))
        };
        let node_port = |v: &Value| {
            v.as_array()
                .filter(|a| a.len() >= 2)
                .ok_or_else(|| format!("CLUSTER SLOTS: bad node {v:?}"))
                .and_then(|a| num(&a[1]))
        };
        let mut replicas = parts[3..]
            .iter()
            .map(node_port)
            .collect::<Result<Vec<u16>, String>>()?;
        replicas.sort_unstable();
        out.push(SlotRange {
            start: num(&parts[0])?,
            end: num(&parts[1])?,
            primary: node_port(&parts[2])?,
            replicas,
        });
    }
    out.sort_by_key(|r| r.start);
    Ok(out)
}

/// Parse `CLUSTER NODES` text.
pub fn parse_cluster_nodes(text: &str) -> Vec<NodeInfo> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let port = f[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => {
                        let x = s.parse().ok()?;
                        Some((x, x))
                    }
                })
                .collect();
            Some(NodeInfo {
                id: f[0].to_string(),
                port,
                flags: f[2].split(',').map(str::to_string).collect(),
                master_id: (f[3] != "-").then(|| f[3].to_string()),
                link_connected: f[7] == "connected",
                slots,
            })
        })
        .collect()
}
