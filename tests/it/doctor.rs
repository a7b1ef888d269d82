//! `redcar doctor` against real clusters: a healthy one passes, a primary with
//! `appendfsync always` is critical, `--json` is the documented document, and an unreachable
//! seed or a bad argument gets its own exit status.

use std::process::Command;

use serde_json::Value as Json;

use crate::support::redcar::redcar_bin;
use crate::support::{RedisCluster, Value};

/// Runs `redcar doctor ARGS`; returns (exit status, stdout, stderr).
pub(crate) fn doctor(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(redcar_bin())
        .arg("doctor")
        .args(args)
        .env_remove("REDCAR_CLUSTER")
        .output()
        .expect("run redcar doctor");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn doctor_json(seeds: &str) -> (i32, Json) {
    let (code, stdout, stderr) = doctor(&["--cluster", seeds, "--json"]);
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("--json output is not JSON ({e}):\n{stdout}\n{stderr}"));
    (code, json)
}

fn config_set(cluster: &RedisCluster, port: u16, param: &str, value: &str) {
    let reply = cluster
        .node_by_port(port)
        .cmd(&["CONFIG", "SET", param, value]);
    assert_eq!(
        reply,
        Value::simple("OK"),
        "CONFIG SET {param} {value} on {port}"
    );
}

/// Findings at `severity` as (check, nodes) pairs.
fn findings_at(json: &Json, severity: &str) -> Vec<(String, Vec<String>)> {
    json["findings"]
        .as_array()
        .expect("findings is an array")
        .iter()
        .filter(|f| f["severity"] == severity)
        .map(|f| {
            let nodes = f["nodes"].as_array().expect("nodes is an array");
            let nodes = nodes
                .iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect();
            (f["check"].as_str().unwrap_or_default().to_string(), nodes)
        })
        .collect()
}

#[test]
fn a_healthy_cluster_exits_0_with_no_warning() {
    let cluster = RedisCluster::start(3, 1);
    // The harness's nodes have no memory limit, which doctor rightly warns about.
    for node in cluster.nodes() {
        config_set(&cluster, node.port(), "maxmemory", "256mb");
    }
    let (code, stdout, stderr) = doctor(&["--cluster", &cluster.seeds()]);
    assert_eq!(code, 0, "table:\n{stdout}\n{stderr}");
    assert!(stdout.contains("worst: "), "{stdout}");
    assert!(
        stdout.contains("6 nodes (3 primaries, 3 replicas)"),
        "{stdout}"
    );
    let (code, json) = doctor_json(&cluster.seeds());
    assert_eq!(code, 0);
    assert!(findings_at(&json, "warn").is_empty(), "{json:#}");
    assert!(findings_at(&json, "critical").is_empty(), "{json:#}");
}

#[test]
fn a_primary_with_appendfsync_always_is_critical_and_json_has_the_documented_fields() {
    let cluster = RedisCluster::start(3, 1);
    let primary = cluster.primary_ports()[0];
    config_set(&cluster, primary, "appendonly", "yes");
    config_set(&cluster, primary, "appendfsync", "always");

    let (code, json) = doctor_json(&cluster.seeds());
    assert_eq!(code, 2, "{json:#}");
    let addr = cluster.node_by_port(primary).addr();
    let critical = findings_at(&json, "critical");
    assert_eq!(
        critical,
        vec![("appendfsync".to_string(), vec![addr])],
        "{json:#}"
    );
    let warned: Vec<String> = findings_at(&json, "warn")
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert!(
        warned.contains(&"maxmemory".to_string()),
        "maxmemory 0 is the default: {json:#}"
    );

    assert_eq!(json["version"], 1);
    assert_eq!(json["worst"], "critical");
    assert_eq!(json["exit_code"], 2);
    assert!(json["seed"].is_string());
    assert!(json["counts"]["critical"].as_u64() >= Some(1));
    let nodes = json["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 6);
    for node in nodes {
        for field in ["addr", "id", "role", "reachable"] {
            assert!(!node[field].is_null(), "node without {field}: {node}");
        }
    }
    let replicas = nodes.iter().filter(|n| n["role"] == "replica");
    assert!(replicas.into_iter().all(|n| n["primary"].is_string()));
    for finding in json["findings"].as_array().expect("findings") {
        for field in ["check", "severity", "nodes", "summary", "fix"] {
            assert!(
                !finding[field].is_null(),
                "finding without {field}: {finding}"
            );
        }
    }
}

#[test]
fn an_unreachable_seed_exits_3_naming_it() {
    // Port 1 on loopback: nothing listens there, so the connect is refused at once.
    let (code, stdout, stderr) = doctor(&["--cluster", "127.0.0.1:1", "--timeout", "500ms"]);
    assert_eq!(code, 3, "{stdout}{stderr}");
    assert!(stderr.contains("no seed is reachable"), "{stderr}");
    assert!(stderr.contains("127.0.0.1:1"), "{stderr}");
}

#[test]
fn bad_doctor_arguments_exit_64() {
    for args in [
        &["--cluster", "localhost"][..],
        &["--cluster", "127.0.0.1:7000", "--timeout", "soon"][..],
        &[][..],
    ] {
        let (code, stdout, stderr) = doctor(args);
        assert_eq!(code, 64, "{args:?}: {stdout}{stderr}");
    }
}
