//! Every node redcar talks to, by address, so a redirect to a new node reuses its connections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{ConnectLimit, DedicatedPool, Node, UpstreamConfig};
use crate::metrics::Metrics;
use crate::protocol::Limits;

/// Address → node. Looked up on topology refresh and on redirects, not per command (the slot map
/// snapshot holds `Arc<Node>` directly).
pub struct Upstreams {
    config: UpstreamConfig,
    limits: Limits,
    metrics: Arc<Metrics>,
    nodes: Mutex<HashMap<Arc<str>, Arc<Node>>>,
    dedicated: DedicatedPool,
    connect_limit: Arc<ConnectLimit>,
}

impl Upstreams {
    pub fn new(config: UpstreamConfig, limits: Limits, metrics: Arc<Metrics>) -> Upstreams {
        let connect_limit = Arc::new(ConnectLimit::new(config.max_connects_per_second));
        Upstreams {
            dedicated: DedicatedPool::new(
                config.clone(),
                limits.clone(),
                metrics.clone(),
                connect_limit.clone(),
            ),
            connect_limit,
            config,
            limits,
            metrics,
            nodes: Mutex::new(HashMap::new()),
        }
    }

    /// The node at `addr`, created (with lazily connecting connections) on first use.
    pub fn node(&self, addr: &str) -> Arc<Node> {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = nodes.get(addr) {
            return node.clone();
        }
        let metrics = self.metrics.node(addr);
        let node = Arc::new(Node::spawn(
            addr,
            &self.config,
            &self.limits,
            metrics,
            &self.connect_limit,
        ));
        nodes.insert(node.addr().clone(), node.clone());
        node
    }

    /// Connections lent to one client at a time (blocking commands, WATCH, pub/sub).
    pub fn dedicated(&self) -> &DedicatedPool {
        &self.dedicated
    }

    /// Forgets nodes for which `keep` is false; their connections close once no command or
    /// snapshot still holds them.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut nodes = self.nodes.lock().unwrap_or_else(|e| e.into_inner());
        nodes.retain(|addr, _| keep(addr));
    }
}
