//! Every node redcar talks to, by address, so a redirect to a new node reuses its connections.
//!
//! What holds: there is at most one [`Node`] per address for as long as anything holds it, so
//! every path to a node (the slot map, a MOVED to a node not in the map yet, the refresher's
//! fetches) shares its connections, health and series; a node leaves the registry once the map no
//! longer names it, it is no seed and nothing else holds it, and its series go with it. The
//! settings every node shares are taken once, with the first node, which is why the worker
//! runtimes and loops must be set before any node exists.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::node::NodeShared;
use super::{ConnectLimit, DedicatedPool, Node, OutlierConfig, UpstreamConfig, UpstreamMetrics};
use crate::metrics::Metrics;
use crate::protocol::{Limits, Protocol};

/// New nodes from this many on are made apart ([`Upstreams::make_nodes`]): a small map's few
/// are not worth a thread.
const MAKE_APART: usize = 64;

/// Address → node. Looked up on topology refresh and on redirects, not per command (the slot map
/// snapshot holds `Arc<Node>` directly).
pub(crate) struct Upstreams {
    /// `upstream:` as at start-up; what a node's connections are made with.
    config: UpstreamConfig,
    /// Parse limits for node replies.
    limits: Limits,
    /// The metrics hub: its event log and groups go to every node.
    metrics: Arc<Metrics>,
    /// This module's series in `metrics`: each node's are made when the node is.
    series: Arc<UpstreamMetrics>,
    /// Every known node by address; locked on look-up by address (refreshes, redirects), never per
    /// command.
    nodes: Mutex<HashMap<Arc<str>, Arc<Node>>>,
    /// Connections lent for blocking commands, WATCH and subscriptions, bounded over all nodes.
    dedicated: DedicatedPool,
    /// `upstream.max_connects_per_second`, shared by every connection of every node.
    connect_limit: Arc<ConnectLimit>,
    /// What new pipelined connections send first: AUTH, and READONLY when a read policy may
    /// use replicas.
    handshake: super::Handshake,
    /// The same for the RESP3 connections a node opens for RESP3 clients.
    handshake3: super::Handshake,
    /// Some read policy reads replicas (READONLY is sent): replicas serve, never on standby.
    readonly: bool,
    /// `upstream.tls`: the rustls client settings, when on.
    tls: Option<super::UpstreamTls>,
    /// Bumped on every node ejection.
    ejections: Arc<watch::Sender<u64>>,
    /// `upstream.outlier`, shared with every node's health; a reload swaps it
    /// ([`Upstreams::set_outlier`]). `config.outlier` keeps the start-up value.
    outlier: Arc<ArcSwap<OutlierConfig>>,
    /// `threading: per-core`: each worker's runtime, which runs that worker's connections to
    /// every node. Set once at start-up, before any node exists.
    workers: std::sync::OnceLock<Arc<[tokio::runtime::Handle]>>,
    /// Per core with event loops: each worker's loop, which drives that worker's connections
    /// (instead of connection tasks on `workers`). Set once at start-up, before any node.
    loops: std::sync::OnceLock<Arc<[Arc<crate::reactor::Remote>]>>,
    /// Where every node's invalidations go (client-side caching, see `tracking`).
    tracking: Arc<super::TrackingFeed>,
    /// What every node shares, made with the first node (after `workers` and `loops`).
    shared: std::sync::OnceLock<Arc<NodeShared>>,
}

impl Upstreams {
    /// `readonly`: pipelined connections send `READONLY` first, so replicas serve reads. Fails
    /// when the upstream password or a TLS file cannot be read (`upstream.password`,
    /// `upstream.tls.*`).
    pub(crate) fn new(
        config: UpstreamConfig,
        limits: Limits,
        metrics: Arc<Metrics>,
        readonly: bool,
    ) -> Result<Upstreams, String> {
        let credentials = config.credentials()?;
        let tls = config.tls.connector()?;
        let handshake = |readonly, protocol| {
            super::Handshake::new(credentials.as_ref(), readonly, tls.is_some(), protocol)
        };
        // Dedicated connections carry blocking commands, WATCH and subscriptions for the
        // primaries: they authenticate but never read from replicas.
        let dedicated_handshakes = [
            handshake(false, Protocol::Resp2),
            handshake(false, Protocol::Resp3),
        ];
        let handshake3 = handshake(readonly, Protocol::Resp3);
        let handshake = handshake(readonly, Protocol::Resp2);
        let connect_limit = Arc::new(ConnectLimit::new(config.max_connects_per_second));
        Ok(Upstreams {
            dedicated: DedicatedPool::new(
                config.clone(),
                limits.clone(),
                metrics.clone(),
                connect_limit.clone(),
                dedicated_handshakes,
                tls.clone(),
            ),
            connect_limit,
            outlier: Arc::new(ArcSwap::from_pointee(config.outlier.clone())),
            config,
            limits,
            series: metrics.group(),
            metrics,
            nodes: Mutex::new(HashMap::new()),
            handshake,
            handshake3,
            readonly,
            tls,
            ejections: Arc::new(watch::channel(0).0),
            workers: std::sync::OnceLock::new(),
            loops: std::sync::OnceLock::new(),
            tracking: Arc::default(),
            shared: std::sync::OnceLock::new(),
        })
    }

    /// `threading: per-core`: every node's `connections_per_node` connections are dealt out to
    /// the workers' runtimes in turn, and a session uses one on its own worker when there is one.
    /// Call before the first node is created; a second call is ignored.
    pub(crate) fn set_workers(&self, handles: Arc<[tokio::runtime::Handle]>) {
        let _ = self.workers.set(handles);
    }

    /// Per core with event loops: worker `i`'s connections are driven by `loops[i]` (see
    /// `upstream::loop_conn`). Call with [`set_workers`](Self::set_workers), before any node.
    pub(crate) fn set_loops(&self, loops: Arc<[Arc<crate::reactor::Remote>]>) {
        let _ = self.loops.set(loops);
    }

    /// Default upstream settings and fresh metrics, for unit tests that need real node handles;
    /// `readonly` as in [`Upstreams::new`].
    #[cfg(test)]
    pub(crate) fn for_tests(readonly: bool) -> (Upstreams, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new(&crate::metrics::MetricsConfig::default()));
        let upstreams = Upstreams::new(
            UpstreamConfig::default(),
            Limits::default(),
            metrics.clone(),
            readonly,
        )
        .expect("no upstream credentials or TLS files to read");
        (upstreams, metrics)
    }

    /// True when the nodes are reached over TLS (`upstream.tls`): topology replies then name
    /// their TLS ports.
    pub(crate) fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// `upstream.connect_timeout` (also bounds other sources' connects, e.g. to the sentinels).
    pub(crate) fn connect_timeout(&self) -> std::time::Duration {
        self.config.connect_timeout
    }

    /// The node at `addr`, created on first use (its connections and series are made by its
    /// first command).
    pub(crate) fn node(&self, addr: &str) -> Arc<Node> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = nodes.get(addr) {
            return node.clone();
        }
        let shared = self.shared.get_or_init(|| {
            Arc::new(NodeShared {
                config: self.config.clone(),
                limits: self.limits.clone(),
                connect_limit: self.connect_limit.clone(),
                ejections: self.ejections.clone(),
                handshake: self.handshake.clone(),
                handshake3: self.handshake3.clone(),
                tls: self.tls.clone(),
                outlier: self.outlier.clone(),
                workers: self.workers.get().cloned(),
                loops: self.loops.get().cloned(),
                tracking: self.tracking.clone(),
                series: self.series.clone(),
                events: self.metrics.events.clone(),
            })
        });
        let node = Arc::new(Node::new(addr, shared));
        nodes.insert(node.addr().clone(), node.clone());
        node
    }

    /// Registers the nodes at `addrs` that are not yet, as [`node`](Self::node) would. Many new
    /// nodes at once (a big map's first adoption) are made on a thread of their own, which ends
    /// right after: the allocator then packs their handles into pages of their own, instead of
    /// scattering them into the holes that parsing the map left in this thread's pages, where
    /// each would keep a page of freed parse scratch resident (about doubling what a known node
    /// costs in RSS).
    pub(crate) fn make_nodes<'a>(&self, addrs: impl IntoIterator<Item = &'a str>) {
        let new: Vec<&str> = {
            let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
            addrs
                .into_iter()
                .filter(|a| !nodes.contains_key(*a))
                .collect()
        };
        if new.len() < MAKE_APART {
            return;
        }
        let runtime = tokio::runtime::Handle::try_current().ok();
        let made = std::thread::scope(|scope| {
            let make = scope.spawn(|| {
                let _entered = runtime.as_ref().map(tokio::runtime::Handle::enter);
                for addr in new {
                    self.node(addr);
                }
            });
            make.join()
        });
        if let Err(panic) = made {
            std::panic::resume_unwind(panic);
        }
    }

    /// Where the nodes' invalidations for tracking clients go (`CLIENT TRACKING`).
    pub(crate) fn tracking(&self) -> &Arc<super::TrackingFeed> {
        &self.tracking
    }

    /// Connections lent to one client at a time (blocking commands, WATCH, pub/sub).
    pub(crate) fn dedicated(&self) -> &DedicatedPool {
        &self.dedicated
    }

    /// Every node known right now (for health checks and the admin API).
    pub(crate) fn all(&self) -> Vec<Arc<Node>> {
        let nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        nodes.values().cloned().collect()
    }

    /// Changes whenever any node is ejected.
    pub(crate) fn ejections(&self) -> watch::Receiver<u64> {
        self.ejections.subscribe()
    }

    /// The outlier-detection settings every node uses now.
    pub(crate) fn outlier(&self) -> Arc<OutlierConfig> {
        self.outlier.load_full()
    }

    /// Reloaded outlier settings: every node uses them from its next failure or health check;
    /// a node already ejected keeps the ejection time it was given.
    pub(crate) fn set_outlier(&self, config: OutlierConfig) {
        self.outlier.store(Arc::new(config));
    }

    /// True when some read policy reads replicas: a replica then serves reads and is never put
    /// on standby.
    pub(crate) fn reads_replicas(&self) -> bool {
        self.readonly
    }

    /// Forgets nodes for which `keep` is false and that nothing else holds; their connections
    /// close once no command or snapshot still holds them. Call it after adopting the new map;
    /// `held` counts the handles the caller itself still holds on a node (the old map it is
    /// replacing), so a node only the old map had goes now. A node held elsewhere (another
    /// backend's map, a command in flight) stays registered, so a redirect to it finds its
    /// connections instead of opening a second set; a later call forgets it once it is free.
    pub(crate) fn retain(&self, keep: impl Fn(&str) -> bool, held: impl Fn(&str) -> usize) {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        nodes.retain(|addr, node| {
            let kept = keep(addr) || Arc::strong_count(node) > 1 + held(addr);
            if !kept {
                self.series.forget_node(addr);
            }
            kept
        });
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
