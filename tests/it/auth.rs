//! Client authentication through redcar: `--requirepass`, configured users with command rules,
//! Redis's replies, and secrets that never leave the process.

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, Value};

fn error(v: &Value) -> String {
    v.error().unwrap_or_default().to_string()
}

#[test]
fn requirepass_gates_every_command_until_auth() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--requirepass", "s3cret"]);
    let mut c = redcar.client();
    assert_eq!(
        error(&c.q(&["GET", "k"])),
        "NOAUTH Authentication required."
    );
    assert_eq!(error(&c.q(&["PING"])), "NOAUTH Authentication required.");
    assert_eq!(
        error(&c.q(&["NOSUCHCOMMAND"])),
        "NOAUTH Authentication required."
    );
    assert_eq!(
        error(&c.q(&["AUTH", "wrong"])),
        "WRONGPASS invalid username-password pair or user is disabled."
    );
    assert_eq!(c.q(&["AUTH", "s3cret"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", "k", "v"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "k"]), Value::bulk("v"));
    // RESET logs out, as in Redis.
    assert_eq!(c.q(&["RESET"]), Value::simple("RESET"));
    assert_eq!(
        error(&c.q(&["GET", "k"])),
        "NOAUTH Authentication required."
    );

    // HELLO must authenticate in the same breath.
    let mut h = redcar.client();
    assert!(error(&h.q(&["HELLO", "2"])).starts_with("NOAUTH HELLO must be called"));
    let hello = h.q(&["HELLO", "2", "AUTH", "default", "s3cret"]);
    assert!(hello.as_array().is_some(), "{hello:?}");
    assert_eq!(h.q(&["GET", "k"]), Value::bulk("v"));
    // QUIT needs no authentication.
    let mut q = redcar.client();
    assert_eq!(q.q(&["QUIT"]), Value::simple("OK"));
}

#[test]
fn users_are_held_to_their_rules_and_secrets_stay_hidden() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config(
        "auth:\n  users:\n\
         \x20   - name: reader\n      password: r-pw\n      read_only: true\n\
         \x20   - name: web\n      password: {sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8}\n      deny: [\"@admin\", \"@dangerous\"]\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);

    let mut web = redcar.client();
    assert_eq!(
        error(&web.q(&["AUTH", "r-pw"])),
        "WRONGPASS invalid username-password pair or user is disabled.",
        "no default user configured"
    );
    assert_eq!(web.q(&["AUTH", "web", "password"]), Value::simple("OK"));
    assert_eq!(web.q(&["SET", "{u}k", "1"]), Value::simple("OK"));
    assert_eq!(
        error(&web.q(&["KEYS", "*"])),
        "NOPERM this user has no permissions to run the 'keys' command"
    );
    assert_eq!(
        error(&web.q(&["FLUSHALL"])),
        "NOPERM this user has no permissions to run the 'flushall' command"
    );
    assert_eq!(
        cluster.primary_for_key("{u}k").cmd(&["GET", "{u}k"]),
        Value::bulk("1"),
        "nothing was flushed"
    );

    let mut reader = redcar.client();
    assert_eq!(reader.q(&["AUTH", "reader", "r-pw"]), Value::simple("OK"));
    assert_eq!(reader.q(&["GET", "{u}k"]), Value::bulk("1"));
    assert_eq!(
        error(&reader.q(&["INCR", "{u}k"])),
        "NOPERM this user has no permissions to run the 'incr' command"
    );
    // Refused inside MULTI: EXEC aborts, nothing runs.
    assert_eq!(reader.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(reader.q(&["GET", "{u}k"]), Value::simple("QUEUED"));
    assert!(error(&reader.q(&["DEL", "{u}k"])).starts_with("NOPERM"));
    assert!(error(&reader.q(&["EXEC"])).starts_with("EXECABORT"));
    assert_eq!(reader.q(&["GET", "{u}k"]), Value::bulk("1"));

    // /config shows no password or digest.
    let (_, shown) = redcar.http_get("/config").expect("config");
    assert!(shown.contains("(redacted)"), "{shown}");
    assert!(
        !shown.contains("r-pw") && !shown.contains("5e884898"),
        "{shown}"
    );
    let log = redcar.log();
    assert!(!log.contains("r-pw"), "secret in the log:\n{log}");
}

#[test]
fn a_missing_password_file_stops_start_up_naming_the_key() {
    let (code, stderr) = crate::support::redcar::check_config_yaml(
        "listen: 127.0.0.1:0\nauth:\n  requirepass: {file: /nonexistent/redcar-pw}\n",
    );
    assert_eq!(code, Some(64));
    assert!(
        stderr.contains("`auth.requirepass.file`: cannot read /nonexistent/redcar-pw"),
        "{stderr}"
    );
}

/// Commands sent while already in subscribe mode are held to the user's rules like any other:
/// a user allowed SUBSCRIBE but not PSUBSCRIBE or SSUBSCRIBE cannot get them by subscribing
/// first.
#[test]
fn subscribe_mode_commands_are_checked_against_the_users_rules() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(
        "auth:\n  users:\n\
         \x20   - name: listener\n      password: l-pw\n      deny: [psubscribe, ssubscribe, publish]\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["AUTH", "listener", "l-pw"]), Value::simple("OK"));
    assert_eq!(
        error(&c.q(&["PSUBSCRIBE", "p*"])),
        "NOPERM this user has no permissions to run the 'psubscribe' command",
        "refused outside subscribe mode"
    );
    let subscribed = c.q(&["SUBSCRIBE", "news"]);
    assert_eq!(
        subscribed.as_array().map(|a| a.len()),
        Some(3),
        "{subscribed:?}"
    );
    // Now in subscribe mode: the same rules apply.
    assert_eq!(
        error(&c.q(&["PSUBSCRIBE", "p*"])),
        "NOPERM this user has no permissions to run the 'psubscribe' command"
    );
    assert_eq!(
        error(&c.q(&["SSUBSCRIBE", "{s}chan"])),
        "NOPERM this user has no permissions to run the 'ssubscribe' command"
    );
    // Nothing was subscribed behind the refusal: a pattern message does not arrive, a channel
    // one does.
    let mut publisher = redcar.client();
    assert_eq!(
        publisher.q(&["AUTH", "listener", "l-pw"]),
        Value::simple("OK")
    );
    assert!(error(&publisher.q(&["PUBLISH", "news", "x"])).starts_with("NOPERM"));
    for node in cluster.nodes() {
        node.cmd(&["PUBLISH", "pattern-match", "no"]);
        node.cmd(&["SPUBLISH", "{s}chan", "no"]);
    }
    cluster.nodes()[0].cmd(&["PUBLISH", "news", "yes"]);
    c.set_timeout(std::time::Duration::from_secs(5))
        .expect("timeout");
    let got = c.read_reply().expect("the channel message");
    let items = got.as_array().expect("a message array");
    assert_eq!(items[0], Value::bulk("message"), "{got:?}");
    assert_eq!(
        items[2],
        Value::bulk("yes"),
        "only the allowed subscription"
    );
    // Allowed commands still work in subscribe mode.
    let unsubscribed = c.q(&["UNSUBSCRIBE", "news"]);
    assert_eq!(
        unsubscribed.as_array().map(|a| a[0].clone()),
        Some(Value::bulk("unsubscribe"))
    );
    assert!(c.q(&["PING"]).as_array().is_none(), "back to normal mode");
}

#[test]
fn failed_logins_are_counted_logged_and_close_the_connection_at_the_limit() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(
        "auth:\n  max_failures: 3\n  users:\n\
         \x20   - name: web\n      password: right-pw\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert!(error(&c.q(&["AUTH", "web", "guess-1"])).starts_with("WRONGPASS"));
    assert!(error(&c.q(&["HELLO", "3", "AUTH", "web", "guess-2"])).starts_with("WRONGPASS"));
    assert!(
        error(&c.q(&["PING"])).starts_with("NOAUTH"),
        "two failures: still connected, still not logged in"
    );
    let local = c.stream().local_addr().expect("local address").to_string();
    assert!(error(&c.q(&["AUTH", "web", "guess-3"])).starts_with("WRONGPASS"));
    assert!(
        c.read_reply().is_err(),
        "the third failure (auth.max_failures: 3) closes the connection after its reply"
    );
    assert_eq!(redcar.metric_sum("redcar_auth_failures_total"), 3.0);
    assert_eq!(redcar.metric_sum("redcar_auth_closed_total"), 1.0);
    let log = redcar.log();
    assert!(
        log.lines().any(|l| l.contains("authentication failed")
            && l.contains(&local)
            && l.contains("user=web")),
        "a warning names the client and the user:\n{log}"
    );
    assert!(
        log.contains("auth.max_failures reached"),
        "the close is logged:\n{log}"
    );
    assert!(
        !log.contains("guess-"),
        "passwords are never logged:\n{log}"
    );

    // Other clients are not affected, and a right password still works.
    let mut other = redcar.client();
    assert_eq!(other.q(&["AUTH", "web", "right-pw"]), Value::simple("OK"));
    assert_eq!(other.q(&["SET", "auth:k", "v"]), Value::simple("OK"));
}
