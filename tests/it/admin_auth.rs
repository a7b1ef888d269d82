//! `admin.token`: without the bearer token every admin endpoint but `/healthz` and `/readyz`
//! answers 401 with `WWW-Authenticate: Bearer`, with it 200; `redcar top` sends it; the token is
//! never shown; an admin listener beyond loopback without a token is warned about.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::redcar::redcar_bin;
use crate::support::server::free_port;
use crate::support::{Redcar, RedisCluster};

const TOKEN: &str = "adm1n-t0ken-4it";

/// `GET path` with an optional `Authorization` value: (status, head, body).
fn get(addr: &str, path: &str, authorization: Option<&str>) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).expect("admin reachable");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let header = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{header}Connection: close\r\n\r\n"
    )
    .expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad HTTP response: {text:?}"));
    (status, head.to_ascii_lowercase(), body.to_string())
}

#[test]
fn admin_endpoints_need_the_token_except_the_probes() {
    let cluster = RedisCluster::start(3, 0);
    let secret = tempfile::tempdir().expect("temp dir");
    let token_file = secret.path().join("admin-token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("write token");
    let config = write_config(&format!(
        "admin:\n  token: {{file: {}}}\n",
        token_file.display()
    ));
    // `--admin ADDR` from the harness sets `admin.listen`; the token comes from the file.
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let admin = redcar.admin_addr();
    let bearer = format!("Bearer {TOKEN}");
    for probe in ["/healthz", "/readyz"] {
        assert_eq!(get(&admin, probe, None).0, 200, "{probe} stays open");
    }
    let paths = [
        "/",
        "/status.json",
        "/metrics",
        "/topology",
        "/clients",
        "/slowlog",
        "/config",
    ];
    for path in paths {
        let (status, head, body) = get(&admin, path, None);
        assert_eq!(status, 401, "{path} without a token: {body}");
        assert!(
            head.contains("\r\nwww-authenticate: bearer"),
            "{path}: {head}"
        );
        assert!(body.contains("Authorization: Bearer"), "{path}: {body}");
        let (status, _, body) = get(&admin, path, Some("Bearer not-the-token"));
        assert_eq!(status, 401, "{path} with a wrong token");
        assert!(!body.contains("not-the-token"), "{body}");
        let (status, _, body) = get(&admin, path, Some(&bearer));
        assert_eq!(status, 200, "{path} with the token: {body}");
    }
    let (_, _, shown) = get(&admin, "/config", Some(&bearer));
    assert!(!shown.contains(TOKEN), "{shown}");
    assert!(shown.contains("(redacted)"), "{shown}");
    assert!(!redcar.log().contains(TOKEN), "{}", redcar.log());

    let top = |token: Option<&str>| {
        let mut command = Command::new(redcar_bin());
        command.args(["top", "--admin", &admin, "--once", "--interval", "200ms"]);
        command.env_remove("REDCAR_ADMIN_TOKEN");
        if let Some(token) = token {
            command.env("REDCAR_ADMIN_TOKEN", token);
        }
        command.output().expect("run redcar top")
    };
    let with = top(Some(TOKEN));
    let stdout = String::from_utf8_lossy(&with.stdout);
    assert!(with.status.success(), "{stdout}");
    assert!(stdout.contains("cmds/s"), "{stdout}");
    let without = top(None);
    let stderr = String::from_utf8_lossy(&without.stderr);
    assert_eq!(without.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("answered 401"), "{stderr}");
    assert!(stderr.contains("--admin-token"), "{stderr}");
}

/// Start-up warns (one line) when the admin API is reachable beyond loopback with no token.
#[test]
fn an_open_admin_listener_beyond_loopback_is_warned_about() {
    let run = |extra: &[&str]| {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("redcar.log");
        let file = std::fs::File::create(&log).expect("log file");
        let admin = format!("0.0.0.0:{}", free_port());
        let listen = format!("127.0.0.1:{}", free_port());
        let mut child = Command::new(redcar_bin())
            .args([
                "--listen",
                &listen,
                "--admin",
                &admin,
                "--cluster",
                "127.0.0.1:1",
            ])
            .args(extra)
            .env_remove("REDCAR_ADMIN_TOKEN")
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone"))
            .stderr(file)
            .spawn()
            .expect("start redcar");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut text = String::new();
        while !text.contains("admin listening") && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(25));
            text = std::fs::read_to_string(&log).unwrap_or_default();
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(text.contains("admin listening"), "{text}");
        text
    };
    let open = run(&[]);
    let warnings: Vec<&str> = open
        .lines()
        .filter(|l| l.contains("beyond loopback without a token"))
        .collect();
    assert_eq!(warnings.len(), 1, "{open}");
    assert!(warnings[0].contains("WARN"), "{open}");
    let closed = run(&["--admin-token", TOKEN]);
    assert!(!closed.contains("beyond loopback"), "{closed}");
    assert!(!closed.contains(TOKEN), "{closed}");
}
