//! Key-prefix routes over named backends: which backend serves a key, whether the prefix is
//! removed first, how its reads are spread, and where its commands are mirrored.
//!
//! The table is built by the wiring (`backends`) from `routes:` and swapped whole on reload; the
//! planner (`plan/routed.rs`) reads it only when it is not empty, so a config without routes
//! pays one branch.

mod mirror;
mod mirror_metrics;
mod prefix;

pub(crate) use mirror::Mirror;
pub(crate) use mirror_metrics::{MirrorCounters, MirrorMetrics};
pub(crate) use prefix::PrefixMatcher;

use std::sync::Arc;

use super::ReadPolicy;
use crate::cluster::ClusterState;

/// Where a routed command goes: one backend's slot map, with the route's read policy.
pub(crate) struct RouteTarget {
    /// The backend's name (errors, metrics).
    pub(crate) backend: Arc<str>,
    /// The backend's slot map and refresh requests.
    pub(crate) state: Arc<ClusterState>,
    /// `routes[].read_policy`; `None`: `router.read_policy`.
    pub(crate) read_policy: Option<ReadPolicy>,
    /// One node without cluster mode (standalone, Sentinel): keys in different slots may still
    /// go together in one command, as a plain Redis server allows.
    pub(crate) single_node: bool,
}

/// One entry of `routes:`, ready to use.
pub(crate) struct Route {
    /// The key prefix the route matches (folded to lower case when `routes_ignore_case`).
    pub(crate) prefix: Box<[u8]>,
    /// `strip_prefix`: keys lose `prefix` before forwarding.
    pub(crate) strip: bool,
    /// The backend the route's keys go to.
    pub(crate) target: Arc<RouteTarget>,
    /// A copy of some of the route's commands to another backend, if configured.
    pub(crate) mirror: Option<Mirror>,
}

/// All routes, matched longest prefix first.
#[derive(Default)]
pub(crate) struct RouteTable {
    /// The routes, as configured.
    routes: Vec<Arc<Route>>,
    /// Finds the longest prefix that matches a key without trying every route.
    matcher: PrefixMatcher,
}

impl RouteTable {
    pub(crate) fn new(routes: Vec<Route>, ignore_case: bool) -> RouteTable {
        let matcher = PrefixMatcher::new(routes.iter().map(|r| &r.prefix[..]), ignore_case);
        RouteTable {
            routes: routes.into_iter().map(Arc::new).collect(),
            matcher,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The route for `key`; `None` means the catch-all backend.
    pub(crate) fn find(&self, key: &[u8]) -> Option<&Arc<Route>> {
        self.matcher.find(key).and_then(|i| self.routes.get(i))
    }
}

impl Route {
    /// The route's name in messages: its prefix and backend.
    pub(crate) fn describe(&self) -> String {
        format!(
            "prefix '{}' -> {}",
            String::from_utf8_lossy(&self.prefix),
            self.target.backend
        )
    }
}

// Plans compare and print routes by what identifies them (tests, `Plan`'s derives).
impl PartialEq for Route {
    fn eq(&self, other: &Route) -> bool {
        self.prefix == other.prefix && self.target.backend == other.target.backend
    }
}

impl Eq for Route {}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The key as the route's backend stores it, a borrowed slice of `key`; `None` when removing
/// the prefix leaves nothing.
pub(in crate::router) fn forwarded_key_bytes<'k>(
    route: Option<&Route>,
    key: &'k [u8],
) -> Option<&'k [u8]> {
    match route {
        Some(route) if route.strip => {
            let rest = &key[route.prefix.len().min(key.len())..];
            (!rest.is_empty()).then_some(rest)
        }
        _ => Some(key),
    }
}
