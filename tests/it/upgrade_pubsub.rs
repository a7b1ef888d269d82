//! Subscribed clients across upgrades in place (docs/operations.md, "Subscribed clients"): a
//! subscriber keeps its connection (the same socket, never closed) and its channels, patterns
//! and shard channels; the new process subscribes before the old one lets go, so a message
//! published all through the moves reaches it with no gap (duplicates are allowed).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::support::{Redcar, RedisCluster, RespClient, Value};
use crate::upgrade::{upgrade, wait_gone, PidFile};

/// A pushed message's words: `message CHANNEL PAYLOAD`, `pmessage PATTERN CHANNEL PAYLOAD`,
/// `smessage CHANNEL PAYLOAD`; empty for anything else.
fn words(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|items| items.iter().map(Value::to_text).collect())
        .unwrap_or_default()
}

/// Publishes 1, 2, 3 … on `channel` every 2 ms until `stop`; returns the last one published.
fn publisher(
    addr: String,
    channel: &'static str,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut c = RespClient::connect(&addr).expect("connect");
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let reply = c.q(&["PUBLISH", channel, &(n + 1).to_string()]);
            assert!(reply.as_int().is_some(), "PUBLISH failed: {reply:?}");
            n += 1;
            thread::sleep(Duration::from_millis(2));
        }
        n
    })
}

/// Reads pushes until the message `end` on `up:chan`: each frame's words, or the read error.
fn reader(mut sub: RespClient) -> thread::JoinHandle<(RespClient, Vec<Vec<String>>)> {
    thread::spawn(move || {
        let mut seen = Vec::new();
        loop {
            let frame = sub
                .read_reply()
                .expect("the subscriber's connection stays open");
            let w = words(&frame);
            let end = w == ["message", "up:chan", "end"];
            seen.push(w);
            if end {
                return (sub, seen);
            }
        }
    })
}

#[test]
fn a_subscriber_keeps_its_connection_and_subscriptions_across_two_upgrades_with_no_gap() {
    let cluster = RedisCluster::start(3, 0);
    let pid_file = PidFile::new();
    let redcar = Redcar::start_with(&cluster.seeds(), &["--pid-file", &pid_file.arg()]);
    let mut sub = redcar.client();
    sub.set_timeout(Duration::from_secs(30)).expect("timeout");
    let id = sub.q(&["CLIENT", "ID"]).as_int().expect("id");
    for (word, name) in [
        ("SUBSCRIBE", "up:chan"),
        ("PSUBSCRIBE", "up:pat:*"),
        ("SSUBSCRIBE", "{up}shard"),
    ] {
        let confirmed = sub.q(&[word, name]);
        assert!(
            words(&confirmed).contains(&name.to_string()),
            "{confirmed:?}"
        );
    }
    // A RESP3 subscriber too (its messages are push frames, its node connections RESP3).
    let mut sub3 = redcar.client();
    sub3.set_timeout(Duration::from_secs(30)).expect("timeout");
    assert!(!sub3.q(&["HELLO", "3"]).is_error());
    assert!(words(&sub3.q(&["SUBSCRIBE", "up:chan"])).contains(&"up:chan".to_string()));
    let reading3 = reader(sub3);
    let reading = reader(sub);
    let stop = Arc::new(AtomicBool::new(false));
    let publishing = publisher(redcar.addr(), "up:chan", stop.clone());
    thread::sleep(Duration::from_millis(200));
    for _ in 0..2 {
        let old = pid_file.pid().expect("pid");
        let (code, out) = upgrade(&pid_file.path);
        assert_eq!(code, 0, "{out}\nlog:\n{}", redcar.log());
        wait_gone(old, Duration::from_secs(15), || redcar.log());
        thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::Relaxed);
    let last = publishing.join().expect("publisher");
    // Each kind of subscription hears what is published after the moves.
    // (PUBLISH counts only the receiving node's subscribers; SPUBLISH's node holds them all.)
    let mut p = redcar.client();
    assert!(p
        .q(&["PUBLISH", "up:pat:x", "pattern-after"])
        .as_int()
        .is_some());
    let heard = p.q(&["SPUBLISH", "{up}shard", "shard-after"]);
    assert_eq!(heard.as_int(), Some(1), "log:\n{}", redcar.log());
    assert!(p.q(&["PUBLISH", "up:chan", "end"]).as_int().is_some());
    let (mut sub, seen) = reading.join().expect("the subscriber read every message");
    let (_, seen3) = reading3
        .join()
        .expect("the RESP3 subscriber read every message");
    let heard3: BTreeSet<u64> = (seen3.iter())
        .filter(|w| w.len() == 3 && w[0] == "message")
        .filter_map(|w| w[2].parse().ok())
        .collect();
    assert_eq!(
        heard3.len() as u64,
        last,
        "the RESP3 subscriber missed none"
    );
    let numbers: Vec<u64> = (seen.iter())
        .filter(|w| w.len() == 3 && w[0] == "message" && w[1] == "up:chan")
        .filter_map(|w| w[2].parse().ok())
        .collect();
    let distinct: BTreeSet<u64> = numbers.iter().copied().collect();
    let missing: Vec<u64> = (1..=last).filter(|n| !distinct.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "{} of {last} messages missing: {missing:?}\nlog:\n{}",
        missing.len(),
        redcar.log()
    );
    eprintln!(
        "{last} published across two upgrades, {} duplicates",
        numbers.len() - distinct.len()
    );
    assert!(seen.contains(&words_of(&[
        "pmessage",
        "up:pat:*",
        "up:pat:x",
        "pattern-after"
    ])));
    assert!(seen.contains(&words_of(&["smessage", "{up}shard", "shard-after"])));
    // The same client, now in the third process: its id kept, back to normal commands.
    assert_eq!(sub.q(&["RESET"]).to_text(), "RESET");
    assert_eq!(sub.q(&["CLIENT", "ID"]).as_int(), Some(id));
    let log = redcar.log();
    let finished: Vec<&str> = (log.lines())
        .filter(|l| l.contains("upgrade: handover finished"))
        .collect();
    assert_eq!(finished.len(), 2, "{log}");
    for line in finished {
        assert!(
            line.contains("moved=3 closed=0"),
            "every client moved: {line}"
        );
    }
}

fn words_of(w: &[&str]) -> Vec<String> {
    w.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_new_process_that_reads_only_record_version_1_gets_subscribers_closed_and_the_rest_moved() {
    // A release from before subscribers moved reads version 1 only (rolling back to it): it
    // would not subscribe them again, so they are closed (counted) and resubscribe; the
    // others still move.
    let cluster = RedisCluster::start(3, 0);
    let pid_file = PidFile::new();
    let redcar = Redcar::start_with_env(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg()],
        &[("REDCAR_UPGRADE_TEST_VERSIONS", "1-1")],
    );
    let old = redcar.pid().expect("running");
    let mut sub = redcar.client();
    assert!(words(&sub.q(&["SUBSCRIBE", "up:chan"])).contains(&"up:chan".to_string()));
    let mut plain = redcar.client();
    let id = plain.q(&["CLIENT", "ID"]).as_int().expect("id");
    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 0, "{out}\nlog:\n{}", redcar.log());
    wait_gone(old, Duration::from_secs(15), || redcar.log());
    assert!(sub.read_reply().is_err(), "the subscriber was closed");
    assert_eq!(plain.q(&["CLIENT", "ID"]).as_int(), Some(id), "moved");
    let log = redcar.log();
    assert!(log.contains("moved=1 closed=1"), "{log}");
    let mut again = redcar.client();
    assert!(words(&again.q(&["SUBSCRIBE", "up:chan"])).contains(&"up:chan".to_string()));
    assert!(plain.q(&["PUBLISH", "up:chan", "after"]).as_int().is_some());
    let heard = words(&again.read_reply().expect("message"));
    assert_eq!(heard, ["message", "up:chan", "after"]);
}
