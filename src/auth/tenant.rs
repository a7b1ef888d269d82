//! What redcar keeps about each configured user while it runs, across reloads: its logged-in
//! connections, the rate buckets its clients share, and its figures; and the unauthenticated
//! connections of each source address.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::limits::SharedBuckets;
use super::metrics::{TenantMetrics, UserFigures};

/// One configured user's running state (kept by name: a reload that keeps the user keeps it).
#[derive(Debug)]
pub(crate) struct Tenant {
    pub(crate) figures: Arc<UserFigures>,
    connections: AtomicU32,
    pub(crate) buckets: SharedBuckets,
}

/// Every user's running state, and the unauthenticated connections per address. One per
/// process, handed from each `Users` to the next at a reload.
pub(crate) struct Tenants {
    by_name: Mutex<HashMap<String, Arc<Tenant>>>,
    unauthenticated: Mutex<HashMap<IpAddr, u32>>,
    pub(crate) metrics: Arc<TenantMetrics>,
}

/// A login's hold on one of its user's connections: dropping it (logout, another user, the
/// client gone) gives it back.
pub(crate) struct Seat {
    pub(crate) tenant: Arc<Tenant>,
    metrics: Arc<TenantMetrics>,
    client: u64,
}

/// An unauthenticated connection counted against its address
/// (`auth.max_unauthenticated_per_address`); dropping it (login, close) gives it back.
pub(crate) struct Waiting {
    tenants: Arc<Tenants>,
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
