//! Every command of the real server, sent through redcar with plausible arguments, gets a reply —
//! served or refused with a reason — never hangs or drops the client, and reaches no primary but
//! the owners of its keys; commands declared in `custom_commands` are routed by their keys too.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, RespClient, SlotRange, Value};

/// Commands that end or take over the connection by design (tested elsewhere).
const SKIP: &[&str] = &["quit"];

/// Commands that put the connection in subscribe mode and reply once per channel: each is sent on
/// a connection of its own, which is then dropped (tests/it/pubsub.rs covers them properly).
const OWN_CONNECTION: &[&str] = &[
    "psubscribe",
    "punsubscribe",
    "ssubscribe",
    "subscribe",
    "sunsubscribe",
    "unsubscribe",
];

/// Keys share a hash tag, so keyed commands are routable; the rest get arity/syntax errors.
const ARGS: [&str; 3] = ["{cov}a", "{cov}b", "1"];

/// A primary, with a direct connection for reading its counters.
struct Primary {
    port: u16,
    client: RespClient,
}

#[test]
fn every_command_is_answered_and_reaches_only_the_owners_of_its_keys() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let names = cluster.any_node().cmd(&["COMMAND", "LIST"]);
    let names: Vec<String> = names
        .as_array()
        .expect("COMMAND LIST")
        .iter()
        .filter_map(|n| n.as_str().map(String::from))
        .collect();
    assert!(names.len() > 200, "{} commands", names.len());
    let map = cluster.slot_map();
    let mut probe = cluster.any_node().client();
    let mut primaries: Vec<Primary> = cluster
        .primary_ports()
        .into_iter()
        .map(|port| Primary {
            port,
            client: cluster.node_by_port(port).client(),
        })
        .collect();
    let mut c = redcar.client();
    c.set_timeout(Duration::from_secs(5)).expect("timeout");
    let (mut refused, mut checked) = (0, 0);
    for name in names.iter().filter(|n| !SKIP.contains(&n.as_str())) {
        let line: Vec<&str> = std::iter::once(name.as_str()).chain(ARGS).collect();
        // The server's own idea of the keys: only their owners may see the command.
        let owners = owners_of_keys(&mut probe, &map, &line);
        let before = owners.as_ref().map(|_| activity(&mut primaries, name));
        let own_connection = OWN_CONNECTION.contains(&name.as_str());
        let mut alone;
        let conn = if own_connection {
            alone = redcar.client();
            alone.set_timeout(Duration::from_secs(5)).expect("timeout");
            &mut alone
        } else {
            &mut c
        };
        let reply = conn
            .cmd(&line)
            .unwrap_or_else(|e| panic!("{name}: no reply ({e})"));
        if let Some(error) = reply.error() {
            assert!(
                !error.starts_with("MOVED") && !error.starts_with("ASK"),
                "{name}: redirect leaked: {error}"
            );
            refused += usize::from(error.starts_with("ERR redcar: "));
        }
        if let (Some(owners), Some(before)) = (owners, before) {
            let after = activity(&mut primaries, name);
            let mut reached = BTreeSet::new();
            for ((port, was), now) in primaries.iter().map(|p| p.port).zip(before).zip(after) {
                assert!(
                    now == was || owners.contains(&port),
                    "{line:?} reached primary {port}, which owns none of its keys (owners \
                     {owners:?}; calls+rejected+failed {was} → {now}; reply {reply:?})"
                );
                if now > was {
                    reached.insert(port);
                }
            }
            // Unless redcar answered itself (refusal, cross-slot, MSET's odd pairs), the command
            // must have reached an owner.
            let answered_here = reply.error().is_some_and(|e| {
                [
                    "ERR redcar: ",
                    "CROSSSLOT ",
                    "ERR wrong number of arguments",
                ]
                .iter()
                .any(|p| e.starts_with(p))
            });
            assert!(
                answered_here || !reached.is_empty(),
                "{line:?} reached none of its owners {owners:?} (reply {reply:?})"
            );
            checked += 1;
        }
        if !own_connection {
            assert_eq!(
                c.q(&["PING"]),
                Value::simple("PONG"),
                "connection still usable after {name}"
            );
        }
    }
    assert!(
        refused > 0,
        "some commands are refused by redcar with a reason"
    );
    assert!(checked > 50, "only {checked} keyed commands were checked");
}

/// The primaries owning the slots of the keys the server finds in `line` (`COMMAND GETKEYS`);
/// `None` when it finds none or the arguments don't fit the command.
fn owners_of_keys(
    probe: &mut RespClient,
    map: &[SlotRange],
    line: &[&str],
) -> Option<BTreeSet<u16>> {
    let mut getkeys = vec!["COMMAND", "GETKEYS"];
    getkeys.extend_from_slice(line);
    let keys = probe.q(&getkeys);
    let keys = keys.as_array()?;
    let mut owners = BTreeSet::new();
    for key in keys {
        let key = key.as_str()?;
        let slot = probe.q(&["CLUSTER", "KEYSLOT", key]).as_int()?;
        let range = map
            .iter()
            .find(|r| i64::from(r.start) <= slot && slot <= i64::from(r.end))?;
        owners.insert(range.primary);
    }
    (!owners.is_empty()).then_some(owners)
}

/// Per primary, how often `command` ran or was turned away there (`calls + rejected_calls +
/// failed_calls` of its `INFO commandstats` line; a node answering MOVED counts a rejected call).
/// Only the command's own line is read: redcar's background `CLUSTER SLOTS` and `COMMAND` and the
/// test's own queries never touch it.
fn activity(primaries: &mut [Primary], command: &str) -> Vec<u64> {
    let prefix = format!("cmdstat_{}:", command.to_ascii_lowercase());
    primaries
        .iter_mut()
        .map(|p| {
            let stats = p.client.q(&["INFO", "commandstats"]).to_text();
            let Some(line) = stats.lines().find_map(|l| l.strip_prefix(&prefix)) else {
                return 0;
            };
            line.trim_end()
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .filter(|(k, _)| matches!(*k, "calls" | "rejected_calls" | "failed_calls"))
                .filter_map(|(_, v)| v.parse::<u64>().ok())
                .sum()
        })
        .collect()
}

/// `stats` counter `total_error_replies` of each primary.
fn error_replies(cluster: &RedisCluster) -> Vec<(u16, i64)> {
    cluster
        .primary_ports()
        .into_iter()
        .map(|port| {
            let n = cluster
                .node_by_port(port)
                .info_field("stats", "total_error_replies")
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("total_error_replies of {port}"));
            (port, n)
        })
        .collect()
}

#[test]
fn declared_custom_commands_are_routed_to_the_owner_of_their_keys() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(
        "custom_commands:\n  - {name: mymod.get, first_key: 1, write: false}\n  - {name: mymod.mset, first_key: 1, last_key: -1, key_step: 2}\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    // The servers don't have the module: the node's own "unknown command" proves the command
    // left redcar, and the per-node error count says which node got it.
    for port in cluster.primary_ports() {
        let key = cluster.key_on_node("custom:", port);
        let before = error_replies(&cluster);
        let reply = c.q(&["MYMOD.GET", &key]);
        let error = reply.error().unwrap_or_else(|| panic!("{reply:?}"));
        assert!(
            error.starts_with("ERR unknown command") && !error.contains("redcar"),
            "the node's answer, not redcar's: {error}"
        );
        let after = error_replies(&cluster);
        for ((node, was), (_, now)) in before.into_iter().zip(after) {
            let expected = if node == port { was + 1 } else { was };
            assert_eq!(now, expected, "MYMOD.GET {key}: errors on {node}");
        }
    }
    let pairs = c.q(&["MYMOD.MSET", "{u}a", "1", "{u}b", "2"]);
    assert!(
        pairs
            .error()
            .is_some_and(|e| e.starts_with("ERR unknown command")),
        "{pairs:?}"
    );
    let ports = cluster.primary_ports();
    let (k1, k2) = (
        cluster.key_on_node("custom:", ports[0]),
        cluster.key_on_node("custom:", ports[1]),
    );
    let cross = c.q(&["MYMOD.MSET", &k1, "1", &k2, "2"]);
    assert!(
        cross.error().is_some_and(|e| e.starts_with("CROSSSLOT ")),
        "{cross:?}"
    );
    let arity = c.q(&["MYMOD.GET"]);
    assert_eq!(
        arity.error(),
        Some("ERR wrong number of arguments for 'mymod.get' command")
    );
    let undeclared = c.q(&["MYMOD.DEL", "k"]);
    assert!(
        undeclared
            .error()
            .is_some_and(|e| e.starts_with("ERR redcar: unknown command 'MYMOD.DEL'")),
        "{undeclared:?}"
    );
}
