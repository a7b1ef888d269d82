//! Node administration the configuration explicitly allows (`router.allow_node_admin`): sent to
//! every node of the slot map, primaries and replicas, with the replies merged into one.
//!
//! Every node, not just primaries: a setting such as `slowlog-log-slower-than` or `maxmemory`
//! left different on a replica would surface only after a failover. Merge: when every node
//! gives the same reply (`+OK` from CONFIG SET, the same CONFIG GET array), that reply; a node
//! that fails or answers differently makes the whole reply an error naming it, so a
//! half-applied change or a drifted setting is never hidden behind one node's answer.

use std::sync::Arc;

use bytes::Bytes;

use super::gather::{collect, failure, send_to_all};
use super::merge::agree_among;
use crate::commands::spec::acl;
use crate::commands::{CommandSpec, CommandTable, Serve};
use crate::protocol::Request;
use crate::router::replies::display_name;
use crate::router::reply::redcar_error;
use crate::router::{Call, Fanout};
use crate::upstream::Lane;
use crate::upstream::Node;

/// Node administration that stays refused even when listed, and why.
const NEVER: &[(&str, &str)] = &[
    (
        "acl",
        "it would change or reveal the users redcar itself logs in with",
    ),
    ("debug", "it can crash or stall nodes"),
    (
        "failover",
        "it changes the cluster's roles; run it against one node directly",
    ),
    (
        "migrate",
        "it moves keys between nodes; run it against one node directly",
    ),
    (
        "module",
        "loading code into every node is not a proxy's job",
    ),
    (
        "monitor",
        "it turns a connection into a stream, and redcar's connections are shared",
    ),
    ("pfdebug", "a debugging command"),
    ("pfselftest", "a debugging command"),
    ("psync", "the replication protocol"),
    ("replconf", "the replication protocol"),
    (
        "replicaof",
        "it changes the cluster's roles; run it against one node directly",
    ),
    ("restore-asking", "part of slot migration"),
    ("shutdown", "it would stop every node"),
    (
        "slaveof",
        "it changes the cluster's roles; run it against one node directly",
    ),
    ("swapdb", "Redis Cluster has only database 0"),
    ("sync", "the replication protocol"),
];

/// Why `spec` can never be allowed, if it cannot.
pub(in crate::router) fn never(spec: &CommandSpec) -> Option<&'static str> {
    let container = spec.container();
    if let Some((_, why)) = NEVER.iter().find(|(name, _)| *name == container) {
        return Some(why);
    }
    // CLUSTER subcommands that Redis marks @admin change slots, membership or roles.
    if container == "cluster" && spec.acl_categories & acl::ADMIN != 0 {
        return Some("it changes the cluster's slots, membership or roles");
    }
    None
}

/// Checks `router.allow_node_admin` at start-up: every entry a node-administration command
/// (or subcommand) redcar refuses by default and may serve.
pub(crate) fn validate(names: &[String]) -> Result<(), String> {
    let table = CommandTable::builtin();
    for name in names {
        let key = "`router.allow_node_admin`";
        let Some(spec) = table.by_name(name.as_bytes()) else {
            return Err(format!(
                "{key}: unknown command `{name}` (use Redis's names, subcommands as `config|get`)"
            ));
        };
        if !spec.subcommands.is_empty() {
            return Err(format!(
                "{key}: `{name}` has subcommands; list the ones to allow, e.g. `{}`",
                spec.subcommands[0].name
            ));
        }
        if crate::commands::serve(spec) != Serve::Unsupported(crate::commands::policy::NODE_ADMIN) {
            return Err(format!(
                "{key}: `{name}` is not a node-administration command redcar refuses; \
                 it is {} without this setting",
                crate::commands::describe(spec)
            ));
        }
        if let Some(why) = never(spec) {
            return Err(format!(
                "{key}: `{name}` cannot be served through a proxy: {why}"
            ));
        }
    }
    Ok(())
}

impl<'r> Fanout<'r> {
    /// Sends an allowed node-administration command to every node and merges the replies.
    ///
    /// The command is queued on every node before this returns. Any node's error or transport
    /// failure fails the whole reply (naming the node, and saying it was sent to every node,
    /// because the others may have applied it); when all succeed but disagree, the error names the
    /// first node that differs. Refusal of commands not listed in `router.allow_node_admin` happens
    /// before this, in the plan.
    pub(in crate::router) fn start_node_admin(self, request: &Request, lane: Lane) -> Call<'r> {
        let nodes = match self.every_node() {
            Ok(nodes) => nodes,
            Err(reply) => return Call::ready(reply),
        };
        let name = display_name(request.args(), 2.min(request.args().len()));
        let sent = send_to_all(nodes.iter(), request, lane);
        let op_timeout = self.fwd.core.op_timeout();
        Call::slow(async move {
            let replies = collect(sent, op_timeout).await;
            let failed = replies
                .iter()
                .find(|r| r.reply.as_ref().map_or(true, |b| b.starts_with(b"-")));
            match failed {
                Some(failed) => failure(&name, failed, "; it was sent to every node"),
                None => agree_among(&name, "nodes", &replies).unwrap_or_else(|reply| reply),
            }
        })
    }

    /// Every primary and replica of the current map, sorted by address.
    ///
    /// Deduplicated by address like the primaries of a fan-out, so a node two shards name is
    /// asked once; fails like them when no map has been adopted yet.
    fn every_node(self) -> Result<Vec<Arc<Node>>, Bytes> {
        let topology = self.fwd.core.cluster.topology().ok_or_else(|| {
            redcar_error("no cluster topology known yet (are the seed nodes reachable?)")
        })?;
        let mut nodes: Vec<Arc<Node>> = topology
            .shards()
            .iter()
            .flat_map(|s| std::iter::once(&s.primary).chain(&s.replicas).cloned())
            .collect();
        nodes.sort_by(|a, b| a.addr().cmp(b.addr()));
        nodes.dedup_by(|a, b| a.addr() == b.addr());
        Ok(nodes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(names: &[&str]) -> Result<(), String> {
        validate(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn only_refused_node_administration_that_a_proxy_can_serve_may_be_allowed() {
        assert_eq!(
            check(&["config|get", "CONFIG|SET", "lastsave", "cluster|info"]),
            Ok(())
        );
        let error = |names: &[&str]| check(names).expect_err("refused");
        assert!(error(&["nosuch"]).contains("unknown command `nosuch`"));
        assert!(error(&["config"]).contains("has subcommands"));
        assert!(error(&["get"]).contains("is not a node-administration command"));
        assert!(error(&["slowlog|get"]).contains("is not a node-administration command"));
        assert!(error(&["shutdown"]).contains("cannot be served through a proxy"));
        assert!(error(&["monitor"]).contains("cannot be served"));
        assert!(error(&["cluster|failover"]).contains("cluster's slots, membership or roles"));
        assert!(error(&["acl|setuser"]).contains("cannot be served"));
    }
}
