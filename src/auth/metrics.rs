//! Per-user figures: the series of every configured user, labelled by its name from the config
//! (never by anything a client sends), and who is logged in as whom (for `/clients`).
//!
//! Why the label is only ever a configured user's name: a label a client could choose (a name tried
//! at AUTH, a client name) would let any client grow the series without bound and fill the scrape.
//! So a user gets its series the first time its sessions need them and keeps them for the life of
//! the process, even after a reload drops it (a Prometheus series that disappears looks like a
//! counter reset); the number of series is bounded by the users ever configured. Series are created
//! at zero so a rate over them is defined from the first scrape.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

use crate::metrics::{quantile_us, LatencyHistogram, MetricGroup, UserSeries};

/// The one label of every per-user series: `user`, a configured user's name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UserLabel {
    user: String,
}

/// Every user's series.
#[derive(Default)]
pub(crate) struct TenantMetrics {
    /// `user_connections`: sessions logged in as the user right now; up at login, down at logout or
    /// close.
    connections: Family<UserLabel, Gauge>,
    /// `user_commands`: commands dispatched, fed through each session's command tally (flushed in
    /// batches, not per command).
    commands: Family<UserLabel, Counter>,
    /// `user_command_errors`: error replies sent to the user's clients, whoever produced them.
    errors: Family<UserLabel, Counter>,
    /// `user_refusals`: commands the user's ACL rules refused with `-NOPERM`.
    refusals: Family<UserLabel, Counter>,
    /// `user_rate_limited`: commands a rate limit held back or refused.
    rate_limited: Family<UserLabel, Counter>,
    /// `user_connections_refused`: logins refused because the user had `limits.max_connections`
    /// already.
    connections_refused: Family<UserLabel, Counter>,
    /// `user_received_bytes`: bytes read from the user's clients, requests as sent.
    bytes_received: Family<UserLabel, Counter>,
    /// `user_sent_bytes`: bytes written to the user's clients.
    bytes_sent: Family<UserLabel, Counter>,
    /// `user_command_duration_seconds`: dispatch to reply, per command.
    duration: Family<UserLabel, LatencyHistogram>,
    /// Connections refused by `auth.max_unauthenticated_per_address`.
    pub(crate) unauthenticated_refused: Counter,
    /// Every user's handles, by name, in the order the users were first configured.
    users: RwLock<Vec<Arc<UserFigures>>>,
    /// Client id → the user it is logged in as (configured users only).
    clients: Mutex<HashMap<u64, Arc<str>>>,
}

/// One user's handles, taken once per configured user and shared by its sessions.
#[derive(Debug)]
pub(crate) struct UserFigures {
    /// The configured name, the series' label; compared byte for byte (user names are
    /// case-sensitive, as in Redis).
    pub(crate) name: Arc<str>,
    /// Incremented at login and decremented when the session ends or logs in as someone else; never
    /// negative while the sessions balance their calls.
    pub(crate) connections: Gauge,
    /// Calls, error replies and latency, counted through the sessions' command tallies.
    pub(crate) series: Arc<UserSeries>,
    /// Commands refused by the user's rules (`-NOPERM`).
    pub(crate) refusals: Counter,
    /// Commands held back (`when_over: slow`) or refused (`fail`) by a rate.
    pub(crate) rate_limited: Counter,
    /// Logins refused by `limits.max_connections`.
    pub(crate) connections_refused: Counter,
    /// Counted at the session as requests are read.
    pub(crate) bytes_received: Counter,
    /// Counted at the session as replies are written.
    pub(crate) bytes_sent: Counter,
}

/// One user's figures as `/clients` and the status page show them.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct UserSummary {
    /// The configured name.
    pub(crate) user: String,
    /// Sessions logged in as the user right now.
    pub(crate) connections: i64,
    /// Commands since start (a counter: never reset by a reload).
    pub(crate) commands: u64,
    /// Error replies since start.
    pub(crate) errors: u64,
    /// `-NOPERM` refusals since start.
    pub(crate) refusals: u64,
    /// Commands held back or refused by a rate limit since start.
    pub(crate) rate_limited: u64,
    /// Bytes read from the user's clients since start.
    pub(crate) bytes_received: u64,
    /// Bytes written to the user's clients since start.
    pub(crate) bytes_sent: u64,
    /// Latency since start (dispatch to reply), microseconds; `None` before any command.
    pub(crate) p50_us: Option<u64>,
    /// As `p50_us`, the 99th percentile; bucket-resolution, so it reads as "below this bound".
    pub(crate) p99_us: Option<u64>,
}

impl MetricGroup for TenantMetrics {
    fn register(&self, r: &mut Registry) {
        let per_user: [(&str, &str, &Family<UserLabel, Counter>); 7] = [
            (
                "user_commands",
                "Commands run, by configured user",
                &self.commands,
            ),
            (
                "user_command_errors",
                "Error replies, by configured user",
                &self.errors,
            ),
            (
                "user_refusals",
                "Commands refused by the user's ACL rules (-NOPERM), by configured user",
                &self.refusals,
            ),
            (
                "user_rate_limited",
                "Commands held back or refused by a rate limit, by configured user",
                &self.rate_limited,
            ),
            (
                "user_connections_refused",
                "Logins refused by limits.max_connections, by configured user",
                &self.connections_refused,
            ),
            (
                "user_received_bytes",
                "Bytes read from clients logged in as the user",
                &self.bytes_received,
            ),
            (
                "user_sent_bytes",
                "Bytes written to clients logged in as the user",
                &self.bytes_sent,
            ),
        ];
        for (name, help, family) in per_user {
            r.register(name, help, family.clone());
        }
        r.register(
            "user_connections",
            "Connections logged in, by configured user",
            self.connections.clone(),
        );
        r.register(
            "user_command_duration_seconds",
            "Dispatch to reply, by configured user",
            self.duration.clone(),
        );
        r.register(
            "unauthenticated_connections_refused",
            "Connections refused by auth.max_unauthenticated_per_address",
            self.unauthenticated_refused.clone(),
        );
    }
}

impl TenantMetrics {
    /// The handles of user `name`, made (and its series created, at zero) the first time.
    ///
    /// Takes a read lock first, so the common case (the user already has handles) never blocks
    /// other sessions; only a user's first session takes the write lock, and re-checks under it so
    /// two first sessions share one set of handles. Called at login, not per command.
    pub(crate) fn user(&self, name: &str) -> Arc<UserFigures> {
        if let Some(found) = self.find(name) {
            return found;
        }
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        if let Some(found) = users.iter().find(|u| &*u.name == name) {
            return found.clone();
        }
        let label = UserLabel {
            user: name.to_string(),
        };
        let figures = Arc::new(UserFigures {
            name: Arc::from(name),
            connections: self.connections.get_or_create_owned(&label),
            series: Arc::new(UserSeries {
                calls: self.commands.get_or_create_owned(&label),
                errors: self.errors.get_or_create_owned(&label),
                duration: self.duration.get_or_create_owned(&label),
            }),
            refusals: self.refusals.get_or_create_owned(&label),
            rate_limited: self.rate_limited.get_or_create_owned(&label),
            connections_refused: self.connections_refused.get_or_create_owned(&label),
            bytes_received: self.bytes_received.get_or_create_owned(&label),
            bytes_sent: self.bytes_sent.get_or_create_owned(&label),
        });
        users.push(figures.clone());
        figures
    }

    /// The read-locked look-up of [`TenantMetrics::user`]; a poisoned lock is used anyway (the list
    /// is only ever appended to, so a panic mid-push cannot leave it torn).
    fn find(&self, name: &str) -> Option<Arc<UserFigures>> {
        let users = self.users.read().unwrap_or_else(|e| e.into_inner());
        users.iter().find(|u| &*u.name == name).cloned()
    }

    /// Notes that client `id` is logged in as `user` (`None`: as nobody configured).
    ///
    /// Called at login and at logout or close; the map backs `/clients`' user column and holds one
    /// entry per session logged in as a configured user, so it shrinks as they leave.
    pub(crate) fn client_user(&self, id: u64, user: Option<&Arc<str>>) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        match user {
            Some(user) => clients.insert(id, user.clone()),
            None => clients.remove(&id),
        };
    }

    /// The user client `id` is logged in as, if a configured one.
    pub(crate) fn user_of(&self, id: u64) -> Option<Arc<str>> {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.get(&id).cloned()
    }

    /// Every user seen since start, with its figures so far.
    pub(crate) fn summaries(&self) -> Vec<UserSummary> {
        let users = self.users.read().unwrap_or_else(|e| e.into_inner());
        users
            .iter()
            .map(|u| {
                let buckets = u.series.duration.buckets();
                UserSummary {
                    user: u.name.to_string(),
                    connections: u.connections.get(),
                    commands: u.series.calls.get(),
                    errors: u.series.errors.get(),
                    refusals: u.refusals.get(),
                    rate_limited: u.rate_limited.get(),
                    bytes_received: u.bytes_received.get(),
                    bytes_sent: u.bytes_sent.get(),
                    p50_us: quantile_us(&buckets, 0.5),
                    p99_us: quantile_us(&buckets, 0.99),
                }
            })
            .collect()
    }
}
