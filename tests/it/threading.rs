//! Both threading models: per core every worker runs its own accept loop, sessions and share of
//! the node connections, shared one runtime runs them all; clients are served correctly either
//! way and node connections stay bounded by `connections_per_node`. `auto` (the default) picks
//! per core while every worker has a connection to every node, and per core the workers' client
//! counts stay even (`placement: even`), a lightly loaded first worker takes them all (`pack`),
//! or, by default (`auto`), clients are packed and pipelining ones then moved to even out.

use std::time::{Duration, Instant};

use crate::support::redcar::check_config_yaml;
use crate::support::{Redcar, RedisCluster, Value};

#[test]
fn per_core_workers_serve_concurrent_pipelines_in_order() {
    serves_concurrent_pipelines_in_order("per-core", "even");
}

#[test]
fn packed_per_core_workers_serve_concurrent_pipelines_in_order() {
    serves_concurrent_pipelines_in_order("per-core", "pack");
}

#[test]
fn the_shared_runtime_serves_concurrent_pipelines_in_order() {
    serves_concurrent_pipelines_in_order("shared", "even");
}

fn serves_concurrent_pipelines_in_order(model: &str, placement: &str) {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &[
            "--threading",
            model,
            "--workers",
            "2",
            "--placement",
            placement,
        ],
    );
    assert!(
        redcar.log().contains(&format!("threading: {model}")),
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
    // Each of the 3 primaries: at most 2 connections (the default per node); per core one on
    // each worker, however the clients landed on the workers (up to 4 per node when every
    // worker opened its own).
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

#[test]
fn auto_runs_per_core_while_every_worker_has_a_connection_per_node_and_shared_beyond() {
    let cluster = RedisCluster::start(3, 0);
    let per_core = Redcar::start_with(&cluster.seeds(), &["--workers", "2"]);
    assert!(
        per_core.log().contains("threading: per-core") && per_core.log().contains("auto"),
        "{}",
        per_core.log()
    );
    assert_eq!(per_core.cmd(&["SET", "auto:k", "1"]), Value::simple("OK"));
    assert_eq!(
        per_core.metric_sum("redcar_workers{threading=\"per-core\"}"),
        2.0
    );
    let shared = Redcar::start_with(
        &cluster.seeds(),
        &["--workers", "3", "--connections-per-node", "2"],
    );
    assert!(
        shared.log().contains("threading: shared"),
        "{}",
        shared.log()
    );
    assert_eq!(shared.cmd(&["GET", "auto:k"]), Value::bulk("1"));
    // Only per-core workers count their clients.
    let (_, metrics) = shared.http_get("/metrics").expect("scrape");
    assert!(!metrics.contains("redcar_worker_clients{"), "{metrics}");
    assert!(
        metrics.contains("redcar_workers{threading=\"shared\"} 3"),
        "{metrics}"
    );
}

#[test]
fn per_core_workers_take_turns_so_their_client_counts_stay_even() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = two_workers_placed(&cluster, "even");
    // Twelve idle clients, connected one after another: whichever worker the kernel wakes, one
    // that is two clients ahead waits for the other.
    let clients: Vec<_> = (0..12)
        .map(|_| {
            let mut c = redcar.client();
            assert_eq!(c.cmd(&["PING"]).expect("ping"), Value::simple("PONG"));
            c
        })
        .collect();
    let counts: Vec<f64> = (0..2)
        .map(|w| redcar.metric_sum(&format!("redcar_worker_clients{{worker=\"{w}\"}}")))
        .collect();
    assert_eq!(counts.iter().sum::<f64>(), 12.0, "{counts:?}");
    assert!((counts[0] - counts[1]).abs() <= 2.0, "{counts:?}");
    // `/clients` names each client's worker.
    let (_, listing) = redcar.http_get("/clients").expect("/clients");
    assert_eq!(listing.matches("\"worker\":").count(), 12, "{listing}");
    // Departed clients leave the counts.
    drop(clients);
    let deadline = Instant::now() + Duration::from_secs(10);
    while redcar.metric_sum("redcar_worker_clients{") > 0.0 {
        assert!(
            Instant::now() < deadline,
            "counts stay after the clients left"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn packed_workers_fill_the_first_until_it_is_busy() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = two_workers_placed(&cluster, "pack");
    // Idle clients cost the first worker no time: it takes every one of them, where `even`
    // would have split them 6 / 6.
    let mut clients: Vec<_> = (0..12).map(|_| redcar.client()).collect();
    for c in &mut clients {
        assert_eq!(c.cmd(&["PING"]).expect("ping"), Value::simple("PONG"));
    }
    let counts = |redcar: &Redcar| -> Vec<f64> {
        (0..2)
            .map(|w| redcar.metric_sum(&format!("redcar_worker_clients{{worker=\"{w}\"}}")))
            .collect()
    };
    assert_eq!(counts(&redcar), vec![12.0, 0.0]);
    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    assert!(
        metrics.contains("redcar_worker_busy_ratio{worker=\"1\"}"),
        "{metrics}"
    );
    // Keep the first worker busy (pipelines of 200 GETs back to back from its clients) until
    // its busy share passes the mark: the next clients then go to the second worker.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = clients
        .drain(..)
        .map(|mut c| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let pipeline: Vec<Vec<String>> = (0..200)
                    .map(|i| vec!["GET".to_string(), format!("pack:{i}")])
                    .collect();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    c.pipeline(&pipeline).expect("pipeline");
                }
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut late = Vec::new();
    while counts(&redcar)[1] == 0.0 {
        assert!(
            Instant::now() < deadline,
            "the second worker took no client while the first was busy: {:?}",
            redcar.http_get("/metrics")
        );
        let mut c = redcar.client();
        assert_eq!(c.cmd(&["PING"]).expect("ping"), Value::simple("PONG"));
        late.push(c);
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for thread in load {
        thread.join().expect("load thread");
    }
}

#[test]
fn auto_placement_packs_clients_and_moves_pipelining_ones_to_even_them_out() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = two_workers_placed(&cluster, "auto");
    let on_worker = |redcar: &Redcar, w: usize| {
        redcar.metric_sum(&format!("redcar_worker_clients{{worker=\"{w}\"}}"))
    };
    let pipelining = |redcar: &Redcar, w: usize| {
        redcar.metric_sum(&format!(
            "redcar_worker_pipelining_clients{{worker=\"{w}\"}}"
        ))
    };
    // Idle clients cost the first worker nothing: packed there, all eight.
    let mut clients: Vec<_> = (0..8).map(|_| redcar.client()).collect();
    for c in &mut clients {
        assert_eq!(c.cmd(&["PING"]).expect("ping"), Value::simple("PONG"));
    }
    assert_eq!((on_worker(&redcar, 0), on_worker(&redcar, 1)), (8.0, 0.0));
    assert_eq!(redcar.metric_sum("redcar_placement_packing "), 1.0);
    // Six pipeline 40 commands at a time, two send one at a time. Every reply is checked, in
    // order, while the sessions move: each pipeline writes values unique to its round.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(client, mut c)| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let depth = if client < 6 { 20 } else { 1 };
                let mut round = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut pipeline = Vec::new();
                    for i in 0..depth {
                        let key = format!("mv:{client}:{i}");
                        pipeline.push(vec!["SET".to_string(), key.clone(), format!("{round}-{i}")]);
                        pipeline.push(vec!["GET".to_string(), key]);
                    }
                    let replies = c.pipeline(&pipeline).expect("pipeline");
                    for i in 0..depth {
                        assert_eq!(replies[2 * i], Value::simple("OK"));
                        assert_eq!(replies[2 * i + 1], Value::bulk(format!("{round}-{i}")));
                    }
                    round += 1;
                }
                // WAIT counts the client's writes on every connection they took, before and
                // after its moves: the replica has them all.
                assert_eq!(c.cmd(&["WAIT", "1", "5000"]).expect("wait"), Value::Int(1));
                (round, c)
            })
        })
        .collect();
    // The pipelining sessions are found and moved until both workers hold as many (within one).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (p0, p1) = (pipelining(&redcar, 0), pipelining(&redcar, 1));
        if p0 + p1 == 6.0 && (p0 - p1).abs() <= 1.0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "pipelining clients {p0} / {p1}: {:?}",
            redcar.http_get("/metrics")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let moved = redcar.metric_sum("redcar_sessions_moved_total{reason=\"pipelining\"}");
    assert!(moved >= 2.0, "moved {moved}");
    assert!(
        on_worker(&redcar, 1) >= 2.0,
        "{:?}",
        redcar.http_get("/metrics")
    );
    let (_, listing) = redcar.http_get("/clients").expect("/clients");
    assert!(listing.contains("\"worker\":1"), "{listing}");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let clients: Vec<_> = load
        .into_iter()
        .map(|thread| {
            let (rounds, c) = thread.join().expect("load thread");
            assert!(rounds > 0);
            c
        })
        .collect();
    // Moves are not departures: the counts still add up to the eight clients.
    assert_eq!(on_worker(&redcar, 0) + on_worker(&redcar, 1), 8.0);
    drop(clients);
}

/// redcar with two per-core workers and `placement`, which its start-up log names.
fn two_workers_placed(cluster: &RedisCluster, placement: &str) -> Redcar {
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &[
            "--threading",
            "per-core",
            "--workers",
            "2",
            "--placement",
            placement,
        ],
    );
    assert!(
        redcar.log().contains(&format!("placement=\"{placement}\"")),
        "{}",
        redcar.log()
    );
    redcar
}
