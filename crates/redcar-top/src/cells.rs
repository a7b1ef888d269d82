//! How the dashboard writes a cell: text cut to its column's width, a rate with one decimal
//! while it is small.

/// Cuts `text` to `width` characters, marking a cut with `…`.
pub(super) fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A per-second rate: one decimal below 1000.
pub(super) fn rate(v: f64) -> String {
    if v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}
