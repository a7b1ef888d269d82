//! PEM files read at start-up — certificate chains, CA bundles and private keys — shared by the
//! TLS listener (`tls.*`) and TLS towards the nodes (`upstream.tls.*`); errors name the key.

use std::path::Path;

use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::RootCertStore;

/// Every certificate in the PEM file at `path`; at least one, or an error naming `key`.
pub(crate) fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem =
        std::fs::read(path).map_err(|e| format!("`{key}`: cannot read {}: {e}", path.display()))?;
    let certs = rustls_pemfile::certs(&mut pem.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{key}` {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "`{key}` {}: no PEM certificate in it",
            path.display()
        ));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM file at `path`.
pub(crate) fn private_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem =
        std::fs::read(path).map_err(|e| format!("`{key}`: cannot read {}: {e}", path.display()))?;
    rustls_pemfile::private_key(&mut pem.as_slice())
        .map_err(|e| format!("`{key}` {}: {e}", path.display()))?
        .ok_or_else(|| format!("`{key}` {}: no PEM private key in it", path.display()))
}

/// A trust store holding every CA certificate of the PEM file at `path`.
pub(crate) fn roots(key: &str, path: &Path) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for ca in certificates(key, path)? {
        roots
            .add(ca)
            .map_err(|e| format!("`{key}` {}: {e}", path.display()))?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_empty_files_name_the_key() {
        let dir = tempfile::tempdir().expect("temp dir");
        let missing = dir.path().join("nope.pem");
        let err = certificates("upstream.tls.ca_file", &missing).expect_err("missing file");
        assert!(
            err.starts_with("`upstream.tls.ca_file`: cannot read"),
            "{err}"
        );
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not pem at all\n").expect("write");
        let err = certificates("tls.cert", &empty).expect_err("no certificate");
        assert!(err.contains("no PEM certificate"), "{err}");
        let err = private_key("upstream.tls.key_file", &empty).expect_err("no key");
        assert!(err.contains("`upstream.tls.key_file`"), "{err}");
        assert!(err.contains("no PEM private key"), "{err}");
    }
}
