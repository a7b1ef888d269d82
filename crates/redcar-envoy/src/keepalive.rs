//! The cluster's `upstream_connection_options.tcp_keepalive` (whole seconds and a probe count)
//! → `upstream.tcp_keepalive`, `upstream.tcp_keepalive_interval` and
//! `upstream.tcp_keepalive_probes`.
//!
//! | `tcp_keepalive` field | `upstream` key |
//! | --- | --- |
//! | `keepalive_time` (whole seconds) | `tcp_keepalive` |
//! | `keepalive_interval` (whole seconds) | `tcp_keepalive_interval` |
//! | `keepalive_probes` (a count) | `tcp_keepalive_probes` |
//!
//! The bounds are the ones Linux accepts for `TCP_KEEPIDLE`, `TCP_KEEPINTVL` and `TCP_KEEPCNT`,
//! the same as the config's own check (the proxy's `upstream::MAX_KEEPALIVE_*`; the root
//! package's tests check that the two agree).

use yaml_serde::Value;

use super::draft::Draft;
use super::source::require_number;
use super::ConvertError;

/// The most keepalive probes Linux accepts (`TCP_KEEPCNT`).
pub const MAX_KEEPALIVE_PROBES: u32 = 127;
/// The longest keepalive idle time and probe interval Linux accepts (`TCP_KEEPIDLE`,
/// `TCP_KEEPINTVL`), in seconds.
pub const MAX_KEEPALIVE_SECONDS: std::time::Duration = std::time::Duration::from_secs(32767);

/// How notes and errors name the fields, from the cluster down.
const PREFIX: &str = "upstream_connection_options.tcp_keepalive.";

/// `tcp_keepalive` fields and the redcar key each becomes.
/// Envoy gives the two times as whole seconds (`uint32`), redcar takes durations, hence `{n}s`.
const FIELDS: &[(&str, &str)] = &[
    ("keepalive_time", "tcp_keepalive"),
    ("keepalive_interval", "tcp_keepalive_interval"),
    ("keepalive_probes", "tcp_keepalive_probes"),
];

/// Converts each field present. A value outside what Linux accepts for the socket option (1 up to
/// `MAX_KEEPALIVE_SECONDS` or `MAX_KEEPALIVE_PROBES`) is noted and left at redcar's default rather
/// than refused, since Envoy would have failed the same connects. Fails only on a value that is not
/// a number.
/// Unknown `upstream_connection_options` and `tcp_keepalive` keys are noted first.
pub(super) fn convert(options: &Value, draft: &mut Draft) -> Result<(), ConvertError> {
    draft.note_unknown(
        "upstream",
        options,
        &["tcp_keepalive"],
        "upstream_connection_options.",
    );
    let keepalive = &options["tcp_keepalive"];
    let known: Vec<&str> = FIELDS.iter().map(|(envoy, _)| *envoy).collect();
    draft.note_unknown("upstream", keepalive, &known, PREFIX);
    for (field, key) in FIELDS {
        let value = &keepalive[*field];
        if value.is_null() {
            continue;
        }
        let n = require_number(value, &format!("{PREFIX}{field}"))?;
        // Probes are a count; the others are seconds, written as a redcar duration.
        let (max, converted) = if *field == "keepalive_probes" {
            (u64::from(MAX_KEEPALIVE_PROBES), Value::from(n))
        } else {
            (
                MAX_KEEPALIVE_SECONDS.as_secs(),
                Value::from(format!("{n}s")),
            )
        };
        if !(1..=max).contains(&n) {
            // Linux refuses the socket option, and with it every connect, outside this range.
            draft.note(
                "upstream",
                format!(
                    "{PREFIX}{field} is {n}: outside the 1 to {max} Linux accepts; \
                     upstream.{key} keeps redcar's default"
                ),
            );
            continue;
        }
        draft.set(&["upstream", key], converted);
    }
    Ok(())
}
