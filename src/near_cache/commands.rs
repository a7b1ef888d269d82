//! Which reads the near cache may answer: read-only commands of one key whose reply depends on
//! nothing but that key's value (no clock, no randomness, no other key).

use crate::protocol::Args;

/// Whether `command` with `args` (the command name first) is a read the cache may answer: a
/// command whose key is the first argument, with any arguments after it.
///
/// Commands with options that change the reply (`ZRANGE ... WITHSCORES`, `LPOS ... RANK`) are fine:
/// the cache stores replies by the whole argument list, not by key alone. Kept in sync with the
/// command list in docs/near-cache.md; a command is added only when its reply is a pure function of
/// the key's value and its arguments.
pub(crate) fn cacheable(command: &str, args: Args<'_>) -> bool {
    if args.len() < 2 {
        return false;
    }
    matches!(
        command,
        // strings
        "get" | "getrange" | "strlen" | "getbit" | "bitcount" | "bitpos" | "type"
        // hashes
        | "hget" | "hmget" | "hgetall" | "hexists" | "hlen" | "hkeys" | "hvals" | "hstrlen"
        // lists
        | "lindex" | "llen" | "lrange" | "lpos"
        // sets
        | "scard" | "sismember" | "smismember" | "smembers"
        // sorted sets
        | "zcard" | "zcount" | "zlexcount" | "zrange" | "zrangebyscore" | "zrangebylex"
        | "zrevrange" | "zrevrangebyscore" | "zrevrangebylex" | "zrank" | "zrevrank"
        | "zscore" | "zmscore"
    ) || (command == "exists" && args.len() == 2)
    // EXISTS of one key only: with several, the reply counts keys of other entries.
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Request;

    fn args(words: &[&str]) -> Request {
        Request::from_args(words)
    }

    #[test]
    fn only_deterministic_single_key_reads_are_cacheable() {
        assert!(cacheable("get", args(&["GET", "k"]).args()));
        assert!(cacheable("hget", args(&["HGET", "k", "f"]).args()));
        assert!(cacheable("exists", args(&["EXISTS", "k"]).args()));
        assert!(!cacheable("exists", args(&["EXISTS", "k", "j"]).args()));
        assert!(!cacheable("get", args(&["GET"]).args()));
        for never in [
            "set",
            "ttl",
            "pttl",
            "srandmember",
            "getex",
            "getdel",
            "mget",
            "sort_ro",
        ] {
            assert!(!cacheable(never, args(&[never, "k"]).args()), "{never}");
        }
    }
}
