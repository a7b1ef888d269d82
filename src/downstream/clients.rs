//! What every session shares (the router, the client config, the memory budget, the drain), and
//! the registry of who is connected (for `/clients` and the connection gauges).
//!
//! One [`Downstream`] per proxy, made at start-up and shared (in an `Arc`) by every listener,
//! worker and session; nothing in it is per client except the registry's entries. What holds: a
//! client is in the registry, the listener's `connected` gauge and the crowd's count exactly while
//! its [`Connected`] guard lives, so the counts cannot drift whatever way a session ends (closed,
//! drained, handed over, panicked). Reloadable settings are read through a generation number, so a
//! session pays one atomic load per batch of commands to notice a reload, never a lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::sync::{mpsc, watch};

use super::budget::Budget;
use super::drain::Drain;
use super::handover::{Arrivals, Handover};
use super::slow::LatencyWatch;
use super::spread::Spread;
use super::tracking::Tracking;
use super::{ClientConfig, ClientRules};
use super::{ClientMetrics, ListenerMetrics, TrackingMetrics};
use crate::auth::Users;
use crate::hotkeys::HotKeys;
use crate::metrics::Metrics;
use crate::near_cache::NearCache;
use crate::router::Router;
use crate::upstream::InvalidationSink;

/// What every session shares.
pub(crate) struct Downstream {
    /// Plans and forwards every command; one for the process.
    pub(crate) router: Arc<Router>,
    /// The metrics hub: sessions take their groups from it once, not per command.
    pub(crate) metrics: Arc<Metrics>,
    /// The client side's series, taken from `metrics` once: sessions count into it per read and
    /// per write.
    pub(super) client_metrics: Arc<ClientMetrics>,
    /// What sessions read of `client:` as it is now; a reload swaps it (see
    /// [`Downstream::reconfigure`]).
    pub(super) config: ArcSwap<ClientRules>,
    /// Who may connect (`auth`), resolved at start-up and at each reload.
    users: ArcSwap<Users>,
    /// Bumped after each reload: a session compares it (one atomic load per batch of commands)
    /// and takes a new snapshot of `config` and `users` only when it moved.
    generation: AtomicU64,
    /// What all clients together may use.
    pub(super) crowd: Crowd,
    /// The id the next client gets; ids are unique for the process's life and above every id a
    /// previous process handed over, so `CLIENT ID` and `REDIRECT id` never name two clients.
    next_id: AtomicU64,
    /// Connected clients by id; touched on connect and disconnect only. Kept compact: it holds
    /// an entry for every client, idle or not.
    clients: Mutex<HashMap<u64, Registered>>,
    /// `threading: per-core`: the workers' client counts, which keep them even.
    spread: Option<Arc<Spread>>,
    /// How clients leave at shutdown and at an upgrade.
    pub(crate) exits: Exits,
    /// Client-side caching: who tracks which keys, and their mailboxes (see `tracking`).
    pub(super) tracking: Arc<Tracking>,
    /// `hotkeys:`: sessions sample their commands into it, `/hotkeys` reads it (off unless
    /// [`Downstream::with_hotkeys`] gives one).
    pub(crate) hotkeys: Arc<HotKeys>,
    /// Reads served from memory (`near_cache`), when on.
    pub(super) near_cache: Option<Arc<NearCache>>,
}

/// What all clients together may use: connections, buffered bytes, and the latency watch that
/// closes idle clients when this instance is slow.
pub(super) struct Crowd {
    /// Sessions running now, over all listeners (for `client.max_connections`).
    pub(super) connected: AtomicUsize,
    /// `client.max_buffered_bytes_total`, shared by every session (fixed at start-up).
    pub(super) budget: Budget,
    /// `client.close_idle_when_slow`: fed by every session while it is on, sampled by
    /// [`Downstream::watch_latency`]. Always present, so a reload can turn the setting on.
    pub(super) latency: Arc<LatencyWatch>,
}

/// How clients leave: the shutdown's drain, and an upgrade's hand-over in both directions.
pub(crate) struct Exits {
    /// Started at shutdown: sessions close once they owe nothing.
    pub(super) drain: Drain,
    /// An upgrade in place handing this process's clients to the next one (see `handover`).
    pub(crate) handover: Handover,
    /// Subscribed clients the previous process handed over, held until it lets go of them.
    pub(crate) arrivals: Arrivals,
}

/// A connected client in the registry (what [`ClientInfo`] is made from).
struct Registered {
    /// Shared with the session, which names the client in the slow log.
    ///
    /// The listener's name (its label in the metrics).
    addr: Arc<str>,
    /// When the client connected, Unix seconds.
    listener: &'static str,
    /// The per-core worker serving the client, if `threading: per-core`; a `u16` to keep the entry
    /// small.
    connected_at: u64,
    worker: Option<u16>,
}

/// A connected client, as `/clients` shows it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct ClientInfo {
    /// The client id, as `CLIENT ID` returns it.
    pub(crate) id: u64,
    /// The client's address (`ip:port`, or the socket path for a Unix listener).
    pub(crate) addr: String,
    /// The listener it came in on.
    pub(crate) listener: &'static str,
    /// Unix time (seconds) of the connect.
    pub(crate) connected_at: u64,
    /// `threading: per-core`: the worker serving the client.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) worker: Option<usize>,
}

impl Downstream {
    /// Whether the near cache is on (its figures are in the hub's `NearCacheMetrics`).
    pub(crate) fn near_cache_on(&self) -> bool {
        self.near_cache.is_some()
    }

    /// Serves reads from `cache` (`near_cache`), when it is on.
    pub(crate) fn with_near_cache(mut self, cache: Option<Arc<NearCache>>) -> Downstream {
        self.near_cache = cache;
        self
    }

    /// Made once at start-up by `app`. Also registers the client-tracking table as a sink of the
    /// upstream invalidation connections (by weak reference, so the tracking table is dropped with
    /// the proxy). `config.max_buffered_bytes_total` and the tracking table's size are fixed here:
    /// a reload changes the rest of `client:` but not these.
    pub(crate) fn new(
        router: Arc<Router>,
        config: ClientConfig,
        metrics: Arc<Metrics>,
        users: Arc<Users>,
        spread: Option<Arc<Spread>>,
    ) -> Downstream {
        let client_metrics = metrics.group::<ClientMetrics>();
        let budget = Budget::new(
            config.max_buffered_bytes_total,
            client_metrics.buffered.clone(),
            client_metrics.paused.clone(),
            client_metrics.read_pauses.clone(),
        );
        let tracking = Arc::new(
            Tracking::new(config.tracking_table_max_keys)
                .with_nodes(
                    router.upstreams().tracking().clone(),
                    router.cluster().clone(),
                )
                .with_metrics(TrackingMetrics::clone(&metrics.group())),
        );
        let sink: Arc<dyn InvalidationSink> = tracking.clone();
        router
            .upstreams()
            .tracking()
            .add_sink(Arc::downgrade(&sink));
        Downstream {
            exits: Exits {
                drain: Drain::default(),
                handover: Handover::new(client_metrics.upgrade_clients.clone()),
                arrivals: Arrivals::default(),
            },
            tracking,
            near_cache: None,
            crowd: Crowd {
                connected: AtomicUsize::new(0),
                budget,
                latency: LatencyWatch::new(),
            },
            router,
            config: ArcSwap::from_pointee(ClientRules::from(&config)),
            metrics,
            client_metrics,
            users: ArcSwap::new(users),
            generation: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
            clients: Mutex::new(HashMap::new()),
            spread,
            hotkeys: Arc::new(HotKeys::off()),
        }
    }

    /// Watches for hot and big keys with `hotkeys` (set once, before any client connects).
    pub(crate) fn with_hotkeys(mut self, hotkeys: Arc<HotKeys>) -> Downstream {
        self.hotkeys = hotkeys;
        self
    }

    /// Tells every session to close once it owes its client nothing (shutdown). Accept loops
    /// stop on their own shutdown signal.
    pub(crate) fn drain(&self) {
        self.exits.drain.start();
    }

    /// An upgrade takes over: every session leaves for the new process at its next safe point
    /// with records of `version` sent to `sink` (see `handover`), or is closed when it cannot.
    pub(crate) fn hand_over_clients(
        &self,
        version: u16,
        sink: Option<std::sync::mpsc::Sender<super::handover::Outgoing>>,
    ) {
        self.exits.handover.start(version, sink);
        self.exits.drain.start();
    }

    /// The next client id this process would give (the new process starts above it).
    ///
    /// Read by the old process at an upgrade, so ids stay unique across the hand-over.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// Gives new clients ids from `next` on at least (the old process's clients keep theirs).
    pub(crate) fn reserve_ids(&self, next: u64) {
        self.next_id.fetch_max(next, Ordering::Relaxed);
    }

    /// `threading: per-core`: the workers' client counts.
    ///
    /// `None` unless `threading: per-core`; the accept gate, the status page and the workers'
    /// rebalancing (moving clients between workers) read it.
    pub(crate) fn spread(&self) -> Option<&Arc<Spread>> {
        self.spread.as_ref()
    }

    /// Samples the sessions' latency until `shutdown` (for `client.close_idle_when_slow`; while
    /// it is off, sessions record nothing and each sample is skipped).
    pub(crate) async fn watch_latency(self: Arc<Self>, shutdown: watch::Receiver<bool>) {
        self.crowd.latency.clone().run(shutdown).await;
    }

    /// Applies reloaded `client:` settings and users. New clients use them at once; connected
    /// clients at their next batch of commands (see `ClientState::reauthorize` for what happens
    /// to a logged-in user).
    pub(crate) fn reconfigure(&self, config: ClientConfig, users: Arc<Users>) {
        self.config.store(Arc::new(ClientRules::from(&config)));
        self.users.store(users);
        // After both stores: a session that sees the new number reads both new values.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Which reload the current settings come from.
    #[inline]
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The current settings and users, with their generation.
    pub(super) fn snapshot(&self) -> (u64, Arc<ClientRules>, Arc<Users>) {
        let generation = self.generation();
        (generation, self.config.load_full(), self.users.load_full())
    }

    /// Whether client `id` is connected (`CLIENT TRACKING ... REDIRECT id`).
    ///
    /// Takes the registry's lock: only for commands that name another client, never per ordinary
    /// command.
    pub(super) fn is_connected(&self, id: u64) -> bool {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&id)
    }

    /// Clients connected right now.
    ///
    /// Takes the registry's lock; read at shutdown and during an upgrade's hand-over (how many
    /// are left), never per command.
    pub(crate) fn connected_clients(&self) -> usize {
        self.clients.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Every connected client, oldest first.
    ///
    /// Takes the registry's lock only while copying; the sort runs after it is released.
    pub(crate) fn clients(&self) -> Vec<ClientInfo> {
        let mut clients: Vec<_> = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(&id, client)| ClientInfo {
                id,
                addr: client.addr.to_string(),
                listener: client.listener,
                connected_at: client.connected_at,
                worker: client.worker.map(usize::from),
            })
            .collect();
        clients.sort_by_key(|c| c.id);
        clients
    }

    /// Registers a new client; dropping the guard unregisters it (and ends its membership of
    /// the worker's count, and its hold on `done`).
    ///
    /// `addr` is shared with the session (it names the client in the slow log), `gauges` are the
    /// listener's, and `done` is the sender whose clones tell the listener when all its sessions
    /// have ended.
    pub(super) fn connect(
        self: &Arc<Self>,
        addr: Arc<str>,
        listener: &'static str,
        gauges: &ListenerMetrics,
        done: &mpsc::Sender<()>,
    ) -> Connected {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connected_at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let at = (crate::workers::current(), connected_at);
        self.register(id, addr, (listener, gauges), done, at)
    }

    /// Registers a client handed over by the previous process (`handover::adopt`): its `id`
    /// kept, counted on `worker`, connected since `connected_at` (Unix seconds).
    pub(super) fn connect_adopted(
        self: &Arc<Self>,
        id: u64,
        addr: Arc<str>,
        listener: (&'static str, &ListenerMetrics),
        done: &mpsc::Sender<()>,
        at: (Option<usize>, u64),
    ) -> Connected {
        self.next_id
            .fetch_max(id.saturating_add(1), Ordering::Relaxed);
        // Counted as an accepted client is (its `Connected` takes it off when it ends), but
        // never refused: it was connected already.
        self.crowd.connected.fetch_add(1, Ordering::SeqCst);
        self.register(id, addr, listener, done, at)
    }

    /// What [`Downstream::connect`] and [`Downstream::connect_adopted`] share: the registry entry,
    /// the listener's gauges and, per core, the worker's count.
    fn register(
        self: &Arc<Self>,
        id: u64,
        addr: Arc<str>,
        (listener, gauges): (&'static str, &ListenerMetrics),
        done: &mpsc::Sender<()>,
        (worker, connected_at): (Option<usize>, u64),
    ) -> Connected {
        let client = Registered {
            addr,
            listener,
            connected_at,
            worker: worker.and_then(|w| u16::try_from(w).ok()),
        };
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, client);
        gauges.accepted.inc();
        gauges.connected.inc();
        // Per core: counted on this worker while it stays there (`Connected::moved_to`).
        let member = self
            .spread
            .as_ref()
            .zip(worker)
            .map(|(spread, worker)| spread.join(worker));
        Connected {
            downstream: self.clone(),
            id,
            gauges: gauges.clone(),
            _member: member,
            _done: done.clone(),
        }
    }
}

/// A client while its session runs: dropping it takes the client off every count.
pub(super) struct Connected {
    /// What the guard takes the client off when dropped.
    pub(super) downstream: Arc<Downstream>,
    /// The client id, as registered.
    pub(crate) id: u64,
    /// The listener's gauges, decremented on drop.
    gauges: ListenerMetrics,
    /// The client's place in its worker's count (`threading: per-core`), given up on drop.
    _member: Option<super::spread::Member>,
    /// Held until the session ends: the caller of `serve` knows all sessions ended when every
    /// clone of its sender is gone.
    _done: mpsc::Sender<()>,
}

impl Connected {
    /// The client's session moved to per-core worker `worker`: it is counted there now, and
    /// `/clients` says so.
    pub(super) fn moved_to(&mut self, worker: usize) {
        if let Some(member) = &mut self._member {
            member.move_to(worker);
        }
        if let Some(client) = self
            .downstream
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&self.id)
        {
            client.worker = u16::try_from(worker).ok();
        }
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        self.gauges.connected.dec();
        self.downstream
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
        self.downstream
            .crowd
            .connected
            .fetch_sub(1, Ordering::SeqCst);
    }
}
