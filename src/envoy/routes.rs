//! `prefix_routes` → the one upstream cluster this redcar serves. redcar does not route by key
//! prefix yet: a config that sends prefixes to different clusters needs `--cluster NAME` (one
//! redcar per cluster), and keys rewritten on the way (`remove_prefix`, `key_formatter`) stop
//! the conversion, because redcar would read and write other keys.

use serde_yaml::Value;

use super::draft::Draft;
use super::source::flag;
use super::ConvertError;

/// One route (`routes[]` or `catch_all_route`).
struct Route<'a> {
    /// `None` for the catch-all route.
    prefix: Option<&'a str>,
    cluster: &'a str,
    value: &'a Value,
}

/// The name of the Envoy cluster to convert.
pub(super) fn pick_cluster(
    proxy: &Value,
    wanted: Option<&str>,
    draft: &mut Draft,
) -> Result<String, ConvertError> {
    let routes = collect(&proxy["prefix_routes"])?;
    if routes.is_empty() {
        // The v2 filter named its one cluster directly.
        return proxy["cluster"].as_str().map(str::to_owned).ok_or_else(|| {
            ConvertError("the redis_proxy filter has no prefix_routes and no cluster".to_owned())
        });
    }
    draft.note_unknown(
        "",
        &proxy["prefix_routes"],
        &["routes", "catch_all_route"],
        "prefix_routes.",
    );
    let mut clusters: Vec<&str> = routes.iter().map(|r| r.cluster).collect();
    clusters.sort_unstable();
    clusters.dedup();
    let chosen = match (wanted, clusters.as_slice()) {
        (Some(name), _) if clusters.contains(&name) => name,
        (Some(name), _) => {
            return Err(ConvertError(format!(
                "--cluster {name}: no route of the redis_proxy filter goes to it (clusters: {})",
                clusters.join(", ")
            )))
        }
        (None, [only]) => only,
        (None, _) => {
            return Err(ConvertError(format!(
                "prefix_routes send keys to {} clusters ({}): redcar serves one cluster and does \
                 not route by prefix yet; run convert-envoy once per cluster with --cluster NAME \
                 and point each key prefix at its own redcar",
                clusters.len(),
                clusters.join(", ")
            )))
        }
    };
    for route in routes.iter().filter(|r| r.cluster == chosen) {
        check_keys_unchanged(route)?;
        note_extras(route, draft);
    }
    if clusters.len() > 1 || routes.iter().any(|r| r.prefix.is_some()) {
        note_prefixes(&routes, chosen, draft);
    }
    Ok(chosen.to_owned())
}

fn collect(prefix_routes: &Value) -> Result<Vec<Route<'_>>, ConvertError> {
    let mut routes = Vec::new();
    for (i, route) in prefix_routes["routes"]
        .as_sequence()
        .into_iter()
        .flatten()
        .enumerate()
    {
        routes.push(Route {
            prefix: Some(route["prefix"].as_str().unwrap_or_default()),
            cluster: cluster_of(route, &format!("prefix_routes.routes[{i}]"))?,
            value: route,
        });
    }
    let catch_all = &prefix_routes["catch_all_route"];
    if !catch_all.is_null() {
        routes.push(Route {
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

fn cluster_of<'a>(route: &'a Value, key: &str) -> Result<&'a str, ConvertError> {
    route["cluster"]
        .as_str()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| ConvertError(format!("`{key}.cluster` is missing")))
}

fn label(route: &Route) -> String {
    match route.prefix {
        Some(prefix) => format!("route for prefix `{prefix}`"),
        None => "catch_all_route".to_owned(),
    }
}

fn check_keys_unchanged(route: &Route) -> Result<(), ConvertError> {
    let rewrites = if flag(&route.value["remove_prefix"]) && route.prefix.is_some() {
        Some("remove_prefix")
    } else if route.value["key_formatter"]
        .as_str()
        .is_some_and(|f| !f.is_empty() && f != "%KEY%")
    {
        Some("key_formatter")
    } else {
        None
    };
    match rewrites {
        Some(what) => Err(ConvertError(format!(
            "the {} rewrites keys ({what}); redcar sends keys unchanged, so the converted \
             config would read and write other keys",
            label(route)
        ))),
        None => Ok(()),
    }
}

fn note_extras(route: &Route, draft: &mut Draft) {
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
                "{}: request_mirror_policy not yet; nothing is mirrored",
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
fn note_prefixes(routes: &[Route], chosen: &str, draft: &mut Draft) {
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
            "prefix_routes: approximated; this redcar serves cluster {chosen} ({}) and does not \
             route by prefix: the application must send only those keys here",
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
