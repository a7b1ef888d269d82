//! What the wiring reads off a `Config`: whether any read goes to replicas, and the redacted
//! copy `/config` shows.

use crate::config::Config;

/// True when some read policy (`router.read_policy` or a route's) reads from replicas: node
/// connections then send READONLY first.
/// Read at start-up to build the node pools and by reloads, which refuse to flip it (a restart is
/// needed, since READONLY is sent only when a connection opens).
pub(super) fn reads_replicas(config: &Config) -> bool {
    config.router.read_policy.uses_replicas()
        || config
            .routes
            .iter()
            .any(|r| r.read_policy.is_some_and(|p| p.uses_replicas()))
}

/// The configuration as `/config` shows it. Passwords (`auth`) serialize as `(redacted)`, so no
/// secret leaves the process.
/// Every `Secret` serializes as `(redacted)`, whatever section holds it (`auth`, `upstream`,
/// `admin.token`, backends). Serializing a `Config` cannot fail in practice; `null` is the fallback
/// rather than a panic.
pub(super) fn redacted(config: &Config) -> serde_json::Value {
    serde_json::to_value(config).unwrap_or(serde_json::Value::Null)
}
