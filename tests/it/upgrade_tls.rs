//! TLS clients at an upgrade in place (docs/operations.md; docs/decisions/0002): rustls cannot
//! carry a session to another process, so a TLS client is closed at its safe point, with
//! nothing owed to it, and reconnects to the new process, which serves it at once.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::redirects::write_config;
use crate::support::{free_port, Pki, Redcar, RedisCluster};
use crate::upgrade::{upgrade, wait_gone, PidFile};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::CertificateDer;

/// A TLS connection to redcar speaking RESP one line-reply at a time.
struct TlsClient(BufReader<StreamOwned<ClientConnection, TcpStream>>);

impl TlsClient {
    fn connect(pki: &Pki, port: u16) -> TlsClient {
        let mut roots = RootCertStore::empty();
        let ca = std::fs::read(pki.path("ca.pem")).expect("ca.pem");
        for cert in CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.expect("a CA certificate")).expect("trusted");
        }
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("localhost").expect("name");
        let conn = ClientConnection::new(Arc::new(config), name).expect("TLS client");
        let tcp = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        TlsClient(BufReader::new(StreamOwned::new(conn, tcp)))
    }

    /// Sends an inline command; its reply's first line (`+PONG`, `+OK`, `$1`), or the I/O
    /// error, or "" at the end of the stream.
    fn line(&mut self, command: &str) -> std::io::Result<String> {
        self.0
            .get_mut()
            .write_all(format!("{command}\r\n").as_bytes())?;
        self.0.get_mut().flush()?;
        self.next_line()
    }

    fn next_line(&mut self) -> std::io::Result<String> {
        let mut line = String::new();
        self.0.read_line(&mut line)?;
        Ok(line.trim_end().to_string())
    }
}

#[test]
fn a_tls_client_is_closed_once_with_nothing_owed_and_served_again_after_reconnecting() {
    let cluster = RedisCluster::start(3, 0);
    let pki = Pki::new();
    let port = free_port();
    let config = write_config(&format!(
        "tls:\n  listen: 127.0.0.1:{port}\n  cert: {}\n  key: {}\n",
        pki.path("server.pem").display(),
        pki.path("server.key").display(),
    ));
    let pid_file = PidFile::new();
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg(), "--config", config.path_str()],
    );
    let old = redcar.pid().expect("running");
    let mut tls = TlsClient::connect(&pki, port);
    assert_eq!(tls.line("PING").expect("ping"), "+PONG");
    assert_eq!(tls.line("SET tls:up before").expect("set"), "+OK");

    let started = std::time::Instant::now();
    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 0, "{out}\nlog:\n{}", redcar.log());
    // At its safe point, not at drain_timeout (10 s): the old process is gone well before.
    wait_gone(old, Duration::from_secs(5), || redcar.log());
    assert!(started.elapsed() < Duration::from_secs(5));
    // Closed while idle: the stream ends (close_notify, or a reset) without a reply owed.
    let after = tls.next_line();
    assert!(
        matches!(&after, Ok(line) if line.is_empty()) || after.is_err(),
        "the TLS client was closed, not served by the old process: {after:?}"
    );
    let log = redcar.log();
    let finished = log
        .lines()
        .find(|l| l.contains("upgrade: handover finished"))
        .unwrap_or_default();
    assert!(finished.contains("moved=0 closed=1"), "{log}");
    // Reconnecting reaches the new process, with the new process's listener (the same port).
    let mut again = TlsClient::connect(&pki, port);
    assert_eq!(again.line("GET tls:up").expect("get"), "$6");
    assert_eq!(again.next_line().expect("value"), "before");
    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    assert!(
        metrics.contains("redcar_client_connections_accepted_total{listener=\"tls\"} 1"),
        "the new process accepted the reconnect: {metrics}"
    );
}

/// A renewed certificate and key, put at the configured paths, take
/// effect through an upgrade with the same binary (docs/operations.md, "Rotating certificates").
#[test]
fn a_renewed_certificate_is_served_after_an_upgrade_with_the_same_binary() {
    let cluster = RedisCluster::start(3, 0);
    let (old_pki, new_pki) = (Pki::new(), Pki::new());
    let dir = tempfile::tempdir().expect("temp dir");
    let (cert, key) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    let install = |pki: &Pki| {
        std::fs::copy(pki.path("server.pem"), &cert).expect("cert");
        std::fs::copy(pki.path("server.key"), &key).expect("key");
    };
    install(&old_pki);
    let port = free_port();
    let config = write_config(&format!(
        "tls:\n  listen: 127.0.0.1:{port}\n  cert: {}\n  key: {}\n",
        cert.display(),
        key.display(),
    ));
    let pid_file = PidFile::new();
    let redcar = Redcar::start_with(
        &cluster.seeds(),
        &["--pid-file", &pid_file.arg(), "--config", config.path_str()],
    );
    let old = redcar.pid().expect("running");
    let mut before = TlsClient::connect(&old_pki, port);
    assert_eq!(before.line("PING").expect("ping"), "+PONG");

    install(&new_pki);
    let (code, out) = upgrade(&pid_file.path);
    assert_eq!(code, 0, "{out}\nlog:\n{}", redcar.log());
    wait_gone(old, Duration::from_secs(5), || redcar.log());

    let mut renewed = TlsClient::connect(&new_pki, port);
    assert_eq!(
        renewed.line("PING").expect("the renewed certificate"),
        "+PONG"
    );
    // A client that trusts only the old CA no longer completes a handshake.
    let mut stale = TlsClient::connect(&old_pki, port);
    assert!(
        stale.line("PING").is_err(),
        "the old certificate is still served"
    );
}
