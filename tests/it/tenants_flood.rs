//! Several applications on one redcar, continued: a client flooding over its user's rate is
//! paused — redcar stops reading it, so TCP pushes back on the client — and answered at the
//! rate, in order and without an error (docs/security.md, "Tenants": `when_over: slow`); and
//! clients waiting on one user's rate queue up, each command held back once (counted once in
//! `redcar_user_rate_limited_total`), rather than all of them waking at every refill. On the
//! event loop and on the task path (`event_loop: false`).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::{write_config, TempConfig};
use crate::support::resp_client::encode_command;
use crate::support::{Redcar, RedisCluster};
use crate::tenants::login;

/// `slow`: 50 commands a second on each connection (burst 5); `shared`: 100 a second over all
/// its connections (burst 10).
const USERS: &str = "auth:\n  users:\n\
\x20   - name: slow\n      acl: \"on >slow-pw ~* +@all\"\n\
\x20     limits:\n        per_client: {commands_per_second: 50, burst: 5}\n\
\x20   - name: shared\n      acl: \"on >shared-pw ~* +@all\"\n\
\x20     limits:\n        per_user: {commands_per_second: 100, burst: 10}\n";

fn start(event_loop: bool) -> (RedisCluster, Redcar, TempConfig) {
    let cluster = RedisCluster::start(3, 0);
    let config = write_config(&format!("event_loop: {event_loop}\n{USERS}"));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    (cluster, redcar, config)
}

fn user_figure(redcar: &Redcar, name: &str, user: &str) -> f64 {
    redcar.metric_sum(&format!("{name}{{user=\"{user}\"}}"))
}

/// 64 MB of `GET flood:key` written in one go, far more than the sockets' buffers hold: the
/// writer blocks as soon as redcar stops reading.
fn paused_and_answered(event_loop: bool) {
    let (_cluster, redcar, _config) = start(event_loop);
    let mut slow = login(&redcar, "slow");
    let read_before = user_figure(&redcar, "redcar_user_received_bytes_total", "slow");
    let chunk = encode_command(&["GET", "flood:key"]).repeat(4096);
    let mut writer = slow.stream().try_clone().expect("clone");
    let written = Arc::new(AtomicUsize::new(0));
    let sender = {
        let written = written.clone();
        thread::spawn(move || {
            while written.load(Ordering::Relaxed) < 64 << 20 {
                if writer.write_all(&chunk).is_err() {
                    return;
                }
                written.fetch_add(chunk.len(), Ordering::Relaxed);
            }
        })
    };
    // Answered at the rate: 5 at once, then 50 a second, each a nil, none an error.
    let started = Instant::now();
    let mut answered = 0;
    while started.elapsed() < Duration::from_secs(2) {
        let reply = slow.read_reply().expect("a reply");
        assert!(reply.is_nil(), "{reply:?}");
        answered += 1;
    }
    assert!((85..=125).contains(&answered), "{answered} in 2 s");
    // Paused: redcar read little more than what it answered (what a parked client may hold)
    // while the writer is stuck with most of its 64 MB.
    let read = user_figure(&redcar, "redcar_user_received_bytes_total", "slow") - read_before;
    let pushed = written.load(Ordering::Relaxed);
    assert!(read < 256.0 * 1024.0, "redcar read {read} bytes");
    assert!(pushed as f64 > read * 4.0, "written {pushed}, read {read}");
    assert!(!sender.is_finished(), "the writer was never pushed back");
    let _ = slow.stream().shutdown(std::net::Shutdown::Both);
    sender.join().expect("writer");
}

/// Eight connections of `shared`, 25 pipelined GETs each: 200 commands over the user's 100 a
/// second (burst 10), every reply a nil, each command held back at most once.
fn queued_on_one_users_rate(event_loop: bool) {
    let (_cluster, redcar, _config) = start(event_loop);
    let mut clients: Vec<_> = (0..8).map(|_| login(&redcar, "shared")).collect();
    let command = encode_command(&["GET", "flood:key"]).repeat(25);
    let started = Instant::now();
    for client in &mut clients {
        client.send_raw(&command).expect("send");
    }
    for client in &mut clients {
        for _ in 0..25 {
            let reply = client.read_reply().expect("a reply");
            assert!(reply.is_nil(), "{reply:?}");
        }
    }
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(1700), "{took:?}");
    assert!(took < Duration::from_secs(8), "{took:?}");
    let held = user_figure(&redcar, "redcar_user_rate_limited_total", "shared");
    assert!((150.0..=200.0).contains(&held), "{held} held back");
}

#[test]
fn a_flooding_client_is_paused_and_answered_at_its_rate_on_the_loop() {
    paused_and_answered(true);
}

#[test]
fn a_flooding_client_is_paused_and_answered_at_its_rate_on_tasks() {
    paused_and_answered(false);
}

#[test]
fn clients_of_one_user_queue_on_its_rate_on_the_loop() {
    queued_on_one_users_rate(true);
}

#[test]
fn clients_of_one_user_queue_on_its_rate_on_tasks() {
    queued_on_one_users_rate(false);
}
