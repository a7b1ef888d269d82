//! `redcar config convert-envoy`: runs the Envoy converter (crates/redcar-envoy) and checks that
//! what it writes loads as this proxy's config before anything is printed.
//!
//! The converter writes YAML and knows none of the proxy's types; the check that its output is
//! a config redcar reads (every key known, every value well formed) needs them, so it is done
//! here, by the caller, and a failure is reported by the converter as its own bug. The mapping's
//! unit tests sit next to this file for the same reason: they read the output back as a
//! [`Config`] (`tests.rs`, `forms_tests.rs`, `routes_tests.rs`, `dropped_tests.rs`,
//! `tls_tests.rs`).

use crate::config::{Config, ConvertEnvoyArgs};

/// Runs the subcommand with the flags given; returns the exit status (0 converted, 1 not, as
/// docs/migrating-from-envoy.md says), which `main.rs` passes on.
pub fn run(args: &ConvertEnvoyArgs) -> u8 {
    let options = redcar_envoy::Options {
        file: args.file.clone(),
        listener: args.listener.clone(),
        cluster: args.cluster.clone(),
    };
    redcar_envoy::run(&options, loads)
}

/// Whether `yaml` loads as a redcar config, with the config's error when it does not.
fn loads(yaml: &str) -> Result<(), String> {
    Config::from_yaml(yaml).map(drop).map_err(|e| e.to_string())
}

#[cfg(test)]
mod dropped_tests;
#[cfg(test)]
mod forms_tests;
#[cfg(test)]
mod routes_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;
