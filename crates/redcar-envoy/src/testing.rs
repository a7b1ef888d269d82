//! Envoy documents for tests: a minimal sidecar bootstrap, the places tests change in it, and its
//! conversion. For this crate's tests and, with the feature `testing`, for the `redcar`
//! package's, which read the output back as a config.

use yaml_serde::Value;

use crate::{convert, Conversion, ConvertError, Options};

/// A minimal sidecar bootstrap: one `redis_proxy` listener on 127.0.0.1:6380 and its
/// `envoy.clusters.redis` cluster `rc` with one seed, 127.0.0.1:7000.
pub const BASE: &str = r#"
static_resources:
  listeners:
    - name: redis
      address: { socket_address: { address: 127.0.0.1, port_value: 6380 } }
      filter_chains:
        - filters:
            - name: envoy.filters.network.redis_proxy
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProxy
                stat_prefix: redis
                settings: { op_timeout: 1s, enable_redirection: true }
                prefix_routes: { catch_all_route: { cluster: rc } }
  clusters:
    - name: rc
      cluster_type: { name: envoy.clusters.redis }
      load_assignment:
        endpoints:
          - lb_endpoints:
              - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 7000 } } }
"#;

/// [`BASE`] as a document to change.
pub fn base() -> Value {
    yaml_serde::from_str(BASE).expect("base parses")
}

/// The first listener of a bootstrap.
pub fn listener(doc: &mut Value) -> &mut Value {
    &mut doc["static_resources"]["listeners"][0]
}

/// The `redis_proxy` filter's `typed_config` in the first listener.
pub fn proxy(doc: &mut Value) -> &mut Value {
    &mut listener(doc)["filter_chains"][0]["filters"][0]["typed_config"]
}

/// The first cluster of a bootstrap.
pub fn cluster(doc: &mut Value) -> &mut Value {
    &mut doc["static_resources"]["clusters"][0]
}

/// A YAML value from test text (panics on bad YAML: the test's own mistake).
pub fn yaml(text: &str) -> Value {
    yaml_serde::from_str(text).expect("test yaml parses")
}

/// `base()` with a second redis cluster named `name` (seed 127.0.0.1:`port`) appended.
pub fn with_cluster<'a>(doc: &'a mut Value, name: &str, port: u16) -> &'a mut Value {
    let mut extra = doc["static_resources"]["clusters"][0].clone();
    extra["name"] = name.into();
    extra["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
        ["socket_address"]["port_value"] = port.into();
    let clusters = doc["static_resources"]["clusters"]
        .as_sequence_mut()
        .expect("clusters");
    clusters.push(extra);
    clusters.last_mut().expect("just pushed")
}

/// Converts `doc` (written out as YAML first), as the file `test.yaml`.
pub fn convert_doc(doc: &Value, options: &Options) -> Result<Conversion, ConvertError> {
    let text = yaml_serde::to_string(doc).expect("serialize");
    convert(&text, "test.yaml", options)
}

/// The message of the conversion's error; panics, showing the output, if `doc` converts.
pub fn error(doc: &Value, options: &Options) -> String {
    match convert_doc(doc, options) {
        Ok(c) => panic!("expected an error, got:\n{}", c.yaml),
        Err(e) => e.0,
    }
}
