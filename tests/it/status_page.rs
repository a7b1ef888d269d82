//! The status page (`GET /`) end to end: `/status.json` has the documented shape, the page loads
//! nothing from elsewhere, and in headless Chromium the rendered slot bar covers all 16384 slots
//! while a node the test kills turns unhealthy.
//!
//! Chromium comes from `scripts/ensure-browser.sh` (Debian `chromium`); `REDCAR_CHROMIUM` names
//! another binary. A missing browser fails the test with the command to run.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, Value};

/// How long one page load may take before the browser is killed.
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);

fn get_json(redcar: &Redcar, path: &str) -> serde_json::Value {
    let (status, body) = redcar.http_get(path).expect("admin reachable");
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path} is not JSON ({e}): {body}"))
}

/// `(start, end)` of JSON ranges or DOM segments must tile 0..=16383 exactly.
fn assert_tiles_all_slots(ranges: &[(u32, u32)], what: &str) {
    let mut next = 0;
    for &(start, end) in ranges {
        assert_eq!(
            start, next,
            "{what}: gap or overlap at slot {next}: {ranges:?}"
        );
        assert!(end >= start, "{what}: empty range {start}-{end}");
        next = end + 1;
    }
    assert_eq!(next, 16384, "{what}: slots end at {next}: {ranges:?}");
}

#[test]
fn status_json_has_the_documented_shape_and_the_page_is_self_contained() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());

    let (status, html) = redcar.http_get("/").expect("GET /");
    assert_eq!(status, 200);
    assert!(
        html.contains("id=\"slotbar\""),
        "not the status page: {html}"
    );
    for path in ["/", "/status.css", "/status.js"] {
        let (status, body) = redcar.http_get(path).expect("asset");
        assert_eq!(status, 200, "{path}");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "{path} references an external resource"
        );
    }

    let mut c = redcar.client();
    for i in 0..50 {
        assert_eq!(c.q(&["SET", &format!("s:{i}"), "v"]), Value::simple("OK"));
    }
    // Rates need two samples (one a second) with the traffic between them.
    std::thread::sleep(Duration::from_millis(2200));
    let s = get_json(&redcar, "/status.json");

    assert_eq!(s["ready"], true);
    assert_eq!(s["owned_slots"], 16384);
    let ranges: Vec<(u32, u32)> = s["ranges"]
        .as_array()
        .expect("ranges")
        .iter()
        .map(|r| {
            (
                r["start"].as_u64().unwrap_or(0) as u32,
                r["end"].as_u64().unwrap_or(0) as u32,
            )
        })
        .collect();
    assert_tiles_all_slots(&ranges, "status.json ranges");
    let shards = s["shards"].as_array().expect("shards");
    assert_eq!(shards.len(), 3);
    let primaries: BTreeSet<String> = cluster
        .primary_ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let mut seen = BTreeSet::new();
    for shard in shards {
        let nodes = shard["nodes"].as_array().expect("nodes");
        assert_eq!(nodes[0]["role"], "primary", "{shard}");
        for node in nodes {
            assert_eq!(node["health"], "healthy", "{node}");
            for key in ["connections", "in_flight", "latency_ewma_us", "ejections"] {
                assert!(node[key].is_number(), "{key} missing in {node}");
            }
        }
        seen.insert(nodes[0]["addr"].as_str().unwrap_or("").to_string());
    }
    assert_eq!(seen, primaries, "each shard's primary");
    let slots: u64 = shards
        .iter()
        .map(|s| s["slots"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(slots, 16384);
    let set = s["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .find(|c| c["command"] == "set");
    // SETs ran before the last two samples; the window may or may not still hold them.
    if let Some(set) = set {
        assert!(set["per_s"].as_f64().unwrap_or(0.0) > 0.0);
    }
    assert!(s["commands_per_s"].is_number(), "{s}");
    assert!(s["commands_per_s_history"].is_array());
    let events = s["events"].as_array().expect("events");
    let first = events.last().expect("at least the first map");
    assert_eq!(first["kind"], "topology_adopted");
    assert!(
        first["detail"]
            .as_str()
            .unwrap_or("")
            .starts_with("first slot map"),
        "{first}"
    );
    assert!(s["slowlog"].is_array() && s["departed"].is_array());
    // The harness runs two per-core workers: both listed, the one client counted on one.
    let workers = &s["workers"];
    assert_eq!(workers["placement"], "auto", "{workers}");
    assert!(workers["packing"].is_boolean(), "{workers}");
    let each = workers["each"].as_array().expect("workers.each");
    assert_eq!(each.len(), 2, "{workers}");
    let clients: i64 = each
        .iter()
        .map(|w| w["clients"].as_i64().unwrap_or(-1))
        .sum();
    assert_eq!(clients, 1, "{workers}");
    assert!(each.iter().all(|w| w["busy"].is_number()), "{workers}");
}

// --- headless Chromium -------------------------------------------------------------------

fn chromium() -> String {
    let name = std::env::var("REDCAR_CHROMIUM").unwrap_or_else(|_| "chromium".to_string());
    let found = Command::new(&name)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{name} not found: run scripts/ensure-browser.sh (or set REDCAR_CHROMIUM)"
    );
    name
}

/// Loads `url` in headless Chromium, lets its script run for a few (virtual) seconds, and
/// returns the DOM as HTML.
fn dump_dom(browser: &str, url: &str, dir: &Path) -> String {
    let out_path = dir.join("dom.html");
    let out = std::fs::File::create(&out_path).expect("dom file");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .arg("--virtual-time-budget=2500")
        .arg("--dump-dom")
        .arg(url)
        .stdout(out)
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {browser}: {e}"));
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < LOAD_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(50))
            }
            _ => {
                // Our own child, by handle.
                let _ = child.kill();
                let _ = child.wait();
                panic!("{browser} did not finish loading {url} within {LOAD_TIMEOUT:?}");
            }
        }
    }
    std::fs::read_to_string(&out_path).unwrap_or_default()
}

/// The attributes of every element whose opening tag starts with `prefix` (e.g.
/// `<div class="seg`), as (name, value) pairs. Enough for the DOM Chromium serializes.
fn elements(dom: &str, prefix: &str) -> Vec<Vec<(String, String)>> {
    let mut found = Vec::new();
    let mut rest = dom;
    while let Some(at) = rest.find(prefix) {
        let tag = &rest[at..];
        let end = tag.find('>').unwrap_or(tag.len());
        found.push(attributes(&tag[..end]));
        rest = &tag[end..];
    }
    found
}

fn attributes(tag: &str) -> Vec<(String, String)> {
    let mut attrs = Vec::new();
    let mut rest = tag;
    while let Some(eq) = rest.find("=\"") {
        let name = rest[..eq].rsplit(' ').next().unwrap_or("").to_string();
        let value_start = eq + 2;
        let value_end = rest[value_start..]
            .find('"')
            .map_or(rest.len(), |e| value_start + e);
        attrs.push((name, rest[value_start..value_end].to_string()));
        rest = &rest[(value_end + 1).min(rest.len())..];
    }
    attrs
}

fn attr<'a>(element: &'a [(String, String)], name: &str) -> &'a str {
    element
        .iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

/// The `data-health` of the node row for `addr`, if the page shows one.
fn health_on_page(dom: &str, addr: &str) -> Option<String> {
    elements(dom, "<tr class=\"node")
        .iter()
        .find(|row| attr(row, "data-addr") == addr)
        .map(|row| attr(row, "data-health").to_string())
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs Chromium (scripts/ensure-browser.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn the_page_in_a_browser_covers_every_slot_and_shows_a_killed_node_unhealthy() {
    let browser = chromium();
    let mut cluster = RedisCluster::start(3, 1);
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let replica_addr = format!("127.0.0.1:{replica}");
    let key = cluster.key_on_node("page", primary);
    // Reads go to replicas, and one failure ejects: the kill shows at the first read.
    let config = write_config(
        "router:\n  read_policy: prefer-replica\n\
         upstream:\n  outlier:\n    consecutive_failures: 1\n    base_ejection_time: 60s\n    max_ejection_time: 60s\n\
         cluster:\n  refresh_interval: 1s\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    assert_eq!(redcar.cmd(&["SET", &key, "v"]), Value::simple("OK"));
    let url = format!("http://{}/", redcar.admin_addr());
    let dir = tempfile::tempdir().expect("browser dir");

    // The replica joins CLUSTER SLOTS a moment after the cluster is created: wait for its row.
    let deadline = Instant::now() + Duration::from_secs(30);
    let dom = loop {
        let dom = dump_dom(&browser, &url, dir.path());
        if health_on_page(&dom, &replica_addr).as_deref() == Some("healthy") {
            break dom;
        }
        assert!(
            Instant::now() < deadline,
            "{replica_addr} never shown healthy; DOM:\n{dom}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        dom.contains("data-state=\"ok\""),
        "the script did not render: {dom}"
    );
    // The two per-core workers' fact: "clients · busy% | clients · busy% (placement)".
    let workers = dom
        .split("id=\"workerload\"")
        .nth(1)
        .and_then(|rest| rest.split('>').nth(1))
        .and_then(|text| text.split('<').next())
        .unwrap_or_default();
    assert!(
        workers.matches('%').count() == 2
            && (workers.ends_with("(packing)") || workers.ends_with("(even)")),
        "workers fact: {workers:?}"
    );
    let segments = elements(&dom, "<div class=\"seg");
    let ranges: Vec<(u32, u32)> = segments
        .iter()
        .map(|s| {
            let n = |k| attr(s, k).parse::<u32>().unwrap_or(u32::MAX);
            (n("data-start"), n("data-end"))
        })
        .collect();
    assert_tiles_all_slots(&ranges, "slot bar");
    let shards: BTreeSet<&str> = segments.iter().map(|s| attr(s, "data-shard")).collect();
    assert_eq!(
        shards,
        BTreeSet::from(["0", "1", "2"]),
        "three shards, none unowned"
    );
    for port in cluster.primary_ports() {
        let addr = format!("127.0.0.1:{port}");
        assert_eq!(
            health_on_page(&dom, &addr).as_deref(),
            Some("healthy"),
            "{addr}"
        );
    }

    // Kill the replica while a reader keeps asking for its key.
    cluster.node_by_port_mut(replica).kill();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let mut client = redcar.client();
        let key = key.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = client.q(&["GET", &key]);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let shown = loop {
        let dom = dump_dom(&browser, &url, dir.path());
        let health = health_on_page(&dom, &replica_addr);
        // Ejected by redcar, or listed as gone if a refresh already left it out of the map.
        if matches!(health.as_deref(), Some("ejected" | "gone")) {
            break health;
        }
        assert!(
            Instant::now() < deadline,
            "{replica_addr} still {health:?} on the page; DOM:\n{dom}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    eprintln!("killed replica {replica_addr} shown as {shown:?}");
    let events = get_json(&redcar, "/status.json")["events"].clone();
    assert!(
        events
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["kind"] == "node_ejected" && e["node"] == replica_addr.as_str()),
        "no ejection event for {replica_addr}: {events}"
    );
}
