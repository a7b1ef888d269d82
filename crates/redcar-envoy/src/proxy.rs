//! The `redis_proxy` filter's connection-pool `settings` (and its other top-level keys) mapped
//! to `router.*`, `upstream.*` and `metrics.*`, following docs/migrating-from-envoy.md.
//!
//! | Envoy `settings` key | redcar key |
//! | --- | --- |
//! | `op_timeout` | `router.op_timeout` (`0s`, Envoy's "none", keeps the default) |
//! | `read_policy` | `router.read_policy` (AZ affinity approximated by `prefer-replica`) |
//! | `enable_command_stats` | `metrics.command_stats` |
//! | `max_buffer_size_before_flush`, `buffer_flush_timeout` | `upstream.flush_interval` (approximated) |
//! | `connection_rate_limit` | `upstream.max_connects_per_second` (per node, approximated) |
//!
//! `enable_redirection`, `enable_hashtagging`, `max_upstream_unknown_connections` and
//! `dns_cache_config` have no switch in redcar and are only noted.

use std::time::Duration;

use yaml_serde::Value;

use super::draft::Draft;
use super::source::{duration_text, flag, require_number};
use super::ConvertError;

/// Longest `upstream.flush_interval` redcar accepts (config/validate.rs).
/// A longer window would add its whole length to every command's latency; the config refuses it.
const MAX_FLUSH_INTERVAL: Duration = Duration::from_millis(10);

/// Envoy's flush window when `max_buffer_size_before_flush` is set without a timeout.
/// Envoy's documented default for `buffer_flush_timeout`.
const ENVOY_DEFAULT_FLUSH_TIMEOUT: &str = "3ms";

/// Filter keys handled elsewhere (routes, auth, faults) or with no effect on redcar.
/// `stat_prefix` changes only Envoy's metric names; redcar's are fixed (docs/observability.md).
const FILTER_KEYS: &[&str] = &[
    "stat_prefix",
    "settings",
    "prefix_routes",
    "cluster",
    "downstream_auth_password",
    "downstream_auth_passwords",
    "downstream_auth_username",
    "faults",
    "external_auth_provider",
    "@type",
];

/// `settings` keys this module maps (or notes).
const SETTINGS_KEYS: &[&str] = &[
    "op_timeout",
    "read_policy",
    "enable_redirection",
    "enable_hashtagging",
    "max_buffer_size_before_flush",
    "buffer_flush_timeout",
    "max_upstream_unknown_connections",
    "enable_command_stats",
    "dns_cache_config",
    "connection_rate_limit",
];

/// Converts `settings` and notes every other filter key it does not know.
/// `op_timeout: 0s` (Envoy's "no timeout") keeps redcar's default, since redcar refuses an
/// unbounded command timeout. Fails on a malformed duration, number or read policy.
pub(super) fn convert(proxy: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    let settings = &proxy["settings"];
    if let Some((op, text)) = present(settings, "op_timeout", "settings.op_timeout")? {
        if op.is_zero() {
            draft.note(
                "router",
                "settings.op_timeout is 0s: kept redcar's default (1s)",
            );
        } else {
            draft.set(&["router", "op_timeout"], text);
        }
    }
    read_policy(&settings["read_policy"], draft)?;
    redirection_and_tags(settings, draft);
    flush(settings, draft)?;
    if !settings["max_upstream_unknown_connections"].is_null() {
        draft.note(
            "upstream",
            "settings.max_upstream_unknown_connections: no separate cap; nodes named by a \
             redirect are connected to like any other (upstream.connections_per_node)",
        );
    }
    if let Some(stats) = settings["enable_command_stats"].as_bool() {
        draft.set(&["metrics", "command_stats"], stats);
    }
    if !settings["dns_cache_config"].is_null() {
        draft.note(
            "",
            "settings.dns_cache_config: not yet; node addresses are resolved by the system \
             resolver on each connect",
        );
    }
    rate_limit(&settings["connection_rate_limit"], draft)?;
    draft.note_unknown("", settings, SETTINGS_KEYS, "settings.");
    other_filter_keys(proxy, draft);
    Ok(())
}

/// A duration setting, if present.
/// `key` names the setting in the error.
fn present(
    parent: &Value,
    field: &str,
    key: &str,
) -> Result<Option<(Duration, String)>, ConvertError> {
    let value = &parent[field];
    if value.is_null() {
        return Ok(None);
    }
    duration_text(value, key).map(Some)
}

/// `MASTER` (0) … `AZ_AFFINITY_REPLICAS_AND_PRIMARY` (6), by name or number.
fn read_policy(value: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    if value.is_null() {
        return Ok(());
    }
    let name = match (value.as_str(), value.as_u64()) {
        (Some(name), _) => name.to_ascii_uppercase(),
        (None, Some(n)) => n.to_string(),
        _ => String::new(),
    };
    let policy = match name.as_str() {
        "MASTER" | "PRIMARY" | "0" => "primary",
        "PREFER_MASTER" | "PREFER_PRIMARY" | "1" => "prefer-primary",
        "REPLICA" | "2" => "replica",
        "PREFER_REPLICA" | "3" => "prefer-replica",
        "ANY" | "4" => "any",
        "AZ_AFFINITY" | "AZ_AFFINITY_REPLICAS_AND_PRIMARY" | "5" | "6" => {
            draft.note(
                "router",
                format!(
                    "settings.read_policy {name}: approximated by prefer-replica; redcar does \
                     not know availability zones"
                ),
            );
            "prefer-replica"
        }
        _ => {
            return Err(ConvertError(format!(
                "`settings.read_policy` is `{}`: expected MASTER, PREFER_MASTER, REPLICA, \
                 PREFER_REPLICA or ANY",
                yaml_serde::to_string(value).unwrap_or_default().trim_end()
            )))
        }
    };
    draft.set(&["router", "read_policy"], policy);
    Ok(())
}

/// Envoy can turn both off; redcar cannot, so each is only noted. Redirection off is Envoy's
/// default, hence the note whenever the key is not `true`.
fn redirection_and_tags(settings: &Value, draft: &mut Draft) {
    if !flag(&settings["enable_redirection"]) {
        draft.note(
            "router",
            "settings.enable_redirection is off: redcar always follows MOVED and ASK (up to \
             router.max_redirects)",
        );
    }
    if settings["enable_hashtagging"].as_bool() == Some(false) {
        draft.note(
            "router",
            "settings.enable_hashtagging is off: redcar routes {hash tags} as Redis Cluster does",
        );
    }
}

/// `max_buffer_size_before_flush` + `buffer_flush_timeout` → `upstream.flush_interval`.
/// Only a size threshold makes Envoy buffer, so a timeout without it changes nothing. The window is
/// capped at 10ms, the most `upstream.flush_interval` accepts.
fn flush(settings: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    let size_value = &settings["max_buffer_size_before_flush"];
    let size = if size_value.is_null() {
        0
    } else {
        require_number(size_value, "settings.max_buffer_size_before_flush")?
    };
    let timeout = present(
        settings,
        "buffer_flush_timeout",
        "settings.buffer_flush_timeout",
    )?;
    if size == 0 {
        if timeout.is_some() {
            draft.note(
                "upstream",
                "settings.buffer_flush_timeout without max_buffer_size_before_flush: Envoy \
                 ignores it too; redcar writes at the end of each scheduling round",
            );
        }
        return Ok(());
    }
    let (window, mut text) = match timeout {
        Some(t) => t,
        None => (
            Duration::from_millis(3),
            ENVOY_DEFAULT_FLUSH_TIMEOUT.to_owned(),
        ),
    };
    if window > MAX_FLUSH_INTERVAL {
        text = "10ms".to_owned();
        draft.note(
            "upstream",
            "settings.buffer_flush_timeout above 10ms: capped at 10ms, the most \
             upstream.flush_interval accepts",
        );
    }
    draft.set(&["upstream", "flush_interval"], text);
    draft.note(
        "upstream",
        format!(
            "settings.max_buffer_size_before_flush {size}: approximated; redcar has no size \
             threshold of its own (it writes at 256 KiB or upstream.max_in_flight_per_connection). \
             A window adds latency to every command: measure before keeping it (bench/README.md)"
        ),
    );
    Ok(())
}

/// Envoy's reconnect rate limit → `upstream.max_connects_per_second`.
/// Fails when the per-second count is missing or not a number.
fn rate_limit(value: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    if value.is_null() {
        return Ok(());
    }
    let per_second = require_number(
        &value["connection_rate_limit_per_sec"],
        "settings.connection_rate_limit.connection_rate_limit_per_sec",
    )?;
    draft.set(&["upstream", "max_connects_per_second"], per_second);
    draft.note(
        "upstream",
        "settings.connection_rate_limit: approximated; Envoy's token bucket covers a connection \
         pool, redcar's upstream.max_connects_per_second limits each node",
    );
    Ok(())
}

/// Filter-level keys with no redcar counterpart.
fn other_filter_keys(proxy: &Value, draft: &mut Draft) {
    if !proxy["custom_commands"].is_null() {
        draft.note(
            "",
            "custom_commands: not converted; declare each under custom_commands with its key \
             positions (docs/configuration.md), or let redcar learn them from COMMAND",
        );
    }
    if !proxy["latency_in_micros"].is_null() {
        draft.note(
            "",
            "latency_in_micros: not converted; redcar's latency metrics are Prometheus \
             histograms in seconds",
        );
    }
    let mut known = FILTER_KEYS.to_vec();
    known.extend(["custom_commands", "latency_in_micros"]);
    draft.note_unknown("", proxy, &known, "");
}
