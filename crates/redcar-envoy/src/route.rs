//! One Envoy prefix route as read from the filter ([`EnvoyRoute`]), how notes name it, and the
//! clusters a conversion targets ([`Targets`]).
//!
//! Routes borrow from the parsed input (`'a`), so the whole conversion works on the one document
//! tree read at the start; nothing is copied until it is written into the draft.

use yaml_serde::Value;

/// One route (`routes[]` or `catch_all_route`).
/// Borrows from the input document, which outlives the conversion.
pub(super) struct EnvoyRoute<'a> {
    /// `None` for the catch-all route.
    pub(crate) prefix: Option<&'a str>,
    /// The Envoy cluster the route sends to; a key into [`Targets`].
    pub(crate) cluster: &'a str,
    /// The route's own YAML, for the settings read from it (mirror policies, `key_formatter`).
    pub(crate) value: &'a Value,
}

/// The Envoy clusters to convert: `main` becomes `cluster.seeds` and `upstream.*` (redcar's
/// `default` backend), each of `others` a `backends.<name>` entry.
/// Filled by `routes::convert`; `cluster::convert` takes `main`, `backends::convert` `others`.
#[derive(Debug, Default)]
pub(super) struct Targets {
    /// The catch-all's cluster or, filtered by `--cluster`, the one chosen; never empty after a
    /// successful `routes::convert`.
    pub(crate) main: String,
    /// Every other cluster a route sends to, each once, in the order first met.
    pub(crate) others: Vec<String>,
}

/// How notes and errors name `route`.
/// The same words are used in errors and notes, so a user can search for them in either.
pub(super) fn label(route: &EnvoyRoute) -> String {
    match route.prefix {
        Some(prefix) => format!("route for prefix `{prefix}`"),
        None => "catch_all_route".to_owned(),
    }
}
