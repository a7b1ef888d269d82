//! Value types every layer may use: durations and sizes as written in the config, secrets (redacted
//! when printed, digested for comparison), PEM loading and SHA-1 names. A leaf: it imports nothing
//! from the rest of the crate, so `config` can stay at the edge (only `app` and `main` import it)
//! while each module parses its own settings with these.
//!
//! | Module | Holds |
//! | --- | --- |
//! | `units` | duration and size parsing, formatting and serde adapters (the crate `redcar_units`, crates/redcar-units, shared with the tools) |
//! | `secret` | `Secret` (the four ways to give a password) and `PasswordDigest` |
//! | `pem` | certificate, key and CA loading for both TLS sides (from the crate `redcar_tls`, crates/redcar-tls) |
//!
//! Errors here are plain strings naming the config key; the caller wraps them into its own error
//! type (`ConfigError`, a reload failure), so these stay free of any layer's types.
#![warn(unreachable_pub, missing_docs)]

// PEM loading lives with TLS towards the nodes in its own crate, shared with `redcar doctor`.
pub(crate) use redcar_tls::pem;
pub(crate) mod secret;
// Durations and sizes live in their own crate, shared with the tools (`redcar top`, the Envoy
// converter) that take the same spellings; named `values::units` here like the modules beside it.
pub(crate) use redcar_units as units;

/// Lowercase hex of the SHA-1 of `data`: how Redis names a script (`EVALSHA`), and the form of a
/// cluster node id.
/// Called when the router remembers a script body (`EVAL`, `SCRIPT LOAD`) and for the node ids the
/// cluster facade shows; allocates the 40-character string each time.
pub(crate) fn sha1_hex(data: impl AsRef<[u8]>) -> String {
    use sha1::Digest;
    format!("{:x}", sha1::Sha1::digest(data.as_ref()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sha1_hex_is_redis_script_naming() {
        // `SCRIPT LOAD "return 1"` answers this sha on Redis 7.0.
        assert_eq!(
            super::sha1_hex("return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }
}
