//! `redcar doctor`: connect to every node of a Redis Cluster and report the misconfigurations
//! that cost latency or availability (AOF fsync on every write, no replica, no memory limit...),
//! each with its severity, nodes, explanation and fix. See docs/doctor.md.
//!
//! - `client`: a minimal RESP client with timeouts (reuses `protocol` for the wire format).
//! - `gather`: topology from the first reachable seed, then every node's INFO, CONFIG, etc.
//! - `parse`: Redis replies → plain data; `model`: that data and the findings.
//! - `checks`: one small pure function per check, unit-tested on canned INFO/CONFIG text.
//! - `report`: the human table, the JSON document and the exit status.
//!
//! A crate of its own, called by the `redcar` binary (`redcar doctor`): it talks to the nodes
//! with its own small client, so it needs none of the proxy's code, only the RESP codec and
//! command table (`redcar-protocol`) and TLS towards the nodes (`redcar-tls`).
#![warn(unreachable_pub, missing_docs)]

mod checks;
mod client;
mod gather;
mod model;
mod parse;
mod report;

use std::io::Write;
use std::time::Duration;

use client::ConnectOptions;
pub use client::Credentials;
use report::Report;

/// Exit status when no seed could be read (distinct from 0/1/2, which grade the cluster).
const EXIT_NO_SEED: u8 = 3;
/// Exit status for bad arguments (EX_USAGE), as for the proxy's bad configuration.
pub const EXIT_USAGE: u8 = 64;

/// What to diagnose and how to print it.
#[derive(Clone, Debug)]
pub struct DoctorOptions {
    /// Seeds `host:port`; the first that answers `CLUSTER NODES` describes the cluster.
    pub seeds: Vec<String>,
    /// JSON on stdout instead of the table.
    pub json: bool,
    /// Bound on each connect and each command.
    pub timeout: Duration,
    /// `AUTH` on every node connection, when the cluster requires it.
    pub credentials: Option<Credentials>,
    /// TLS towards the nodes (`--tls`, `--cacert`, `--cert`, `--key`, `--sni`).
    pub tls: redcar_tls::UpstreamTlsConfig,
}

// === impl Options ===

impl DoctorOptions {
    /// Rejects what cannot work before connecting anywhere; the message names the argument.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.seeds.is_empty() {
            return Err("--cluster: give at least one seed HOST:PORT".to_string());
        }
        for seed in &self.seeds {
            let port = seed
                .rsplit_once(':')
                .map(|(host, port)| (host.is_empty(), port.parse::<u16>()));
            if !matches!(port, Some((false, Ok(p))) if p > 0) {
                return Err(format!("--cluster: `{seed}` is not HOST:PORT"));
            }
        }
        if self.timeout.is_zero() {
            return Err("--timeout: must be greater than 0".to_string());
        }
        Ok(())
    }
}

/// TLS settings are checked, and handshake failures explained, by `redcar_tls` (the proxy's own
/// code), whose messages name config keys; the doctor's user typed flags.
fn flag_names(message: &str) -> String {
    message
        .replace("`upstream.tls.ca_file`", "--cacert")
        .replace("`upstream.tls.cert_file`", "--cert")
        .replace("`upstream.tls.key_file`", "--key")
        .replace("`upstream.tls.server_name`", "--sni")
}

/// Runs the diagnosis, prints the report on stdout (errors on stderr) and returns the exit
/// status: 0 ok/info, 1 warn, 2 critical, 3 no seed reachable, 64 bad arguments.
pub async fn run(options: &DoctorOptions) -> u8 {
    if let Err(message) = options.validate() {
        eprintln!("redcar doctor: {message}");
        return EXIT_USAGE;
    }
    let tls = match options.tls.connector() {
        Ok(tls) => tls,
        Err(message) => {
            eprintln!("redcar doctor: {}", flag_names(&message));
            return EXIT_USAGE;
        }
    };
    let connect = ConnectOptions {
        timeout: options.timeout,
        credentials: options.credentials.clone(),
        tls,
    };
    let seeds: Vec<String> = options.seeds.iter().map(|s| s.trim().to_string()).collect();
    let (seed, topology) = match gather::discover(&seeds, &connect).await {
        Ok(found) => found,
        Err(error) => {
            let error = flag_names(&error.to_string());
            eprintln!("redcar doctor: {error}");
            if options.json {
                let doc = serde_json::json!({ "error": error, "exit_code": EXIT_NO_SEED });
                println!("{doc:#}");
            }
            return EXIT_NO_SEED;
        }
    };
    let snapshot = gather::gather(seed, topology, &connect).await;
    let findings = checks::run_all(&snapshot);
    let report = Report::new(&snapshot, &findings);
    let text = if options.json {
        report.to_json() + "\n"
    } else {
        report.to_table()
    };
    // A closed stdout (`| head`) is the reader's choice, not a failure: the status still counts.
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    report.exit_code
}
