//! What the converter takes from an Envoy file, whatever its form: the listeners and clusters
//! ([`Resources`]), the [`Form`] it was recognised as, and its field names in their proto
//! spelling.
//!
//! Every form ends up as the same `Resources`, so the steps after `input::read` never ask which
//! form they are reading: only the header line and the "no listener" error differ.

use yaml_serde::Value;

use super::draft::Draft;

/// What the error for an unrecognised file lists.
/// Kept in one place so every "not a form I read" error lists the same three.
pub(super) const FORMS: &str =
    "an Envoy bootstrap (static_resources with listeners and clusters), Istio \
     EnvoyFilter manifests (kind: EnvoyFilter with spec.configPatches, one or more YAML \
     documents), or an Envoy admin config_dump (JSON with configs[])";

/// Bootstrap keys read here; the others are Envoy process settings redcar has no use for.
/// `admin` and `dynamic_resources` are read only to be noted.
const BOOTSTRAP_KEYS: &[&str] = &[
    "static_resources",
    "admin",
    "dynamic_resources",
    "listeners",
    "clusters",
];

/// The form the file was recognised as.
/// Decided once by `input::read` from the content, never from the file name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// A bootstrap (`static_resources`, or bare `listeners`/`clusters`),
    /// docs/migrating-from-envoy.md.
    Bootstrap,
    /// One or more Istio `EnvoyFilter` manifests, their `configPatches` applied in order.
    EnvoyFilter,
    /// Envoy's admin `/config_dump` JSON, whole or per resource.
    ConfigDump,
}

/// The listeners and clusters of the file, whatever its form.
#[derive(Debug)]
pub(super) struct Resources {
    /// What was recognised: it labels the output's header and the "no listener" error.
    pub(crate) form: Form,
    /// A YAML sequence of Envoy `Listener`s, proto field names; empty or null if none was found.
    pub(crate) listeners: Value,
    /// A YAML sequence of Envoy `Cluster`s, proto field names; the routes' clusters are looked up
    /// here.
    pub(crate) clusters: Value,
    /// The file configures Envoy's admin interface.
    pub(crate) admin: bool,
}

// === impl Form ===

impl Form {
    /// Said in the output's header line, after the file name; the bootstrap needs no words.
    pub(crate) fn label(self) -> Option<&'static str> {
        match self {
            Form::Bootstrap => None,
            Form::EnvoyFilter => Some("Istio EnvoyFilter"),
            Form::ConfigDump => Some("Envoy admin config_dump"),
        }
    }

    /// Where the listeners were looked for, for the "none found" error.
    pub(crate) fn listeners_place(self) -> &'static str {
        match self {
            Form::Bootstrap => "static_resources.listeners",
            Form::EnvoyFilter => {
                "the EnvoyFilter patches (applyTo: LISTENER, FILTER_CHAIN or NETWORK_FILTER)"
            }
            Form::ConfigDump => "the config_dump's ListenersConfigDump",
        }
    }
}

/// The bootstrap's own settings (outside `static_resources`) that redcar does not take.
/// One note names them all (e.g. `node, stats_sinks, layered_runtime`), in file order.
pub(super) fn bootstrap_notes(doc: &Value, draft: &mut Draft) {
    let others: Vec<&str> = doc
        .as_mapping()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter_map(Value::as_str)
        .filter(|key| !BOOTSTRAP_KEYS.contains(key))
        .collect();
    if !others.is_empty() {
        draft.note(
            "",
            format!(
                "bootstrap {}: not converted (outside static_resources; redcar takes only the \
                 listener and the cluster)",
                others.join(", ")
            ),
        );
    }
}

/// Protobuf's JSON mapping lets an Envoy file spell fields in lowerCamelCase (`portValue`);
/// the converter reads the proto names (`port_value`). Keys with dots or `@` (extension names,
/// `@type`) are left alone.
/// Applied to the bootstrap as a whole and to each Istio patch value before anything reads them; a
/// config_dump already uses proto names.
pub(super) fn proto_names(value: &mut Value) {
    match value {
        Value::Mapping(map) => {
            for (key, mut child) in std::mem::take(map) {
                proto_names(&mut child);
                let key = match key.as_str() {
                    Some(name) if is_lower_camel(name) => Value::from(snake_case(name)),
                    _ => key,
                };
                map.insert(key, child);
            }
        }
        Value::Sequence(items) => items.iter_mut().for_each(proto_names),
        Value::Tagged(tagged) => proto_names(&mut tagged.value),
        _ => {}
    }
}

/// ASCII letters and digits only, starting lower case and holding an upper-case letter: snake case
/// names and extension names (dots) never match.
fn is_lower_camel(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && name.chars().any(|c| c.is_ascii_uppercase())
}

/// `portValue` → `port_value`; only called on names [`is_lower_camel`] accepted.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}
