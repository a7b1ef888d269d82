//! The admin API against known traffic: /metrics counts what was sent, /topology matches the
//! cluster, /clients lists the client, /slowlog names command, key and node, /config shows settings.

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, Value};

/// The value of the first exposition line that starts with `series` (exact label set).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        line.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

fn get_json(redcar: &Redcar, path: &str) -> serde_json::Value {
    let (status, body) = redcar.http_get(path).expect("admin reachable");
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path} is not JSON ({e}): {body}"))
}

#[test]
fn metrics_count_known_traffic() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    for i in 0..10 {
        assert_eq!(c.q(&["SET", &format!("m:{i}"), "v"]), Value::simple("OK"));
    }
    for i in 0..5 {
        assert_eq!(c.q(&["GET", &format!("m:{i}")]), Value::bulk("v"));
    }
    assert!(
        c.q(&["LPUSH", "m:0", "x"]).is_error(),
        "WRONGTYPE from the node"
    );
    let (status, metrics) = redcar.http_get("/metrics").expect("scrape");
    assert_eq!(status, 200);
    assert_eq!(
        sample(&metrics, "redcar_commands_total{command=\"set\"}"),
        Some(10.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "redcar_commands_total{command=\"get\"}"),
        Some(5.0)
    );
    assert_eq!(
        sample(&metrics, "redcar_command_errors_total{command=\"lpush\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &metrics,
            "redcar_command_duration_seconds_count{command=\"set\"}"
        ),
        Some(10.0)
    );
    assert_eq!(
        sample(&metrics, "redcar_client_connections{listener=\"tcp\"}"),
        Some(1.0)
    );
    let node_requests: f64 = cluster
        .primary_ports()
        .iter()
        .filter_map(|p| {
            sample(
                &metrics,
                &format!("redcar_node_requests_total{{node=\"127.0.0.1:{p}\"}}"),
            )
        })
        .sum();
    // 16 commands plus topology queries (CLUSTER SLOTS, COMMAND) went to the primaries.
    assert!(
        node_requests >= 16.0,
        "node requests {node_requests}\n{metrics}"
    );
    assert!(
        sample(&metrics, "redcar_topology_refreshes_total{result=\"ok\"}").unwrap_or(0.0) >= 1.0
    );
    assert!(sample(&metrics, "redcar_client_bytes_received_total").unwrap_or(0.0) > 100.0);
    // What the alerting rules read as absolute values (examples/prometheus/redcar.rules.yml).
    assert_eq!(
        sample(&metrics, "redcar_cluster_slots_owned{backend=\"default\"}"),
        Some(16384.0),
        "{metrics}"
    );
    assert_eq!(
        sample(&metrics, "redcar_cluster_ready{backend=\"default\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&metrics, "redcar_client_max_connections"),
        Some(10000.0)
    );
}

#[test]
fn topology_clients_slowlog_and_config_endpoints() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config("metrics:\n  slowlog_threshold: 1us\n  slowlog_max_len: 16\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "slow:key", "v"]), Value::simple("OK"));

    let topology = get_json(&redcar, "/topology");
    assert_eq!(topology["ready"], true);
    assert_eq!(topology["owned_slots"], 16384);
    let ranges = topology["ranges"].as_array().expect("ranges");
    let mut primaries: Vec<String> = ranges
        .iter()
        .filter_map(|r| r["primary"]["addr"].as_str().map(String::from))
        .collect();
    primaries.sort();
    primaries.dedup();
    let mut expected: Vec<String> = cluster
        .primary_ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    expected.sort();
    assert_eq!(primaries, expected);
    assert!(
        ranges
            .iter()
            .all(|r| r["replicas"].as_array().is_some_and(|a| a.len() == 1)),
        "{topology}"
    );

    let clients = get_json(&redcar, "/clients");
    assert_eq!(clients["connected"], 1);
    let local = c.stream().local_addr().expect("local addr").to_string();
    assert_eq!(clients["clients"][0]["addr"], local.as_str());
    assert_eq!(clients["by_listener"]["tcp"], 1);
    assert_eq!(clients["by_address"]["127.0.0.1"], 1);

    let slowlog = get_json(&redcar, "/slowlog");
    let entries = slowlog["entries"].as_array().expect("entries");
    let set = entries
        .iter()
        .find(|e| e["command"] == "set")
        .unwrap_or_else(|| panic!("no SET in {slowlog}"));
    assert_eq!(set["key"], "slow:key");
    let owner = format!("127.0.0.1:{}", cluster.primary_for_key("slow:key").port());
    assert_eq!(set["node"], owner.as_str());
    assert_eq!(set["client"], local.as_str());

    let config = get_json(&redcar, "/config");
    assert_eq!(config["router"]["op_timeout"], "1s");
    assert_eq!(config["metrics"]["slowlog_max_len"], 16);
}

#[test]
fn top_once_shows_live_command_rates() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let admin = redcar.admin_addr();
    let top = std::process::Command::new(crate::support::redcar::redcar_bin())
        .args(["top", "--admin", &admin, "--once", "--interval", "1s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start redcar top");
    // Traffic while top measures its interval.
    let mut c = redcar.client();
    for i in 0..300 {
        assert_eq!(c.q(&["SET", &format!("top:{i}"), "v"]), Value::simple("OK"));
    }
    let output = top.wait_with_output().expect("top finishes");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("set"), "the SET rate is shown:\n{text}");
    let port = cluster.primary_ports()[0];
    assert!(
        text.contains(&format!("127.0.0.1:{port}")),
        "nodes are listed:\n{text}"
    );

    let unreachable = std::process::Command::new(crate::support::redcar::redcar_bin())
        .args(["top", "--admin", "127.0.0.1:1", "--once"])
        .output()
        .expect("run top");
    assert_eq!(unreachable.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("is redcar running"));
}

#[test]
fn slowlog_through_redcar_merges_nodes_and_redcar() {
    let cluster = RedisCluster::start(3, 1);
    for port in cluster.primary_ports() {
        // Every command is "slow" on the nodes too.
        cluster
            .node_by_port(port)
            .cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    }
    let config = write_config("metrics:\n  slowlog_threshold: 1us\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "slowlog:a", "1"]), Value::simple("OK"));
    let entries = c.q(&["SLOWLOG", "GET", "-1"]);
    let entries = entries
        .as_array()
        .unwrap_or_else(|| panic!("SLOWLOG GET: {entries:?}"));
    let name = |e: &Value| {
        e.as_array()
            .and_then(|f| f.get(5))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let args = |e: &Value| {
        e.as_array()
            .and_then(|f| f.get(3))
            .map(Value::to_text)
            .unwrap_or_default()
    };
    let owner = format!(
        "redcar@127.0.0.1:{}",
        cluster.primary_for_key("slowlog:a").port()
    );
    assert!(
        entries
            .iter()
            .any(|e| name(e) == owner && args(e).contains("slowlog:a")),
        "redcar's own entry for the SET: {entries:?}"
    );
    assert!(
        entries
            .iter()
            .any(|e| !name(e).starts_with("redcar@") && args(e).contains("slowlog:a")),
        "the node's entry for the SET: {entries:?}"
    );
    let timestamps: Vec<i64> = entries
        .iter()
        .filter_map(|e| e.as_array().and_then(|f| f[1].as_int()))
        .collect();
    assert!(
        timestamps.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {timestamps:?}"
    );
    assert!(c.q(&["SLOWLOG", "LEN"]).as_int().unwrap_or(0) >= 2);
    assert_eq!(c.q(&["SLOWLOG", "RESET"]), Value::simple("OK"));
    let (_, body) = redcar.http_get("/slowlog").expect("admin");
    assert!(
        !body.contains("slowlog:a"),
        "redcar's log was reset: {body}"
    );
}
