//! BCAST mode through redcar: `CLIENT TRACKING on BCAST` answers only once every primary
//! registered the prefixes (a write right after the reply is never missed, and a primary that
//! does not confirm makes it fail), and NOLOOP keeps a BCAST client's own writes from coming
//! back to it, as from a real redis-server.

use std::time::{Duration, Instant};

use crate::support::{Redcar, RedisCluster, RespClient, Value};
use crate::tracking::{next_within, tracker};

/// The keys of an `invalidate` push (`None` for any other frame).
fn pushed_keys(frame: &Value) -> Option<Vec<String>> {
    let text = format!("{frame:?}");
    if !text.contains("invalidate") {
        return None;
    }
    let Value::Typed(_, inner) = frame else {
        return None;
    };
    let Value::Array(Some(items)) = &**inner else {
        return None;
    };
    let Some(Value::Array(Some(keys))) = items.get(1) else {
        return None;
    };
    keys.iter()
        .map(|k| {
            k.as_bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned())
        })
        .collect()
}

/// Reads pushes until every one of `want` was invalidated, within `wait`.
fn expect_keys(c: &mut RespClient, want: &[String], wait: Duration, what: &str) {
    let deadline = Instant::now() + wait;
    let mut seen: Vec<String> = Vec::new();
    while want.iter().any(|k| !seen.contains(k)) {
        assert!(
            Instant::now() < deadline,
            "{what}: saw {seen:?}, want {want:?}"
        );
        if let Some(frame) = next_within(c, Duration::from_millis(200)) {
            seen.extend(pushed_keys(&frame).unwrap_or_default());
        }
    }
}

#[test]
fn a_write_right_after_bcast_on_is_never_missed() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut writer = redcar.client();
    // A first prefix (the nodes' invalidation connections start), a second one (added to the
    // registration), then every key (registered again: off, then on).
    for prefix in ["ct:bw:a:", "ct:bw:b:", ""] {
        // Keys on every primary, found before tracking starts so the writes follow the reply.
        let mut keys = Vec::new();
        for port in cluster.primary_ports() {
            keys.push(cluster.key_on_node(&format!("{prefix}r"), port));
            keys.push(cluster.key_on_node(&format!("{prefix}d"), port));
        }
        let mut c = match prefix {
            "" => tracker(&redcar, &["BCAST"]),
            _ => tracker(&redcar, &["BCAST", "PREFIX", prefix]),
        };
        // Right after the reply: through redcar, and straight on the node.
        for pair in keys.chunks(2) {
            writer.q(&["SET", &pair[0], "v"]);
            cluster
                .primary_for_key(&pair[1])
                .cmd(&["SET", &pair[1], "v"]);
        }
        expect_keys(&mut c, &keys, Duration::from_secs(5), prefix);
    }
}

#[test]
fn bcast_on_fails_when_a_primary_does_not_confirm() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    assert!(redcar.client().q(&["GET", "ct:warm"]).is_nil());
    let paused = cluster.primary_for_key("ct:warm");
    paused.cmd(&["CLIENT", "PAUSE", "8000", "ALL"]);
    let mut c = redcar.client().typed();
    c.q(&["HELLO", "3"]);
    let reply = c.q(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ct:p:"]);
    paused.cmd(&["CLIENT", "UNPAUSE"]);
    let Value::Error(line) = &reply else {
        panic!("not refused: {reply:?}");
    };
    assert!(line.starts_with("ERR redcar: "), "{line}");
    let info = c.q(&["CLIENT", "TRACKINGINFO"]);
    assert!(
        format!("{info:?}").contains("\"off\""),
        "tracking stays off: {info:?}"
    );
    assert_eq!(c.q(&["CLIENT", "GETREDIR"]), Value::Int(-1));
}

/// One BCAST NOLOOP client and one plain writer, against `writer_target` for the writes and
/// `tracker` for the tracking client: the keys the tracking client was told of, in order.
fn noloop_script(c: &mut RespClient, writer: &mut RespClient) -> Vec<String> {
    let on = [
        "CLIENT", "TRACKING", "on", "BCAST", "NOLOOP", "PREFIX", "ct:nl:",
    ];
    assert_eq!(c.q(&on), Value::simple("OK"));
    let mut told = Vec::new();
    let mut step = |c: &mut RespClient, writer: &mut RespClient, who: &str, args: &[&str]| {
        let reply = match who {
            "self" => c.q(args),
            _ => writer.q(args),
        };
        assert!(!reply.is_error(), "{args:?}: {reply:?}");
        while let Some(frame) = next_within(c, Duration::from_millis(400)) {
            told.extend(pushed_keys(&frame).unwrap_or_default());
        }
    };
    step(c, writer, "self", &["SET", "ct:nl:own", "1"]);
    step(c, writer, "other", &["SET", "ct:nl:theirs", "1"]);
    step(c, writer, "self", &["SET", "ct:nl:both", "1"]);
    step(c, writer, "other", &["SET", "ct:nl:both", "2"]);
    step(c, writer, "self", &["DEL", "ct:nl:own", "ct:nl:theirs"]);
    step(c, writer, "self", &["SET", "ct:other:own", "1"]);
    told
}

#[test]
fn bcast_noloop_clients_are_not_told_of_their_own_writes_as_in_redis() {
    let server = crate::support::RedisServer::start();
    let mut direct = server.client().typed();
    direct.q(&["HELLO", "3"]);
    let want = noloop_script(&mut direct, &mut server.client());
    assert_eq!(want, ["ct:nl:theirs", "ct:nl:both"], "redis-server itself");

    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client().typed();
    c.q(&["HELLO", "3"]);
    let got = noloop_script(&mut c, &mut redcar.client());
    assert_eq!(got, want, "through redcar");
}
