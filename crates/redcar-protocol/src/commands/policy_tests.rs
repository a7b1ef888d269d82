//! Tests for the serving policy: representative commands and whole-table invariants.

use bytes::Bytes;

use super::*;
use crate::commands::describe;
use crate::commands::lookup::lookup;
use crate::commands::COMMANDS;
use crate::protocol::Request;

fn serve_line(line: &str) -> Serve {
    let args = Request::from_args::<Vec<Bytes>, Bytes>(
        line.split(' ')
            .map(|t| Bytes::copy_from_slice(t.as_bytes()))
            .collect(),
    );
    serve(lookup(args.args()).expect("known command"))
}

const CASES: &[(&str, Serve)] = &[
    ("GET k", Serve::Keyed),
    ("EVAL s 1 k", Serve::Keyed),
    ("OBJECT ENCODING k", Serve::Keyed),
    ("MEMORY USAGE k", Serve::Keyed),
    ("XINFO STREAM k", Serve::Keyed),
    ("SORT k", Serve::Keyed),
    ("PING", Serve::Local(Local::Ping)),
    ("ECHO x", Serve::Local(Local::Echo)),
    ("QUIT", Serve::Local(Local::Quit)),
    ("SELECT 0", Serve::Local(Local::Select)),
    ("HELLO 3", Serve::Local(Local::Hello)),
    ("RESET", Serve::Local(Local::Reset)),
    ("CLIENT SETNAME x", Serve::Local(Local::ClientSetName)),
    ("CLIENT GETNAME", Serve::Local(Local::ClientGetName)),
    (
        "CLIENT SETINFO LIB-NAME x",
        Serve::Local(Local::ClientSetInfo),
    ),
    (
        "client setinfo lib-ver 1.0",
        Serve::Local(Local::ClientSetInfo),
    ),
    ("CLIENT ID", Serve::Local(Local::ClientId)),
    ("COMMAND", Serve::Local(Local::Command)),
    ("COMMAND COUNT", Serve::Local(Local::CommandCount)),
    ("COMMAND INFO get", Serve::Local(Local::CommandInfo)),
    ("COMMAND DOCS", Serve::Local(Local::CommandDocs)),
    ("COMMAND LIST", Serve::Local(Local::CommandList)),
    ("TIME", Serve::AnyNode),
    ("COMMAND GETKEYS GET k", Serve::AnyNode),
    ("AUTH pw", Serve::Local(Local::Auth)),
    ("BLPOP k 0", Serve::Blocking),
    ("BLMPOP 0 1 k LEFT", Serve::Blocking),
    ("XREAD STREAMS k 0", Serve::Keyed),
    ("XREADGROUP GROUP g c STREAMS k >", Serve::Keyed),
    ("BZPOPMIN k 0", Serve::Blocking),
    ("XADD k * f v", Serve::Keyed),
    ("MULTI", Serve::Transaction(Tx::Multi)),
    ("EXEC", Serve::Transaction(Tx::Exec)),
    ("WATCH k", Serve::Transaction(Tx::Watch)),
    (
        "SUBSCRIBE ch",
        Serve::Subscription(Sub {
            kind: SubKind::Channel,
            subscribe: true,
        }),
    ),
    (
        "SUNSUBSCRIBE ch",
        Serve::Subscription(Sub {
            kind: SubKind::Shard,
            subscribe: false,
        }),
    ),
    ("SPUBLISH ch m", Serve::Keyed),
    ("PUBLISH ch m", Serve::AnyNode),
    ("PUBSUB CHANNELS", Serve::FanOut(FanOut::PubSub)),
    ("PUBSUB SHARDNUMSUB a", Serve::FanOut(FanOut::PubSub)),
    ("CONFIG GET x", Serve::Unsupported(NODE_ADMIN)),
    ("CLUSTER SLOTS", Serve::Unsupported(NODE_ADMIN)),
    ("MIGRATE h 1 k 0 10", Serve::Unsupported(NODE_ADMIN)),
    ("MEMORY STATS", Serve::Unsupported(NODE_ADMIN)),
    ("SHUTDOWN", Serve::Unsupported(NODE_ADMIN)),
    ("KEYS *", Serve::FanOut(FanOut::Keys)),
    ("SCAN 0", Serve::FanOut(FanOut::Scan)),
    ("DBSIZE", Serve::FanOut(FanOut::DbSize)),
    ("RANDOMKEY", Serve::FanOut(FanOut::RandomKey)),
    ("FLUSHALL", Serve::FanOut(FanOut::Flush)),
    ("FLUSHDB", Serve::FanOut(FanOut::Flush)),
    ("SCRIPT LOAD s", Serve::FanOut(FanOut::ScriptLoad)),
    ("SCRIPT EXISTS s", Serve::FanOut(FanOut::ScriptExists)),
    ("SCRIPT FLUSH", Serve::FanOut(FanOut::Broadcast)),
    ("FUNCTION LOAD s", Serve::FanOut(FanOut::Broadcast)),
    ("FUNCTION DELETE lib", Serve::FanOut(FanOut::Broadcast)),
    ("FUNCTION FLUSH", Serve::FanOut(FanOut::Broadcast)),
    ("SCRIPT KILL", Serve::Unsupported(FAN_OUT)),
    ("FUNCTION LIST", Serve::Unsupported(FAN_OUT)),
    ("MGET a b", Serve::Keyed),
    ("MSETNX a 1 b 2", Serve::Keyed),
    ("INFO", Serve::FanOut(FanOut::Info)),
    ("INFO keyspace stats", Serve::FanOut(FanOut::Info)),
    ("WAIT 1 0", Serve::Wait),
    ("CLIENT LIST", Serve::Unsupported(CONNECTION_STATE)),
    ("READONLY", Serve::Unsupported(CLUSTER_STATE)),
    ("LOLWUT", Serve::Unsupported(KEYLESS)),
];

#[test]
fn representative_commands() {
    for (line, want) in CASES {
        assert_eq!(serve_line(line), *want, "{line}");
    }
}

#[test]
fn keyed_means_has_keys_and_keyless_is_never_keyed() {
    for spec in COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands))
    {
        if !spec.has_keys() {
            assert_ne!(serve(spec), Serve::Keyed, "{}", spec.name);
        }
        assert!(!describe(spec).is_empty());
    }
}

#[test]
fn only_non_atomic_multi_key_commands_are_split() {
    let split = |line: &str| {
        let args = Request::from_args::<Vec<Bytes>, Bytes>(
            line.split(' ')
                .map(|t| Bytes::copy_from_slice(t.as_bytes()))
                .collect(),
        );
        split_merge(lookup(args.args()).expect("known command"))
    };
    assert_eq!(split("MGET a b"), Some(SplitMerge::Values));
    assert_eq!(split("MSET a 1 b 2"), Some(SplitMerge::AllOk));
    for line in ["DEL a b", "UNLINK a b", "EXISTS a b", "TOUCH a b"] {
        assert_eq!(split(line), Some(SplitMerge::Sum), "{line}");
    }
    for line in [
        "MSETNX a 1 b 2",
        "RENAME a b",
        "SMOVE a b m",
        "SINTERSTORE d a b",
        "GET a",
    ] {
        assert_eq!(split(line), None, "{line}");
    }
    assert_eq!(SplitMerge::AllOk.step(), 2);
    assert_eq!(SplitMerge::Values.step(), 1);
}

#[test]
fn keyed_notes_explain_the_extra_behaviour() {
    let spec = |name: &str| lookup(Request::from_args([name]).args()).expect("known");
    assert!(describe(spec("mget")).contains("split per slot"));
    assert!(describe(spec("xread")).contains("BLOCK"));
    assert!(describe(spec("evalsha")).contains("NOSCRIPT"));
    assert_eq!(
        describe(spec("get")),
        "routed to the primary owning its keys' slot"
    );
    assert!(describe(spec("dbsize")).contains("summed"));
}

#[test]
fn the_builtin_answers_decided_once_match_deciding_each_time() {
    for spec in COMMANDS {
        assert_eq!(builtin_index(spec).map(|i| &COMMANDS[i]), Some(spec));
        assert_eq!(serve(spec), decide(spec), "{}", spec.name);
        for sub in spec.subcommands {
            assert_eq!(builtin_index(sub), None, "{}", sub.name);
            assert_eq!(serve(sub), decide(sub), "{}", sub.name);
        }
    }
    // A spec outside the table (as learned and custom commands are) with a builtin's contents
    // is decided on its own.
    let get = COMMANDS.iter().find(|s| s.name == "get").expect("get");
    let copy = CommandSpec {
        name: get.name,
        arity: get.arity,
        flags: get.flags,
        acl_categories: get.acl_categories,
        tips: get.tips,
        key_specs: get.key_specs,
        subcommands: get.subcommands,
    };
    assert_eq!(builtin_index(&copy), None);
    assert_eq!(serve(&copy), Serve::Keyed);
}
