//! Start-up checks for `backends:`, `routes:` and `catch_all`: every name a route uses exists,
//! prefixes are unique and non-empty, mirrors are sane.
//!
//! Why at start-up and at every reload: a route that names a missing backend, or two routes with
//! the same prefix, would otherwise show up only when a client's key first hits it, as an error on
//! live traffic. Every failure names the key that is wrong (`routes[3].backend`) and, where it
//! helps, what would be valid, and a reload that fails these checks keeps the running
//! configuration. The name `default` is reserved for the `cluster.seeds` cluster, so no backend
//! entry may take it.

use std::collections::BTreeSet;

use super::validate::{fail, host_port, positive, within};
use super::{Config, ConfigError};
use crate::backends::{BackendConfig, MirrorConfig, RouteConfig, DEFAULT_BACKEND};

impl Config {
    /// True when something sends commands to the `cluster.seeds` cluster.
    /// Mirrors count: a mirror to `default` needs `cluster.seeds` as much as a route does.
    pub(super) fn uses_default_backend(&self) -> bool {
        self.catch_all == DEFAULT_BACKEND
            || self.routes.iter().any(|r| {
                r.backend == DEFAULT_BACKEND
                    || r.mirror
                        .as_ref()
                        .is_some_and(|m| m.backend == DEFAULT_BACKEND)
            })
    }

    /// Every backend's own settings first, then `catch_all`, then each route and its mirror.
    ///
    /// Stops at the first problem: a config error is fixed one message at a time, and later checks
    /// may assume the earlier ones passed (a route's mirror is checked only once the route's own
    /// backend is known).
    pub(super) fn validate_routes(&self) -> Result<(), ConfigError> {
        for (name, backend) in &self.backends {
            validate_backend(name, backend)?;
        }
        if !self.knows_backend(&self.catch_all) && self.catch_all != DEFAULT_BACKEND {
            return fail(format!(
                "`catch_all` is `{}`: no such backend (known: {})",
                self.catch_all,
                self.backend_names()
            ));
        }
        let mut seen = BTreeSet::new();
        for (i, route) in self.routes.iter().enumerate() {
            let key = format!("routes[{i}]");
            self.validate_route(&key, route, &mut seen)?;
            if let Some(mirror) = &route.mirror {
                self.validate_mirror(&key, route, mirror)?;
            }
        }
        Ok(())
    }

    /// True when routes may name `name`: a configured backend, or `default` when
    /// `cluster.seeds` is set.
    /// `default` counts only when `cluster.seeds` is set, not for a top-level `sentinel:`.
    fn knows_backend(&self, name: &str) -> bool {
        self.backends.contains_key(name)
            || (name == DEFAULT_BACKEND && !self.cluster.seeds.is_empty())
    }

    /// The backends routes may name, for error messages.
    /// Sorted by name, `default` first when `cluster.seeds` is set.
    fn backend_names(&self) -> String {
        let mut all: Vec<&str> = self.backends.keys().map(String::as_str).collect();
        if !self.cluster.seeds.is_empty() {
            all.insert(0, DEFAULT_BACKEND);
        }
        all.join(", ")
    }

    /// One route (`key` is `routes[i]`): a non-empty prefix not in `seen` (folded when
    /// `routes_ignore_case`), and a known backend.
    ///
    /// Fails on an empty or duplicate prefix or an unknown backend; `strip_prefix` and read
    /// policies need no check beyond their types.
    fn validate_route(
        &self,
        key: &str,
        route: &RouteConfig,
        seen: &mut BTreeSet<String>,
    ) -> Result<(), ConfigError> {
        if route.prefix.is_empty() {
            return fail(format!(
                "`{key}.prefix` is empty: every key would match; use `catch_all` instead"
            ));
        }
        let folded = match self.routes_ignore_case {
            true => route.prefix.to_ascii_lowercase(),
            false => route.prefix.clone(),
        };
        if !seen.insert(folded) {
            let how = if self.routes_ignore_case {
                " (ignoring case: routes_ignore_case)"
            } else {
                ""
            };
            return fail(format!(
                "`{key}.prefix` `{}` is listed twice{how}",
                route.prefix
            ));
        }
        if route.backend.is_empty() {
            return fail(format!(
                "`{key}.backend` is empty: name one of {}",
                self.backend_names()
            ));
        }
        if !self.knows_backend(&route.backend) {
            return fail(format!(
                "`{key}.backend` is `{}`: no such backend (known: {})",
                route.backend,
                self.backend_names()
            ));
        }
        Ok(())
    }

    /// A route's mirror: a known backend other than the route's own, a percentage, a bound.
    /// A mirror to the route's own backend is refused because every mirrored command would run
    /// twice there; `max_in_flight` is 1 to 1,048,576.
    fn validate_mirror(
        &self,
        key: &str,
        route: &RouteConfig,
        mirror: &MirrorConfig,
    ) -> Result<(), ConfigError> {
        if !self.knows_backend(&mirror.backend) {
            return fail(format!(
                "`{key}.mirror.backend` is `{}`: no such backend (known: {})",
                mirror.backend,
                self.backend_names()
            ));
        }
        if mirror.backend == route.backend {
            return fail(format!(
                "`{key}.mirror.backend` is the route's own backend `{}`: every \
                 mirrored command would run twice on it",
                route.backend
            ));
        }
        if mirror.percent > 100 {
            return fail(format!(
                "`{key}.mirror.percent` is {}: expected 0 to 100",
                mirror.percent
            ));
        }
        within(
            &format!("{key}.mirror.max_in_flight"),
            mirror.max_in_flight,
            1,
            1 << 20,
        )
    }
}

/// `default` is reserved, and each kind checks its own settings (seeds' shape, a standalone node's
/// address, a Sentinel's settings).
fn validate_backend(name: &str, backend: &BackendConfig) -> Result<(), ConfigError> {
    if name == DEFAULT_BACKEND {
        return fail(
            "`backends.default`: the name `default` is the `cluster.seeds` cluster; \
             choose another name",
        );
    }
    if name.is_empty() {
        return fail("`backends` has an entry with an empty name");
    }
    let key = |field: &str| format!("backends.{name}.{field}");
    match backend {
        BackendConfig::Cluster(cluster) => {
            if cluster.seeds.is_empty() {
                return fail(format!(
                    "`{}` is empty: a cluster needs a seed",
                    key("seeds")
                ));
            }
            for seed in &cluster.seeds {
                host_port(&key("seeds"), seed)?;
            }
        }
        BackendConfig::Standalone(standalone) => {
            host_port(&key("primary"), &standalone.primary)?;
            for replica in &standalone.replicas {
                host_port(&key("replicas"), replica)?;
                if *replica == standalone.primary {
                    return fail(format!(
                        "`{}` lists the primary {replica} as a replica",
                        key("replicas")
                    ));
                }
            }
        }
        BackendConfig::Sentinel(sentinel) => {
            if sentinel.sentinels.is_empty() {
                return fail(format!("`{}` is empty: name a sentinel", key("sentinels")));
            }
            for address in &sentinel.sentinels {
                host_port(&key("sentinels"), address)?;
            }
            if sentinel.master.is_empty() {
                return fail(format!(
                    "`{}` is empty: name the monitored primary",
                    key("master")
                ));
            }
            positive(&key("query_interval"), sentinel.query_interval)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LISTEN: &str = "listen: 127.0.0.1:6390\n";

    fn load(yaml: &str) -> Result<Config, ConfigError> {
        let config = Config::from_yaml(&format!("{LISTEN}{yaml}"))?;
        config.validate()?;
        Ok(config)
    }

    #[test]
    fn every_backend_kind_parses_and_a_named_catch_all_needs_no_seeds() {
        let config = load(
            "backends:\n  c: {kind: cluster, seeds: [\"127.0.0.1:7000\"]}\n  \
             s: {kind: standalone, primary: \"127.0.0.1:6379\"}\n  \
             l: {kind: sentinel, sentinels: [\"127.0.0.1:26379\"], master: m}\n\
             routes:\n  - {prefix: \"a:\", backend: s, mirror: {backend: l}}\n\
             catch_all: c\n",
        )
        .expect("valid");
        let kinds: Vec<&str> = config.backends.values().map(|b| b.kind()).collect();
        assert_eq!(kinds, ["cluster", "sentinel", "standalone"]);
        let mirror = config.routes[0].mirror.as_ref().expect("mirror");
        assert_eq!(
            (mirror.percent, mirror.reads, mirror.max_in_flight),
            (100, false, 1000)
        );
        assert!(!config.uses_default_backend());
    }

    #[test]
    fn unknown_fields_inside_a_backend_are_refused() {
        for yaml in [
            "backends:\n  s: {kind: standalone, primary: \"127.0.0.1:1\", typo: 1}\n",
            "backends:\n  l: {kind: sentinel, sentinels: [\"127.0.0.1:2\"], master: m, typo: 1}\n",
            "backends:\n  c: {kind: cluster, seeds: [\"127.0.0.1:3\"], typo: 1}\n",
        ] {
            let error = load(yaml).expect_err(yaml).to_string();
            assert!(error.contains("typo"), "{yaml}: {error}");
        }
    }

    #[test]
    fn the_default_backend_is_needed_only_when_something_uses_it() {
        let error = load("backends:\n  s: {kind: standalone, primary: \"127.0.0.1:1\"}\n")
            .expect_err("catch_all default without seeds")
            .to_string();
        assert!(error.contains("or set `catch_all`"), "{error}");
        let error = load(
            "backends:\n  s: {kind: standalone, primary: \"127.0.0.1:1\"}\ncatch_all: s\n\
             routes:\n  - {prefix: \"a:\", backend: default}\n",
        )
        .expect_err("a route to default without seeds")
        .to_string();
        assert!(error.contains("no cluster seeds"), "{error}");
    }
}
