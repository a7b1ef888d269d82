//! Tests for the exposition parser and the HTTP response handling.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn parses_prometheus_text_with_help_type_and_histograms() {
    let text = "\
# HELP redcar_commands Commands received, by command.
# TYPE redcar_commands counter
redcar_commands_total{command=\"get\"} 1027
redcar_commands_total{command=\"set\"} 12
# TYPE redcar_command_duration_seconds histogram
redcar_command_duration_seconds_sum{command=\"get\"} 0.5
redcar_command_duration_seconds_count{command=\"get\"} 1027
redcar_command_duration_seconds_bucket{le=\"5e-5\",command=\"get\"} 3
redcar_command_duration_seconds_bucket{le=\"+Inf\",command=\"get\"} 1027
redcar_uptime_seconds 12.5
";
    let samples = parse_exposition(text);
    assert_eq!(samples.len(), 7);
    assert_eq!(
        samples[0],
        Sample {
            name: "redcar_commands_total".into(),
            labels: labels(&[("command", "get")]),
            value: 1027.0,
        }
    );
    assert_eq!(samples[4].label("le"), Some("5e-5"));
    assert_eq!(samples[4].label("command"), Some("get"));
    assert_eq!(samples[5].label("le"), Some("+Inf"));
    assert_eq!(samples[6].labels, vec![]);
    assert_eq!(samples[6].value, 12.5);
}

#[test]
fn label_values_are_unescaped() {
    let s = parse_line(r#"m{a="quote \" here",b="back\\slash",c="line\nbreak",d="}{,="} 1"#)
        .expect("parses");
    assert_eq!(
        s.labels,
        labels(&[
            ("a", "quote \" here"),
            ("b", "back\\slash"),
            ("c", "line\nbreak"),
            ("d", "}{,=")
        ])
    );
}

#[test]
fn special_values_timestamps_and_exemplars() {
    assert!(parse_line("m NaN").expect("NaN").value.is_nan());
    assert_eq!(parse_line("m +Inf").expect("+Inf").value, f64::INFINITY);
    assert_eq!(parse_line("m -Inf").expect("-Inf").value, f64::NEG_INFINITY);
    assert_eq!(
        parse_line("m{a=\"b\"} 3 1700000000000").expect("ts").value,
        3.0
    );
    let exemplar = r#"h_bucket{le="0.1"} 8 # {trace_id="abc"} 0.05 1700000000"#;
    assert_eq!(parse_line(exemplar).expect("exemplar").value, 8.0);
    assert_eq!(
        parse_line("m{a=\"b\",} 2").expect("trailing comma").value,
        2.0
    );
    assert_eq!(parse_line("m{} 2").expect("empty labels").labels, vec![]);
}

#[test]
fn malformed_lines_are_errors_and_are_skipped_in_a_body() {
    for bad in [
        "m",
        "m{a=\"b\" 1",
        "m{a=b} 1",
        "m{a=\"b\"}",
        "m x",
        "bad-name 1",
        "{a=\"b\"} 1",
    ] {
        assert!(parse_line(bad).is_err(), "{bad} should not parse");
    }
    let samples = parse_exposition("good 1\nm{a=b} 1\nalso_good 2\n");
    let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good", "also_good"]);
}

#[test]
fn openmetrics_flavour_stops_at_eof_and_ignores_unit_lines() {
    let text = "\
# TYPE redcar_slow_commands counter
# UNIT redcar_uptime_seconds seconds
redcar_slow_commands_total 4
redcar_slow_commands_created 1700000000.123
# EOF
after_eof 1
";
    let samples = parse_exposition(text);
    let names: Vec<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["redcar_slow_commands_total", "redcar_slow_commands_created"]
    );
}

#[test]
fn crlf_line_endings_are_accepted() {
    let samples = parse_exposition("a 1\r\nb{x=\"y\"} 2\r\n");
    assert_eq!(samples.len(), 2);
    assert_eq!(samples[1].value, 2.0);
}

/// Answers one connection on 127.0.0.1 with `raw` (after reading the request head), closes it,
/// and returns what `get_with_timeout` made of it and the request it sent.
async fn exchange(raw: &'static [u8]) -> (Result<String, ScrapeError>, String) {
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
        let _ = conn.write_all(raw).await;
        let _ = conn.shutdown().await;
        String::from_utf8_lossy(&request).into_owned()
    });
    let result = get_with_timeout(&addr, "/metrics", Some("t"), Duration::from_secs(10)).await;
    (result, server.await.expect("server"))
}

#[tokio::test]
async fn http_response_with_content_length() {
    let raw = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nContent-Length: 4\r\n\r\na 1\nextra";
    let (body, request) = exchange(raw).await;
    assert_eq!(body.expect("ok"), "a 1\n");
    assert!(
        request.starts_with("GET /metrics HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(
        request.contains("\r\nAuthorization: Bearer t\r\n"),
        "{request}"
    );
}

#[tokio::test]
async fn http_response_chunked_or_until_close() {
    let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\na 1\n\r\n5;x=y\r\nb 22\n\r\n0\r\n\r\n";
    assert_eq!(exchange(raw).await.0.expect("ok"), "a 1\nb 22\n");
    let raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nc 3\n";
    assert_eq!(exchange(raw).await.0.expect("ok"), "c 3\n");
}

#[tokio::test]
async fn http_errors_are_reported() {
    let not_found = exchange(b"HTTP/1.1 404 Not Found\r\n\r\n").await.0;
    assert_eq!(
        not_found.expect_err("404").to_string(),
        "the server answered `HTTP/1.1 404 Not Found`"
    );
    let odd = exchange(b"HTTP/1.1 503 Warming Up\r\ncontent-length: 0\r\n\r\n")
        .await
        .0;
    assert_eq!(
        odd.expect_err("503").to_string(),
        "the server answered `HTTP/1.1 503 Warming Up`"
    );
    let refused = exchange(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n").await;
    assert!(
        matches!(refused.0, Err(ScrapeError::Unauthorized)),
        "{:?}",
        refused.0
    );
    assert!(exchange(b"SSH-2.0-OpenSSH\r\n\r\n").await.0.is_err());
    assert!(exchange(b"HTTP/1.1 200 OK\r\n").await.0.is_err());
    let bad_chunks = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    assert!(exchange(bad_chunks).await.0.is_err());
    let short = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc";
    assert!(
        exchange(short).await.0.is_err(),
        "a body cut short is an error"
    );
}

#[test]
fn admin_address_forms() {
    assert_eq!(host_port("127.0.0.1:9190"), "127.0.0.1:9190");
    assert_eq!(host_port("http://127.0.0.1:9190/"), "127.0.0.1:9190");
    assert_eq!(
        host_port(" http://localhost:9190/metrics "),
        "localhost:9190"
    );
}
