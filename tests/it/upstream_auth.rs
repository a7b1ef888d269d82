//! A cluster whose nodes require a password: redcar authenticates every node connection
//! (pipelined, dedicated, replica reads, topology refreshes) as a Redis 6 ACL user or as the
//! `default` user, and `redcar doctor` does too.

use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::resp_client::command_calls;
use crate::support::{Redcar, RedisCluster, RespClient, Value};

const DEFAULT_PW: &str = "node-pw";
const ACL_PW: &str = "redcar-pw";

/// Turns on authentication on every node: `masterauth` first (so replication keeps working),
/// an ACL user `redcar`, then `requirepass` for the default user.
fn lock_cluster(cluster: &RedisCluster) {
    for node in cluster.nodes() {
        assert_eq!(
            node.cmd(&["CONFIG", "SET", "masterauth", DEFAULT_PW]),
            Value::simple("OK")
        );
        let acl = format!(">{ACL_PW}");
        assert_eq!(
            node.cmd(&["ACL", "SETUSER", "redcar", "on", &acl, "~*", "&*", "+@all"]),
            Value::simple("OK")
        );
    }
    for node in cluster.nodes() {
        assert_eq!(
            node.cmd(&["CONFIG", "SET", "requirepass", DEFAULT_PW]),
            Value::simple("OK")
        );
    }
}

/// A direct client to `port`, authenticated as the default user.
fn authed(port: u16) -> RespClient {
    let mut c = RespClient::connect(("127.0.0.1", port)).expect("connect to node");
    assert_eq!(c.q(&["AUTH", DEFAULT_PW]), Value::simple("OK"));
    c
}

fn get_calls(port: u16) -> u64 {
    command_calls(&authed(port).q(&["INFO", "commandstats"]).to_text(), "get")
}

#[test]
fn redcar_authenticates_every_node_connection() {
    let cluster = RedisCluster::start(3, 1);
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let key = cluster.key_on_node("locked", primary);
    lock_cluster(&cluster);
    assert!(
        RespClient::connect(("127.0.0.1", primary))
            .expect("connect")
            .q(&["GET", "x"])
            .error()
            .is_some_and(|e| e.starts_with("NOAUTH")),
        "the nodes really require a password now"
    );

    // As an ACL user, reading from replicas (AUTH and READONLY in one handshake).
    let config = write_config(&format!(
        "upstream:\n  username: redcar\n  password: {ACL_PW}\nrouter:\n  read_policy: prefer-replica\n"
    ));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", &key, "v"]), Value::simple("OK"));
    let before = get_calls(replica);
    let deadline = Instant::now() + Duration::from_secs(5);
    while c.q(&["GET", &key]) != Value::bulk("v") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(c.q(&["GET", &key]), Value::bulk("v"));
    assert!(get_calls(replica) > before, "the replica served reads");
    // A blocking command on a dedicated connection authenticates too.
    let list = format!("{{{key}}}:list");
    assert_eq!(c.q(&["RPUSH", &list, "job"]), Value::Int(1));
    assert_eq!(
        c.q(&["BLPOP", &list, "1"]),
        Value::Array(Some(vec![Value::bulk(&list), Value::bulk("job")]))
    );
    let (_, shown) = redcar.http_get("/config").expect("config");
    assert!(!shown.contains(ACL_PW), "{shown}");

    // As the default user (requirepass).
    let default = write_config(&format!("upstream:\n  password: {DEFAULT_PW}\n"));
    let legacy = Redcar::start_with(&cluster.seeds(), &["--config", default.path_str()]);
    assert_eq!(legacy.cmd(&["GET", &key]), Value::bulk("v"));

    // A wrong password: never ready, the log says why, without the password.
    let wrong = write_config("upstream:\n  password: not-the-password\n");
    let refused = Redcar::spawn(&cluster.seeds(), &["--config", wrong.path_str()]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !refused.log().contains("WRONGPASS") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = refused.log();
    assert!(
        log.contains("AUTH refused by the node: -WRONGPASS"),
        "{log}"
    );
    assert!(
        !log.contains("not-the-password"),
        "password in the log:\n{log}"
    );
}

#[test]
fn doctor_authenticates_with_user_and_password() {
    let cluster = RedisCluster::start(3, 1);
    lock_cluster(&cluster);
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(crate::support::redcar::redcar_bin())
            .args(["doctor", "--cluster", &cluster.seeds(), "--json"])
            .args(extra)
            .output()
            .expect("run doctor");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = run(&[]);
    assert_eq!(code, Some(3), "no password: no seed usable\n{out}");
    assert!(out.contains("NOAUTH"), "{out}");
    let (code, out) = run(&["--user", "redcar", "--password", ACL_PW]);
    assert!(matches!(code, Some(0..=2)), "exit {code:?}\n{out}");
    assert!(!out.contains("NOAUTH"), "{out}");
}
