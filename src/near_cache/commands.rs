//! Which reads the near cache may answer: read-only commands of one key whose reply depends on
//! nothing but that key's value (no clock, no randomness, no other key).

use bytes::Bytes;

/// Whether `command` with `args` (the command name first) is a read the cache may answer: a
/// command whose key is the first argument, with any arguments after it.
pub(crate) fn cacheable(command: &str, args: &[Bytes]) -> bool {
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

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn only_deterministic_single_key_reads_are_cacheable() {
        assert!(cacheable("get", &args(&["GET", "k"])));
        assert!(cacheable("hget", &args(&["HGET", "k", "f"])));
        assert!(cacheable("exists", &args(&["EXISTS", "k"])));
        assert!(!cacheable("exists", &args(&["EXISTS", "k", "j"])));
        assert!(!cacheable("get", &args(&["GET"])));
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
            assert!(!cacheable(never, &args(&[never, "k"])), "{never}");
        }
    }
}
