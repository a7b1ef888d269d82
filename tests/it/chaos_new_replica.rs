//! A replica the cluster is still announcing when redcar reads its map (the last error the chaos
//! soak found): right after a cluster is created, or a node is told `CLUSTER REPLICATE`, the other
//! nodes list the new replica as a primary without slots until gossip brings its role. A map read
//! then has no replica for that shard; the refresher must watch it closely (as it watches a replica
//! left out after a restart), so that with `prefer-replica` the replica serves its shard's reads
//! within about half a second, and a primary frozen a little later does not leave reads timing out
//! on it.

use std::thread;
use std::time::{Duration, Instant};

use crate::chaos_topology::{shard_of, wait_for};
use crate::redirects::write_config;
use crate::support::freeze::read_own_names_while_frozen;
use crate::support::{Redcar, RedisCluster, RedisServer, Value};

/// The soak's case, made deterministic: redcar reads its first map while every node lists the
/// future replica as a primary without slots, the periodic refresh is 30 s away, then the node
/// becomes a replica, syncs, and 1.3 s after every node lists it its primary is frozen for 2 s.
/// Before the fix the map kept no replica for the shard until the frozen primary was ejected
/// (five reads timed out first); now every read is served by the replica.
#[test]
fn a_replica_announced_after_the_first_map_serves_reads_while_its_primary_is_frozen() {
    // A node timeout above the freeze, so the cluster never flags the frozen primary failed.
    let cluster = RedisCluster::start_with(3, 0, 5000);
    let extra = RedisServer::start_cluster_node(5000, &[]);
    let primary = cluster.primary_ports()[0];
    let replica_addr = extra.addr();
    let primary_port = primary.to_string();
    assert_eq!(
        extra.cmd(&["CLUSTER", "MEET", "127.0.0.1", primary_port.as_str()]),
        Value::simple("OK")
    );
    let extra_id = extra.cli(&["CLUSTER", "MYID"]);
    wait_for(
        Duration::from_secs(20),
        "every node knows the new node, as a primary without slots",
        || {
            cluster.nodes().iter().all(|n| {
                cluster.nodes_seen_by(n.port()).is_ok_and(|nodes| {
                    nodes
                        .iter()
                        .any(|x| x.id == extra_id && x.is_primary() && x.slots.is_empty())
                })
            })
        },
    );

    let config = write_config("cluster:\n  refresh_interval: 30s\n");
    let args = [
        "--config",
        config.path_str(),
        "--read-policy",
        "prefer-replica",
        "--op-timeout",
        "300ms",
        "--log-level",
        "info,redcar::cluster::refresh=debug",
    ];
    let redcar = Redcar::start_with(&cluster.seeds(), &args);
    let tag = cluster.key_on_node("nr:reads:", primary);
    let keys: Vec<String> = (0..50).map(|i| format!("{{{tag}}}:{i}")).collect();
    let slot = cluster.key_slot(&keys[0]);
    let mut client = redcar.client();
    for key in &keys {
        assert_eq!(client.q(&["SET", key, key]), Value::simple("OK"));
    }
    assert!(
        shard_of(&redcar, slot).2.is_empty(),
        "the first map has no replica for the shard"
    );

    let primary_id = cluster.node_id(primary);
    let told = Instant::now();
    assert_eq!(
        extra.cmd(&["CLUSTER", "REPLICATE", primary_id.as_str()]),
        Value::simple("OK")
    );
    // Synced and listed by every node (CLUSTER SLOTS skips a replica at offset 0).
    let listed = wait_for(
        Duration::from_secs(30),
        "every node lists the new replica",
        || {
            extra
                .info_field("replication", "master_link_status")
                .as_deref()
                == Some("up")
                && cluster.nodes().iter().all(|n| {
                    cluster.slots_seen_by(n.port()).is_ok_and(|map| {
                        map.iter().any(|r| {
                            r.start <= slot && slot <= r.end && r.replicas.contains(&extra.port())
                        })
                    })
                })
        },
    );
    let in_map = |redcar: &Redcar| shard_of(redcar, slot).2.contains(&replica_addr);
    while !in_map(&redcar) && listed.elapsed() < Duration::from_millis(1300) {
        thread::sleep(Duration::from_millis(25));
    }
    let lag = in_map(&redcar).then(|| listed.elapsed());
    thread::sleep(Duration::from_millis(1300).saturating_sub(listed.elapsed()));

    let pid = cluster.node_by_port(primary).pid().expect("primary runs");
    let (reads, failures) =
        read_own_names_while_frozen(pid, Duration::from_secs(2), &keys, &mut client);
    eprintln!(
        "chaos_new_replica: listed by every node {} ms after CLUSTER REPLICATE, in redcar's map \
         {lag:?} after that; reads={reads} failures={}",
        listed.duration_since(told).as_millis(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "reads failed while the primary was frozen (replica in redcar's map: {lag:?}): {:?}\n{}",
        &failures[..failures.len().min(5)],
        redcar.log()
    );
    assert!(reads > 0);
    assert!(
        lag.is_some(),
        "the replica was not in redcar's map 1.3 s after every node listed it"
    );
}
