//! Cluster-facade mode (`--cluster-facade`, `cluster_facade:`, `tls.cluster_facade:`): redcar
//! answers CLUSTER SLOTS/SHARDS/NODES/INFO/MYID as a one-node cluster owning every slot, so real
//! cluster clients (phpredis `RedisCluster`, predis cluster mode, redis-py `RedisCluster`,
//! node-redis `createCluster`, ioredis `Redis.Cluster`, go-redis `ClusterClient`, Jedis and
//! Lettuce `RedisClusterClient`) work through it unchanged, while a listener without the facade
//! behaves as before.

use std::collections::BTreeSet;

use crate::clients::{
    node, php, python, require, run_go, run_java, run_script, run_script_checked,
};
use crate::redirects::write_config;
use crate::support::cluster::{parse_cluster_nodes, parse_cluster_slots};
use crate::support::redcar::check_config_yaml;
use crate::support::{free_port, Pki, Redcar, RedisCluster, SlotRange, Value};

/// The `field: value` pairs of a CLUSTER SHARDS node (a flat RESP2 array).
fn pairs(node: &Value) -> Vec<(String, Value)> {
    let items = node.as_array().expect("a node is an array");
    assert_eq!(items.len() % 2, 0, "field/value pairs: {node:?}");
    items
        .chunks(2)
        .map(|kv| (kv[0].to_text(), kv[1].clone()))
        .collect()
}

/// The field names of a CLUSTER INFO text.
fn info_fields(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| line.split_once(':').map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs PHP with phpredis and predis, redis-py in target/pyenv (scripts/ensure-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn phpredis_predis_and_redis_py_cluster_clients_work_through_the_facade() {
    let php = php();
    require(
        &php,
        &["-r", "exit(class_exists('RedisCluster') ? 0 : 1);"],
        "php-cli with phpredis (php-redis)",
    );
    require(
        &php,
        &[
            "-r",
            "require 'Predis/autoload.php'; exit(class_exists('Predis\\Client') ? 0 : 1);",
        ],
        "php-cli with predis (php-predis)",
    );
    let python = python();
    require(
        &python,
        &["-c", "import redis"],
        "redis-py in the virtualenv",
    );
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--cluster-facade"]);
    run_script(&php, "facade_phpredis.php", &redcar);
    run_script(&php, "facade_predis.php", &redcar);
    run_script(&python, "facade_redis_py.py", &redcar);
    // The data really went to the cluster's nodes, not somewhere inside redcar.
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "facade:check", "1"]), Value::simple("OK"));
    let owner = cluster.primary_for_key("facade:check");
    assert_eq!(owner.client().q(&["GET", "facade:check"]), Value::bulk("1"));
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs Node.js and Go client libraries (scripts/ensure-node-clients.sh, scripts/ensure-go-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn node_redis_ioredis_and_go_redis_cluster_clients_work_through_the_facade() {
    let node = node();
    crate::clients::go_clients();
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--cluster-facade"]);
    run_script_checked(&node, "facade_node_redis.mjs", &redcar, &cluster);
    run_script_checked(&node, "facade_ioredis.mjs", &redcar, &cluster);
    run_go("facade", &redcar, &cluster);
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs a JDK and Maven, Jedis and Lettuce (scripts/ensure-java-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn jedis_and_lettuce_cluster_clients_work_through_the_facade() {
    crate::clients::java_clients();
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--cluster-facade"]);
    run_java("facade", &redcar, &cluster);
}

#[test]
fn facade_replies_describe_one_node_owning_every_slot_and_other_listeners_are_unchanged() {
    let cluster = RedisCluster::start(3, 1);
    let facade = Redcar::start_with(&cluster.seeds(), &["--cluster-facade"]);
    let port = facade.port();
    let mut c = facade.client();

    let slots = parse_cluster_slots(&c.q(&["CLUSTER", "SLOTS"])).expect("CLUSTER SLOTS parses");
    let whole = SlotRange {
        start: 0,
        end: 16383,
        primary: port,
        replicas: vec![],
    };
    assert_eq!(slots, vec![whole]);
    let Value::Array(Some(ranges)) = c.q(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS is an array")
    };
    let node = ranges[0].as_array().expect("range")[2].clone();
    let node = node.as_array().expect("node entry");
    assert_eq!(node[0], Value::bulk("127.0.0.1"));

    let myid = c.q(&["CLUSTER", "MYID"]).to_text();
    assert_eq!(myid.len(), 40, "{myid}");
    assert!(myid.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        node[2],
        Value::bulk(&myid),
        "SLOTS names the node by its MYID"
    );
    assert_eq!(
        facade.cli(&["CLUSTER", "MYID"]),
        myid,
        "the same id on every connection"
    );

    let nodes = parse_cluster_nodes(&c.q(&["CLUSTER", "NODES"]).to_text());
    assert_eq!(nodes.len(), 1, "{nodes:?}");
    assert_eq!(nodes[0].id, myid);
    assert_eq!(nodes[0].port, port);
    assert_eq!(nodes[0].flags, ["myself", "master"]);
    assert!(nodes[0].link_connected && nodes[0].master_id.is_none());
    assert_eq!(nodes[0].slots, [(0, 16383)]);

    let Value::Array(Some(shards)) = c.q(&["CLUSTER", "SHARDS"]) else {
        panic!("CLUSTER SHARDS is an array")
    };
    assert_eq!(shards.len(), 1);
    let shard = pairs(&shards[0]);
    assert_eq!(shard[0].0, "slots");
    assert_eq!(
        shard[0].1,
        Value::Array(Some(vec![Value::Int(0), Value::Int(16383)]))
    );
    let shard_nodes = shard[1].1.as_array().expect("nodes").to_vec();
    assert_eq!(shard_nodes.len(), 1);
    let fields = pairs(&shard_nodes[0]);
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(get("id"), Some(Value::bulk(&myid)));
    assert_eq!(get("port"), Some(Value::Int(i64::from(port))));
    assert_eq!(get("tls-port"), None);
    assert_eq!(get("ip"), Some(Value::bulk("127.0.0.1")));
    assert_eq!(get("endpoint"), Some(Value::bulk("127.0.0.1")));
    assert_eq!(get("role"), Some(Value::bulk("master")));
    assert_eq!(get("health"), Some(Value::bulk("online")));
    assert!(get("replication-offset").is_some_and(|v| v.as_int().is_some()));

    // CLUSTER INFO: the field set of the real nodes' (minus per-message-type counters).
    let info = c.q(&["CLUSTER", "INFO"]).to_text();
    assert!(info.starts_with("cluster_state:ok\r\n"), "{info}");
    for line in [
        "cluster_slots_ok:16384",
        "cluster_known_nodes:1",
        "cluster_size:1",
    ] {
        assert!(info.contains(line), "{line}: {info}");
    }
    let real = cluster
        .any_node()
        .client()
        .q(&["CLUSTER", "INFO"])
        .to_text();
    let real: BTreeSet<String> = info_fields(&real)
        .into_iter()
        .filter(|k| {
            let totals = [
                "cluster_stats_messages_sent",
                "cluster_stats_messages_received",
            ];
            !k.starts_with("cluster_stats_messages_") || totals.contains(&k.as_str())
        })
        .collect();
    assert_eq!(
        info_fields(&info),
        real,
        "CLUSTER INFO fields as a real node's"
    );

    // Connection-state commands cluster clients send, answered locally.
    for command in ["READONLY", "READWRITE", "ASKING"] {
        assert_eq!(c.q(&[command]), Value::simple("OK"), "{command}");
    }
    // Other CLUSTER subcommands are refused as before; arity errors stay Redis's.
    let keyslot = c.q(&["CLUSTER", "KEYSLOT", "k"]);
    assert!(
        keyslot.error().is_some_and(|e| e.contains("not supported")),
        "{keyslot:?}"
    );
    let arity = c.q(&["CLUSTER", "SLOTS", "extra"]);
    assert!(
        arity
            .error()
            .is_some_and(|e| e.contains("wrong number of arguments")),
        "{arity:?}"
    );
    let hello = c.q(&["HELLO", "2"]).to_text();
    assert!(hello.contains("mode\ncluster"), "{hello}");
    assert_eq!(c.q(&["SET", "facade:k", "v"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "facade:k"]), Value::bulk("v"));

    // Without the facade: exactly today's refusals.
    let plain = Redcar::start(&cluster.seeds());
    let mut p = plain.client();
    let refused = p.q(&["CLUSTER", "SLOTS"]);
    assert!(
        refused
            .error()
            .is_some_and(|e| e
                .starts_with("ERR redcar: CLUSTER SLOTS is not supported (node administration")),
        "{refused:?}"
    );
    for command in ["READONLY", "READWRITE", "ASKING"] {
        let reply = p.q(&[command]);
        assert!(
            reply
                .error()
                .is_some_and(|e| e.contains("cluster connection state is managed by redcar")),
            "{command}: {reply:?}"
        );
    }
    assert!(p.q(&["HELLO", "2"]).to_text().contains("mode\nstandalone"));
}

#[test]
fn an_announce_address_is_what_the_facade_tells_clients_and_auth_still_applies() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &[
            "--cluster-facade",
            "--cluster-facade-announce",
            "redcar.test:7777",
            "--requirepass",
            "s3cret",
        ],
    );
    let mut c = redcar.client();
    let noauth = c.q(&["CLUSTER", "SLOTS"]);
    assert!(
        noauth.error().is_some_and(|e| e.starts_with("NOAUTH")),
        "{noauth:?}"
    );
    assert_eq!(c.q(&["AUTH", "s3cret"]), Value::simple("OK"));
    let slots = c.q(&["CLUSTER", "SLOTS"]);
    let node = slots.as_array().expect("ranges")[0]
        .as_array()
        .expect("range")[2]
        .clone();
    let node = node.as_array().expect("node").to_vec();
    assert_eq!(
        (node[0].to_text(), node[1].as_int()),
        ("redcar.test".to_string(), Some(7777))
    );
    let line = c.q(&["CLUSTER", "NODES"]).to_text();
    assert!(
        line.contains(" redcar.test:7777@17777 myself,master "),
        "{line}"
    );
    let shards = c.q(&["CLUSTER", "SHARDS"]);
    let shard = pairs(&shards.as_array().expect("shards")[0]);
    let fields = pairs(&shard[1].1.as_array().expect("nodes")[0]);
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.to_text())
    };
    assert_eq!(get("endpoint").as_deref(), Some("redcar.test"));
    assert_eq!(get("hostname").as_deref(), Some("redcar.test"));
    assert_eq!(
        get("ip").as_deref(),
        Some("127.0.0.1"),
        "a name is not an IP: the local one"
    );
    assert_eq!(get("port").as_deref(), Some("7777"));
}

#[test]
fn the_tls_listener_announces_its_tls_port() {
    let cluster = RedisCluster::start(3, 0);
    let pki = Pki::new();
    let tls_port = free_port();
    let config = write_config(&format!(
        "tls:\n  listen: 127.0.0.1:{tls_port}\n  cert: {}\n  key: {}\n  cluster_facade:\n    enabled: true\n",
        pki.show("server.pem"),
        pki.show("server.key"),
    ));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let cli = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["--tls", "--cacert"])
            .arg(pki.path("ca.pem"))
            .args(["-h", "127.0.0.1", "-p", &tls_port.to_string()])
            .args(args)
            .output()
            .expect("run redis-cli");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shards: Vec<String> = cli(&["CLUSTER", "SHARDS"])
        .lines()
        .map(str::to_string)
        .collect();
    let at = shards
        .iter()
        .position(|l| l == "tls-port")
        .unwrap_or_else(|| panic!("{shards:?}"));
    assert_eq!(shards[at + 1], tls_port.to_string());
    assert!(!shards.iter().any(|l| l == "port"), "{shards:?}");
    let slots: Vec<String> = cli(&["CLUSTER", "SLOTS"])
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        &slots[..4],
        ["0", "16383", "127.0.0.1", &tls_port.to_string()]
    );
    // The plain listener of the same process has no facade (it was not asked for).
    let plain = redcar.client().q(&["CLUSTER", "SLOTS"]);
    assert!(plain.is_error(), "{plain:?}");
}

#[test]
fn facade_settings_that_cannot_work_stop_start_up() {
    let cases = [
        (
            "unix: /tmp/redcar-facade-test.sock\ncluster_facade:\n  enabled: true\n",
            "`cluster_facade.enabled` needs `listen`",
        ),
        (
            "listen: 127.0.0.1:6380\ncluster_facade:\n  enabled: true\n  announce: nohost\n",
            "`cluster_facade.announce` is `nohost`",
        ),
        (
            "listen: 127.0.0.1:6380\ncluster_facade:\n  announce: h:1\n",
            "`cluster_facade.announce` is set but `cluster_facade.enabled` is not",
        ),
        (
            "listen: 127.0.0.1:6380\ntls:\n  cluster_facade:\n    enabled: true\n",
            "`tls.cluster_facade.enabled` needs `tls.listen`",
        ),
    ];
    for (yaml, want) in cases {
        let (code, stderr) = check_config_yaml(yaml);
        assert_eq!(code, Some(64), "{yaml}: {stderr}");
        assert!(stderr.contains(want), "{yaml}: {stderr}");
    }
    let (code, stderr) = check_config_yaml(
        "listen: 127.0.0.1:6380\ncluster_facade:\n  enabled: true\n  announce: '[::1]:6380'\n",
    );
    assert_eq!(code, Some(0), "{stderr}");
}
