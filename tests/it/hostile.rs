//! Hostile clients all at once: malformed RESP, absurd lengths, a 10 MB line with no newline,
//! 100k pipelined PINGs never read, a disconnect in the middle of a large reply. Each one gets
//! an error or is closed; a well-behaved client alongside keeps being answered, and redcar's
//! memory stays bounded.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::resp_client::encode_command;
use crate::support::{Redcar, RedisCluster, Value};

/// redcar's resident set size in KiB (Linux `/proc`).
fn rss_kib(redcar: &Redcar) -> u64 {
    let pid = redcar.pid().expect("redcar runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .expect("VmRSS in /proc status")
}

/// Writes `bytes` (ignoring a close by redcar), then reads until redcar closes the connection
/// or `within` passes; returns what was read.
fn send_and_drain(addr: &str, bytes: &[u8], within: Duration) -> (Vec<u8>, bool) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = stream.write_all(bytes);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    while start.elapsed() < within {
        match stream.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (got, true),
            Err(_) => {}
        }
    }
    (got, false)
}

/// A well-behaved client running SET/GET pairs on many slots until `stop`; returns how many
/// pairs it got answered and the slowest one.
fn bystander(redcar: &Redcar, stop: &Arc<AtomicBool>) -> std::thread::JoinHandle<(u32, Duration)> {
    let stop = stop.clone();
    let mut good = redcar.client();
    std::thread::spawn(move || {
        let (mut served, mut slowest) = (0u32, Duration::ZERO);
        while !stop.load(Ordering::Relaxed) {
            let key = format!("good:{served}");
            let started = Instant::now();
            assert_eq!(good.q(&["SET", &key, "v"]), Value::simple("OK"));
            assert_eq!(good.q(&["GET", &key]), Value::bulk("v"));
            slowest = slowest.max(started.elapsed());
            served += 1;
        }
        (served, slowest)
    })
}

/// The error line redcar sent first, as text.
fn first_line(reply: &[u8]) -> String {
    let text = String::from_utf8_lossy(reply);
    text.lines().next().unwrap_or_default().to_string()
}

#[test]
fn hostile_clients_are_refused_or_closed_while_a_good_client_is_served() {
    let cluster = RedisCluster::start(3, 1);
    let config =
        crate::redirects::write_config("client:\n  max_reply_bytes: 1mb\n  max_in_flight: 1024\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let addr = redcar.addr();
    let big = "v".repeat(4 << 20);
    assert_eq!(redcar.cmd(&["SET", "big", &big]), Value::simple("OK"));
    let rss_before = rss_kib(&redcar);

    // A well-behaved client keeps working the whole time, on every node.
    let stop = Arc::new(AtomicBool::new(false));
    let bystander = bystander(&redcar, &stop);

    // Each hostile input must get a protocol error and be closed.
    let ten_mb_line = vec![b'a'; 10 << 20];
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "bad type byte in a multibulk",
            b"*1\r\n?3\r\nfoo\r\n".to_vec(),
        ),
        (
            "an integer where a bulk string must be",
            b"*2\r\n$3\r\nGET\r\n:1\r\n".to_vec(),
        ),
        ("non-numeric multibulk length", b"*x\r\n".to_vec()),
        ("non-numeric bulk length", b"*1\r\n$abc\r\n".to_vec()),
        ("negative bulk length", b"*1\r\n$-5\r\n".to_vec()),
        ("huge bulk length", b"*1\r\n$999999999999\r\n".to_vec()),
        ("huge multibulk length", b"*99999999999\r\n".to_vec()),
        ("10 MB inline line without a newline", ten_mb_line),
    ];
    for (what, bytes) in &cases {
        let (reply, closed) = send_and_drain(&addr, bytes, Duration::from_secs(5));
        let line = first_line(&reply);
        assert!(
            line.starts_with("-ERR Protocol error"),
            "{what}: got {line:?}"
        );
        assert!(closed, "{what}: the client must be closed");
    }

    // A negative multibulk length is skipped, as Redis does (`*-1` is a null array), and the
    // connection goes on.
    let mut skipped = TcpStream::connect(&addr).expect("connect");
    skipped
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    skipped
        .write_all(b"*-5\r\n*1\r\n$4\r\nPING\r\n")
        .expect("send");
    let mut pong = [0u8; 7];
    skipped.read_exact(&mut pong).expect("reply");
    assert_eq!(&pong, b"+PONG\r\n", "negative multibulk length");

    // 100k pipelined PINGs, never read: redcar stops reading them (back-pressure), it does not
    // buffer 100k replies.
    let hog = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).expect("hog connects");
            stream
                .set_write_timeout(Some(Duration::from_secs(3)))
                .expect("timeout");
            let pings: Vec<u8> = (0..100_000)
                .flat_map(|_| encode_command(&["PING"]))
                .collect();
            let _ = stream.write_all(&pings);
            stream // kept open, never read
        })
    };

    // Disconnects in the middle of a 4 MB reply, several times over.
    for _ in 0..10 {
        let mut stream = TcpStream::connect(&addr).expect("connect");
        stream
            .write_all(&encode_command(&["GET", "big"]))
            .expect("send");
        let mut some = [0u8; 1000];
        let _ = stream.read(&mut some);
        let _ = stream.shutdown(Shutdown::Both);
    }

    let hog_stream = hog.join().expect("hog thread");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let (served, slowest) = bystander.join().expect("bystander thread");
    eprintln!("bystander: {served} SET+GET pairs, slowest {slowest:?}");
    assert!(served > 10, "the good client kept being served ({served})");
    // Liveness, not performance (this is the debug build on a shared machine; the release build
    // keeps the slowest command near 50 ms under these hostiles): nothing may stall it for long.
    assert!(slowest < Duration::from_secs(2), "stalled for {slowest:?}");

    let rss_after = rss_kib(&redcar);
    eprintln!("redcar RSS: {rss_before} KiB before, {rss_after} KiB after");
    // The 10 MB line, 100k PINGs and ten 4 MB replies would be 60+ MB if buffered whole.
    assert!(
        rss_after < rss_before + 48 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    drop(hog_stream);
    assert_eq!(redcar.cmd(&["PING"]), Value::simple("PONG"));
    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    assert!(metrics.contains("redcar_client_connections"), "{metrics}");
}

#[test]
fn a_request_trickled_byte_by_byte_times_out_without_hurting_others() {
    let cluster = RedisCluster::start(3, 1);
    let config = crate::redirects::write_config("client:\n  request_timeout: 1s\n");
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let addr = redcar.addr();

    // A request split in two with a pause shorter than the timeout is served.
    let mut split = TcpStream::connect(&addr).expect("connect");
    split
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    split
        .write_all(b"*3\r\n$3\r\nSET\r\n$5\r\nslow")
        .expect("send");
    std::thread::sleep(Duration::from_millis(300));
    split.write_all(b"k\r\n$1\r\nv\r\n").expect("send");
    let mut reply = [0u8; 5];
    split.read_exact(&mut reply).expect("reply");
    assert_eq!(&reply, b"+OK\r\n");

    // A slowloris: one byte every 200 ms keeps the connection busy but never completes.
    let mut slow = TcpStream::connect(&addr).expect("connect");
    slow.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    slow.write_all(b"*2\r\n$3\r\nGET\r\n$100\r\n")
        .expect("send");
    let started = Instant::now();
    let mut got = Vec::new();
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(8) && !closed {
        if slow.write_all(b"x").is_err() {
            closed = true; // redcar closed it (reset on write)
            break;
        }
        let mut buf = [0u8; 256];
        match slow.read(&mut buf) {
            Ok(0) => closed = true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => closed = true,
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    let text = String::from_utf8_lossy(&got).to_string();
    assert!(
        text.starts_with("-ERR redcar: request not completed within 1s (client.request_timeout)"),
        "{text:?}"
    );
    assert!(closed, "the slowloris connection is closed");
    // Others are unaffected.
    assert_eq!(redcar.cmd(&["GET", "slowk"]), Value::bulk("v"));
}

/// `client.max_buffered_bytes_total`: clients pipelining big GETs and SETs and never reading
/// fill their reply buffers up to `max_reply_bytes` each (64 MB by default) — unless the global
/// budget pauses them first. With an 8 MB budget redcar's memory stays near it, and a small
/// client is still served. (With the budget at 0 the same run grows by hundreds of MB.)
#[test]
fn the_global_buffer_budget_pauses_clients_that_do_not_read() {
    let cluster = RedisCluster::start(3, 0);
    let budget = std::env::var("REDCAR_IT_BUDGET").unwrap_or_else(|_| "8mb".into());
    let config = crate::redirects::write_config(&format!(
        "client:\n  max_buffered_bytes_total: {budget}\n  max_in_flight: 4\n"
    ));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let value = "v".repeat(1 << 20);
    assert_eq!(redcar.cmd(&["SET", "big", &value]), Value::simple("OK"));
    let rss_before = rss_kib(&redcar);
    let stop = Arc::new(AtomicBool::new(false));
    let bystander = bystander(&redcar, &stop);

    // Six clients ask for the 1 MB value 200 times each, two send 1 MB SETs; none reads a reply.
    let gets: Vec<u8> = (0..200)
        .flat_map(|_| encode_command(&["GET", "big"]))
        .collect();
    let sets: Vec<u8> = (0..40)
        .flat_map(|_| encode_command(&["SET", "big2", &value]))
        .collect();
    let hogs: Vec<_> = (0..8)
        .map(|i| {
            let addr = redcar.addr();
            let bytes = if i < 6 { gets.clone() } else { sets.clone() };
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(addr).expect("hog connects");
                stream
                    .set_write_timeout(Some(Duration::from_secs(3)))
                    .expect("timeout");
                let _ = stream.write_all(&bytes); // stalls once redcar stops reading
                stream // kept open, never read
            })
        })
        .collect();
    let hogs: Vec<TcpStream> = hogs
        .into_iter()
        .map(|h| h.join().expect("hog thread"))
        .collect();

    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    let pauses = metric(&metrics, "redcar_client_read_pauses_total");
    let paused = metric(&metrics, "redcar_clients_paused");
    let buffered = metric(&metrics, "redcar_client_buffered_bytes");
    let rss_after = rss_kib(&redcar);
    stop.store(true, Ordering::Relaxed);
    let (served, slowest) = bystander.join().expect("bystander thread");
    eprintln!(
        "budget {budget}: RSS {rss_before} -> {rss_after} KiB, buffered {buffered} B, \
         {paused} paused, {pauses} pauses; bystander {served} pairs, slowest {slowest:?}"
    );
    assert!(served > 10, "the good client kept being served ({served})");
    assert!(slowest < Duration::from_secs(2), "stalled for {slowest:?}");
    assert!(pauses > 0.0, "clients were paused by the budget");
    assert!(paused > 0.0, "the hogs are still paused");
    // 8 MB of budget plus up to 4 replies of 1 MB in flight per hog (not counted until they
    // arrive) and allocator slack: far below the 6 × 64 MB the reply buffers reach without the
    // budget (about 450 MB of RSS, measured with REDCAR_IT_BUDGET=0). The RSS bound leaves room
    // for the node connections' read buffers that the unread 1 MB replies pin: with two busy
    // loops competing for the cores it grew by 110–137 MB (4 runs each of this build and the
    // one before it), close to the 150 MB this test first allowed.
    assert!(buffered < 48e6, "{buffered} bytes buffered");
    assert!(
        rss_after < rss_before + 250 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    drop(hogs);
    assert_eq!(redcar.cmd(&["GET", "good:0"]), Value::bulk("v"));
}

/// The value of an unlabelled series in a Prometheus text exposition.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
}
