//! Node administration through redcar: refused by default with the setting to change, served
//! to every node (primaries and replicas) when `router.allow_node_admin` lists it, and checked
//! at start-up.

use crate::redirects::write_config;
use crate::support::redcar::check_config_yaml;
use crate::support::{Redcar, RedisCluster, Value};

fn error(v: &Value) -> String {
    v.error().unwrap_or_default().to_string()
}

#[test]
fn node_administration_is_refused_unless_allowed_then_reaches_every_node() {
    let cluster = RedisCluster::start(3, 1);
    let plain = Redcar::start(&cluster.seeds());
    let refused = error(&plain.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "12345"]));
    assert!(
        refused.starts_with("ERR redcar: CONFIG SET is not supported")
            && refused.contains("router.allow_node_admin"),
        "{refused}"
    );
    let shutdown = error(&plain.cmd(&["SHUTDOWN"]));
    assert!(shutdown.contains("stop every node"), "{shutdown}");
    drop(plain);

    let config = write_config("router:\n  allow_node_admin: [\"config|set\", \"CONFIG|GET\"]\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    assert_eq!(
        redcar.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "12345"]),
        Value::simple("OK")
    );
    let expected = Value::Array(Some(vec![
        Value::bulk("slowlog-log-slower-than"),
        Value::bulk("12345"),
    ]));
    assert_eq!(cluster.nodes().len(), 6, "3 primaries and 3 replicas");
    for node in cluster.nodes() {
        assert_eq!(
            node.cmd(&["CONFIG", "GET", "slowlog-log-slower-than"]),
            expected,
            "node {} got the setting",
            node.addr()
        );
    }
    assert_eq!(
        redcar.cmd(&["config", "get", "slowlog-log-slower-than"]),
        expected
    );

    // A node whose setting drifted is named instead of being hidden behind another's answer.
    let drifted = &cluster.nodes()[4];
    drifted.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "999"]);
    let differ = error(&redcar.cmd(&["CONFIG", "GET", "slowlog-log-slower-than"]));
    assert!(
        differ.starts_with("ERR redcar: CONFIG GET: nodes replied differently")
            && differ.contains(&drifted.addr()),
        "{differ}"
    );
    // A node's own error names it (every node refuses an unknown parameter).
    let bad = error(&redcar.cmd(&["CONFIG", "SET", "no-such-parameter", "1"]));
    assert!(
        bad.starts_with("ERR redcar: CONFIG SET failed on 127.0.0.1:"),
        "{bad}"
    );
    // Not listed: still refused.
    assert!(error(&redcar.cmd(&["CONFIG", "RESETSTAT"])).contains("router.allow_node_admin"));
}

#[test]
fn node_administration_that_cannot_be_served_stops_start_up() {
    for (entry, says) in [
        ("shutdown", "`shutdown` cannot be served through a proxy"),
        (
            "cluster|failover",
            "`cluster|failover` cannot be served through a proxy",
        ),
        ("monitor", "`monitor` cannot be served through a proxy"),
        ("config", "`config` has subcommands"),
        ("confg|get", "unknown command `confg|get`"),
    ] {
        let (code, stderr) = check_config_yaml(&format!(
            "listen: 127.0.0.1:0\nrouter:\n  allow_node_admin: [\"{entry}\"]\n"
        ));
        assert_eq!(code, Some(64), "{entry}: {stderr}");
        assert!(
            stderr.contains("`router.allow_node_admin`") && stderr.contains(says),
            "{entry}: {stderr}"
        );
    }
}
