//! `redcar config convert-envoy` on the sample Envoy configs in docs/examples/envoy/ (bootstraps,
//! Istio EnvoyFilter manifests, an admin config_dump): the output is the committed
//! `*.redcar.yaml` next to each sample, it passes `redcar --check-config`, every warning on stderr
//! is also a comment in the output, redcar serves a real cluster with it (prefix routes over two
//! clusters, a TLS-only cluster with a client certificate), and unusable input fails with a
//! reason.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::redirects::write_config;
use crate::support::redcar::redcar_bin;
use crate::support::{Pki, Redcar, RedisCluster, RedisServer, TlsCluster, Value};

const SAMPLES: &str = "docs/examples/envoy";

/// Secrets the samples name with `environment_variable`; `--check-config` resolves them.
const SAMPLE_SECRETS: &[(&str, &str)] = &[("REDIS_CLIENT_PASSWORD", "sample-client-password")];

/// The node password file `full.yaml` names, which does not exist on a test machine.
const SAMPLE_PASSWORD_FILE: &str = "/run/secrets/redis-password";

/// The CA, client certificate and key `tls-cluster.yaml` names, and the `Pki` file that
/// stands in for each on a test machine.
const SAMPLE_TLS_FILES: &[(&str, &str)] = &[
    ("/etc/envoy/tls/redis-ca.pem", "ca.pem"),
    ("/etc/envoy/tls/redis-client.pem", "client.pem"),
    ("/etc/envoy/tls/redis-client.key", "client.key"),
];

/// The sample's paths replaced by `pki`'s files.
fn with_pki(yaml: &str, pki: &Pki) -> String {
    SAMPLE_TLS_FILES
        .iter()
        .fold(yaml.to_owned(), |y, (from, to)| {
            y.replace(from, &pki.show(to))
        })
}

/// (Envoy sample, extra flags, expected redcar config)
const CASES: &[(&str, &[&str], &str)] = &[
    ("minimal.yaml", &[], "minimal.redcar.yaml"),
    ("full.yaml", &[], "full.redcar.yaml"),
    (
        "prefix-routes.yaml",
        &["--cluster", "sessions"],
        "prefix-routes.sessions.redcar.yaml",
    ),
    ("prefix-routes.yaml", &[], "prefix-routes.redcar.yaml"),
    ("tls-cluster.yaml", &[], "tls-cluster.redcar.yaml"),
    (
        "istio-envoyfilter.yaml",
        &[],
        "istio-envoyfilter.redcar.yaml",
    ),
    ("bootstrap.yaml", &[], "bootstrap.redcar.yaml"),
    ("config_dump.json", &[], "config_dump.redcar.yaml"),
];

/// Samples whose converted config runs as it is against the test cluster, with only its
/// listen address and seeds replaced by flags. `full.yaml` needs the node ACL user, password
/// file and client password it names (and injects errors into GETs): it is checked with
/// `--check-config` above. `prefix-routes.yaml` and `tls-cluster.yaml` have tests of their own.
const LIVE: &[&str] = &[
    "minimal.yaml",
    "istio-envoyfilter.yaml",
    "bootstrap.yaml",
    "config_dump.json",
];

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(SAMPLES)
        .join(name)
}

fn convert(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(redcar_bin())
        .args(["config", "convert-envoy"])
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redcar config convert-envoy");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write stdin");
    drop(input);
    child.wait_with_output().expect("wait for redcar")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `redcar --config <yaml> --check-config` with the sample secrets in place.
fn check_config(yaml: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().expect("tmp");
    let password = dir.path().join("redis-password");
    std::fs::write(&password, "sample-node-password\n").expect("write password");
    let yaml = yaml.replace(SAMPLE_PASSWORD_FILE, &password.to_string_lossy());
    let pki = Pki::new();
    let yaml = with_pki(&yaml, &pki);
    let config = write_config(&yaml);
    let out = Command::new(redcar_bin())
        .args(["--config", config.path_str(), "--check-config"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(SAMPLE_SECRETS.iter().copied())
        .output()
        .expect("run redcar --check-config");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    (out.status.code(), all)
}

#[test]
fn every_envoy_sample_converts_to_its_committed_redcar_config() {
    for (input, flags, expected) in CASES {
        let path = sample(input);
        let mut args = vec![path.to_str().expect("utf-8 path")];
        args.extend_from_slice(flags);
        let out = convert(&args, None);
        let stdout = text(&out.stdout);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{input}: {stderr}");
        let committed = std::fs::read_to_string(sample(expected)).expect("expected output");
        assert_eq!(
            stdout, committed,
            "{input} {flags:?}: output differs from {expected}; regenerate it if the change is meant"
        );
        // Each warning is also a comment line in the config.
        for warning in stderr.lines() {
            let note = warning
                .strip_prefix("redcar config convert-envoy: warning: ")
                .unwrap_or_else(|| panic!("{input}: unexpected stderr line {warning}"));
            assert!(
                stdout.lines().any(|l| l == format!("# {note}")),
                "{input}: warning not in the output: {note}"
            );
        }
        let (code, output) = check_config(&stdout);
        assert_eq!(code, Some(0), "{expected} fails --check-config: {output}");
        for (_, secret) in SAMPLE_SECRETS {
            assert!(!output.contains(secret), "{expected}: secret shown");
        }
    }
}

#[test]
fn converted_samples_serve_a_real_cluster() {
    let cluster = RedisCluster::start(3, 1);
    for input in LIVE {
        let path = sample(input);
        let out = convert(&[path.to_str().expect("utf-8 path")], None);
        assert_eq!(out.status.code(), Some(0), "{input}: {}", text(&out.stderr));
        let converted = text(&out.stdout);
        let config = write_config(&converted);
        let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
        let key = format!("convert-envoy:{input}");
        assert_eq!(
            redcar.cmd(&["SET", &key, input]),
            Value::simple("OK"),
            "{input}"
        );
        assert_eq!(redcar.cmd(&["GET", &key]), Value::bulk(input), "{input}");
        let envoy = std::fs::read_to_string(&path).expect("sample");
        if envoy.contains("PREFER_REPLICA") {
            assert!(
                converted.contains("read_policy: prefer-replica"),
                "{input}: the converted config does not read from replicas:\n{converted}"
            );
            assert_eq!(running(&redcar)["router"]["read_policy"], "prefer-replica");
        }
        if *input == "bootstrap.yaml" {
            // Envoy's keepalive_interval and keepalive_probes, carried over and in force.
            let upstream = &running(&redcar)["upstream"];
            assert_eq!(upstream["tcp_keepalive"], "20s");
            assert_eq!(upstream["tcp_keepalive_interval"], "5s");
            assert_eq!(upstream["tcp_keepalive_probes"], 3);
        }
    }
}

/// The config the running redcar reports on its admin `/config`.
fn running(redcar: &Redcar) -> serde_json::Value {
    let (status, body) = redcar.http_get("/config").expect("GET /config");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("/config is JSON")
}

#[test]
fn the_full_sample_warns_about_what_it_approximates() {
    let path = sample("full.yaml");
    let out = convert(&[path.to_str().expect("utf-8 path")], None);
    let stderr = text(&out.stderr);
    for needle in [
        "settings.max_buffer_size_before_flush",
        "outlier_detection.interval",
        "host_degraded_refresh_threshold",
        "runtime_key",
    ] {
        assert!(
            stderr.contains(needle),
            "no warning about {needle}: {stderr}"
        );
    }
}

#[test]
fn stdin_is_read_with_a_dash() {
    let envoy = std::fs::read_to_string(sample("minimal.yaml")).expect("sample");
    let out = convert(&["-"], Some(&envoy));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let committed = std::fs::read_to_string(sample("minimal.redcar.yaml")).expect("expected");
    assert_eq!(
        text(&out.stdout),
        committed.replace("from minimal.yaml by", "from stdin by")
    );
}

#[test]
fn unusable_input_fails_with_a_reason_and_no_config() {
    let dir = tempfile::tempdir().expect("tmp");
    let write = |name: &str, body: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, body).expect("write");
        path.to_string_lossy().into_owned()
    };
    let no_proxy = write(
        "tcp.yaml",
        "static_resources:\n  listeners:\n    - name: tcp\n      filter_chains:\n        \
         - filters: [{name: envoy.filters.network.tcp_proxy}]\n  clusters: []\n",
    );
    let malformed = write("broken.yaml", "static_resources: {listeners: [\n");
    let unknown = write("values.yaml", "replicaCount: 3\nimage: redis:7\n");
    let two_docs = write("two.yaml", "a: 1\n---\nb: 2\n");
    let no_filter = write(
        "service.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: redis}\n",
    );
    let prefix = sample("prefix-routes.yaml");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![no_proxy],
            "no listener with an envoy.filters.network.redis_proxy",
        ),
        (vec![malformed], "not valid YAML"),
        (
            vec![unknown],
            "none of the forms convert-envoy reads: an Envoy bootstrap",
        ),
        (vec![two_docs], "none is an Istio EnvoyFilter"),
        (
            vec![no_filter],
            "Kubernetes manifests (kind: Service, name: redis) but no EnvoyFilter",
        ),
        (
            vec!["/nonexistent/envoy.yaml".into()],
            "cannot read /nonexistent/envoy.yaml",
        ),
        (
            vec![
                prefix.to_string_lossy().into_owned(),
                "--cluster".into(),
                "cache".into(),
            ],
            "rewrites keys (remove_prefix), which --cluster cannot keep",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = convert(&args, None);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: printed a config");
    }
}

fn get(server: &RedisServer, key: &str) -> Value {
    server.cmd(&["GET", key])
}

#[test]
fn converted_prefix_routes_send_each_prefix_to_its_cluster() {
    let sessions = RedisCluster::start(3, 0);
    let cache = RedisCluster::start(3, 0);
    let out = convert(
        &[sample("prefix-routes.yaml").to_str().expect("utf-8")],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let dir = tempfile::tempdir().expect("tmp");
    let socket = dir.path().join("redis.sock");
    // Only the addresses change: the sample's seeds and Unix socket, this machine's here.
    let converted = text(&out.stdout)
        .replace("/var/run/envoy/redis.sock", &socket.to_string_lossy())
        .replace("10.0.1.11:6379", &sessions.nodes()[0].addr())
        .replace("10.0.1.12:6379", &sessions.nodes()[1].addr())
        .replace("10.0.2.11:6379", &cache.nodes()[0].addr());
    let config = write_config(&converted);
    let redcar = Redcar::start_with("", &["--config", config.path_str()]);
    let mut c = redcar.client();
    for (key, value) in [
        ("session:1", "s1"),
        ("SESSION:2", "s2"),
        ("user:1", "u1"),
        ("other", "o"),
    ] {
        assert_eq!(c.q(&["SET", key, value]), Value::simple("OK"), "{key}");
        assert_eq!(c.q(&["GET", key]), Value::bulk(value), "{key}");
    }
    assert_eq!(c.q(&["SET", "tmp:x", "t"]), Value::simple("OK"));
    // Each key on the cluster its prefix names, read on that cluster's own node.
    for key in ["session:1", "SESSION:2", "user:1"] {
        assert!(!get(sessions.primary_for_key(key), key).is_nil(), "{key}");
        if key != "user:1" {
            assert!(get(cache.primary_for_key(key), key).is_nil(), "{key}");
        }
    }
    assert_eq!(
        get(cache.primary_for_key("other"), "other"),
        Value::bulk("o")
    );
    assert!(get(sessions.primary_for_key("other"), "other").is_nil());
    // remove_prefix: stored as `x` on the cache cluster.
    assert_eq!(get(cache.primary_for_key("x"), "x"), Value::bulk("t"));
    assert!(get(cache.primary_for_key("tmp:x"), "tmp:x").is_nil());
    // user: writes are mirrored to the cache cluster, fire-and-forget.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while get(cache.primary_for_key("user:1"), "user:1") != Value::bulk("u1") {
        assert!(
            std::time::Instant::now() < deadline,
            "user:1 never mirrored"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn the_converted_tls_sample_serves_a_tls_only_cluster() {
    let pki = Pki::new();
    // The nodes require a client certificate, so the converted cert_file/key_file are in use.
    let cluster = TlsCluster::start(&pki, 3, "yes");
    let out = convert(&[sample("tls-cluster.yaml").to_str().expect("utf-8")], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // The test certificates name localhost, not the sample's redis.internal.
    let converted = with_pki(&text(&out.stdout), &pki)
        .replace("server_name: redis.internal", "server_name: localhost");
    let config = write_config(&converted);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    for i in 0..20 {
        let key = format!("tls:{i}");
        assert_eq!(
            redcar.cmd(&["SET", &key, "v"]),
            Value::simple("OK"),
            "{key}"
        );
        assert_eq!(redcar.cmd(&["GET", &key]), Value::bulk("v"), "{key}");
    }
    let tls = &running(&redcar)["upstream"]["tls"];
    assert_eq!(tls["enabled"], true);
    assert_eq!(tls["server_name"], "localhost");
}
