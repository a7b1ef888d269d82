//! What a refresher learned about the cluster's nodes (which commands they refuse) and what a
//! check of the map found.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::cluster::change_check::Probe;

/// How long a command a node refused (`CLUSTER SHARDS`, the digest script) is not asked again:
/// a rolling upgrade or an ACL change may bring it later.
const ASK_AGAIN_AFTER: Duration = Duration::from_secs(600);

/// What the cluster's nodes turned out not to answer, shared by the queries of one refresher.
#[derive(Debug, Default)]
pub(crate) struct Dialect {
    /// A node answered `CLUSTER SHARDS` with an unknown-subcommand error: ask `CLUSTER SLOTS` for a
    /// while.
    shards_refused: Refusal,
    /// A node refused the digest script: check with `CLUSTER INFO` for a while.
    digest_refused: Refusal,
}

/// When a node last refused a command.
#[derive(Debug, Default)]
struct Refusal(Mutex<Option<Instant>>);

/// The outcome of a check.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Checked {
    /// The node's view is the one the current map was read from.
    Unchanged,
    /// The node's view differs: fetch the map.
    Changed,
    /// No answer (or the probe was refused): the map must be fetched.
    Failed(String),
}

impl Refusal {
    fn note(&self) -> bool {
        let mut at = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let first = at.is_none();
        *at = Some(Instant::now());
        first
    }

    fn in_force(&self) -> bool {
        let at = self.0.lock().unwrap_or_else(|e| e.into_inner());
        at.is_some_and(|at| at.elapsed() < ASK_AGAIN_AFTER)
    }
}

impl Dialect {
    /// The probe to use for `wanted`: the digest gives way to `CLUSTER INFO` while nodes refuse
    /// the script.
    pub(crate) fn probe(&self, wanted: Probe) -> Probe {
        match wanted {
            Probe::Digest if self.digest_refused.in_force() => Probe::Info,
            other => other,
        }
    }

    /// Whether to ask for `CLUSTER SHARDS` (no node refused it lately).
    pub(crate) fn shards(&self) -> bool {
        !self.shards_refused.in_force()
    }

    /// A node refused `CLUSTER SHARDS`; true the first time (to log it once).
    pub(crate) fn shards_refused(&self) -> bool {
        self.shards_refused.note()
    }

    /// A node refused the digest script; true the first time (to log it once).
    pub(crate) fn digest_refused(&self) -> bool {
        self.digest_refused.note()
    }
}
