//! `prefix_routes` → redcar's `routes:` (prefix, `strip_prefix`, `mirror`), `catch_all` and
//! `routes_ignore_case`. The catch-all cluster becomes the `default` backend (`cluster.seeds`,
//! `upstream.*`); every other cluster a route or a mirror names becomes `backends.<name>`
//! (backends.rs). Both match the longest prefix, as Envoy does.
//!
//! For example (Envoy, then redcar):
//!
//! ```yaml
//! prefix_routes:
//!   routes: [{prefix: "user:", cluster: users, remove_prefix: true}]
//!   catch_all_route: {cluster: main}
//! ---
//! routes: [{prefix: "user:", backend: users, strip_prefix: true}]
//! backends: {users: {kind: cluster, seeds: [...]}}
//! ```
//!
//! `main` supplies `cluster.seeds` and `upstream.*`. Routes that only send keys where the catch-all
//! sends them anyway are not written at all.

use yaml_serde::{Mapping, Value};

use super::draft::Draft;
use super::route::{label, EnvoyRoute, Targets};
use super::source::{flag, require_number};
use super::ConvertError;

/// The name redcar gives the backend of `cluster.seeds` (the proxy's `backends::DEFAULT_BACKEND`;
/// the root package's tests check that the two agree).
pub const DEFAULT_BACKEND: &str = "default";

/// Route keys converted or explained here; the others get a note.
const ROUTE_KEYS: &[&str] = &[
    "prefix",
    "cluster",
    "remove_prefix",
    "key_formatter",
    "request_mirror_policy",
    "read_command_policy",
];

/// The redcar backend name of an Envoy cluster: `default` for the catch-all one.
/// An Envoy cluster that happens to be called `default` (and is not the catch-all one) becomes
/// `envoy-default`, since redcar reserves `default` for `cluster.seeds`. Pure: the same cluster
/// always gets the same name, so routes, mirrors and `backends.<name>` agree.
pub(super) fn backend_name(cluster: &str, main: &str) -> String {
    if cluster == main {
        DEFAULT_BACKEND.to_owned()
    } else if cluster == DEFAULT_BACKEND {
        // redcar reserves `default` for the `cluster.seeds` cluster.
        "envoy-default".to_owned()
    } else {
        cluster.to_owned()
    }
}

/// Converts every route; returns the clusters to turn into backends.
/// Fails on a prefix listed twice (compared case-folded when `case_insensitive` is set) and on an
/// empty route list; `routes` holds the catch-all route too, with `prefix: None`.
pub(super) fn convert(
    prefix_routes: &Value,
    routes: &[EnvoyRoute],
    draft: &mut Draft,
) -> Result<Targets, ConvertError> {
    draft.note_unknown(
        "routes",
        prefix_routes,
        &["routes", "catch_all_route", "case_insensitive"],
        "prefix_routes.",
    );
    let ignore_case = flag(&prefix_routes["case_insensitive"]);
    let main = main_cluster(routes, draft)?;
    let mut targets = Targets {
        main: main.to_owned(),
        others: Vec::new(),
    };
    let mut converted = Vec::new();
    let mut seen = Vec::new();
    for route in routes {
        let Some(prefix) = route.prefix.filter(|p| !p.is_empty()) else {
            catch_all_extras(route, draft);
            continue;
        };
        let folded = match ignore_case {
            true => prefix.to_ascii_lowercase(),
            false => prefix.to_owned(),
        };
        if seen.contains(&folded) {
            return Err(ConvertError(format!(
                "prefix_routes lists the prefix `{prefix}` twice (Envoy refuses that too)"
            )));
        }
        seen.push(folded);
        converted.push(convert_one(route, prefix, &mut targets, draft)?);
    }
    write_routes(converted, &targets, ignore_case, draft);
    Ok(targets)
}

/// The catch-all cluster: the catch_all_route's, else an empty prefix's, else the first
/// route's (with a note: Envoy fails keys no prefix matches).
/// An empty prefix next to a catch-all route is dropped with a note: redcar refuses it, and the
/// catch-all already serves those keys.
fn main_cluster<'a>(routes: &[EnvoyRoute<'a>], draft: &mut Draft) -> Result<&'a str, ConvertError> {
    let catch_all = routes.iter().find(|r| r.prefix.is_none());
    let empty = routes.iter().find(|r| r.prefix == Some(""));
    let main = match (catch_all, empty, routes.first()) {
        (Some(route), _, _) | (None, Some(route), _) => route.cluster,
        (None, None, Some(first)) => {
            draft.note(
                "",
                format!(
                    "prefix_routes has no catch_all_route: Envoy fails commands on keys no \
                     prefix matches; redcar sends them, and keyless commands, to catch_all \
                     (cluster {})",
                    first.cluster
                ),
            );
            first.cluster
        }
        (None, None, None) => {
            return Err(ConvertError("prefix_routes has no route".to_owned()));
        }
    };
    if let (Some(_), Some(route)) = (catch_all, empty) {
        draft.note(
            "routes",
            format!(
                "{}: an empty prefix is not converted (redcar refuses it); the \
                 catch_all_route's cluster {main} serves the keys no other prefix matches",
                label(route)
            ),
        );
    }
    Ok(main)
}

/// Writes the converted routes, unless they only send keys where catch_all sends them anyway:
/// a single-cluster filter then converts to a config without routes.
/// Otherwise `routes` and `routes_ignore_case` stay unset: every key already goes to the
/// `default` backend, as every route did in Envoy.
fn write_routes(converted: Vec<Mapping>, targets: &Targets, ignore_case: bool, draft: &mut Draft) {
    let needed = converted.iter().any(|r| {
        r["backend"].as_str() != Some(DEFAULT_BACKEND)
            || r.contains_key("strip_prefix")
            || r.contains_key("mirror")
    });
    if needed {
        let converted: Vec<Value> = converted.into_iter().map(Value::Mapping).collect();
        draft.set(&["routes"], Value::Sequence(converted));
        draft.note(
            "cluster",
            format!(
                "cluster: Envoy's catch-all cluster {}, redcar's backend `default` (catch_all)",
                targets.main
            ),
        );
        if ignore_case {
            draft.set(&["routes_ignore_case"], true);
        }
    }
}

/// One prefix route as a `routes:` entry.
/// `remove_prefix` becomes `strip_prefix`; the route's cluster and its mirror's are recorded in
/// `targets` on the way.
fn convert_one(
    route: &EnvoyRoute,
    prefix: &str,
    targets: &mut Targets,
    draft: &mut Draft,
) -> Result<Mapping, ConvertError> {
    let what = label(route);
    draft.note_unknown("routes", route.value, ROUTE_KEYS, &format!("{what} "));
    let mut out = Mapping::new();
    out.insert("prefix".into(), prefix.into());
    out.insert(
        "backend".into(),
        need(route.cluster, targets).as_str().into(),
    );
    if flag(&route.value["remove_prefix"]) {
        out.insert("strip_prefix".into(), true.into());
    }
    read_command_policy(route, draft);
    if let Some(mirror) = mirror(route, targets, draft)? {
        out.insert("mirror".into(), Value::Mapping(mirror));
    }
    Ok(out)
}

/// The backend name of `cluster`, recording it as one to convert.
/// The main cluster is never added to `others`, and no cluster twice.
fn need(cluster: &str, targets: &mut Targets) -> String {
    if cluster != targets.main && !targets.others.iter().any(|c| c == cluster) {
        targets.others.push(cluster.to_owned());
    }
    backend_name(cluster, &targets.main)
}

/// redcar's catch-all is a backend name only: what the catch_all_route adds is noted.
fn catch_all_extras(route: &EnvoyRoute, draft: &mut Draft) {
    let what = label(route);
    draft.note_unknown("", route.value, ROUTE_KEYS, &format!("{what} "));
    if !route.value["request_mirror_policy"].is_null() {
        draft.note(
            "",
            format!(
                "{what}: request_mirror_policy (cluster {}) not converted; redcar mirrors prefix \
                 routes only (routes[].mirror), not the catch-all",
                route.value["request_mirror_policy"][0]["cluster"]
                    .as_str()
                    .unwrap_or("(none)")
            ),
        );
    }
    read_command_policy(route, draft);
}

/// Envoy can send a route's reads to another cluster; redcar reads from the route's backend.
fn read_command_policy(route: &EnvoyRoute, draft: &mut Draft) {
    let policy = &route.value["read_command_policy"];
    if policy.is_null() {
        return;
    }
    let share = match policy["runtime_fraction"].is_null() {
        true => String::new(),
        false => ", a runtime_fraction of them".to_owned(),
    };
    draft.note(
        "routes",
        format!(
            "{}: read_command_policy (reads to cluster {}{share}) not converted; redcar reads a \
             route's keys from its own backend (routes[].read_policy picks its replicas)",
            label(route),
            policy["cluster"].as_str().unwrap_or("(none)")
        ),
    );
}

/// The first `request_mirror_policy` → `mirror: {backend, percent, reads}`.
/// Only the first policy is converted (a redcar route has one mirror); one naming the route's own
/// cluster is dropped with a note. `reads` follows `exclude_read_commands`, since Envoy mirrors
/// reads unless told not to and redcar only writes unless told to.
fn mirror(
    route: &EnvoyRoute,
    targets: &mut Targets,
    draft: &mut Draft,
) -> Result<Option<Mapping>, ConvertError> {
    let what = label(route);
    let mut out = None;
    for (i, policy) in route.value["request_mirror_policy"]
        .as_sequence()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let key = format!("{what} request_mirror_policy[{i}]");
        let cluster = policy["cluster"]
            .as_str()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| ConvertError(format!("`{key}.cluster` is missing")))?;
        if out.is_some() {
            draft.note(
                "routes",
                format!("{key} (cluster {cluster}): not converted; a redcar route has one mirror"),
            );
            continue;
        }
        if cluster == route.cluster {
            draft.note(
                "routes",
                format!("{key}: mirrors to the route's own cluster; not converted"),
            );
            continue;
        }
        draft.note_unknown(
            "routes",
            policy,
            &["cluster", "runtime_fraction", "exclude_read_commands"],
            &format!("{key}."),
        );
        let fraction = &policy["runtime_fraction"];
        draft.note_unknown(
            "routes",
            fraction,
            &["default_value", "runtime_key"],
            &format!("{key}.runtime_fraction."),
        );
        if fraction["runtime_key"].is_string() {
            draft.note(
                "routes",
                format!(
                    "{key}.runtime_fraction.runtime_key: ignored; redcar has no runtime layer, \
                     the default_value is used"
                ),
            );
        }
        let mut mirror = Mapping::new();
        mirror.insert("backend".into(), need(cluster, targets).into());
        mirror.insert("percent".into(), percent(fraction, &key, draft)?.into());
        // Envoy mirrors reads too unless told not to; redcar only writes by default.
        mirror.insert(
            "reads".into(),
            (!flag(&policy["exclude_read_commands"])).into(),
        );
        out = Some(mirror);
    }
    Ok(out)
}

/// `runtime_fraction.default_value` as a whole percentage. No `runtime_fraction`: every
/// command; one without `default_value`: none (Envoy's defaults).
/// A fraction that is not a whole percent is rounded to the nearest, with a note; the result is
/// always within 0..=100.
/// For example `{numerator: 5, denominator: TEN_THOUSAND}` is 0.05 %, rounded to 0 with a note;
/// `{numerator: 50}` (HUNDRED by default) is 50.
fn percent(fraction: &Value, key: &str, draft: &mut Draft) -> Result<u32, ConvertError> {
    if fraction.is_null() {
        return Ok(100);
    }
    let value = &fraction["default_value"];
    let numerator = match &value["numerator"] {
        Value::Null => 0,
        n => require_number(
            n,
            &format!("{key}.runtime_fraction.default_value.numerator"),
        )?,
    };
    let denominator: u64 = match &value["denominator"] {
        Value::Null => 100,
        Value::String(s) if s == "HUNDRED" => 100,
        Value::String(s) if s == "TEN_THOUSAND" => 10_000,
        Value::String(s) if s == "MILLION" => 1_000_000,
        Value::Number(n) if n.as_u64() == Some(0) => 100,
        Value::Number(n) if n.as_u64() == Some(1) => 10_000,
        Value::Number(n) if n.as_u64() == Some(2) => 1_000_000,
        _ => {
            return Err(ConvertError(format!(
                "`{key}.runtime_fraction.default_value.denominator`: expected HUNDRED, \
                 TEN_THOUSAND or MILLION"
            )))
        }
    };
    // Envoy treats a numerator above the denominator as all of them.
    let scaled = numerator.min(denominator) * 100;
    let whole = scaled / denominator;
    if scaled % denominator != 0 {
        let rounded = ((scaled + denominator / 2) / denominator).min(100);
        draft.note(
            "routes",
            format!(
                "{key}.runtime_fraction: {numerator}/{denominator} rounded to {rounded}%; \
                 redcar mirrors whole percents"
            ),
        );
        return Ok(u32::try_from(rounded).unwrap_or(100));
    }
    Ok(u32::try_from(whole).unwrap_or(100))
}
