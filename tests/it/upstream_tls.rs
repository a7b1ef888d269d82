//! TLS towards the nodes (`upstream.tls`): plain clients → redcar → a TLS-only cluster. Every
//! kind of node connection (pipelined, dedicated, topology, redirects) goes over TLS; a client
//! certificate works when the nodes require one and its absence, or a wrong CA, is a clear error
//! rather than a hang; TLS and AUTH together; `redcar doctor --tls`.

use std::thread;
use std::time::{Duration, Instant};

use crate::redirects::write_config;
use crate::support::redcar::check_config_yaml;
use crate::support::{Pki, Redcar, TlsCluster, Value};

/// `upstream.tls` with the CA of `pki` and, when `client_cert`, its client certificate.
fn tls_yaml(pki: &Pki, client_cert: bool) -> String {
    let mut yaml = format!(
        "upstream:\n  tls:\n    enabled: true\n    ca_file: {}\n",
        pki.show("ca.pem")
    );
    if client_cert {
        yaml += &format!(
            "    cert_file: {}\n    key_file: {}\n",
            pki.show("client.pem"),
            pki.show("client.key")
        );
    }
    yaml
}

/// Runs `redcar doctor ARGS`; returns (exit status, stdout + stderr).
fn doctor(args: &[&str]) -> (i32, String) {
    let (code, stdout, stderr) = crate::doctor::doctor(args);
    (code, stdout + &stderr)
}

/// `/readyz` stays 503 for `wait`, and the log ends up containing `expected`.
fn assert_never_ready(redcar: &Redcar, wait: Duration, expected: &[&str]) {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        let status = redcar.http_get("/readyz").map(|(status, _)| status);
        assert!(!matches!(status, Ok(200)), "ready without a usable node");
        thread::sleep(Duration::from_millis(100));
    }
    let log = redcar.log();
    for text in expected {
        assert!(log.contains(text), "log lacks {text:?}:\n{log}");
    }
}

#[test]
fn plain_clients_reach_a_tls_only_cluster_through_redcar() {
    let pki = Pki::new();
    let cluster = TlsCluster::start(&pki, 3, "optional");
    // A long refresh interval, so only the MOVED below can teach redcar the new owner.
    let config = write_config(&format!(
        "cluster:\n  refresh_interval: 1h\n{}",
        tls_yaml(&pki, false)
    ));
    let redcar = Redcar::start_with(&cluster.seeds(), &["--config", config.path_str()]);
    let mut c = redcar.client();

    // Keys on every shard: each node answers over TLS.
    let keys: Vec<String> = (0..30).map(|i| format!("tls:key:{i}")).collect();
    for key in &keys {
        assert_eq!(c.q(&["SET", key, key]), Value::simple("OK"));
    }
    let ports = cluster.ports();
    for port in &ports {
        let owned = keys
            .iter()
            .find(|k| cluster.owner_seen_by(*port, cluster.key_slot(k)) == Some(*port));
        let key = owned.unwrap_or_else(|| panic!("no test key on node {port}"));
        assert_eq!(cluster.cli(*port, &["GET", key]), *key, "stored on {port}");
        assert_eq!(c.q(&["GET", key]), Value::bulk(key));
    }
    // MGET across slots: split over the shards, merged in order.
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().map(String::as_str));
    let expected: Vec<Value> = keys.iter().map(Value::bulk).collect();
    assert_eq!(c.q(&mget), Value::Array(Some(expected)));

    // A deep pipeline of large values: many TLS records per write, partial writes.
    let value = "x".repeat(4096);
    let sets: Vec<Vec<String>> = (0..2000)
        .map(|i| vec!["SET".into(), format!("tls:bulk:{i}"), value.clone()])
        .collect();
    let replies = c.pipeline(&sets).expect("pipeline");
    assert!(
        replies.iter().all(|r| *r == Value::simple("OK")),
        "{replies:?}"
    );
    assert_eq!(c.q(&["GET", "tls:bulk:1999"]), Value::bulk(&value));

    // A blocking command on a dedicated connection, woken by a push from another client.
    let mut blocked = redcar.client();
    let waiter = thread::spawn(move || blocked.q(&["BLPOP", "tls:queue", "10"]));
    thread::sleep(Duration::from_millis(300));
    assert_eq!(c.q(&["RPUSH", "tls:queue", "job"]), Value::Int(1));
    let popped = waiter.join().expect("BLPOP thread");
    assert_eq!(
        popped,
        Value::Array(Some(vec![Value::bulk("tls:queue"), Value::bulk("job")]))
    );

    // A MOVED is followed over TLS to the slot's new owner.
    let moved = "tls:moved";
    let slot = cluster.key_slot(moved);
    let from = cluster.owner_seen_by(ports[0], slot).expect("slot owner");
    let to = *ports.iter().find(|p| **p != from).expect("another node");
    cluster.move_empty_slot(slot, to);
    assert_eq!(c.q(&["SET", moved, "v"]), Value::simple("OK"));
    assert_eq!(cluster.cli(to, &["GET", moved]), "v");
    let (_, metrics) = redcar.http_get("/metrics").expect("scrape");
    let series = format!("redcar_redirects_total{{kind=\"moved\",node=\"127.0.0.1:{to}\"}} 1");
    assert!(metrics.contains(&series), "{series} missing:\n{metrics}");

    // What CLUSTER SLOTS reports on a TLS-only cluster is the TLS port: redcar used it.
    assert!(
        metrics.contains(&format!("node=\"127.0.0.1:{}\"", ports[1])),
        "{metrics}"
    );

    // redcar doctor over TLS reads every node; without --tls it cannot.
    let seeds = cluster.seeds();
    let (code, text) = doctor(&[
        "--cluster",
        &seeds,
        "--tls",
        "--cacert",
        &pki.show("ca.pem"),
    ]);
    assert!(matches!(code, 0..=2), "exit {code}:\n{text}");
    assert!(text.contains("3 nodes (3 primaries"), "{text}");
    let (code, text) = doctor(&["--cluster", &seeds, "--timeout", "1s"]);
    assert_eq!(code, 3, "plain TCP to a TLS port:\n{text}");

    // `server_name` replaces the node's IP as the name verified: one the certificate holds
    // works, another is refused naming the mismatch.
    let named = write_config(&format!(
        "{}    server_name: localhost\n",
        tls_yaml(&pki, false)
    ));
    let by_name = Redcar::start_with(&seeds, &["--config", named.path_str()]);
    assert_eq!(by_name.client().q(&["GET", moved]), Value::bulk("v"));
    let ca = pki.show("ca.pem");
    let (code, text) = doctor(&[
        "--cluster",
        &seeds,
        "--tls",
        "--cacert",
        &ca,
        "--sni",
        "x.test",
    ]);
    assert_eq!(code, 3, "{text}");
    assert!(
        text.contains("certificate not valid for name \"x.test\""),
        "{text}"
    );
    assert!(text.contains("--sni"), "doctor names its own flags: {text}");
}

#[test]
fn nodes_requiring_client_certificates_and_a_password() {
    let pki = Pki::new();
    let cluster = TlsCluster::start(&pki, 3, "yes");
    for port in cluster.ports() {
        assert_eq!(
            cluster.cli(port, &["CONFIG", "SET", "requirepass", "node-pw"]),
            "OK"
        );
    }
    let seeds = cluster.seeds();

    // Client certificate and AUTH, on pipelined and dedicated connections; a write-coalescing
    // window makes the TLS writer flush while the window holds the next batch.
    let good = write_config(&format!(
        "{}  password: node-pw\n  flush_interval: 2ms\n",
        tls_yaml(&pki, true)
    ));
    let redcar = Redcar::start_with(&seeds, &["--config", good.path_str()]);
    let mut c = redcar.client();
    assert_eq!(c.q(&["SET", "mtls:k", "v"]), Value::simple("OK"));
    assert_eq!(c.q(&["GET", "mtls:k"]), Value::bulk("v"));
    assert_eq!(c.q(&["RPUSH", "mtls:list", "a"]), Value::Int(1));
    assert_eq!(
        c.q(&["BLPOP", "mtls:list", "1"]),
        Value::Array(Some(vec![Value::bulk("mtls:list"), Value::bulk("a")]))
    );

    // No client certificate: the nodes refuse the session; redcar says so and is not ready.
    let no_cert = write_config(&format!("{}  password: node-pw\n", tls_yaml(&pki, false)));
    let refused = Redcar::spawn(&seeds, &["--config", no_cert.path_str()]);
    assert_never_ready(&refused, Duration::from_secs(2), &["connect failed"]);
    let log = refused.log();
    assert!(
        log.contains("CertificateRequired") || log.contains("certificate"),
        "the log names the certificate:\n{log}"
    );
    // Clients are told why there is no slot map, not only that the slot is not served.
    let reply = refused.client().q(&["GET", "mtls:k"]);
    let error = reply.error().unwrap_or_default();
    assert!(error.starts_with("CLUSTERDOWN"), "{reply:?}");
    assert!(error.contains("CertificateRequired"), "{reply:?}");

    // A CA that did not sign the nodes' certificates: refused by redcar, named in the log.
    let other = Pki::new();
    let wrong_ca = write_config(&tls_yaml(&other, false));
    let untrusting = Redcar::spawn(&seeds, &["--config", wrong_ca.path_str()]);
    assert_never_ready(
        &untrusting,
        Duration::from_secs(2),
        &["invalid peer certificate", "upstream.tls.ca_file"],
    );
    let reply = untrusting.client().q(&["SET", "mtls:k", "w"]);
    let error = reply.error().unwrap_or_default();
    assert!(error.contains("TLS handshake failed"), "{reply:?}");

    // redcar doctor needs the client certificate too.
    let ca = pki.show("ca.pem");
    let (cert, key) = (pki.show("client.pem"), pki.show("client.key"));
    let with_cert = [
        "--cluster",
        &seeds,
        "--tls",
        "--cacert",
        &ca,
        "--cert",
        &cert,
        "--key",
        &key,
        "--password",
        "node-pw",
    ];
    let (code, text) = doctor(&with_cert);
    assert!(matches!(code, 0..=2), "exit {code}:\n{text}");
    let (code, text) = doctor(&["--cluster", &seeds, "--tls", "--cacert", &ca]);
    assert_eq!(code, 3, "no client certificate:\n{text}");
    let other_ca = other.show("ca.pem");
    let (code, text) = doctor(&["--cluster", &seeds, "--tls", "--cacert", &other_ca]);
    assert_eq!(code, 3, "{text}");
    assert!(text.contains("invalid peer certificate"), "{text}");
}

#[test]
fn bad_upstream_tls_settings_stop_start_up_naming_the_key() {
    let pki = Pki::new();
    let cases = [
        (
            "upstream:\n  tls:\n    enabled: true\n".to_string(),
            "needs `upstream.tls.ca_file`",
        ),
        (
            "upstream:\n  tls:\n    enabled: true\n    ca_file: /nonexistent/ca.pem\n".to_string(),
            "`upstream.tls.ca_file`: cannot read /nonexistent/ca.pem",
        ),
        (
            format!(
                "upstream:\n  tls:\n    enabled: true\n    ca_file: {}\n",
                pki.show("client.key")
            ),
            "no PEM certificate",
        ),
        (
            format!(
                "{}    cert_file: {}\n",
                tls_yaml(&pki, false),
                pki.show("client.pem")
            ),
            "`upstream.tls.cert_file` is set without `upstream.tls.key_file`",
        ),
        (
            format!(
                "{}    cert_file: {}\n    key_file: {}\n",
                tls_yaml(&pki, false),
                pki.show("client.pem"),
                pki.show("server.key")
            ),
            "do not make a usable pair",
        ),
        (
            format!("upstream:\n  tls:\n    ca_file: {}\n", pki.show("ca.pem")),
            "`upstream.tls.enabled` is false",
        ),
    ];
    for (yaml, expected) in cases {
        let yaml = format!("listen: 127.0.0.1:0\ncluster:\n  seeds: [127.0.0.1:7000]\n{yaml}");
        let (code, stderr) = check_config_yaml(&yaml);
        assert_eq!(code, Some(64), "{yaml}\n{stderr}");
        assert!(
            stderr.contains(expected),
            "{yaml}\nwanted {expected:?}:\n{stderr}"
        );
    }
    let yaml = format!(
        "listen: 127.0.0.1:0\ncluster:\n  seeds: [127.0.0.1:7000]\n{}",
        tls_yaml(&pki, true)
    );
    let (code, stderr) = check_config_yaml(&yaml);
    assert_eq!(code, Some(0), "a good configuration passes:\n{stderr}");
}
