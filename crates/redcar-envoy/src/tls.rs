//! A cluster's `transport_socket` (`envoy.transport_sockets.tls` with an `UpstreamTlsContext`,
//! or the v2 `tls_context`) → `upstream.tls.*`. redcar reads certificates and keys from files
//! only: inline or SDS-provided ones are named in a comment (never their content), with the key
//! to set once they are written to a file.
//!
//! | Envoy `UpstreamTlsContext` | `upstream.tls` key |
//! | --- | --- |
//! | `common_tls_context.validation_context.trusted_ca.filename` | `ca_file` (required) |
//! | `sni`, or one exact subject alt name matcher | `server_name` |
//! | `tls_certificates[0]` chain and key filenames | `cert_file`, `key_file` (both or neither) |
//!
//! Without a CA file nothing is written: redcar would refuse the other keys with TLS off, and TLS
//! without verification is not offered.

use yaml_serde::Value;

use super::draft::Draft;
use super::listener::typed_config;
use super::ConvertError;

/// `UpstreamTlsContext` keys read here; the others get a note.
const CONTEXT_KEYS: &[&str] = &["@type", "sni", "common_tls_context"];

/// `CommonTlsContext` keys read here (or explained); the others get a note.
const COMMON_KEYS: &[&str] = &[
    "tls_certificates",
    "validation_context",
    "combined_validation_context",
    "tls_certificate_sds_secret_configs",
    "validation_context_sds_secret_config",
    "tls_params",
];

/// `CertificateValidationContext` keys read here (or explained); the others get a note.
const VALIDATION_KEYS: &[&str] = &[
    "trusted_ca",
    "match_subject_alt_names",
    "match_typed_subject_alt_names",
];

/// Where a certificate, key or CA of the Envoy file is.
/// Decided per field by [`pem`]; a file path is taken as is, never opened.
enum Pem {
    /// A file redcar can read too.
    File(String),
    /// Somewhere redcar cannot read from: the note says which field.
    Elsewhere(String),
}

/// What the cluster's TLS settings give `upstream.tls`.
/// Filled by [`read`]; [`apply`] writes it only when `ca_file` is set.
#[derive(Default)]
struct TlsFound {
    /// `trusted_ca` as a file: without it nothing else is written, since redcar cannot verify the
    /// nodes and refuses TLS keys while TLS is off.
    ca_file: Option<String>,
    /// `sni`, or the one exact subject alt name matcher when there is no `sni`.
    server_name: Option<String>,
    /// The client certificate chain's file; used only together with `key_file`.
    cert_file: Option<String>,
    /// The client private key's file; used only together with `cert_file`.
    key_file: Option<String>,
}

/// Converts the cluster's upstream TLS, if any. `name` is the Envoy cluster, for the notes.
/// A `raw_buffer` socket means plain TCP and writes nothing; an unknown transport socket is noted.
/// Fails only when a TLS socket carries no readable context.
pub(super) fn convert(cluster: &Value, name: &str, draft: &mut Draft) -> Result<(), ConvertError> {
    let (context, at) = if !cluster["transport_socket"].is_null() {
        let socket = &cluster["transport_socket"];
        let kind = socket["name"].as_str().unwrap_or_default();
        match kind {
            "envoy.transport_sockets.tls" | "tls" => {}
            // Plain TCP, as redcar connects without upstream.tls.
            "envoy.transport_sockets.raw_buffer" | "raw_buffer" => return Ok(()),
            _ => {
                draft.note(
                    "upstream",
                    format!(
                        "cluster {name} transport_socket {kind}: not converted (redcar connects \
                         in plain TCP, or with TLS through upstream.tls)"
                    ),
                );
                return Ok(());
            }
        }
        (typed_config(socket), "transport_socket")
    } else if !cluster["tls_context"].is_null() {
        (&cluster["tls_context"], "tls_context")
    } else {
        return Ok(());
    };
    if !context.is_mapping() {
        return Err(ConvertError(format!(
            "cluster {name} {at}: no UpstreamTlsContext (typed_config) to read"
        )));
    }
    let label = format!("cluster {name} {at}");
    let found = read(context, &label, draft);
    apply(found, &label, draft);
    Ok(())
}

/// Reads the context, noting every field that cannot be carried over.
/// Never fails: what cannot be carried over ends up in notes, and [`apply`] decides what to write.
fn read(context: &Value, label: &str, draft: &mut Draft) -> TlsFound {
    let mut found = TlsFound {
        server_name: context["sni"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
        ..TlsFound::default()
    };
    draft.note_unknown("upstream", context, CONTEXT_KEYS, &format!("{label} "));
    let common = &context["common_tls_context"];
    let at = format!("{label} common_tls_context.");
    draft.note_unknown("upstream", common, COMMON_KEYS, &at);
    validation(common, &at, &mut found, draft);
    client_certificate(common, &at, &mut found, draft);
    if !common["tls_params"].is_null() {
        draft.note(
            "upstream",
            format!(
                "{at}tls_params: not converted; redcar offers TLS 1.2 and 1.3 with rustls's \
                 default cipher suites and curves"
            ),
        );
    }
    found
}

/// The CA (`validation_context`, or the default one of `combined_validation_context`) and the
/// name checks.
/// SDS-provided CAs are named in a note with the key to set; unknown validation keys too.
fn validation(common: &Value, at: &str, found: &mut TlsFound, draft: &mut Draft) {
    let combined = &common["combined_validation_context"];
    let (context, key) = if common["validation_context"].is_null() {
        (
            &combined["default_validation_context"],
            "combined_validation_context.default_validation_context",
        )
    } else {
        (&common["validation_context"], "validation_context")
    };
    for sds in [
        &common["validation_context_sds_secret_config"],
        &combined["validation_context_sds_secret_config"],
    ] {
        if !sds.is_null() {
            draft.note(
                "upstream",
                format!(
                    "{at}validation_context_sds_secret_config (SDS secret {}): not converted; \
                     redcar reads the CA from a file: write it to one and set upstream.tls.ca_file",
                    sds["name"].as_str().unwrap_or("without a name")
                ),
            );
        }
    }
    draft.note_unknown(
        "upstream",
        combined,
        &[
            "default_validation_context",
            "validation_context_sds_secret_config",
        ],
        &format!("{at}combined_validation_context."),
    );
    if context.is_null() {
        return;
    }
    let field = format!("{at}{key}");
    if !context["trusted_ca"].is_null() {
        match pem(&context["trusted_ca"], &format!("{field}.trusted_ca")) {
            Pem::File(path) => found.ca_file = Some(path),
            Pem::Elsewhere(what) => draft.note(
                "upstream",
                format!(
                    "{what}: not converted; redcar reads the CA from a file: write it to one and \
                     set upstream.tls.ca_file"
                ),
            ),
        }
    }
    names(context, &field, found, draft);
    draft.note_unknown("upstream", context, VALIDATION_KEYS, &format!("{field}."));
}

/// Subject-alternative-name matchers: redcar checks one name, `server_name` (by default each
/// node's host). One exact name with no `sni` becomes `server_name`; anything else is noted.
fn names(context: &Value, field: &str, found: &mut TlsFound, draft: &mut Draft) {
    let mut matchers: Vec<&Value> = context["match_subject_alt_names"]
        .as_sequence()
        .into_iter()
        .flatten()
        .collect();
    matchers.extend(
        context["match_typed_subject_alt_names"]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|typed| &typed["matcher"]),
    );
    let exact: Vec<&str> = matchers
        .iter()
        .filter_map(|m| m["exact"].as_str())
        .collect();
    match (matchers.len(), exact.as_slice(), &found.server_name) {
        (0, _, _) => draft.note(
            "upstream",
            format!(
                "{field}: Envoy checked the nodes' certificates against the CA only; redcar also \
                 checks the name in them (upstream.tls.server_name, else each node's address)"
            ),
        ),
        // redcar checks server_name in the certificate: the same check as Envoy's.
        (1, [one], Some(sni)) if one == sni => {}
        (1, [one], None) => {
            found.server_name = Some((*one).to_owned());
            draft.note(
                "upstream",
                format!(
                    "{field} subject alt name {one}: upstream.tls.server_name, which redcar also \
                     sends as SNI"
                ),
            );
        }
        _ => draft.note(
            "upstream",
            format!(
                "{field}.match_subject_alt_names: not converted; redcar checks one name, \
                 upstream.tls.server_name (else each node's address)"
            ),
        ),
    }
}

/// The client certificate and key (the first of `tls_certificates`).
/// Only a chain and a key that are both files are kept; otherwise one note names where each part is
/// (never its content).
fn client_certificate(common: &Value, at: &str, found: &mut TlsFound, draft: &mut Draft) {
    if let Some(sds) = common["tls_certificate_sds_secret_configs"].as_sequence() {
        let names: Vec<&str> = sds.iter().filter_map(|s| s["name"].as_str()).collect();
        draft.note(
            "upstream",
            format!(
                "{at}tls_certificate_sds_secret_configs (SDS secret {}): not converted; redcar \
                 reads the client certificate and key from files: write them to files and set \
                 upstream.tls.cert_file and key_file",
                names.join(", ")
            ),
        );
    }
    let certificates = common["tls_certificates"].as_sequence();
    let Some(first) = certificates.and_then(|c| c.first()) else {
        return;
    };
    if certificates.is_some_and(|c| c.len() > 1) {
        draft.note(
            "upstream",
            format!("{at}tls_certificates: only the first is converted; redcar presents one"),
        );
    }
    let field = format!("{at}tls_certificates[0]");
    draft.note_unknown(
        "upstream",
        first,
        &["certificate_chain", "private_key"],
        &format!("{field}."),
    );
    let chain = pem(
        &first["certificate_chain"],
        &format!("{field}.certificate_chain"),
    );
    let key = pem(&first["private_key"], &format!("{field}.private_key"));
    match (chain, key) {
        (Pem::File(cert), Pem::File(key)) => {
            found.cert_file = Some(cert);
            found.key_file = Some(key);
        }
        (chain, key) => {
            let mut elsewhere = Vec::new();
            for side in [chain, key] {
                if let Pem::Elsewhere(what) = side {
                    elsewhere.push(what);
                }
            }
            draft.note(
                "upstream",
                format!(
                    "{}: not converted; redcar reads the client certificate and key from files: \
                     write them to files and set upstream.tls.cert_file and key_file (both or \
                     neither)",
                    elsewhere.join(", ")
                ),
            );
        }
    }
}

/// A `DataSource` holding a certificate or key. Its content is never copied: a private key
/// must not end up in a config file or a warning.
fn pem(value: &Value, field: &str) -> Pem {
    if let Some(path) = value["filename"].as_str().filter(|p| !p.is_empty()) {
        return Pem::File(path.to_owned());
    }
    for how in ["inline_string", "inline_bytes", "environment_variable"] {
        if !value[how].is_null() {
            return Pem::Elsewhere(format!("{field}.{how}"));
        }
    }
    Pem::Elsewhere(format!("{field} (no filename)"))
}

/// Sets `upstream.tls.*`. Without a CA file redcar cannot verify the nodes, and it refuses
/// every other TLS key while TLS is off, so then everything found goes into one note.
/// The closing note reminds that the nodes must announce their TLS ports (`tls-cluster yes`), since
/// redcar connects to what `CLUSTER SLOTS` reports.
fn apply(found: TlsFound, label: &str, draft: &mut Draft) {
    let Some(ca_file) = found.ca_file else {
        let mut rest = Vec::new();
        if let Some(name) = &found.server_name {
            rest.push(format!("server_name: {name}"));
        }
        if let (Some(cert), Some(key)) = (&found.cert_file, &found.key_file) {
            rest.push(format!("cert_file: {cert}, key_file: {key}"));
        }
        let then = match rest.is_empty() {
            true => String::new(),
            false => format!(" (then also {})", rest.join(", ")),
        };
        draft.note(
            "upstream",
            format!(
                "{label}: TLS to the nodes not converted: redcar needs the nodes' CA in a file \
                 (Envoy's has none there); set upstream.tls.enabled: true and ca_file{then}, or \
                 redcar connects in plain TCP"
            ),
        );
        return;
    };
    draft.set(&["upstream", "tls", "enabled"], true);
    draft.set(&["upstream", "tls", "ca_file"], ca_file);
    if let Some(name) = found.server_name {
        draft.set(&["upstream", "tls", "server_name"], name);
    }
    if let (Some(cert), Some(key)) = (found.cert_file, found.key_file) {
        draft.set(&["upstream", "tls", "cert_file"], cert);
        draft.set(&["upstream", "tls", "key_file"], key);
    }
    draft.note(
        "upstream",
        format!(
            "{label}: upstream.tls; redcar connects to the ports CLUSTER SLOTS reports, so the \
             nodes need tls-cluster yes"
        ),
    );
}
