//! Subcommands newer than the generated table's Redis version that clients send on every
//! connect, so redcar knows them and answers them itself.
//!
//! Redis 7.2 added `CLIENT SETINFO LIB-NAME|LIB-VER value`; redis-py, go-redis, Jedis and
//! Lettuce send it right after connecting and ignore an error. Unknown to a 7.0 table, it was
//! refused, and every connect of such a client counted an error in `redcar_command_errors`
//! (and in the error-rate alert).

use super::spec::{acl as a, flags as f, CommandSpec};

/// `CLIENT SETINFO` as Redis 7.2 describes it.
static CLIENT_SETINFO: CommandSpec = CommandSpec {
    name: "client|setinfo",
    arity: 4,
    flags: f::NOSCRIPT | f::LOADING | f::STALE,
    acl_categories: a::SLOW | a::CONNECTION,
    tips: &["request_policy:all_nodes", "response_policy:all_succeeded"],
    key_specs: &[],
    subcommands: &[],
};

/// The newer subcommand `sub` of `container` (both lowercase), if redcar knows one.
pub(crate) fn subcommand(container: &str, sub: &str) -> Option<&'static CommandSpec> {
    match (container, sub) {
        ("client", "setinfo") => Some(&CLIENT_SETINFO),
        _ => None,
    }
}
