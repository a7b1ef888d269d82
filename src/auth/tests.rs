//! Tests of AUTH, users and per-user command rules.

use bytes::Bytes;

use super::*;
use crate::protocol::Request;

fn spec(line: &str) -> &'static CommandSpec {
    let args = Request::from_args::<Vec<Bytes>, Bytes>(
        line.split(' ')
            .map(|a| Bytes::from(a.to_string()))
            .collect(),
    );
    crate::commands::lookup(args.args()).unwrap_or_else(|| panic!("{line} is a known command"))
}

fn user(name: &str, read_only: bool, allow: &[&str], deny: &[&str]) -> UserConfig {
    UserConfig {
        name: name.into(),
        password: Secret::Plain(format!("{name}-pw")),
        read_only,
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    }
}

fn users(config: AuthConfig) -> Users {
    Users::from_config(&config).expect("valid auth config")
}

#[test]
fn without_configuration_everyone_is_the_unrestricted_default_user() {
    let open = users(AuthConfig::default());
    let anonymous = open.anonymous().expect("no login needed");
    assert!(anonymous.is_unrestricted());
    let refused = open.login(None, b"x").expect_err("no password configured");
    assert!(refused.starts_with(b"-ERR AUTH <password> called without any password"));
    assert!(open.login(Some(b"default"), b"anything").is_ok());
    assert_eq!(
        &open.login(Some(b"bob"), b"x").expect_err("unknown")[..],
        WRONGPASS
    );
}

#[test]
fn requirepass_and_named_users_log_in_with_their_own_passwords() {
    let config = AuthConfig {
        max_failures: 0,
        requirepass: Some(Secret::Plain("s3cret".into())),
        users: vec![user("app", false, &[], &[])],
    };
    let u = users(config);
    assert!(u.anonymous().is_none(), "authentication is required");
    assert_eq!(u.login(None, b"s3cret").expect("default").name, "default");
    assert_eq!(
        u.login(Some(b"default"), b"s3cret").expect("default").name,
        "default"
    );
    assert_eq!(u.login(Some(b"app"), b"app-pw").expect("app").name, "app");
    for (name, password) in [
        (None, &b"wrong"[..]),
        (Some(&b"app"[..]), &b"s3cret"[..]),
        (Some(&b"nobody"[..]), &b"app-pw"[..]),
        (Some(&b"app"[..]), &b""[..]),
    ] {
        assert_eq!(
            &u.login(name, password).expect_err("refused")[..],
            WRONGPASS
        );
    }
}

#[test]
fn only_named_users_means_plain_auth_is_refused() {
    let u = users(AuthConfig {
        max_failures: 0,
        requirepass: None,
        users: vec![user("app", false, &[], &[])],
    });
    assert!(u.anonymous().is_none());
    assert_eq!(
        &u.login(None, b"app-pw").expect_err("no default")[..],
        WRONGPASS
    );
}

#[test]
fn read_only_users_may_read_but_not_write() {
    let u = users(AuthConfig {
        max_failures: 0,
        requirepass: None,
        users: vec![user("reader", true, &[], &[])],
    });
    let reader = u.login(Some(b"reader"), b"reader-pw").expect("login");
    assert!(!reader.is_unrestricted());
    assert!(reader.may_run(spec("GET k")));
    assert!(reader.may_run(spec("MGET a b")));
    assert!(!reader.may_run(spec("SET k v")));
    assert!(!reader.may_run(spec("DEL k")));
    assert!(!reader.may_run(spec("EVAL s 0")), "scripts may write");
    assert!(!reader.may_run(spec("FCALL f 0")));
    assert!(
        reader.may_run(spec("EVAL_RO s 0")),
        "read-only scripts are fine"
    );
    assert!(reader.may_run(spec("SCRIPT EXISTS abc")));
    assert_eq!(
        &reader.refusal(spec("SET k v"))[..],
        b"-NOPERM User reader has no permissions to run the 'set' command\r\n"
    );
}

#[test]
fn allow_and_deny_lists_match_commands_subcommands_and_categories() {
    let u = users(AuthConfig {
        max_failures: 0,
        requirepass: None,
        users: vec![
            user("ops", false, &[], &["@admin", "@dangerous", "flushall"]),
            user("cache", false, &["@string", "@connection", "del"], &[]),
            user("cfg", false, &["@all"], &["config"]),
        ],
    });
    let ops = u.login(Some(b"ops"), b"ops-pw").expect("login");
    assert!(ops.may_run(spec("SET k v")));
    assert!(!ops.may_run(spec("FLUSHALL")));
    assert!(!ops.may_run(spec("KEYS *")), "KEYS is @dangerous");
    let cache = u.login(Some(b"cache"), b"cache-pw").expect("login");
    assert!(cache.may_run(spec("GET k")));
    assert!(cache.may_run(spec("DEL k")));
    assert!(cache.may_run(spec("PING")));
    assert!(!cache.may_run(spec("HSET h f v")), "not @string");
    let cfg = u.login(Some(b"cfg"), b"cfg-pw").expect("login");
    assert!(
        !cfg.may_run(spec("CONFIG GET maxmemory")),
        "config covers config|get"
    );
    assert!(cfg.may_run(spec("GET k")));
}

#[test]
fn bad_auth_configs_are_refused_naming_the_key() {
    let cases = [
        (
            AuthConfig {
                max_failures: 0,
                requirepass: Some(Secret::Plain("x".into())),
                users: vec![user("default", false, &[], &[])],
            },
            "use one of them",
        ),
        (
            AuthConfig {
                max_failures: 0,
                requirepass: None,
                users: vec![user("a", false, &[], &[]), user("a", false, &[], &[])],
            },
            "`auth.users[1]`: user `a` is defined twice",
        ),
        (
            AuthConfig {
                max_failures: 0,
                requirepass: None,
                users: vec![user("a", false, &["@nosuch"], &[])],
            },
            "`auth.users[0].allow`: unknown category `@nosuch`",
        ),
        (
            AuthConfig {
                max_failures: 0,
                requirepass: None,
                users: vec![user("a b", false, &[], &[])],
            },
            "`auth.users[0].name`",
        ),
    ];
    for (config, expected) in cases {
        let message = Users::from_config(&config).expect_err("refused");
        assert!(message.contains(expected), "{message}");
    }
}

#[test]
fn commands_allowed_before_auth_are_redis_own() {
    for allowed in ["AUTH x", "HELLO 2", "QUIT"] {
        assert!(allowed_before_auth(spec(allowed)), "{allowed}");
    }
    for refused in ["GET k", "PING", "SELECT 0", "CLIENT SETNAME x"] {
        assert!(!allowed_before_auth(spec(refused)), "{refused}");
    }
}

#[test]
fn a_reload_keeps_a_login_only_while_the_user_and_its_password_stay() {
    let before = users(AuthConfig {
        max_failures: 0,
        requirepass: Some(Secret::Plain("old".into())),
        users: vec![user("alice", false, &[], &[]), user("bob", false, &[], &[])],
    });
    let alice = before.login(Some(b"alice"), b"alice-pw").expect("alice");
    let bob = before.login(Some(b"bob"), b"bob-pw").expect("bob");
    let default = before.login(None, b"old").expect("default");
    let mut bob_changed = user("bob", false, &[], &[]);
    bob_changed.password = Secret::Plain("new".into());
    // alice is now read-only: she stays logged in with the new rules.
    let after = users(AuthConfig {
        max_failures: 0,
        requirepass: Some(Secret::Plain("new".into())),
        users: vec![user("alice", true, &[], &[]), bob_changed],
    });
    let renewed = after.renewed(&alice).expect("alice unchanged password");
    assert!(!renewed.may_run(spec("SET k v")), "alice's new rules apply");
    assert!(after.renewed(&bob).is_none(), "bob's password changed");
    assert!(after.renewed(&default).is_none(), "requirepass changed");
    // Gone entirely.
    let without_alice = users(AuthConfig {
        max_failures: 0,
        requirepass: Some(Secret::Plain("old".into())),
        users: vec![],
    });
    assert!(without_alice.renewed(&alice).is_none());
    assert!(
        without_alice.renewed(&default).is_some(),
        "same requirepass"
    );
    // Turning authentication on logs out the open default user.
    let open = users(AuthConfig::default());
    let anonymous = open.anonymous().expect("open");
    assert!(open.renewed(&anonymous).is_some());
    assert!(before.renewed(&anonymous).is_none());
}
