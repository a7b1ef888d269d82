//! A test responder for big topologies: the nodes of a [`Model`] (1,000 of them, say) listen on
//! loopback addresses of their own (`127.1.x.y`, one port for all) and answer the topology
//! commands — `CLUSTER SHARDS`, `SLOTS`, `NODES`, `INFO`, `MYID`, redcar's digest script — with
//! replies shaped exactly like a redis-server 7.0 node's (`replies.rs`, checked against a real
//! cluster in `tests/it/bigmap.rs`), and `PING`, `READONLY`, `INFO replication`, `COMMAND` as
//! a node would. They serve no data: a model may also hold real redis-server nodes (their own
//! addresses, not served here) for the slots where data moves, which [`Responder::follow`]
//! keeps in step with the real cluster's view (a failover there bumps the epoch here, as it
//! would in a real cluster of that size).
//!
//! No mock of Redis's data path: only what a cluster's topology looks like from outside. It
//! counts what each node is asked (commands, bytes, connections), which is how the tests and
//! `bench/bigmap.sh` see what redcar costs a big cluster. Self-contained (no other support
//! module), so `examples/cluster_responder.rs` builds it into a binary for the bench.

pub mod model;
pub mod replies;
pub mod serve;

use std::collections::HashMap;
use std::net::TcpListener as StdListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use self::model::{Model, Node, Role};
use self::serve::{Counters, Shared};

/// The responder: its runtime (dropping it closes every listener) and what the nodes share.
pub struct Responder {
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    served: Vec<String>,
}

/// Where fake node `i` listens: its own loopback address, `port` for all.
pub fn fake_host(i: usize) -> String {
    format!("127.1.{}.{}", i / 250, 1 + i % 250)
}

/// Binds `count` listeners on `fake_host(0..count)` at one port free on all of them.
pub fn bind_fakes(count: usize) -> (u16, Vec<StdListener>) {
    let mut seed = serve::now_ms() ^ u64::from(std::process::id());
    for _ in 0..200 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let port = 23_000 + (seed % 9_000) as u16;
        let bound: Result<Vec<StdListener>, _> = (0..count)
            .map(|i| StdListener::bind((fake_host(i).as_str(), port)))
            .collect();
        if let Ok(listeners) = bound {
            return (port, listeners);
        }
    }
    panic!("no port free on all {count} fake node addresses");
}

impl Responder {
    /// Serves the nodes of `model` found in `listeners` (by address); the others are real.
    pub fn start(model: Model, listeners: Vec<StdListener>) -> Responder {
        let served: Vec<String> = listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| a.to_string())
            .collect();
        let counters: HashMap<String, Arc<Counters>> = served
            .iter()
            .map(|a| (a.clone(), Arc::new(Counters::default())))
            .collect();
        let shared = Arc::new(Shared {
            model: Mutex::new(model),
            counters,
            scripts: Mutex::new(Vec::new()),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("responder runtime");
        for (listener, addr) in listeners.into_iter().zip(&served) {
            let shared = shared.clone();
            let addr = addr.clone();
            runtime.spawn(async move {
                listener.set_nonblocking(true).expect("nonblocking");
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                serve::listen(listener, addr, shared).await;
            });
        }
        Responder {
            shared,
            runtime: Some(runtime),
            served,
        }
    }

    /// `shards` primaries with `replicas` replicas each on fake addresses, the slots cut into
    /// `fragments` ranges per shard, all served.
    pub fn fragmented(shards: usize, replicas: usize, fragments: usize) -> Responder {
        let (port, listeners) = bind_fakes(shards * (1 + replicas));
        let model = Model::fragmented(shards, replicas, fragments, 49, |i| (fake_host(i), port));
        Responder::start(model, listeners)
    }

    /// Addresses of the nodes served here.
    pub fn served(&self) -> &[String] {
        &self.served
    }

    /// `n` primaries' addresses, to give redcar as seeds.
    pub fn seeds(&self, n: usize) -> String {
        let model = self.model();
        let primaries: Vec<String> = model
            .primaries()
            .map(Node::addr)
            .filter(|a| self.served.contains(a))
            .take(n)
            .collect();
        primaries.join(",")
    }

    pub fn model(&self) -> Model {
        self.shared
            .model
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes the cluster: every node answers from the changed model from now on.
    pub fn update(&self, change: impl FnOnce(&mut Model)) {
        let mut model = self.shared.model.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut model);
    }

    /// What the node at `addr` saw (all zero for a node not served here).
    pub fn counters(&self, addr: &str) -> Arc<Counters> {
        self.shared.counters.get(addr).cloned().unwrap_or_default()
    }

    /// Summed over every node served: (connections, commands, bytes in, bytes out).
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let mut t = (0, 0, 0, 0);
        for c in self.shared.counters.values() {
            t.0 += c.connections.load(Relaxed);
            t.1 += c.total();
            t.2 += c.bytes_in.load(Relaxed);
            t.3 += c.bytes_out.load(Relaxed);
        }
        t
    }

    /// Commands of this name summed over every node served.
    pub fn count(&self, name: &str) -> u64 {
        self.shared.counters.values().map(|c| c.count(name)).sum()
    }

    /// Keeps the model's real nodes (those not served here) in step with the real cluster as
    /// the first of `real` that answers sees it, every 50 ms: roles, slots, failures. A node
    /// promoted there takes a new epoch here, above every fake shard's.
    pub fn follow(&self, real: Vec<String>) {
        let shared = self.shared.clone();
        let served = self.served.clone();
        thread::spawn(move || loop {
            if Arc::strong_count(&shared) == 1 {
                return;
            }
            if let Some(text) = real.iter().find_map(|addr| cluster_nodes(addr)) {
                let mut model = shared.model.lock().unwrap_or_else(|e| e.into_inner());
                apply_real_view(&mut model, &text, &served);
            }
            thread::sleep(Duration::from_millis(50));
        });
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// `CLUSTER NODES` of a real node, over a plain socket.
fn cluster_nodes(addr: &str) -> Option<String> {
    use std::io::{BufRead, BufReader, Read, Write};
    let addr: std::net::SocketAddr = addr.parse().ok()?;
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    stream
        .write_all(b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nNODES\r\n")
        .ok()?;
    let mut reader = BufReader::new(stream);
    let mut header = String::new();
    reader.read_line(&mut header).ok()?;
    let len: usize = header.trim_end().strip_prefix('$')?.parse().ok()?;
    let mut text = vec![0u8; len];
    reader.read_exact(&mut text).ok()?;
    String::from_utf8(text).ok()
}

/// Applies a real node's `CLUSTER NODES` to the model's nodes that are not served here.
pub fn apply_real_view(model: &mut Model, text: &str, served: &[String]) {
    for line in text.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let [id, _addr, flags, master, _, _, _, _, slots @ ..] = fields.as_slice() else {
            continue;
        };
        let flags: Vec<&str> = flags.split(',').collect();
        let slots: Vec<(u16, u16)> = slots
            .iter()
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| {
                let (a, b) = s.split_once('-').unwrap_or((s, s));
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        let current = model.current_epoch;
        let Some(node) = model.node_mut(id) else {
            continue;
        };
        if served.contains(&node.addr()) {
            continue;
        }
        node.failed = flags.contains(&"fail");
        let role = if flags.contains(&"master") {
            match &node.role {
                Role::Primary { epoch, slots: s } if *s == slots => Role::Primary {
                    epoch: *epoch,
                    slots,
                },
                _ => Role::Primary {
                    epoch: current + 1,
                    slots,
                },
            }
        } else {
            Role::Replica {
                of: master.to_string(),
            }
        };
        if let Role::Primary { epoch, .. } = &role {
            model.current_epoch = model.current_epoch.max(*epoch);
        }
        if let Some(node) = model.node_mut(id) {
            node.role = role;
        }
    }
}
