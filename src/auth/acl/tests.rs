//! Tests of ACL rule strings: reading them, checking commands against them, and the same
//! decisions from a real redis-server's `ACL DRYRUN` with the same rules.

use bytes::Bytes;

use super::parse::parse as parse_acl;
use super::*;
use crate::commands::test_server::{Reply, TestServer};
use crate::commands::CommandTable;
use crate::protocol::Request;

fn request(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>(
        line.split(' ')
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect(),
    )
}

fn acl(text: &str) -> Acl {
    parse_acl(text).expect("valid rules").0
}

fn check(acl: &Acl, line: &str) -> Result<(), Denied> {
    let request = request(line);
    let spec = CommandTable::builtin()
        .lookup(request.args())
        .unwrap_or_else(|| panic!("{line}: known"));
    acl.check(spec, request.args())
}

#[test]
fn a_fresh_user_is_off_and_may_do_nothing() {
    let a = acl("");
    assert!(!a.enabled && !a.nopass && a.passwords.is_empty());
    assert_eq!(check(&a, "GET k"), Err(Denied::Command));
    assert_eq!(check(&a, "PING"), Err(Denied::Command));
    assert_eq!(check(&a, "AUTH x"), Ok(()), "AUTH needs no rule");
    assert!(!a.is_unrestricted());
    assert!(acl("on nopass ~* &* +@all").is_unrestricted());
    assert!(!acl("on nopass ~* +@all").is_unrestricted());
}

#[test]
fn keys_are_checked_for_what_the_command_does_with_them() {
    let a = acl("on nopass ~app:* %R~ro:* %W~wo:* +@all");
    assert_eq!(check(&a, "GET app:1"), Ok(()));
    assert_eq!(check(&a, "GET other"), Err(Denied::Key));
    assert_eq!(check(&a, "GET ro:1"), Ok(()));
    assert_eq!(check(&a, "SET ro:1 v"), Err(Denied::Key));
    assert_eq!(check(&a, "SET wo:1 v"), Ok(()));
    assert_eq!(
        check(&a, "SET wo:1 v GET"),
        Err(Denied::Key),
        "GET reads the old value"
    );
    assert_eq!(check(&a, "GET wo:1"), Err(Denied::Key));
    assert_eq!(
        check(&a, "EXISTS wo:1 ro:1"),
        Ok(()),
        "neither read nor written"
    );
    assert_eq!(check(&a, "MGET app:1 other"), Err(Denied::Key));
    assert_eq!(check(&a, "LMOVE ro:1 wo:1 LEFT LEFT"), Err(Denied::Key));
    assert_eq!(check(&a, "COPY ro:1 wo:1"), Ok(()));
    assert_eq!(
        check(&a, "EVAL s 1 ro:1"),
        Err(Denied::Key),
        "a script may write"
    );
    assert_eq!(check(&a, "EVAL_RO s 1 ro:1"), Ok(()));
    assert_eq!(check(&a, "EVAL s 0"), Ok(()));
    assert_eq!(check(&a, "SORT app:1 STORE ro:2"), Err(Denied::Key));
    assert_eq!(check(&a, "PUBLISH ch m"), Err(Denied::Channel));
    assert!(a.may_read(b"ro:1") && a.may_read(b"app:") && !a.may_read(b"wo:1"));
}

#[test]
fn channels_match_as_patterns_and_patterns_only_literally() {
    let a = acl("on nopass &news:* +@all allkeys");
    assert_eq!(check(&a, "SUBSCRIBE news:1 news:2"), Ok(()));
    assert_eq!(check(&a, "SUBSCRIBE news:1 other"), Err(Denied::Channel));
    assert_eq!(check(&a, "PSUBSCRIBE news:*"), Ok(()));
    assert_eq!(check(&a, "PSUBSCRIBE news:1*"), Err(Denied::Channel));
    assert_eq!(check(&a, "SSUBSCRIBE news:x"), Ok(()));
    assert_eq!(check(&a, "SPUBLISH other m"), Err(Denied::Channel));
    assert_eq!(check(&a, "UNSUBSCRIBE other"), Ok(()));
    assert!(a.keeps_subscriptions([&b"news:1"[..]].into_iter(), [&b"news:*"[..]].into_iter()));
    assert!(!a.keeps_subscriptions([&b"x"[..]].into_iter(), std::iter::empty()));
    assert!(!a.keeps_subscriptions(std::iter::empty(), [&b"news:1*"[..]].into_iter()));
}

#[test]
fn the_last_command_rule_that_applies_decides() {
    let a = acl("on nopass allkeys +@all -@dangerous +flushdb -config|set +select|0");
    assert_eq!(check(&a, "GET k"), Ok(()));
    assert_eq!(check(&a, "KEYS *"), Err(Denied::Command));
    assert_eq!(check(&a, "FLUSHDB"), Ok(()));
    assert_eq!(
        check(&a, "CONFIG GET x"),
        Err(Denied::Command),
        "config|get is @dangerous"
    );
    let b = acl("on nopass allkeys -@all +config|get +select|0 +client -client|kill +@hash -hset");
    assert_eq!(check(&b, "CONFIG GET x"), Ok(()));
    assert_eq!(check(&b, "CONFIG SET x y"), Err(Denied::Command));
    assert_eq!(check(&b, "SELECT 0"), Ok(()));
    assert_eq!(check(&b, "SELECT 1"), Err(Denied::Command));
    assert_eq!(check(&b, "CLIENT ID"), Ok(()));
    assert_eq!(check(&b, "CLIENT KILL x"), Err(Denied::Command));
    assert_eq!(check(&b, "HGET h f"), Ok(()));
    assert_eq!(check(&b, "HSET h f v"), Err(Denied::Command));
}

#[test]
fn selectors_each_allow_whole_commands_and_the_worst_refusal_is_reported() {
    let a = acl("on nopass ~a:* +get (~b:* +set) (%R~c:* +@read)");
    assert_eq!(check(&a, "GET a:1"), Ok(()));
    assert_eq!(check(&a, "SET b:1 v"), Ok(()));
    assert_eq!(check(&a, "GET c:1"), Ok(()));
    assert_eq!(check(&a, "SET a:1 v"), Err(Denied::Key));
    assert_eq!(check(&a, "SET c:1 v"), Err(Denied::Key));
    assert_eq!(check(&a, "DEL a:1"), Err(Denied::Command));
    let p = acl("on nopass &x +publish (~k +get)");
    assert_eq!(check(&p, "PUBLISH y m"), Err(Denied::Channel));
    assert_eq!(check(&p, "GET z"), Err(Denied::Key));
    assert_eq!(check(&p, "SET k v"), Err(Denied::Command));
}

#[test]
fn passwords_and_the_user_prefix() {
    let (a, name) = parse_acl("user web on >one >two <one #5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8").expect("valid");
    assert_eq!(name.as_deref(), Some("web"));
    assert_eq!(a.passwords.len(), 2);
    assert!(a.passwords.iter().any(|p| p.matches(b"two")));
    assert!(a.passwords.iter().any(|p| p.matches(b"password")));
    let b = acl(">x nopass");
    assert!(b.nopass && b.passwords.is_empty());
    let c = acl("nopass >x");
    assert!(!c.nopass && c.passwords.len() == 1);
    let d = acl("on >x ~a +@all reset");
    assert!(!d.enabled && d.passwords.is_empty());
    assert_eq!(check(&d, "GET a"), Err(Denied::Command));
}

#[test]
fn bad_rules_are_refused_naming_the_rule() {
    let cases = [
        ("on bogus", "bogus"),
        ("%X~a", "%X~a"),
        ("%~a", "%~a"),
        ("+nosuch", "+nosuch"),
        ("+@nosuch", "+@nosuch"),
        ("#abc", "#abc"),
        ("allkeys ~a", "~a"),
        ("&* &a", "&a"),
        ("<nothere", "<nothere"),
        ("+select|0|1", "+select|0|1"),
        ("+config|get|x", "+config|get|x"),
        ("-select|0", "-select|0"),
        ("+debug|", "+debug|"),
        ("(~a +get", "(~a +get"),
        ("(on)", "(on)"),
        ("user", "user"),
    ];
    for (text, rule) in cases {
        let error = parse_acl(text).expect_err(text);
        assert_eq!(error.rule, rule, "{text}: {error:?}");
    }
    // What Redis accepts, so must redcar.
    for text in [
        "~",
        "%R",
        "%rw~*",
        "( +get )",
        "()",
        "+@ALL +GET -Config|GET ON ALLKEYS",
    ] {
        assert!(parse_acl(text).is_ok(), "{text}");
    }
}

/// Rule strings and command lines checked here and by a real redis-server (`ACL DRYRUN`).
const USERS: &[&str] = &[
    "on nopass ~app:* %R~ro:* %W~wo:* &chan:* +@all -@dangerous",
    "on nopass ~a:* +get (~b:* +set) (%R~c:* +@read)",
    "on nopass allkeys &x +publish +subscribe (~k +get)",
    "on nopass allkeys allchannels -@all +@hash -hset +config|get +select|0",
    "on nopass ~[a-c]?:* ~x\\* %W~* +@write +@read -@scripting +eval_ro",
];

const LINES: &[&str] = &[
    "GET app:1",
    "GET other",
    "GET ro:1",
    "SET ro:1 v",
    "SET wo:1 v",
    "SET wo:1 v GET",
    "GET wo:1",
    "EXISTS wo:1",
    "MGET app:1 ro:1",
    "MSET app:1 v wo:1 v",
    "DEL wo:1",
    "INCR app:1",
    "COPY ro:1 wo:1",
    "LMOVE ro:1 wo:1 LEFT LEFT",
    "EVAL s 1 ro:1",
    "EVAL_RO s 1 ro:1",
    "EVAL s 0",
    "SORT ro:1",
    "SORT app:1 STORE wo:1",
    "KEYS *",
    "PUBLISH chan:1 m",
    "PUBLISH x m",
    "SUBSCRIBE chan:1 other",
    "PSUBSCRIBE chan:*",
    "PSUBSCRIBE chan:1*",
    "SPUBLISH chan:2 m",
    "GET a:1",
    "SET a:1 v",
    "SET b:1 v",
    "GET c:1",
    "SET c:1 v",
    "HGET b:1 f",
    "GET k",
    "SET k v",
    "GET z",
    "SUBSCRIBE x",
    "HGET h f",
    "HSET h f v",
    "CONFIG GET x",
    "CONFIG SET x y",
    "SELECT 0",
    "SELECT 1",
    "GET ab:1",
    "GET x*",
    "GET xy",
    "SET zz v",
    "BITFIELD ro:1 GET u8 0",
    "BITFIELD ro:1 SET u8 0 1",
    "XREAD STREAMS ro:1 0",
    "ZUNIONSTORE wo:d 1 ro:1",
    "PING",
    "ECHO x",
    "CLIENT ID",
    "FLUSHALL",
    "OBJECT ENCODING wo:1",
    "TOUCH ro:1",
];

fn dryrun(server: &mut TestServer, user: &str, line: &str) -> Result<(), Denied> {
    let mut cmd: Vec<&[u8]> = vec![b"ACL", b"DRYRUN", user.as_bytes()];
    cmd.extend(line.split(' ').map(str::as_bytes));
    match server.call(&cmd) {
        Reply::Status(ok) if ok == "OK" => Ok(()),
        Reply::Bulk(Some(text)) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            if text.contains("to run the") {
                Err(Denied::Command)
            } else if text.ends_with("key") {
                Err(Denied::Key)
            } else if text.ends_with("channel") {
                Err(Denied::Channel)
            } else {
                panic!("{line}: {text}")
            }
        }
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn every_decision_agrees_with_redis_acl_dryrun() {
    let Some(mut server) = TestServer::start() else {
        return;
    };
    let mut compared = 0;
    for (i, rules) in USERS.iter().enumerate() {
        let name = format!("u{i}");
        let mut setuser: Vec<&[u8]> = vec![b"ACL", b"SETUSER", name.as_bytes(), b"reset"];
        let words: Vec<&str> = rules.split(' ').collect();
        let merged = merge_for_setuser(&words);
        setuser.extend(merged.iter().map(|w| w.as_bytes()));
        assert_eq!(server.call(&setuser), Reply::Status("OK".into()), "{rules}");
        let ours = acl(rules);
        for line in LINES {
            assert_eq!(
                check(&ours, line),
                dryrun(&mut server, &name, line),
                "user `{rules}`: {line}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, USERS.len() * LINES.len());
}

/// `ACL SETUSER` takes a selector as one argument.
fn merge_for_setuser(words: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for word in words {
        if open {
            let last = out.last_mut().expect("open selector");
            last.push(' ');
            last.push_str(word);
            open = !word.ends_with(')');
        } else {
            out.push(word.to_string());
            open = word.starts_with('(') && !word.ends_with(')');
        }
    }
    out
}
