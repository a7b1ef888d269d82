//! What redcar keeps about each configured user while it runs, across reloads: its logged-in
//! connections, the rate buckets its clients share, and its figures; and the unauthenticated
//! connections of each source address.
//!
//! Why by name and across reloads: a reload builds new `Users` from the new config, but a user's
//! limits are about the clients logged in now, whose sessions outlive the reload. Keeping the
//! running state by name means a reload that keeps a user keeps its connection count and rate
//! buckets (no window in which `max_connections` could be exceeded, no fresh burst of rate), while
//! a renamed user starts from nothing. What holds: a count is raised only by handing out a guard
//! ([`Seat`], [`Waiting`]) and lowered only by dropping it, so counts cannot leak however a session
//! ends.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::limits::SharedBuckets;
use super::metrics::{TenantMetrics, UserFigures};

/// One configured user's running state (kept by name: a reload that keeps the user keeps it).
#[derive(Debug)]
pub(crate) struct Tenant {
    /// The user's series, made once per name (see `TenantMetrics::user`).
    pub(crate) figures: Arc<UserFigures>,
    /// Sessions logged in as the user now, checked against `limits.max_connections` at login.
    connections: AtomicU32,
    /// The rate buckets every client of the user draws from (`limits.*_per_second`), so a limit is
    /// per user, not per connection.
    pub(crate) buckets: SharedBuckets,
}

/// Every user's running state, and the unauthenticated connections per address. One per
/// process, handed from each `Users` to the next at a reload.
pub(crate) struct Tenants {
    /// The state of every user ever configured in this process; entries are never removed, so a
    /// user dropped and re-added by reloads finds its counts intact.
    by_name: Mutex<HashMap<String, Arc<Tenant>>>,
    /// Unauthenticated connections per source IP; an address leaves the map when its count falls to
    /// zero, so it holds only addresses with a connection waiting.
    unauthenticated: Mutex<HashMap<IpAddr, u32>>,
    /// The per-user series and the refused-connection counter.
    pub(crate) metrics: Arc<TenantMetrics>,
}

/// A login's hold on one of its user's connections: dropping it (logout, another user, the
/// client gone) gives it back.
pub(crate) struct Seat {
    /// The user this seat counts against.
    pub(crate) tenant: Arc<Tenant>,
    /// Where the client's user is noted for `/clients`, and un-noted on drop.
    metrics: Arc<TenantMetrics>,
    /// The client id the seat was taken for.
    client: u64,
}

/// An unauthenticated connection counted against its address
/// (`auth.max_unauthenticated_per_address`); dropping it (login, close) gives it back.
pub(crate) struct Waiting {
    /// The map to give the count back to.
    tenants: Arc<Tenants>,
    /// The source IP the connection was counted against.
    addr: IpAddr,
}

impl Tenants {
    /// `metrics`: where the users' series go (the hub's group in the running proxy).
    pub(crate) fn new(metrics: Arc<TenantMetrics>) -> Arc<Tenants> {
        Arc::new(Tenants {
            by_name: Mutex::new(HashMap::new()),
            unauthenticated: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// User `name`'s state, made the first time the name is configured.
    pub(crate) fn tenant(&self, name: &str) -> Arc<Tenant> {
        let mut by_name = self.by_name.lock().unwrap_or_else(|e| e.into_inner());
        by_name
            .entry(name.to_string())
            .or_insert_with(|| {
                Arc::new(Tenant {
                    figures: self.metrics.user(name),
                    connections: AtomicU32::new(0),
                    buckets: SharedBuckets::default(),
                })
            })
            .clone()
    }

    /// Counts an unauthenticated connection from `peer` (`IP:PORT`; Unix sockets are not
    /// counted): `None` when `max` are already waiting there (0: no limit, not counted).
    ///
    /// `Err(())` when the address has `max` waiting already: the caller refuses the connection (and
    /// it was counted as refused). `Ok(None)` means not counted at all (no limit, or a Unix socket
    /// peer without an IP).
    pub(crate) fn wait(self: &Arc<Self>, peer: &str, max: u32) -> Result<Option<Waiting>, ()> {
        let Some(addr) = peer.parse::<SocketAddr>().ok().map(|a| a.ip()) else {
            return Ok(None);
        };
        if max == 0 {
            return Ok(None);
        }
        let mut waiting = self
            .unauthenticated
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let count = waiting.entry(addr).or_insert(0);
        if *count >= max {
            self.metrics.unauthenticated_refused.inc();
            return Err(());
        }
        *count += 1;
        Ok(Some(Waiting {
            tenants: self.clone(),
            addr,
        }))
    }
}

impl Tenant {
    /// Takes one of the user's connections for client `id` (`max` 0: no limit); `None` when
    /// `max` are logged in already.
    ///
    /// A compare-and-swap loop, so two logins racing for the last place cannot both get it. A
    /// refused login is counted in the user's `connections_refused`.
    pub(crate) fn seat(
        self: &Arc<Self>,
        metrics: &Arc<TenantMetrics>,
        id: u64,
        max: u32,
    ) -> Option<Seat> {
        let taken = self
            .connections
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (max == 0 || n < max).then_some(n + 1)
            });
        if taken.is_err() {
            self.figures.connections_refused.inc();
            return None;
        }
        self.figures.connections.inc();
        metrics.client_user(id, Some(&self.figures.name));
        Some(Seat {
            tenant: self.clone(),
            metrics: metrics.clone(),
            client: id,
        })
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.tenant.connections.fetch_sub(1, Ordering::AcqRel);
        self.tenant.figures.connections.dec();
        self.metrics.client_user(self.client, None);
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut waiting = (self.tenants.unauthenticated.lock()).unwrap_or_else(|e| e.into_inner());
        if let Some(count) = waiting.get_mut(&self.addr) {
            *count -= 1;
            if *count == 0 {
                waiting.remove(&self.addr);
            }
        }
    }
}
