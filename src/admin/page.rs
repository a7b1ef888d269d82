//! The status page (`GET /`): one HTML page, its stylesheet and its script, compiled into the
//! binary (`include_str!`) so it needs no files at run time and loads nothing from elsewhere.
//! The script polls `/status.json`; links are relative so the page works behind a path prefix.

use axum::http::header;
use axum::response::IntoResponse;

/// The page itself; it links `status.css` and `status.js` relatively (a test checks it).
const HTML: &str = include_str!("page/index.html");
/// The stylesheet, served at `/status.css`.
const CSS: &str = include_str!("page/status.css");
/// The script, served at `/status.js`: it polls `status.json` once a second and draws it.
const JS: &str = include_str!("page/status.js");

/// Everything the page loads comes from redcar itself; the CSP makes the browser enforce it.
const CSP: &str = "default-src 'self'; img-src 'self' data:";

/// The page, behind the token like every endpoint but the probes.
pub(super) async fn index() -> impl IntoResponse {
    asset("text/html; charset=utf-8", HTML)
}

/// The page's stylesheet.
pub(super) async fn css() -> impl IntoResponse {
    asset("text/css; charset=utf-8", CSS)
}

/// The page's script.
pub(super) async fn js() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", JS)
}

/// `no-cache` makes the browser revalidate, so an upgraded redcar's page is never mixed with an
/// older script from its cache.
fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for (name, text) in [("index.html", HTML), ("status.css", CSS), ("status.js", JS)] {
            let lower = text.to_ascii_lowercase();
            for external in ["http://", "https://", "//cdn", "@import", "url("] {
                assert!(!lower.contains(external), "{name} contains {external}");
            }
        }
        assert!(HTML.contains("href=\"status.css\"") && HTML.contains("src=\"status.js\""));
        assert!(JS.contains("fetch(\"status.json\""));
    }
}
