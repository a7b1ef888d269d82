//! SIGHUP reloads the config without dropping clients: faults, timeouts and users change live,
//! a logged-in user whose password changed or who was removed is logged out, an invalid file is
//! refused (the old config stays), and `/config` shows what is in effect.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::{write_config, TempConfig};
use crate::support::{Redcar, RedisCluster, Value};

/// Sends SIGHUP to the redcar child this test started (by its PID).
pub(crate) fn sighup(redcar: &Redcar) {
    let pid = redcar.pid().expect("redcar is running");
    let status = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success(), "kill -HUP {pid}");
}

/// `redcar_config_reloads_total{result="<result>"}`, 0 while absent.
fn reloads(redcar: &Redcar, result: &str) -> u64 {
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    let series = format!("redcar_config_reloads_total{{result=\"{result}\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}

/// Writes `yaml` over the config file, sends SIGHUP and waits until the reload counted as
/// `result` reaches `expected`.
pub(crate) fn reload(
    redcar: &Redcar,
    config: &TempConfig,
    yaml: &str,
    result: &str,
    expected: u64,
) {
    std::fs::write(config.path_str(), yaml).expect("rewrite config");
    sighup(redcar);
    let deadline = Instant::now() + Duration::from_secs(10);
    while reloads(redcar, result) < expected {
        assert!(
            Instant::now() < deadline,
            "no {result} reload #{expected}; log:\n{}",
            redcar.log()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn error(v: &Value) -> String {
    v.error().unwrap_or_default().to_string()
}

fn config_json(redcar: &Redcar) -> String {
    let (status, body) = redcar.http_get("/config").expect("/config");
    assert_eq!(status, 200);
    body
}

#[test]
fn a_connected_client_keeps_being_served_while_faults_and_op_timeout_change() {
    let cluster = RedisCluster::start(3, 0);
    let base = "router:\n  op_timeout: 5s\n";
    let config = write_config(base);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    let id = c.q(&["CLIENT", "ID"]);
    assert_eq!(c.q(&["SET", "k", "v"]), Value::simple("OK"));

    let faulty = "router:\n  op_timeout: 5s\n  faults:\n    - commands: [get]\n      percentage: 100\n      error: ERR injected by reload\n";
    reload(&redcar, &config, faulty, "ok", 1);
    assert_eq!(error(&c.q(&["GET", "k"])), "ERR injected by reload");
    assert_eq!(
        error(&redcar.client().q(&["GET", "k"])),
        "ERR injected by reload"
    );
    assert_eq!(
        c.q(&["SET", "k", "v2"]),
        Value::simple("OK"),
        "SET has no fault"
    );

    // Back to no faults: a node paused for 1 s is waited for within op_timeout 5s...
    reload(&redcar, &config, base, "ok", 2);
    assert_eq!(c.q(&["GET", "k"]), Value::bulk("v2"));
    let owner = cluster.primary_for_key("k");
    assert_eq!(
        owner.cmd(&["CLIENT", "PAUSE", "1000", "ALL"]),
        Value::simple("OK")
    );
    assert_eq!(c.q(&["GET", "k"]), Value::bulk("v2"));

    // ... and not within op_timeout 200ms.
    reload(&redcar, &config, "router:\n  op_timeout: 200ms\n", "ok", 3);
    assert!(config_json(&redcar).contains("\"op_timeout\":\"200ms\""));
    assert_eq!(
        owner.cmd(&["CLIENT", "PAUSE", "1000", "ALL"]),
        Value::simple("OK")
    );
    let late = c.q(&["GET", "k"]);
    assert!(error(&late).contains("timed out"), "{late:?}");
    thread::sleep(Duration::from_millis(1000));

    // Same connection all along.
    assert_eq!(c.q(&["CLIENT", "ID"]), id);
    assert_eq!(c.q(&["GET", "k"]), Value::bulk("v2"));
    assert_eq!(reloads(&redcar, "error"), 0);
}

#[test]
fn reloaded_users_apply_to_new_clients_and_log_out_changed_or_removed_ones() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(
        "auth:\n  requirepass: old-pw\n  users:\n\
         \x20   - {name: alice, password: a-pw}\n\
         \x20   - {name: bob, password: b-pw}\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let login = |args: &[&str]| {
        let mut c = redcar.client();
        assert_eq!(c.q(args), Value::simple("OK"), "{args:?}");
        c
    };
    let mut default = login(&["AUTH", "old-pw"]);
    let mut alice = login(&["AUTH", "alice", "a-pw"]);
    let mut bob = login(&["AUTH", "bob", "b-pw"]);
    assert_eq!(alice.q(&["SET", "k", "v"]), Value::simple("OK"));

    // requirepass changes, alice keeps her password but becomes read-only, bob is removed.
    reload(
        &redcar,
        &config,
        "auth:\n  requirepass: new-pw\n  users:\n\
         \x20   - {name: alice, password: a-pw, read_only: true}\n",
        "ok",
        1,
    );
    assert_eq!(
        alice.q(&["GET", "k"]),
        Value::bulk("v"),
        "alice stays logged in"
    );
    assert!(error(&alice.q(&["SET", "k", "w"])).starts_with("NOPERM"));
    for client in [&mut bob, &mut default] {
        assert_eq!(
            error(&client.q(&["GET", "k"])),
            "NOAUTH Authentication required."
        );
    }
    assert!(error(&bob.q(&["AUTH", "bob", "b-pw"])).starts_with("WRONGPASS"));
    // The logged-out client may authenticate again on the same connection.
    assert_eq!(default.q(&["AUTH", "new-pw"]), Value::simple("OK"));
    assert_eq!(default.q(&["GET", "k"]), Value::bulk("v"));
    let mut fresh = redcar.client();
    assert!(error(&fresh.q(&["AUTH", "old-pw"])).starts_with("WRONGPASS"));
    assert_eq!(fresh.q(&["AUTH", "new-pw"]), Value::simple("OK"));
    assert!(
        redcar.log().contains("auth.users"),
        "the reload names what changed:\n{}",
        redcar.log()
    );
}

#[test]
fn an_invalid_config_is_refused_and_the_running_one_stays() {
    let cluster = RedisCluster::start(3, 0);
    let good = "auth:\n  requirepass: pw\nrouter:\n  allow_flush: false\n";
    let config = write_config(good);
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--config", config.path_str(), "--op-timeout", "3s"],
    );
    let mut c = redcar.client();
    assert_eq!(c.q(&["AUTH", "pw"]), Value::simple("OK"));
    let before = config_json(&redcar);

    let bad = [
        ("auth: [\n", "bad YAML"),
        (
            "auth:\n  requirepass: other\nrouter:\n  no_such_key: 1\n",
            "no_such_key",
        ),
        (
            "auth:\n  requirepass: other\nrouter:\n  max_redirects: 0\n",
            "router.max_redirects",
        ),
    ];
    for (i, (yaml, why)) in bad.iter().enumerate() {
        reload(&redcar, &config, yaml, "error", i as u64 + 1);
        assert!(
            redcar.log().contains(why) || *why == "bad YAML",
            "the log says why ({why}):\n{}",
            redcar.log()
        );
        // The old config: same password, FLUSHALL still refused, the client still served.
        assert_eq!(c.q(&["PING"]), Value::simple("PONG"));
        assert!(error(&c.q(&["FLUSHALL"])).contains("allow_flush"));
        let mut fresh = redcar.client();
        assert_eq!(fresh.q(&["AUTH", "pw"]), Value::simple("OK"));
        assert_eq!(config_json(&redcar), before);
    }
    assert!(redcar.log().contains("config reload refused"));
    assert_eq!(reloads(&redcar, "ok"), 0);

    // A good file after the bad ones applies; a restart-only key keeps its running value, and a
    // flag still overrides the file.
    let next = "auth:\n  requirepass: pw\nrouter:\n  allow_flush: true\n  op_timeout: 100ms\nupstream:\n  connections_per_node: 5\n";
    reload(&redcar, &config, next, "ok", 1);
    assert_eq!(c.q(&["FLUSHALL"]), Value::simple("OK"));
    let shown = config_json(&redcar);
    assert!(shown.contains("\"allow_flush\":true"), "{shown}");
    assert!(shown.contains("\"connections_per_node\":2"), "{shown}");
    assert!(
        shown.contains("\"op_timeout\":\"3s\""),
        "--op-timeout wins: {shown}"
    );
    assert!(
        redcar.log().contains("upstream.connections_per_node")
            && redcar.log().contains("needs a restart"),
        "{}",
        redcar.log()
    );
}

#[test]
fn a_rewritten_password_file_is_named_in_the_reload_line() {
    let cluster = RedisCluster::start(3, 0);
    let dir = tempfile::tempdir().expect("temp dir");
    let password = dir.path().join("requirepass");
    std::fs::write(&password, "first-pw\n").expect("write password");
    let yaml = format!("auth:\n  requirepass: {{file: {}}}\n", password.display());
    let config = write_config(&yaml);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["AUTH", "first-pw"]), Value::simple("OK"));

    // The config file stays the same; only the file it points to changes.
    std::fs::write(&password, "second-pw\n").expect("rewrite password");
    reload(&redcar, &config, &yaml, "ok", 1);
    assert_eq!(
        error(&c.q(&["GET", "k"])),
        "NOAUTH Authentication required."
    );
    let log = redcar.log();
    let line = log
        .lines()
        .find(|l| l.contains("config reloaded"))
        .unwrap_or_else(|| panic!("no reload line:\n{log}"));
    assert!(line.contains("auth.requirepass"), "{line}");
    assert!(!log.contains("nothing to change"), "{log}");
    assert!(
        !log.contains("first-pw") && !log.contains("second-pw"),
        "{log}"
    );
}
