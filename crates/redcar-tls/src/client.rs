//! TLS towards the nodes (`upstream.tls`): the rustls client settings, built once at start-up
//! from the CA, the optional client certificate and the server name, and the handshake every new
//! node connection goes through.
//!
//! The CA file is required: redcar never falls back to the system's roots, because a cluster's
//! certificates come from the operator's own CA and trusting every public CA would let any
//! certificate for the node's name through.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::rustls::ClientConfig;
use tokio_rustls::TlsConnector;

use crate::pem;

/// `upstream.tls:` in the config file.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamTlsConfig {
    /// Every node connection (pipelined, dedicated, topology, health checks) uses TLS.
    pub enabled: bool,
    /// PEM file of the CA certificates that signed the nodes' certificates (required).
    pub ca_file: Option<PathBuf>,
    /// Name sent as SNI and verified in the node's certificate; default: the host of the node's
    /// address (an IP address is checked against the certificate's IP SANs).
    pub server_name: Option<String>,
    /// PEM client certificate chain, for nodes started with `tls-auth-clients yes`.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

/// The TLS side of connecting to a node; cheap to clone (one `Arc` inside).
#[derive(Clone)]
pub struct UpstreamTls {
    /// The rustls client settings (roots, client certificate, safe protocol versions), shared by
    /// every connection.
    connector: TlsConnector,
    /// `upstream.tls.server_name`, parsed once; `None` takes each node's own host.
    server_name: Option<ServerName<'static>>,
}

/// Shows only the server name: the connector holds key material that must not reach a log.
impl std::fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

// === impl UpstreamTlsConfig ===

impl UpstreamTlsConfig {
    /// Reads the files and builds the client settings; `None` while TLS is off. Every error
    /// names the key at fault.
    pub fn connector(&self) -> Result<Option<UpstreamTls>, String> {
        if !self.enabled {
            if self.ca_file.is_some()
                || self.server_name.is_some()
                || self.cert_file.is_some()
                || self.key_file.is_some()
            {
                return Err(
                    "`upstream.tls.*` keys are set but `upstream.tls.enabled` is false: \
                            set `enabled: true` or remove them"
                        .to_string(),
                );
            }
            return Ok(None);
        }
        let Some(ca_file) = &self.ca_file else {
            return Err(
                "`upstream.tls.enabled` needs `upstream.tls.ca_file`: the PEM file of \
                        the CA that signed the nodes' certificates (system roots are not used)"
                    .to_string(),
            );
        };
        let roots = pem::roots("upstream.tls.ca_file", ca_file)?;
        let server_name = match &self.server_name {
            None => None,
            Some(name) => Some(ServerName::try_from(name.clone()).map_err(|e| {
                format!("`upstream.tls.server_name` is `{name}`: not a DNS name or IP address: {e}")
            })?),
        };
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots);
        let config = match (&self.cert_file, &self.key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(
                    pem::certificates("upstream.tls.cert_file", cert)?,
                    pem::private_key("upstream.tls.key_file", key)?,
                )
                .map_err(|e| {
                    format!(
                        "`upstream.tls.cert_file`/`upstream.tls.key_file` do not make a usable \
                         pair: {e}"
                    )
                })?,
            (Some(_), None) => {
                return Err(
                    "`upstream.tls.cert_file` is set without `upstream.tls.key_file`".into(),
                )
            }
            (None, Some(_)) => {
                return Err(
                    "`upstream.tls.key_file` is set without `upstream.tls.cert_file`".into(),
                )
            }
        };
        Ok(Some(UpstreamTls {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        }))
    }
}

// === impl UpstreamTls ===

impl UpstreamTls {
    /// The TLS handshake on a fresh TCP connection to `addr`, bounded by `timeout`. The error
    /// says what to check: a certificate problem is the usual cause, not the network.
    pub async fn handshake(
        &self,
        addr: &str,
        tcp: TcpStream,
        timeout: Duration,
    ) -> Result<TlsStream<TcpStream>, String> {
        let name = match &self.server_name {
            Some(name) => name.clone(),
            None => server_name_of(addr)?,
        };
        match tokio::time::timeout(timeout, self.connector.connect(name, tcp)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) if e.to_string().contains("certificate") => Err(format!(
                "TLS handshake failed: {e} (check `upstream.tls.ca_file` and the name verified: \
                 `upstream.tls.server_name`, default the node's host)"
            )),
            Ok(Err(e)) => Err(format!("TLS handshake failed: {e}")),
            Err(_) => Err(format!(
                "TLS handshake timed out after {timeout:?} (is it the node's TLS port?)"
            )),
        }
    }
}

/// The host part of `host:port` (IPv6 without its brackets) as the name to verify.
fn server_name_of(addr: &str) -> Result<ServerName<'static>, String> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string()).map_err(|e| {
        format!("TLS: `{host}` is not a valid server name ({e}); set `upstream.tls.server_name`")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_the_host_of_the_address() {
        assert_eq!(
            server_name_of("127.0.0.1:7000"),
            Ok(ServerName::try_from("127.0.0.1").expect("ip"))
        );
        assert_eq!(
            server_name_of("redis-0.redis:6379"),
            Ok(ServerName::try_from("redis-0.redis").expect("dns"))
        );
        assert_eq!(
            server_name_of("[::1]:7000"),
            Ok(ServerName::try_from("::1").expect("ipv6"))
        );
        assert!(server_name_of("bad_name!:7000").is_err());
    }

    #[test]
    fn settings_that_cannot_work_name_the_key() {
        let off = UpstreamTlsConfig::default();
        assert!(matches!(off.connector(), Ok(None)));
        let stray = UpstreamTlsConfig {
            ca_file: Some("/ca.pem".into()),
            ..UpstreamTlsConfig::default()
        };
        let err = stray.connector().err().unwrap_or_default();
        assert!(err.contains("`upstream.tls.enabled` is false"), "{err}");
        let no_ca = UpstreamTlsConfig {
            enabled: true,
            ..UpstreamTlsConfig::default()
        };
        let err = no_ca.connector().err().unwrap_or_default();
        assert!(err.contains("needs `upstream.tls.ca_file`"), "{err}");
        let missing = UpstreamTlsConfig {
            enabled: true,
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..UpstreamTlsConfig::default()
        };
        let err = missing.connector().err().unwrap_or_default();
        assert!(
            err.starts_with("`upstream.tls.ca_file`: cannot read"),
            "{err}"
        );
    }
}
