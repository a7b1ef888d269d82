//! Telling which form an Envoy file is in from its content (a bootstrap, Istio `EnvoyFilter`
//! manifests, an admin `config_dump`) and gathering the listeners and clusters it holds.
//!
//! The checks run in this order, so a file that could pass for two forms is read one way only:
//!
//! 1. any document with `kind` and `apiVersion`: Istio manifests (other kinds are noted);
//! 2. one document with a `configs` list: an admin config_dump;
//! 3. one document with `static_resources`, or bare `listeners`/`clusters`: a bootstrap;
//! 4. one document with only `dynamic_resources`: refused, pointing at the config_dump.
//!
//! Text that starts with `{` is read as JSON first, since a config_dump is JSON and YAML parsers do
//! not accept all of it.

use serde::Deserialize;
use yaml_serde::Value;

use super::draft::Draft;
use super::resources::{bootstrap_notes, proto_names, Form, Resources, FORMS};
use super::{dump, istio, ConvertError};

/// Parses `text` (YAML, several documents or one, or JSON) and gathers what its form holds.
/// Manifests win over the other forms as soon as one document is a Kubernetes object; a single
/// document is a config_dump if it has `configs[]`, a bootstrap otherwise. A bootstrap that only
/// points at xDS is refused with the command that fetches the config_dump instead.
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
/// Fails on invalid YAML or a bad merge key; empty documents (`---` alone) are dropped.
fn documents(text: &str, source: &str) -> Result<Vec<Value>, ConvertError> {
    if text.trim_start().starts_with('{') {
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(text) {
            let doc = yaml_serde::to_value(json)
                .map_err(|e| ConvertError(format!("{source}: cannot read the JSON: {e}")))?;
            return Ok(vec![doc]);
        }
    }
    let mut docs = Vec::new();
    for document in yaml_serde::Deserializer::from_str(text) {
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
/// A `kind: List` counts too, since `kubectl get -o yaml` prints one.
fn is_manifest(doc: &Value) -> bool {
    doc["kind"].is_string() && doc["apiVersion"].is_string()
}

/// `static_resources`, or a bare `{listeners, clusters}`.
fn is_bootstrap(doc: &Value) -> bool {
    doc["static_resources"].is_mapping()
        || doc["listeners"].is_sequence()
        || doc["clusters"].is_sequence()
}

/// A bootstrap file, field names first brought to their proto spelling. Its `admin` and
/// `dynamic_resources` are only noted; everything but the listeners and clusters is named as
/// not converted.
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
