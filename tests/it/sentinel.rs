//! redcar in front of a Sentinel-managed primary (`--sentinel`, `--sentinel-master`): serving,
//! following a forced failover under load without losing acknowledged writes, following a
//! crashed primary, sentinel auth, replica reads, and start-up validation.

use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::redcar::redcar_bin;
use crate::support::resp_client::command_calls;
use crate::support::sentinel::{SentinelOptions, SentinelSetup, MASTER};
use crate::support::{Redcar, RespClient, Value};

/// Generous bound for Sentinel to notice, elect and promote (`down-after` is 1 s).
const FAILOVER_TIMEOUT: Duration = Duration::from_secs(60);

fn redcar_for(setup: &SentinelSetup, extra: &[&str]) -> Redcar {
    let addrs = setup.sentinel_addrs();
    let mut args = vec!["--sentinel", &addrs, "--sentinel-master", MASTER];
    args.extend_from_slice(extra);
    Redcar::start_with("", &args)
}

/// Polls redcar's log until it contains `needle`.
fn wait_log(redcar: &Redcar, needle: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while !redcar.log().contains(needle) {
        assert!(
            Instant::now() < deadline,
            "redcar never logged {needle:?}; log:\n{}",
            redcar.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `/topology` until its primary is `addr`.
fn wait_topology_primary(redcar: &Redcar, addr: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let needle = format!("\"primary\":{{\"addr\":\"{addr}\"");
    loop {
        let body = redcar
            .http_get("/topology")
            .map(|(_, b)| b)
            .unwrap_or_default();
        if body.contains(&needle) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "redcar's topology never named {addr}: {body}\nlog:\n{}",
            redcar.log()
        );
        thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn serves_the_sentinel_primary_with_pipelines_and_multi_key_commands() {
    let setup = SentinelSetup::start();
    let redcar = redcar_for(&setup, &[]);
    let primary = setup.nodes()[0].addr();
    let replica = setup.nodes()[1].addr();

    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "a", "1"]), Value::simple("OK"));
    assert_eq!(c.q(&["MSET", "b", "2", "c", "3"]), Value::simple("OK"));
    assert_eq!(
        c.q(&["MGET", "a", "b", "c", "nope"]),
        Value::Array(Some(vec![
            Value::bulk("1"),
            Value::bulk("2"),
            Value::bulk("3"),
            Value::Bulk(None)
        ]))
    );
    let cmds: Vec<Vec<String>> = (0..50)
        .flat_map(|i| {
            [
                vec!["SET".to_string(), format!("p:{i}"), i.to_string()],
                vec!["GET".to_string(), format!("p:{i}")],
            ]
        })
        .collect();
    let replies = c.pipeline(&cmds).expect("pipeline");
    for (i, pair) in replies.chunks(2).enumerate() {
        assert_eq!(pair[0], Value::simple("OK"));
        assert_eq!(pair[1], Value::bulk(i.to_string()), "reply {i} in order");
    }
    assert_eq!(
        setup.nodes()[0].cmd(&["GET", "p:7"]),
        Value::bulk("7"),
        "written on the primary itself"
    );

    let (status, _) = redcar.http_get("/readyz").expect("readyz");
    assert_eq!(status, 200);
    let (_, topology) = redcar.http_get("/topology").expect("topology");
    assert!(
        topology.contains(&format!("\"primary\":{{\"addr\":\"{primary}\"")),
        "{topology}"
    );
    assert!(topology.contains(&replica), "replica listed: {topology}");
}

/// What the writer thread saw.
#[derive(Default)]
struct Tally {
    acked: AtomicU64,
    errors: Mutex<Vec<String>>,
}

impl Tally {
    fn note(&self, error: String) {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(error);
    }

    fn errors(&self) -> Vec<String> {
        self.errors
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// `INCR counter` through redcar until `stop`; a connection error means reconnecting.
fn writer(addr: String, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let mut client: Option<RespClient> = None;
    while !stop.load(Ordering::Relaxed) {
        let conn = match client.as_mut() {
            Some(conn) => conn,
            None => match RespClient::connect(&addr) {
                Ok(conn) => client.insert(conn),
                Err(e) => {
                    tally.note(format!("connect: {e}"));
                    thread::sleep(Duration::from_millis(50));
                    continue;
                }
            },
        };
        match conn.cmd(&["INCR", "counter"]) {
            Ok(Value::Int(_)) => {
                tally.acked.fetch_add(1, Ordering::Relaxed);
            }
            Ok(other) => tally.note(other.to_text()),
            Err(e) => {
                tally.note(format!("io: {e}"));
                client = None;
            }
        }
    }
}

/// Waits until the writer has `more` acknowledgements beyond what it had.
fn wait_more_acks(tally: &Tally, more: u64, timeout: Duration) {
    let target = tally.acked.load(Ordering::Relaxed) + more;
    let deadline = Instant::now() + timeout;
    while tally.acked.load(Ordering::Relaxed) < target {
        assert!(
            Instant::now() < deadline,
            "writes stalled at {}; errors: {:?}",
            tally.acked.load(Ordering::Relaxed),
            tally.errors()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_forced_failover_under_load_loses_no_acknowledged_write() {
    let setup = SentinelSetup::start();
    let redcar = redcar_for(&setup, &["--op-timeout", "5s"]);
    let old = setup.primary_port();
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let (addr, tally, stop) = (redcar.addr(), tally.clone(), stop.clone());
        thread::spawn(move || writer(addr, tally, stop))
    };
    wait_more_acks(&tally, 200, Duration::from_secs(20));

    // Fence the old primary first, as docs/sentinel.md asks for a planned failover: from now
    // on it refuses writes (-NOREPLICAS, not applied), so nothing it acknowledges can miss the
    // replica that Sentinel promotes. redcar retries the refused writes until it follows.
    let fence = ["CONFIG", "SET", "min-replicas-to-write", "2"];
    assert_eq!(setup.node_by_port(old).cmd(&fence), Value::simple("OK"));
    let reply = setup.sentinels()[0].cmd(&["SENTINEL", "FAILOVER", MASTER]);
    assert_eq!(reply, Ok(Value::simple("OK")), "failover accepted");
    let new = setup.wait_primary_changed(old, FAILOVER_TIMEOUT);
    let new_addr = setup.node_by_port(new).addr();
    wait_topology_primary(&redcar, &new_addr, FAILOVER_TIMEOUT);
    wait_more_acks(&tally, 200, Duration::from_secs(30));
    stop.store(true, Ordering::Relaxed);
    handle.join().expect("writer thread");
    // The subscription heard the switch (the periodic query may have been quicker).
    wait_log(
        &redcar,
        "sentinel announced +switch-master",
        Duration::from_secs(15),
    );
    let (_, status) = redcar.http_get("/status.json").expect("status");
    let event = format!("primary {} → {new_addr}", setup.node_by_port(old).addr());
    assert!(status.contains(&event), "failover event recorded: {status}");

    let acked = tally.acked.load(Ordering::Relaxed);
    let counter = |port: u16| setup.node_by_port(port).cli(&["GET", "counter"]);
    let stored: u64 = counter(new).parse().expect("counter on the new primary");
    let errors = tally.errors();
    eprintln!(
        "forced failover: {acked} acknowledged INCRs, counter {stored} on the new primary \
         ({} on the old one), {} client errors: {errors:?}",
        counter(old),
        errors.len()
    );
    assert!(
        stored >= acked,
        "lost acknowledged writes: counter {stored} < {acked} acknowledged"
    );
}

#[test]
fn a_killed_primary_is_replaced_by_the_promoted_replica() {
    let mut setup = SentinelSetup::start();
    let redcar = redcar_for(&setup, &[]);
    let old = setup.primary_port();
    assert_eq!(redcar.cmd(&["SET", "before", "1"]), Value::simple("OK"));
    // Make sure the replica has it before the primary dies.
    assert_eq!(
        setup.node_by_port(old).cmd(&["WAIT", "1", "5000"]),
        Value::Int(1)
    );

    setup.kill_node(old);
    let new = setup.wait_primary_changed(old, FAILOVER_TIMEOUT);
    wait_topology_primary(&redcar, &setup.node_by_port(new).addr(), FAILOVER_TIMEOUT);
    assert_eq!(redcar.cmd(&["SET", "after", "2"]), Value::simple("OK"));
    assert_eq!(redcar.cmd(&["GET", "before"]), Value::bulk("1"));
    assert_eq!(
        setup.node_by_port(new).cmd(&["GET", "after"]),
        Value::bulk("2")
    );
}

#[test]
fn sentinel_auth_is_used_and_its_absence_is_explained() {
    let setup = SentinelSetup::start_with(SentinelOptions {
        sentinel_password: Some("sentinel-secret".to_string()),
        ..SentinelOptions::default()
    });
    let yaml = format!(
        "sentinel:\n  sentinels: [{}]\n  master: {MASTER}\n  sentinel_password: sentinel-secret\n",
        setup.sentinel_addrs()
    );
    let config = write_config(&yaml);
    let with_password = Redcar::start_with("", &["--config", config.path_str()]);
    assert_eq!(with_password.cmd(&["SET", "k", "v"]), Value::simple("OK"));
    assert_eq!(setup.nodes()[0].cmd(&["GET", "k"]), Value::bulk("v"));

    let addrs = setup.sentinel_addrs();
    let without = Redcar::spawn("", &["--sentinel", &addrs, "--sentinel-master", MASTER]);
    // The first query fails at once; by then the reply explains why.
    let deadline = Instant::now() + Duration::from_secs(20);
    let reply = loop {
        // Spawned without waiting: the listener may not be up yet.
        let reply = RespClient::connect(without.addr()).and_then(|mut c| c.cmd(&["GET", "k"]));
        if let Ok(reply) = reply {
            if reply.to_text().contains("NOAUTH") || Instant::now() > deadline {
                break reply;
            }
        }
        thread::sleep(Duration::from_millis(100));
    };
    let text = reply.to_text();
    assert!(reply.is_error(), "{text}");
    assert!(
        text.contains("NOAUTH"),
        "the reply names the auth failure: {text}"
    );
    let (status, _) = without.http_get("/readyz").expect("readyz");
    assert_eq!(status, 503, "never ready without the sentinel password");
}

#[test]
fn prefer_replica_reads_are_served_by_the_sentinel_replica() {
    let setup = SentinelSetup::start();
    let redcar = redcar_for(&setup, &["--read-policy", "prefer-replica"]);
    let replica = &setup.nodes()[1];
    assert_eq!(redcar.cmd(&["SET", "r", "x"]), Value::simple("OK"));
    assert_eq!(setup.nodes()[0].cmd(&["WAIT", "1", "5000"]), Value::Int(1));
    let before = command_calls(&replica.cli(&["INFO", "commandstats"]), "get");
    let mut c = redcar.client();
    for _ in 0..50 {
        assert_eq!(c.q(&["GET", "r"]), Value::bulk("x"));
    }
    let after = command_calls(&replica.cli(&["INFO", "commandstats"]), "get");
    assert!(
        after - before >= 50,
        "the replica served {} of 50 GETs",
        after - before
    );
}

#[test]
fn sentinel_settings_are_checked_at_start_up() {
    let run = |args: &[&str]| {
        let out = Command::new(redcar_bin())
            .args(["--listen", "127.0.0.1:6380", "--check-config"])
            .args(args)
            .env_remove("REDCAR_CLUSTER")
            .env_remove("REDCAR_SENTINEL")
            .env_remove("REDCAR_SENTINEL_MASTER")
            .output()
            .expect("run redcar");
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), text)
    };
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--sentinel",
                "127.0.0.1:26379",
                "--sentinel-master",
                "m",
                "--cluster",
                "127.0.0.1:7000",
            ],
            "`cluster.seeds`",
        ),
        (&["--sentinel", "127.0.0.1:26379"], "`sentinel.master`"),
        (
            &["--sentinel", "127.0.0.1", "--sentinel-master", "m"],
            "`sentinel.sentinels` has `127.0.0.1`",
        ),
        (&["--sentinel-master", "m"], "`sentinel.sentinels` is empty"),
    ];
    for (args, expected) in cases {
        let (code, text) = run(args);
        assert_eq!(code, Some(64), "{args:?}: {text}");
        assert!(
            text.contains(expected),
            "{args:?}: expected {expected} in {text}"
        );
    }
    let (code, text) = run(&["--sentinel", "127.0.0.1:26379", "--sentinel-master", "m"]);
    assert_eq!(code, Some(0), "{text}");
}

#[test]
fn a_named_sentinel_backend_serves_its_routes_and_follows_a_failover() {
    let setup = SentinelSetup::start();
    let config = write_config(&format!(
        "backends:\n  legacy:\n    kind: sentinel\n    sentinels: [{}]\n    master: {MASTER}\n\
         catch_all: legacy\n",
        setup.sentinel_addrs()
    ));
    let redcar = Redcar::start_with("", &["--config", config.path_str()]);
    let old = setup.primary_port();
    assert_eq!(redcar.cmd(&["SET", "named:a", "1"]), Value::simple("OK"));
    assert_eq!(
        setup.node_by_port(old).cmd(&["GET", "named:a"]),
        Value::bulk("1"),
        "the write went to the Sentinel-managed primary"
    );
    assert_eq!(
        setup.node_by_port(old).cmd(&["WAIT", "1", "5000"]),
        Value::Int(1)
    );
    setup.sentinels()[0]
        .cmd(&["SENTINEL", "FAILOVER", MASTER])
        .expect("failover accepted");
    let new = setup.wait_primary_changed(old, FAILOVER_TIMEOUT);
    wait_topology_primary(&redcar, &setup.node_by_port(new).addr(), FAILOVER_TIMEOUT);
    // Writes land on the promoted node (a write the demoted one refuses is retried there).
    let deadline = Instant::now() + FAILOVER_TIMEOUT;
    while redcar.cmd(&["SET", "named:b", "2"]) != Value::simple("OK") {
        assert!(Instant::now() < deadline, "writes never resumed");
        thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        setup.node_by_port(new).cmd(&["GET", "named:b"]),
        Value::bulk("2")
    );
    assert_eq!(redcar.cmd(&["GET", "named:a"]), Value::bulk("1"));
}
