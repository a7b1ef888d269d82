//! The refresher against fake nodes on loopback that answer `CLUSTER SLOTS`, `NODES` and `INFO`
//! with a view the test sets (or never answer), and refuse `CLUSTER SHARDS` as Redis 6 does: a
//! frozen node costs one stagger, not the refresh timeout, a node that missed a failover never
//! hands the range back, and a check finds what changed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::cluster::change_check::Probe;
use crate::cluster::ClusterConfig;
use crate::protocol::{Frame, Limits};

#[test]
fn pipelined_replies_are_cut_apart() {
    let limits = Limits::default();
    let reply = Bytes::from_static(
        b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n$5\r\nnodes\r\n+OK\r\n",
    );
    let frames = fetch::split_replies(reply, 3, &limits).expect("three frames");
    assert_eq!(frames[0].as_array().map(<[Frame]>::len), Some(1));
    assert_eq!(
        frames[1].as_bytes().map(|b| b.as_ref()),
        Some(&b"nodes"[..])
    );
    let one = Bytes::from_static(b"*0\r\n");
    assert!(
        fetch::split_replies(one, 2, &limits).is_err(),
        "a reply missing"
    );
}

/// A node of a fake view: `(addr, primary epoch and slot range | primary it replicates)`.
#[derive(Clone)]
struct Fake {
    addr: String,
    role: Role,
}

#[derive(Clone)]
enum Role {
    Primary { epoch: u64, start: u16, end: u16 },
    Replica { of: String },
}

fn id(addr: &str) -> String {
    let port: u16 = addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    format!("{port:040x}")
}

/// What a node that sees `view` answers to `CLUSTER SLOTS`, `NODES` and `INFO` (it has no
/// `CLUSTER SHARDS`, like Redis 6).
#[derive(Clone)]
struct Replies {
    slots: Vec<u8>,
    nodes: Vec<u8>,
    info: Vec<u8>,
}

/// The replies of a node that sees `view`.
fn replies(view: &[Fake]) -> Replies {
    let node = |addr: &str| {
        let (host, port) = addr.rsplit_once(':').unwrap_or((addr, "0"));
        let id = id(addr);
        format!(
            "*3\r\n${}\r\n{host}\r\n:{port}\r\n$40\r\n{id}\r\n",
            host.len()
        )
    };
    let mut slots = String::new();
    let mut ranges = 0;
    let mut nodes = String::new();
    for fake in view {
        let (flags, master, epoch, owned) = match &fake.role {
            Role::Primary { epoch, start, end } => {
                ranges += 1;
                let replicas: Vec<&Fake> = view
                    .iter()
                    .filter(|r| matches!(&r.role, Role::Replica { of } if *of == fake.addr))
                    .collect();
                slots.push_str(&format!(
                    "*{}\r\n:{start}\r\n:{end}\r\n",
                    3 + replicas.len()
                ));
                slots.push_str(&node(&fake.addr));
                for replica in replicas {
                    slots.push_str(&node(&replica.addr));
                }
                ("master", "-".to_string(), *epoch, format!(" {start}-{end}"))
            }
            Role::Replica { of } => ("slave", id(of), 0, String::new()),
        };
        let port = fake.addr.rsplit(':').next().unwrap_or("0");
        nodes.push_str(&format!(
            "{} {}@1{port} {flags} {master} 0 0 {epoch} connected{owned}\n",
            id(&fake.addr),
            fake.addr
        ));
    }
    let epoch = view
        .iter()
        .filter_map(|f| match f.role {
            Role::Primary { epoch, .. } => Some(epoch),
            Role::Replica { .. } => None,
        })
        .max()
        .unwrap_or(0);
    let info = format!(
        "cluster_state:ok\r\ncluster_known_nodes:{}\r\ncluster_current_epoch:{epoch}\r\n",
        view.len()
    );
    Replies {
        slots: format!("*{ranges}\r\n{slots}").into_bytes(),
        nodes: format!("${}\r\n{nodes}\r\n", nodes.len()).into_bytes(),
        info: format!("${}\r\n{info}\r\n", info.len()).into_bytes(),
    }
}

/// What a fake node answers; `None`: it is frozen (accepts, reads, never answers).
type Answers = Arc<Mutex<Option<Replies>>>;

/// The fake's reply to one command.
fn answer(replies: &Replies, command: &[Frame]) -> Vec<u8> {
    let word = |i: usize| {
        command
            .get(i)
            .and_then(Frame::as_bytes)
            .map(|b| String::from_utf8_lossy(b).to_ascii_uppercase())
            .unwrap_or_default()
    };
    match (word(0).as_str(), word(1).as_str()) {
        ("CLUSTER", "SLOTS") => replies.slots.clone(),
        ("CLUSTER", "NODES") => replies.nodes.clone(),
        ("CLUSTER", "INFO") => replies.info.clone(),
        ("CLUSTER", sub) => format!(
            "-ERR Unknown subcommand or wrong number of arguments for '{sub}'. Try CLUSTER HELP.\r\n"
        )
        .into_bytes(),
        (other, _) => format!("-ERR unknown command '{other}'\r\n").into_bytes(),
    }
}

/// A fake node on a free loopback port.
async fn fake_node() -> (String, Answers) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let answers: Answers = Arc::new(Mutex::new(None));
    let shared = answers.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let answers = shared.clone();
            tokio::spawn(async move {
                let mut buf = BytesMut::new();
                let limits = Limits::default();
                while let Ok(n) = socket.read_buf(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    while let Ok(Some(command)) = Frame::parse(&mut buf, &limits) {
                        let replies = answers.lock().map(|a| a.clone()).ok().flatten();
                        let Some(replies) = replies else { continue };
                        let reply = answer(&replies, command.as_array().unwrap_or_default());
                        if socket.write_all(&reply).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, answers)
}

fn set(answers: &Answers, reply: Option<Replies>) {
    if let Ok(mut a) = answers.lock() {
        *a = reply;
    }
}

fn refresher(seeds: Vec<String>) -> Refresher {
    let (upstreams, metrics) = Upstreams::for_tests(false);
    let config = ClusterConfig {
        seeds,
        refresh_timeout: Duration::from_secs(5),
        ..ClusterConfig::default()
    };
    Refresher::new(
        Arc::new(ClusterState::with_config(&config)),
        Arc::new(upstreams),
        Limits::default(),
        metrics,
    )
}

fn owner_of(refresher: &Refresher, slot: u16) -> Option<String> {
    let map = refresher.state.topology()?;
    map.shard(slot).map(|s| s.primary.addr().to_string())
}

fn primary(addr: &str, epoch: u64, start: u16, end: u16) -> Fake {
    let addr = addr.to_string();
    Fake {
        addr,
        role: Role::Primary { epoch, start, end },
    }
}

fn replica(addr: &str, of: &str) -> Fake {
    let (addr, of) = (addr.to_string(), of.to_string());
    Fake {
        addr,
        role: Role::Replica { of },
    }
}

#[tokio::test]
async fn a_frozen_node_costs_one_stagger_not_the_refresh_timeout() {
    let (frozen, frozen_answers) = fake_node().await;
    let (good, good_answers) = fake_node().await;
    let view = [primary(&good, 1, 0, 16383), replica(&frozen, &good)];
    set(&good_answers, Some(replies(&view)));
    set(&frozen_answers, None);
    // No map yet: the seeds are asked (in random order; the frozen one may be first).
    let refresher = refresher(vec![frozen.clone(), good.clone()]);
    let started = Instant::now();
    assert!(
        refresher.refresh_once().await,
        "the good node's map is adopted"
    );
    let took = started.elapsed();
    // One stagger (100 ms) plus a loopback round trip; the old refresher waited the whole
    // refresh_timeout (5 s here) on the frozen node first.
    assert!(took < Duration::from_secs(2), "refresh took {took:?}");
    assert_eq!(owner_of(&refresher, 0), Some(good));
}

#[tokio::test]
async fn nodes_that_missed_a_failover_never_hand_the_range_back() {
    let mut addrs = Vec::new();
    let mut answers = Vec::new();
    for _ in 0..4 {
        let (addr, a) = fake_node().await;
        addrs.push(addr);
        answers.push(a);
    }
    let [a, a2, b, c] = [&addrs[0], &addrs[1], &addrs[2], &addrs[3]];
    let before = replies(&[
        primary(a, 1, 0, 5460),
        replica(a2, a),
        primary(b, 2, 5461, 10922),
        primary(c, 3, 10923, 16383),
    ]);
    // a2 took over with epoch 4; a is its replica now.
    let after = replies(&[
        primary(a2, 4, 0, 5460),
        replica(a, a2),
        primary(b, 2, 5461, 10922),
        primary(c, 3, 10923, 16383),
    ]);
    for node in &answers {
        set(node, Some(before.clone()));
    }
    let refresher = refresher(addrs.clone());
    assert!(refresher.refresh_once().await);
    assert_eq!(owner_of(&refresher, 0).as_deref(), Some(a.as_str()));

    // Only a2 and b have heard of the failover; a (the demoted primary itself, not told yet)
    // and c still describe the old map — c without epochs, as if `CLUSTER NODES` were refused
    // there (an ACL, say). Before, that map's move back to a was not checked at all.
    set(&answers[1], Some(after.clone()));
    set(&answers[2], Some(after));
    let mut blind = before.clone();
    blind.nodes =
        b"-NOPERM this user has no permissions to run the 'cluster|nodes' command\r\n".to_vec();
    set(&answers[3], Some(blind));
    let mut adopted_new = false;
    for round in 0..40 {
        refresher.refresh_once().await;
        let owner = owner_of(&refresher, 0);
        if owner.as_deref() == Some(a2.as_str()) {
            adopted_new = true;
        }
        assert!(
            !(adopted_new && owner.as_deref() == Some(a.as_str())),
            "round {round}: the range went back to the demoted primary {a}"
        );
    }
    assert!(adopted_new, "the failover was never adopted");
    let exposition = refresher.metrics.encode();
    assert!(
        series(
            &refresher,
            "redcar_topology_rejected_total{reason=\"stale\"}"
        ) >= 1.0,
        "the old map was seen and rejected as stale:\n{exposition}"
    );
}

fn series(refresher: &Refresher, series: &str) -> f64 {
    let exposition = refresher.metrics.encode();
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_check_fetches_the_map_only_when_the_view_changed() {
    let (a, a_answers) = fake_node().await;
    let (b, b_answers) = fake_node().await;
    let view = |epoch| replies(&[primary(&a, 1, 0, 8000), primary(&b, epoch, 8001, 16383)]);
    set(&a_answers, Some(view(2)));
    set(&b_answers, Some(view(2)));
    let refresher = refresher(vec![a.clone()]);
    assert!(refresher.refresh_once().await);
    let refreshes = r#"redcar_topology_refreshes_total{result="ok"}"#;
    let unchanged = r#"redcar_topology_checks_total{probe="info",result="unchanged"}"#;
    assert_eq!(series(&refresher, refreshes), 1.0);
    refresher.round(Due::Check(Probe::Info)).await;
    assert_eq!(series(&refresher, unchanged), 1.0);
    assert_eq!(series(&refresher, refreshes), 1.0, "a check, no fetch");
    // These fakes have no EVALSHA: the digest is refused, the map fetched, and later digest
    // checks are made with CLUSTER INFO.
    refresher.round(Due::Check(Probe::Digest)).await;
    let refused = r#"redcar_topology_checks_total{probe="digest",result="failed"}"#;
    assert_eq!(series(&refresher, refused), 1.0);
    assert_eq!(series(&refresher, refreshes), 2.0);
    refresher.round(Due::Check(Probe::Digest)).await;
    assert_eq!(series(&refresher, unchanged), 2.0);
    // A failover bumps an epoch: the check sees it and the new map is fetched.
    set(&a_answers, Some(view(3)));
    set(&b_answers, Some(view(3)));
    refresher.round(Due::Check(Probe::Info)).await;
    let changed = r#"redcar_topology_checks_total{probe="info",result="changed"}"#;
    assert_eq!(series(&refresher, changed), 1.0);
    assert_eq!(series(&refresher, refreshes), 3.0);
    let map = refresher.state.topology().expect("a map");
    assert_eq!(map.shard(9000).map(|s| s.epoch), Some(3));
}

/// A node that refuses the connection failed; one that does not answer within
/// `refresh_timeout` is late. The summary line names them apart.
#[tokio::test]
async fn a_refused_connect_is_a_failure_and_a_frozen_node_is_late() {
    // A port nobody listens on: bound once for a free number, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let refused = format!("127.0.0.1:{port}");
    let (frozen, frozen_answers) = fake_node().await;
    set(&frozen_answers, None);
    let mut refresher = refresher(vec![refused.clone()]);
    let config = ClusterConfig {
        seeds: vec![refused.clone()],
        refresh_timeout: Duration::from_millis(200),
        ..ClusterConfig::default()
    };
    refresher.state = Arc::new(ClusterState::with_config(&config));
    let missed = |r: Result<Topology, super::ask::Missed>| r.err();
    let failed = missed(refresher.fetch_logged(&refused).await);
    assert_eq!(failed, Some(super::ask::Missed::Failed));
    let late = missed(refresher.fetch_logged(&frozen).await);
    assert_eq!(late, Some(super::ask::Missed::Late));
}

#[test]
fn the_summary_line_tells_failed_nodes_from_slow_ones() {
    let failed = vec!["a:1".to_string()];
    assert!(went_past(&["a:1"], &failed)
        .ends_with("that failed (refused, closed or answered an error)"));
    assert!(went_past(&["b:1"], &failed).ends_with("that did not answer in time"));
    assert!(went_past(&["a:1", "b:1"], &failed).ends_with("that failed or did not answer in time"));
}
