//! Node connection economy and fault injection: the per-connection in-flight cap, the
//! write-coalescing window, and `router.faults` rules (errors and delays) on a real cluster.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::redcar::redcar_bin;
use crate::support::{Redcar, RedisCluster, Value};

/// A pipeline of `rounds` × (SET, INCR, GET) over keys on every node, and the replies it must get.
fn mixed_pipeline(rounds: usize) -> (Vec<Vec<String>>, Vec<Value>) {
    let mut commands = Vec::new();
    let mut expected = Vec::new();
    for i in 0..rounds {
        let key = format!("economy:{i}");
        let counter = format!("economy:n:{}", i % 7);
        commands.push(vec!["SET".to_string(), key.clone(), i.to_string()]);
        expected.push(Value::simple("OK"));
        commands.push(vec!["INCR".to_string(), counter]);
        expected.push(Value::Int((i / 7 + 1) as i64));
        commands.push(vec!["GET".to_string(), key]);
        expected.push(Value::bulk(i.to_string()));
    }
    (commands, expected)
}

#[test]
fn a_connection_capped_at_one_command_serves_a_pipeline_in_order() {
    let cluster = RedisCluster::start(3, 0);
    let config =
        write_config("upstream:\n  connections_per_node: 1\n  max_in_flight_per_connection: 1\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let (commands, expected) = mixed_pipeline(200);
    let mut c = redcar.client();
    assert_eq!(c.pipeline(&commands).expect("replies"), expected);
    assert!(
        redcar.metric_sum("redcar_node_in_flight_capped_total") >= 1.0,
        "the cap was reached and counted"
    );
}

#[test]
fn a_flush_window_answers_concurrent_pipelines_in_order() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config("upstream:\n  flush_interval: 500us\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let mut c = redcar.client();
            thread::spawn(move || {
                for round in 0..20 {
                    let key = format!("window:{w}:{round}");
                    let replies = c
                        .pipeline(&[
                            vec!["SET", key.as_str(), "a"],
                            vec!["APPEND", key.as_str(), "b"],
                            vec!["GET", key.as_str()],
                        ])
                        .expect("replies");
                    assert_eq!(
                        replies,
                        vec![Value::simple("OK"), Value::Int(2), Value::bulk("ab")]
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
}

#[test]
fn an_injected_error_answers_the_chosen_command_and_nothing_else() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(
        "router:\n  faults:\n    - commands: [get]\n      percentage: 100\n      error: ERR injected fault\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "fault:k", "v"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "fault:k"]).error(), Some("ERR injected fault"));
    assert_eq!(
        c.q(&["STRLEN", "fault:k"]),
        Value::Int(1),
        "other reads pass"
    );
    // The SET reached its node; the GETs never did, and an injected error is not retried.
    let owner = cluster.primary_for_key("fault:k");
    assert_eq!(owner.cmd(&["GET", "fault:k"]), Value::bulk("v"));
    assert_eq!(redcar.metric_sum("redcar_retries_total"), 0.0);
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    assert!(
        metrics.contains("redcar_faults_injected_total{kind=\"error\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_node_scoped_error_leaves_the_other_nodes_alone() {
    let cluster = RedisCluster::start(3, 0);
    let ports = cluster.primary_ports();
    let faulty = cluster.key_on_node("scoped", ports[0]);
    let healthy = cluster.key_on_node("scoped", ports[1]);
    let config = write_config(&format!(
        "router:\n  faults:\n    - node: \"127.0.0.1:{}\"\n      percentage: 100\n      error: ERR node drill\n",
        ports[0]
    ));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    assert_eq!(
        c.q(&["SET", faulty.as_str(), "v"]).error(),
        Some("ERR node drill")
    );
    assert_eq!(c.q(&["SET", healthy.as_str(), "v"]), Value::simple("OK"));
}

#[test]
fn an_injected_delay_holds_the_reply_and_keeps_the_order() {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(
        "router:\n  faults:\n    - commands: [SET]\n      percentage: 100\n      delay: 200ms\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();
    let started = Instant::now();
    let replies = c
        .pipeline(&[vec!["SET", "delay:k", "new"], vec!["GET", "delay:k"]])
        .expect("replies");
    assert!(started.elapsed() >= Duration::from_millis(200));
    // The SET was sent at once, in order: the GET behind it sees its value.
    assert_eq!(replies, vec![Value::simple("OK"), Value::bulk("new")]);
    let undelayed = Instant::now();
    assert_eq!(c.q(&["GET", "delay:k"]), Value::bulk("new"));
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    assert!(
        metrics.contains("redcar_faults_injected_total{kind=\"delay\"} 1"),
        "{metrics}"
    );
    // Only a lower bound is asserted for the delayed command; the GET's time is just reported.
    eprintln!("undelayed GET took {:?}", undelayed.elapsed());
}

#[test]
fn bad_economy_settings_stop_start_up_naming_the_key() {
    let base = "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\n";
    let cases = [
        (
            "upstream:\n  flush_interval: 50ms\n",
            "upstream.flush_interval",
        ),
        (
            "upstream:\n  max_in_flight_per_connection: 0\n",
            "upstream.max_in_flight_per_connection",
        ),
        (
            "router:\n  faults:\n    - {percentage: 101, delay: 1ms}\n",
            "router.faults[0].percentage",
        ),
    ];
    for (yaml, expected) in cases {
        let config = write_config(&format!("{base}{yaml}"));
        let out = Command::new(redcar_bin())
            .args(["--check-config", "--config", config.path_str()])
            .env_remove("REDCAR_CLUSTER")
            .output()
            .expect("run redcar");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(64), "{yaml} → {text}");
        assert!(text.contains(expected), "{yaml}: {expected:?} in {text}");
    }
}
