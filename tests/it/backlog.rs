//! `client.accept_backlog`: the listen queue the kernel reports for redcar's client listeners
//! (`ss`'s Send-Q of a listening socket) is the configured one, capped by `net.core.somaxconn`.

use std::process::Command;

use crate::redirects::write_config;
use crate::support::{Redcar, RedisCluster};

/// `ss -Hl` with `args` (iproute2): the Send-Q column of the one listening socket it shows,
/// which for a listener is its listen queue.
fn listen_queue(args: &[&str]) -> u32 {
    let output = Command::new("ss").arg("-Hl").args(args).output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => panic!(
            "`ss -Hl {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(e) => panic!(
            "cannot run `ss` ({e}): this test reads the listen queue the kernel reports with it; \
             install iproute2 (apt-get install -y iproute2)"
        ),
    };
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one listener expected from ss:\n{text}");
    let fields: Vec<&str> = lines[0].split_whitespace().collect();
    // TCP: State Recv-Q Send-Q Local Peer; Unix (-x): Netid State Recv-Q Send-Q Local ...
    let send_q = if args.contains(&"-x") { 3 } else { 2 };
    fields
        .get(send_q)
        .and_then(|f| f.parse().ok())
        .unwrap_or_else(|| panic!("no Send-Q in ss output:\n{text}"))
}

fn somaxconn() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(u32::MAX)
}

#[test]
fn client_listeners_get_the_configured_accept_backlog_capped_by_somaxconn() {
    let cluster = RedisCluster::start(3, 0);
    let dir = tempfile::tempdir().expect("temp dir");
    let socket = dir.path().join("redcar.sock");
    let socket = socket.to_str().expect("utf-8 path");
    let config = write_config("client:\n  accept_backlog: 300\n");
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--config", config.path_str(), "--unix", socket],
    );
    let expected = 300.min(somaxconn());
    let port = format!("sport = :{}", redcar.port());
    assert_eq!(listen_queue(&["-tn", &port]), expected, "TCP listener");
    assert_eq!(
        listen_queue(&["-x", "src", socket]),
        expected,
        "Unix listener"
    );
    assert!(
        !redcar.log().contains("capped by net.core.somaxconn"),
        "300 fits: no warning\n{}",
        redcar.log()
    );

    // More than the kernel allows: the kernel's maximum, and the log says so.
    let config = write_config("client:\n  accept_backlog: 65535\n");
    let capped = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let port = format!("sport = :{}", capped.port());
    assert_eq!(listen_queue(&["-tn", &port]), 65535.min(somaxconn()));
    if somaxconn() < 65535 {
        let log = capped.log();
        assert!(
            log.contains("capped by net.core.somaxconn")
                && log.contains(&format!("effective={}", somaxconn())),
            "the cap is logged with the effective value:\n{log}"
        );
    }
}
