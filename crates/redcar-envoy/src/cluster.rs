//! An `envoy.clusters.redis` cluster → `cluster.*` (seeds, refresh) and `upstream.*`
//! (connect timeout, keepalive, outlier detection, TLS in tls.rs).
//!
//! | Envoy cluster | redcar key |
//! | --- | --- |
//! | `load_assignment` endpoints, v2 `hosts` | `cluster.seeds` |
//! | `connect_timeout` | `upstream.connect_timeout` |
//! | `cluster_refresh_rate` / `cluster_refresh_timeout` | `cluster.refresh_interval` / `refresh_timeout` |
//! | `redirect_refresh_interval` | `cluster.refresh_min_gap` (at most the refresh interval) |
//! | `redirect_refresh_threshold`, `failure_refresh_threshold` | the `cluster.*` keys of the same name |
//! | `outlier_detection.consecutive_5xx` | `upstream.outlier.consecutive_failures` |
//! | `outlier_detection.{base,max}_ejection_time` | `upstream.outlier.*` of the same name |
//!
//! The endpoints are seeds only: redcar learns the nodes and their roles from `CLUSTER SLOTS`, so
//! weights, localities and health flags are noted, not converted.

use std::collections::BTreeSet;
use std::time::Duration;

use yaml_serde::Value;

use super::draft::Draft;
use super::listener::typed_config;
use super::source::{duration_text, number, require_number, socket_address};
use super::ConvertError;

/// redcar's defaults that the refresh and ejection settings must stay consistent with.
/// `cluster.refresh_interval`'s default: the cap on `refresh_min_gap` when the file sets no rate.
const REDCAR_REFRESH_INTERVAL: Duration = Duration::from_secs(5);
/// `upstream.outlier.base_ejection_time`'s default: a `max_ejection_time` below it is raised.
const REDCAR_BASE_EJECTION: Duration = Duration::from_secs(1);
/// `upstream.outlier.max_ejection_time`'s default, compared with an Envoy `base_ejection_time` when
/// the file sets no maximum.
const REDCAR_MAX_EJECTION: Duration = Duration::from_secs(30);

/// Cluster keys read here or in auth.rs and keepalive.rs; the others get a note. `lb_policy`
/// (Envoy requires `CLUSTER_PROVIDED` for this cluster type) and `type` (superseded by
/// `cluster_type`) change nothing.
/// `hosts` and `tls_context` are the v2 spellings, still found in older bootstraps.
const CLUSTER_KEYS: &[&str] = &[
    "name",
    "@type",
    "cluster_type",
    "type",
    "lb_policy",
    "connect_timeout",
    "load_assignment",
    "hosts",
    "outlier_detection",
    "upstream_connection_options",
    "typed_extension_protocol_options",
    "extension_protocol_options",
    "transport_socket",
    "tls_context",
    "health_checks",
    "circuit_breakers",
];

/// `RedisClusterConfig` keys mapped (or explained) in `refresh`.
const REFRESH_KEYS: &[&str] = &[
    "@type",
    "cluster_refresh_rate",
    "cluster_refresh_timeout",
    "redirect_refresh_interval",
    "redirect_refresh_threshold",
    "failure_refresh_threshold",
    "host_degraded_refresh_threshold",
];

/// `outlier_detection` keys mapped (or explained) below; the others get a note.
const OUTLIER_KEYS: &[&str] = &[
    "consecutive_5xx",
    "base_ejection_time",
    "max_ejection_time",
    "interval",
    "enforcing_consecutive_5xx",
];

/// Finds the cluster named by the filter's route and converts it.
/// Only `envoy.clusters.redis` is accepted: other cluster types mean Envoy shards keys over
/// standalone servers itself, which a redcar fronting one Redis Cluster cannot reproduce. Also used
/// by `backends::convert` on a draft of its own, so every step must write only under `cluster` and
/// `upstream` (and notes).
pub(super) fn convert(clusters: &Value, name: &str, draft: &mut Draft) -> Result<(), ConvertError> {
    let cluster = clusters
        .as_sequence()
        .into_iter()
        .flatten()
        .find(|c| c["name"].as_str() == Some(name))
        .ok_or_else(|| {
            ConvertError(format!(
                "the redis_proxy filter routes to cluster `{name}`, which is not defined"
            ))
        })?;
    let kind = cluster["cluster_type"]["name"].as_str();
    if kind != Some("envoy.clusters.redis") {
        let shown = kind.or(cluster["type"].as_str()).unwrap_or("STATIC");
        return Err(ConvertError(format!(
            "cluster `{name}` is of type {shown}, not envoy.clusters.redis: Envoy shards keys over \
             standalone servers itself there, and redcar fronts a Redis Cluster only"
        )));
    }
    seeds(cluster, name, draft)?;
    if !cluster["connect_timeout"].is_null() {
        let (_, text) = duration_text(&cluster["connect_timeout"], "connect_timeout")?;
        draft.set(&["upstream", "connect_timeout"], text);
    }
    refresh(typed_config(&cluster["cluster_type"]), draft)?;
    outlier(&cluster["outlier_detection"], draft)?;
    super::keepalive::convert(&cluster["upstream_connection_options"], draft)?;
    super::auth::upstream(cluster, draft)?;
    super::tls::convert(cluster, name, draft)?;
    notes(cluster, draft);
    draft.note_unknown(
        "upstream",
        cluster,
        CLUSTER_KEYS,
        &format!("cluster {name} "),
    );
    Ok(())
}

/// Every endpoint (`load_assignment`, or the v2 `hosts`) becomes a seed.
/// Fails when there is none or an address is unusable; duplicates next to each other are dropped.
fn seeds(cluster: &Value, name: &str, draft: &mut Draft) -> Result<(), ConvertError> {
    let mut seeds = Vec::new();
    for locality in cluster["load_assignment"]["endpoints"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        for endpoint in locality["lb_endpoints"].as_sequence().into_iter().flatten() {
            let address = &endpoint["endpoint"]["address"]["socket_address"];
            seeds.push(socket_address(
                address,
                &format!("cluster {name} endpoint"),
            )?);
        }
    }
    for host in cluster["hosts"].as_sequence().into_iter().flatten() {
        seeds.push(socket_address(
            &host["socket_address"],
            &format!("cluster {name} hosts"),
        )?);
    }
    if seeds.is_empty() {
        return Err(ConvertError(format!(
            "cluster `{name}` has no endpoints (load_assignment) to use as seeds"
        )));
    }
    seeds.dedup();
    draft.set(&["cluster", "seeds"], seeds);
    seed_extras(cluster, name, draft);
    Ok(())
}

/// Localities, priorities, weights and health flags of the endpoints: Envoy's redis cluster
/// uses the endpoints only to discover the nodes too, so these are noted, not converted.
/// One note lists them all, sorted, so the output does not depend on endpoint order.
fn seed_extras(cluster: &Value, name: &str, draft: &mut Draft) {
    let assignment = &cluster["load_assignment"];
    let mut extras = unknown(assignment, &["cluster_name", "endpoints"]);
    for locality in assignment["endpoints"].as_sequence().into_iter().flatten() {
        extras.extend(unknown(locality, &["lb_endpoints"]));
        for endpoint in locality["lb_endpoints"].as_sequence().into_iter().flatten() {
            extras.extend(unknown(endpoint, &["endpoint"]));
            extras.extend(unknown(&endpoint["endpoint"], &["address"]));
        }
    }
    if !extras.is_empty() {
        let extras: Vec<&str> = extras.into_iter().collect();
        draft.note(
            "cluster",
            format!(
                "cluster {name} load_assignment {}: not converted; the endpoints are only \
                 seeds, and redcar learns the nodes and their roles from CLUSTER SLOTS",
                extras.join(", ")
            ),
        );
    }
}

/// Keys of `value` not in `known`, sorted and once each.
/// Used for the endpoint extras, where one note lists them all rather than one note per key.
fn unknown<'a>(value: &'a Value, known: &[&str]) -> BTreeSet<&'a str> {
    value
        .as_mapping()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter_map(Value::as_str)
        .filter(|key| !known.contains(key))
        .collect()
}

/// `RedisClusterConfig` → `cluster.*`.
/// A zero duration keeps redcar's default (Envoy takes 0 as "unset" in places, redcar refuses it);
/// `redirect_refresh_interval` becomes `refresh_min_gap`, capped at the refresh interval since
/// redcar refuses a larger minimum gap.
fn refresh(config: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    let mut interval = REDCAR_REFRESH_INTERVAL;
    for (envoy, redcar) in [
        ("cluster_refresh_rate", "refresh_interval"),
        ("cluster_refresh_timeout", "refresh_timeout"),
    ] {
        if !config[envoy].is_null() {
            let (d, text) = duration_text(&config[envoy], envoy)?;
            if d.is_zero() {
                draft.note("cluster", format!("{envoy} is 0s: kept redcar's default"));
                continue;
            }
            if envoy == "cluster_refresh_rate" {
                interval = d;
            }
            draft.set(&["cluster", redcar], text);
        }
    }
    if !config["redirect_refresh_interval"].is_null() {
        let (gap, mut text) = duration_text(
            &config["redirect_refresh_interval"],
            "redirect_refresh_interval",
        )?;
        if gap > interval {
            // redcar refuses a minimum gap longer than the periodic interval.
            text = redcar_units::format_duration(interval);
            draft.note(
                "cluster",
                "redirect_refresh_interval is longer than the refresh interval: \
                 cluster.refresh_min_gap set to the refresh interval, the most redcar accepts",
            );
        }
        draft.set(&["cluster", "refresh_min_gap"], text);
    }
    for field in ["redirect_refresh_threshold", "failure_refresh_threshold"] {
        if !config[field].is_null() {
            draft.set(&["cluster", field], require_number(&config[field], field)?);
        }
    }
    draft.note_unknown("cluster", config, REFRESH_KEYS, "cluster_type ");
    if !config["host_degraded_refresh_threshold"].is_null() {
        draft.note(
            "cluster",
            "host_degraded_refresh_threshold: no key; while a primary is ejected redcar \
             refreshes every upstream.outlier.health_check_interval",
        );
    }
    Ok(())
}

/// `outlier_detection` → `upstream.outlier.*`.
/// `enforcing_consecutive_5xx: 0` means Envoy only counts, so ejection is turned off
/// (`consecutive_failures: 0`); a `max_ejection_time` below the base is raised to it, the nearest
/// setting redcar accepts.
fn outlier(od: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    if od.is_null() {
        return Ok(());
    }
    let enforcing = od["enforcing_consecutive_5xx"].is_null()
        || number(&od["enforcing_consecutive_5xx"]).is_some_and(|n| n > 0);
    if !enforcing {
        draft.set(&["upstream", "outlier", "consecutive_failures"], 0);
        draft.note(
            "upstream",
            "outlier_detection.enforcing_consecutive_5xx is 0 (detect only): ejection turned off",
        );
    } else if !od["consecutive_5xx"].is_null() {
        let n = require_number(&od["consecutive_5xx"], "outlier_detection.consecutive_5xx")?;
        draft.set(&["upstream", "outlier", "consecutive_failures"], n);
    }
    let mut base = REDCAR_BASE_EJECTION;
    if !od["base_ejection_time"].is_null() {
        let (d, text) = duration_text(
            &od["base_ejection_time"],
            "outlier_detection.base_ejection_time",
        )?;
        base = d;
        draft.set(&["upstream", "outlier", "base_ejection_time"], text);
    }
    let max = if od["max_ejection_time"].is_null() {
        REDCAR_MAX_EJECTION
    } else {
        let (d, text) = duration_text(
            &od["max_ejection_time"],
            "outlier_detection.max_ejection_time",
        )?;
        draft.set(&["upstream", "outlier", "max_ejection_time"], text);
        d
    };
    if max < base {
        let text = redcar_units::format_duration(base);
        draft.set(&["upstream", "outlier", "max_ejection_time"], text);
        draft.note(
            "upstream",
            "outlier_detection: max_ejection_time raised to base_ejection_time (redcar refuses a \
             cap below the first ejection)",
        );
    }
    if !od["interval"].is_null() {
        draft.note(
            "upstream",
            "outlier_detection.interval: not converted; Envoy's analysis sweep has no \
             counterpart: redcar ejects on the failure itself and PINGs ejected nodes every \
             upstream.outlier.health_check_interval",
        );
    }
    for key in od
        .as_mapping()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter_map(Value::as_str)
    {
        if !OUTLIER_KEYS.contains(&key) {
            draft.note(
                "upstream",
                format!("outlier_detection.{key}: not converted (no redcar equivalent)"),
            );
        }
    }
    Ok(())
}

/// Cluster settings with no counterpart that change behaviour enough to mention.
/// Each becomes a note, never an error: a proxy without them still works.
fn notes(cluster: &Value, draft: &mut Draft) {
    if !cluster["health_checks"].is_null() {
        draft.note(
            "upstream",
            "cluster health_checks: not converted; redcar PINGs only ejected nodes \
             (upstream.outlier.health_check_interval)",
        );
    }
    if !cluster["circuit_breakers"].is_null() {
        draft.note(
            "upstream",
            "cluster circuit_breakers: not converted; see client.max_connections, \
             client.max_in_flight and upstream.max_in_flight_per_connection",
        );
    }
}
