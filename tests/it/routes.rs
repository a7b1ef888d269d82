//! Named backends and key-prefix routes (docs/routing.md): commands reach a cluster or a
//! standalone node by key prefix (checked by reading each backend directly), multi-key commands
//! split by route, cross-backend commands that cannot split are refused, blocking commands,
//! MULTI/EXEC and WATCH run on the route's backend, a route reads from a standalone replica,
//! mirroring copies writes, and a reload adds a route under a live client.

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::{write_config, TempConfig};
use crate::support::redcar::check_config_yaml;
use crate::support::server::free_port;
use crate::support::{Redcar, RedisCluster, RedisServer, Value};

/// redcar with `--config <yaml>` (and `--cluster seeds` unless empty); the config file lives as
/// long as the returned handle.
fn start(seeds: &str, yaml: &str) -> (Redcar, TempConfig) {
    let config = write_config(yaml);
    let redcar = Redcar::start_with(seeds, &["--config", config.path_str()]);
    (redcar, config)
}

fn get(server: &RedisServer, key: &str) -> Value {
    server.cmd(&["GET", key])
}

const QUEUED: &str = "QUEUED";

fn bulk(s: &str) -> Value {
    Value::bulk(s)
}

/// Waits up to 5 s for `check` (fire-and-forget copies land a little after the reply).
fn eventually(what: &str, check: impl FnMut() -> bool) {
    eventually_within(Duration::from_secs(5), what, check);
}

fn eventually_within(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

fn metric(redcar: &Redcar, series: &str) -> u64 {
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn prefix_routes_send_keys_to_a_cluster_or_a_standalone_node_and_split_multi_key_commands() {
    let cluster = RedisCluster::start(3, 0);
    let standalone = RedisServer::start();
    let yaml = format!(
        "backends:\n  sessions: {{kind: standalone, primary: \"{}\"}}\n\
         routes:\n  - {{prefix: \"sess:\", backend: sessions, strip_prefix: true}}\n  \
         - {{prefix: \"raw:\", backend: sessions}}\n\
         routes_ignore_case: true\n",
        standalone.addr()
    );
    let (redcar, _config) = start(&cluster.seeds(), &yaml);
    let mut c = redcar.client();

    // Single keys: stripped on the standalone node, kept whole there, catch-all to the cluster.
    assert_eq!(c.q(&["SET", "sess:a", "1"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "raw:b", "2"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "other", "3"]), Value::simple("OK"));
    assert_eq!(get(&standalone, "a"), bulk("1"));
    assert_eq!(get(&standalone, "raw:b"), bulk("2"));
    assert!(get(&standalone, "other").is_nil());
    assert_eq!(get(cluster.primary_for_key("other"), "other"), bulk("3"));
    assert!(get(cluster.primary_for_key("sess:a"), "sess:a").is_nil());
    // routes_ignore_case: SESS: is the sess: route, and its 5 bytes are stripped.
    assert_eq!(c.q(&["SET", "SESS:q", "4"]), Value::simple("OK"));
    assert_eq!(get(&standalone, "q"), bulk("4"));
    assert_eq!(c.q(&["GET", "sess:a"]), bulk("1"));

    // A pipeline over both backends is answered in order.
    let mut pipeline = Vec::new();
    for i in 0..50 {
        pipeline.push(vec!["SET".to_string(), format!("sess:p{i}"), i.to_string()]);
        pipeline.push(vec!["INCR".to_string(), format!("n{i}")]);
        pipeline.push(vec!["GET".to_string(), format!("sess:p{i}")]);
    }
    let replies = c.pipeline(&pipeline).expect("pipeline");
    for i in 0..50 {
        assert_eq!(replies[3 * i + 1], Value::Int(1));
        assert_eq!(replies[3 * i + 2], bulk(&i.to_string()));
    }

    // Multi-key commands over both backends: split by (route, slot), merged in key order.
    let mset = c.q(&["MSET", "sess:x", "1", "k1", "2", "raw:y", "3", "k2", "4"]);
    assert_eq!(mset, Value::simple("OK"));
    assert_eq!(get(&standalone, "x"), bulk("1"));
    assert_eq!(get(&standalone, "raw:y"), bulk("3"));
    assert_eq!(get(cluster.primary_for_key("k2"), "k2"), bulk("4"));
    let mget = c.q(&["MGET", "k1", "sess:x", "raw:y", "nothing", "k2"]);
    let expected = vec![
        bulk("2"),
        bulk("1"),
        bulk("3"),
        Value::Bulk(None),
        bulk("4"),
    ];
    assert_eq!(mget, Value::Array(Some(expected)));
    assert_eq!(c.q(&["EXISTS", "sess:x", "k1", "raw:none"]), Value::Int(2));
    assert_eq!(c.q(&["DEL", "sess:x", "k1", "raw:y"]), Value::Int(3));
    assert!(get(&standalone, "x").is_nil());

    // Keys of two backends in a command that cannot be split: refused, nothing runs.
    let refused = c.q(&["RENAME", "sess:a", "other"]);
    let text = refused.error().unwrap_or_default().to_string();
    assert!(text.starts_with("CROSSSLOT"), "{refused:?}");
    assert!(
        text.contains("sessions") && text.contains("catch_all"),
        "{text}"
    );
    assert_eq!(get(&standalone, "a"), bulk("1"));
    // One standalone node takes keys of different slots in one command, as Redis itself does.
    assert_eq!(c.q(&["RENAME", "sess:a", "sess:a2"]), Value::simple("OK"));
    assert_eq!(get(&standalone, "a2"), bulk("1"));
    assert_eq!(c.q(&["RENAME", "sess:a2", "sess:a"]), Value::simple("OK"));
    // Stripping must leave a key.
    let empty = c.q(&["GET", "sess:"]);
    assert!(
        empty.error().unwrap_or_default().contains("empty key"),
        "{empty:?}"
    );
    // Blocking commands run on a dedicated connection to the route's backend: a BLPOP waiting
    // there is served by a push through another client.
    let waiter = {
        let mut blocked = redcar.client();
        thread::spawn(move || blocked.q(&["BLPOP", "raw:queue", "5"]))
    };
    eventually("the BLPOP to block on the standalone node", || {
        standalone
            .info_field("clients", "blocked_clients")
            .as_deref()
            == Some("1")
    });
    assert_eq!(c.q(&["LPUSH", "raw:queue", "job"]), Value::Int(1));
    let popped = waiter.join().expect("waiter");
    assert_eq!(
        popped,
        Value::Array(Some(vec![bulk("raw:queue"), bulk("job")]))
    );
    assert_eq!(c.q(&["BLPOP", "sess:none", "0.1"]), Value::Array(None));

    // A transaction runs on the backend of its keys (stripped keys, any slots on one node).
    let queued = QUEUED.to_string();
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "sess:t", "1"]), Value::simple(&queued));
    assert_eq!(c.q(&["INCR", "sess:t"]), Value::simple(&queued));
    assert_eq!(c.q(&["SET", "sess:u", "x"]), Value::simple(&queued));
    let exec = c.q(&["EXEC"]);
    let expected = vec![Value::simple("OK"), Value::Int(2), Value::simple("OK")];
    assert_eq!(exec, Value::Array(Some(expected)));
    assert_eq!(get(&standalone, "t"), bulk("2"));
    // Keys of two backends in one transaction: refused at queue time, nothing runs.
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "sess:t", "3"]), Value::simple(&queued));
    let mixed = c.q(&["SET", "other", "4"]);
    assert!(
        mixed.error().unwrap_or_default().contains("one backend"),
        "{mixed:?}"
    );
    let exec = c.q(&["EXEC"]);
    assert!(
        exec.error().unwrap_or_default().starts_with("EXECABORT"),
        "{exec:?}"
    );
    assert_eq!(get(&standalone, "t"), bulk("2"));
    // WATCH holds a dedicated connection to the route's backend: a change made there directly
    // aborts the transaction, an untouched watch lets it run.
    assert_eq!(c.q(&["WATCH", "sess:w"]), Value::simple("OK"));
    standalone.cmd(&["SET", "w", "changed"]);
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "sess:w", "mine"]), Value::simple(&queued));
    assert_eq!(c.q(&["EXEC"]), Value::Array(None));
    assert_eq!(get(&standalone, "w"), bulk("changed"));
    assert_eq!(c.q(&["WATCH", "sess:w"]), Value::simple("OK"));
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "sess:w", "mine"]), Value::simple(&queued));
    let exec = c.q(&["EXEC"]);
    assert_eq!(exec, Value::Array(Some(vec![Value::simple("OK")])));
    assert_eq!(get(&standalone, "w"), bulk("mine"));
    // A transaction after WATCH must stay in the watched backend.
    assert_eq!(c.q(&["WATCH", "sess:w"]), Value::simple("OK"));
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "other", "5"]), Value::simple(&queued));
    let exec = c.q(&["EXEC"]);
    assert!(
        exec.error().unwrap_or_default().contains("watched backend"),
        "{exec:?}"
    );
    assert_eq!(get(cluster.primary_for_key("other"), "other"), bulk("3"));

    // Shard channels stay with the subscriptions, on the catch-all backend.
    assert_eq!(c.q(&["SPUBLISH", "sess:chan", "m"]), Value::Int(0));

    // /topology lists every backend.
    let (status, body) = redcar.http_get("/topology").expect("/topology");
    assert_eq!(status, 200);
    assert!(
        body.contains("\"name\":\"default\"") && body.contains("\"name\":\"sessions\""),
        "{body}"
    );

    // Keyless commands go to the catch-all backend: DBSIZE counts the cluster's keys only.
    assert_eq!(c.q(&["DBSIZE"]), Value::Int(cluster.primaries_dbsize()));
    assert!(standalone.cmd(&["DBSIZE"]).as_int().unwrap_or(0) > 0);
}

#[test]
fn a_route_reads_from_a_standalone_replica() {
    // Diskless sync waits 5 s for more replicas by default; this test has one.
    let primary = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let port = primary.port().to_string();
    // Writable so the test can tell the replica's answer from the primary's.
    let replica = RedisServer::start_with(&[
        "--replicaof",
        "127.0.0.1",
        &port,
        "--replica-read-only",
        "no",
    ]);
    eventually_within(Duration::from_secs(30), "the replica to sync", || {
        replica
            .info_field("replication", "master_link_status")
            .as_deref()
            == Some("up")
    });
    let yaml = format!(
        "backends:\n  store: {{kind: standalone, primary: \"{}\", replicas: [\"{}\"]}}\n\
         routes:\n  - {{prefix: \"ro:\", backend: store, read_policy: replica}}\n\
         catch_all: store\n",
        primary.addr(),
        replica.addr()
    );
    // No `--cluster`: the standalone backend is the catch-all.
    let (redcar, _config) = start("", &yaml);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "ro:k", "from-primary"]), Value::simple("OK"));
    assert_eq!(get(&primary, "ro:k"), bulk("from-primary"));
    eventually("ro:k replicated", || {
        get(&replica, "ro:k") == bulk("from-primary")
    });
    replica.cmd(&["SET", "ro:k", "from-replica"]);
    // The route's reads go to the replica; the catch-all's reads stay on the primary.
    assert_eq!(c.q(&["GET", "ro:k"]), bulk("from-replica"));
    replica.cmd(&["SET", "plain", "from-replica"]);
    assert_eq!(c.q(&["SET", "plain", "from-primary"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "plain"]), bulk("from-primary"));
}

#[test]
fn mirroring_copies_writes_to_a_second_backend_without_affecting_the_client() {
    let cluster = RedisCluster::start(3, 0);
    let mirror = RedisServer::start();
    let dead = format!("127.0.0.1:{}", free_port());
    let yaml = format!(
        "backends:\n  copy: {{kind: standalone, primary: \"{}\"}}\n  \
         gone: {{kind: standalone, primary: \"{dead}\"}}\n\
         routes:\n  - {{prefix: \"user:\", backend: default, mirror: {{backend: copy, percent: 100}}}}\n  \
         - {{prefix: \"none:\", backend: default, mirror: {{backend: copy, percent: 0}}}}\n  \
         - {{prefix: \"dead:\", backend: default, mirror: {{backend: gone}}}}\n",
        mirror.addr()
    );
    let (redcar, _config) = start(&cluster.seeds(), &yaml);
    let mut c = redcar.client();

    assert_eq!(c.q(&["SET", "user:1", "a"]), Value::simple("OK"));
    assert_eq!(get(cluster.primary_for_key("user:1"), "user:1"), bulk("a"));
    eventually("user:1 on the mirror", || {
        get(&mirror, "user:1") == bulk("a")
    });
    // A split write is mirrored part by part.
    assert_eq!(
        c.q(&["MSET", "user:a", "1", "user:b", "2"]),
        Value::simple("OK")
    );
    eventually("user:a and user:b on the mirror", || {
        get(&mirror, "user:a") == bulk("1") && get(&mirror, "user:b") == bulk("2")
    });
    // Reads are not mirrored by default; percent 0 copies nothing.
    assert_eq!(c.q(&["GET", "user:1"]), bulk("a"));
    assert_eq!(c.q(&["SET", "none:1", "x"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "user:2", "b"]), Value::simple("OK"));
    eventually("user:2 on the mirror", || {
        get(&mirror, "user:2") == bulk("b")
    });
    assert!(
        get(&mirror, "none:1").is_nil(),
        "percent 0 mirrored a write"
    );
    let parts = if cluster.key_slot("user:a") == cluster.key_slot("user:b") {
        1
    } else {
        2
    };
    assert_eq!(
        metric(&redcar, "redcar_mirror_sent_total{backend=\"copy\"} "),
        2 + parts,
        "SET user:1, the MSET's parts, SET user:2"
    );

    // A dead mirror never fails the client.
    for i in 0..20 {
        let key = format!("dead:{i}");
        assert_eq!(c.q(&["SET", &key, "v"]), Value::simple("OK"));
        assert_eq!(c.q(&["GET", &key]), bulk("v"));
    }
    eventually("the dead mirror's failures counted", || {
        metric(&redcar, "redcar_mirror_errors_total{backend=\"gone\"} ")
            + metric(&redcar, "redcar_mirror_dropped_total{backend=\"gone\"} ")
            == 20
    });
}

#[test]
fn a_reload_adds_a_backend_and_a_route_while_a_client_stays_connected() {
    let cluster = RedisCluster::start(3, 0);
    let standalone = RedisServer::start();
    let (redcar, config) = start(&cluster.seeds(), "log_level: info\n");
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "r:1", "before"]), Value::simple("OK"));
    assert_eq!(get(cluster.primary_for_key("r:1"), "r:1"), bulk("before"));

    let yaml = format!(
        "log_level: info\nbackends:\n  side: {{kind: standalone, primary: \"{}\"}}\n\
         routes:\n  - {{prefix: \"r:\", backend: side}}\n",
        standalone.addr()
    );
    std::fs::write(config.path_str(), yaml).expect("rewrite config");
    let pid = redcar.pid().expect("running");
    let status = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
    eventually("the reload", || {
        metric(&redcar, "redcar_config_reloads_total{result=\"ok\"} ") >= 1
    });
    // The same connection: new commands follow the new route.
    assert_eq!(c.q(&["SET", "r:2", "after"]), Value::simple("OK"));
    assert_eq!(get(&standalone, "r:2"), bulk("after"));
    assert!(get(cluster.primary_for_key("r:2"), "r:2").is_nil());
    assert_eq!(
        c.q(&["GET", "r:1"]),
        Value::Bulk(None),
        "r:1 lives on the cluster"
    );
    assert_eq!(c.q(&["SET", "elsewhere", "v"]), Value::simple("OK"));
    assert_eq!(
        get(cluster.primary_for_key("elsewhere"), "elsewhere"),
        bulk("v")
    );
}

#[test]
fn invalid_backends_and_routes_are_refused_at_start_up() {
    let cases = [
        (
            "routes:\n  - {prefix: \"a:\", backend: nowhere}\n",
            "`routes[0].backend` is `nowhere`: no such backend",
        ),
        (
            "routes:\n  - {prefix: \"a:\", backend: default}\n  - {prefix: \"a:\", backend: default}\n",
            "`routes[1].prefix` `a:` is listed twice",
        ),
        (
            "routes_ignore_case: true\nroutes:\n  - {prefix: \"a:\", backend: default}\n  - {prefix: \"A:\", backend: default}\n",
            "listed twice (ignoring case",
        ),
        ("routes:\n  - {prefix: \"a:\"}\n", "missing field `backend`"),
        (
            "routes:\n  - {prefix: \"\", backend: default}\n",
            "`routes[0].prefix` is empty",
        ),
        (
            "backends:\n  m: {kind: standalone, primary: \"127.0.0.1:1\"}\nroutes:\n  - {prefix: \"a:\", backend: default, mirror: {backend: m, percent: 101}}\n",
            "`routes[0].mirror.percent` is 101",
        ),
        (
            "routes:\n  - {prefix: \"a:\", backend: default, mirror: {backend: default}}\n",
            "is the route's own backend",
        ),
        (
            "catch_all: nope\n",
            "`catch_all` is `nope`: no such backend",
        ),
        (
            "backends:\n  default: {kind: standalone, primary: \"127.0.0.1:1\"}\n",
            "`backends.default`",
        ),
        (
            "backends:\n  s: {kind: standalone, primary: \"nonsense\"}\n",
            "`backends.s.primary` has `nonsense`",
        ),
        (
            "backends:\n  c: {kind: cluster, seeds: []}\n",
            "`backends.c.seeds` is empty",
        ),
        (
            "backends:\n  l: {kind: sentinel, sentinels: [\"127.0.0.1:26379\"], master: \"\"}\n",
            "`backends.l.master` is empty",
        ),
        (
            "backends:\n  x: {kind: memcached, primary: \"127.0.0.1:1\"}\n",
            "unknown variant `memcached`",
        ),
    ];
    for (yaml, expected) in cases {
        let yaml = format!("listen: 127.0.0.1:6390\n{yaml}");
        let (code, stderr) = check_config_yaml(&yaml);
        assert_ne!(code, Some(0), "accepted:\n{yaml}");
        assert!(
            stderr.contains(expected),
            "for\n{yaml}\nexpected `{expected}` in:\n{stderr}"
        );
    }
    // A complete config of every kind passes.
    let (code, stderr) = check_config_yaml(
        "listen: 127.0.0.1:6390\nbackends:\n  s: {kind: standalone, primary: \"127.0.0.1:6379\", replicas: [\"127.0.0.1:6380\"]}\n  \
         c: {kind: cluster, seeds: [\"127.0.0.1:7001\"]}\n  \
         l: {kind: sentinel, sentinels: [\"127.0.0.1:26379\"], master: mymaster, query_interval: 2s}\n\
         routes:\n  - {prefix: \"s:\", backend: s, strip_prefix: true, read_policy: prefer-replica}\n  \
         - {prefix: \"u:\", backend: c, mirror: {backend: s, percent: 10, reads: true}}\n  \
         - {prefix: \"o:\", backend: l}\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
}
