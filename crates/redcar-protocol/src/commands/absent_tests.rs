//! The classes on literal replies, and the generated table against a real redis-server: every
//! read command of the table run on absent keys (`absent_samples.rs`), in RESP2 and RESP3.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::class::*;
use super::*;
use crate::commands::absent_samples::{Kind, Sample, LIBRARY, SAMPLES, SCRIPTS};
use crate::commands::spec::flags;
use crate::commands::test_server::TestServer;
use crate::commands::COMMANDS;

fn request(args: &[&str]) -> Bytes {
    Request::from_args(args).raw().clone()
}

fn absent(args: &[&str], reply: &[u8]) -> bool {
    means_absent(&request(args), reply)
}

#[test]
fn what_a_missing_key_answers_is_confirmed_and_values_are_not() {
    assert!(absent(&["GET", "k"], b"$-1\r\n") && absent(&["GET", "k"], b"_\r\n"));
    assert!(!absent(&["GET", "k"], b"$3\r\nabc\r\n"));
    assert!(absent(&["lrange", "k", "0", "-1"], b"*0\r\n"));
    assert!(!absent(&["LRANGE", "k", "0", "-1"], b"*1\r\n$1\r\na\r\n"));
    assert!(absent(&["HGETALL", "k"], b"%0\r\n") && absent(&["SMEMBERS", "k"], b"~0\r\n"));
    assert!(absent(&["SCARD", "k"], b":0\r\n") && !absent(&["SCARD", "k"], b":3\r\n"));
    assert!(absent(&["TTL", "k"], b":-2\r\n") && !absent(&["TTL", "k"], b":-1\r\n"));
    assert!(absent(&["TYPE", "k"], b"+none\r\n") && !absent(&["TYPE", "k"], b"+list\r\n"));
    assert!(absent(&["SSCAN", "k", "0"], b"*2\r\n$1\r\n0\r\n*0\r\n"));
    assert!(absent(&["XINFO", "STREAM", "k"], b"-ERR no such key\r\n"));
    // A class another command has does not count: a GET never answers 0, TTL never -2 for GET.
    assert!(!absent(&["GET", "k"], b":0\r\n") && !absent(&["STRLEN", "k"], b"$-1\r\n"));
    assert!(!absent(&["GET", "k"], b"-WRONGTYPE Operation\r\n"));
}

#[test]
fn a_read_of_several_keys_is_confirmed_when_one_of_them_is_missing() {
    let mget = ["MGET", "{t}a", "{t}b", "{t}c"];
    assert!(absent(&mget, b"*3\r\n$1\r\nx\r\n$-1\r\n$1\r\nz\r\n"));
    assert!(!absent(&mget, b"*3\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nz\r\n"));
    // HMGET's nil is a field, not a key: only all-nil (the key itself missing) counts.
    let hmget = ["HMGET", "k", "f", "g"];
    assert!(!absent(&hmget, b"*2\r\n$1\r\nx\r\n$-1\r\n"));
    assert!(absent(&hmget, b"*2\r\n$-1\r\n$-1\r\n"));
    assert!(absent(&["EXISTS", "{t}a", "{t}b"], b":1\r\n"));
    assert!(!absent(&["EXISTS", "{t}a", "{t}b"], b":2\r\n"));
    assert!(!absent(&["EXISTS", "{t}a"], b":1\r\n"));
    // Whatever SUNION of several keys answers may lack a moved key's members; of one key, only
    // an empty set says it is missing.
    assert!(absent(&["SUNION", "{t}a", "{t}b"], b"*1\r\n$1\r\nx\r\n"));
    assert!(!absent(&["SUNION", "{t}a"], b"*1\r\n$1\r\nx\r\n"));
    // ZUNION names its keys after a count: one key, although three arguments follow the name.
    assert!(!absent(&["ZUNION", "1", "{t}a"], b"*1\r\n$1\r\nx\r\n"));
    assert!(absent(
        &["ZUNION", "2", "{t}a", "{t}b"],
        b"*1\r\n$1\r\nx\r\n"
    ));
    assert!(absent(
        &["XREAD", "STREAMS", "{t}a", "{t}b", "0", "0"],
        b"*1\r\n*0\r\n"
    ));
    assert!(!absent(&["XREAD", "STREAMS", "{t}a", "0"], b"*1\r\n*0\r\n"));
}

#[test]
fn scripts_are_opaque_and_unknown_commands_get_the_common_shapes() {
    let eval = ["EVAL_RO", "return 1", "1", "k"];
    assert!(absent(&eval, b"$5\r\nhello\r\n") && absent(&["fcall_ro", "f", "1", "k"], b"+OK\r\n"));
    assert!(absent(&eval, b":7\r\n") && absent(&eval, b"*1\r\n:1\r\n"));
    assert!(absent(&["MODULE.READ", "k"], b"*0\r\n") && absent(&["MODULE.READ", "k"], b":0\r\n"));
    assert!(!absent(&["MODULE.READ", "k"], b":-2\r\n"));
}

#[test]
fn the_cheap_test_lets_through_every_class_and_stops_strings() {
    for reply in [
        &b"$-1\r\n"[..],
        b"_\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"%0\r\n",
        b"~0\r\n",
        b"$0\r\n\r\n",
        b":0\r\n",
        b":-2\r\n",
        b"+none\r\n",
        b"-ERR no such key\r\n",
        b"*2\r\n$-1\r\n$-1\r\n",
    ] {
        assert!(may_be_absent(reply), "{}", reply.escape_ascii());
        assert!(class_of(reply, 1).is_some(), "{}", reply.escape_ascii());
    }
    for reply in [&b"$1\r\nx\r\n"[..], b"+OK\r\n", b",1.5\r\n", b"#t\r\n"] {
        assert!(!may_be_absent(reply), "{}", reply.escape_ascii());
        assert_eq!(class_of(reply, 1), None);
    }
}

#[test]
fn every_class_of_a_reply_is_matched_by_that_class() {
    for (reply, keys) in [
        (&b"*3\r\n$1\r\na\r\n$-1\r\n_\r\n"[..], 3),
        (b":2\r\n", 3),
        (b"*2\r\n:0\r\n:0\r\n", 1),
        (b"%2\r\n$7\r\nmatches\r\n*0\r\n$3\r\nlen\r\n:0\r\n", 2),
    ] {
        let class = class_of(reply, keys).expect("a class");
        assert!(
            Absence(class).matches(reply, keys, || keys),
            "{}",
            reply.escape_ascii()
        );
    }
}

/// Every command a read policy may send to a replica (read-only, with keys) has samples and a
/// row in the table; a command added to the command table fails here until it has both.
#[test]
fn every_read_command_of_the_table_has_samples_and_a_row() {
    let reads = COMMANDS
        .iter()
        .flat_map(|spec| std::iter::once(spec).chain(spec.subcommands))
        .filter(|spec| spec.has_flag(flags::READONLY) && spec.has_keys());
    for spec in reads {
        assert!(
            SAMPLES.iter().any(|s| s.command == spec.name),
            "no sample in absent_samples.rs runs {}",
            spec.name
        );
        assert!(
            super::super::absent_table::ABSENT
                .iter()
                .any(|(name, _)| *name == spec.name),
            "absent_table.rs has no row for {} (REDCAR_WRITE_ABSENT=1 cargo test -p redcar-protocol --lib commands::absent)",
            spec.name
        );
    }
}

/// The checked-in table is what a real node answers: each sample's replies, with its keys absent
/// (and one at a time for reads of several keys), classified; and each reply is confirmed by
/// [`means_absent`] for the sample's own request.
#[test]
fn the_table_is_what_a_real_node_answers_for_absent_keys() {
    let Some(mut server) = TestServer::start() else {
        return;
    };
    let (derived, seen) = derive(&mut server);
    let version = redis_version(&mut server);
    let rendered = render(&derived, &version);
    if std::env::var_os("REDCAR_WRITE_ABSENT").is_some() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/commands/absent_table.rs");
        std::fs::write(path, &rendered).expect("write absent_table.rs");
    }
    let checked_in: BTreeMap<&str, u16> =
        super::super::absent_table::ABSENT.iter().copied().collect();
    assert!(
        checked_in == derived,
        "absent_table.rs is not what redis-server {version} answers; rerun with \
         REDCAR_WRITE_ABSENT=1 and review the diff:\n{rendered}"
    );
    for (args, reply) in &seen {
        assert!(
            means_absent(
                &request(&args.iter().map(String::as_str).collect::<Vec<_>>()),
                reply
            ),
            "{args:?} answered {} for absent keys, which is not confirmed",
            reply.escape_ascii()
        );
    }
}

/// Each command's classes, by the table's name.
type Table = BTreeMap<&'static str, u16>;

/// A call's arguments and the reply it got.
type Seen = Vec<(Vec<String>, Vec<u8>)>;

/// Each sample's replies in both protocols, classified: the table it makes, and every
/// (request, reply) seen.
fn derive(server: &mut TestServer) -> (Table, Seen) {
    let function = ["FUNCTION", "LOAD", "REPLACE", LIBRARY];
    assert!(
        server.call_raw(&function).starts_with(b"$"),
        "FUNCTION LOAD"
    );
    for script in SCRIPTS {
        server.call_raw(&["SCRIPT", "LOAD", script]);
    }
    let mut derived = BTreeMap::new();
    let mut seen = Vec::new();
    for protocol in ["2", "3"] {
        server.call_raw(&["HELLO", protocol]);
        for sample in SAMPLES {
            let args = expand(sample.args);
            let keys = sample.kinds.len().max(1);
            // All keys absent, then each absent alone (the others hold values).
            for absent in std::iter::once(None).chain((0..sample.kinds.len()).map(Some)) {
                server.call_raw(&["FLUSHALL"]);
                for (n, kind) in sample.kinds.iter().enumerate() {
                    if absent.is_some_and(|absent| absent != n) {
                        fill(server, &key(n), *kind);
                    }
                }
                let reply = server.call_raw(&args.iter().map(String::as_str).collect::<Vec<_>>());
                let class = match (class_of(&reply, keys), absent) {
                    (Some(class), _) => class,
                    (None, None) => OPAQUE,
                    (None, Some(_)) => OPAQUE_WITH_KEYS,
                };
                *derived.entry(sample.command).or_insert(0) |= class;
                seen.push((args.clone(), reply));
            }
        }
    }
    (derived, seen)
}

fn key(n: usize) -> String {
    format!("{{absent}}k{}", n + 1)
}

/// A sample's arguments with its keys and SHA1s filled in.
fn expand(args: &[&str]) -> Vec<String> {
    args.iter()
        .map(|arg| match *arg {
            "K1" => key(0),
            "K2" => key(1),
            _ => match arg.strip_prefix("SHA1(").and_then(|a| a.strip_suffix(')')) {
                Some(body) => {
                    use sha1::Digest;
                    format!("{:x}", sha1::Sha1::digest(body))
                }
                None => (*arg).to_string(),
            },
        })
        .collect()
}

fn fill(server: &mut TestServer, key: &str, kind: Kind) {
    let args: &[&str] = match kind {
        Kind::String => &["SET", key, "abc"],
        Kind::Set => &["SADD", key, "a", "b"],
        Kind::SortedSet => &["ZADD", key, "1", "a", "2", "b"],
        Kind::Hll => &["PFADD", key, "a", "b"],
        Kind::Stream => &["XADD", key, "1-1", "f", "v"],
    };
    let reply = server.call_raw(args);
    assert!(
        !reply.starts_with(b"-"),
        "{args:?}: {}",
        reply.escape_ascii()
    );
}

fn redis_version(server: &mut TestServer) -> String {
    let info = server.call_raw(&["INFO", "server"]);
    let info = String::from_utf8_lossy(&info);
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("unknown")
        .trim()
        .to_string()
}

fn render(derived: &BTreeMap<&str, u16>, version: &str) -> String {
    let mut out = format!(
        "//! What each read command answers for absent keys, as `absent::class` bits: generated by\n\
         //! crates/redcar-protocol/src/commands/absent_tests.rs from redis-server {version} — do not edit.\n\
         //!\n\
         //! Regenerate with `REDCAR_WRITE_ABSENT=1 cargo test -p redcar-protocol --lib commands::absent`.\n\n\
         use super::absent_class::*;\n\n"
    );
    let opaque: Vec<String> = derived
        .iter()
        .filter(|(_, bits)| *bits & OPAQUE != 0)
        .map(|(name, _)| format!("{name:?}"))
        .collect();
    out.push_str(&format!(
        "/// The commands whose every reply counts (`OPAQUE`), known by name before any lookup.\n\
         pub(super) static OPAQUE_COMMANDS: &[&str] = &[{}];\n\n\
         /// (command, classes), sorted by command.\n\
         pub(super) static ABSENT: &[(&str, u16)] = &[\n",
        opaque.join(", ")
    ));
    for (name, bits) in derived {
        let names: Vec<&str> = NAMES
            .iter()
            .filter(|(bit, _)| bits & bit != 0)
            .map(|(_, name)| *name)
            .collect();
        out.push_str(&format!("    ({name:?}, {}),\n", names.join(" | ")));
    }
    out.push_str("];\n");
    out
}

#[test]
fn samples_name_commands_of_the_table() {
    for Sample { command, args, .. } in SAMPLES {
        let spec = crate::commands::lookup(Request::from_args(*args).args()).expect("known");
        assert_eq!(spec.name, *command, "{args:?}");
    }
}
