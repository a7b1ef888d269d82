//! `TlsCluster`: a Redis Cluster whose nodes speak TLS only (`--port 0 --tls-port P`, TLS on
//! the cluster bus and for replication), formed with `redis-cli --tls --cluster create` like
//! [`RedisCluster`](super::RedisCluster), with certificates from a [`Pki`].
//!
//! The harness talks to the nodes through `redis-cli --tls` (the plain [`RespClient`] cannot),
//! so this type offers only what the TLS tests need: node commands, slot ownership, moving an
//! empty slot.
//!
//! [`RespClient`]: super::RespClient

use std::thread;
use std::time::{Duration, Instant};

use super::cluster::{DEFAULT_NODE_TIMEOUT_MS, HEALTHY_TIMEOUT};
use super::server::{RedisServer, TlsNode};
use super::Pki;

const POLL: Duration = Duration::from_millis(100);

pub struct TlsCluster {
    nodes: Vec<RedisServer>,
    tls: TlsNode,
}

impl TlsCluster {
    /// `primaries` TLS-only primaries (no replicas), each with `tls-auth-clients` set to
    /// `auth_clients` (`yes`: clients must present a certificate signed by the CA).
    pub fn start(pki: &Pki, primaries: usize, auth_clients: &'static str) -> TlsCluster {
        let tls = TlsNode {
            ca: pki.path("ca.pem"),
            cert: pki.path("server.pem"),
            key: pki.path("server.key"),
            client_cert: pki.path("client.pem"),
            client_key: pki.path("client.key"),
            auth_clients,
        };
        let nodes: Vec<RedisServer> = thread::scope(|s| {
            let handles: Vec<_> = (0..primaries)
                .map(|_| {
                    let tls = &tls;
                    s.spawn(move || {
                        RedisServer::start_tls_cluster_node(DEFAULT_NODE_TIMEOUT_MS, tls)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("TLS cluster node start panicked"))
                .collect()
        });
        let mut args = vec!["--cluster".to_string(), "create".to_string()];
        args.extend(nodes.iter().map(RedisServer::addr));
        args.push("--cluster-yes".to_string());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let port = nodes[0].port();
        let created = tls.cli(port, &args).unwrap_or_else(|e| e);
        assert!(
            created.contains("[OK] All 16384 slots covered"),
            "redis-cli --tls --cluster create failed:\n{created}"
        );
        let cluster = TlsCluster { nodes, tls };
        cluster.wait_healthy();
        cluster
    }

    /// Comma-separated `127.0.0.1:TLS_PORT` of every node.
    pub fn seeds(&self) -> String {
        let addrs: Vec<String> = self.nodes.iter().map(RedisServer::addr).collect();
        addrs.join(",")
    }

    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// One command on the node at `port` over TLS, its reply as `redis-cli` prints it.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        self.tls
            .cli(port, args)
            .unwrap_or_else(|e| panic!("redis-cli --tls -p {port} {args:?}: {e}"))
            .trim()
            .to_string()
    }

    /// `CLUSTER KEYSLOT key`.
    pub fn key_slot(&self, key: &str) -> u16 {
        let reply = self.cli(self.nodes[0].port(), &["CLUSTER", "KEYSLOT", key]);
        reply
            .parse()
            .unwrap_or_else(|_| panic!("CLUSTER KEYSLOT {key}: {reply}"))
    }

    /// The port of the node that owns `slot`, as the node at `asked` sees it.
    pub fn owner_seen_by(&self, asked: u16, slot: u16) -> Option<u16> {
        let nodes = self.tls.cli(asked, &["CLUSTER", "NODES"]).ok()?;
        nodes.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let port = fields.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
            let owns = fields.iter().skip(8).any(|range| {
                let (start, end) = range.split_once('-').unwrap_or((range, range));
                match (start.parse::<u16>(), end.parse::<u16>()) {
                    (Ok(start), Ok(end)) => start <= slot && slot <= end,
                    _ => false,
                }
            });
            owns.then_some(port)
        })
    }

    /// Gives the (empty) `slot` to the node at `to` as `redis-cli --cluster reshard` would:
    /// IMPORTING on it, MIGRATING on the owner, then `SETSLOT … NODE` on the new owner (which
    /// bumps its config epoch), then on every other node; waits until all agree.
    pub fn move_empty_slot(&self, slot: u16, to: u16) {
        let from = self
            .owner_seen_by(to, slot)
            .unwrap_or_else(|| panic!("nobody owns slot {slot}"));
        let to_id = self.cli(to, &["CLUSTER", "MYID"]);
        let from_id = self.cli(from, &["CLUSTER", "MYID"]);
        let slot_text = slot.to_string();
        let importing = ["CLUSTER", "SETSLOT", &slot_text, "IMPORTING", &from_id];
        assert_eq!(self.cli(to, &importing), "OK", "SETSLOT IMPORTING");
        let migrating = ["CLUSTER", "SETSLOT", &slot_text, "MIGRATING", &to_id];
        assert_eq!(self.cli(from, &migrating), "OK", "SETSLOT MIGRATING");
        let setslot = ["CLUSTER", "SETSLOT", &slot_text, "NODE", &to_id];
        let mut order = vec![to];
        order.extend(self.ports().into_iter().filter(|p| *p != to));
        for port in order {
            assert_eq!(self.cli(port, &setslot), "OK", "SETSLOT NODE on {port}");
        }
        self.wait_until(&format!("every node sees slot {slot} on {to}"), |c| {
            c.ports()
                .into_iter()
                .all(|p| c.owner_seen_by(p, slot) == Some(to))
        });
    }

    /// Every node says `cluster_state:ok` and knows all the others.
    pub fn wait_healthy(&self) {
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        self.wait_until("a healthy TLS cluster", |c| {
            c.ports().into_iter().all(|p| {
                let info = c.tls.cli(p, &["CLUSTER", "INFO"]).unwrap_or_default();
                info.contains("cluster_state:ok") && info.contains(&known)
            })
        });
    }

    fn wait_until(&self, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + HEALTHY_TIMEOUT;
        while !check(self) {
            assert!(
                Instant::now() < deadline,
                "timed out after {HEALTHY_TIMEOUT:?} waiting for {what}"
            );
            thread::sleep(POLL);
        }
    }
}
