//! Tests of AUTH, users, per-user command rules and `acl` strings in the config.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::protocol::Request;

fn request(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>(
        line.split(' ')
            .map(|a| Bytes::from(a.to_string()))
            .collect(),
    )
}

/// The user's verdict on a command line: `Ok`, or the refusal's text.
fn check(user: &User, line: &str) -> Result<(), String> {
    let request = request(line);
    let spec = crate::commands::lookup(request.args())
        .unwrap_or_else(|| panic!("{line} is a known command"));
    user.check(spec, request.args())
        .map_err(|r| String::from_utf8_lossy(&r).trim_end().to_string())
}

fn may_run(user: &User, line: &str) -> bool {
    check(user, line).is_ok()
}

fn user(name: &str, read_only: bool, allow: &[&str], deny: &[&str]) -> UserConfig {
    UserConfig {
        name: name.into(),
        password: Some(Secret::Plain(format!("{name}-pw"))),
        acl: None,
        read_only,
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
        filter_keys: false,
        limits: LimitsConfig::default(),
    }
}

fn acl_user(name: &str, acl: &str) -> UserConfig {
    UserConfig {
        password: None,
        acl: Some(AclText(acl.into())),
        ..user(name, false, &[], &[])
    }
}

fn config(requirepass: Option<&str>, users: Vec<UserConfig>) -> AuthConfig {
    AuthConfig {
        requirepass: requirepass.map(|p| Secret::Plain(p.into())),
        users,
        ..AuthConfig::default()
    }
}

fn users(config: AuthConfig) -> Users {
    Users::from_config(&config).expect("valid auth config")
}

fn login(users: &Users, name: &str, password: &str) -> Arc<User> {
    users
        .login(Some(name.as_bytes()), password.as_bytes())
        .unwrap_or_else(|_| panic!("{name} logs in"))
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
    let u = users(config(Some("s3cret"), vec![user("app", false, &[], &[])]));
    assert!(u.anonymous().is_none(), "authentication is required");
    assert_eq!(u.login(None, b"s3cret").expect("default").name, "default");
    assert_eq!(login(&u, "default", "s3cret").name, "default");
    assert_eq!(login(&u, "app", "app-pw").name, "app");
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
    let u = users(config(None, vec![user("app", false, &[], &[])]));
    assert!(u.anonymous().is_none());
    assert_eq!(
        &u.login(None, b"app-pw").expect_err("no default")[..],
        WRONGPASS
    );
}

#[test]
fn read_only_users_may_read_but_not_write() {
    let u = users(config(None, vec![user("reader", true, &[], &[])]));
    let reader = login(&u, "reader", "reader-pw");
    assert!(!reader.is_unrestricted());
    assert!(may_run(&reader, "GET k"));
    assert!(may_run(&reader, "MGET a b"));
    assert!(!may_run(&reader, "SET k v"));
    assert!(!may_run(&reader, "DEL k"));
    assert!(!may_run(&reader, "EVAL s 0"), "scripts may write");
    assert!(!may_run(&reader, "FCALL f 0"));
    assert!(
        may_run(&reader, "EVAL_RO s 0"),
        "read-only scripts are fine"
    );
    assert!(may_run(&reader, "SCRIPT EXISTS abc"));
    assert_eq!(
        check(&reader, "SET k v").expect_err("refused"),
        "-NOPERM this user has no permissions to run the 'set' command"
    );
    assert!(
        may_run(&reader, "SET k"),
        "Redis answers the argument count first"
    );
}

#[test]
fn allow_and_deny_lists_match_commands_subcommands_and_categories() {
    let u = users(config(
        None,
        vec![
            user("ops", false, &[], &["@admin", "@dangerous", "flushall"]),
            user("cache", false, &["@string", "@connection", "del"], &[]),
            user("cfg", false, &["@all"], &["config"]),
        ],
    ));
    let ops = login(&u, "ops", "ops-pw");
    assert!(may_run(&ops, "SET k v"));
    assert!(!may_run(&ops, "FLUSHALL"));
    assert!(!may_run(&ops, "KEYS *"), "KEYS is @dangerous");
    let cache = login(&u, "cache", "cache-pw");
    assert!(may_run(&cache, "GET k"));
    assert!(may_run(&cache, "DEL k"));
    assert!(may_run(&cache, "PING"));
    assert!(!may_run(&cache, "HSET h f v"), "not @string");
    let cfg = login(&u, "cfg", "cfg-pw");
    assert!(
        !may_run(&cfg, "CONFIG GET maxmemory"),
        "config covers config|get"
    );
    assert!(may_run(&cfg, "GET k"));
}

#[test]
fn acl_users_follow_redis_rules_and_defaults() {
    let u = users(config(
        None,
        vec![
            acl_user("app1", "on >pw1 ~app1:* &app1:* +@all -@dangerous"),
            acl_user("off", ">pw ~* +@all"),
            acl_user("keyless", "on nopass +@all"),
        ],
    ));
    let app1 = login(&u, "app1", "pw1");
    assert!(may_run(&app1, "SET app1:k v"));
    assert_eq!(
        check(&app1, "GET app2:k").expect_err("refused"),
        "-NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    assert_eq!(
        check(&app1, "PUBLISH app2:c m").expect_err("refused"),
        "-NOPERM this user has no permissions to access one of the channels used as arguments"
    );
    assert!(!may_run(&app1, "FLUSHALL"));
    assert_eq!(
        &u.login(Some(b"off"), b"pw").expect_err("off")[..],
        WRONGPASS
    );
    let keyless = login(&u, "keyless", "anything");
    assert!(may_run(&keyless, "PING"));
    assert!(!may_run(&keyless, "GET k"), "no keys unless granted");
}

#[test]
fn an_acl_password_and_the_password_key_both_log_in() {
    let mut both = acl_user("web", "on >inline ~* +@all");
    both.password = Some(Secret::Plain("from-file".into()));
    let u = users(config(None, vec![both]));
    login(&u, "web", "inline");
    login(&u, "web", "from-file");
}

#[test]
fn bad_auth_configs_are_refused_naming_the_key() {
    let mut mixed = acl_user("m", "on >x ~*");
    mixed.read_only = true;
    let mut no_password = user("np", false, &[], &[]);
    no_password.password = None;
    let mut burst = user("b", false, &[], &[]);
    burst.limits.per_client.burst = 5;
    let cases = [
        (
            config(Some("x"), vec![user("default", false, &[], &[])]),
            "use one of them",
        ),
        (
            config(
                None,
                vec![user("a", false, &[], &[]), user("a", false, &[], &[])],
            ),
            "`auth.users[1]`: user `a` is defined twice",
        ),
        (
            config(None, vec![user("a", false, &["@nosuch"], &[])]),
            "`auth.users[0].allow`: unknown category `@nosuch`",
        ),
        (
            config(None, vec![user("a b", false, &[], &[])]),
            "`auth.users[0].name`",
        ),
        (
            config(None, vec![mixed]),
            "`auth.users[0]` (user `m`) has both `acl` and `read_only`/`allow`/`deny`",
        ),
        (
            config(None, vec![acl_user("w", "on >x ~app:* +@bogus")]),
            "`auth.users[0]` (user `w`): `acl` rule `+@bogus`: unknown command or category",
        ),
        (
            config(None, vec![acl_user("w", "user other on >x")]),
            "`acl` starts with `user other`",
        ),
        (
            config(None, vec![no_password]),
            "(user `np`) has no password",
        ),
        (
            config(None, vec![acl_user("n", "on ~*")]),
            "(user `n`) has no password",
        ),
        (config(None, vec![burst]), "`limits.per_client.burst` needs"),
    ];
    for (config, expected) in cases {
        let message = Users::from_config(&config).expect_err("refused");
        assert!(message.contains(expected), "{message}");
    }
    // A user that is off needs no password.
    assert!(Users::from_config(&config(None, vec![acl_user("o", "~*")])).is_ok());
}

#[test]
fn commands_allowed_before_auth_are_redis_own() {
    let spec = |line: &str| crate::commands::lookup(request(line).args()).expect("known");
    for allowed in ["AUTH x", "HELLO 2", "QUIT"] {
        assert!(allowed_before_auth(spec(allowed)), "{allowed}");
    }
    for refused in ["GET k", "PING", "SELECT 0", "CLIENT SETNAME x"] {
        assert!(!allowed_before_auth(spec(refused)), "{refused}");
    }
}

#[test]
fn a_reload_keeps_a_login_only_while_the_user_and_its_passwords_stay() {
    let before = users(config(
        Some("old"),
        vec![
            user("alice", false, &[], &[]),
            user("bob", false, &[], &[]),
            acl_user("carol", "on >c1 >c2 ~* +@all"),
        ],
    ));
    let alice = login(&before, "alice", "alice-pw");
    let bob = login(&before, "bob", "bob-pw");
    let carol = login(&before, "carol", "c1");
    let default = before.login(None, b"old").expect("default");
    let mut bob_changed = user("bob", false, &[], &[]);
    bob_changed.password = Some(Secret::Plain("new".into()));
    // alice is now read-only: she stays logged in with the new rules. carol's passwords are
    // the same, in another order.
    let after = users(config(
        Some("new"),
        vec![
            user("alice", true, &[], &[]),
            bob_changed,
            acl_user("carol", "on >c2 >c1 ~a:* +@all"),
        ],
    ));
    let renewed = after.renewed(&alice).expect("alice unchanged password");
    assert!(!may_run(&renewed, "SET k v"), "alice's new rules apply");
    assert!(after.renewed(&bob).is_none(), "bob's password changed");
    assert!(after.renewed(&default).is_none(), "requirepass changed");
    let carol = after.renewed(&carol).expect("same passwords");
    assert!(!may_run(&carol, "GET b"), "carol's new key rules apply");
    // Gone entirely, or turned off.
    let without_alice = users(config(Some("old"), vec![]));
    assert!(without_alice.renewed(&alice).is_none());
    assert!(
        without_alice.renewed(&default).is_some(),
        "same requirepass"
    );
    let carol_off = users(config(None, vec![acl_user("carol", ">c1 >c2 ~* +@all")]));
    assert!(carol_off.renewed(&carol).is_none(), "off");
    // Turning authentication on logs out the open default user.
    let open = users(AuthConfig::default());
    let anonymous = open.anonymous().expect("open");
    assert!(open.renewed(&anonymous).is_some());
    assert!(before.renewed(&anonymous).is_none());
}

#[test]
fn a_users_connections_are_limited_and_given_back() {
    let mut limited = user("web", false, &[], &[]);
    limited.limits.max_connections = 2;
    let u = users(config(None, vec![limited]));
    let web = login(&u, "web", "web-pw");
    let (mut a, mut b, mut c) = (Tenancy::default(), Tenancy::default(), Tenancy::default());
    assert!(a.log_in(&web, &u, 1).is_ok());
    assert!(b.log_in(&web, &u, 2).is_ok());
    let refused = c.log_in(&web, &u, 3).expect_err("third");
    assert!(refused.starts_with(b"-ERR redcar: user 'web' has 2 connections already"));
    assert!(
        a.log_in(&web, &u, 1).is_ok(),
        "the same user again keeps its seat"
    );
    assert_eq!(u.metrics().user_of(2).as_deref(), Some("web"));
    b.log_out();
    assert_eq!(u.metrics().user_of(2), None);
    assert!(c.log_in(&web, &u, 3).is_ok(), "a seat was given back");
    let figures = u.metrics().summaries();
    assert_eq!(figures[0].user, "web");
    assert_eq!(figures[0].connections, 2);
}

#[test]
fn unauthenticated_connections_are_limited_per_address() {
    let mut c = config(Some("pw"), vec![]);
    c.max_unauthenticated_per_address = 2;
    let u = users(c);
    let first = Tenancy::connect(&u, "10.0.0.1:1000").expect("first");
    let _second = Tenancy::connect(&u, "10.0.0.1:1001").expect("second");
    let refused = Tenancy::connect(&u, "10.0.0.1:1002").err().expect("third");
    assert!(refused.starts_with(b"-ERR redcar: too many unauthenticated connections"));
    assert!(
        Tenancy::connect(&u, "10.0.0.2:1000").is_ok(),
        "another address"
    );
    assert!(
        Tenancy::connect(&u, "unix").is_ok(),
        "Unix sockets are not counted"
    );
    drop(first);
    assert!(
        Tenancy::connect(&u, "10.0.0.1:1003").is_ok(),
        "one was given back"
    );
}
