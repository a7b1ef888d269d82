//! Client connection economy: a bound on connected clients, and `client.max_age` closing
//! connections only at safe points so they rebalance behind a load balancer.

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster, RespClient, Value};

#[test]
fn clients_beyond_max_connections_are_told_and_closed() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config("client:\n  max_connections: 3\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut held: Vec<RespClient> = (0..3).map(|_| redcar.client()).collect();
    for c in &mut held {
        assert_eq!(c.q(&["PING"]), Value::simple("PONG"));
    }
    let mut extra = redcar.client();
    extra.set_timeout(Duration::from_secs(5)).expect("timeout");
    let refused = extra.read_reply().expect("an error before the close");
    assert_eq!(
        refused.error(),
        Some("ERR redcar: max number of clients reached (client.max_connections)")
    );
    assert!(extra.read_reply().is_err(), "closed after the error");
    // The ones connected are unaffected; a freed place is taken again.
    assert_eq!(held[0].q(&["SET", "k", "v"]), Value::simple("OK"));
    drop(held.pop());
    // The freed place may take a moment to be noticed: attempts before that are refused too.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut refused_again = 0;
    loop {
        let mut again = redcar.client();
        again.set_timeout(Duration::from_secs(2)).expect("timeout");
        if again.cmd(&["PING"]).ok() == Some(Value::simple("PONG")) {
            break;
        }
        refused_again += 1;
        assert!(
            Instant::now() < deadline,
            "the freed place was never given again"
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        counter(&redcar, "redcar_clients_refused_total"),
        1 + refused_again
    );
}

#[test]
fn max_age_closes_only_at_safe_points_and_loses_no_write() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config("client:\n  max_age: 300ms\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);

    // An idle client is closed once it is old enough.
    let mut idle = redcar.client();
    assert_eq!(idle.q(&["PING"]), Value::simple("PONG"));
    thread::sleep(Duration::from_millis(600));
    idle.set_timeout(Duration::from_secs(2)).expect("timeout");
    assert!(
        idle.read_reply().is_err(),
        "an idle client past max_age is closed"
    );

    // Inside MULTI it is not: the transaction completes, then the client is closed.
    let mut tx = redcar.client();
    assert_eq!(tx.q(&["MULTI"]), Value::simple("OK"));
    thread::sleep(Duration::from_millis(500));
    assert_eq!(tx.q(&["INCR", "{age}tx"]), Value::simple("QUEUED"));
    assert_eq!(tx.q(&["EXEC"]), Value::Array(Some(vec![Value::Int(1)])));

    // A busy client reconnecting whenever it is closed: every acknowledged INCR counted, and no
    // unacknowledged one ran (the close never drops a command it has read).
    let started = Instant::now();
    let (mut acknowledged, mut reconnects) = (0i64, 0u64);
    let mut c = redcar.client();
    while started.elapsed() < Duration::from_millis(1500) {
        match c.cmd(&["INCR", "{age}n"]) {
            Ok(Value::Int(_)) => acknowledged += 1,
            Ok(other) => panic!("unexpected reply {other:?}"),
            Err(_) => {
                reconnects += 1;
                c = redcar.client();
            }
        }
    }
    assert!(
        reconnects >= 2,
        "max_age must have closed the busy client ({reconnects})"
    );
    let total = redcar.cmd(&["GET", "{age}n"]);
    assert_eq!(total, Value::bulk(acknowledged.to_string()));
    assert!(counter(&redcar, "redcar_clients_closed_max_age_total") >= reconnects + 2);
}

/// The value of an unlabelled counter in `/metrics`.
fn counter(redcar: &Redcar, name: &str) -> u64 {
    let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in:\n{metrics}"))
}

#[test]
fn node_connections_nobody_uses_are_closed_and_reopened_on_demand() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config("upstream:\n  idle_timeout: 300ms\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let owner = cluster.primary_for_key("{idle}k").port();
    let open_to_owner = || {
        let (_, metrics) = redcar.http_get("/metrics").expect("metrics");
        let series = format!("redcar_node_connections{{node=\"127.0.0.1:{owner}\"}} ");
        metrics
            .lines()
            .find_map(|line| {
                line.strip_prefix(series.as_str())?
                    .trim()
                    .parse::<i64>()
                    .ok()
            })
            .unwrap_or(0)
    };
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "{idle}k", "v"]), Value::simple("OK"));
    assert!(open_to_owner() >= 1, "a connection is open after use");
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_to_owner() > 0 {
        assert!(
            Instant::now() < deadline,
            "idle node connection never closed"
        );
        thread::sleep(Duration::from_millis(100));
    }
    // The client's own connection to redcar is untouched, and the next command reconnects.
    assert_eq!(c.q(&["GET", "{idle}k"]), Value::bulk("v"));
    assert!(open_to_owner() >= 1);
}

#[test]
fn idle_clients_are_closed_and_active_ones_kept() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config("client:\n  idle_timeout: 400ms\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut active = redcar.client();
    let mut idle = redcar.client();
    assert_eq!(idle.q(&["PING"]), Value::simple("PONG"));
    for _ in 0..10 {
        assert_eq!(
            active.q(&["PING"]),
            Value::simple("PONG"),
            "active client kept"
        );
        thread::sleep(Duration::from_millis(100));
    }
    idle.set_timeout(Duration::from_secs(2)).expect("timeout");
    assert!(idle.read_reply().is_err(), "idle client closed");
}

#[test]
fn new_node_connections_are_rate_limited_per_node() {
    let cluster = RedisCluster::start(3, 1);
    let config = write_config(
        "upstream:\n  max_connects_per_second: 2\n  connect_timeout: 1s\n  dedicated:\n    max: 20\n",
    );
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    // Eight blocking commands at once, each needing a new dedicated connection to one node:
    // two connect at once, the next ones wait their turn (2 per second), and those whose turn
    // is further away than connect_timeout are refused instead of piling onto the node.
    let workers: Vec<_> = (0..8)
        .map(|_| {
            let mut c = redcar.client();
            thread::spawn(move || c.q(&["BLPOP", "{storm}q", "2"]))
        })
        .collect();
    let replies: Vec<Value> = workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect();
    let served = replies.iter().filter(|r| **r == Value::Array(None)).count();
    let limited = replies
        .iter()
        .filter(|r| {
            r.error()
                .is_some_and(|e| e.contains("upstream.max_connects_per_second"))
        })
        .count();
    assert_eq!(served + limited, 8, "{replies:?}");
    assert!(served >= 2, "the burst is served: {replies:?}");
    assert!(
        limited >= 1,
        "connects beyond the rate are refused: {replies:?}"
    );
}

/// Whether redcar closed `stream`: a read gives EOF (or a reset) rather than timing out.
fn closed_by_peer(stream: &mut std::net::TcpStream, wait: Duration) -> bool {
    use std::io::Read;
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut byte = [0u8; 64];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(n) => panic!("unexpected bytes from redcar: {:?}", &byte[..n]),
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// The latency watch learns its baseline from this instance's own traffic, so the test sets
/// the latency itself — every GET delayed by a fault rule, 5 ms while the baseline is learnt,
/// then 60 ms — instead of relying on the machine being quiet: on a busy machine the commands'
/// own latency jumps about, and the watch rightly calls that slow (this test used to fail so,
/// its 13 s sleep ending in a baseline the machine's load had moved). It waits for the events:
/// the watch trusting its baseline (its debug log's samples), the reload, the idle client closed.
#[test]
fn close_idle_when_slow_closes_idle_clients_once_latency_jumps() {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    let cluster = RedisCluster::start(3, 0);
    let delayed = |delay: &str| {
        format!(
            "client:\n  close_idle_when_slow: true\nrouter:\n  faults:\n    - commands: [get]\n      \
             percentage: 100\n      delay: {delay}\n"
        )
    };
    let config = write_config(&delayed("5ms"));
    let args = [
        "--config",
        config.path_str(),
        "--log-level",
        "info,redcar::downstream::slow=debug",
    ];
    let redcar = Redcar::start_with(&cluster.seeds(), &args);

    // An idle client, connected before anything is slow.
    let mut idle = std::net::TcpStream::connect(redcar.addr()).expect("connect");
    idle.write_all(b"PING\r\n").expect("ping");
    let mut pong = [0u8; 7];
    std::io::Read::read_exact(&mut idle, &mut pong).expect("pong");
    assert_eq!(&pong, b"+PONG\r\n");

    // Steady traffic (well over 20 commands a second even at 60 ms each), reconnecting if closed.
    let stop = Arc::new(AtomicBool::new(false));
    let reconnects = Arc::new(AtomicU64::new(0));
    let traffic: Vec<_> = (0..4)
        .map(|t| {
            let (stop, reconnects, addr) = (stop.clone(), reconnects.clone(), redcar.addr());
            thread::spawn(move || {
                let mut c = RespClient::connect(&addr).expect("connect");
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    if c.cmd(&["GET", &format!("slow:{t}:{}", i % 50)]).is_err() {
                        reconnects.fetch_add(1, Ordering::Relaxed);
                        c = RespClient::connect(&addr).expect("reconnect");
                    }
                }
            })
        })
        .collect();

    // The baseline is trusted once the watch has taken 11 samples; nothing is slow yet.
    crate::chaos_topology::wait_for(Duration::from_secs(60), "a trusted baseline", || {
        redcar.log().contains("trusted=true")
    });
    assert!(
        !redcar.log().contains("latency state changed"),
        "the watch called 5 ms steady latency slow; log:\n{}",
        redcar.log()
    );
    assert!(
        !closed_by_peer(&mut idle, Duration::from_millis(100)),
        "an idle client was closed while latency was steady"
    );
    assert_eq!(reconnects.load(Ordering::Relaxed), 0);

    // Every GET now takes 60 ms: more than twice the baseline and over the 1 ms floor.
    std::fs::write(config.path_str(), delayed("60ms")).expect("rewrite config");
    let pid = redcar.pid().expect("redcar runs");
    crate::support::signal(pid, "-HUP");
    crate::chaos_topology::wait_for(Duration::from_secs(60), "the idle client closed", || {
        closed_by_peer(&mut idle, Duration::from_millis(100))
    });
    stop.store(true, Ordering::Relaxed);
    for t in traffic {
        t.join().expect("traffic");
    }
    assert!(counter(&redcar, "redcar_clients_closed_slow_total") >= 1);
    assert!(
        redcar.log().contains("latency state changed"),
        "the change of state is logged"
    );
}
