//! Settings for routing: deadlines, redirect limits, and whether FLUSHALL/FLUSHDB are served.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::forward::fault::FaultRule;
use super::forward::retry_budget::RetryBudgetConfig;
use crate::values::units;

/// `router:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RouterConfig {
    /// Deadline for one command from dispatch to reply, including redirects, waiting for a slot
    /// owner and retries. On expiry the client gets `-ERR redcar: ... timed out`.
    #[serde(with = "units::duration")]
    pub(crate) op_timeout: Duration,
    /// MOVED/ASK redirects followed for one command before giving up.
    pub(crate) max_redirects: usize,
    /// First pause before retrying a command that could not be sent (doubles each attempt, capped
    /// at 16×, always within `op_timeout`).
    #[serde(with = "units::duration")]
    pub(crate) retry_backoff: Duration,
    /// Serve FLUSHALL and FLUSHDB (sent to every primary). When false they are refused with
    /// `-ERR redcar: FLUSHALL is disabled (router.allow_flush: false)`.
    pub(crate) allow_flush: bool,
    /// Node-administration commands (`config|get`, `config|set`, ...) served by sending them
    /// to every node of the map; any other is refused. Checked at start-up.
    pub(crate) allow_node_admin: Vec<String>,
    /// Where reads go: `primary`, `prefer-primary`, `replica`, `prefer-replica` or `any`.
    /// Anything but `primary` makes redcar send `READONLY` on its node connections.
    pub(crate) read_policy: ReadPolicy,
    /// Send a read that has not been answered after this long to a second node of its shard as
    /// well (first good reply wins); 0 = off. Needs a read policy that uses replicas.
    #[serde(with = "units::duration")]
    pub(crate) hedge_after: Duration,
    /// A reply from a replica that a missing key would produce for that read (nil, empty, 0, …:
    /// `commands::absent`) is asked again of the slot's primary, which answers from the data it
    /// owns (or with ASK while the slot is migrating): a replica cannot tell "absent" from
    /// "moved away by a migration redcar has not seen yet". Costs one more round trip per such
    /// reply from a replica; false serves the replica's answer as it is.
    pub(crate) replica_miss_check: bool,
    /// Bounds retries to a share of the traffic, so retries cannot amplify an outage.
    pub(crate) retry_budget: RetryBudgetConfig,
    /// Fault injection for tests and drills: delays and error replies for chosen commands and
    /// nodes. Empty (no cost) by default.
    pub(crate) faults: Vec<FaultRule>,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            op_timeout: Duration::from_secs(1),
            max_redirects: 5,
            retry_backoff: Duration::from_millis(10),
            allow_flush: true,
            allow_node_admin: Vec::new(),
            read_policy: ReadPolicy::Primary,
            hedge_after: Duration::ZERO,
            replica_miss_check: true,
            retry_budget: RetryBudgetConfig::default(),
            faults: Vec::new(),
        }
    }
}

/// Where reads go (`router.read_policy`, `--read-policy`). Writes always go to the primary.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ReadPolicy {
    /// Reads go to the primary only (read-your-writes).
    #[default]
    Primary,
    /// The primary; a replica when the primary is ejected.
    PreferPrimary,
    /// Replicas only; an error when none is usable.
    Replica,
    /// Replicas; the primary when no replica is usable, or after each replica failed once.
    PreferReplica,
    /// Any node of the shard, by load.
    Any,
}

impl ReadPolicy {
    /// True when reads may go to replicas, which then need `READONLY` on their connections.
    pub(crate) fn uses_replicas(self) -> bool {
        self != ReadPolicy::Primary
    }

    /// The name used in the config file and on the command line.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ReadPolicy::Primary => "primary",
            ReadPolicy::PreferPrimary => "prefer-primary",
            ReadPolicy::Replica => "replica",
            ReadPolicy::PreferReplica => "prefer-replica",
            ReadPolicy::Any => "any",
        }
    }
}
