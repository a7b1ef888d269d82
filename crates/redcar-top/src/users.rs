//! The per-user table of `redcar top`: each configured user's connections, commands, errors,
//! refusals, rate-limited commands, traffic and latency, from the `redcar_user_*` series.

use std::collections::BTreeSet;

use super::cells::fit;
use super::window::{Latency, Window};

/// Characters right of the user column.
const NUMBERS_WIDTH: usize = 60;

/// One row of the user table.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct UserRow {
    /// The configured name.
    pub(crate) user: String,
    /// Sessions logged in as the user now.
    pub(crate) connections: Option<f64>,
    /// Commands per second over the window.
    pub(crate) commands_per_sec: Option<f64>,
    /// Error replies per second.
    pub(crate) errors_per_sec: Option<f64>,
    /// `-NOPERM` refusals per second.
    pub(crate) refused_per_sec: Option<f64>,
    /// Commands held back or refused by a rate per second.
    pub(crate) limited_per_sec: Option<f64>,
    /// Bytes read from the user's clients per second.
    pub(crate) bytes_in_per_sec: Option<f64>,
    /// Bytes written to the user's clients per second.
    pub(crate) bytes_out_per_sec: Option<f64>,
    /// p50/p99 over the window.
    pub(crate) latency: Latency,
}

/// Every configured user the scrape has series for, by name.
pub(super) fn user_rows(w: &Window<'_>) -> Vec<UserRow> {
    let connections = w.current().by("redcar_user_connections", "user");
    let commands = w.rates_by("redcar_user_commands_total", "user");
    let errors = w.rates_by("redcar_user_command_errors_total", "user");
    let refused = w.rates_by("redcar_user_refusals_total", "user");
    let limited = w.rates_by("redcar_user_rate_limited_total", "user");
    let bytes_in = w.rates_by("redcar_user_received_bytes_total", "user");
    let bytes_out = w.rates_by("redcar_user_sent_bytes_total", "user");
    let latency = w.latencies_by("redcar_user_command_duration_seconds", "user");
    let names: BTreeSet<&String> = connections.keys().chain(commands.keys()).collect();
    names
        .into_iter()
        .map(|user| UserRow {
            user: user.clone(),
            connections: connections.get(user).copied(),
            commands_per_sec: commands.get(user).copied().flatten(),
            errors_per_sec: errors.get(user).copied().flatten(),
            refused_per_sec: refused.get(user).copied().flatten(),
            limited_per_sec: limited.get(user).copied().flatten(),
            bytes_in_per_sec: bytes_in.get(user).copied().flatten(),
            bytes_out_per_sec: bytes_out.get(user).copied().flatten(),
            latency: latency.get(user).copied().unwrap_or_default(),
        })
        .collect()
}

/// The table's lines (none when no user is configured).
pub(super) fn lines(
    rows: &[UserRow],
    width: usize,
    show: &dyn Fn(Option<f64>, Col) -> String,
) -> Vec<String> {
    if rows.is_empty() {
        return Vec::new();
    }
    let max = width.saturating_sub(NUMBERS_WIDTH).max(8);
    let name_width = rows
        .iter()
        .map(|r| r.user.chars().count())
        .chain(["USER".len()])
        .max()
        .unwrap_or(4)
        .min(max);
    let mut lines = vec![format!(
        "{:<name_width$} {:>5} {:>9} {:>7} {:>7} {:>7} {:>10} {:>10} {:>8}",
        "USER", "CONNS", "CMDS/S", "ERR/S", "NOPERM", "LIMITED", "IN", "OUT", "P99 ms"
    )];
    for r in rows {
        lines.push(format!(
            "{:<name_width$} {:>5} {:>9} {:>7} {:>7} {:>7} {:>10} {:>10} {:>8}",
            fit(&r.user, name_width),
            show(r.connections, Col::Count),
            show(r.commands_per_sec, Col::Rate),
            show(r.errors_per_sec, Col::Rate),
            show(r.refused_per_sec, Col::Rate),
            show(r.limited_per_sec, Col::Rate),
            show(r.bytes_in_per_sec, Col::Bytes),
            show(r.bytes_out_per_sec, Col::Bytes),
            show(r.latency.p99_ms, Col::Millis),
        ));
    }
    lines
}

/// How a cell is written.
#[derive(Clone, Copy)]
pub(super) enum Col {
    Count,
    Rate,
    Bytes,
    Millis,
}
