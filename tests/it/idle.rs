//! A client that goes quiet has its busy state freed (docs/decisions/0007, the cost of an idle
//! client); coming back, it finds everything it had: its name, its WATCH and open MULTI, a
//! half-sent request, its order across nodes.

use std::thread;
use std::time::Duration;

use crate::support::resp_client::encode_command;
use crate::support::{Redcar, RedisCluster, Value};

/// Longer than a busy spell lasts with nothing owed (two 200 ms ticks), so the session is idle
/// when the client speaks again.
const QUIET: Duration = Duration::from_millis(700);

#[test]
fn a_client_that_went_idle_keeps_its_state_and_order() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    assert_eq!(c.q(&["CLIENT", "SETNAME", "worker-7"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "{idle}k", "1"]), Value::simple("OK"));
    assert_eq!(c.q(&["WATCH", "{idle}k"]), Value::simple("OK"));
    thread::sleep(QUIET);
    assert_eq!(c.q(&["CLIENT", "GETNAME"]), Value::bulk("worker-7"));
    assert_eq!(c.q(&["MULTI"]), Value::simple("OK"));
    thread::sleep(QUIET);
    assert_eq!(c.q(&["INCR", "{idle}k"]), Value::simple("QUEUED"));
    thread::sleep(QUIET);
    // The WATCH held across the quiet spells: nobody touched the key, so EXEC runs.
    assert_eq!(
        c.q(&["EXEC"]),
        Value::Array(Some(vec![Value::Int(2)])),
        "WATCH and MULTI survive the session going idle"
    );

    // A request cut in two by a quiet spell is completed, not dropped or timed out.
    let request = encode_command(&["GET", "{idle}k"]);
    let (head, tail) = request.split_at(request.len() / 2);
    c.send_raw(head).expect("first half");
    thread::sleep(QUIET);
    c.send_raw(tail).expect("second half");
    assert_eq!(c.read_reply().expect("reply"), Value::bulk("2"));

    // Back from idle, a pipeline over every node is answered in order.
    thread::sleep(QUIET);
    let keys: Vec<String> = (0..30).map(|i| format!("idle-key-{i}")).collect();
    let sets: Vec<Vec<&str>> = keys.iter().map(|k| vec!["SET", k, k]).collect();
    let gets: Vec<Vec<&str>> = keys.iter().map(|k| vec!["GET", k]).collect();
    assert!(c
        .pipeline(&sets)
        .expect("sets")
        .iter()
        .all(|r| *r == Value::simple("OK")));
    thread::sleep(QUIET);
    let replies = c.pipeline(&gets).expect("gets");
    let expected: Vec<Value> = keys.iter().map(Value::bulk).collect();
    assert_eq!(replies, expected);
}

#[test]
fn a_large_value_goes_both_ways_and_the_client_stays_usable_after_idling() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    let value = "v".repeat(1 << 20);
    assert_eq!(c.q(&["SET", "big", &value]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "big"]), Value::bulk(&value));
    thread::sleep(QUIET);
    assert_eq!(c.q(&["STRLEN", "big"]), Value::Int(1 << 20));
    assert_eq!(c.q(&["GET", "big"]), Value::bulk(&value));
}
