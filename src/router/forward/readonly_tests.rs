//! `-READONLY` from a node the map still names as primary (a failover demoted it): the router
//! asks for a refresh and retries the write on the primary of the fresh map.

use std::sync::Arc;

use bytes::Bytes;

use crate::cluster::{ClusterState, Topology};
use crate::commands::test_server::{Reply, TestServer};
use crate::router::{Router, RouterConfig};
use crate::upstream::{Lane, Upstreams};

fn one_shard(addr: &str, upstreams: &Upstreams) -> Topology {
    Topology::single_shard(addr, &[], upstreams, Arc::from("test"))
}

#[tokio::test]
async fn a_write_refused_as_readonly_is_retried_on_the_fresh_primary() {
    let Some(mut primary) = TestServer::start() else {
        return;
    };
    let port = primary.addr().rsplit_once(':').map(|(_, p)| p.to_string());
    let port = port.unwrap_or_default();
    let Some(replica) = TestServer::start_with(&["--replicaof", "127.0.0.1", &port]) else {
        return;
    };
    let (upstreams, metrics) = Upstreams::for_tests(false);
    let upstreams = Arc::new(upstreams);
    let cluster = Arc::new(ClusterState::new());
    // The stale map: the replica is named as the primary.
    cluster.adopt(one_shard(&replica.addr(), &upstreams));
    let router = Router::new(
        cluster.clone(),
        upstreams.clone(),
        metrics,
        RouterConfig::default(),
    );
    // The topology source's part: answer the refresh request with the real primary.
    let source = {
        let (cluster, upstreams, fresh) = (cluster.clone(), upstreams.clone(), primary.addr());
        tokio::spawn(async move {
            cluster.refresh_wanted().await;
            cluster.adopt(one_shard(&fresh, &upstreams));
        })
    };
    let set = Bytes::from_static(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
    let reply = router
        .forwarder()
        .forward(
            None,
            set,
            Some(0),
            true,
            Lane::default(),
            tokio::time::Instant::now(),
        )
        .await;
    assert_eq!(
        &reply[..],
        b"+OK\r\n",
        "{}",
        String::from_utf8_lossy(&reply)
    );
    source.await.expect("the router asked for a refresh");
    assert_eq!(
        primary.call(&[b"GET", b"k"]),
        Reply::Bulk(Some(b"v".to_vec())),
        "written on the fresh primary"
    );
}
