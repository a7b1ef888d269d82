//! Tests of the ACL's view of keys: a table of command lines, and a cross-check of every
//! command in the table against a real redis-server's `COMMAND GETKEYSANDFLAGS` (which runs
//! the very function Redis's ACL check uses).

use bytes::Bytes;

use super::*;
use crate::commands::lookup::lookup;
use crate::commands::spec::key_flags::NAMES;
use crate::commands::test_server::{Reply, TestServer};
use crate::commands::COMMANDS;
use crate::protocol::Request;

fn request(line: &str) -> Request {
    Request::from_args::<Vec<Bytes>, Bytes>(
        line.split(' ')
            .map(|t| match t {
                "\"\"" => Bytes::new(),
                t => Bytes::copy_from_slice(t.as_bytes()),
            })
            .collect(),
    )
}

fn keys_of(line: &str) -> Vec<KeyUse> {
    let request = request(line);
    let spec = lookup(request.args()).expect("known command");
    let mut out = Vec::new();
    acl_keys(spec, request.args(), &mut out);
    out
}

const R: u32 = k::RO | k::ACCESS;
const W: u32 = k::OW | k::UPDATE;
const RW: u32 = k::RW | k::ACCESS | k::UPDATE;
const MIGRATED: u32 = k::RW | k::ACCESS | k::DELETE;

#[test]
fn keys_and_what_each_command_does_with_them() {
    let cases: &[(&str, &[KeyUse])] = &[
        ("GET k", &[(1, R)]),
        ("SET k v", &[(1, W)]),
        ("SET k v EX 10 GET", &[(1, RW)]),
        (
            "MSET a 1 b 2",
            &[(1, k::OW | k::UPDATE), (3, k::OW | k::UPDATE)],
        ),
        ("DEL a b", &[(1, k::RM | k::DELETE), (2, k::RM | k::DELETE)]),
        ("EXISTS a", &[(1, k::RO)]),
        ("EVAL s 1 a", &[(3, RW)]),
        ("EVAL_RO s 1 a", &[(3, R)]),
        ("EVAL s 0", &[]),
        ("EVAL s 01 a", &[(3, 0)]),
        ("EVAL s 1x a", &[(3, 0)]),
        ("EVAL s 5 a", &[]),
        ("FCALL f 2 a b", &[(3, RW), (4, RW)]),
        ("BITFIELD k GET u8 0", &[(1, R)]),
        ("BITFIELD k GET u8 0 SET u8 0 1", &[(1, RW)]),
        ("BITFIELD k OVERFLOW WRAP GET u8", &[(1, RW)]),
        ("SORT k BY w:* GET x:* STORE d", &[(1, R), (7, W)]),
        ("SORT k STORE a STORE b", &[(1, R), (5, W)]),
        ("SORT_RO k BY w:*", &[(1, R)]),
        ("XREAD COUNT 2 STREAMS a b 0 0", &[(4, R), (5, R)]),
        ("XREAD STREAMS a", &[]),
        ("ZUNIONSTORE d 2 a b", &[(1, W), (3, R), (4, R)]),
        ("ZUNIONSTORE d 0 a", &[]),
        ("PFMERGE d", &[]),
        (
            "MIGRATE h 1 \"\" 0 5 KEYS a b",
            &[(7, MIGRATED), (8, MIGRATED)],
        ),
        ("PUBLISH ch m", &[]),
        ("SPUBLISH ch m", &[]),
    ];
    for (line, expected) in cases {
        assert_eq!(keys_of(line), expected.to_vec(), "{line}");
    }
}

#[test]
fn channels_of_the_pubsub_commands() {
    let channels = |line: &str| acl_channels(lookup(request(line).args()).expect("known"));
    assert_eq!(channels("SUBSCRIBE a"), Some(Channels::Subscribe));
    assert_eq!(channels("SSUBSCRIBE a"), Some(Channels::Subscribe));
    assert_eq!(channels("PSUBSCRIBE a*"), Some(Channels::PatternSubscribe));
    assert_eq!(channels("PUBLISH a m"), Some(Channels::Publish));
    assert_eq!(channels("SPUBLISH a m"), Some(Channels::Publish));
    assert_eq!(channels("UNSUBSCRIBE a"), None);
    assert_eq!(channels("GET a"), None);
}

#[test]
fn integers_are_read_as_redis_reads_them() {
    assert_eq!(string2ll(b"12"), Some(12));
    assert_eq!(string2ll(b"-3"), Some(-3));
    for bad in [&b"012"[..], b"+1", b" 1", b"-0", b"", b"-", b"1 "] {
        assert_eq!(string2ll(bad), None, "{bad:?}");
    }
    assert_eq!(atoi(b"  7x"), 7);
    assert_eq!(atoi(b"-2"), -2);
    assert_eq!(atoi(b"x"), 0);
}

/// Keys with the names of their flags.
type Named = Vec<(Vec<u8>, Vec<String>)>;

/// The keys and flag names the server reports; `None` when it finds no keys or refuses the
/// arguments (the arity is not checked here: `Some(None)` then).
fn server_keys(server: &mut TestServer, args: &[&[u8]]) -> Option<Option<Named>> {
    let mut cmd: Vec<&[u8]> = vec![b"COMMAND", b"GETKEYSANDFLAGS"];
    cmd.extend(args);
    match server.call(&cmd) {
        Reply::Array(Some(items)) => Some(Some(
            items
                .into_iter()
                .map(|item| match item {
                    Reply::Array(Some(pair)) => match &pair[..] {
                        [Reply::Bulk(Some(key)), Reply::Array(Some(flags))] => (
                            key.clone(),
                            flags
                                .iter()
                                .map(|f| match f {
                                    Reply::Status(s) => s.clone(),
                                    Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into(),
                                    other => panic!("flag {other:?}"),
                                })
                                .collect(),
                        ),
                        other => panic!("unexpected {other:?}"),
                    },
                    other => panic!("unexpected {other:?}"),
                })
                .collect(),
        )),
        Reply::Error(e) if e.contains("number of arguments") => None,
        Reply::Error(_) => Some(None),
        other => panic!("unexpected {other:?}"),
    }
}

/// Argument shapes tried after every command's name: enough to reach every key spec's corner
/// (numkeys, keywords, options, too few arguments).
const SHAPES: &[&str] = &[
    "k",
    "k v",
    "k1 k2 k3",
    "k v w x",
    "1 a b",
    "2 a b c d",
    "0 a",
    "d 2 a b",
    "k GET u8 0",
    "k SET u8 0 1",
    "k v GET",
    "k BY p:* STORE d",
    "STREAMS a b 0 0",
    "GROUP g c STREAMS a 0",
    "h 1 \"\" 0 5 KEYS a b",
    "k 0 0 1 km STORE d STOREDIST e",
    "s 1x a",
    "s 01 a b",
];

#[test]
fn every_command_agrees_with_command_getkeysandflags() {
    let Some(mut server) = TestServer::start() else {
        return;
    };
    let mut compared = 0;
    for spec in COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands))
    {
        if !spec.subcommands.is_empty() || !has_acl_keys(spec) {
            continue;
        }
        let name = spec.name.replace('|', " ");
        for shape in SHAPES {
            let line = format!("{name} {shape}");
            let request = request(&line);
            let args: Vec<&[u8]> = request.args().iter().collect();
            let Some(theirs) = server_keys(&mut server, &args) else {
                continue;
            };
            let mut ours = Vec::new();
            acl_keys(spec, request.args(), &mut ours);
            let ours: Named = ours
                .iter()
                .map(|&(i, flags)| {
                    let names = NAMES
                        .iter()
                        .filter(|(_, bit)| flags & bit != 0)
                        .map(|(n, _)| n.to_string())
                        .collect();
                    (request.args()[i].to_vec(), names)
                })
                .collect();
            let sorted = |mut v: Named| {
                for (_, f) in &mut v {
                    f.sort();
                }
                v
            };
            assert_eq!(sorted(ours), sorted(theirs.unwrap_or_default()), "{line}");
            compared += 1;
        }
    }
    eprintln!("compared {compared} command lines");
    assert!(compared > 300, "only {compared} lines compared");
}
