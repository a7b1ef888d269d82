//! Several applications on one redcar, continued: per-user limits (a limited client is slowed,
//! an unlimited neighbour is not; `when_over: fail`; connections per user; unauthenticated
//! connections per address), per-user figures on `/metrics` and `/clients`, and SIGHUP
//! changing a connected client's rules (a subscriber that lost its channel is disconnected).

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::reload::reload;
use crate::support::{Redcar, RedisCluster, Value};
use crate::tenants::{error, login, CHANNEL_REFUSAL, KEY_REFUSAL};

/// `slow` may run 50 commands a second (burst 5) on each connection and is slowed past it;
/// `fail` 2 a second (burst 2) over all its connections and is refused past it; `one` may log in
/// once at a time; `free` has no limits.
const CONFIG: &str = "auth:\n  max_unauthenticated_per_address: 2\n  users:\n\
\x20   - name: slow\n      acl: \"on >slow-pw ~* &* +@all\"\n\
\x20     limits:\n        per_client: {commands_per_second: 50, burst: 5}\n\
\x20   - name: fail\n      acl: \"on >fail-pw ~* &* +@all\"\n\
\x20     limits:\n        per_user: {commands_per_second: 2, burst: 2}\n        when_over: fail\n\
\x20   - name: one\n      acl: \"on >one-pw ~* +@all\"\n      limits: {max_connections: 1}\n\
\x20   - name: free\n      acl: \"on >free-pw ~app:* &app:* +@all\"\n";

fn start(yaml: &str) -> (RedisCluster, Redcar, crate::redirects::TempConfig) {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(yaml);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    (cluster, redcar, config)
}

/// `name{user="<user>"}` in `/metrics`.
fn user_figure(redcar: &Redcar, name: &str, user: &str) -> f64 {
    redcar.metric_sum(&format!("{name}{{user=\"{user}\"}}"))
}

/// How long `n` GETs (of `app:` keys) one after another take.
fn time_gets(client: &mut crate::support::RespClient, n: usize) -> Duration {
    let started = Instant::now();
    for i in 0..n {
        let reply = client.q(&["GET", &format!("app:{i}")]);
        assert!(!reply.is_error(), "{reply:?}");
    }
    started.elapsed()
}

#[test]
fn a_limited_client_is_slowed_and_an_unlimited_one_is_not() {
    let (_cluster, redcar, _config) = start(CONFIG);
    let mut slow = login(&redcar, "slow");
    let mut free = login(&redcar, "free");
    // 5 at once, then 50 a second: 105 commands take at least 2 s, none of them failed.
    let took = time_gets(&mut slow, 105);
    assert!(took >= Duration::from_millis(1900), "{took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    assert!(user_figure(&redcar, "redcar_user_rate_limited_total", "slow") > 0.0);
    // The neighbour, with the same number of commands, is not held back.
    let took = time_gets(&mut free, 105);
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert_eq!(
        user_figure(&redcar, "redcar_user_rate_limited_total", "free"),
        0.0
    );
    // A pipeline is slowed the same way and answered in order.
    let batch: Vec<Vec<String>> = (0..30)
        .map(|i| vec!["ECHO".into(), format!("{i}")])
        .collect();
    let started = Instant::now();
    let replies = slow.pipeline(&batch).expect("pipeline");
    let expected: Vec<Value> = (0..30).map(|i| Value::bulk(format!("{i}"))).collect();
    assert_eq!(replies, expected);
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn when_over_fail_answers_with_the_rate_error_over_all_the_users_clients() {
    let (_cluster, redcar, _config) = start(CONFIG);
    let mut first = login(&redcar, "fail");
    let mut second = login(&redcar, "fail");
    assert_eq!(first.q(&["PING"]), Value::simple("PONG"));
    assert_eq!(second.q(&["PING"]), Value::simple("PONG"));
    let refused = error(&first.q(&["PING"]));
    assert_eq!(
        refused,
        "ERR redcar: rate limit of user 'fail' reached (auth.users[].limits, when_over: fail); \
         slow down"
    );
    thread::sleep(Duration::from_millis(700));
    assert_eq!(
        second.q(&["PING"]),
        Value::simple("PONG"),
        "the bucket refilled"
    );
    assert!(user_figure(&redcar, "redcar_user_rate_limited_total", "fail") >= 1.0);
}

#[test]
fn connections_per_user_and_unauthenticated_connections_per_address_are_limited() {
    let (_cluster, redcar, _config) = start(CONFIG);
    let first = login(&redcar, "one");
    let mut second = redcar.client();
    assert_eq!(
        error(&second.q(&["AUTH", "one", "one-pw"])),
        "ERR redcar: user 'one' has 1 connections already (auth.users[].limits.max_connections)"
    );
    assert_eq!(
        error(&second.q(&["GET", "k"])),
        "NOAUTH Authentication required."
    );
    drop(first);
    // The seat comes back once redcar has seen the first client go: until then each AUTH is
    // refused, and counted.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut refused = 1.0;
    while second.q(&["AUTH", "one", "one-pw"]) != Value::simple("OK") {
        assert!(Instant::now() < deadline, "the seat was never given back");
        refused += 1.0;
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        user_figure(&redcar, "redcar_user_connections_refused_total", "one"),
        refused
    );
    // Two connections not logged in from 127.0.0.1 are allowed; the third is refused.
    let mut waiting = vec![redcar.client(), redcar.client()];
    for c in &mut waiting {
        assert_eq!(
            c.q(&["PING"]).error(),
            Some("NOAUTH Authentication required.")
        );
    }
    let mut third = redcar.client();
    third.set_timeout(Duration::from_secs(5)).expect("timeout");
    let refused = third.read_reply().expect("the refusal");
    assert!(
        error(&refused).contains("too many unauthenticated connections from this address"),
        "{refused:?}"
    );
    assert!(third.read_reply().is_err(), "closed after the refusal");
    // Logging one in frees its place.
    assert_eq!(
        waiting[0].q(&["AUTH", "free", "free-pw"]),
        Value::simple("OK")
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut fourth = redcar.client();
        if fourth.q(&["PING"]).error() == Some("NOAUTH Authentication required.") {
            break;
        }
        assert!(Instant::now() < deadline, "the place was never given back");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn per_user_figures_are_on_metrics_and_clients() {
    let (_cluster, redcar, _config) = start(CONFIG);
    let mut free = login(&redcar, "free");
    for i in 0..10 {
        assert_eq!(
            free.q(&["SET", &format!("app:{i}"), "v"]),
            Value::simple("OK")
        );
    }
    assert_eq!(error(&free.q(&["GET", "other"])), KEY_REFUSAL);
    assert!(free.q(&["INCR", "app:0"]).is_error());
    assert!(user_figure(&redcar, "redcar_user_commands_total", "free") >= 11.0);
    assert_eq!(
        user_figure(&redcar, "redcar_user_refusals_total", "free"),
        1.0
    );
    assert!(user_figure(&redcar, "redcar_user_command_errors_total", "free") >= 1.0);
    assert!(user_figure(&redcar, "redcar_user_received_bytes_total", "free") > 100.0);
    assert!(user_figure(&redcar, "redcar_user_sent_bytes_total", "free") > 10.0);
    assert_eq!(user_figure(&redcar, "redcar_user_connections", "free"), 1.0);
    assert!(redcar.metric_sum("redcar_user_command_duration_seconds_count{user=\"free\"}") >= 10.0);
    // Configured users only: the series of a user nobody logged in as are there, at zero.
    assert_eq!(
        user_figure(&redcar, "redcar_user_commands_total", "one"),
        0.0
    );
    let (status, body) = redcar.http_get("/clients").expect("/clients");
    assert_eq!(status, 200);
    let clients: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(clients["by_user"]["free"], 1, "{clients}");
    let users = clients["users"].as_array().expect("users");
    let free_figures = users.iter().find(|u| u["user"] == "free").expect("free");
    assert!(
        free_figures["commands"].as_u64() >= Some(11),
        "{free_figures}"
    );
    assert_eq!(free_figures["refusals"], 1, "{free_figures}");
}

#[test]
fn a_reload_changes_connected_clients_rules_and_drops_a_subscriber_that_lost_its_channel() {
    let (_cluster, redcar, config) = start(CONFIG);
    let mut free = login(&redcar, "free");
    assert_eq!(free.q(&["SET", "app:1", "v"]), Value::simple("OK"));
    let mut listener = login(&redcar, "free");
    let subscribed = listener.q(&["SUBSCRIBE", "app:news"]);
    assert_eq!(
        subscribed.as_array().map(<[Value]>::len),
        Some(3),
        "{subscribed:?}"
    );
    let mut keeper = login(&redcar, "slow");
    assert_eq!(
        keeper
            .q(&["SUBSCRIBE", "app:news"])
            .as_array()
            .map(<[Value]>::len),
        Some(3)
    );
    // `free` now has `other:*` keys and channels only (same password: the login stays).
    let changed = CONFIG.replace("~app:* &app:*", "~other:* &other:*");
    reload(&redcar, &config, &changed, "ok", 1);
    assert_eq!(error(&free.q(&["GET", "app:1"])), KEY_REFUSAL);
    assert_eq!(free.q(&["SET", "other:1", "v"]), Value::simple("OK"));
    assert_eq!(
        error(&free.q(&["PUBLISH", "app:news", "m"])),
        CHANNEL_REFUSAL
    );
    // The subscriber that lost `app:news` is disconnected at once; the other one stays.
    listener
        .set_timeout(Duration::from_secs(5))
        .expect("timeout");
    assert!(listener.read_reply().is_err(), "disconnected by the reload");
    let mut publisher = login(&redcar, "slow");
    assert!(publisher
        .q(&["PUBLISH", "app:news", "hi"])
        .as_int()
        .is_some());
    keeper.set_timeout(Duration::from_secs(5)).expect("timeout");
    assert!(keeper
        .read_reply()
        .expect("a message")
        .to_text()
        .contains("hi"));
    // A reload with a bad rule is refused as a whole: the rules in effect stay.
    let broken = changed.replace("~other:* &other:*", "~other:* &other:* +@nosuch");
    reload(&redcar, &config, &broken, "error", 1);
    assert_eq!(free.q(&["GET", "other:1"]), Value::bulk("v"));
    assert!(
        redcar.log().contains("+@nosuch"),
        "the refusal names the rule"
    );
}
