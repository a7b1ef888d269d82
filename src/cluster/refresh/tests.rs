//! The refresher against fake nodes on loopback that answer `CLUSTER SLOTS` and `CLUSTER NODES`
//! with a view the test sets (or never answer): a frozen node costs one stagger, not the
//! refresh timeout, and a node that missed a failover never hands the range back.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;
use crate::cluster::ClusterConfig;

#[test]
fn the_two_replies_are_cut_apart() {
    let limits = Limits::default();
    let reply = Bytes::from_static(
        b"*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$9\r\n127.0.0.1\r\n:7000\r\n$5\r\nnodes\r\n",
    );
    let (slots, nodes) = split_replies(reply, &limits).expect("two frames");
    assert_eq!(slots.as_array().map(<[Frame]>::len), Some(1));
    assert_eq!(nodes.as_bytes().map(|b| b.as_ref()), Some(&b"nodes"[..]));
    let one = Bytes::from_static(b"*0\r\n");
    assert!(split_replies(one, &limits).is_err(), "NODES reply missing");
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

/// The pipelined `CLUSTER SLOTS` and `CLUSTER NODES` replies of a node that sees `view`.
fn replies(view: &[Fake]) -> Vec<u8> {
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
    format!("*{ranges}\r\n{slots}${}\r\n{nodes}\r\n", nodes.len()).into_bytes()
}

/// The length of the `CLUSTER NODES` reply at the end of `replies`' output.
fn nodes_len(replies: &[u8]) -> usize {
    let limits = Limits::default();
    let first = reply_frame_len(replies, &limits)
        .ok()
        .flatten()
        .unwrap_or(0);
    replies.len() - first
}

/// What a fake node answers; `None`: it is frozen (accepts, reads, never answers).
type Answers = Arc<Mutex<Option<Vec<u8>>>>;

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
                let mut buf = vec![0u8; 4096];
                // Each read is taken as one pipelined CLUSTER SLOTS + CLUSTER NODES (the
                // refresher's only command on a connection that reads no replicas).
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    let reply = answers.lock().map(|a| a.clone()).ok().flatten();
                    if let Some(reply) = reply {
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

fn set(answers: &Answers, reply: Option<Vec<u8>>) {
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
    Refresher {
        state: Arc::new(ClusterState::with_config(&config)),
        upstreams: Arc::new(upstreams),
        limits: Limits::default(),
        metrics,
    }
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
    // No map yet: the seeds are asked in order, the frozen one first.
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
    let mut blind = before[..before.len() - nodes_len(&before)].to_vec();
    blind.extend_from_slice(
        b"-NOPERM this user has no permissions to run the 'cluster|nodes' command\r\n",
    );
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
        exposition.contains("redcar_topology_rejected_total{reason=\"stale\"}"),
        "the old map was seen and rejected as stale:\n{exposition}"
    );
}
