//! `INFO` through redcar: redcar's own `# Redcar` section, then every primary's INFO merged into
//! one reply (how each section is combined: `info_merge`).
//!
//! The `# Redcar` section is built from figures the proxy keeps anyway (totals, the adopted map),
//! so `INFO` costs the proxy no extra bookkeeping; its field names are part of what users see and
//! must not change. A primary that fails or answers anything but a bulk string fails the whole INFO
//! with its address, because a merged INFO silently missing a primary would under-count every
//! summed field.

use bytes::Bytes;

use super::gather::{collect, failure, send_to_all};
use super::info_merge::{merge_info, NodeInfo};
use crate::protocol::{Args, Request};
use crate::router::replies::{bulk, encode_bulk};
use crate::router::{Call, Fanout};
use crate::upstream::Lane;

/// Section arguments that include redcar's own section (besides `redcar` itself).
const WITH_OWN: &[&str] = &["redcar", "default", "all", "everything"];

/// Which sections the client asked for, as far as redcar's own is concerned.
#[derive(Debug, PartialEq, Eq)]
enum Wanted {
    /// `INFO`, `INFO default|all|everything`, or `redcar` among other sections.
    WithOwn,
    /// Only sections the primaries have.
    NodesOnly,
    /// `INFO redcar`: no primary needs asking.
    OnlyOwn,
}

impl Wanted {
    /// Section names are matched without regard to case, as Redis does; `INFO redcar redcar` is
    /// still only redcar's own section, while `INFO redcar memory` asks the primaries too.
    fn of(sections: Args<'_>) -> Wanted {
        let named = |name: &str| {
            sections
                .iter()
                .any(|s| s.eq_ignore_ascii_case(name.as_bytes()))
        };
        if !sections.is_empty() && sections.iter().all(|s| s.eq_ignore_ascii_case(b"redcar")) {
            Wanted::OnlyOwn
        } else if sections.is_empty() || WITH_OWN.iter().any(|name| named(name)) {
            Wanted::WithOwn
        } else {
            Wanted::NodesOnly
        }
    }
}

impl<'r> Fanout<'r> {
    /// `INFO [section ...]`: the request goes unchanged to every primary (they ignore `redcar`);
    /// `INFO redcar` alone is answered without them.
    pub(super) fn start_info(self, request: &Request, lane: Lane) -> Call<'r> {
        let wanted = Wanted::of(request.args().skip(1));
        if wanted == Wanted::OnlyOwn {
            return Call::ready(encode_bulk(self.redcar_section().as_bytes()));
        }
        let own = wanted == Wanted::WithOwn;
        let primaries = match self.primaries() {
            Ok(primaries) => primaries,
            Err(reply) => return Call::ready(reply),
        };
        let sent = send_to_all(primaries.iter(), request, lane);
        let op_timeout = self.fwd.core.op_timeout();
        Call::slow(async move {
            let replies = collect(sent, op_timeout).await;
            let mut texts: Vec<Bytes> = Vec::with_capacity(replies.len());
            for part in &replies {
                match part.reply.as_ref().ok().and_then(bulk) {
                    Some(text) => texts.push(text),
                    None => return failure("INFO", part, ""),
                }
            }
            let texts: Vec<String> = texts
                .iter()
                .map(|t| String::from_utf8_lossy(t).into_owned())
                .collect();
            let nodes: Vec<NodeInfo> = replies
                .iter()
                .zip(&texts)
                .map(|(part, text)| NodeInfo {
                    addr: &part.addr,
                    text,
                })
                .collect();
            let own = own.then(|| self.redcar_section());
            encode_bulk(merge_info(&nodes, own.as_deref()).as_bytes())
        })
    }

    /// `# Redcar`: the proxy itself and the slot map it routes by, from values it keeps anyway.
    ///
    /// Every field is a plain `name:value` line in Redis's format so INFO parsers in client
    /// libraries read it like any other section. With no map adopted yet, `cluster_state` is
    /// `unknown` and the counts are 0.
    fn redcar_section(self) -> String {
        let totals = self.fwd.core.metrics.totals();
        let topology = self.fwd.core.cluster.topology();
        let (state, slots, primaries, nodes, source) = match &topology {
            Some(t) => (
                if t.is_complete() { "ok" } else { "incomplete" },
                t.owned_slots(),
                t.shards().len(),
                t.addrs().count(),
                t.source(),
            ),
            None => ("unknown", 0, 0, 0, ""),
        };
        let uptime = totals.uptime.as_secs();
        let fields = [
            ("redcar_version", env!("CARGO_PKG_VERSION").to_string()),
            ("uptime_in_seconds", uptime.to_string()),
            ("uptime_in_days", (uptime / 86_400).to_string()),
            ("connected_clients", totals.clients.to_string()),
            ("total_connections_received", totals.accepted.to_string()),
            ("cluster_state", state.to_string()),
            ("cluster_slots_covered", slots.to_string()),
            ("cluster_primaries", primaries.to_string()),
            ("cluster_nodes", nodes.to_string()),
            ("topology_source", source.to_string()),
            (
                "topology_version",
                self.fwd.core.cluster.version().to_string(),
            ),
            ("topology_refreshes_ok", totals.refreshes_ok.to_string()),
            (
                "topology_refreshes_failed",
                totals.refreshes_failed.to_string(),
            ),
            ("commands_retried", totals.retries.to_string()),
        ];
        let mut text = String::from("# Redcar\r\n");
        for (field, value) in fields {
            text.push_str(field);
            text.push(':');
            text.push_str(&value);
            text.push_str("\r\n");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(line: &str) -> Wanted {
        use crate::protocol::Request;
        let sections = Request::from_args::<Vec<Bytes>, Bytes>(
            line.split_whitespace()
                .map(|s| Bytes::copy_from_slice(s.as_bytes()))
                .collect(),
        );
        Wanted::of(sections.args())
    }

    #[test]
    fn redcars_section_comes_with_the_default_sets_or_by_name() {
        for line in ["", "default", "ALL", "everything", "keyspace Redcar"] {
            assert_eq!(wanted(line), Wanted::WithOwn, "{line:?}");
        }
        for line in ["keyspace", "server clients", "commandstats"] {
            assert_eq!(wanted(line), Wanted::NodesOnly, "{line:?}");
        }
        assert_eq!(wanted("redcar"), Wanted::OnlyOwn);
        assert_eq!(wanted("REDCAR redcar"), Wanted::OnlyOwn);
    }
}
