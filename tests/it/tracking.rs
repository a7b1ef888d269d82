//! Client-side caching through redcar (`CLIENT TRACKING`): invalidation pushes for keys a client
//! read, whoever changed them (a client of the same redcar, another redcar, a client straight
//! on the node), OPTIN/OPTOUT/NOLOOP, BCAST prefixes, RESP2 REDIRECT to a subscribed client, a
//! null invalidation after a failover, and the CLIENT subcommands' replies and errors compared
//! with a real redis-server.

use std::time::Duration;

use crate::support::{Redcar, RedisCluster, RedisServer, Resp3, RespClient, Value};

pub fn push(items: &[Value]) -> Value {
    Value::Typed(Resp3::Push, Box::new(Value::Array(Some(items.to_vec()))))
}

/// `>2 invalidate [keys]`.
pub fn invalidate(keys: &[&str]) -> Value {
    let keys = keys.iter().map(Value::bulk).collect();
    push(&[Value::bulk("invalidate"), Value::Array(Some(keys))])
}

/// `>2 invalidate _`: flush everything.
pub fn flush() -> Value {
    push(&[
        Value::bulk("invalidate"),
        Value::Typed(Resp3::Null, Box::new(Value::Bulk(None))),
    ])
}

/// A RESP3 client with tracking turned on with `options`.
pub fn tracker(redcar: &Redcar, options: &[&str]) -> RespClient {
    let mut c = redcar.client().typed();
    c.q(&["HELLO", "3"]);
    let mut on = vec!["CLIENT", "TRACKING", "on"];
    on.extend_from_slice(options);
    assert_eq!(c.q(&on), Value::simple("OK"), "{on:?}");
    c
}

/// The next frame, or `None` when nothing comes within `wait`.
pub fn next_within(c: &mut RespClient, wait: Duration) -> Option<Value> {
    c.set_timeout(wait).expect("timeout");
    let got = c.read_reply().ok();
    c.set_timeout(Duration::from_secs(10)).expect("timeout");
    got
}

pub fn expect_push(c: &mut RespClient, want: Value, what: &str) {
    let got = next_within(c, Duration::from_secs(5));
    assert_eq!(got, Some(want), "{what}");
}

pub fn expect_nothing(c: &mut RespClient, what: &str) {
    let got = next_within(c, Duration::from_millis(300));
    assert_eq!(got, None, "{what}");
}

#[test]
fn a_tracked_read_is_invalidated_by_any_writer() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let other = Redcar::start(&cluster.seeds());
    let mut c = tracker(&redcar, &[]);
    let mut writer = redcar.client();

    // A client of the same redcar.
    assert!(c.q(&["GET", "ct:a"]).is_nil());
    writer.q(&["SET", "ct:a", "1"]);
    expect_push(&mut c, invalidate(&["ct:a"]), "SET through the same redcar");
    // Tracked again only once read again.
    writer.q(&["SET", "ct:a", "2"]);
    expect_nothing(&mut c, "not read since the last invalidation");

    // Another redcar, and a client straight on the node.
    assert_eq!(c.q(&["GET", "ct:a"]), Value::bulk("2"));
    other.client().q(&["SET", "ct:a", "3"]);
    expect_push(&mut c, invalidate(&["ct:a"]), "SET through another redcar");
    assert_eq!(c.q(&["GET", "ct:a"]), Value::bulk("3"));
    cluster.primary_for_key("ct:a").cmd(&["DEL", "ct:a"]);
    expect_push(&mut c, invalidate(&["ct:a"]), "DEL straight on the node");

    // Keys on every node, read in one pipeline; the client's own write invalidates too.
    let keys = ["ct:b", "ct:c", "ct:d", "ct:e", "ct:f"];
    let gets: Vec<Vec<&str>> = keys.iter().map(|k| vec!["GET", k]).collect();
    c.pipeline(&gets).expect("pipeline");
    for key in keys {
        assert_eq!(c.q(&["SET", key, "x"]), Value::simple("OK"), "{key}");
        // Redis writes the push before the reply of the write that caused it, but on another
        // connection: redcar places it after the reply.
        expect_push(&mut c, invalidate(&[key]), key);
    }
    let info = c.q(&["CLIENT", "TRACKINGINFO"]);
    assert!(format!("{info:?}").contains("\"on\""), "{info:?}");
    assert_eq!(c.q(&["CLIENT", "TRACKING", "off"]), Value::simple("OK"));
    c.q(&["GET", "ct:b"]);
    writer.q(&["SET", "ct:b", "y"]);
    expect_nothing(&mut c, "tracking off");
}

#[test]
fn optin_optout_and_noloop_decide_what_is_tracked() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut writer = redcar.client();

    let mut optin = tracker(&redcar, &["OPTIN"]);
    optin.q(&["GET", "ct:in:1"]);
    assert_eq!(optin.q(&["CLIENT", "CACHING", "yes"]), Value::simple("OK"));
    optin.q(&["GET", "ct:in:2"]);
    optin.q(&["GET", "ct:in:3"]); // CACHING lasts one command
    for key in ["ct:in:1", "ct:in:2", "ct:in:3"] {
        writer.q(&["SET", key, "v"]);
    }
    expect_push(
        &mut optin,
        invalidate(&["ct:in:2"]),
        "only the read after CACHING yes",
    );
    expect_nothing(&mut optin, "the others were not tracked");

    let mut optout = tracker(&redcar, &["OPTOUT"]);
    assert_eq!(optout.q(&["CLIENT", "CACHING", "no"]), Value::simple("OK"));
    optout.q(&["GET", "ct:out:1"]);
    optout.q(&["GET", "ct:out:2"]);
    writer.q(&["SET", "ct:out:1", "v"]);
    writer.q(&["SET", "ct:out:2", "v"]);
    expect_push(
        &mut optout,
        invalidate(&["ct:out:2"]),
        "all but the read after CACHING no",
    );
    expect_nothing(&mut optout, "ct:out:1 was not tracked");

    let mut noloop = tracker(&redcar, &["NOLOOP"]);
    noloop.q(&["GET", "ct:nl"]);
    noloop.q(&["SET", "ct:nl", "mine"]);
    expect_nothing(&mut noloop, "its own write");
    noloop.q(&["GET", "ct:nl"]);
    writer.q(&["SET", "ct:nl", "theirs"]);
    expect_push(&mut noloop, invalidate(&["ct:nl"]), "someone else's write");
}

/// The same commands on one connection to a real redis-server and to redcar: the same replies
/// (client ids aside).
#[test]
fn client_tracking_replies_and_errors_match_redis() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let server = RedisServer::start();
    let script: &[&[&str]] = &[
        &["CLIENT", "TRACKING"],
        &["CLIENT", "TRACKING", "foo"],
        &["CLIENT", "TRACKING", "on", "foo"],
        &["CLIENT", "TRACKING", "on", "redirect"],
        &["CLIENT", "TRACKING", "on", "redirect", "999999"],
        &["CLIENT", "TRACKING", "on", "redirect", "abc"],
        &["CLIENT", "TRACKING", "on", "prefix", "a"],
        &[
            "CLIENT", "TRACKING", "on", "bcast", "prefix", "a", "prefix", "ab",
        ],
        &["CLIENT", "TRACKING", "on", "optin", "optout"],
        &["CLIENT", "TRACKING", "on", "bcast", "optin"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "CACHING"],
        &["CLIENT", "TRACKING", "on", "optin", "noloop"],
        &["CLIENT", "CACHING", "maybe"],
        &["CLIENT", "CACHING", "no"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "GETREDIR"],
        &["CLIENT", "TRACKING", "on", "optout"],
        &["CLIENT", "TRACKING", "on", "bcast"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "optout"],
        &["CLIENT", "CACHING", "yes"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "a"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "ab"],
        &["CLIENT", "TRACKING", "on", "bcast", "prefix", "b"],
        &["CLIENT", "TRACKING", "on", "bcast"],
        &["CLIENT", "TRACKINGINFO"],
        &["HELLO", "3"],
        &["CLIENT", "TRACKINGINFO"],
        &["CLIENT", "TRACKING", "off"],
        &["CLIENT", "TRACKINGINFO"],
        &["RESET"],
    ];
    let mut redis = server.client().typed();
    let mut through = redcar.client().typed();
    for command in script {
        let want = redis.q(command);
        let got = through.q(command);
        if command[0] == "HELLO" {
            continue; // server details differ
        }
        assert_eq!(got, want, "{command:?}");
    }
}

#[test]
fn resp2_clients_redirect_to_a_subscribed_connection() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut subscriber = redcar.client();
    let id = subscriber.q(&["CLIENT", "ID"]).as_int().expect("an id");
    subscriber.q(&["SUBSCRIBE", "__redis__:invalidate"]);
    let mut c = redcar.client();
    let id = id.to_string();
    assert_eq!(
        c.q(&["CLIENT", "TRACKING", "on", "REDIRECT", &id]),
        Value::simple("OK")
    );
    assert_eq!(
        c.q(&["CLIENT", "GETREDIR"]),
        Value::Int(id.parse().unwrap_or(0))
    );
    c.q(&["GET", "ct:r2"]);
    redcar.client().q(&["SET", "ct:r2", "v"]);
    let message = Value::Array(Some(vec![
        Value::bulk("message"),
        Value::bulk("__redis__:invalidate"),
        Value::Array(Some(vec![Value::bulk("ct:r2")])),
    ]));
    assert_eq!(
        next_within(&mut subscriber, Duration::from_secs(5)),
        Some(message)
    );
    expect_nothing(&mut c, "the tracking client itself gets nothing in RESP2");
}

#[test]
fn bcast_clients_hear_of_every_key_under_their_prefixes() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut c = tracker(
        &redcar,
        &["BCAST", "PREFIX", "ct:bc:u:", "PREFIX", "ct:bc:p:"],
    );
    let mut all = tracker(&redcar, &["BCAST", "NOLOOP"]);
    let keys = ["ct:bc:u:1", "ct:bc:p:9", "ct:bc:other"];
    redcar.client().q(&["SET", keys[0], "v"]);
    cluster.primary_for_key(keys[1]).cmd(&["SET", keys[1], "v"]);
    redcar.client().q(&["SET", keys[2], "v"]);
    // Without reading them first, from any node, only under the client's prefixes.
    let mut got = vec![
        next_within(&mut c, Duration::from_secs(5)),
        next_within(&mut c, Duration::from_secs(5)),
    ];
    got.sort_by_key(|v| format!("{v:?}"));
    assert_eq!(
        got,
        [Some(invalidate(&[keys[1]])), Some(invalidate(&[keys[0]]))]
    );
    expect_nothing(&mut c, "outside the prefixes");
    for key in keys {
        let got = next_within(&mut all, Duration::from_secs(5));
        assert!(
            format!("{got:?}").contains(key),
            "BCAST without a prefix: every key ({key}): {got:?}"
        );
    }
    let info = c.q(&["CLIENT", "TRACKINGINFO"]);
    assert!(format!("{info:?}").contains("ct:bc:p:"), "{info:?}");
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs redis-py in target/pyenv (scripts/ensure-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn redis_py_serves_from_its_cache_until_another_client_writes() {
    let python = crate::clients::python();
    crate::clients::require(
        &python,
        &["-c", "from redis.cache import CacheConfig"],
        "redis-py with client-side caching in the virtualenv",
    );
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    crate::clients::run_script(&python, "tracking_redis_py.py", &redcar);
}

#[test]
fn resp3_redirect_reaches_a_subscribed_client_and_a_gone_target_is_reported() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let mut target = redcar.client().typed();
    target.q(&["HELLO", "3"]);
    let id = target.q(&["CLIENT", "ID"]).as_int().expect("an id");
    target.q(&["SUBSCRIBE", "ct:chan"]);
    let mut c = tracker(&redcar, &["REDIRECT", &id.to_string()]);
    c.q(&["GET", "ct:r3"]);
    redcar.client().q(&["SET", "ct:r3", "1"]);
    expect_push(&mut target, invalidate(&["ct:r3"]), "the RESP3 target");
    expect_nothing(&mut c, "redirected away");

    drop(target);
    std::thread::sleep(Duration::from_millis(300));
    c.q(&["GET", "ct:r3"]);
    redcar.client().q(&["SET", "ct:r3", "2"]);
    let broken = push(&[Value::bulk("tracking-redir-broken"), Value::Int(id)]);
    expect_push(&mut c, broken, "the target left");
    let info = c.q(&["CLIENT", "TRACKINGINFO"]);
    assert!(format!("{info:?}").contains("broken_redirect"), "{info:?}");
}
