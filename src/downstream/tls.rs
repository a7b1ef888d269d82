//! The TLS listener (`tls:`): rustls with the server certificate from the config, optionally
//! requiring client certificates signed by `client_ca`.
//!
//! Handshakes run in their own tasks, bounded by `handshake_timeout`, and only finished
//! connections reach the accept loop, so a client that stalls mid-handshake holds up nobody.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Mutex};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::accept::Accept;
use super::facade::FacadeConfig;
use crate::values::{pem, units};

/// `tls:` in the config file.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// TCP address for TLS clients (in addition to `listen` and `unix`); off when absent.
    pub(crate) listen: Option<String>,
    /// PEM file with the server certificate chain (leaf first).
    pub(crate) cert: Option<PathBuf>,
    /// PEM file with the server's private key (PKCS#8, PKCS#1 or SEC1).
    pub(crate) key: Option<PathBuf>,
    /// PEM file of CA certificates; when set, clients must present a certificate signed by one
    /// of them (mutual TLS).
    pub(crate) client_ca: Option<PathBuf>,
    /// A client that has not finished its handshake within this long is disconnected.
    #[serde(with = "units::duration")]
    pub(crate) handshake_timeout: Duration,
    /// Present this listener as a one-node Redis Cluster (see docs/cluster-facade.md).
    pub(crate) cluster_facade: FacadeConfig,
}

impl Default for TlsConfig {
    /// No listener; a 10 s handshake limit once one is set.
    fn default() -> Self {
        TlsConfig {
            listen: None,
            cert: None,
            key: None,
            client_ca: None,
            handshake_timeout: Duration::from_secs(10),
            cluster_facade: FacadeConfig::default(),
        }
    }
}

impl TlsConfig {
    /// Reads the certificate, key and CA files and builds the rustls configuration; errors
    /// name the key and the file.
    pub(crate) fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        let (Some(cert), Some(key)) = (&self.cert, &self.key) else {
            return Err("`tls.listen` needs `tls.cert` and `tls.key`".to_string());
        };
        let chain = pem::certificates("tls.cert", cert)?;
        let key = pem::private_key("tls.key", key)?;
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(path) => {
                let roots = pem::roots("tls.client_ca", path)?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| format!("`tls.client_ca` {}: {e}", path.display()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("`tls.cert`/`tls.key` do not make a usable pair: {e}"))?;
        Ok(Arc::new(config))
    }
}

/// Finished TLS connections, from a background task that accepts and handshakes.
pub(crate) struct TlsListener {
    /// Connections whose handshake finished, with the peer's address; at most 64 wait here, so a
    /// burst of handshakes finishing at once holds back the handshake tasks rather than growing a
    /// queue.
    ready: Mutex<mpsc::Receiver<(TlsStream<TcpStream>, Arc<str>)>>,
}

impl TlsListener {
    /// Starts accepting on `tcp`; stops when `shutdown` fires.
    ///
    /// An accept error (out of descriptors, say) is logged and retried after 50 ms rather than
    /// ending the listener. A failed or timed-out handshake is logged at debug only: port scanners
    /// and health checks that never speak TLS would otherwise flood the log.
    pub(crate) fn start<L>(
        tcp: L,
        config: Arc<ServerConfig>,
        handshake_timeout: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) -> TlsListener
    where
        L: Accept<Stream = TcpStream> + Send + Sync + 'static,
    {
        let (tx, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = tcp.accept_client() => accepted,
                    _ = shutdown.changed() => return,
                };
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "TLS accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener {
            ready: Mutex::new(ready),
        }
    }
}

impl Accept for TlsListener {
    type Stream = TlsStream<TcpStream>;
    const LABEL: &'static str = "tls";

    /// The address the client reached (what a cluster facade announces).
    fn local_addr(stream: &Self::Stream) -> Option<std::net::SocketAddr> {
        stream.get_ref().0.local_addr().ok()
    }

    /// Never fails: when the handshake task is gone (shutdown), it waits forever, and the accept
    /// loop ends on its own shutdown signal.
    async fn accept_client(&self) -> std::io::Result<(Self::Stream, std::sync::Arc<str>)> {
        match self.ready.lock().await.recv().await {
            Some(ready) => Ok(ready),
            None => std::future::pending().await,
        }
    }
}
