//! Client-side caching (`CLIENT TRACKING`) through redcar: who tracks what, and delivering the
//! nodes' invalidations to the right sessions.
//!
//! The nodes track the reads of redcar's tracked lanes (`upstream::tracking`) and send every
//! invalidation to one invalidation connection per node. Here a table says which sessions read
//! each key ([`table`]), filled when a tracked read is sent; an invalidation of a key goes to
//! each of them (or to the client each one redirects to) through its [`Mailbox`], and the key is
//! forgotten until read again. BCAST sessions match keys against their prefixes instead. When
//! redcar may have missed an invalidation (a lost invalidation or lane connection, a topology
//! change) every tracking session gets a null invalidation, which tells it to flush its cache.
//! `command` answers the CLIENT subcommands, `session` is a session's own part, `frames` writes
//! the pushes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use bytes::Bytes;

use crate::cluster::ClusterState;
use crate::metrics::FlushCause;
use crate::upstream::{InvalidationSink, TrackingFeed};

mod client;
mod command;
mod frames;
mod mailbox;
mod metrics;
mod noloop;
mod session;
mod table;
mod topology;

pub(super) use client::ClientTracking;
pub(super) use frames::write_events;
pub(crate) use metrics::TrackingMetrics;
pub(super) use session::{
    intercept, join_subscriber, note_subscribed, poll_ready, ready, take_frames, take_wait,
};

pub(super) use mailbox::Mailbox;
#[cfg(test)]
use mailbox::MAILBOX_MAX;
use noloop::OwnWrites;
use table::Table;

/// What `client.tracking_table_max_keys` holds when unset (Redis's own default bound).
pub(crate) const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// The tracking state every session shares (one per [`super::Downstream`]).
pub(crate) struct Tracking {
    /// Who tracks what; one lock, taken when a tracking session reads or writes and when an
    /// invalidation arrives.
    hub: Mutex<Hub>,
    /// The nodes' side: BCAST registrations, and the slot map watched for owner changes.
    nodes: Option<Nodes>,
    /// The topology watcher was started (with the first client that tracked).
    watching: OnceLock<()>,
    /// Some client tracked in BCAST mode: every primary's invalidation connection is kept up.
    bcast: AtomicBool,
}

struct Nodes {
    /// The nodes' invalidations and BCAST registrations.
    feed: Arc<TrackingFeed>,
    /// The catch-all backend's map, watched so a slot's new owner can be asked to track too.
    cluster: Arc<ClusterState>,
}

struct Hub {
    /// Which sessions read which keys (default mode), bounded by `client.tracking_table_max_keys`.
    table: Table,
    /// Updated under the same lock as the state they count.
    metrics: TrackingMetrics,
    /// Keys BCAST NOLOOP sessions just wrote (see `noloop`).
    own: OwnWrites,
    /// Sessions that track, or that may receive invalidations (subscribe mode), by client id.
    members: HashMap<u64, TrackingMember>,
}

struct TrackingMember {
    /// Where the session's (or its redirect target's) invalidations are dropped.
    mailbox: Arc<Mailbox>,
    /// Set while the session has tracking on.
    tracks: Option<Tracks>,
}

/// Where a tracking session's invalidations go, and what it follows in BCAST mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Tracks {
    /// The client that receives them; 0: the session itself.
    pub(crate) redirect: u64,
    /// BCAST: every key starting with one of these (`""`: all keys).
    pub(crate) prefixes: Option<Vec<Bytes>>,
    /// The client redirected to is gone: the session was told once (`tracking-redir-broken`).
    pub(crate) broken: bool,
}

/// One invalidation for a session to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum TrackingEvent {
    /// These keys changed.
    Keys(Vec<Bytes>),
    /// Forget everything (the null invalidation).
    Flush,
    /// The client that invalidations were redirected to (this id) is gone.
    RedirectBroken(u64),
}

// === impl Tracking ===

impl Tracking {
    /// `max_keys`: `client.tracking_table_max_keys`.
    pub(crate) fn new(max_keys: usize) -> Tracking {
        Tracking {
            hub: Mutex::new(Hub {
                table: Table::new(max_keys),
                metrics: TrackingMetrics::default(),
                own: OwnWrites::default(),
                members: HashMap::new(),
            }),
            nodes: None,
            watching: OnceLock::new(),
            bcast: AtomicBool::new(false),
        }
    }

    /// Tracking over these nodes (`feed`) and this slot map (`cluster`).
    pub(crate) fn with_nodes(
        mut self,
        feed: Arc<TrackingFeed>,
        cluster: Arc<ClusterState>,
    ) -> Tracking {
        self.nodes = Some(Nodes { feed, cluster });
        self
    }

    /// Counts into `metrics` (registered ones; a default is kept otherwise).
    pub(crate) fn with_metrics(self, metrics: TrackingMetrics) -> Tracking {
        self.hub().metrics = metrics;
        self
    }

    /// A client turned tracking on: the topology watcher runs from now on, and BCAST prefixes
    /// are registered on every primary.
    fn started(self: &Arc<Self>, tracks: &Tracks) {
        let Some(nodes) = &self.nodes else {
            return;
        };
        self.watching.get_or_init(|| {
            tokio::spawn(topology::watch(Arc::downgrade(self), nodes.cluster.clone()));
        });
        if let Some(prefixes) = &tracks.prefixes {
            self.bcast.store(true, Ordering::Relaxed);
            nodes.feed.want_bcast(prefixes);
            topology::start_primaries(nodes.cluster.topology().as_deref());
        }
    }

    /// Resolves once every primary confirmed BCAST `prefixes` (at once without nodes, as in
    /// unit tests), or with the reason it did not.
    fn bcast_confirmed(
        &self,
        prefixes: Vec<Bytes>,
    ) -> impl std::future::Future<Output = Result<(), String>> + Send + 'static {
        let wait = self
            .nodes
            .as_ref()
            .map(|nodes| topology::confirmed(&nodes.cluster, prefixes));
        async move {
            match wait {
                Some(wait) => wait.await,
                None => Ok(()),
            }
        }
    }

    /// The BCAST prefixes every primary registers, once some client tracked in BCAST mode.
    fn bcast_cover(&self) -> Option<Vec<Bytes>> {
        let nodes = self.nodes.as_ref()?;
        self.bcast
            .load(Ordering::Relaxed)
            .then(|| nodes.feed.bcast_cover())
    }

    fn hub(&self) -> MutexGuard<'_, Hub> {
        lock(&self.hub)
    }

    /// The mailbox of client `id`, made on first use.
    pub(super) fn join(&self, id: u64) -> Arc<Mailbox> {
        let mut hub = self.hub();
        let member = hub.members.entry(id).or_insert_with(|| TrackingMember {
            mailbox: Arc::default(),
            tracks: None,
        });
        member.mailbox.clone()
    }

    /// The client left: no more invalidations for it (its keys are dropped from the table as
    /// they are invalidated or evicted).
    pub(super) fn leave(&self, id: u64) {
        let mut hub = self.hub();
        if hub.members.remove(&id).is_some_and(|m| m.tracks.is_some()) {
            hub.metrics.clients.dec();
        }
    }

    /// Turns tracking on (`Some`) or off for client `id` (which joined).
    pub(super) fn set_tracks(&self, id: u64, tracks: Option<Tracks>) {
        let mut hub = self.hub();
        let Some(member) = hub.members.get_mut(&id) else {
            return;
        };
        let was = member.tracks.is_some();
        let now = tracks.is_some();
        member.tracks = tracks;
        match (was, now) {
            (false, true) => hub.metrics.clients.inc(),
            (true, false) => hub.metrics.clients.dec(),
            _ => 0,
        };
    }

    /// Client `id` sent a read of `keys` that the node will track.
    pub(super) fn read(&self, id: u64, keys: impl Iterator<Item = Bytes>) {
        let mut hub = self.hub();
        for key in keys {
            if let Some((evicted, sessions)) = hub.table.add(&key, id) {
                // Redis does the same at its bound: the evicted key is invalidated.
                hub.metrics.evicted.inc();
                hub.deliver_keys(sessions.into_iter().map(|s| (s, evicted.clone())));
            }
        }
        hub.count_keys();
    }

    /// Client `id` (NOLOOP) sent a write of `keys`: it is not told about it.
    pub(super) fn wrote(&self, id: u64, keys: impl Iterator<Item = Bytes>) {
        let mut hub = self.hub();
        let Hub {
            table,
            own,
            members,
            ..
        } = &mut *hub;
        let tracks = members.get(&id).and_then(|m| m.tracks.as_ref());
        let prefixes = tracks.and_then(|t| t.prefixes.as_deref());
        let now = tokio::time::Instant::now();
        for key in keys {
            table.forget(&key, id);
            if prefixes.is_some_and(|p| p.iter().any(|p| key.starts_with(p))) {
                own.wrote(key, id, now);
            }
        }
        hub.count_keys();
    }

    /// Every tracking session flushes its cache (redcar may have missed an invalidation).
    pub(crate) fn flush_all(&self, cause: FlushCause) {
        let mut hub = self.hub();
        hub.table.clear();
        hub.count_keys();
        hub.metrics.flushed(cause);
        let targets: Vec<u64> = hub
            .members
            .iter()
            .filter_map(|(&id, m)| m.tracks.as_ref().map(|t| target(id, t)))
            .collect();
        hub.post_once(targets, &TrackingEvent::Flush);
    }

    /// Client `id` (tracking) flushes its cache: one null invalidation to it, or to the client
    /// it redirects to.
    pub(super) fn flush_client(&self, id: u64) {
        let hub = self.hub();
        let to = hub
            .members
            .get(&id)
            .and_then(|m| m.tracks.as_ref())
            .map(|t| target(id, t));
        if let Some(to) = to {
            hub.post_once(vec![to], &TrackingEvent::Flush);
        }
    }

    /// `keys` changed on a node.
    fn invalidate(&self, keys: Vec<Bytes>) {
        let mut hub = self.hub();
        let Hub {
            table,
            own,
            members,
            ..
        } = &mut *hub;
        let now = tokio::time::Instant::now();
        let mut to: Vec<(u64, Bytes)> = Vec::new();
        for key in keys {
            if let Some(sessions) = table.take(&key) {
                to.extend(sessions.into_iter().map(|s| (s, key.clone())));
            }
            for (&id, member) in members.iter() {
                let prefixes = member.tracks.as_ref().and_then(|t| t.prefixes.as_ref());
                if prefixes.is_some_and(|p| p.iter().any(|p| key.starts_with(p)))
                    && (own.is_empty() || !own.take(&key, id, now))
                {
                    to.push((id, key.clone()));
                }
            }
        }
        hub.deliver_keys(to.into_iter());
        hub.count_keys();
    }

    /// Whether client `id`'s redirect target is gone (`CLIENT TRACKINGINFO`: `broken_redirect`).
    pub(super) fn is_broken(&self, id: u64) -> bool {
        let hub = self.hub();
        let tracks = hub.members.get(&id).and_then(|m| m.tracks.as_ref());
        tracks.is_some_and(|t| t.broken)
    }

    /// Keys in the table now.
    #[cfg(test)]
    pub(crate) fn tracked_keys(&self) -> usize {
        self.hub().table.len()
    }
}

impl topology::Hub for Tracking {
    fn flush_all(&self, cause: FlushCause) {
        Tracking::flush_all(self, cause);
    }

    fn bcast_cover(&self) -> Option<Vec<Bytes>> {
        Tracking::bcast_cover(self)
    }
}

impl InvalidationSink for Tracking {
    fn invalidated(&self, _addr: &str, keys: Option<Vec<Bytes>>) {
        match keys {
            Some(keys) => self.invalidate(keys),
            None => self.flush_all(FlushCause::NodeFlush),
        }
    }

    fn lost(&self, _addr: &str) {
        self.flush_all(FlushCause::ConnectionLost);
    }
}

// === impl Hub ===

impl Hub {
    /// Posts each (tracking session, key) to the session's target, one event per target.
    fn deliver_keys(&mut self, pairs: impl Iterator<Item = (u64, Bytes)>) {
        let mut by_target: Vec<(u64, Vec<Bytes>)> = Vec::new();
        let mut broken: Vec<u64> = Vec::new();
        for (session, key) in pairs {
            let Some(tracks) = self.members.get(&session).and_then(|m| m.tracks.as_ref()) else {
                continue; // gone, or tracking off since it read the key
            };
            let to = target(session, tracks);
            if !self.members.contains_key(&to) {
                broken.push(session);
                continue;
            }
            match by_target.iter_mut().find(|(t, _)| *t == to) {
                Some((_, keys)) if !keys.contains(&key) => keys.push(key),
                Some(_) => {}
                None => by_target.push((to, vec![key])),
            }
        }
        for (to, keys) in by_target {
            if let Some(member) = self.members.get(&to) {
                self.metrics.keys_delivered(keys.len());
                if !member.mailbox.post(TrackingEvent::Keys(keys)) {
                    self.metrics.slow_client();
                }
            }
        }
        for session in broken {
            self.redirect_broken(session);
        }
    }

    /// Tells `session` once that the client it redirects to is gone (as Redis does, when an
    /// invalidation finds no one to go to).
    fn redirect_broken(&mut self, session: u64) {
        let Some(member) = self.members.get_mut(&session) else {
            return;
        };
        if let Some(tracks) = member.tracks.as_mut().filter(|t| !t.broken) {
            tracks.broken = true;
            self.metrics.redirects_broken.inc();
            if !member
                .mailbox
                .post(TrackingEvent::RedirectBroken(tracks.redirect))
            {
                self.metrics.slow_client();
            }
        }
    }

    /// Posts `event` once to each of `targets` that has a mailbox.
    fn post_once(&self, mut targets: Vec<u64>, event: &TrackingEvent) {
        targets.sort_unstable();
        targets.dedup();
        for to in targets {
            if let Some(member) = self.members.get(&to) {
                if *event == TrackingEvent::Flush {
                    self.metrics.flushes_delivered(1);
                }
                if !member.mailbox.post(event.clone()) {
                    self.metrics.slow_client();
                }
            }
        }
    }

    fn count_keys(&self) {
        self.metrics
            .keys
            .set(i64::try_from(self.table.len()).unwrap_or(i64::MAX));
    }
}

/// Who receives session `id`'s invalidations.
fn target(id: u64, tracks: &Tracks) -> u64 {
    if tracks.redirect == 0 {
        id
    } else {
        tracks.redirect
    }
}

/// Nothing panics while these locks are held, so a poisoned one is still consistent.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
