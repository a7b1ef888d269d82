//! Istio `EnvoyFilter` manifests: the listeners (`applyTo: LISTENER`, `FILTER_CHAIN`,
//! `NETWORK_FILTER`) and clusters (`applyTo: CLUSTER`) their `spec.configPatches` add to the
//! sidecar, rebuilt as the bootstrap entries the rest of the converter reads.
//!
//! | `applyTo` | read as |
//! | --- | --- |
//! | `LISTENER` | the listener as given |
//! | `FILTER_CHAIN` | a listener holding that one chain |
//! | `NETWORK_FILTER` | a listener holding one chain with that one filter |
//! | `CLUSTER` | a cluster, named by `match.cluster.name` when the value has no name |
//! | anything else, or a `REMOVE` | noted and ignored |
//!
//! A listener patched into Istio's own has no address in the file: it gets `127.0.0.1` and the port
//! of the patch's match, with a note telling where to point the application.

use yaml_serde::{Mapping, Value};

use super::draft::Draft;
use super::listener::has_redis_proxy;
use super::resources::{proto_names, Form, Resources, FORMS};
use super::source::number;
use super::ConvertError;

/// One `configPatches[]` entry, and how to name it in notes and errors.
/// Built per entry by `envoy_filter`; the value is owned because it is rewritten (proto names,
/// wrapping into a listener) before it joins `Resources`.
struct Patch<'a> {
    /// `EnvoyFilter NAME configPatches[i]`: how notes and errors name the patch.
    label: String,
    /// `applyTo`: only `LISTENER`, `FILTER_CHAIN`, `NETWORK_FILTER` and `CLUSTER` carry anything.
    apply_to: &'a str,
    /// `patch.operation`; empty if absent. `REMOVE` patches are ignored, `MERGE` on a cluster
    /// noted.
    operation: &'a str,
    /// The patch's `match`: names the listener (and its port) or cluster a partial patch goes into.
    matching: &'a Value,
    /// `patch.value` with its fields under their proto names.
    value: Value,
}

/// Gathers every EnvoyFilter's patches; other documents are noted and ignored.
/// Fails when no manifest is an EnvoyFilter, so a wrong file is not "converted" to an empty config.
/// Patches are applied in file order; a `workloadSelector` is repeated in a note, since redcar must
/// run beside the same workloads.
pub(super) fn gather(docs: &[Value], draft: &mut Draft) -> Result<Resources, ConvertError> {
    let mut resources = Resources {
        form: Form::EnvoyFilter,
        listeners: Value::Sequence(Vec::new()),
        clusters: Value::Sequence(Vec::new()),
        admin: false,
    };
    let objects = flatten(docs);
    if !objects
        .iter()
        .any(|o| o["kind"].as_str() == Some("EnvoyFilter"))
    {
        let kinds: Vec<String> = objects.iter().map(|o| describe(o)).collect();
        return Err(ConvertError(format!(
            "the file holds Kubernetes manifests ({}) but no EnvoyFilter; convert-envoy reads \
             {FORMS}",
            kinds.join("; ")
        )));
    }
    for (i, object) in objects.iter().enumerate() {
        if object["kind"].as_str() == Some("EnvoyFilter") {
            envoy_filter(object, &mut resources, draft)?;
        } else {
            draft.note(
                "",
                format!(
                    "manifest {} ({}): ignored; only EnvoyFilter manifests carry Envoy config",
                    i + 1,
                    describe(object)
                ),
            );
        }
    }
    Ok(resources)
}

/// The documents, with the items of a `kind: List` (as `kubectl get -o yaml` prints) in place.
/// Nested lists are not unfolded: `kubectl` never prints one.
fn flatten(docs: &[Value]) -> Vec<&Value> {
    docs.iter()
        .flat_map(|doc| match doc["items"].as_sequence() {
            Some(items) if doc["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                items.iter().collect()
            }
            _ => vec![doc],
        })
        .collect()
}

/// `kind: NAME` of a manifest, for notes.
/// Never holds a value from the object's spec, only its kind and name.
fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("no kind");
    match object["metadata"]["name"].as_str() {
        Some(name) => format!("kind: {kind}, name: {name}"),
        None => format!("kind: {kind}"),
    }
}

/// One EnvoyFilter: each of its `configPatches`, field names brought to their proto spelling first,
/// is handed to [`apply`] in order.
fn envoy_filter(
    object: &Value,
    resources: &mut Resources,
    draft: &mut Draft,
) -> Result<(), ConvertError> {
    let name = object["metadata"]["name"].as_str().unwrap_or("(unnamed)");
    if let Some(labels) = object["spec"]["workloadSelector"]["labels"].as_mapping() {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{}={}", text(k), text(v)))
            .collect();
        draft.note(
            "",
            format!(
                "EnvoyFilter {name} applies to the workloads labelled {}: run redcar beside those",
                labels.join(",")
            ),
        );
    }
    let patches = object["spec"]["configPatches"].as_sequence();
    if patches.is_none_or(|p| p.is_empty()) {
        draft.note("", format!("EnvoyFilter {name} has no configPatches"));
    }
    for (i, entry) in patches.into_iter().flatten().enumerate() {
        let mut value = entry["patch"]["value"].clone();
        proto_names(&mut value);
        let patch = Patch {
            label: format!("EnvoyFilter {name} configPatches[{i}]"),
            apply_to: entry["applyTo"].as_str().unwrap_or("(no applyTo)"),
            operation: entry["patch"]["operation"].as_str().unwrap_or(""),
            matching: &entry["match"],
            value,
        };
        apply(patch, resources, draft)?;
    }
    Ok(())
}

/// Adds what one patch carries to the listeners or clusters, or says why it is ignored.
/// A filter or chain patch is wrapped into a listener of its own, so [`super::listener::find`]
/// reads every form the same way. Fails only when such a listener has no port to take.
fn apply(patch: Patch, resources: &mut Resources, draft: &mut Draft) -> Result<(), ConvertError> {
    let ignored = |why: &str| {
        format!(
            "{} (applyTo: {}): ignored; {why}",
            patch.label, patch.apply_to
        )
    };
    if patch.operation == "REMOVE" {
        draft.note(
            "",
            ignored("it removes Istio-generated config redcar does not have"),
        );
        return Ok(());
    }
    if !patch.value.is_mapping() {
        draft.note("", ignored("it has no patch.value"));
        return Ok(());
    }
    let listener = match patch.apply_to {
        "CLUSTER" => return cluster(patch, resources, draft),
        "LISTENER" => patch.value.clone(),
        "FILTER_CHAIN" => with_chains(vec![patch.value.clone()]),
        "NETWORK_FILTER" => with_chains(vec![with_filters(patch.value.clone())]),
        _ => {
            draft.note("", ignored("not part of a redis_proxy listener or cluster"));
            return Ok(());
        }
    };
    if !has_redis_proxy(&listener) {
        draft.note("", ignored("it holds no redis_proxy filter"));
        return Ok(());
    }
    let listener = placed(listener, &patch, draft)?;
    push(&mut resources.listeners, listener);
    Ok(())
}

/// A CLUSTER patch's value is the cluster, named by the patch's match when merged into one.
/// Never fails; a `MERGE` patch is converted as far as it goes and noted, since the endpoints Istio
/// generates for the cluster are not in the file.
fn cluster(patch: Patch, resources: &mut Resources, draft: &mut Draft) -> Result<(), ConvertError> {
    let mut cluster = patch.value;
    if cluster["name"].is_null() {
        if let Some(name) = patch.matching["cluster"]["name"].as_str() {
            cluster["name"] = name.into();
        }
    }
    if patch.operation == "MERGE" {
        draft.note(
            "upstream",
            format!(
                "{} (applyTo: CLUSTER, operation: MERGE): merged into a cluster Istio generates; \
                 only what the patch sets is converted, and endpoints Istio supplies are not in \
                 this file",
                patch.label
            ),
        );
    }
    push(&mut resources.clusters, cluster);
    Ok(())
}

/// Gives a listener that has no address of its own (a filter or chain patched into an
/// Istio-generated listener) `127.0.0.1:PORT`, the port taken from the patch's match.
/// The port is `match.listener.portNumber` or the suffix of an Istio listener name
/// (`0.0.0.0_6379`); fails when neither gives one in 1..=65535.
fn placed(mut listener: Value, patch: &Patch, draft: &mut Draft) -> Result<Value, ConvertError> {
    let matched = &patch.matching["listener"];
    if listener["name"].is_null() {
        let name = matched["name"].as_str().unwrap_or(&patch.label).to_owned();
        listener["name"] = name.into();
    }
    if listener["address"].is_mapping() {
        return Ok(listener);
    }
    let port = number(&matched["portNumber"])
        .or_else(|| {
            let name = matched["name"].as_str()?;
            name.rsplit_once('_')?.1.parse().ok()
        })
        .filter(|p| (1..=65535).contains(p))
        .ok_or_else(|| {
            ConvertError(format!(
                "{}: the redis_proxy filter's listener has no address and the patch's match \
                 names no port (match.listener.portNumber): cannot tell where redcar should \
                 listen",
                patch.label
            ))
        })?;
    let context = patch.matching["context"].as_str().unwrap_or("ANY");
    draft.note(
        "listen",
        format!(
            "{}: Istio patches the sidecar's listener on port {port} (context {context}); \
             redcar listens on 127.0.0.1:{port}, so point the application there rather than at \
             the service address",
            patch.label
        ),
    );
    let mut socket = Mapping::new();
    socket.insert("address".into(), "127.0.0.1".into());
    socket.insert("port_value".into(), port.into());
    listener["address"] = one("socket_address", Value::Mapping(socket));
    Ok(listener)
}

/// A listener holding only `filter_chains`, for a `FILTER_CHAIN` or `NETWORK_FILTER` patch.
fn with_chains(chains: Vec<Value>) -> Value {
    one("filter_chains", Value::Sequence(chains))
}

/// A filter chain holding one filter, for a `NETWORK_FILTER` patch.
fn with_filters(filter: Value) -> Value {
    one("filters", Value::Sequence(vec![filter]))
}

/// A mapping with the single entry `key: value`.
fn one(key: &str, value: Value) -> Value {
    let mut map = Mapping::new();
    map.insert(key.into(), value);
    Value::Mapping(map)
}

/// Appends to a YAML sequence; `Resources` always starts with sequences, so nothing is lost.
fn push(list: &mut Value, item: Value) {
    if let Value::Sequence(items) = list {
        items.push(item);
    }
}

/// A label key or value as text for a note; a non-string is shown as YAML.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => yaml_serde::to_string(other)
            .map(|s| s.trim_end().to_owned())
            .unwrap_or_default(),
    }
}
