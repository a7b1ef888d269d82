//! `redcar config convert-envoy` on the sample Envoy configs in docs/examples/envoy/ (bootstraps,
//! Istio EnvoyFilter manifests, an admin config_dump): the output is the committed
//! `*.redcar.yaml` next to each sample, it passes `redcar --check-config`, every warning on stderr
//! is also a comment in the output, redcar serves a real cluster with it, and unusable input
//! fails with a reason.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::redirects::write_config;
use crate::support::redcar::redcar_bin;
use crate::support::{Redcar, RedisCluster, Value};

const SAMPLES: &str = "docs/examples/envoy";

/// Secrets the samples name with `environment_variable`; `--check-config` resolves them.
const SAMPLE_SECRETS: &[(&str, &str)] = &[("REDIS_CLIENT_PASSWORD", "sample-client-password")];

/// The node password file `full.yaml` names, which does not exist on a test machine.
const SAMPLE_PASSWORD_FILE: &str = "/run/secrets/redis-password";

/// (Envoy sample, extra flags, expected redcar config)
const CASES: &[(&str, &[&str], &str)] = &[
    ("minimal.yaml", &[], "minimal.redcar.yaml"),
    ("full.yaml", &[], "full.redcar.yaml"),
    (
        "prefix-routes.yaml",
        &["--cluster", "sessions"],
        "prefix-routes.sessions.redcar.yaml",
    ),
    (
        "prefix-routes.yaml",
        &["--cluster", "cache"],
        "prefix-routes.cache.redcar.yaml",
    ),
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
/// file and client password it names (and injects errors into GETs); `prefix-routes.yaml`
/// listens on a Unix socket under /var/run: both are checked with `--check-config` above.
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
            vec![prefix.to_string_lossy().into_owned()],
            "run convert-envoy once per cluster with --cluster NAME",
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
