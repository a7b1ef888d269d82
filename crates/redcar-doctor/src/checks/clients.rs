//! Checks of client-connection settings: idle timeouts that cut pooled connections, TCP
//! keepalive off, and connections nearing maxclients.

use crate::model::{Finding, NodeData, Severity};

/// Idle timeouts shorter than this close a sidecar's pooled connections during quiet periods.
const IDLE_TIMEOUT_MIN_SECS: u64 = 300;
/// Share of maxclients in use above which new connections are at risk.
const MAXCLIENTS_WARN_RATIO: f64 = 0.8;

/// `timeout N` closes connections idle for N seconds, including redcar's pooled ones, which
/// then pay a reconnect on the next command.
pub(crate) fn idle_timeout(node: &NodeData) -> Option<Finding> {
    let secs = node.config_u64("timeout")?;
    (secs > 0 && secs < IDLE_TIMEOUT_MIN_SECS).then(|| {
        Finding::node(
            Severity::Info,
            node,
            format!("timeout {secs}: idle client connections (pools, redcar's) are closed after {secs} s and must reconnect"),
            "CONFIG SET timeout 0 (or >= 300) and let tcp-keepalive find dead peers",
        )
    })
}

/// `tcp-keepalive 0`: connections of crashed clients or dropped NAT entries are never noticed.
pub(crate) fn tcp_keepalive(node: &NodeData) -> Option<Finding> {
    (node.config_u64("tcp-keepalive")? == 0).then(|| {
        Finding::node(
            Severity::Warn,
            node,
            "tcp-keepalive 0: dead peers' connections stay open forever and count against maxclients",
            "CONFIG SET tcp-keepalive 300 (the default)",
        )
    })
}

/// More than 80% of `maxclients` connected: new connections will soon be refused.
pub(crate) fn maxclients(node: &NodeData) -> Option<Finding> {
    let max = node.config_u64("maxclients")?;
    let connected = node.info_u64("connected_clients")?;
    let used = connected as f64 / max.max(1) as f64;
    (used > MAXCLIENTS_WARN_RATIO).then(|| {
        Finding::node(
            Severity::Warn,
            node,
            format!("{connected} of maxclients {max} connected ({:.0}%): new connections will be refused", used * 100.0),
            "find who holds them (CLIENT LIST: age, idle, name); pool connections, or raise maxclients and ulimit -n",
        )
    })
}
