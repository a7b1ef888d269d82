//! What a reply to a read of absent keys looks like (`absent`): one bit each; a command's set of
//! them is its `Absence`, and the generated `absent_table` names them.

/// `$-1`, `*-1` (RESP2) or `_` (RESP3): `GET`, `LINDEX`, `ZSCORE`, `XREAD`, …
pub(crate) const NIL: u16 = 1 << 0;
/// An empty array, set or map (`*0`, `~0`, `%0`): `LRANGE`, `SMEMBERS`, `HGETALL`, …
pub(crate) const EMPTY: u16 = 1 << 1;
/// An empty bulk string: `GETRANGE`, `LCS`.
pub(crate) const EMPTY_STRING: u16 = 1 << 2;
/// `:0`: `EXISTS`, `SCARD`, `LLEN`, `STRLEN`, `BITCOUNT`, …
pub(crate) const ZERO: u16 = 1 << 3;
/// `:-1`: `BITPOS` looking for a set bit.
pub(crate) const MINUS_ONE: u16 = 1 << 4;
/// `:-2`: `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`.
pub(crate) const MINUS_TWO: u16 = 1 << 5;
/// `+none`: `TYPE`.
pub(crate) const NONE: u16 = 1 << 6;
/// An array of nils only: `HMGET`, `ZMSCORE`, `GEOPOS`, `MGET`.
pub(crate) const NIL_ITEMS: u16 = 1 << 7;
/// An array of zeros only: `SMISMEMBER`, `BITFIELD_RO`.
pub(crate) const ZERO_ITEMS: u16 = 1 << 8;
/// A scan that ended at once with nothing: `*2 "0" *0` (`SSCAN`, `HSCAN`, `ZSCAN`).
pub(crate) const SCAN_DONE: u16 = 1 << 9;
/// `LCS … IDX` with nothing in common: `matches` empty, `len` 0.
pub(crate) const NO_MATCH: u16 = 1 << 10;
/// An error reply (`XINFO`: `-ERR no such key`; `XPENDING`: `-NOGROUP`).
pub(crate) const ERROR: u16 = 1 << 11;
/// An array with a nil among other items: `MGET` of several keys, one of them absent.
pub(crate) const SOME_NIL_ITEM: u16 = 1 << 12;
/// An integer above 0 but below the number of keys: `EXISTS`/`TOUCH` of several keys.
pub(crate) const FEWER_THAN_KEYS: u16 = 1 << 13;
/// With more than one key, any reply: one absent key changes it in ways no class describes
/// (`SUNION`, `SDIFF`, `PFCOUNT`, `XREAD` of several streams).
pub(crate) const OPAQUE_WITH_KEYS: u16 = 1 << 14;
/// Any reply: what an absent key makes of it cannot be told (scripts).
pub(crate) const OPAQUE: u16 = 1 << 15;

/// Each class and its name in the generated table, in bit order.
#[cfg(test)]
pub(crate) const NAMES: [(u16, &str); 16] = [
    (NIL, "NIL"),
    (EMPTY, "EMPTY"),
    (EMPTY_STRING, "EMPTY_STRING"),
    (ZERO, "ZERO"),
    (MINUS_ONE, "MINUS_ONE"),
    (MINUS_TWO, "MINUS_TWO"),
    (NONE, "NONE"),
    (NIL_ITEMS, "NIL_ITEMS"),
    (ZERO_ITEMS, "ZERO_ITEMS"),
    (SCAN_DONE, "SCAN_DONE"),
    (NO_MATCH, "NO_MATCH"),
    (ERROR, "ERROR"),
    (SOME_NIL_ITEM, "SOME_NIL_ITEM"),
    (FEWER_THAN_KEYS, "FEWER_THAN_KEYS"),
    (OPAQUE_WITH_KEYS, "OPAQUE_WITH_KEYS"),
    (OPAQUE, "OPAQUE"),
];
