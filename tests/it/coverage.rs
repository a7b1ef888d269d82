//! Every command of the real server, sent through redcar with plausible arguments, gets a reply —
//! served or refused with a reason — and never hangs or drops the client.

use std::time::Duration;

use crate::support::{Redcar, RedisCluster, Value};

/// Commands that end or take over the connection by design (tested elsewhere).
const SKIP: &[&str] = &["quit"];

#[test]
fn every_command_is_answered_and_the_connection_survives() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let names = cluster.any_node().cmd(&["COMMAND", "LIST"]);
    let names: Vec<String> = names
        .as_array()
        .expect("COMMAND LIST")
        .iter()
        .filter_map(|n| n.as_str().map(String::from))
        .collect();
    assert!(names.len() > 200, "{} commands", names.len());
    let mut c = redcar.client();
    c.set_timeout(Duration::from_secs(5)).expect("timeout");
    let mut refused = 0;
    for name in names.iter().filter(|n| !SKIP.contains(&n.as_str())) {
        // Keys share a hash tag, so keyed commands are routable; the rest get arity/syntax errors.
        let reply = c
            .cmd(&[name.as_str(), "{cov}a", "{cov}b", "1"])
            .unwrap_or_else(|e| panic!("{name}: no reply ({e})"));
        if let Some(error) = reply.error() {
            assert!(
                !error.starts_with("MOVED") && !error.starts_with("ASK"),
                "{name}: redirect leaked: {error}"
            );
            refused += usize::from(error.starts_with("ERR redcar: "));
        }
        assert_eq!(
            c.q(&["PING"]),
            Value::simple("PONG"),
            "connection still usable after {name}"
        );
    }
    assert!(
        refused > 0,
        "some commands are refused by redcar with a reason"
    );
}
