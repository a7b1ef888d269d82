//! Drawing a [`Frame`] as plain text: a header, the busiest commands, the nodes, the hot and big
//! keys. Pure: the same
//! frame and width always give the same text, and no line is wider than `width`.

use super::cells::{fit, rate};
use super::stats::{CommandRow, Frame, NodeRow};

/// Commands shown; the rest are summarised in one line.
const MAX_COMMAND_ROWS: usize = 20;
/// Narrowest layout drawn; a smaller width still truncates every line to it.
const MIN_WIDTH: usize = 20;
/// Characters right of the name column in the command and node tables.
const COMMAND_NUMBERS_WIDTH: usize = 41;
/// The same for the node table.
const NODE_NUMBERS_WIDTH: usize = 56;
/// A name column is never narrower than this (the line is cut at `width` instead).
const NAME_MIN: usize = 8;

/// Renders `frame` as lines of at most `width` characters, each ending in `\n`.
pub(crate) fn render(frame: &Frame, width: usize) -> String {
    let mut lines = header(frame);
    lines.push(String::new());
    let width = width.max(MIN_WIDTH);
    lines.extend(command_table(&frame.commands, width));
    lines.push(String::new());
    lines.extend(node_table(&frame.nodes, width));
    let users = super::users::lines(&frame.users, width, &user_cell);
    if !users.is_empty() {
        lines.push(String::new());
        lines.extend(users);
    }
    if let Some(panel) = &frame.hotkeys {
        lines.push(String::new());
        lines.extend(super::hotkeys::lines(panel, width));
    }
    let mut out = String::new();
    for line in lines {
        out.push_str(&fit(&line, width));
        out.push('\n');
    }
    out
}

/// The header lines: the admin address, uptime and what the rates cover; traffic; redirects, slow
/// commands and refresh failures; then the near cache, the workers and a notice when there is one.
fn header(frame: &Frame) -> Vec<String> {
    let window = match frame.window_secs {
        Some(secs) => format!("rates over {secs:.1}s"),
        None => "rates since start".to_string(),
    };
    let mut lines = vec![
        format!(
            "redcar {}   up {}   {window}",
            frame.admin,
            opt(frame.uptime_secs, uptime)
        ),
        format!(
            "cmds/s {}   errors/s {}   clients {}   in {}   out {}",
            opt(frame.commands_per_sec, rate),
            opt(frame.errors_per_sec, rate),
            opt(frame.client_connections, count),
            opt(frame.bytes_in_per_sec, bytes_rate),
            opt(frame.bytes_out_per_sec, bytes_rate),
        ),
        format!(
            "moved/s {}   ask/s {}   slow/s {}   refresh failures {}",
            opt(frame.moved_per_sec, rate),
            opt(frame.ask_per_sec, rate),
            opt(frame.slow_per_sec, rate),
            opt(frame.refresh_failures, count),
        ),
    ];
    if let Some(near) = &frame.near_cache {
        lines.push(format!(
            "near cache: hits/s {}   hit ratio {}   held {}",
            opt(near.hits_per_sec, rate),
            opt(near.hit_ratio, |r| format!("{:.0}%", r * 100.0)),
            opt(near.bytes, |b| bytes_rate(b)
                .trim_end_matches("/s")
                .to_string()),
        ));
    }
    if let Some(workers) = &frame.workers {
        lines.push(workers_line(workers));
    }
    if let Some(notice) = &frame.notice {
        lines.push(format!("! {notice}"));
    }
    lines
}

/// `workers: 0 48 clients 64% busy · 1 2 clients 5% busy   new clients packed`
fn workers_line(line: &super::stats::WorkersLine) -> String {
    let each: Vec<String> = line
        .workers
        .iter()
        .enumerate()
        .map(|(w, (clients, busy))| {
            format!(
                "{w}: {} clients {} busy",
                opt(*clients, count),
                opt(*busy, |b| format!("{:.0}%", b * 100.0))
            )
        })
        .collect();
    let placement = match line.packing {
        Some(true) => "   new clients packed",
        Some(false) => "   new clients spread evenly",
        None => "",
    };
    format!("workers  {}{placement}", each.join(" · "))
}

/// The busiest commands first, at most [`MAX_COMMAND_ROWS`]; the rest counted in one line.
fn command_table(rows: &[CommandRow], width: usize) -> Vec<String> {
    let max = width.saturating_sub(COMMAND_NUMBERS_WIDTH).max(NAME_MIN);
    let name_width = column_width("COMMAND", rows.iter().map(|r| r.command.as_str()), max);
    let mut lines = vec![format!(
        "{:<name_width$} {:>10} {:>9} {:>9} {:>9}",
        "COMMAND", "CALLS/S", "ERR/S", "P50 ms", "P99 ms"
    )];
    for row in rows.iter().take(MAX_COMMAND_ROWS) {
        lines.push(format!(
            "{:<name_width$} {:>10} {:>9} {:>9} {:>9}",
            fit(&row.command, name_width),
            opt(row.calls_per_sec, rate),
            opt(row.errors_per_sec, rate),
            opt(row.latency.p50_ms, millis),
            opt(row.latency.p99_ms, millis),
        ));
    }
    if rows.len() > MAX_COMMAND_ROWS {
        lines.push(format!("… {} more", rows.len() - MAX_COMMAND_ROWS));
    }
    if rows.is_empty() {
        lines.push("(no command metrics)".to_string());
    }
    lines
}

/// Every node, by address (a cluster has few enough that scrolling is not needed).
fn node_table(rows: &[NodeRow], width: usize) -> Vec<String> {
    let max = width.saturating_sub(NODE_NUMBERS_WIDTH).max(NAME_MIN);
    let name_width = column_width("NODE", rows.iter().map(|r| r.node.as_str()), max);
    let mut lines = vec![format!(
        "{:<name_width$} {:>10} {:>9} {:>9} {:>9} {:>8} {:>5}",
        "NODE", "REQ/S", "ERR/S", "P50 ms", "P99 ms", "INFLIGHT", "CONNS"
    )];
    for row in rows {
        lines.push(format!(
            "{:<name_width$} {:>10} {:>9} {:>9} {:>9} {:>8} {:>5}",
            fit(&row.node, name_width),
            opt(row.requests_per_sec, rate),
            opt(row.errors_per_sec, rate),
            opt(row.latency.p50_ms, millis),
            opt(row.latency.p99_ms, millis),
            opt(row.in_flight, count),
            opt(row.connections, count),
        ));
    }
    if rows.is_empty() {
        lines.push("(no node metrics)".to_string());
    }
    lines
}

/// Width of a name column: the longest name (or the title), at most `max`.
fn column_width<'a>(title: &str, names: impl Iterator<Item = &'a str>, max: usize) -> usize {
    names
        .map(|n| n.chars().count())
        .chain([title.len()])
        .max()
        .unwrap_or(title.len())
        .min(max)
}

/// A cell of the user table, written like the same kind of cell in the other tables.
fn user_cell(value: Option<f64>, col: super::users::Col) -> String {
    use super::users::Col;
    match col {
        Col::Count => opt(value, count),
        Col::Rate => opt(value, rate),
        Col::Bytes => opt(value, bytes_rate),
        Col::Millis => opt(value, millis),
    }
}

/// `-` for a figure that is missing or not finite (a rate over an empty window), so a column never
/// shows `NaN`.
fn opt(value: Option<f64>, format: fn(f64) -> String) -> String {
    match value {
        Some(v) if v.is_finite() => format(v),
        _ => "-".to_string(),
    }
}

/// A whole number.
fn count(v: f64) -> String {
    format!("{v:.0}")
}

/// Milliseconds with three, two or no decimals, so small and large latencies both fit nine columns.
fn millis(v: f64) -> String {
    if v < 1.0 {
        format!("{v:.3}")
    } else if v < 100.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

/// Bytes per second in binary units, one decimal past bytes.
fn bytes_rate(v: f64) -> String {
    const UNITS: [&str; 4] = ["B/s", "KiB/s", "MiB/s", "GiB/s"];
    let mut v = v;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// The largest two units that matter: `42s`, `3m07s`, `5h02m`, `2d03h`.
fn uptime(secs: f64) -> String {
    let total = secs.max(0.0) as u64;
    let (d, h, m, s) = (
        total / 86400,
        total / 3600 % 24,
        total / 60 % 60,
        total % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s:02}s"),
        (0, _, _) => format!("{h}h{m:02}m"),
        _ => format!("{d}d{h:02}h"),
    }
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
