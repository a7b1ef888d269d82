//! The first attempt's pick and its primary hint: the fast path skips the replica-miss check on
//! a nil exactly when the node it sent to was the shard's primary.

use std::sync::Arc;

use crate::cluster::{ClusterState, Topology};
use crate::router::forward::command::Candidate;
use crate::router::forward::Forwarder;
use crate::router::{ReadPolicy, RouterConfig};
use crate::upstream::Upstreams;

const PRIMARY: &str = "127.0.0.1:1";
const REPLICA: &str = "127.0.0.1:2";

fn forwarder(map: bool) -> Forwarder {
    let (upstreams, metrics) = Upstreams::for_tests(false);
    let upstreams = Arc::new(upstreams);
    let cluster = Arc::new(ClusterState::new());
    if map {
        let replicas = [REPLICA.to_string()];
        let shard = Topology::single_shard(PRIMARY, &replicas, &upstreams, Arc::from("test"));
        cluster.adopt(shard);
    }
    Forwarder::new(cluster, upstreams, metrics, RouterConfig::default())
}

/// The picked node's address and the hint, or `None` when no node was picked.
fn pick(
    forwarder: &Forwarder,
    policy: ReadPolicy,
    slot: Option<u16>,
    write: bool,
) -> Option<(String, bool)> {
    let cluster = forwarder.core.cluster.clone();
    match forwarder.candidate_by(policy, &cluster, slot, write, &[]) {
        (Candidate::Node(node), primary) => Some((node.addr().to_string(), primary)),
        _ => None,
    }
}

#[tokio::test]
async fn reads_and_writes_sent_to_the_primary_carry_the_hint() {
    let forwarder = forwarder(true);
    let primary = Some((PRIMARY.to_string(), true));
    assert_eq!(
        pick(&forwarder, ReadPolicy::Primary, Some(7), false),
        primary
    );
    assert_eq!(
        pick(&forwarder, ReadPolicy::Replica, Some(7), true),
        primary
    );
    // Keyless commands go to a primary.
    assert_eq!(pick(&forwarder, ReadPolicy::Replica, None, false), primary);
}

#[tokio::test]
async fn reads_sent_to_a_replica_do_not() {
    let forwarder = forwarder(true);
    let replica = Some((REPLICA.to_string(), false));
    assert_eq!(
        pick(&forwarder, ReadPolicy::Replica, Some(7), false),
        replica
    );
    assert_eq!(
        pick(&forwarder, ReadPolicy::PreferReplica, Some(7), false),
        replica
    );
}

#[tokio::test]
async fn no_map_no_node() {
    let forwarder = forwarder(false);
    let cluster = forwarder.core.cluster.clone();
    let (candidate, primary) =
        forwarder.candidate_by(ReadPolicy::Primary, &cluster, Some(7), false, &[]);
    assert!(matches!(candidate, Candidate::NoOwner));
    assert!(!primary);
}
