//! `threading: per-core`: every worker runs its own accept loop, sessions and share of the node
//! connections; clients on different workers are served correctly and node connections stay
//! bounded by `connections_per_node`, as with the shared runtime.

use crate::support::redcar::check_config_yaml;
use crate::support::{Redcar, RedisCluster, Value};

#[test]
fn per_core_workers_serve_concurrent_pipelines_in_order() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--threading", "per-core", "--workers", "2"],
    );
    assert!(
        redcar.log().contains("threading: per-core"),
        "{}",
        redcar.log()
    );
    let clients: Vec<_> = (0..8)
        .map(|client| {
            let mut c = redcar.client();
            std::thread::spawn(move || {
                for round in 0..5 {
                    let mut pipeline = Vec::new();
                    for i in 0..100 {
                        let key = format!("pc:{client}:{i}");
                        let value = format!("{client}-{round}-{i}");
                        pipeline.push(vec!["SET".to_string(), key.clone(), value]);
                        pipeline.push(vec!["GET".to_string(), key]);
                    }
                    let replies = c.pipeline(&pipeline).expect("pipeline");
                    for i in 0..100 {
                        assert_eq!(replies[2 * i], Value::simple("OK"));
                        assert_eq!(
                            replies[2 * i + 1],
                            Value::bulk(format!("{client}-{round}-{i}")),
                            "client {client} round {round} key {i}"
                        );
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.join().expect("client thread");
    }
    // A cross-slot MGET fans out from whichever worker the client landed on.
    let mget = redcar.cmd(&["MGET", "pc:0:1", "pc:7:99", "pc:3:50"]);
    assert_eq!(
        mget,
        Value::Array(Some(vec![
            Value::bulk("0-4-1"),
            Value::bulk("7-4-99"),
            Value::bulk("3-4-50"),
        ]))
    );
    // Each of the 3 primaries: at most 2 connections (the default per node), one on each
    // worker, however the clients landed on the workers (up to 4 per node when every worker
    // opened its own).
    let connections = redcar.metric_sum("redcar_node_connections{");
    assert!(
        (3.0..=6.0).contains(&connections),
        "node connections {connections}"
    );
}

#[test]
fn an_unknown_threading_model_is_refused_at_start_up() {
    let (code, output) = check_config_yaml(
        "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\nthreading: per-thread\n",
    );
    assert_ne!(code, Some(0), "{output}");
    assert!(output.contains("threading"), "{output}");
}
