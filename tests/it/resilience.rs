//! Failures under load: a replica killed and restarted, a manual failover, a primary killed, a
//! slot migrated and a replica hung, each while a writer and readers run through redcar. The
//! contract: no client errors when a replica dies, errors only while a shard has no primary,
//! and no acknowledged write lost. Each test prints one `RESILIENCE` summary line (run with
//! `--nocapture`); docs/resilience.md tabulates them.

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::load::{ms_after, verify, Load, LoadOptions, LoadReport, Written};
use crate::support::{signal, Redcar, RedisCluster, RedisServer, Resume, Value};

/// Load before, during and after each event.
const PHASE: Duration = Duration::from_secs(3);
/// redcar's default `router.op_timeout`, which these tests keep.
const OP_TIMEOUT: Duration = Duration::from_secs(1);
/// Slack on a measured instant: the test polls /topology every 50 ms, and on a loaded 2-core
/// machine a thread may wait a little for the CPU before it records what it saw.
const SLACK: Duration = Duration::from_millis(250);

/// Every acknowledged write that a fresh redcar reading from primaries cannot find with its value.
fn lost_writes(cluster: &RedisCluster, written: &[Written]) -> Vec<(String, String, String)> {
    let checker = Redcar::start_with(&cluster.seeds(), &["--read-policy", "primary"]);
    verify(&checker.addr(), written)
}

/// `cmdstat_get` calls on `node` (zero when it never served a GET since it started).
fn get_calls(node: &RedisServer) -> u64 {
    node.info_field("commandstats", "cmdstat_get")
        .and_then(|stat| {
            stat.split(',')
                .find_map(|kv| kv.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// The sum of every series of the counter `name` in redcar's /metrics.
fn metric_sum(redcar: &Redcar, name: &str) -> u64 {
    metric_sum_with(redcar, name, "")
}

/// The sum of the series of the counter `name` whose labels contain `label` (e.g. `kind="ask"`).
fn metric_sum_with(redcar: &Redcar, name: &str, label: &str) -> u64 {
    let (status, body) = redcar.http_get("/metrics").expect("scrape /metrics");
    assert_eq!(status, 200, "/metrics: {body}");
    body.lines()
        .filter(|l| {
            l.strip_prefix(name).is_some_and(|rest| {
                (rest.starts_with('{') || rest.starts_with(' ')) && rest.contains(label)
            })
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// The lines of /metrics for `name` (for messages).
fn metric_lines(redcar: &Redcar, name: &str) -> String {
    let (_, body) = redcar.http_get("/metrics").expect("scrape /metrics");
    body.lines()
        .filter(|l| l.starts_with(name))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The primary redcar's /topology names for `slot`.
fn redcar_primary_for_slot(redcar: &Redcar, slot: u16) -> Option<String> {
    let (_, body) = redcar.http_get("/topology").ok()?;
    let topology: serde_json::Value = serde_json::from_str(&body).ok()?;
    topology["ranges"].as_array()?.iter().find(|r| {
        r["start"].as_u64() <= Some(u64::from(slot)) && Some(u64::from(slot)) <= r["end"].as_u64()
    })?["primary"]["addr"]
        .as_str()
        .map(str::to_string)
}

/// "first..last ms after `since`", or "-" when there were no errors.
fn window(report: &LoadReport, since: Instant) -> String {
    match report.error_span_ms(since) {
        Some((a, b)) => format!("{a}..{b}ms"),
        None => "-".to_string(),
    }
}

/// Asserts the load saw no error of any kind and no acknowledged write went missing.
fn assert_clean(
    scenario: &str,
    report: &LoadReport,
    lost: &[(String, String, String)],
    t0: Instant,
    log: &str,
) {
    assert!(
        report.reads_ok > 0 && !report.acked.is_empty(),
        "{scenario}: the load did nothing ({} reads ok, {} acknowledged writes)",
        report.reads_ok,
        report.acked.len()
    );
    assert!(
        report.errors().is_empty(),
        "{scenario}: clients saw errors (times relative to the event):\n{}\nredcar log tail:\n{}",
        report.error_samples(t0),
        tail(log, 40)
    );
    assert!(
        lost.is_empty(),
        "{scenario}: {} acknowledged writes lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Scenario 1: with reads on replicas, a replica is SIGKILLed and later restarted. Reads fail
/// over to the primary without the client noticing; the restarted replica takes reads again.
#[test]
fn replica_kill() {
    let mut cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--read-policy", "prefer-replica"]);
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let tag = cluster.key_on_node("rk", primary);
    let load = Load::start(LoadOptions::new(redcar.addr()).focus(tag));

    thread::sleep(PHASE);
    // Otherwise the test proves nothing: the replica under test did serve the reads.
    let gets_before = get_calls(cluster.node_by_port(replica));
    assert!(
        gets_before > 0,
        "no GET reached replica {replica} before the kill"
    );
    cluster.node_by_port_mut(replica).kill();
    let killed = Instant::now();
    thread::sleep(PHASE);
    cluster.node_by_port_mut(replica).restart();
    thread::sleep(PHASE);
    let report = load.stop();
    // The restarted replica has fresh counters: any GET means redcar brought it back.
    let gets_after = get_calls(cluster.node_by_port(replica));

    let lost = lost_writes(&cluster, &report.acked);
    eprintln!(
        "{} replica_gets_before_kill={gets_before} replica_gets_after_restart={gets_after} \
         ejections={}",
        report.summary("replica_kill", lost.len(), &window(&report, killed)),
        metric_sum(&redcar, "redcar_node_ejections_total"),
    );
    if report.stale_reads > 0 {
        eprintln!(
            "replica_kill: {} nil reads of acknowledged keys (replica lag / empty restarted \
             replica), e.g. {:?}",
            report.stale_reads, report.stale_samples
        );
    }
    assert_clean("replica_kill", &report, &lost, killed, &redcar.log());
    assert!(
        gets_after > 0,
        "redcar never sent reads to the restarted replica {replica}\n{}",
        metric_lines(&redcar, "redcar_node_")
    );
}

/// Scenario 2: `CLUSTER FAILOVER` on a replica under load: redcar follows the MOVED replies of
/// the demoted primary; nothing fails, nothing is lost.
fn failover_under_load(scenario: &str, extra: &[&str]) {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), extra);
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let tag = cluster.key_on_node("fo", primary);
    let load = Load::start(LoadOptions::new(redcar.addr()).focus(tag));

    thread::sleep(PHASE);
    let started = Instant::now();
    cluster.failover(replica);
    let took = started.elapsed();
    thread::sleep(PHASE);
    let report = load.stop();

    let lost = lost_writes(&cluster, &report.acked);
    eprintln!(
        "{} failover_ms={} redirects={} retries={}",
        report.summary(scenario, lost.len(), &window(&report, started)),
        took.as_millis(),
        metric_sum(&redcar, "redcar_redirects_total"),
        metric_sum(&redcar, "redcar_retries_total"),
    );
    assert_clean(scenario, &report, &lost, started, &redcar.log());
}

#[test]
fn failover() {
    failover_under_load("failover", &[]);
}

#[test]
fn failover_prefer_replica() {
    failover_under_load(
        "failover_prefer_replica",
        &["--read-policy", "prefer-replica"],
    );
}

/// Scenario 3: a primary is SIGKILLed; the cluster promotes its replica after the node timeout.
/// Errors are allowed only while the shard has no primary redcar knows of (from the kill until
/// redcar adopted the promoted replica, plus one op_timeout for commands already waiting), writes
/// to the shard succeed again soon, and no acknowledged write is lost.
///
/// Acknowledged here means confirmed by `WAIT 1 100` (see [`LoadOptions::wait_groups`]): Redis
/// replicates asynchronously, so a write the primary answered just before SIGKILL may never have
/// reached the replica, and losing it is Redis's doing, not redcar's. Writes answered OK after the
/// kill came from live primaries and must all survive, confirmed or not.
#[test]
fn primary_kill() {
    let mut cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0].port();
    let tag = cluster.key_on_node("pk", primary);
    let slot = cluster.key_slot(&tag);
    // Each slot's shard (by its primary at the start) gets its own writer connection, so WAIT
    // on a connection asks one primary only.
    let mut groups = vec![0u16; 16384];
    for r in cluster.slot_map() {
        for s in r.start..=r.end {
            groups[usize::from(s)] = r.primary;
        }
    }
    let load = Load::start(
        LoadOptions::new(redcar.addr())
            .focus(tag.clone())
            .wait_for_replica(groups),
    );

    thread::sleep(PHASE);
    // Errors may start the moment the signal is sent; `dead` is when the process is surely gone.
    let killed = Instant::now();
    cluster.node_by_port_mut(primary).kill();
    let dead = Instant::now();
    let want = format!("127.0.0.1:{replica}");
    let adopt_deadline = killed + Duration::from_secs(20);
    // When the replica took over (its own word), to tell the cluster's delay from redcar's.
    let mut promoted: Option<Instant> = None;
    let adopted = loop {
        if promoted.is_none()
            && cluster
                .node_by_port(replica)
                .info_field("replication", "role")
                .as_deref()
                == Some("master")
        {
            promoted = Some(Instant::now());
        }
        if redcar_primary_for_slot(&redcar, slot).as_deref() == Some(want.as_str()) {
            break Instant::now();
        }
        assert!(
            Instant::now() < adopt_deadline,
            "redcar never adopted {want} for slot {slot}\n{}\n{}",
            cluster.describe(),
            tail(&redcar.log(), 40)
        );
        thread::sleep(Duration::from_millis(50));
    };
    thread::sleep(PHASE);
    // The old primary comes back as a replica of the new one, so WAIT can be satisfied again.
    cluster.node_by_port_mut(primary).restart();
    thread::sleep(PHASE);
    let report = load.stop();

    // SET answered OK well after the kill: a live node applied it (the margin covers replies
    // the dying primary had already sent and that were still on their way).
    let after_kill = dead + Duration::from_millis(100);
    let (late, early): (Vec<Written>, Vec<Written>) = report
        .unconfirmed
        .iter()
        .cloned()
        .partition(|w| w.at > after_kill);
    let late_count = late.len();
    let mut must_survive = report.acked.clone();
    must_survive.extend(late);
    let lost = lost_writes(&cluster, &must_survive);
    let lost_unconfirmed = lost_writes(&cluster, &early);
    let focus = format!("{{{tag}}}");
    let shard_write_back = report
        .write_ok_times
        .iter()
        .find(|(at, key)| *at > after_kill && key.starts_with(&focus))
        .map(|(at, _)| *at);
    let back_ms = shard_write_back.map_or(-1, |t| ms_after(killed, t));
    eprintln!(
        "{} promoted_ms={} adopted_ms={} shard_writes_back_ms={back_ms} \
         unconfirmed_after_kill={late_count} unconfirmed_before_kill_lost={} ejections={} \
         retries={}",
        report.summary("primary_kill", lost.len(), &window(&report, killed)),
        promoted.map_or(-1, |t| ms_after(killed, t)),
        ms_after(killed, adopted),
        lost_unconfirmed.len(),
        metric_sum(&redcar, "redcar_node_ejections_total"),
        metric_sum(&redcar, "redcar_retries_total"),
    );
    eprintln!(
        "primary_kill, relative to the kill:\n{}",
        report.error_timeline(killed, Duration::from_millis(500))
    );
    if report.stale_reads > 0 {
        eprintln!(
            "primary_kill: {} nil reads of acknowledged keys, e.g. {:?}",
            report.stale_reads, report.stale_samples
        );
    }

    assert!(
        report.reads_ok > 0 && !report.acked.is_empty(),
        "the load did nothing"
    );
    let allowed_until = adopted + OP_TIMEOUT + SLACK;
    let outside: Vec<String> = report
        .errors()
        .iter()
        .filter(|e| e.at < killed || e.at > allowed_until)
        .take(5)
        .map(|e| format!("{:+}ms {}", ms_after(killed, e.at), e.what))
        .collect();
    assert!(
        outside.is_empty(),
        "errors outside [kill, adopted ({}ms) + op_timeout]: {outside:#?}\n{}\nredcar log tail:\n{}",
        ms_after(killed, adopted),
        report.error_samples(killed),
        tail(&redcar.log(), 40)
    );
    let back = shard_write_back.expect("no write to the shard succeeded after the kill");
    assert!(
        back <= killed + Duration::from_secs(10),
        "writes to the shard came back only {}ms after the kill",
        ms_after(killed, back)
    );
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

/// Scenario 4: a slot holding many of the writer's keys migrates under load, its keys moved in
/// batches while the load runs (so both ASK and then MOVED happen); nothing fails or is lost.
#[test]
fn slot_migration() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    let tag = "mig";
    let (slot, from, to) = crate::redirects::slot_and_another_owner(&cluster, tag);
    let load = Load::start(LoadOptions::new(redcar.addr()).focus(tag));

    thread::sleep(PHASE);
    let started = Instant::now();
    let migration = cluster.start_migration(slot, from, to);
    let mut source = cluster.node_by_port(from).client();
    let slot_arg = slot.to_string();
    let mut moved_keys = 0;
    // A few batches with load in between: reads of moved keys and writes of new keys get ASK.
    for _ in 0..4 {
        let keys = source.q(&["CLUSTER", "GETKEYSINSLOT", &slot_arg, "200"]);
        let keys: Vec<Vec<u8>> = keys
            .as_array()
            .expect("GETKEYSINSLOT")
            .iter()
            .filter_map(|k| k.as_bytes().map(<[u8]>::to_vec))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        cluster.migrate_keys(&migration, &refs);
        moved_keys += refs.len();
        thread::sleep(Duration::from_millis(500));
    }
    cluster.finish_migration(migration);
    let took = started.elapsed();
    thread::sleep(PHASE);
    let report = load.stop();

    let lost = lost_writes(&cluster, &report.acked);
    let ask = metric_sum_with(&redcar, "redcar_redirects_total", "kind=\"ask\"");
    let moved = metric_sum_with(&redcar, "redcar_redirects_total", "kind=\"moved\"");
    eprintln!(
        "{} migration_ms={} keys_moved_in_batches={moved_keys} ask={ask} moved={moved}",
        report.summary("slot_migration", lost.len(), &window(&report, started)),
        took.as_millis(),
    );
    assert!(
        moved_keys > 0,
        "no keys of slot {slot} were moved in batches"
    );
    assert_clean("slot_migration", &report, &lost, started, &redcar.log());
    // Otherwise the test proves nothing: redcar did meet (and follow) both kinds of redirect.
    assert!(
        ask > 0 && moved > 0,
        "no redirects followed\n{}",
        metric_lines(&redcar, "redcar_redirects_total")
    );
}

/// Scenario 5: a replica hangs (SIGSTOP: connections stay open, nothing answers). Hedged reads
/// go to the primary after `hedge_after`, so reads keep succeeding; the replica is ejected.
#[test]
fn replica_hang() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config("router:\n  hedge_after: 20ms\n");
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &[
            "--config",
            config.path_str(),
            "--read-policy",
            "prefer-replica",
            "--op-timeout",
            "1s",
        ],
    );
    let primary = cluster.primary_ports()[0];
    let replica = cluster.replicas_of(primary)[0];
    let pid = replica.pid().expect("replica runs");
    let replica_label = format!("node=\"{}\"", replica.addr());
    let tag = cluster.key_on_node("hg", primary);
    let load = Load::start(LoadOptions::new(redcar.addr()).focus(tag));

    thread::sleep(PHASE);
    let gets_before = get_calls(replica);
    assert!(gets_before > 0, "no GET reached replica before the hang");
    signal(pid, "-STOP");
    let stopped = Instant::now();
    let resume = Resume(pid);
    thread::sleep(PHASE);
    let ejections = metric_sum(&redcar, "redcar_node_ejections_total");
    drop(resume);
    thread::sleep(PHASE);
    let report = load.stop();
    let still_ejected = metric_sum_with(&redcar, "redcar_node_ejected", &replica_label);

    let lost = lost_writes(&cluster, &report.acked);
    eprintln!(
        "{} ejections_during_hang={ejections} hedged={} ejected_at_end={still_ejected}",
        report.summary("replica_hang", lost.len(), &window(&report, stopped)),
        metric_sum(&redcar, "redcar_hedged_reads_total"),
    );
    assert_clean("replica_hang", &report, &lost, stopped, &redcar.log());
    assert!(
        ejections > 0,
        "the hung replica was never ejected\n{}",
        metric_lines(&redcar, "redcar_node_")
    );
    assert_eq!(
        still_ejected,
        0,
        "the resumed replica was not brought back by a health check\n{}",
        metric_lines(&redcar, "redcar_node_")
    );
}

/// A command that outlives `op_timeout` gets redcar's error at its deadline while the commands
/// after it on other nodes are answered; its reply, arriving later, reaches nobody: the next
/// commands of the same client, on the same node connection, get their own replies.
#[test]
fn a_late_reply_after_a_timeout_reaches_nobody() {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start_with(&cluster.seeds(), &["--op-timeout", "300ms"]);
    let ports = cluster.primary_ports();
    let key = cluster.key_on_node("late", ports[0]);
    let other = cluster.key_on_node("late", ports[1]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", &key, "old"]), Value::simple("OK"));
    assert_eq!(c.q(&["SET", &other, "kept"]), Value::simple("OK"));

    let pid = cluster.node_by_port(ports[0]).pid().expect("primary runs");
    signal(pid, "-STOP");
    let resume = Resume(pid);
    let replies = c
        .pipeline(&[vec!["GET", key.as_str()], vec!["GET", other.as_str()]])
        .expect("both replies");
    assert!(
        replies[0].error().is_some_and(|e| e.contains("timed out")),
        "{replies:?}"
    );
    assert_eq!(replies[1], Value::bulk("kept"));
    // The stopped node now answers the GET nobody waits for any more.
    drop(resume);

    assert_eq!(c.q(&["SET", &key, "new"]), Value::simple("OK"));
    let replies = c
        .pipeline(&[
            vec!["GET", key.as_str()],
            vec!["GET", other.as_str()],
            vec!["GET", key.as_str()],
        ])
        .expect("replies");
    assert_eq!(
        replies,
        [Value::bulk("new"), Value::bulk("kept"), Value::bulk("new")]
    );
}
