//! Clients over TLS (`tls.listen`), with and without client certificates, using certificates the
//! test makes and Debian's TLS-enabled `redis-cli` as the client.

use std::path::Path;
use std::process::Command;

use crate::redirects::write_config;
use crate::support::{free_port, Pki, Redcar, RedisCluster};

fn show(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// `redis-cli --tls` against `port`: its stdout, or its error output when it failed.
fn tls_cli(pki: &Pki, port: u16, client_cert: bool, args: &[&str]) -> Result<String, String> {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["--tls", "--cacert"])
        .arg(pki.path("ca.pem"))
        .args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    if client_cert {
        cmd.arg("--cert")
            .arg(pki.path("client.pem"))
            .arg("--key")
            .arg(pki.path("client.key"));
    }
    let out = cmd.args(args).output().expect("run redis-cli");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status.success() && !stdout.starts_with("Could not") && !stdout.contains("ERR") {
        Ok(stdout)
    } else {
        Err(format!("{stdout} {stderr}"))
    }
}

#[test]
fn clients_talk_to_redcar_over_tls_and_mutual_tls_requires_a_client_certificate() {
    let cluster = RedisCluster::start(3, 1);
    let pki = Pki::new();

    let port = free_port();
    let config = write_config(&format!(
        "tls:\n  listen: 127.0.0.1:{port}\n  cert: {}\n  key: {}\n",
        show(&pki.path("server.pem")),
        show(&pki.path("server.key")),
    ));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    assert_eq!(
        tls_cli(&pki, port, false, &["SET", "tls:k", "v"]),
        Ok("OK".to_string())
    );
    assert_eq!(
        tls_cli(&pki, port, false, &["GET", "tls:k"]),
        Ok("v".to_string())
    );
    // The plain listener keeps working next to it; the TLS port speaks only TLS.
    assert_eq!(redcar.cli(&["GET", "tls:k"]), "v");
    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    assert!(
        metrics.contains("redcar_client_connections_accepted_total{listener=\"tls\"} 2"),
        "{metrics}"
    );

    let mutual_port = free_port();
    let mutual = write_config(&format!(
        "tls:\n  listen: 127.0.0.1:{mutual_port}\n  cert: {}\n  key: {}\n  client_ca: {}\n",
        show(&pki.path("server.pem")),
        show(&pki.path("server.key")),
        show(&pki.path("ca.pem")),
    ));
    let _mutual = Redcar::start_with(&cluster.seeds(), &["--config", mutual.path_str()]);
    assert!(
        tls_cli(&pki, mutual_port, false, &["PING"]).is_err(),
        "no client certificate: refused"
    );
    assert_eq!(
        tls_cli(&pki, mutual_port, true, &["GET", "tls:k"]),
        Ok("v".to_string())
    );
}

#[test]
fn a_missing_or_bad_certificate_stops_start_up_naming_the_key() {
    let pki = Pki::new();
    let check = crate::support::redcar::check_config_yaml;
    let (code, stderr) = check(&format!(
        "tls:\n  listen: 127.0.0.1:0\n  cert: {}\n  key: {}\n",
        show(&pki.path("server.pem")),
        show(&pki.path("client.key")),
    ));
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("do not make a usable pair"), "{stderr}");
    let (code, stderr) = check(&format!(
        "listen: 127.0.0.1:0\ntls:\n  cert: {}\n",
        show(&pki.path("server.pem"))
    ));
    assert_eq!(code, Some(64), "{stderr}");
    assert!(stderr.contains("`tls.listen` is not"), "{stderr}");
}
