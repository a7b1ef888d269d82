//! Three upgrades in a row under load (docs/operations.md): persistent RESP2 and RESP3 clients
//! that pipeline INCRs (each reply must be the previous one plus one: nothing lost, nothing
//! doubled), a client that connects per request as PHP does, a BLPOP waiter, a WATCH/MULTI in
//! flight, a client with CLIENT TRACKING, and, with a bumped record version, the fallback that
//! passes only the listeners.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::support::{Redcar, RedisCluster, RespClient, Value};
use crate::upgrade::{upgrade, wait_gone, PidFile};

const PASSWORD: &str = "s3cret";

/// What the load saw.
#[derive(Default)]
struct Tally {
    commands: AtomicU64,
    errors: AtomicU64,
    refused: AtomicU64,
    closed: AtomicU64,
    flushes: AtomicU64,
    first_error: std::sync::Mutex<Option<String>>,
}

impl Tally {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_error.lock().unwrap_or_else(|e| e.into_inner());
        first.get_or_insert(what);
    }
}

/// A persistent client that authenticates (RESP2 `AUTH` or RESP3 `HELLO 3 AUTH`), names
/// itself, and pipelines INCRs of its own counter; returns its id, name and protocol after.
fn pipeliner(
    addr: String,
    resp3: bool,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) -> thread::JoinHandle<(i64, i64, String)> {
    thread::spawn(move || {
        let mut c = RespClient::connect(&addr).expect("connect");
        let name = if resp3 { "pipeliner-3" } else { "pipeliner-2" };
        if resp3 {
            let hello = c.q(&["HELLO", "3", "AUTH", "default", PASSWORD, "SETNAME", name]);
            assert!(!hello.is_error(), "{hello:?}");
        } else {
            assert_eq!(c.q(&["AUTH", PASSWORD]).to_text(), "OK");
            assert_eq!(c.q(&["CLIENT", "SETNAME", name]).to_text(), "OK");
        }
        let id = c.q(&["CLIENT", "ID"]).as_int().expect("id");
        let key = format!("counter:{name}");
        let mut last = 0i64;
        while !stop.load(Ordering::Relaxed) {
            let batch: Vec<Vec<&str>> = (0..8).map(|_| vec!["INCR", key.as_str()]).collect();
            match c.pipeline(&batch) {
                Ok(replies) => {
                    for reply in replies {
                        tally.commands.fetch_add(1, Ordering::Relaxed);
                        match reply.as_int() {
                            Some(n) if n == last + 1 => last = n,
                            _ => tally.error(format!("{name}: after {last} got {reply:?}")),
                        }
                    }
                }
                Err(e) => {
                    tally.closed.fetch_add(1, Ordering::Relaxed);
                    tally.error(format!("{name}: {e}"));
                    break;
                }
            }
        }
        let same_id = c.q(&["CLIENT", "ID"]).as_int().unwrap_or(-1);
        let hello = c.q(&["HELLO"]);
        let proto = if format!("{hello:?}").contains("\"proto\", :3") {
            3
        } else {
            2
        };
        assert_eq!(same_id, id, "{name} kept its client id");
        (same_id, proto, c.q(&["CLIENT", "GETNAME"]).to_text())
    })
}

/// Connects, authenticates, INCRs and disconnects, over and over (a PHP worker's pattern).
fn per_request(addr: String, stop: Arc<AtomicBool>, tally: Arc<Tally>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut last = 0i64;
        while !stop.load(Ordering::Relaxed) {
            let mut c = match RespClient::connect(&addr) {
                Ok(c) => c,
                Err(e) => {
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                    tally.error(format!("connect: {e}"));
                    continue;
                }
            };
            let replies =
                c.pipeline(&[vec!["AUTH", PASSWORD], vec!["INCR", "counter:per-request"]]);
            tally.commands.fetch_add(2, Ordering::Relaxed);
            match replies.as_deref() {
                Ok([ok, Value::Int(n)]) if ok.to_text() == "OK" && *n == last + 1 => last = *n,
                other => {
                    tally.error(format!("per request: after {last} got {other:?}"));
                    // Count on from what the node says, so one error is counted once.
                    if let Ok([_, Value::Int(n)]) = other {
                        last = *n;
                    }
                }
            }
        }
    })
}

/// BLPOPs with a short timeout: each must answer nil (nothing is pushed) or the value.
fn blpop_waiter(addr: String, stop: Arc<AtomicBool>, tally: Arc<Tally>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut c = RespClient::connect(&addr).expect("connect");
        assert_eq!(c.q(&["AUTH", PASSWORD]).to_text(), "OK");
        while !stop.load(Ordering::Relaxed) {
            match c.cmd(&["BLPOP", "upgrade:queue", "0.3"]) {
                Ok(v) if v.is_nil() || v.as_array().is_some() => {
                    tally.commands.fetch_add(1, Ordering::Relaxed)
                }
                other => {
                    tally.error(format!("BLPOP: {other:?}"));
                    break;
                }
            };
        }
    })
}

/// WATCH, a read, a pause, MULTI, a write, a pause, EXEC: nobody else writes the key, so EXEC
/// must always run (an array, never nil).
fn watcher(addr: String, stop: Arc<AtomicBool>, tally: Arc<Tally>) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut c = RespClient::connect(&addr).expect("connect");
        assert_eq!(c.q(&["AUTH", PASSWORD]).to_text(), "OK");
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let value = n.to_string();
            let steps: [&[&str]; 3] = [&["WATCH", "{w}k"], &["GET", "{w}k"], &["MULTI"]];
            for step in steps {
                if let Err(e) = c.cmd(step) {
                    tally.error(format!("{step:?}: {e}"));
                    return;
                }
            }
            thread::sleep(Duration::from_millis(20));
            let queued = c.cmd(&["SET", "{w}k", &value]);
            thread::sleep(Duration::from_millis(20));
            let exec = c.cmd(&["EXEC"]);
            tally.commands.fetch_add(5, Ordering::Relaxed);
            match (&queued, &exec) {
                (Ok(q), Ok(Value::Array(Some(items))))
                    if q.to_text() == "QUEUED" && items.len() == 1 => {}
                _ => tally.error(format!("transaction {n}: {queued:?} then {exec:?}")),
            }
        }
    })
}

/// RESP3 with CLIENT TRACKING on, reading a key over and over; a flush (null invalidation)
/// after a move is counted, never taken for a reply. Returns whether tracking is still on.
fn tracker(addr: String, stop: Arc<AtomicBool>, tally: Arc<Tally>) -> thread::JoinHandle<bool> {
    thread::spawn(move || {
        let mut c = RespClient::connect(&addr).expect("connect");
        let hello = c.q(&["HELLO", "3", "AUTH", "default", PASSWORD]);
        assert!(!hello.is_error());
        assert_eq!(c.q(&["CLIENT", "TRACKING", "on"]).to_text(), "OK");
        while !stop.load(Ordering::Relaxed) {
            if let Err(e) = c.send(&["GET", "tracked"]) {
                tally.error(format!("tracking: {e}"));
                return false;
            }
            loop {
                match c.read_reply() {
                    Ok(Value::Array(Some(items)))
                        if items.first().is_some_and(|i| i.to_text() == "invalidate") =>
                    {
                        tally.flushes.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(v) if v.is_nil() => break,
                    other => {
                        tally.error(format!("tracking GET: {other:?}"));
                        return false;
                    }
                }
            }
            tally.commands.fetch_add(1, Ordering::Relaxed);
            thread::sleep(Duration::from_millis(5));
        }
        let info = c.q(&["CLIENT", "TRACKINGINFO"]);
        format!("{info:?}").contains("\"on\"")
    })
}

#[test]
fn three_upgrades_in_a_row_under_load_lose_nothing_and_refuse_no_one() {
    let cluster = RedisCluster::start(3, 0);
    let pid_file = PidFile::new();
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg(), "--requirepass", PASSWORD],
    );
    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let addr = redcar.addr();
    let p2 = pipeliner(addr.clone(), false, stop.clone(), tally.clone());
    let p3 = pipeliner(addr.clone(), true, stop.clone(), tally.clone());
    let others = vec![
        per_request(addr.clone(), stop.clone(), tally.clone()),
        blpop_waiter(addr.clone(), stop.clone(), tally.clone()),
        watcher(addr.clone(), stop.clone(), tally.clone()),
    ];
    let tracking = tracker(addr.clone(), stop.clone(), tally.clone());
    thread::sleep(Duration::from_millis(500));
    let mut pids = vec![redcar.pid().expect("running")];
    for round in 1..=3 {
        let before = tally.commands.load(Ordering::Relaxed);
        let old = *pids.last().expect("a pid");
        let (code, out) = upgrade(&pid_file.path);
        assert_eq!(code, 0, "upgrade {round}: {out}\nlog:\n{}", redcar.log());
        let new = pid_file.pid().expect("pid");
        assert_ne!(new, old, "upgrade {round}");
        pids.push(new);
        // The old process is gone within drain_timeout (10 s) once its clients moved.
        wait_gone(old, Duration::from_secs(12), || redcar.log());
        thread::sleep(Duration::from_millis(300));
        assert!(
            tally.commands.load(Ordering::Relaxed) > before,
            "load flows after upgrade {round}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let (id2, proto2, name2) = p2.join().expect("RESP2 pipeliner");
    let (id3, proto3, name3) = p3.join().expect("RESP3 pipeliner");
    for t in others {
        t.join().expect("load thread");
    }
    let still_tracking = tracking.join().expect("tracker");
    let summary = format!(
        "commands {} errors {} refused {} closed {} flushes {} first error {:?}",
        tally.commands.load(Ordering::Relaxed),
        tally.errors.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
        tally.closed.load(Ordering::Relaxed),
        tally.flushes.load(Ordering::Relaxed),
        tally
            .first_error
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default(),
    );
    println!("upgrade under load: {summary}; pids {pids:?}");
    assert_eq!(
        tally.errors.load(Ordering::Relaxed),
        0,
        "{summary}\nlog:\n{}",
        redcar.log()
    );
    assert_eq!((proto2, name2.as_str()), (2, "pipeliner-2"));
    assert_eq!((proto3, name3.as_str()), (3, "pipeliner-3"));
    assert!(id2 > 0 && id3 > 0);
    assert!(
        still_tracking,
        "CLIENT TRACKING is still on after three moves"
    );
    assert!(
        tally.flushes.load(Ordering::Relaxed) >= 3,
        "a flush per move: {summary}"
    );
    let log = redcar.log();
    assert_eq!(
        log.matches("upgrade: handover finished").count(),
        3,
        "{log}"
    );
}

#[test]
fn a_new_process_that_reads_no_record_version_of_ours_takes_the_listeners_and_clients_reconnect() {
    let cluster = RedisCluster::start(3, 0);
    let pid_file = PidFile::new();
    // Passed on to the new process with the environment: it claims to read only a record
    // version no release writes (this process still writes its own).
    let redcar = Redcar::start_with_env(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg()],
        &[("REDCAR_UPGRADE_TEST_VERSIONS", "999-999")],
    );
    let old = redcar.pid().expect("running");
    let mut client = redcar.client();
    assert_eq!(client.q(&["SET", "k", "v"]).to_text(), "OK");
    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 0, "{out}");
    wait_gone(old, Duration::from_secs(12), || redcar.log());
    // The old client was closed at its safe point (reason `version`); a new one is served.
    assert!(client.cmd(&["GET", "k"]).is_err(), "closed, not moved");
    assert_eq!(redcar.client().q(&["GET", "k"]).to_text(), "v");
    assert!(
        redcar.log().contains("passing the listeners only"),
        "{}",
        redcar.log()
    );
}
