//! Rendering the command table as the markdown reference in docs/commands.md.
//!
//! Why generated: docs/commands.md must say how every command of the table is served, and a
//! hand-kept list drifts the first time the policy changes. A test renders this text and compares
//! it with the file (`REDCAR_BLESS=1` rewrites it), so a change in policy that is not reflected in
//! the docs fails the build. The output is deterministic: commands in table order, subcommands
//! after their container, flags in bit order.

use std::fmt::Write as _;

use super::described::{describe, keyed_note};
use super::policy::{self, Serve};
use super::spec::{self, key_flags, BeginSearch, CommandSpec, FindKeys};
use super::table::{COMMANDS, REDIS_VERSION};

/// The whole docs/commands.md text for the builtin table.
pub(crate) fn render_markdown() -> String {
    let mut out = String::new();
    header(&mut out);
    for top in COMMANDS {
        row(&mut out, top);
        for sub in top.subcommands {
            row(&mut out, sub);
        }
    }
    out
}

/// The page's title, the counts per way of serving (from the same policy the router uses, so they
/// cannot disagree) and the table's header row.
fn header(out: &mut String) {
    let rows = COMMANDS
        .iter()
        .flat_map(|c| std::iter::once(c).chain(c.subcommands));
    let (mut keyed, mut local, mut any, mut fan_out, mut refused) = (0, 0, 0, 0, 0);
    let mut dedicated = 0;
    for spec in rows {
        match policy::serve(spec) {
            Serve::Keyed => keyed += 1,
            Serve::Local(_) => local += 1,
            Serve::AnyNode => any += 1,
            Serve::FanOut(_) => fan_out += 1,
            Serve::Blocking | Serve::Wait | Serve::Transaction(_) | Serve::Subscription(_) => {
                dedicated += 1
            }
            Serve::Unsupported(_) => refused += 1,
        }
    }
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "# Commands\n\n\
         <!-- generated from crates/redcar-protocol/src/commands (redis-server {REDIS_VERSION}); \
         regenerate with `REDCAR_BLESS=1 cargo test -p redcar-protocol --lib commands::` -->\n\n\
         Every Redis {REDIS_VERSION} command and subcommand, and how redcar serves it:\n\n\
         - **keyed** ({keyed}): routed to the primary owning the slot of its keys;\n\
         - **local** ({local}): answered by redcar itself;\n\
         - **any node** ({any}): keyless and sent to any one primary;\n\
         - **fan-out** ({fan_out}): keyless, sent to every primary (SCAN: one at a time) and the replies merged;\n\
         - **session** ({dedicated}): blocking commands, transactions and subscriptions, which keep state on a \
         connection: see [architecture.md](architecture.md#connection-state-transactions-blocking-commands-and-pubsub);\n\
         - **unsupported** ({refused}): refused with `-ERR redcar: <CMD> is not supported (<reason>)`; node administration can be allowed command by command with `router.allow_node_admin` (except what a proxy can never serve: see [configuration.md](configuration.md#router-deadlines-redirects-retries)).\n\n\
         On a listener with the cluster facade (`--cluster-facade`), `CLUSTER SLOTS`, `SHARDS`, `NODES`, `INFO` and `MYID` \
         are answered by redcar as a one-node cluster, and `READONLY`, `READWRITE` and `ASKING` get `+OK`: \
         see [cluster-facade.md](cluster-facade.md). The table shows the other listeners.\n\n\
         Keys: `yes` = key specs; `channel` = shard channel (a `not_key` spec that redcar routes by); \
         `incomplete` = the specs may miss keys (the node still rejects cross-slot use).\n\n\
         | Command | Arity | Flags | Keys | Served |\n\
         |---|---|---|---|---|\n"
    );
}

/// One table row: the name as users type it (`CLIENT SETNAME`), arity, flags, keys and how it is
/// served, with the policy's reason for a refusal.
fn row(out: &mut String, spec: &CommandSpec) {
    let name = spec.name.replace('|', " ").to_ascii_uppercase();
    let flags: Vec<&str> = names_of(spec::flags::NAMES, spec.flags).collect();
    let served = match policy::serve(spec) {
        Serve::Keyed => match keyed_note(spec) {
            Some(note) => format!("keyed; {note}"),
            None => "keyed".to_owned(),
        },
        Serve::Local(_) => "local".to_owned(),
        Serve::AnyNode => "any node".to_owned(),
        Serve::FanOut(fan_out) => format!("fan-out: {}", fan_out.describe()),
        Serve::Blocking | Serve::Wait | Serve::Transaction(_) | Serve::Subscription(_) => {
            format!("session: {}", describe(spec))
        }
        Serve::Unsupported(reason) => format!("unsupported: {reason}"),
    };
    let _ = writeln!(
        out,
        "| `{name}` | {} | {} | {} | {served} |",
        spec.arity,
        flags.join(", "),
        keys_summary(spec),
    );
}

/// `yes` when the key specs find every key; `channel` when the only "key" is a shard channel;
/// `incomplete` when the specs may miss keys (or there are none for a command flagged
/// `movablekeys`); `no` for keyless commands.
fn keys_summary(spec: &CommandSpec) -> &'static str {
    let all = spec.key_specs.iter().fold(0, |acc, ks| acc | ks.flags);
    let unknown = spec
        .key_specs
        .iter()
        .any(|ks| matches!(ks.begin, BeginSearch::Unknown) || matches!(ks.find, FindKeys::Unknown));
    let has_real = spec
        .key_specs
        .iter()
        .any(|ks| ks.flags & key_flags::NOT_KEY == 0);
    if spec.key_specs.is_empty() {
        if spec.has_keys() {
            "incomplete"
        } else {
            "no"
        }
    } else if !has_real {
        "channel"
    } else if unknown || all & key_flags::INCOMPLETE != 0 {
        "incomplete"
    } else {
        "yes"
    }
}

/// Redis' names of the bits set in `bits`, in bit order (for docs).
fn names_of(table: &[spec::Named], bits: u32) -> impl Iterator<Item = &'static str> + '_ {
    table
        .iter()
        .filter(move |(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
}
