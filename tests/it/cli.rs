//! The binary's contract: flags, config errors at start-up (exit 64, key named), Unix socket,
//! readiness and graceful shutdown on SIGTERM.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::Duration;

use crate::redirects::write_config;
use crate::support::redcar::redcar_bin;
use crate::support::{Redcar, RedisCluster, Value};

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(redcar_bin())
        .args(args)
        .env_remove("REDCAR_CLUSTER")
        .output()
        .expect("run redcar");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn invalid_settings_stop_start_up_naming_the_setting() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "no listener"),
        (&["--listen", "127.0.0.1:6380"], "cluster.seeds"),
        (
            &["--listen", "localhost", "--cluster", "127.0.0.1:7000"],
            "`listen`",
        ),
        (
            &["--listen", "127.0.0.1:6380", "--cluster", "127.0.0.1"],
            "cluster.seeds",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:6380",
                "--cluster",
                "127.0.0.1:7000",
                "--connections-per-node",
                "0",
            ],
            "upstream.connections_per_node",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:6380",
                "--cluster",
                "127.0.0.1:7000",
                "--log-level",
                "chatty",
            ],
            "log_level",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:6380",
                "--cluster",
                "127.0.0.1:7000",
                "--admin",
                "127.0.0.1:6380",
            ],
            "different ports",
        ),
        (
            &[
                "--listen",
                "127.0.0.1:6380",
                "--cluster",
                "127.0.0.1:7000",
                "--threading",
                "shared",
                "--placement",
                "pack",
            ],
            "`placement: pack` needs per-core workers",
        ),
    ];
    for (args, expected) in cases {
        let (code, output) = run(args);
        assert_eq!(code, 64, "{args:?} → {output}");
        assert!(
            output.contains(expected),
            "{args:?}: expected {expected:?} in {output}"
        );
    }
    let config = write_config("listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\nrouter:\n  op_timeout_ms: 5\n");
    let (code, output) = run(&["--config", config.path_str()]);
    assert_eq!(code, 64, "{output}");
    assert!(output.contains("op_timeout_ms"), "{output}");
    let (code, output) = run(&["--config", "/nonexistent/redcar.yaml"]);
    assert_eq!(code, 64, "{output}");
    assert!(output.contains("/nonexistent/redcar.yaml"), "{output}");
}

#[test]
fn bad_custom_commands_stop_start_up_naming_the_entry() {
    let base = "listen: 127.0.0.1:6380\ncluster:\n  seeds: [127.0.0.1:7000]\ncustom_commands:\n";
    let cases = [
        (
            "  - {name: GET, first_key: 1}\n",
            "`custom_commands[0].name` is `GET`: GET is a built-in",
        ),
        (
            "  - {name: mymod.get, first_key: 1}\n  - {name: mymod.mset, first_key: 1, key_step: 0}\n",
            "`custom_commands[1].key_step` is 0",
        ),
        ("  - {name: mymod.get}\n", "first_key"),
    ];
    for (entries, expected) in cases {
        let config = write_config(&format!("{base}{entries}"));
        let (code, output) = run(&["--config", config.path_str()]);
        assert_eq!(code, 64, "{entries} → {output}");
        assert!(
            output.contains(expected),
            "{entries}: expected {expected:?} in {output}"
        );
    }
}

#[test]
fn version_help_and_check_config() {
    let (code, output) = run(&["--version"]);
    assert_eq!(code, 0);
    assert!(output.contains(env!("CARGO_PKG_VERSION")), "{output}");
    let (code, output) = run(&["--help"]);
    assert_eq!(code, 0);
    for flag in [
        "--listen",
        "--cluster",
        "--unix",
        "--config",
        "--admin",
        "--log-level",
    ] {
        assert!(output.contains(flag), "--help lacks {flag}");
    }
    let (code, output) = run(&[
        "--check-config",
        "--listen",
        "127.0.0.1:6380",
        "--cluster",
        "127.0.0.1:7000",
    ]);
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("op_timeout: 1s"), "{output}");
}

#[test]
fn unix_socket_listener_serves_commands_with_configured_permissions() {
    let cluster = RedisCluster::start(3, 1);
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("redcar.sock");
    let socket_arg = socket.to_string_lossy().into_owned();
    let _redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--unix", &socket_arg, "--unix-permissions", "600"],
    );
    let mode = std::fs::metadata(&socket)
        .expect("socket exists")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    let mut stream = UnixStream::connect(&socket).expect("connect to the Unix socket");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream
        .write_all(b"*3\r\n$3\r\nSET\r\n$2\r\nux\r\n$1\r\n1\r\n*2\r\n$3\r\nGET\r\n$2\r\nux\r\n")
        .expect("write");
    let mut reader = BufReader::new(stream);
    let mut lines = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        reader.read_line(&mut line).expect("read");
        lines.push(line);
    }
    assert_eq!(lines, vec!["+OK\r\n", "$1\r\n", "1\r\n"]);
}

#[test]
fn readiness_waits_for_a_slot_map_and_sigterm_drains() {
    let cluster = RedisCluster::start(3, 1);
    // Unreachable seed first: still starts, healthy but not ready.
    let mut lonely = Redcar::spawn("127.0.0.1:1", &[]);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(lonely.http_get("/healthz").map(|r| r.0).ok(), Some(200));
    assert_eq!(lonely.http_get("/readyz").map(|r| r.0).ok(), Some(503));
    let mut c = lonely.client();
    let reply = c.q(&["GET", "k"]);
    assert!(
        reply.error().is_some_and(|e| e.contains("redcar")),
        "{reply:?}"
    );
    lonely.kill();

    let mut redcar = Redcar::start(&cluster.seeds());
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "k", "v"]), Value::simple("OK"));
    // A client in subscribe mode waits in another loop; the drain must reach it too.
    let mut subscriber = redcar.client();
    let confirmed = subscriber.q(&["SUBSCRIBE", "news"]);
    assert!(
        format!("{confirmed:?}").contains("subscribe"),
        "{confirmed:?}"
    );
    let pid = redcar.pid().expect("running");
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let asked = std::time::Instant::now();
    let exit = redcar
        .wait_exit(Duration::from_secs(15))
        .expect("exits after SIGTERM");
    assert!(exit.success(), "exit status {exit}");
    // Idle clients owe nothing: they are closed at once, not after `drain_timeout` (10 s).
    assert!(
        asked.elapsed() < Duration::from_secs(8),
        "drain waited for idle clients: {:?}",
        asked.elapsed()
    );
    assert!(c.read_reply().is_err(), "client connection closed on drain");
    assert!(
        subscriber.read_reply().is_err(),
        "subscriber connection closed on drain"
    );
}
