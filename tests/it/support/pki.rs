//! `Pki`: a throwaway certificate authority for TLS tests — a CA, a server certificate for
//! `localhost`/`127.0.0.1` (used by redcar's listener and by TLS cluster nodes) and a client
//! certificate, as PEM files in a temp dir removed on drop.

use std::path::PathBuf;

use rcgen::{BasicConstraints, Certificate, CertificateParams, DnType, IsCa, KeyPair};

/// The files: `ca.pem`, `server.pem`, `server.key`, `client.pem`, `client.key`.
pub struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// A new CA (its own key, so two `Pki`s never trust each other's certificates).
    pub fn new() -> Pki {
        let dir = tempfile::tempdir().expect("temp dir");
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "redcar test CA");
        let ca = ca_params.self_signed(&ca_key).expect("CA cert");
        let leaf = |names: Vec<String>, cn: &str| -> (Certificate, KeyPair) {
            let key = KeyPair::generate().expect("key");
            let mut params = CertificateParams::new(names).expect("params");
            params.distinguished_name.push(DnType::CommonName, cn);
            (params.signed_by(&key, &ca, &ca_key).expect("signed"), key)
        };
        let (server, server_key) = leaf(
            vec!["localhost".to_string(), "127.0.0.1".to_string()],
            "localhost",
        );
        let (client, client_key) = leaf(vec!["app".to_string()], "app");
        let write = |name: &str, pem: String| {
            std::fs::write(dir.path().join(name), pem).expect("write pem")
        };
        write("ca.pem", ca.pem());
        write("server.pem", server.pem());
        write("server.key", server_key.serialize_pem());
        write("client.pem", client.pem());
        write("client.key", client_key.serialize_pem());
        Pki { dir }
    }

    /// The path of one of the files.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// [`path`](Self::path) as a string, for configs and command lines.
    pub fn show(&self, name: &str) -> String {
        self.path(name).to_string_lossy().into_owned()
    }
}
