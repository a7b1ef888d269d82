//! The hot-key and big-key panel: `GET /hotkeys` (JSON) read into rows, and drawn under the
//! node table. A redcar without `/hotkeys` (older, or the request failed) shows no panel.

use std::time::Duration;

use serde::Deserialize;

use super::cells::{fit, rate};
use super::scrape::get_with_timeout;

/// Hot keys shown, and big keys shown.
const HOT_ROWS: usize = 10;
const BIG_ROWS: usize = 5;
/// Characters right of the key column.
const HOT_NUMBERS_WIDTH: usize = 40;
const BIG_NUMBERS_WIDTH: usize = 42;

/// What `/hotkeys` says (the fields `redcar top` uses).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
pub(crate) struct HotPanel {
    /// `hotkeys.enabled`; the panel says so when off.
    pub(crate) enabled: bool,
    /// One command in this many is sampled.
    pub(crate) sample_rate: u32,
    /// What the rates cover.
    pub(crate) window_seconds: f64,
    /// Hottest first.
    pub(crate) hot: Vec<HotRow>,
    /// Biggest first.
    pub(crate) big: Vec<BigRow>,
}

/// One hot key (an estimate from samples).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub(crate) struct HotRow {
    /// The key, escaped and cut by redcar.
    pub(crate) key: String,
    /// The command it was counted for.
    pub(crate) command: String,
    /// The node that answered.
    pub(crate) node: String,
    /// Estimated commands per second.
    pub(crate) rate: f64,
}

/// One big request or reply.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub(crate) struct BigRow {
    /// The key, escaped and cut by redcar.
    pub(crate) key: String,
    /// The command that carried the value.
    pub(crate) command: String,
    /// The node it went to or came from.
    pub(crate) node: String,
    /// `request` or `reply`.
    pub(crate) direction: String,
    /// Bytes on the wire, the biggest seen.
    pub(crate) size: u64,
}

/// `GET /hotkeys`, or `None` if it fails for any reason (the panel is optional).
pub(crate) async fn fetch(addr: &str, token: Option<&str>, limit: Duration) -> Option<HotPanel> {
    let body = get_with_timeout(addr, "/hotkeys", token, limit)
        .await
        .ok()?;
    serde_json::from_str(&body).ok()
}

/// The panel's lines (not yet cut to `width`).
pub(crate) fn lines(panel: &HotPanel, width: usize) -> Vec<String> {
    if !panel.enabled {
        return vec!["(hot keys off: hotkeys.enabled is false)".to_string()];
    }
    let key_width = width.saturating_sub(HOT_NUMBERS_WIDTH).clamp(8, 60);
    let mut out = vec![format!(
        "{:<key_width$} {:<10} {:<21} {:>7}",
        format!(
            "HOT KEY (last {:.0}s, 1 in {})",
            panel.window_seconds, panel.sample_rate
        ),
        "COMMAND",
        "NODE",
        "CALLS/S"
    )];
    for row in panel.hot.iter().take(HOT_ROWS) {
        out.push(format!(
            "{:<key_width$} {:<10} {:<21} {:>7}",
            fit(&row.key, key_width),
            fit(&row.command, 10),
            fit(or_dash(&row.node), 21),
            rate(row.rate),
        ));
    }
    if panel.hot.is_empty() {
        out.push("(no keyed commands in the window)".to_string());
    }
    if panel.big.is_empty() {
        return out;
    }
    out.push(String::new());
    let key_width = width.saturating_sub(BIG_NUMBERS_WIDTH).clamp(8, 60);
    out.push(format!(
        "{:<key_width$} {:<10} {:<21} {:>9}",
        "BIG KEY", "COMMAND", "NODE", "SIZE"
    ));
    for row in panel.big.iter().take(BIG_ROWS) {
        out.push(format!(
            "{:<key_width$} {:<10} {:<21} {:>9}",
            fit(&row.key, key_width),
            fit(&format!("{} {}", row.command, arrow(&row.direction)), 10),
            fit(or_dash(&row.node), 21),
            size(row.size),
        ));
    }
    out
}

fn or_dash(node: &str) -> &str {
    if node.is_empty() {
        "-"
    } else {
        node
    }
}

/// `>` for a request (written to the node), `<` for a reply.
fn arrow(direction: &str) -> &'static str {
    if direction == "request" {
        ">"
    } else {
        "<"
    }
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / f64::from(1 << 20)),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / f64::from(1 << 10)),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_json_and_draws_both_tables() {
        let json = r#"{"enabled":true,"sample_rate":16,"window_seconds":10.0,
            "hot":[{"key":"user:1","command":"get","node":"127.0.0.1:7000","rate":1234.5,
                    "count":12345,"error":0}],
            "big":[{"key":"blob","command":"set","node":"127.0.0.1:7001","direction":"request",
                    "size":1048600,"seen":1,"at_ms":1}],
            "big_value_threshold":131072}"#;
        let panel: HotPanel = serde_json::from_str(json).expect("parses");
        let text = lines(&panel, 100).join("\n");
        assert!(text.contains("HOT KEY (last 10s, 1 in 16)"), "{text}");
        assert!(text.contains("user:1") && text.contains("1234"), "{text}");
        assert!(text.contains("blob") && text.contains("set >") && text.contains("1.0 MiB"));
        let off = HotPanel::default();
        assert!(lines(&off, 80)[0].contains("off"));
    }
}
