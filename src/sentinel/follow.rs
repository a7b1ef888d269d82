//! The query loop: asks the sentinels for the primary, its config epoch and its healthy replicas
//! every `query_interval`, on a `+switch-master` event and when the router wants a refresh, and
//! adopts a one-shard topology whenever the answer changes.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::conn::{SentinelAuth, SentinelConn};
use super::reply::{view, View};
use crate::cluster::TopologyMetrics;
use crate::cluster::{ClusterState, Topology};
use crate::metrics::{EventKind, Metrics};
use crate::upstream::Upstreams;

/// Shortest pause between two queries: a burst of `-READONLY` replies asks for many refreshes,
/// and one query a little later answers them all.
/// Every round lasts at least this long, so a `query_interval` below it acts as `MIN_GAP`.
const MIN_GAP: Duration = Duration::from_millis(100);

/// Follows one monitored primary.
pub(super) struct Follower {
    /// In config order; a sentinel that just reported a switch is asked before them.
    pub(crate) sentinels: Vec<String>,
    /// The name the sentinels monitor the primary under.
    pub(crate) master: String,
    /// Sent as `AUTH` on each new sentinel connection.
    pub(crate) auth: Option<SentinelAuth>,
    /// The longest pause between two queries when nothing asks for one sooner.
    pub(crate) query_interval: Duration,
    /// Bounds each connect and each reply (`upstream.connect_timeout`).
    pub(crate) timeout: Duration,
    /// The backend's map, replaced by a one-shard topology at each change.
    pub(crate) state: Arc<ClusterState>,
    /// The node pools: a node that left the view is dropped from them once the new map is adopted.
    pub(crate) upstreams: Arc<Upstreams>,
    /// Refresh results, rejected views and the events shown on the admin page.
    pub(crate) metrics: Arc<Metrics>,
    /// The view adopted last; `None` until the first.
    pub(crate) current: Option<View>,
}

// === impl Follower ===

impl Follower {
    /// Queries now, then on every trigger, until `shutdown`. `switches` names the sentinel that
    /// reported a `+switch-master` for this primary: it is asked first, because it knows.
    /// Never returns before `shutdown`: failures are logged and retried at the next trigger.
    pub(crate) async fn run(
        mut self,
        mut switches: mpsc::Receiver<String>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let mut first = None;
        loop {
            let started = Instant::now();
            self.query(first.take()).await;
            tokio::select! {
                _ = tokio::time::sleep(self.query_interval) => {}
                _ = self.state.refresh_wanted() => {}
                Some(from) = switches.recv() => first = Some(from),
                _ = shutdown.changed() => return,
            }
            tokio::time::sleep_until(started + MIN_GAP).await;
        }
    }

    /// Asks the sentinels in order (`first` before the others) until one gives a view that is
    /// not older than the current one; keeps the current primary when none does.
    /// A stale view counts as a failure for that sentinel, so the next one is asked in the same
    /// round; only when all fail is the refresh counted as an error.
    async fn query(&mut self, first: Option<String>) {
        let mut order: Vec<String> = first.into_iter().collect();
        for addr in &self.sentinels {
            if !order.contains(addr) {
                order.push(addr.clone());
            }
        }
        let mut failures = Vec::new();
        for addr in &order {
            match self.fetch(addr).await {
                Ok(view) if self.is_stale(&view) => {
                    self.reject_stale(addr, &view);
                    failures.push(format!("sentinel {addr}: stale (epoch {})", view.epoch));
                }
                Ok(view) => {
                    self.metrics.group::<TopologyMetrics>().refresh(true);
                    self.publish(addr, view);
                    return;
                }
                Err(reason) => {
                    tracing::warn!(sentinel = %addr, %reason, master = %self.master, "sentinel query failed");
                    failures.push(format!("sentinel {addr}: {reason}"));
                }
            }
        }
        self.metrics.group::<TopologyMetrics>().refresh(false);
        let kept = self.current.as_ref().map_or("none", |v| v.primary.as_str());
        tracing::warn!(master = %self.master, primary = %kept, "no sentinel gave a usable answer; keeping the last known primary");
        self.state.note_refresh_error(failures.join("; "));
    }

    /// One sentinel's view, read with three pipelined commands (one consistent moment).
    /// A new connection per query: sentinels are few and queried at most every `MIN_GAP`, and a
    /// fresh connection never carries the state of a sentinel that restarted. Fails on connect,
    /// auth, timeout or a reply `view` cannot read.
    async fn fetch(&self, addr: &str) -> Result<View, String> {
        let mut conn = SentinelConn::open(addr, self.auth.as_ref(), self.timeout).await?;
        let master = self.master.as_bytes();
        let commands: [Vec<&[u8]>; 3] = [
            vec![b"SENTINEL", b"GET-MASTER-ADDR-BY-NAME", master],
            vec![b"SENTINEL", b"MASTER", master],
            vec![b"SENTINEL", b"REPLICAS", master],
        ];
        let replies = conn.request(&commands, self.timeout).await?;
        match replies.as_slice() {
            [addr, details, replicas] => view(&self.master, addr, details, replicas),
            _ => Err("wrong number of replies".to_string()),
        }
    }

    /// A sentinel that missed a failover (partitioned, restarted) still names the old primary
    /// with the old, lower config epoch: following it would send writes to a demoted node.
    fn is_stale(&self, view: &View) -> bool {
        behind(self.current.as_ref(), view)
    }

    /// Counted as `rejected{reason="stale"}` and kept in the event log, since a lagging sentinel is
    /// worth an operator's look even though nothing changed.
    fn reject_stale(&self, addr: &str, view: &View) {
        let current = self.current.as_ref().map_or(0, |c| c.epoch);
        tracing::warn!(sentinel = %addr, primary = %view.primary, epoch = view.epoch, current_epoch = current, "ignored a sentinel that is behind: its config epoch is older than the current one");
        self.metrics.group::<TopologyMetrics>().rejected("stale");
        let detail = format!(
            "stale: primary {} has config epoch {} < current {current}",
            view.primary, view.epoch
        );
        self.metrics
            .events
            .push(EventKind::TopologyRejected, addr, detail);
    }

    /// Adopts `view` when its primary or replicas differ from the current ones.
    /// The epoch alone changing adopts nothing (the nodes are the same), but is remembered, so a
    /// later view is compared with the newest epoch seen.
    fn publish(&mut self, addr: &str, view: View) {
        let changed = self
            .current
            .as_ref()
            .is_none_or(|c| c.primary != view.primary || c.replicas != view.replicas);
        if changed {
            let detail = describe(&self.master, self.current.as_ref(), &view);
            tracing::info!(sentinel = %addr, master = %self.master, primary = %view.primary, replicas = ?view.replicas, epoch = view.epoch, "following the primary named by Sentinel");
            self.metrics
                .events
                .push(EventKind::TopologyAdopted, addr, detail);
            let topology = Topology::single_shard(
                &view.primary,
                &view.replicas,
                &self.upstreams,
                Arc::from(addr),
            );
            let keep: Vec<Arc<str>> = topology.addrs().cloned().collect();
            topology.assign_standby(self.upstreams.reads_replicas());
            // Adopted first, so a node only the old view had is free and forgotten now.
            self.state.adopt(topology);
            self.upstreams
                .retain(|node| keep.iter().any(|k| k.as_ref() == node), |_| 0);
        }
        self.current = Some(view);
    }
}

/// True when `view` comes from a sentinel that has not seen the failover `current` came from.
/// An equal epoch is not behind: replicas change without a failover.
/// The first view is never behind: with no current view there is nothing to compare it with.
fn behind(current: Option<&View>, view: &View) -> bool {
    current.is_some_and(|c| view.epoch < c.epoch)
}

/// One line for the event log: the first primary, or what changed.
fn describe(master: &str, previous: Option<&View>, next: &View) -> String {
    let replicas = if next.replicas.is_empty() {
        "none".to_string()
    } else {
        next.replicas.join(", ")
    };
    match previous {
        None => format!(
            "sentinel master `{master}`: primary {}, replicas: {replicas} (config epoch {})",
            next.primary, next.epoch
        ),
        Some(p) if p.primary != next.primary => format!(
            "sentinel master `{master}` failed over: primary {} → {} (config epoch {}); replicas: {replicas}",
            p.primary, next.primary, next.epoch
        ),
        Some(_) => format!("sentinel master `{master}`: replicas now {replicas}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(primary: &str, replicas: &[&str], epoch: u64) -> View {
        View {
            primary: primary.to_string(),
            replicas: replicas.iter().map(|r| r.to_string()).collect(),
            epoch,
        }
    }

    #[test]
    fn a_view_with_an_older_config_epoch_is_behind() {
        let current = view("b:2", &[], 2);
        assert!(
            !behind(None, &view("a:1", &[], 0)),
            "the first view is taken"
        );
        assert!(behind(Some(&current), &view("a:1", &[], 1)));
        assert!(!behind(Some(&current), &view("b:2", &["a:1"], 2)));
        assert!(!behind(Some(&current), &view("c:3", &[], 3)));
    }

    #[test]
    fn the_event_line_says_what_changed() {
        let first = view("a:1", &["b:2"], 0);
        assert_eq!(
            describe("m", None, &first),
            "sentinel master `m`: primary a:1, replicas: b:2 (config epoch 0)"
        );
        let failed_over = view("b:2", &[], 1);
        assert_eq!(
            describe("m", Some(&first), &failed_over),
            "sentinel master `m` failed over: primary a:1 → b:2 (config epoch 1); replicas: none"
        );
        let replica_back = view("b:2", &["a:1"], 1);
        assert_eq!(
            describe("m", Some(&failed_over), &replica_back),
            "sentinel master `m`: replicas now a:1"
        );
    }
}
