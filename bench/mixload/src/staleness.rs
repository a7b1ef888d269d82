//! The `--staleness` mode: one writer, readers through redcar, and how long a written value
//! takes to be seen (see the crate's doc).

use std::io::{self, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::resp::{self, Reply};
use crate::{die, quantile_ms, Opts, Rng};

fn connect(addr: &str) -> io::Result<(BufReader<TcpStream>, TcpStream)> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let w = s.try_clone()?;
    Ok((BufReader::new(s), w))
}

fn call(c: &mut (BufReader<TcpStream>, TcpStream), args: &[&[u8]]) -> io::Result<Reply> {
    let mut buf = Vec::new();
    resp::encode(&mut buf, args);
    c.1.write_all(&buf)?;
    resp::read_reply(&mut c.0)
}

/// What the writer and the readers share.
struct Shared {
    /// Acknowledgement time of write `i` (index = counter; counter 0 is the initial value).
    acks: Mutex<Vec<Instant>>,
    /// End of the first read through redcar that returned write `i` or a later one.
    seen: Mutex<Vec<Option<Instant>>>,
    max_seen: AtomicI64,
    stop: AtomicBool,
    /// The first error any reader got (for the message when they never see a value).
    first_error: Mutex<Option<String>>,
}

#[derive(Default)]
struct ReaderStats {
    reads: u64,
    errors: u64,
    first_error: Option<String>,
    /// Reads that returned a value older than the newest write acknowledged before they started.
    stale_within_bound: u64,
    /// Reads that started more than the bound after a write's ack and returned an older value.
    stale_after_bound: u64,
    /// The worst of those: (read start - ack of the missed write) in ms, what it got, what it missed.
    worst: Option<(f64, i64, i64)>,
}

pub(crate) fn staleness(o: &Opts) {
    let node = o
        .node
        .clone()
        .unwrap_or_else(|| die("--staleness needs --node HOST:PORT (a cluster node)"));
    let nonce = format!(
        "s{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros())
            .unwrap_or(0)
    );
    let bound = Duration::from_secs_f64(o.bound_ms / 1000.0);
    let key = o.key.as_bytes().to_vec();

    // The writer: straight on the primary that owns the key (follow MOVED from --node).
    let mut at = node.clone();
    let first = format!("{nonce}:0");
    let mut w = None;
    for _ in 0..5 {
        let mut c = connect(&at).unwrap_or_else(|e| die(format!("connect {at}: {e}")));
        match call(&mut c, &[b"SET", &key, first.as_bytes()]) {
            Ok(Reply::Error(e)) if e.starts_with("MOVED ") => {
                at = e
                    .split_whitespace()
                    .nth(2)
                    .unwrap_or_else(|| die(format!("bad redirect: {e}")))
                    .to_string();
            }
            Ok(Reply::Simple(_)) => {
                w = Some(c);
                break;
            }
            other => die(format!("SET on {at}: {other:?}")),
        }
    }
    let mut w = w.unwrap_or_else(|| die("too many MOVED redirects"));
    let shared = Arc::new(Shared {
        acks: Mutex::new(vec![Instant::now()]),
        seen: Mutex::new(vec![None; o.writes as usize + 1]),
        max_seen: AtomicI64::new(-1),
        stop: AtomicBool::new(false),
        first_error: Mutex::new(None),
    });
    println!(
        "mixload --staleness: key {} (writer straight on its primary {at}), {} reader(s) through {}, {} writes, bound {} ms",
        o.key, o.readers, o.addr, o.writes, o.bound_ms
    );

    let mut readers = Vec::new();
    for _ in 0..o.readers {
        let shared = shared.clone();
        let addr = o.addr.clone();
        let key = key.clone();
        let nonce = nonce.clone();
        readers.push(std::thread::spawn(move || {
            read_loop(&addr, &key, &nonce, bound, &shared)
        }));
    }

    let timeout = Duration::from_millis(o.timeout_ms);
    let mut not_seen = 0u64;
    let mut rng = Rng::new(o.seed);
    let wait_seen = |i: i64, since: Instant| -> bool {
        while shared.max_seen.load(Ordering::Acquire) < i {
            if since.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        true
    };
    if !wait_seen(0, Instant::now()) {
        shared.stop.store(true, Ordering::Release);
        let why = shared
            .first_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "no error".into());
        die(format!(
            "the readers never saw the initial value through {} (first read error: {why})",
            o.addr
        ));
    }
    for i in 1..=o.writes {
        let v = format!("{nonce}:{i}");
        match call(&mut w, &[b"SET", &key, v.as_bytes()]) {
            Ok(Reply::Simple(_)) => {}
            other => {
                shared.stop.store(true, Ordering::Release);
                die(format!("SET {i} on {at}: {other:?}"));
            }
        }
        let ack = Instant::now();
        shared
            .acks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(ack);
        if !wait_seen(i as i64, ack) {
            not_seen += 1;
        }
        // A pause of 0.5x..1.5x --gap-us, so writes do not fall into step with anything periodic.
        let gap = (o.gap_us as f64 * (0.5 + rng.unit())) as u64;
        std::thread::sleep(Duration::from_micros(gap));
    }
    // Keep reading a little past the bound after the last write, so it is checked too.
    std::thread::sleep(bound + Duration::from_millis(20));
    shared.stop.store(true, Ordering::Release);
    let mut all = ReaderStats::default();
    for r in readers {
        let st = r.join().unwrap_or_default();
        all.reads += st.reads;
        all.errors += st.errors;
        all.stale_within_bound += st.stale_within_bound;
        all.stale_after_bound += st.stale_after_bound;
        if all.first_error.is_none() {
            all.first_error = st.first_error;
        }
        if st.worst.map(|w| w.0) > all.worst.map(|w| w.0) {
            all.worst = st.worst;
        }
    }

    let acks = shared
        .acks
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let seen = shared
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let mut lat: Vec<u64> = (1..acks.len())
        .filter_map(|i| seen[i].map(|s| s.saturating_duration_since(acks[i]).as_nanos() as u64))
        .collect();
    lat.sort_unstable();
    let (p50, p99, max) = (
        quantile_ms(&lat, 0.50),
        quantile_ms(&lat, 0.99),
        quantile_ms(&lat, 1.0),
    );
    println!(
        "{} writes, {} reads: visible after p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms; not seen within {} ms: {not_seen}; stale reads after the bound: {}; stale reads within the bound: {}; read errors: {}{}{}",
        o.writes,
        all.reads,
        o.timeout_ms,
        all.stale_after_bound,
        all.stale_within_bound,
        all.errors,
        all.first_error
            .as_deref()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default(),
        all.worst
            .map(|(age, got, missed)| format!(
                "; worst: a read {age:.1} ms after write {missed}'s ack returned write {got}"
            ))
            .unwrap_or_default()
    );
    println!(
        "RESULT writes={} reads={} p50_ms={p50:.3} p99_ms={p99:.3} max_ms={max:.3} not_seen={not_seen} stale_after_bound={} stale_within_bound={} read_errors={} bound_ms={}",
        o.writes,
        all.reads,
        all.stale_after_bound,
        all.stale_within_bound,
        all.errors,
        o.bound_ms
    );
}

fn read_loop(addr: &str, key: &[u8], nonce: &str, bound: Duration, sh: &Shared) -> ReaderStats {
    let mut st = ReaderStats::default();
    let mut c = match connect(addr) {
        Ok(c) => c,
        Err(e) => {
            st.errors += 1;
            st.first_error = Some(format!("connect {addr}: {e}"));
            return st;
        }
    };
    let prefix = format!("{nonce}:");
    while !sh.stop.load(Ordering::Acquire) {
        let start = Instant::now();
        let got = match call(&mut c, &[b"GET", key]) {
            Ok(Reply::Bulk(Some(v))) => std::str::from_utf8(&v)
                .ok()
                .and_then(|s| s.strip_prefix(&prefix))
                .and_then(|n| n.parse::<i64>().ok())
                .unwrap_or(-1),
            Ok(Reply::Bulk(None)) => -1,
            Ok(other) => {
                st.errors += 1;
                st.first_error.get_or_insert(format!("{other:?}"));
                sh.first_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(format!("{other:?}"));
                continue;
            }
            Err(e) => {
                st.errors += 1;
                st.first_error.get_or_insert(format!("{e}"));
                sh.first_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_or_insert(format!("{e}"));
                match connect(addr) {
                    Ok(n) => c = n,
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
                continue;
            }
        };
        let end = Instant::now();
        st.reads += 1;
        {
            let acks = sh.acks.lock().unwrap_or_else(|p| p.into_inner());
            // The newest write acknowledged before this read started, and the newest one
            // acknowledged more than the bound before it.
            let newest = acks.partition_point(|a| *a < start) as i64 - 1;
            let due = acks.partition_point(|a| *a + bound < start) as i64 - 1;
            if got < newest {
                st.stale_within_bound += 1;
            }
            if got < due {
                st.stale_after_bound += 1;
                let age = start.duration_since(acks[due as usize]).as_secs_f64() * 1e3;
                if st.worst.is_none_or(|w| age > w.0) {
                    st.worst = Some((age, got, due));
                }
            }
        }
        if got > sh.max_seen.load(Ordering::Acquire) {
            let mut seen = sh.seen.lock().unwrap_or_else(|p| p.into_inner());
            let upto = (got as usize).min(seen.len() - 1);
            for s in seen.iter_mut().take(upto + 1).rev() {
                if s.is_some() {
                    break;
                }
                *s = Some(end);
            }
            sh.max_seen.fetch_max(got, Ordering::AcqRel);
        }
    }
    st
}
