//! Keeps the slot map fresh: asks a known node for `CLUSTER SLOTS` periodically and on request
//! (after a MOVED or a node failure), and swaps in the new snapshot atomically.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use rand::seq::SliceRandom;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use super::parse::parse_cluster_slots;
use super::{ClusterConfig, Topology};
use crate::metrics::Metrics;
use crate::protocol::{Frame, Limits};
use crate::upstream::Upstreams;

const CLUSTER_SLOTS: &[u8] = b"*2\r\n$7\r\nCLUSTER\r\n$5\r\nSLOTS\r\n";

/// What the rest of redcar sees of the cluster: the current snapshot and a way to ask for a
/// fresher one.
pub struct ClusterState {
    topology: ArcSwapOption<Topology>,
    /// Wakes the refresher early; repeated requests before it runs coalesce into one refresh.
    refresh_wanted: Notify,
    /// Latched once a map covering all 16384 slots has been seen (readiness).
    ready: AtomicBool,
    /// Bumped on every adopted snapshot, so waiters can sleep until the map changes.
    version: watch::Sender<u64>,
}

impl ClusterState {
    pub fn new() -> ClusterState {
        ClusterState {
            topology: ArcSwapOption::empty(),
            refresh_wanted: Notify::new(),
            ready: AtomicBool::new(false),
            version: watch::channel(0).0,
        }
    }

    /// The current snapshot (lock-free).
    pub fn topology(&self) -> Option<Arc<Topology>> {
        self.topology.load_full()
    }

    /// Asks the refresher to run soon.
    pub fn request_refresh(&self) {
        self.refresh_wanted.notify_one();
    }

    /// True once a complete slot map has been known.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Resolves when a new snapshot is adopted (or immediately if one was adopted since `seen`).
    pub async fn changed_since(&self, seen: u64) -> u64 {
        let mut rx = self.version.subscribe();
        let result = rx.wait_for(|v| *v != seen).await;
        result.map_or(seen, |v| *v)
    }

    /// The number of snapshots adopted so far.
    pub fn version(&self) -> u64 {
        *self.version.borrow()
    }

    fn adopt(&self, topology: Topology) {
        if topology.is_complete() {
            self.ready.store(true, Ordering::Release);
        }
        self.topology.store(Some(Arc::new(topology)));
        self.version.send_modify(|v| *v += 1);
    }
}

impl Default for ClusterState {
    fn default() -> Self {
        Self::new()
    }
}

/// The refresh task.
pub struct Refresher {
    pub state: Arc<ClusterState>,
    pub upstreams: Arc<Upstreams>,
    pub config: ClusterConfig,
    pub limits: Limits,
    pub metrics: Arc<Metrics>,
}

impl Refresher {
    /// Refreshes now, then every `refresh_interval` or on request, until `shutdown` fires.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            let started = Instant::now();
            self.refresh_once().await;
            let next = started + self.config.refresh_min_gap;
            tokio::select! {
                _ = tokio::time::sleep(self.config.refresh_interval) => {}
                _ = self.state.refresh_wanted.notified() => {}
                _ = shutdown.changed() => return,
            }
            tokio::time::sleep_until(next).await;
        }
    }

    /// Asks known nodes (in random order), then the seeds, until one gives a usable map.
    pub async fn refresh_once(&self) -> bool {
        let complete = self.try_refresh().await;
        self.metrics.refresh(complete);
        complete
    }

    async fn try_refresh(&self) -> bool {
        let current = self.state.topology();
        let mut candidates: Vec<String> = current
            .as_ref()
            .map(|t| t.addrs().map(|a| a.to_string()).collect())
            .unwrap_or_default();
        candidates.shuffle(&mut rand::rng());
        for seed in &self.config.seeds {
            if !candidates.contains(seed) {
                candidates.push(seed.clone());
            }
        }
        let mut partial = None;
        for addr in candidates {
            match self.fetch(&addr).await {
                Ok(topology) if topology.is_complete() => {
                    self.publish(current.as_deref(), topology);
                    return true;
                }
                Ok(topology) => {
                    tracing::warn!(node = %addr, owned = topology.owned_slots(), "partial slot map");
                    partial.get_or_insert(topology);
                }
                Err(reason) => tracing::warn!(node = %addr, %reason, "topology refresh failed"),
            }
        }
        // A partial map is better than none, but never replaces a complete one.
        if let Some(topology) = partial {
            if current.as_ref().is_none_or(|c| !c.is_complete()) {
                self.publish(current.as_deref(), topology);
            }
        }
        false
    }

    async fn fetch(&self, addr: &str) -> Result<Topology, String> {
        let node = self.upstreams.node(addr);
        let call = node.call(Bytes::from_static(CLUSTER_SLOTS), false, 0);
        let reply = match tokio::time::timeout(self.config.refresh_timeout, call).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no reply within {:?}", self.config.refresh_timeout)),
        };
        let frame = Frame::from_bytes(reply, &self.limits).map_err(|e| e.to_string())?;
        let ranges = parse_cluster_slots(&frame, addr)?;
        Ok(Topology::build(&ranges, &self.upstreams, Arc::from(addr)))
    }

    fn publish(&self, previous: Option<&Topology>, topology: Topology) {
        let summary = topology.summary();
        if previous.is_none_or(|p| p.summary() != summary) {
            tracing::info!(source = topology.source(), slots = %summary, "adopted new slot map");
        }
        let seeds = &self.config.seeds;
        let keep: Vec<Arc<str>> = topology.addrs().cloned().collect();
        self.upstreams.retain(|addr| {
            keep.iter().any(|k| k.as_ref() == addr) || seeds.iter().any(|s| s == addr)
        });
        self.state.adopt(topology);
    }
}
