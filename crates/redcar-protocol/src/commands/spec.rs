//! The data model of one command: arity, flags, ACL categories, tips and Redis 7 key specs.
//!
//! Everything is `&'static` so the generated builtin table is a plain static and
//! runtime-learned specs (module commands) can be leaked once and shared freely.

/// One command (or subcommand) as Redis describes it in `COMMAND INFO`.
#[derive(Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// Lowercase, as Redis reports it: `"get"`, subcommands as `"client|setname"`.
    pub name: &'static str,
    /// Redis arity: positive = exact argument count (incl. the name), negative = at least `-arity`.
    pub arity: i32,
    /// Bit set of [`flags`] constants.
    pub flags: u32,
    /// Bit set of [`acl`] constants.
    pub acl_categories: u32,
    /// Command tips, e.g. `"request_policy:all_shards"`, `"nondeterministic_output"`.
    pub(crate) tips: &'static [&'static str],
    /// Redis 7 key specifications, in Redis order.
    pub(crate) key_specs: &'static [KeySpec],
    /// Subcommands sorted by name; empty for plain commands.
    pub subcommands: &'static [CommandSpec],
}

/// One Redis 7 key specification: where to start looking and how to find keys from there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeySpec {
    /// Bit set of [`key_flags`] constants.
    pub(crate) flags: u32,
    /// Where the search for this spec's keys starts.
    pub(crate) begin: BeginSearch,
    /// How keys are found from there.
    pub(crate) find: FindKeys,
}

/// Where the search for keys starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BeginSearch {
    /// Keys start at this fixed argument index.
    Index(i32),
    /// Keys start right after `keyword`; scanning starts at `start_from`
    /// (negative: counted from the end, scanning backwards).
    Keyword {
        /// The word after which the keys start (`STREAMS` for XREAD), matched without regard to
        /// case.
        keyword: &'static str,
        /// The argument index the search for `keyword` starts at (negative: from the end,
        /// backwards).
        start_from: i32,
    },
    /// Redis cannot describe it; keys must come from elsewhere.
    Unknown,
}

/// How keys are found once the search has begun.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FindKeys {
    /// `last_key` relative to the begin index (negative: from the end); every `step`-th
    /// argument; with `last_key == -1`, `limit > 1` keeps only `1/limit` of the remaining args.
    Range {
        /// The last key's index relative to the begin index; negative counts from the end (-1: the
        /// last argument).
        last_key: i32,
        /// Distance between consecutive keys (2 for `key value key value`).
        step: i32,
        /// With `last_key` -1 and a value above 1, only the first `1/limit` of the remaining
        /// arguments are keys.
        limit: i32,
    },
    /// The argument at `begin + key_num_idx` holds the key count; keys start at
    /// `begin + first_key`, every `step`-th argument.
    KeyNum {
        /// Offset from the begin index of the argument holding the number of keys.
        key_num_idx: i32,
        /// Offset from the begin index of the first key.
        first_key: i32,
        /// Distance between consecutive keys.
        step: i32,
    },
    /// Redis cannot describe it.
    Unknown,
}

impl CommandSpec {
    /// True when every bit of `flag` (a [`flags`] constant) is set.
    #[inline]
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag == flag
    }

    /// True when the command may take keys: any key spec or the movable-keys flag.
    #[inline]
    pub fn has_keys(&self) -> bool {
        !self.key_specs.is_empty() || self.has_flag(flags::MOVABLE_KEYS)
    }

    /// The container part of the name (`"client"` for `"client|setname"`).
    #[inline]
    pub fn container(&self) -> &'static str {
        match self.name.split_once('|') {
            Some((container, _)) => container,
            None => self.name,
        }
    }
}

/// A name/bit pair: lets learning and docs translate Redis' words both ways.
pub(crate) type Named = (&'static str, u32);

/// Command flags, as reported in `COMMAND INFO` (names in `flags::NAMES`).
pub mod flags {
    /// `write`: the command may modify data.
    pub const WRITE: u32 = 1 << 0;
    /// `readonly`: the command only reads data (a replica may serve it).
    pub const READONLY: u32 = 1 << 1;
    /// `denyoom`: refused by a node over its `maxmemory`.
    pub(crate) const DENYOOM: u32 = 1 << 2;
    /// `module`: the command comes from a loaded module.
    pub const MODULE: u32 = 1 << 3;
    /// `admin`: changes or reveals the server's configuration; redcar refuses these unless
    /// `router.allow_node_admin` lists them.
    pub(crate) const ADMIN: u32 = 1 << 4;
    /// `pubsub`: the command belongs to publish/subscribe.
    pub const PUBSUB: u32 = 1 << 5;
    /// `noscript`: the command is refused inside a script.
    pub const NOSCRIPT: u32 = 1 << 6;
    /// `blocking`: the command may block its connection until data arrives or a timeout.
    pub const BLOCKING: u32 = 1 << 7;
    /// `loading`: allowed while the node is still loading its dataset.
    pub(crate) const LOADING: u32 = 1 << 8;
    /// `stale`: allowed on a replica whose link to its primary is down.
    pub(crate) const STALE: u32 = 1 << 9;
    /// `skip_monitor`: not shown by MONITOR.
    pub(crate) const SKIP_MONITOR: u32 = 1 << 10;
    /// `skip_slowlog`: not recorded in the slow log.
    pub(crate) const SKIP_SLOWLOG: u32 = 1 << 11;
    /// `asking`: allowed on a slot being imported, after `ASKING`.
    pub(crate) const ASKING: u32 = 1 << 12;
    /// `fast`: constant or logarithmic time; never delays the server noticeably.
    pub(crate) const FAST: u32 = 1 << 13;
    /// `no_auth`: the command runs before the connection has authenticated.
    pub const NO_AUTH: u32 = 1 << 14;
    /// `may_replicate`: may produce replication traffic without being a write.
    const MAY_REPLICATE: u32 = 1 << 15;
    /// `no_mandatory_keys`: takes keys, but none is required (some forms run without any).
    pub(crate) const NO_MANDATORY_KEYS: u32 = 1 << 16;
    /// `no_multi`: refused inside MULTI.
    pub(crate) const NO_MULTI: u32 = 1 << 17;
    /// `movablekeys`: the key positions depend on the arguments, not only on fixed indices.
    pub const MOVABLE_KEYS: u32 = 1 << 18;
    /// `allow_busy`: allowed while a script or function is running too long.
    pub(crate) const ALLOW_BUSY: u32 = 1 << 19;
    /// `no_async_loading`: refused while the node loads its dataset asynchronously.
    pub(crate) const NO_ASYNC_LOADING: u32 = 1 << 20;
    /// `sentinel`: available on a Sentinel too.
    pub(crate) const SENTINEL: u32 = 1 << 21;
    /// `only_sentinel`: available only on a Sentinel.
    const ONLY_SENTINEL: u32 = 1 << 22;

    /// Redis' spelling of each flag, in bit order.
    pub(crate) const NAMES: &[super::Named] = &[
        ("write", WRITE),
        ("readonly", READONLY),
        ("denyoom", DENYOOM),
        ("module", MODULE),
        ("admin", ADMIN),
        ("pubsub", PUBSUB),
        ("noscript", NOSCRIPT),
        ("blocking", BLOCKING),
        ("loading", LOADING),
        ("stale", STALE),
        ("skip_monitor", SKIP_MONITOR),
        ("skip_slowlog", SKIP_SLOWLOG),
        ("asking", ASKING),
        ("fast", FAST),
        ("no_auth", NO_AUTH),
        ("may_replicate", MAY_REPLICATE),
        ("no_mandatory_keys", NO_MANDATORY_KEYS),
        ("no_multi", NO_MULTI),
        ("movablekeys", MOVABLE_KEYS),
        ("allow_busy", ALLOW_BUSY),
        ("no_async_loading", NO_ASYNC_LOADING),
        ("sentinel", SENTINEL),
        ("only_sentinel", ONLY_SENTINEL),
    ];
}

/// ACL categories (`@read`, `@write`, ...); names in [`acl::NAMES`] without the `@`.
pub mod acl {
    /// `@keyspace`: works on keys as such, whatever their type (DEL, EXPIRE, RENAME).
    pub(crate) const KEYSPACE: u32 = 1 << 0;
    /// `@read`: reads data.
    pub(crate) const READ: u32 = 1 << 1;
    /// `@write`: commands that may modify data.
    pub const WRITE: u32 = 1 << 2;
    /// `@set`: set commands.
    pub(crate) const SET: u32 = 1 << 3;
    /// `@sortedset`: sorted-set commands.
    pub(crate) const SORTEDSET: u32 = 1 << 4;
    /// `@list`: list commands.
    pub(crate) const LIST: u32 = 1 << 5;
    /// `@hash`: hash commands.
    pub(crate) const HASH: u32 = 1 << 6;
    /// `@string`: string commands.
    pub(crate) const STRING: u32 = 1 << 7;
    /// `@bitmap`: bitmap commands.
    pub(crate) const BITMAP: u32 = 1 << 8;
    /// `@hyperloglog`: HyperLogLog commands.
    pub(crate) const HYPERLOGLOG: u32 = 1 << 9;
    /// `@geo`: geospatial commands.
    pub(crate) const GEO: u32 = 1 << 10;
    /// `@stream`: stream commands.
    pub(crate) const STREAM: u32 = 1 << 11;
    /// `@pubsub`: publish/subscribe commands.
    pub(crate) const PUBSUB: u32 = 1 << 12;
    /// `@admin`: administrative commands.
    pub const ADMIN: u32 = 1 << 13;
    /// `@fast`: constant or logarithmic time.
    pub(crate) const FAST: u32 = 1 << 14;
    /// `@slow`: everything not `@fast`.
    pub(crate) const SLOW: u32 = 1 << 15;
    /// `@blocking`: may block the connection.
    pub(crate) const BLOCKING: u32 = 1 << 16;
    /// `@dangerous`: may harm the server or reveal too much (KEYS, FLUSHALL, DEBUG, ...).
    pub(crate) const DANGEROUS: u32 = 1 << 17;
    /// `@connection`: about the connection itself (AUTH, HELLO, CLIENT).
    pub(crate) const CONNECTION: u32 = 1 << 18;
    /// `@transaction`: MULTI, EXEC, WATCH and friends.
    pub(crate) const TRANSACTION: u32 = 1 << 19;
    /// `@scripting`: scripts and functions.
    pub const SCRIPTING: u32 = 1 << 20;

    /// Redis' spelling of each category (without `@`), in bit order.
    pub const NAMES: &[super::Named] = &[
        ("keyspace", KEYSPACE),
        ("read", READ),
        ("write", WRITE),
        ("set", SET),
        ("sortedset", SORTEDSET),
        ("list", LIST),
        ("hash", HASH),
        ("string", STRING),
        ("bitmap", BITMAP),
        ("hyperloglog", HYPERLOGLOG),
        ("geo", GEO),
        ("stream", STREAM),
        ("pubsub", PUBSUB),
        ("admin", ADMIN),
        ("fast", FAST),
        ("slow", SLOW),
        ("blocking", BLOCKING),
        ("dangerous", DANGEROUS),
        ("connection", CONNECTION),
        ("transaction", TRANSACTION),
        ("scripting", SCRIPTING),
    ];
}

/// Key-spec flags (`RO`, `access`, `not_key`, ...); names in `key_flags::NAMES`.
pub mod key_flags {
    /// `RO`: the key is only read.
    pub(crate) const RO: u32 = 1 << 0;
    /// `RW`: the key is read and written.
    pub(crate) const RW: u32 = 1 << 1;
    /// `OW`: the key is overwritten without reading it first.
    pub(crate) const OW: u32 = 1 << 2;
    /// `RM`: the key may be deleted.
    pub(crate) const RM: u32 = 1 << 3;
    /// `access`: the command reads the key's value (not only its metadata).
    pub const ACCESS: u32 = 1 << 4;
    /// `update`: the command changes the key's value in place.
    pub const UPDATE: u32 = 1 << 5;
    /// `insert`: the command adds to the key's value.
    pub const INSERT: u32 = 1 << 6;
    /// `delete`: the command removes from the key's value, or the key.
    pub const DELETE: u32 = 1 << 7;
    /// Not a real key, e.g. the shard channel of SPUBLISH/SSUBSCRIBE (still hashed to a slot).
    pub(crate) const NOT_KEY: u32 = 1 << 8;
    /// The spec may miss keys (MIGRATE's KEYS form: a key named "keys" confuses it).
    pub(crate) const INCOMPLETE: u32 = 1 << 9;
    /// The key's flags depend on the arguments (see the command's docs).
    pub(crate) const VARIABLE_FLAGS: u32 = 1 << 10;

    /// Redis' spelling of each flag, in bit order.
    pub(crate) const NAMES: &[super::Named] = &[
        ("RO", RO),
        ("RW", RW),
        ("OW", OW),
        ("RM", RM),
        ("access", ACCESS),
        ("update", UPDATE),
        ("insert", INSERT),
        ("delete", DELETE),
        ("not_key", NOT_KEY),
        ("incomplete", INCOMPLETE),
        ("variable_flags", VARIABLE_FLAGS),
    ];
}

/// Bits for the names Redis reported; names this version doesn't know are ignored
/// (a newer server may add flags, which must not break learning).
pub(crate) fn bits_of<'a>(table: &[Named], names: impl IntoIterator<Item = &'a [u8]>) -> u32 {
    let mut out = 0;
    for name in names {
        let name = name.strip_prefix(b"@").unwrap_or(name);
        if let Some((_, bit)) = table
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
        {
            out |= bit;
        }
    }
    out
}
