//! End-to-end tests: a tiny HTTP server on 127.0.0.1 serves canned `/metrics` bodies and
//! `redcar top` runs against it, its output captured.

use clap::Parser;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::*;

/// What redcar's registry (prometheus-client, OpenMetrics text) looks like, at uptime 10s.
const BODY_1: &str = "\
# HELP redcar_commands Commands received, by command.
# TYPE redcar_commands counter
redcar_commands_total{command=\"get\"} 1000
redcar_commands_total{command=\"set\"} 100
redcar_commands_total{command=\"del\"} 10
# HELP redcar_command_errors Error replies sent, by command.
# TYPE redcar_command_errors counter
redcar_command_errors_total{command=\"set\"} 1
# HELP redcar_command_duration_seconds Dispatch to reply, by command.
# TYPE redcar_command_duration_seconds histogram
redcar_command_duration_seconds_sum{command=\"get\"} 0.4
redcar_command_duration_seconds_count{command=\"get\"} 1000
redcar_command_duration_seconds_bucket{le=\"0.0001\",command=\"get\"} 500
redcar_command_duration_seconds_bucket{le=\"0.001\",command=\"get\"} 1000
redcar_command_duration_seconds_bucket{le=\"+Inf\",command=\"get\"} 1000
# TYPE redcar_node_requests counter
redcar_node_requests_total{node=\"127.0.0.1:7000\"} 600
redcar_node_requests_total{node=\"127.0.0.1:7001\"} 510
# TYPE redcar_node_in_flight gauge
redcar_node_in_flight{node=\"127.0.0.1:7000\"} 0
# TYPE redcar_node_connections gauge
redcar_node_connections{node=\"127.0.0.1:7000\"} 2
redcar_node_connections{node=\"127.0.0.1:7001\"} 2
# TYPE redcar_client_connections gauge
redcar_client_connections{listener=\"tcp\"} 7
# TYPE redcar_client_bytes_received counter
redcar_client_bytes_received_total 50000
# TYPE redcar_uptime_seconds gauge
redcar_uptime_seconds 10.0
# EOF
";

/// The same redcar a little later: `set` overtook `get`.
const BODY_2: &str = "\
redcar_commands_total{command=\"get\"} 1010
redcar_commands_total{command=\"set\"} 400
redcar_commands_total{command=\"del\"} 10
redcar_command_errors_total{command=\"set\"} 1
redcar_command_duration_seconds_bucket{le=\"0.0001\",command=\"get\"} 505
redcar_command_duration_seconds_bucket{le=\"0.001\",command=\"get\"} 1010
redcar_command_duration_seconds_bucket{le=\"+Inf\",command=\"get\"} 1010
redcar_node_requests_total{node=\"127.0.0.1:7000\"} 900
redcar_node_requests_total{node=\"127.0.0.1:7001\"} 520
redcar_node_in_flight{node=\"127.0.0.1:7000\"} 3
redcar_node_connections{node=\"127.0.0.1:7000\"} 2
redcar_node_connections{node=\"127.0.0.1:7001\"} 2
redcar_client_connections{listener=\"tcp\"} 9
redcar_client_bytes_received_total 60000
redcar_uptime_seconds 10.2
";

fn chunked(body: &str) -> String {
    let (a, b) = body.split_at(body.len() / 2);
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/openmetrics-text\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    )
}

fn with_length(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Answers one `/metrics` connection per response, in order, then stops listening; `/hotkeys`
/// gets a 404 (an older redcar: no panel) without using up a response.
async fn serve(responses: Vec<String>) -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let task = tokio::spawn(async move {
        let mut responses = responses.into_iter().peekable();
        while responses.peek().is_some() {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let response = if request.starts_with(b"GET /hotkeys HTTP/1.1\r\n") {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string()
            } else {
                assert!(request.starts_with(b"GET /metrics HTTP/1.1\r\n"));
                responses.next().unwrap_or_default()
            };
            let _ = conn.write_all(response.as_bytes()).await;
            let _ = conn.shutdown().await;
        }
    });
    (addr, task)
}

fn args(admin: &str, interval_ms: u64, once: bool) -> TopArgs {
    TopArgs {
        admin: admin.to_string(),
        admin_token: None,
        interval: Duration::from_millis(interval_ms),
        once,
    }
}

/// The whitespace-separated cells of the first line starting with `prefix`.
fn cells(text: &str, prefix: &str) -> Vec<String> {
    let line = text.lines().find(|l| l.starts_with(prefix));
    let line = line.unwrap_or_else(|| panic!("no {prefix:?} row in\n{text}"));
    line.split_whitespace().map(str::to_string).collect()
}

#[tokio::test]
async fn once_prints_one_frame_from_two_scrapes() {
    let (addr, server) = serve(vec![chunked(BODY_1), with_length(BODY_2)]).await;
    let mut out = Vec::new();
    run_with(&args(&addr, 200, true), &mut out, true)
        .await
        .expect("runs");
    server.await.expect("server");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!text.contains('\x1b'), "--once is plain text: {text:?}");
    assert!(
        text.starts_with(&format!("redcar {addr}   up 10s   rates over ")),
        "{text}"
    );
    assert!(text.contains("clients 9"), "{text}");
    let order: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ["get", "set", "del"].contains(w))
        .collect();
    assert_eq!(order, ["set", "get", "del"], "sorted by calls/s:\n{text}");
    let set_rate: f64 = cells(&text, "set ")[1].parse().expect("number");
    assert!(
        (100.0..=1500.0).contains(&set_rate),
        "300 calls in ~0.2s: {set_rate}"
    );
    assert_eq!(cells(&text, "del ")[1], "0.0");
    // 10 new `get`s: 5 under 0.1ms, 5 in (0.1ms, 1ms]; p50 = 0.1ms (the first bucket's bound),
    // p99 = √(0.1 × 1) ms, that bucket's geometric middle.
    assert_eq!(cells(&text, "get ")[3..], ["0.100", "0.316"]);
    assert_eq!(cells(&text, "127.0.0.1:7000")[5..], ["3", "2"]);
    assert_eq!(cells(&text, "127.0.0.1:7001")[2..5], ["0.0", "-", "-"]);
}

#[tokio::test]
async fn unreachable_admin_is_a_clear_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    drop(listener);
    for once in [true, false] {
        let mut out = Vec::new();
        let err = run_with(&args(&addr, 100, once), &mut out, false)
            .await
            .expect_err("nothing listens");
        let message = err.to_string();
        assert!(
            message.starts_with(&format!("redcar top: cannot reach http://{addr}/metrics: ")),
            "{message}"
        );
        assert!(
            message.ends_with(&format!(" — is redcar running with --admin {addr}?")),
            "{message}"
        );
        assert!(out.is_empty());
    }
}

#[tokio::test]
async fn an_http_error_is_reported_with_its_status() {
    let not_found = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string();
    let (addr, _server) = serve(vec![not_found]).await;
    let err = run_with(&args(&addr, 100, true), &mut Vec::new(), false)
        .await
        .expect_err("404");
    assert!(
        err.to_string().contains("`HTTP/1.1 404 Not Found`"),
        "{err}"
    );
}

#[tokio::test]
async fn the_token_is_sent_and_a_401_names_the_option() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.expect("accept");
        let mut request = Vec::new();
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let refusal = b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n";
        let _ = conn.write_all(refusal).await;
        String::from_utf8_lossy(&request).into_owned()
    });
    let mut with_token = args(&addr, 100, true);
    with_token.admin_token = Some("t0ken".into());
    let err = run_with(&with_token, &mut Vec::new(), false)
        .await
        .expect_err("401");
    let request = server.await.expect("server");
    assert!(
        request.contains("\r\nAuthorization: Bearer t0ken\r\n"),
        "{request}"
    );
    let message = err.to_string();
    assert!(message.contains("answered 401"), "{message}");
    assert!(message.contains("--admin-token"), "{message}");
    assert!(!message.contains("t0ken"), "{message}");
}

#[tokio::test]
async fn live_view_redraws_with_ansi_until_stopped() {
    let responses = (0..50).map(|i| with_length(if i == 0 { BODY_1 } else { BODY_2 }));
    let (addr, _server) = serve(responses.collect()).await;
    let mut out = Vec::new();
    let stop = tokio::time::sleep(Duration::from_millis(400));
    live(&args(&addr, 50, false), &mut out, true, stop)
        .await
        .expect("runs");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.starts_with(HIDE_CURSOR), "{text:?}");
    assert!(text.ends_with(SHOW_CURSOR), "{text:?}");
    assert!(text.matches(CLEAR_SCREEN).count() >= 3, "{text:?}");
    let first = text.split(CLEAR_SCREEN).nth(1).expect("first frame");
    assert!(first.contains("rates since start"), "{first}");
    let second = text.split(CLEAR_SCREEN).nth(2).expect("second frame");
    assert!(second.contains("rates over "), "{second}");
}

#[tokio::test]
async fn live_view_survives_a_failed_scrape() {
    let (addr, server) = serve(vec![with_length(BODY_1)]).await;
    let mut out = Vec::new();
    let stop = async {
        let _ = server.await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    live(&args(&addr, 50, false), &mut out, false, stop)
        .await
        .expect("keeps running");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(!text.contains('\x1b'));
    let frames: Vec<&str> = text.split("\nredcar ").collect();
    assert!(frames.len() >= 2, "{text}");
    assert!(
        frames[1].contains("\n! last scrape failed: "),
        "{}",
        frames[1]
    );
    assert!(frames[1].contains("; retrying\n"), "{}", frames[1]);
    assert!(
        frames[1].contains("get "),
        "the last good numbers stay: {}",
        frames[1]
    );
}

#[tokio::test]
async fn zero_interval_is_refused() {
    let err = run_with(&args("127.0.0.1:1", 0, true), &mut Vec::new(), false)
        .await
        .expect_err("zero");
    assert_eq!(
        err.to_string(),
        "redcar top: --interval must be more than 0"
    );
}

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    top: TopArgs,
}

#[test]
fn flags_parse_with_humane_durations() {
    let cli = Cli::try_parse_from([
        "top",
        "--admin",
        "127.0.0.1:9190",
        "--interval",
        "250ms",
        "--once",
    ])
    .expect("parses");
    assert_eq!(cli.top.admin, "127.0.0.1:9190");
    assert_eq!(cli.top.interval, Duration::from_millis(250));
    assert!(cli.top.once);
    let defaults = Cli::try_parse_from(["top", "--admin", "127.0.0.1:9190"]).expect("parses");
    assert_eq!(defaults.top.interval, Duration::from_secs(1));
    assert!(!defaults.top.once);
    let bad = Cli::try_parse_from(["top", "--admin", "x", "--interval", "soon"]).expect_err("bad");
    assert!(bad.to_string().contains("not a duration"), "{bad}");
}
