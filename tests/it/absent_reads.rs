//! Reads with `prefer-replica` of keys a slot migration already moved: the source's replica answers
//! as if they did not exist — nil, an empty list, set, hash or map, 0, -2, `none`, an ended scan —
//! and every such answer must be confirmed by the slot's primary, which sends the read on to the
//! target with `-ASK`. Each read here is the first of its slot since the key moved, and redcar has
//! no other sign of the migration (no periodic refresh), so only the confirmation stands between
//! the client and a wrong "absent".

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, RespClient, Value};

/// One read, with `K` and `K2` for two keys of one kind in one slot.
struct Read {
    kind: Kind,
    args: &'static [&'static str],
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    String,
    List,
    Set,
    Hash,
    SortedSet,
    Stream,
}

const fn read(kind: Kind, args: &'static [&'static str]) -> Read {
    Read { kind, args }
}

/// Every kind of key, and for each the reads whose reply for an absent key differs from the
/// value's: values, counts, lengths, types, scans, reads of two keys and a script.
const READS: &[Read] = &[
    read(Kind::String, &["GET", "K"]),
    read(Kind::String, &["STRLEN", "K"]),
    read(Kind::String, &["GETRANGE", "K", "0", "4"]),
    read(Kind::String, &["EXISTS", "K"]),
    read(Kind::String, &["EXISTS", "K", "K2"]),
    read(Kind::String, &["TYPE", "K"]),
    read(Kind::String, &["TTL", "K"]),
    read(Kind::String, &["BITCOUNT", "K"]),
    read(Kind::String, &["MGET", "K", "K2"]),
    read(Kind::String, &["LCS", "K", "K2"]),
    read(Kind::String, &["OBJECT", "ENCODING", "K"]),
    read(
        Kind::String,
        &["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "K"],
    ),
    read(Kind::List, &["LRANGE", "K", "0", "-1"]),
    read(Kind::List, &["LLEN", "K"]),
    read(Kind::List, &["LINDEX", "K", "1"]),
    read(Kind::List, &["LPOS", "K", "b"]),
    read(Kind::Set, &["SMEMBERS", "K"]),
    read(Kind::Set, &["SCARD", "K"]),
    read(Kind::Set, &["SISMEMBER", "K", "2"]),
    read(Kind::Set, &["SMISMEMBER", "K", "1", "9"]),
    read(Kind::Set, &["SSCAN", "K", "0"]),
    read(Kind::Set, &["SUNION", "K", "K2"]),
    read(Kind::Set, &["SINTERCARD", "2", "K", "K2"]),
    read(Kind::Hash, &["HGETALL", "K"]),
    read(Kind::Hash, &["HLEN", "K"]),
    read(Kind::Hash, &["HGET", "K", "f1"]),
    read(Kind::Hash, &["HMGET", "K", "f1", "f2"]),
    read(Kind::Hash, &["HKEYS", "K"]),
    read(Kind::Hash, &["HEXISTS", "K", "f2"]),
    read(Kind::Hash, &["HSCAN", "K", "0"]),
    read(Kind::SortedSet, &["ZRANGE", "K", "0", "-1", "WITHSCORES"]),
    read(Kind::SortedSet, &["ZCARD", "K"]),
    read(Kind::SortedSet, &["ZSCORE", "K", "a"]),
    read(Kind::SortedSet, &["ZMSCORE", "K", "a", "b"]),
    read(Kind::SortedSet, &["ZCOUNT", "K", "-inf", "+inf"]),
    read(Kind::SortedSet, &["ZSCAN", "K", "0"]),
    read(Kind::Stream, &["XRANGE", "K", "-", "+"]),
    read(Kind::Stream, &["XLEN", "K"]),
    read(Kind::Stream, &["XREAD", "STREAMS", "K", "0"]),
];

/// Writes a value of `kind` to `key` through `client`.
fn fill(client: &mut RespClient, kind: Kind, key: &str) {
    let args: Vec<&str> = match kind {
        Kind::String => vec!["SET", key, "hello world"],
        Kind::List => vec!["RPUSH", key, "a", "b", "c"],
        Kind::Set => vec!["SADD", key, "1", "2", "3"],
        Kind::Hash => vec!["HSET", key, "f1", "v1", "f2", "v2"],
        Kind::SortedSet => vec!["ZADD", key, "1", "a", "2", "b"],
        Kind::Stream => vec!["XADD", key, "1-1", "f", "v"],
    };
    let reply = client.q(&args);
    assert!(!reply.is_error(), "{args:?}: {reply:?}");
}

/// The read's arguments for the keys of slot tag `tag`.
fn args_for(read: &Read, tag: &str) -> Vec<String> {
    read.args
        .iter()
        .map(|a| match *a {
            "K" => format!("{{{tag}}}k"),
            "K2" => format!("{{{tag}}}k2"),
            other => other.to_string(),
        })
        .collect()
}

fn client_for(redcar: &Redcar, resp3: bool) -> RespClient {
    if !resp3 {
        return redcar.client();
    }
    let mut client = redcar.client().typed();
    assert!(!client.q(&["HELLO", "3"]).is_error(), "HELLO 3");
    client
}

/// Every read of every kind of key, each the first of its slot after the key moved to the
/// migration's target, in RESP2 and RESP3: answered with the value, as before the migration.
/// With `router.replica_miss_check: false` the same reads get the replica's "absent" answer,
/// which shows each of them did reach the source's replica.
#[test]
fn the_first_replica_read_of_a_moved_key_is_never_absent_whatever_the_command() {
    let cluster = RedisCluster::start(3, 1);
    let quiet = "cluster:\n  refresh_interval: 1h\n  refresh_min_gap: 10ms\n";
    let checked_config = write_config(quiet);
    let unchecked_config = write_config(&format!("{quiet}router:\n  replica_miss_check: false\n"));
    let start = |config: &crate::redirects::TempConfig| {
        let args = [
            "--read-policy",
            "prefer-replica",
            "--config",
            config.path_str(),
        ];
        Redcar::start_with(&cluster.seeds(), &args)
    };
    let (checked, unchecked) = (start(&checked_config), start(&unchecked_config));

    // One slot per read and protocol, so each read is the first of its slot.
    let cases: Vec<(bool, &Read, String)> = [false, true]
        .into_iter()
        .flat_map(|resp3| {
            READS
                .iter()
                .enumerate()
                .map(move |(n, read)| (resp3, read, format!("absent-read-{}-{n}", u8::from(resp3))))
        })
        .collect();
    let mut writer = checked.client();
    for (_, read, tag) in &cases {
        fill(&mut writer, read.kind, &format!("{{{tag}}}k"));
        fill(&mut writer, read.kind, &format!("{{{tag}}}k2"));
    }
    assert_eq!(
        writer.q(&["WAIT", "1", "5000"]),
        Value::Int(1),
        "the replicas have them"
    );
    let mut expected = Vec::new();
    for (resp3, read, tag) in &cases {
        let mut c = client_for(&checked, *resp3);
        expected.push(
            c.cmd(&args_for(read, tag))
                .expect("read before the migration"),
        );
    }

    for (_, _, tag) in &cases {
        let key = format!("{{{tag}}}k");
        let (slot, from, to) = crate::redirects::slot_and_another_owner(&cluster, &key);
        let migration = cluster.start_migration(slot, from, to);
        cluster.migrate_all_keys(&migration);
    }

    let mut wrong = Vec::new();
    let mut unchecked_right = Vec::new();
    for ((resp3, read, tag), before) in cases.iter().zip(&expected) {
        let args = args_for(read, tag);
        let got = client_for(&checked, *resp3).cmd(&args).expect("read");
        if &got != before {
            wrong.push(format!(
                "{args:?} (RESP{}): {got:?}, before: {before:?}",
                2 + u8::from(*resp3)
            ));
        }
        let replica_said = client_for(&unchecked, *resp3).cmd(&args).expect("read");
        if &replica_said == before {
            unchecked_right.push(format!("{args:?}: {replica_said:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} reads said absent: {wrong:#?}",
        wrong.len()
    );
    assert!(
        unchecked_right.is_empty(),
        "without the check these reads were right anyway, so they did not test it: {unchecked_right:#?}"
    );
    let asks = checked.metric_sum("redcar_redirects_total{kind=\"ask\"");
    assert!(
        asks >= cases.len() as f64,
        "each confirmation was sent on with ASK ({asks})"
    );
    let checks = checked.metric_sum("redcar_replica_miss_checks_total");
    assert!(checks >= cases.len() as f64, "each was counted ({checks})");
    assert_eq!(
        unchecked.metric_sum("redcar_replica_miss_checks_total"),
        0.0
    );
}
