//! Unit tests of a cluster's `transport_socket` → `upstream.tls.*`: files are converted,
//! inline and SDS certificates are named in comments without their content.

use std::path::PathBuf;

use super::tests::{base, cluster, config, has_warning, proxy, run, yaml};

const TLS: &str = r#"
name: envoy.transport_sockets.tls
typed_config:
  "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
  sni: redis.internal
  common_tls_context:
    tls_certificates:
      - certificate_chain: {filename: /etc/envoy/tls/client.pem}
        private_key: {filename: /etc/envoy/tls/client.key}
    validation_context:
      trusted_ca: {filename: /etc/envoy/tls/ca.pem}
"#;

fn path(p: &str) -> Option<PathBuf> {
    Some(PathBuf::from(p))
}

#[test]
fn files_become_upstream_tls() {
    let mut doc = base();
    cluster(&mut doc)["transport_socket"] = yaml(TLS);
    let out = run(&doc);
    let tls = config(&out).upstream.tls;
    assert!(tls.enabled);
    assert_eq!(tls.ca_file, path("/etc/envoy/tls/ca.pem"));
    assert_eq!(tls.cert_file, path("/etc/envoy/tls/client.pem"));
    assert_eq!(tls.key_file, path("/etc/envoy/tls/client.key"));
    assert_eq!(tls.server_name.as_deref(), Some("redis.internal"));
    assert!(has_warning(&out, "the nodes need tls-cluster yes"));
    // Envoy checked the chain only; redcar checks the name too, and says so.
    assert!(has_warning(&out, "also checks the name in them"));
}

#[test]
fn inline_and_sds_certificates_are_named_not_copied() {
    let mut doc = base();
    let mut socket = yaml(TLS);
    let common = &mut socket["typed_config"]["common_tls_context"];
    common["tls_certificates"][0]["private_key"] =
        yaml("{inline_string: '-----BEGIN PRIVATE KEY-----SECRETKEY'}");
    common["validation_context"]["trusted_ca"] = yaml("{inline_bytes: Q0FDRVJU}");
    cluster(&mut doc)["transport_socket"] = socket;
    let out = run(&doc);
    assert!(!config(&out).upstream.tls.enabled, "{}", out.yaml);
    for needle in [
        "validation_context.trusted_ca.inline_bytes: not converted; redcar reads the CA from a file",
        "tls_certificates[0].private_key.inline_string: not converted",
        "set upstream.tls.enabled: true and ca_file (then also server_name: redis.internal)",
    ] {
        assert!(has_warning(&out, needle), "{needle}:\n{}", out.yaml);
    }
    assert!(!out.yaml.contains("SECRETKEY") && !out.yaml.contains("Q0FDRVJU"));
    assert!(!out.warnings.iter().any(|w| w.contains("SECRETKEY")));

    let mut socket = yaml(TLS);
    socket["typed_config"]["common_tls_context"] = yaml(
        r#"
tls_certificate_sds_secret_configs: [{name: "default", sds_config: {ads: {}}}]
combined_validation_context:
  default_validation_context: {trusted_ca: {filename: /etc/certs/root.pem}, match_subject_alt_names: [{exact: "spiffe://a"}, {prefix: "spiffe://b"}]}
  validation_context_sds_secret_config: {name: ROOTCA}
tls_params: {tls_minimum_protocol_version: TLSv1_2}
alpn_protocols: [istio]
"#,
    );
    cluster(&mut doc)["transport_socket"] = socket;
    let out = run(&doc);
    let tls = config(&out).upstream.tls;
    assert_eq!(tls.ca_file, path("/etc/certs/root.pem"));
    assert!(tls.cert_file.is_none());
    for needle in [
        "tls_certificate_sds_secret_configs (SDS secret default): not converted",
        "validation_context_sds_secret_config (SDS secret ROOTCA): not converted",
        "match_subject_alt_names: not converted; redcar checks one name",
        "tls_params: not converted",
        "common_tls_context.alpn_protocols: not converted",
    ] {
        assert!(has_warning(&out, needle), "{needle}:\n{}", out.yaml);
    }
}

#[test]
fn one_exact_subject_alt_name_is_the_server_name() {
    let mut doc = base();
    let mut socket = yaml(TLS);
    let context = &mut socket["typed_config"];
    context.as_mapping_mut().expect("context").remove("sni");
    context["common_tls_context"]["validation_context"]["match_typed_subject_alt_names"] =
        yaml("[{san_type: DNS, matcher: {exact: redis.svc}}]");
    cluster(&mut doc)["transport_socket"] = socket;
    let out = run(&doc);
    let tls = config(&out).upstream.tls;
    assert_eq!(tls.server_name.as_deref(), Some("redis.svc"));
    assert!(has_warning(&out, "subject alt name redis.svc"));
}

#[test]
fn v2_tls_context_and_other_sockets() {
    let mut doc = base();
    cluster(&mut doc)["tls_context"] =
        yaml("{common_tls_context: {validation_context: {trusted_ca: {filename: /ca.pem}}}}");
    let out = run(&doc);
    assert_eq!(config(&out).upstream.tls.ca_file, path("/ca.pem"));
    let mut doc = base();
    cluster(&mut doc)["transport_socket"] = yaml("{name: envoy.transport_sockets.tap}");
    let out = run(&doc);
    assert!(!config(&out).upstream.tls.enabled);
    assert!(has_warning(
        &out,
        "transport_socket envoy.transport_sockets.tap: not converted"
    ));
}

#[test]
fn a_backend_whose_tls_differs_is_named() {
    let mut doc = base();
    let mut other = cluster(&mut doc).clone();
    other["name"] = "secure".into();
    other["transport_socket"] = yaml(TLS);
    doc["static_resources"]["clusters"]
        .as_sequence_mut()
        .expect("clusters")
        .push(other);
    proxy(&mut doc)["prefix_routes"] =
        yaml("{routes: [{prefix: 's:', cluster: secure}], catch_all_route: {cluster: rc}}");
    let out = run(&doc);
    assert!(!config(&out).upstream.tls.enabled);
    assert!(
        has_warning(
            &out,
            "cluster secure upstream.tls.enabled, upstream.tls.ca_file"
        ),
        "{}",
        out.yaml
    );
}
