//! One Envoy prefix route as read from the filter ([`Route`]), how notes name it, and the
//! clusters a conversion targets ([`Targets`]).

use yaml_serde::Value;

/// One route (`routes[]` or `catch_all_route`).
pub(super) struct Route<'a> {
    /// `None` for the catch-all route.
    pub(crate) prefix: Option<&'a str>,
    pub(crate) cluster: &'a str,
    pub(crate) value: &'a Value,
}

/// The Envoy clusters to convert: `main` becomes `cluster.seeds` and `upstream.*` (redcar's
/// `default` backend), each of `others` a `backends.<name>` entry.
#[derive(Debug, Default)]
pub(super) struct Targets {
    pub(crate) main: String,
    pub(crate) others: Vec<String>,
}

/// How notes and errors name `route`.
pub(super) fn label(route: &Route) -> String {
    match route.prefix {
        Some(prefix) => format!("route for prefix `{prefix}`"),
        None => "catch_all_route".to_owned(),
    }
}
