//! Several applications on one redcar: Redis ACL key and channel rules on every key position
//! and pub/sub command (refused with Redis 7.0's own words, in MULTI too), `filter_keys`, and
//! the configuration's refusals. Limits, figures and reloads are in `tenants_limits.rs`.

use std::time::Duration;

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, RespClient, Value};

pub(crate) const KEY_REFUSAL: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";
pub(crate) const CHANNEL_REFUSAL: &str =
    "NOPERM this user has no permissions to access one of the channels used as arguments";

pub(crate) fn error(v: &Value) -> String {
    v.error().unwrap_or_default().to_string()
}

/// A client logged in as `user` (password `<user>-pw`).
pub(crate) fn login(redcar: &Redcar, user: &str) -> RespClient {
    let mut c = redcar.client();
    let password = format!("{user}-pw");
    assert_eq!(c.q(&["AUTH", user, &password]), Value::simple("OK"));
    c
}

/// `app` may read and write `app:*`, only read `shared:*`, only write `log:*`, and hear and
/// publish on `app:*` channels; `other` has its own keys; `peek` filters KEYS, SCAN and
/// RANDOMKEY down to what it may read.
const CONFIG: &str = "auth:\n  users:\n\
\x20   - name: app\n      acl: \"on >app-pw ~app:* %R~shared:* %W~log:* &app:* +@all -@dangerous\"\n\
\x20   - name: other\n      acl: \"on >other-pw ~other:* +@all\"\n\
\x20   - name: peek\n      acl: \"on >peek-pw ~app:* +@all\"\n      filter_keys: true\n\
\x20   - name: nofilter\n      acl: \"on >nofilter-pw ~app:* +@all\"\n";

fn start() -> (RedisCluster, Redcar) {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(CONFIG);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    (cluster, redcar)
}

#[test]
fn key_rules_hold_on_every_key_position() {
    let (cluster, redcar) = start();
    let mut app = login(&redcar, "app");
    assert_eq!(app.q(&["SET", "app:1", "v"]), Value::simple("OK"));
    assert_eq!(error(&app.q(&["GET", "other:1"])), KEY_REFUSAL);
    // Read-only and write-only patterns, by what each command does to its key.
    let direct = cluster.primary_for_key("shared:1");
    direct.cmd(&["SET", "shared:1", "s"]);
    assert_eq!(app.q(&["GET", "shared:1"]), Value::bulk("s"));
    assert_eq!(error(&app.q(&["SET", "shared:1", "x"])), KEY_REFUSAL);
    assert_eq!(error(&app.q(&["APPEND", "shared:1", "x"])), KEY_REFUSAL);
    assert_eq!(app.q(&["SET", "log:1", "l"]), Value::simple("OK"));
    assert_eq!(error(&app.q(&["GET", "log:1"])), KEY_REFUSAL);
    assert_eq!(error(&app.q(&["SET", "log:1", "l", "GET"])), KEY_REFUSAL);
    assert_eq!(app.q(&["EXISTS", "log:1", "shared:1"]), Value::Int(2));
    // Multi-key commands, split across slots or not: every key counts, nothing runs.
    assert_eq!(
        app.q(&["MGET", "app:1", "shared:1"]),
        Value::Array(Some(vec![Value::bulk("v"), Value::bulk("s")]))
    );
    assert_eq!(
        error(&app.q(&["MSET", "app:2", "x", "other:2", "y"])),
        KEY_REFUSAL
    );
    assert!(cluster
        .primary_for_key("app:2")
        .cmd(&["GET", "app:2"])
        .is_nil());
    assert_eq!(error(&app.q(&["DEL", "app:1", "shared:1"])), KEY_REFUSAL);
    assert_eq!(
        error(&app.q(&["COPY", "shared:1", "{shared:1}x"])),
        KEY_REFUSAL
    );
    // Keys after options, destination keys, and read-or-write by the options given.
    assert_eq!(
        error(&app.q(&["XREAD", "COUNT", "1", "STREAMS", "app:s", "other:s", "0", "0"])),
        KEY_REFUSAL
    );
    assert_eq!(
        error(&app.q(&["ZUNIONSTORE", "shared:{z}d", "1", "app:{z}s"])),
        KEY_REFUSAL,
        "the destination is only readable"
    );
    assert!(app
        .q(&["BITFIELD", "shared:1", "GET", "u8", "0"])
        .as_array()
        .is_some());
    assert_eq!(
        error(&app.q(&["BITFIELD", "shared:1", "SET", "u8", "0", "1"])),
        KEY_REFUSAL
    );
    // Scripts and functions: their declared keys, by whether they may write.
    assert_eq!(
        error(&app.q(&["EVAL", "return 1", "1", "shared:1"])),
        KEY_REFUSAL
    );
    assert_eq!(
        app.q(&["EVAL_RO", "return 1", "1", "shared:1"]),
        Value::Int(1)
    );
    assert_eq!(app.q(&["EVAL", "return 1", "0"]), Value::Int(1));
    assert_eq!(
        error(&app.q(&["FCALL", "nosuch", "1", "other:1"])),
        KEY_REFUSAL
    );
    assert!(error(&app.q(&["FCALL", "nosuch", "1", "app:1"])).contains("Function not found"));
    // Commands: @dangerous is refused whatever its keys.
    assert_eq!(
        error(&app.q(&["KEYS", "*"])),
        "NOPERM this user has no permissions to run the 'keys' command"
    );
}

#[test]
fn a_refusal_inside_multi_makes_exec_abort() {
    let (cluster, redcar) = start();
    let mut app = login(&redcar, "app");
    assert_eq!(app.q(&["MULTI"]), Value::simple("OK"));
    assert_eq!(app.q(&["SET", "app:{t}1", "v"]), Value::simple("QUEUED"));
    assert_eq!(error(&app.q(&["SET", "shared:{t}", "v"])), KEY_REFUSAL);
    assert_eq!(
        error(&app.q(&["EXEC"])),
        "EXECABORT Transaction discarded because of previous errors."
    );
    assert!(cluster
        .primary_for_key("app:{t}1")
        .cmd(&["GET", "app:{t}1"])
        .is_nil());
}

#[test]
fn channel_rules_hold_for_every_pubsub_command() {
    let (_cluster, redcar) = start();
    let mut app = login(&redcar, "app");
    assert_eq!(error(&app.q(&["PUBLISH", "other", "m"])), CHANNEL_REFUSAL);
    assert_eq!(error(&app.q(&["SPUBLISH", "other", "m"])), CHANNEL_REFUSAL);
    assert!(app.q(&["SPUBLISH", "app:s", "m"]).as_int().is_some());
    assert_eq!(
        error(&app.q(&["SUBSCRIBE", "app:a", "other"])),
        CHANNEL_REFUSAL
    );
    assert_eq!(
        error(&app.q(&["PSUBSCRIBE", "app:1*"])),
        CHANNEL_REFUSAL,
        "patterns literally"
    );
    assert_eq!(error(&app.q(&["SSUBSCRIBE", "other"])), CHANNEL_REFUSAL);
    let subscribed = app.q(&["SUBSCRIBE", "app:news"]);
    assert_eq!(
        subscribed.as_array().map(<[Value]>::len),
        Some(3),
        "{subscribed:?}"
    );
    // In subscribe mode too.
    assert_eq!(error(&app.q(&["SUBSCRIBE", "other"])), CHANNEL_REFUSAL);
    let pattern = app.q(&["PSUBSCRIBE", "app:*"]);
    assert_eq!(
        pattern.as_array().map(<[Value]>::len),
        Some(3),
        "{pattern:?}"
    );
    let mut publisher = login(&redcar, "app");
    assert!(publisher
        .q(&["PUBLISH", "app:news", "hi"])
        .as_int()
        .is_some());
    app.set_timeout(Duration::from_secs(5)).expect("timeout");
    let heard = app.read_reply().expect("a message");
    assert!(heard.to_text().contains("hi"), "{heard:?}");
}

#[test]
fn filter_keys_shows_only_readable_keys_to_keys_scan_and_randomkey() {
    let (cluster, redcar) = start();
    for i in 0..20 {
        let key = format!("{}:{i}", if i % 2 == 0 { "app" } else { "secret" });
        cluster.primary_for_key(&key).cmd(&["SET", &key, "v"]);
    }
    let mut peek = login(&redcar, "peek");
    let mut nofilter = login(&redcar, "nofilter");
    let names = |v: &Value| -> Vec<String> {
        let mut names: Vec<String> = v
            .as_array()
            .unwrap_or_default()
            .iter()
            .filter_map(|k| k.as_str().map(str::to_string))
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        names(&nofilter.q(&["KEYS", "*"])).len(),
        20,
        "Redis's default: every key"
    );
    let shown = names(&peek.q(&["KEYS", "*"]));
    assert_eq!(shown.len(), 10, "{shown:?}");
    assert!(shown.iter().all(|k| k.starts_with("app:")));
    let mut scanned = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let page = peek.q(&["SCAN", &cursor, "COUNT", "3"]);
        let parts = page.as_array().expect("a page").to_vec();
        scanned.extend(names(&parts[1]));
        cursor = parts[0].as_str().expect("cursor").to_string();
        if cursor == "0" {
            break;
        }
    }
    scanned.sort();
    assert_eq!(scanned, shown);
    for _ in 0..10 {
        let key = peek.q(&["RANDOMKEY"]);
        let key = key.as_str().expect("a readable key exists");
        assert!(key.starts_with("app:"), "{key}");
    }
}

#[test]
fn invalid_acl_settings_stop_start_up_naming_the_user_and_the_rule() {
    let cases = [
        (
            "acl: \"on >pw ~a:* +@nosuch\"",
            "(user `u`): `acl` rule `+@nosuch`",
        ),
        ("acl: \"on >pw bogus\"", "(user `u`): `acl` rule `bogus`"),
        ("acl: \"on >pw allkeys ~a\"", "(user `u`): `acl` rule `~a`"),
        ("acl: \"on >pw (~a +get\"", "`acl` rule `(~a +get`"),
        (
            "acl: \"on >pw ~*\"\n      read_only: true",
            "has both `acl` and",
        ),
        ("acl: \"on ~*\"", "(user `u`) has no password"),
    ];
    for (user, expected) in cases {
        let yaml = format!(
            "listen: 127.0.0.1:0\ncluster:\n  seeds: [127.0.0.1:1]\nauth:\n  users:\n    - name: u\n      {user}\n"
        );
        let (code, stderr) = crate::support::redcar::check_config_yaml(&yaml);
        assert_eq!(code, Some(64), "{user}: {stderr}");
        assert!(stderr.contains(expected), "{user}: {stderr}");
    }
}
