//! Telling which form an Envoy file is in from its content (a bootstrap, Istio `EnvoyFilter`
//! manifests, an admin `config_dump`) and gathering the listeners and clusters it holds.

use serde::Deserialize;
use serde_yaml::Value;

use super::draft::Draft;
use super::{dump, istio, ConvertError};

/// What the error for an unrecognised file lists.
pub(super) const FORMS: &str =
    "an Envoy bootstrap (static_resources with listeners and clusters), Istio \
     EnvoyFilter manifests (kind: EnvoyFilter with spec.configPatches, one or more YAML \
     documents), or an Envoy admin config_dump (JSON with configs[])";

/// Bootstrap keys read here; the others are Envoy process settings redcar has no use for.
const BOOTSTRAP_KEYS: &[&str] = &[
    "static_resources",
    "admin",
    "dynamic_resources",
    "listeners",
    "clusters",
];

/// The form the file was recognised as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    Bootstrap,
    EnvoyFilter,
    ConfigDump,
}

/// The listeners and clusters of the file, whatever its form.
#[derive(Debug)]
pub(super) struct Resources {
    pub(crate) form: Form,
    pub(crate) listeners: Value,
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

/// Parses `text` (YAML, several documents or one, or JSON) and gathers what its form holds.
pub(super) fn read(text: &str, source: &str, draft: &mut Draft) -> Result<Resources, ConvertError> {
    let docs = documents(text, source)?;
    if docs.iter().any(is_manifest) {
        return istio::gather(&docs, draft);
    }
    match docs.as_slice() {
        [doc] if doc["configs"].is_sequence() => dump::gather(doc, draft),
        [doc] if is_bootstrap(doc) => bootstrap(doc, draft),
        [doc] if doc["dynamic_resources"].is_mapping() => Err(ConvertError(format!(
            "{source} is a bootstrap whose listeners and clusters come from xDS \
             (dynamic_resources): convert Envoy's admin config_dump instead \
             (curl -s http://ENVOY_ADMIN/config_dump > dump.json)"
        ))),
        [] | [_] => Err(ConvertError(format!(
            "{source} is none of the forms convert-envoy reads: {FORMS}"
        ))),
        _ => Err(ConvertError(format!(
            "{source} holds {} YAML documents and none is an Istio EnvoyFilter (kind: \
             EnvoyFilter); convert-envoy reads {FORMS}",
            docs.len()
        ))),
    }
}

/// Every non-empty document, anchors' `<<:` merge keys applied. JSON (a config_dump) is read
/// as JSON: YAML parsers trip over some of what JSON allows.
fn documents(text: &str, source: &str) -> Result<Vec<Value>, ConvertError> {
    if text.trim_start().starts_with('{') {
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(text) {
            let doc = serde_yaml::to_value(json)
                .map_err(|e| ConvertError(format!("{source}: cannot read the JSON: {e}")))?;
            return Ok(vec![doc]);
        }
    }
    let mut docs = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
        let mut doc = Value::deserialize(document)
            .map_err(|e| ConvertError(format!("{source} is not valid YAML: {e}")))?;
        // Envoy configs often share blocks with anchors and `<<:` merge keys.
        doc.apply_merge()
            .map_err(|e| ConvertError(format!("{source}: bad YAML merge key: {e}")))?;
        if !doc.is_null() {
            docs.push(doc);
        }
    }
    Ok(docs)
}

/// A Kubernetes object (`kind` and `apiVersion`), or a `kind: List` of them.
fn is_manifest(doc: &Value) -> bool {
    doc["kind"].is_string() && doc["apiVersion"].is_string()
}

/// `static_resources`, or a bare `{listeners, clusters}`.
fn is_bootstrap(doc: &Value) -> bool {
    doc["static_resources"].is_mapping()
        || doc["listeners"].is_sequence()
        || doc["clusters"].is_sequence()
}

fn bootstrap(doc: &Value, draft: &mut Draft) -> Result<Resources, ConvertError> {
    let mut doc = doc.clone();
    proto_names(&mut doc);
    let doc = &doc;
    let resources = if doc["static_resources"].is_mapping() {
        &doc["static_resources"]
    } else {
        doc
    };
    if doc["dynamic_resources"].is_mapping() {
        draft.note(
            "",
            "dynamic_resources: not converted; redcar has no xDS. If the redis_proxy listener \
             comes from xDS, convert Envoy's admin config_dump instead",
        );
    }
    bootstrap_notes(doc, draft);
    draft.note_unknown(
        "",
        &doc["static_resources"],
        &["listeners", "clusters"],
        "static_resources.",
    );
    Ok(Resources {
        form: Form::Bootstrap,
        listeners: resources["listeners"].clone(),
        clusters: resources["clusters"].clone(),
        admin: doc["admin"].is_mapping(),
    })
}

/// The bootstrap's own settings (outside `static_resources`) that redcar does not take.
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

fn is_lower_camel(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_alphanumeric())
        && name.chars().any(|c| c.is_ascii_uppercase())
}

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
