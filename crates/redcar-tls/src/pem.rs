//! PEM files read at start-up — certificate chains, CA bundles and private keys — shared by the
//! TLS listener (`tls.*`) and TLS towards the nodes (`upstream.tls.*`); errors name the key.
//!
//! Each function reads its file whole, once, when the listener or the upstream TLS config is built
//! (start-up and reload); nothing here is on the command path. Errors are plain strings that start
//! with the config key, so the config error a user sees says which setting to fix.

use std::path::Path;

use tokio_rustls::rustls::pki_types::pem::{self, PemObject};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::RootCertStore;

/// Every certificate in the PEM file at `path`; at least one, or an error naming `key`.
/// Other PEM sections in the file (a private key in a combined file) are skipped; the order of the
/// file is kept, so the leaf certificate must come first as TLS sends it. Used for `tls.cert` and
/// `upstream.tls.cert_file`, and by [`roots`].
pub fn certificates(key: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem =
        std::fs::read(path).map_err(|e| format!("`{key}`: cannot read {}: {e}", path.display()))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("`{key}` {}: {}", path.display(), describe(e)))?;
    if certs.is_empty() {
        return Err(format!(
            "`{key}` {}: no PEM certificate in it",
            path.display()
        ));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 or SEC1) in the PEM file at `path`.
/// Certificates before the key are skipped, so a combined cert-and-key file works for both keys.
/// Fails when the file cannot be read, holds no key, or a section is malformed.
pub fn private_key(key: &str, path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let pem =
        std::fs::read(path).map_err(|e| format!("`{key}`: cannot read {}: {e}", path.display()))?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        pem::Error::NoItemsFound => format!("`{key}` {}: no PEM private key in it", path.display()),
        e => format!("`{key}` {}: {}", path.display(), describe(e)),
    })
}

/// A PEM error in words: the parser's own text shows the offending lines as byte arrays.
/// Only the two errors a cut or hand-edited file produces are reworded; the rest keep the parser's
/// text.
fn describe(error: pem::Error) -> String {
    match error {
        pem::Error::MissingSectionEnd { end_marker } => format!(
            "no `-----END {}-----` line: the file is cut short or not PEM",
            String::from_utf8_lossy(&end_marker)
        ),
        pem::Error::IllegalSectionStart { line } => format!(
            "malformed BEGIN line `{}`",
            String::from_utf8_lossy(&line).trim_end()
        ),
        other => other.to_string(),
    }
}

/// A trust store holding every CA certificate of the PEM file at `path`.
/// Fails on the first certificate rustls will not take as a trust anchor, rather than silently
/// trusting fewer CAs than the file lists. Used for `tls.client_ca` and `upstream.tls.ca_file`.
pub fn roots(key: &str, path: &Path) -> Result<RootCertStore, String> {
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

    #[test]
    fn a_chain_a_key_and_a_truncated_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let one = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        let two = rcgen::generate_simple_self_signed(vec!["ca".into()]).expect("cert");
        let chain = dir.path().join("chain.pem");
        let key = dir.path().join("key.pem");
        // A key section between the certificates is skipped, as in a combined PEM file.
        let text = format!(
            "{}{}{}",
            one.cert.pem(),
            one.key_pair.serialize_pem(),
            two.cert.pem()
        );
        std::fs::write(&chain, &text).expect("write");
        std::fs::write(&key, one.key_pair.serialize_pem()).expect("write");
        let certs = certificates("tls.cert", &chain).expect("two certificates");
        assert_eq!(certs.len(), 2);
        assert_eq!(certs[0].as_ref(), one.cert.der().as_ref());
        assert_eq!(certs[1].as_ref(), two.cert.der().as_ref());
        assert!(matches!(
            private_key("tls.key", &chain).expect("the key in the combined file"),
            PrivateKeyDer::Pkcs8(_)
        ));
        assert_eq!(roots("tls.ca", &chain).expect("roots").len(), 2);

        let cut = dir.path().join("cut.pem");
        let pem = one.cert.pem();
        std::fs::write(&cut, &pem[..pem.len() / 2]).expect("write");
        let err = certificates("tls.cert", &cut).expect_err("no END line");
        assert!(err.starts_with("`tls.cert` "), "{err}");
        assert!(
            err.ends_with(
                ": no `-----END CERTIFICATE-----` line: the file is cut short or not PEM"
            ),
            "{err}"
        );
    }
}
