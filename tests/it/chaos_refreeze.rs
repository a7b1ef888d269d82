//! A primary frozen again and again (the chaos soak with `--faults primary-stop` froze the same
//! primary every few seconds): each freeze gets it ejected, and its writes must come back within a
//! health check of each SIGCONT. Before, every ejection of a node soon after the last one doubled
//! its ejection time, so from the third freeze on the shard refused writes for seconds after the
//! primary answered again (the soak saw 4 s, and 739 write errors between faults in one 60 s run);
//! a primary's writes have no other node, so its ejections no longer grow (`Health::set_primary`).
//! A replica's still do.

use std::time::{Duration, Instant};

use crate::chaos_topology::wait_for;
use crate::redirects::write_config;
use crate::support::{signal, Redcar, RedisCluster, Resume, Value};

/// Three freezes of one primary, each until redcar ejected it, with writes to its shard
/// throughout: every ejection lasts the base time (500 ms; the event log says so), and after
/// each SIGCONT writes come back once a health check (every 100 ms) finds the node. Before the
/// fix the third freeze's ejection lasted 2 s and writes came back about 1.9 s after SIGCONT.
/// The test waits for the events (the ejection, the first write that succeeds), not for times,
/// so a busy machine that slows every step down does not fail it.
#[test]
fn a_primary_frozen_again_and_again_gets_its_writes_back_after_each_freeze() {
    // A node timeout above the freezes: the cluster never fails the primary over.
    let cluster = RedisCluster::start_with(3, 1, 5000);
    let config = write_config(
        "upstream:\n  outlier:\n    consecutive_failures: 3\n    base_ejection_time: 500ms\n    \
         max_ejection_time: 30s\n    health_check_interval: 100ms\n",
    );
    let args = [
        "--config",
        config.path_str(),
        "--read-policy",
        "prefer-replica",
        "--op-timeout",
        "300ms",
    ];
    let redcar = Redcar::start_with(&cluster.seeds(), &args);
    let primary = cluster.primary_ports()[0];
    let key = cluster.key_on_node("rf:key:", primary);
    let mut client = redcar.client();
    assert_eq!(client.q(&["SET", key.as_str(), "0"]), Value::simple("OK"));
    let pid = cluster.node_by_port(primary).pid().expect("primary runs");
    let ejections = |log: &str| -> Vec<String> {
        log.lines()
            .filter(|l| l.contains("node ejected") && l.contains(&format!("127.0.0.1:{primary}")))
            .map(str::to_string)
            .collect()
    };

    for round in 0..3 {
        signal(pid, "-STOP");
        let resume = Resume(pid);
        let mut failed = 0;
        wait_for(
            Duration::from_secs(60),
            "the frozen primary is ejected",
            || {
                if !client
                    .cmd(&["SET", key.as_str(), "frozen"])
                    .is_ok_and(|v| v == Value::simple("OK"))
                {
                    failed += 1;
                }
                ejections(&redcar.log()).len() > round
            },
        );
        drop(resume);
        let resumed = Instant::now();
        let mut last = None;
        wait_for(
            Duration::from_secs(60),
            "writes come back",
            || match client.cmd(&["SET", key.as_str(), "back"]) {
                Ok(v) if v == Value::simple("OK") => true,
                other => {
                    last = Some(format!("{other:?}"));
                    false
                }
            },
        );
        eprintln!(
            "chaos_refreeze round {round}: {failed} writes failed during the freeze, writes back \
             {} ms after SIGCONT (last error: {last:?})",
            resumed.elapsed().as_millis()
        );
        assert!(
            failed > 0,
            "round {round}: the freeze did not fail any write"
        );
    }
    let ejected = ejections(&redcar.log());
    assert_eq!(ejected.len(), 3, "each freeze ejects the primary once");
    assert!(
        ejected.iter().all(|line| line.contains("time=500ms")),
        "every ejection of the primary lasts the base time: {ejected:#?}\n{}",
        redcar.log()
    );
}
