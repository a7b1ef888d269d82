//! The calls `absent_tests.rs` makes on a real redis-server to learn what each read answers for
//! absent keys: every read command of the table at least once, with the options that change the
//! shape of its reply. `K1`, `K2` stand for keys (one hash tag, so one slot); `SHA1(...)` for the
//! SHA1 of a script loaded first. A read of several keys also runs with each key absent alone,
//! the others holding a value of the [`Kind`] given for them.

/// A value a key holds while another key of the same call is absent.
#[derive(Clone, Copy, Debug)]
pub(super) enum Kind {
    String,
    Set,
    SortedSet,
    Hll,
    Stream,
}

/// One call: the table's name of the command, its arguments, and for a read of several keys the
/// kind of each key (empty: one key).
pub(super) struct Sample {
    pub(super) command: &'static str,
    pub(super) args: &'static [&'static str],
    pub(super) kinds: &'static [Kind],
}

const fn one(command: &'static str, args: &'static [&'static str]) -> Sample {
    Sample {
        command,
        args,
        kinds: &[],
    }
}

const fn two(command: &'static str, args: &'static [&'static str], kind: Kind) -> Sample {
    Sample {
        command,
        args,
        kinds: match kind {
            Kind::String => &[Kind::String, Kind::String],
            Kind::Set => &[Kind::Set, Kind::Set],
            Kind::SortedSet => &[Kind::SortedSet, Kind::SortedSet],
            Kind::Hll => &[Kind::Hll, Kind::Hll],
            Kind::Stream => &[Kind::Stream, Kind::Stream],
        },
    }
}

/// A read-only function library: `ro_get` answers `GET`, `ro_describe` a string made from what
/// it read, as a script may.
pub(super) const LIBRARY: &str = "#!lua name=redcar_absent\n\
    redis.register_function{function_name='ro_get', flags={'no-writes'}, \
      callback=function(keys, args) return redis.call('GET', keys[1]) end}\n\
    redis.register_function{function_name='ro_describe', flags={'no-writes'}, \
      callback=function(keys, args) return 'type: ' .. redis.call('TYPE', keys[1]).ok end}";

/// Scripts for `EVAL_RO`/`EVALSHA_RO`, loaded before the calls.
pub(super) const SCRIPTS: [&str; 2] = [
    "return redis.call('GET', KEYS[1])",
    "return 'type: ' .. redis.call('TYPE', KEYS[1]).ok",
];

use Kind::*;

/// Every call; `absent_tests.rs` fails when a read command of the table has none.
pub(super) const SAMPLES: &[Sample] = &[
    one("bitcount", &["BITCOUNT", "K1"]),
    one("bitcount", &["BITCOUNT", "K1", "0", "-1", "BIT"]),
    one(
        "bitfield_ro",
        &["BITFIELD_RO", "K1", "GET", "u8", "0", "GET", "i4", "8"],
    ),
    one("bitpos", &["BITPOS", "K1", "1"]),
    one("bitpos", &["BITPOS", "K1", "0"]),
    one("bitpos", &["BITPOS", "K1", "0", "2", "-1", "BIT"]),
    one("dump", &["DUMP", "K1"]),
    one(
        "eval_ro",
        &["EVAL_RO", "return redis.call('GET', KEYS[1])", "1", "K1"],
    ),
    one(
        "eval_ro",
        &[
            "EVAL_RO",
            "return 'type: ' .. redis.call('TYPE', KEYS[1]).ok",
            "1",
            "K1",
        ],
    ),
    one(
        "evalsha_ro",
        &[
            "EVALSHA_RO",
            "SHA1(return redis.call('GET', KEYS[1]))",
            "1",
            "K1",
        ],
    ),
    one(
        "evalsha_ro",
        &[
            "EVALSHA_RO",
            "SHA1(return 'type: ' .. redis.call('TYPE', KEYS[1]).ok)",
            "1",
            "K1",
        ],
    ),
    one("exists", &["EXISTS", "K1"]),
    two("exists", &["EXISTS", "K1", "K2"], String),
    one("expiretime", &["EXPIRETIME", "K1"]),
    one("fcall_ro", &["FCALL_RO", "ro_get", "1", "K1"]),
    one("fcall_ro", &["FCALL_RO", "ro_describe", "1", "K1"]),
    one("geodist", &["GEODIST", "K1", "a", "b", "km"]),
    one("geohash", &["GEOHASH", "K1", "a", "b"]),
    one("geopos", &["GEOPOS", "K1", "a", "b"]),
    one(
        "georadius_ro",
        &[
            "GEORADIUS_RO",
            "K1",
            "0",
            "0",
            "10",
            "km",
            "WITHCOORD",
            "WITHDIST",
        ],
    ),
    one(
        "georadiusbymember_ro",
        &["GEORADIUSBYMEMBER_RO", "K1", "a", "10", "km"],
    ),
    one(
        "geosearch",
        &[
            "GEOSEARCH",
            "K1",
            "FROMLONLAT",
            "0",
            "0",
            "BYRADIUS",
            "10",
            "km",
        ],
    ),
    one(
        "geosearch",
        &[
            "GEOSEARCH",
            "K1",
            "FROMMEMBER",
            "a",
            "BYBOX",
            "1",
            "1",
            "km",
            "WITHHASH",
        ],
    ),
    one("get", &["GET", "K1"]),
    one("getbit", &["GETBIT", "K1", "7"]),
    one("getrange", &["GETRANGE", "K1", "0", "-1"]),
    one("hexists", &["HEXISTS", "K1", "f"]),
    one("hget", &["HGET", "K1", "f"]),
    one("hgetall", &["HGETALL", "K1"]),
    one("hkeys", &["HKEYS", "K1"]),
    one("hlen", &["HLEN", "K1"]),
    one("hmget", &["HMGET", "K1", "f", "g"]),
    one("hrandfield", &["HRANDFIELD", "K1"]),
    one("hrandfield", &["HRANDFIELD", "K1", "-3", "WITHVALUES"]),
    one("hscan", &["HSCAN", "K1", "0", "MATCH", "*", "COUNT", "10"]),
    one("hstrlen", &["HSTRLEN", "K1", "f"]),
    one("hvals", &["HVALS", "K1"]),
    two("lcs", &["LCS", "K1", "K2"], String),
    two("lcs", &["LCS", "K1", "K2", "LEN"], String),
    two(
        "lcs",
        &["LCS", "K1", "K2", "IDX", "MINMATCHLEN", "1", "WITHMATCHLEN"],
        String,
    ),
    one("lindex", &["LINDEX", "K1", "0"]),
    one("llen", &["LLEN", "K1"]),
    one("lpos", &["LPOS", "K1", "a"]),
    one("lpos", &["LPOS", "K1", "a", "RANK", "1", "COUNT", "0"]),
    one("lrange", &["LRANGE", "K1", "0", "-1"]),
    one("memory|usage", &["MEMORY", "USAGE", "K1", "SAMPLES", "0"]),
    one("mget", &["MGET", "K1"]),
    two("mget", &["MGET", "K1", "K2"], String),
    one("object|encoding", &["OBJECT", "ENCODING", "K1"]),
    one("object|freq", &["OBJECT", "FREQ", "K1"]),
    one("object|idletime", &["OBJECT", "IDLETIME", "K1"]),
    one("object|refcount", &["OBJECT", "REFCOUNT", "K1"]),
    one("pexpiretime", &["PEXPIRETIME", "K1"]),
    one("pfcount", &["PFCOUNT", "K1"]),
    two("pfcount", &["PFCOUNT", "K1", "K2"], Hll),
    one("pttl", &["PTTL", "K1"]),
    one("scard", &["SCARD", "K1"]),
    two("sdiff", &["SDIFF", "K1", "K2"], Set),
    two("sinter", &["SINTER", "K1", "K2"], Set),
    two(
        "sintercard",
        &["SINTERCARD", "2", "K1", "K2", "LIMIT", "5"],
        Set,
    ),
    one("sismember", &["SISMEMBER", "K1", "a"]),
    one("smembers", &["SMEMBERS", "K1"]),
    one("smismember", &["SMISMEMBER", "K1", "a", "b"]),
    one("sort_ro", &["SORT_RO", "K1"]),
    one(
        "sort_ro",
        &["SORT_RO", "K1", "LIMIT", "0", "5", "ALPHA", "DESC"],
    ),
    one("srandmember", &["SRANDMEMBER", "K1"]),
    one("srandmember", &["SRANDMEMBER", "K1", "-2"]),
    one("sscan", &["SSCAN", "K1", "0"]),
    one("strlen", &["STRLEN", "K1"]),
    one("substr", &["SUBSTR", "K1", "0", "-1"]),
    two("sunion", &["SUNION", "K1", "K2"], Set),
    one("touch", &["TOUCH", "K1"]),
    two("touch", &["TOUCH", "K1", "K2"], String),
    one("ttl", &["TTL", "K1"]),
    one("type", &["TYPE", "K1"]),
    one("xinfo|consumers", &["XINFO", "CONSUMERS", "K1", "g"]),
    one("xinfo|groups", &["XINFO", "GROUPS", "K1"]),
    one("xinfo|stream", &["XINFO", "STREAM", "K1"]),
    one(
        "xinfo|stream",
        &["XINFO", "STREAM", "K1", "FULL", "COUNT", "5"],
    ),
    one("xlen", &["XLEN", "K1"]),
    one("xpending", &["XPENDING", "K1", "g"]),
    one(
        "xpending",
        &["XPENDING", "K1", "g", "IDLE", "0", "-", "+", "10", "c"],
    ),
    one("xrange", &["XRANGE", "K1", "-", "+", "COUNT", "10"]),
    two(
        "xread",
        &["XREAD", "COUNT", "10", "STREAMS", "K1", "K2", "0", "0"],
        Stream,
    ),
    one("xrevrange", &["XREVRANGE", "K1", "+", "-"]),
    one("zcard", &["ZCARD", "K1"]),
    one("zcount", &["ZCOUNT", "K1", "-inf", "+inf"]),
    two(
        "zdiff",
        &["ZDIFF", "2", "K1", "K2", "WITHSCORES"],
        SortedSet,
    ),
    two(
        "zinter",
        &["ZINTER", "2", "K1", "K2", "WITHSCORES"],
        SortedSet,
    ),
    two("zintercard", &["ZINTERCARD", "2", "K1", "K2"], SortedSet),
    one("zlexcount", &["ZLEXCOUNT", "K1", "-", "+"]),
    one("zmscore", &["ZMSCORE", "K1", "a", "b"]),
    one("zrandmember", &["ZRANDMEMBER", "K1"]),
    one("zrandmember", &["ZRANDMEMBER", "K1", "2", "WITHSCORES"]),
    one("zrange", &["ZRANGE", "K1", "0", "-1", "WITHSCORES"]),
    one(
        "zrange",
        &["ZRANGE", "K1", "(1", "+inf", "BYSCORE", "LIMIT", "0", "3"],
    ),
    one("zrangebylex", &["ZRANGEBYLEX", "K1", "-", "+"]),
    one(
        "zrangebyscore",
        &["ZRANGEBYSCORE", "K1", "-inf", "+inf", "WITHSCORES"],
    ),
    one("zrank", &["ZRANK", "K1", "a"]),
    one("zrevrange", &["ZREVRANGE", "K1", "0", "-1"]),
    one("zrevrangebylex", &["ZREVRANGEBYLEX", "K1", "+", "-"]),
    one(
        "zrevrangebyscore",
        &["ZREVRANGEBYSCORE", "K1", "+inf", "-inf"],
    ),
    one("zrevrank", &["ZREVRANK", "K1", "a"]),
    one("zscan", &["ZSCAN", "K1", "0"]),
    one("zscore", &["ZSCORE", "K1", "a"]),
    two("zunion", &["ZUNION", "2", "K1", "K2"], SortedSet),
];
