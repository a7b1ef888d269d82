//! `prefix_routes`: which Envoy clusters the filter sends keys to. Without `--cluster` every
//! route is converted into redcar's own prefix routes (prefix.rs) and each cluster into a
//! backend (backends.rs); `--cluster NAME` converts that one cluster only, for one redcar per
//! cluster. Keys rewritten by `key_formatter` stop the conversion, because redcar would read
//! and write other keys.
//!
//! With `--cluster users` and routes `user:` → `users`, `sess:` → `sessions` and a catch-all
//! `main`, the result is a redcar for `users` alone: its seeds and settings, no `routes`, and notes
//! saying that it serves only `user:` keys and that `sess:` and the catch-all need a redcar of
//! their own. A route that strips its prefix cannot be served that way and stops the conversion.

use yaml_serde::Value;

use super::draft::Draft;
use super::route::{label, EnvoyRoute, Targets};
use super::source::flag;
use super::ConvertError;

/// Converts the routes and names the clusters they need.
/// A v2 filter without `prefix_routes` names its one cluster directly. Fails on a `key_formatter`
/// anywhere before converting anything, and on a route without a cluster.
pub(super) fn convert(
    proxy: &Value,
    wanted: Option<&str>,
    draft: &mut Draft,
) -> Result<Targets, ConvertError> {
    let routes = collect(&proxy["prefix_routes"])?;
    if routes.is_empty() {
        // The v2 filter named its one cluster directly.
        let main = proxy["cluster"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                ConvertError(
                    "the redis_proxy filter has no prefix_routes and no cluster".to_owned(),
                )
            })?;
        return Ok(Targets {
            main,
            others: Vec::new(),
        });
    }
    for route in &routes {
        check_key_formatter(route)?;
    }
    match wanted {
        Some(name) => {
            let main = pick_cluster(proxy, &routes, name, draft)?;
            Ok(Targets {
                main,
                others: Vec::new(),
            })
        }
        None => super::prefix::convert(&proxy["prefix_routes"], &routes, draft),
    }
}

/// `--cluster NAME`: that cluster only, its routes' prefixes noted.
/// Fails when no route goes to `name` or one of its routes strips its prefix; the prefixes this
/// redcar serves, and those another must, are noted so the application can be split.
fn pick_cluster(
    proxy: &Value,
    routes: &[EnvoyRoute],
    name: &str,
    draft: &mut Draft,
) -> Result<String, ConvertError> {
    draft.note_unknown(
        "",
        &proxy["prefix_routes"],
        &["routes", "catch_all_route", "case_insensitive"],
        "prefix_routes.",
    );
    if flag(&proxy["prefix_routes"]["case_insensitive"]) {
        draft.note(
            "",
            "prefix_routes.case_insensitive: not converted with --cluster (no routes are \
             written); convert without --cluster for routes_ignore_case",
        );
    }
    let mut clusters: Vec<&str> = routes.iter().map(|r| r.cluster).collect();
    clusters.sort_unstable();
    clusters.dedup();
    if !clusters.contains(&name) {
        return Err(ConvertError(format!(
            "--cluster {name}: no route of the redis_proxy filter goes to it (clusters: {})",
            clusters.join(", ")
        )));
    }
    for route in routes.iter().filter(|r| r.cluster == name) {
        check_keys_unchanged(route)?;
        note_extras(route, draft);
    }
    if clusters.len() > 1 || routes.iter().any(|r| r.prefix.is_some()) {
        note_prefixes(routes, name, draft);
    }
    Ok(name.to_owned())
}

/// Every route in file order, then the catch-all one (`prefix: None`). A route without `prefix` is
/// read as the empty prefix. Fails on a route without a cluster and on the v2 `catch_all_cluster`,
/// which v3 Envoy refuses too.
pub(super) fn collect(prefix_routes: &Value) -> Result<Vec<EnvoyRoute<'_>>, ConvertError> {
    let mut routes = Vec::new();
    for (i, route) in prefix_routes["routes"]
        .as_sequence()
        .into_iter()
        .flatten()
        .enumerate()
    {
        routes.push(EnvoyRoute {
            prefix: Some(route["prefix"].as_str().unwrap_or_default()),
            cluster: cluster_of(route, &format!("prefix_routes.routes[{i}]"))?,
            value: route,
        });
    }
    let catch_all = &prefix_routes["catch_all_route"];
    if !catch_all.is_null() {
        routes.push(EnvoyRoute {
            prefix: None,
            cluster: cluster_of(catch_all, "prefix_routes.catch_all_route")?,
            value: catch_all,
        });
    }
    if !prefix_routes["catch_all_cluster"].is_null() {
        return Err(ConvertError(
            "prefix_routes.catch_all_cluster was removed from Envoy's v3 API: use catch_all_route"
                .to_owned(),
        ));
    }
    Ok(routes)
}

/// The route's cluster; fails when missing or empty, naming the route by `key`.
fn cluster_of<'a>(route: &'a Value, key: &str) -> Result<&'a str, ConvertError> {
    route["cluster"]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ConvertError(format!("`{key}.cluster` is missing")))
}

/// `key_formatter` rewrites each key with a template; redcar has nothing like it.
/// `%KEY%` alone leaves keys as they are and is accepted.
fn check_key_formatter(route: &EnvoyRoute) -> Result<(), ConvertError> {
    if route.value["key_formatter"]
        .as_str()
        .is_some_and(|f| !f.is_empty() && f != "%KEY%")
    {
        return Err(ConvertError(format!(
            "the {} rewrites keys (key_formatter); redcar has no key templates, so the \
             converted config would read and write other keys",
            label(route)
        )));
    }
    Ok(())
}

/// With `--cluster` no route is written, so a route that strips its prefix cannot be kept.
fn check_keys_unchanged(route: &EnvoyRoute) -> Result<(), ConvertError> {
    if flag(&route.value["remove_prefix"]) && route.prefix.is_some() {
        return Err(ConvertError(format!(
            "the {} rewrites keys (remove_prefix), which --cluster cannot keep: convert \
             without --cluster to get a route with strip_prefix",
            label(route)
        )));
    }
    Ok(())
}

/// What `--cluster` drops from one of its routes: unknown keys, the mirror and a read policy.
fn note_extras(route: &EnvoyRoute, draft: &mut Draft) {
    draft.note_unknown(
        "",
        route.value,
        &[
            "prefix",
            "cluster",
            "remove_prefix",
            "key_formatter",
            "request_mirror_policy",
            "read_command_policy",
        ],
        &format!("{} ", label(route)),
    );
    if !route.value["request_mirror_policy"].is_null() {
        draft.note(
            "",
            format!(
                "{}: request_mirror_policy not converted with --cluster; nothing is mirrored",
                label(route)
            ),
        );
    }
    if let Some(other) = route.value["read_command_policy"]["cluster"].as_str() {
        draft.note(
            "",
            format!(
                "{}: read_command_policy to cluster {other} not converted; reads go to this \
                 cluster (use router.read_policy for replicas)",
                label(route)
            ),
        );
    }
}

/// Says which prefixes this instance serves and which need another one.
fn note_prefixes(routes: &[EnvoyRoute], chosen: &str, draft: &mut Draft) {
    let mut mine = Vec::new();
    let mut others = Vec::new();
    for route in routes {
        let what = match route.prefix {
            Some(prefix) => format!("`{prefix}`"),
            None => "keys no prefix matches".to_owned(),
        };
        if route.cluster == chosen {
            mine.push(what);
        } else {
            others.push(format!("{what} → {}", route.cluster));
        }
    }
    draft.note(
        "",
        format!(
            "prefix_routes: approximated (--cluster); this redcar serves cluster {chosen} ({}) \
             only: the application must send only those keys here",
            mine.join(", ")
        ),
    );
    if !others.is_empty() {
        draft.note(
            "",
            format!(
                "prefix_routes not served here (convert again with --cluster NAME, and give that redcar its own listener): {}",
                others.join(", ")
            ),
        );
    }
}
