//! Finding the one `redis_proxy` filter to convert, and turning its listener's address (and TLS)
//! into `listen`, `unix` or `tls.*`.
//!
//! A TCP `socket_address` becomes `listen`, or `tls.listen` when the filter chain has a
//! `DownstreamTlsContext` (files only: `tls.cert`, `tls.key`, and `tls.client_ca` when client
//! certificates are required). A `pipe` becomes `unix` and `unix_permissions`. A listener with
//! `bind_to_port: false` (an Istio sidecar's) is given a loopback address, with a note.

use yaml_serde::Value;

use super::draft::Draft;
use super::source::{flag, number, socket_address};
use super::ConvertError;

/// A `redis_proxy` filter and the listener (and filter chain) it sits in.
/// Exactly one is converted per run; `find` fails rather than guess between several.
pub(super) struct Found<'a> {
    /// The listener's `name`, or `#N` (its index) when it has none: how notes name it.
    listener_name: String,
    /// The whole listener, for its address and the settings noted as not converted.
    pub(crate) listener: &'a Value,
    /// The filter chain holding the filter: its `transport_socket` decides TLS.
    pub(crate) chain: &'a Value,
    /// The filter's `RedisProxy` message (unwrapped from `typed_config`).
    pub(crate) proxy: &'a Value,
}

/// Listener keys read here; the others get a note.
const LISTENER_KEYS: &[&str] = &[
    "name",
    "@type",
    "address",
    "filter_chains",
    "additional_addresses",
    "bind_to_port",
];

/// Filter chain keys read here.
const CHAIN_KEYS: &[&str] = &["name", "filters", "transport_socket"];

/// Whether any filter chain of `listener` holds a `redis_proxy` filter.
/// Used on the listeners Istio patches build, to drop patches that concern other filters.
pub(super) fn has_redis_proxy(listener: &Value) -> bool {
    chains(listener).any(|chain| filters(chain).any(is_redis_proxy))
}

/// The listener's filter chains; none if the key is absent.
fn chains(listener: &Value) -> impl Iterator<Item = &Value> {
    listener["filter_chains"]
        .as_sequence()
        .into_iter()
        .flatten()
}

/// The network filters of one chain, in order; none if the key is absent.
fn filters(chain: &Value) -> impl Iterator<Item = &Value> {
    chain["filters"].as_sequence().into_iter().flatten()
}

/// Names under which Envoy knows the filter (v3 name, the deprecated v2 one) and its types.
fn is_redis_proxy(filter: &Value) -> bool {
    let name = filter["name"].as_str().unwrap_or_default();
    let kind = filter["typed_config"]["@type"].as_str().unwrap_or_default();
    matches!(
        name,
        "envoy.filters.network.redis_proxy" | "envoy.redis_proxy"
    ) || kind.ends_with("redis_proxy.v3.RedisProxy")
        || kind.ends_with("redis_proxy.v2.RedisProxy")
}

/// The message inside a filter or extension: `typed_config` (or its `value` when it is a
/// `google.protobuf.Struct`), or the v2 `config`.
/// Never fails: a holder with none of the three gives YAML null, which every reader treats as "not
/// set".
pub(super) fn typed_config(holder: &Value) -> &Value {
    let typed = &holder["typed_config"];
    if typed["value"].is_mapping() {
        return &typed["value"];
    }
    if typed.is_mapping() {
        return typed;
    }
    &holder["config"]
}

/// The one filter to convert. Several (in one or more listeners) need `--listener NAME`, and
/// that listener must hold exactly one. `place` says where the listeners came from, for the
/// error when none has the filter.
/// Listeners without a `name` are named `#N` by position, so the error still tells them apart. The
/// returned `Found` borrows from `listeners`, which outlives the whole conversion.
pub(super) fn find<'a>(
    listeners: &'a Value,
    wanted: Option<&str>,
    place: &str,
) -> Result<Found<'a>, ConvertError> {
    let mut found = Vec::new();
    for (i, listener) in listeners.as_sequence().into_iter().flatten().enumerate() {
        let name = listener["name"]
            .as_str()
            .map_or_else(|| format!("#{i}"), str::to_owned);
        for chain in chains(listener) {
            for filter in filters(chain) {
                if is_redis_proxy(filter) {
                    found.push(Found {
                        listener_name: name.clone(),
                        listener,
                        chain,
                        proxy: typed_config(filter),
                    });
                }
            }
        }
    }
    let names = |found: &[Found]| {
        let list: Vec<&str> = found.iter().map(|f| f.listener_name.as_str()).collect();
        list.join(", ")
    };
    if found.is_empty() {
        return Err(ConvertError(format!(
            "no listener with an envoy.filters.network.redis_proxy filter found in {place}"
        )));
    }
    if let Some(wanted) = wanted {
        let all = names(&found);
        found.retain(|f| f.listener_name == wanted);
        if found.is_empty() {
            return Err(ConvertError(format!(
                "no listener named `{wanted}` has a redis_proxy filter (listeners with one: {all})"
            )));
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        n if wanted.is_some() => Err(ConvertError(format!(
            "listener `{}` has {n} redis_proxy filters; convert-envoy converts one per run",
            names(&found[..1])
        ))),
        n => Err(ConvertError(format!(
            "{n} redis_proxy filters found (listeners: {}): pick one with --listener NAME \
             (one redcar serves one listener and one cluster)",
            names(&found)
        ))),
    }
}

/// `address` → `listen` (TCP) or `unix` (+ `unix_permissions`); a TLS filter chain → `tls.*`.
/// Fails on a missing or malformed address, TLS on a pipe, an abstract socket, bad pipe mode bits,
/// or listener TLS whose certificate or key is not a file.
pub(super) fn convert_address(found: &Found, draft: &mut Draft) -> Result<(), ConvertError> {
    let address = &found.listener["address"];
    let key = format!("listener {}.address", found.listener_name);
    let tls = &found.chain["transport_socket"];
    if let Some(pipe) = address["pipe"].as_mapping() {
        if tls.is_mapping() {
            return Err(ConvertError(format!(
                "`{key}`: TLS on a pipe listener is not supported by redcar"
            )));
        }
        return convert_pipe(pipe, &key, draft);
    }
    let mut listen = socket_address(&address["socket_address"], &key)?;
    if found.listener["bind_to_port"].as_bool() == Some(false) {
        listen = on_loopback(&listen, found, draft);
    }
    if tls.is_mapping() {
        convert_tls(tls, &key, draft)?;
        draft.set(&["tls", "listen"], listen);
    } else {
        draft.set(&["listen"], listen);
    }
    if !found.listener["additional_addresses"].is_null() {
        draft.note(
            "",
            "listener additional_addresses: not converted: redcar has one TCP, one Unix and one \
             TLS listener",
        );
    }
    Ok(())
}

/// A listener that binds no port gets its connections redirected to it (an Istio sidecar's
/// outbound listener, named after the service address); redcar binds its own, on loopback.
fn on_loopback(listen: &str, found: &Found, draft: &mut Draft) -> String {
    let port = listen.rsplit_once(':').map_or("", |(_, port)| port);
    draft.note(
        "listen",
        format!(
            "listener {} has bind_to_port: false (Envoy is handed its connections, as in an \
             Istio sidecar); redcar listens on 127.0.0.1:{port} itself, so point the \
             application there",
            found.listener_name
        ),
    );
    format!("127.0.0.1:{port}")
}

/// Listener and filter chain settings around the filter that are not converted.
/// Only notes: other network filters in the chain (e.g. a `tcp_proxy` next to `redis_proxy`), other
/// filter chains and unknown listener keys. Never fails.
pub(super) fn note_unconverted(found: &Found, draft: &mut Draft) {
    let name = &found.listener_name;
    draft.note_unknown(
        "",
        found.listener,
        LISTENER_KEYS,
        &format!("listener {name} "),
    );
    draft.note_unknown(
        "",
        found.chain,
        CHAIN_KEYS,
        &format!("listener {name} filter chain "),
    );
    for filter in filters(found.chain).filter(|f| !is_redis_proxy(f)) {
        let filter_name = filter["name"].as_str().unwrap_or("(unnamed)");
        draft.note(
            "",
            format!(
                "listener {name}: network filter {filter_name} next to redis_proxy: not \
                 converted (no redcar equivalent)"
            ),
        );
    }
    let others = chains(found.listener).count().saturating_sub(1);
    if others > 0 {
        draft.note(
            "",
            format!("listener {name}: {others} other filter chain(s) not converted"),
        );
    }
}

/// A pipe (Unix socket) listener → `unix` and `unix_permissions`. Abstract sockets (`@name`) are
/// refused; the mode is read as octal whether YAML gave `0660` or `660`.
fn convert_pipe(
    pipe: &yaml_serde::Mapping,
    key: &str,
    draft: &mut Draft,
) -> Result<(), ConvertError> {
    let path = pipe
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ConvertError(format!("`{key}.pipe.path` is missing")))?;
    if path.starts_with('@') {
        return Err(ConvertError(format!(
            "`{key}.pipe.path` {path} is an abstract socket: redcar listens on socket files only"
        )));
    }
    draft.set(&["unix"], path);
    if let Some(mode) = pipe.get("mode").and_then(number) {
        // YAML reads `0660` as the decimal 660; both spellings mean rw-rw----.
        let octal = if mode > 0o777 {
            u32::from_str_radix(&mode.to_string(), 8).ok()
        } else {
            u32::try_from(mode).ok()
        };
        match octal.filter(|m| *m <= 0o777) {
            Some(bits) => draft.set(&["unix_permissions"], format!("{bits:o}")),
            None => {
                return Err(ConvertError(format!(
                    "`{key}.pipe.mode` {mode} is not permission bits such as 0660"
                )))
            }
        }
    }
    Ok(())
}

/// A `DownstreamTlsContext` whose certificate, key and CA are files → `tls.cert`/`key`/`client_ca`.
/// Inline certificates are refused (redcar reads PEM files). A trusted CA without
/// `require_client_certificate` is only noted, since redcar checks client certificates only when it
/// requires them.
fn convert_tls(socket: &Value, key: &str, draft: &mut Draft) -> Result<(), ConvertError> {
    let context = typed_config(socket);
    let common = &context["common_tls_context"];
    let cert = &common["tls_certificates"][0];
    let file = |value: &Value, what: &str| {
        value["filename"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                ConvertError(format!(
                "`{key}`: the listener's TLS {what} is not a filename; redcar reads PEM files, so \
                 write it to a file and name it there"
            ))
            })
    };
    draft.set(
        &["tls", "cert"],
        file(&cert["certificate_chain"], "certificate")?,
    );
    draft.set(&["tls", "key"], file(&cert["private_key"], "private key")?);
    if common["tls_certificates"]
        .as_sequence()
        .is_some_and(|s| s.len() > 1)
    {
        draft.note(
            "tls",
            "tls_certificates: only the first certificate is converted",
        );
    }
    draft.note_unknown(
        "tls",
        context,
        &["@type", "require_client_certificate", "common_tls_context"],
        "listener TLS ",
    );
    draft.note_unknown(
        "tls",
        common,
        &["tls_certificates", "validation_context"],
        "listener TLS common_tls_context.",
    );
    draft.note_unknown(
        "tls",
        &common["validation_context"],
        &["trusted_ca"],
        "listener TLS validation_context.",
    );
    let ca = &common["validation_context"]["trusted_ca"];
    if flag(&context["require_client_certificate"]) {
        draft.set(&["tls", "client_ca"], file(ca, "trusted CA")?);
    } else if !ca.is_null() {
        draft.note(
            "tls",
            "validation_context without require_client_certificate: not converted; redcar \
             checks client certificates only when it requires them (tls.client_ca)",
        );
    }
    Ok(())
}
