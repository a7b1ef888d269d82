//! A primary frozen again and again (issue 30: the chaos soak with `--faults primary-stop` froze
//! the same primary every few seconds): each freeze gets it ejected, and its writes must come
//! back within a health check of each SIGCONT. Before, every ejection of a node soon after the
//! last one doubled its ejection time, so from the third freeze on the shard refused writes for
//! seconds after the primary answered again (the soak saw 4 s, and 739 write errors between
//! faults in one 60 s run); a primary's writes have no other node, so its ejections no longer
//! grow (`Health::set_primary`). A replica's still do.

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{signal, Redcar, RedisCluster, Resume, Value};

/// Three 1 s freezes of one primary, 1.5 s apart, with writes to its shard throughout: after
/// each SIGCONT a write succeeds within 1.2 s (ejection 500 ms from about 0.9 s into the freeze,
/// then a health check every 100 ms). Before the fix the third freeze's ejection lasted 2 s and
/// writes came back about 1.9 s after SIGCONT.
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

    let mut recoveries = Vec::new();
    for round in 0..3 {
        signal(pid, "-STOP");
        let resume = Resume(pid);
        let frozen = Instant::now();
        let mut failed = 0;
        while frozen.elapsed() < Duration::from_secs(1) {
            if !client
                .cmd(&["SET", key.as_str(), "frozen"])
                .is_ok_and(|v| v == Value::simple("OK"))
            {
                failed += 1;
                // Fast failures once it is ejected: no need to spin.
                thread::sleep(Duration::from_millis(5));
            }
        }
        drop(resume);
        let resumed = Instant::now();
        let mut last = None;
        loop {
            match client.cmd(&["SET", key.as_str(), "back"]) {
                Ok(v) if v == Value::simple("OK") => break,
                other => last = Some(format!("{other:?}")),
            }
            assert!(
                resumed.elapsed() < Duration::from_secs(10),
                "round {round}: writes did not come back: {last:?}\n{}",
                redcar.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
        let took = resumed.elapsed();
        eprintln!(
            "chaos_refreeze round {round}: {failed} writes failed during the freeze, writes back \
             {} ms after SIGCONT (last error: {last:?})",
            took.as_millis()
        );
        assert!(
            failed > 0,
            "round {round}: the freeze did not fail any write"
        );
        recoveries.push(took);
        thread::sleep(Duration::from_millis(1500));
    }
    let ejections = redcar
        .log()
        .lines()
        .filter(|l| l.contains("node ejected") && l.contains(&format!("127.0.0.1:{primary}")))
        .count();
    assert_eq!(ejections, 3, "each freeze ejects the primary once");
    assert!(
        recoveries.iter().all(|t| *t < Duration::from_millis(1200)),
        "writes came back {recoveries:?} after each SIGCONT\n{}",
        redcar.log()
    );
}
