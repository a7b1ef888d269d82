//! `redcar config convert-envoy FILE`: an Envoy listener with the `redis_proxy` filter and its
//! `envoy.clusters.redis` cluster, from a bootstrap, Istio `EnvoyFilter` manifests or an admin
//! `config_dump`, turned into the equivalent redcar config, following the table in
//! docs/migrating-from-envoy.md.
//!
//! Settings with no equivalent, or only an approximate one, become comment lines above the
//! section they concern and warnings on stderr: none is dropped without a word. Anything that
//! would make the result accept clients Envoy refused, or read and write other keys, stops the
//! conversion instead.
//!
//! The steps of `convert`, in order, each writing into one `Draft`:
//!
//! 1. `input::read` tells the form apart (bootstrap, EnvoyFilter manifests, config_dump) and
//!    gathers every listener and cluster, field names in their proto spelling (`resources.rs`).
//! 2. `listener::find` picks the one `redis_proxy` filter (`--listener` when there are several) and
//!    converts its address and listener TLS.
//! 3. `routes::convert` reads `prefix_routes`: either every route and cluster (`prefix.rs`,
//!    `backends.rs`) or, with `--cluster`, that one cluster.
//! 4. `cluster::convert` turns the catch-all cluster into `cluster.*` and `upstream.*` (keepalive,
//!    outlier detection, node auth, upstream TLS).
//! 5. `proxy`, `auth` and `faults` convert the filter's own settings; `safety_notes` adds what
//!    concerns the whole result.
//! 6. `run` has the rendered YAML loaded as a redcar config by its caller (the `redcar` binary,
//!    which owns the config's types): a key redcar does not know is a converter bug, reported as
//!    such instead of printed.
//!
//! What holds throughout: a note is one line and never holds a secret's value (only where it is); a
//! secret clients present is written as its SHA-256 when it was inline; the converter reads only
//! the input file (and, for user names, the file or variable a `DataSource` names).
//!
//! A crate of its own, called by the `redcar` binary (`redcar config convert-envoy`): it writes
//! YAML and depends on no part of the proxy, only on the spellings of durations (`redcar-units`).
//! What it shares with the proxy's config by value (the `default` backend's name, the keepalive
//! bounds) is exported, and the proxy's tests check that both agree. The mapping's unit tests sit
//! with that caller (src/app/convert_envoy/), since they read the output back as a `Config`;
//! only the refusals are tested here (`tests.rs`), over the documents of `testing`, which the
//! caller's tests share (feature `testing`).
#![warn(unreachable_pub, missing_docs)]

mod auth;
mod backends;
mod cluster;
mod draft;
mod dump;
mod error;
mod faults;
mod input;
mod istio;
mod keepalive;
mod listener;
mod prefix;
mod proxy;
mod resources;
mod route;
mod routes;
mod source;
mod tls;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::io::Read;
use std::path::PathBuf;

use yaml_serde::Value;

use draft::Draft;
pub use error::ConvertError;
pub use keepalive::{MAX_KEEPALIVE_PROBES, MAX_KEEPALIVE_SECONDS};
pub use prefix::DEFAULT_BACKEND;

/// What to convert, from the command line.
#[derive(Debug, Clone, Default)]
/// Built by the `redcar` binary from its `ConvertEnvoyArgs`; the tests build it directly, with
/// `convert` given the text so no file is needed.
pub struct Options {
    /// The Envoy YAML file; `-` reads stdin.
    pub file: PathBuf,
    /// The listener to convert when several carry a `redis_proxy` filter.
    pub listener: Option<String>,
    /// Converts only this upstream cluster of the prefix routes (one redcar per cluster);
    /// without it every route and cluster is converted.
    pub cluster: Option<String>,
}

/// A finished conversion: the YAML to print, and the notes it carries as comments.
#[derive(Debug)]
pub struct Conversion {
    /// The whole config file: a header comment, then each top-level key with its notes above it.
    pub yaml: String,
    /// Every note's text, in the order recorded; `run` prints each on stderr after `warning: `.
    pub warnings: Vec<String>,
}

/// Exit status when the input cannot be read or converted.
const EXIT_FAILED: u8 = 1;

/// Runs the subcommand: the config on stdout, warnings and errors on stderr.
/// `loads` is the caller's check that the YAML loads as a redcar config (its error, when it does
/// not); the result is printed only after it passed.
/// Exit status 0 when converted (warnings or not), `EXIT_FAILED` when nothing was printed on
/// stdout; `main.rs` passes it to the process exit status, as docs/migrating-from-envoy.md says.
pub fn run(options: &Options, loads: impl Fn(&str) -> Result<(), String>) -> u8 {
    let result = read_input(options)
        .and_then(|(text, source)| convert(&text, &source, options))
        .and_then(|conversion| {
            // Every key written must be one redcar knows: a wrong one here is a converter bug.
            loads(&conversion.yaml).map_err(|e| {
                ConvertError(format!("bug: the converted config does not parse: {e}"))
            })?;
            Ok(conversion)
        });
    match result {
        Ok(conversion) => {
            for warning in &conversion.warnings {
                eprintln!("redcar config convert-envoy: warning: {warning}");
            }
            print!("{}", conversion.yaml);
            0
        }
        Err(error) => {
            eprintln!("redcar config convert-envoy: {error}");
            EXIT_FAILED
        }
    }
}

/// The file's text and the name the output's header gives it (`stdin`, or the file name without its
/// directory, so the output does not depend on where it was run).
fn read_input(options: &Options) -> Result<(String, String), ConvertError> {
    if options.file.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| ConvertError(format!("cannot read stdin: {e}")))?;
        return Ok((text, "stdin".to_owned()));
    }
    let text = std::fs::read_to_string(&options.file)
        .map_err(|e| ConvertError(format!("cannot read {}: {e}", options.file.display())))?;
    let source = options.file.file_name().map_or_else(
        || options.file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok((text, source))
}

/// Converts an Envoy file's text (a bootstrap, EnvoyFilter manifests or a config_dump, told
/// apart by their content); `source` names it in the output's header.
/// Pure apart from reading user-name files or variables a `DataSource` names: the tests call it
/// with inline text. Fails with the first [`ConvertError`] of any step; nothing partial is
/// returned. The result is not yet checked against redcar's config: [`run`] has its caller do
/// that.
pub fn convert(text: &str, source: &str, options: &Options) -> Result<Conversion, ConvertError> {
    let mut draft = Draft::default();
    let resources = input::read(text, source, &mut draft)?;
    let place = resources.form.listeners_place();
    let found = listener::find(&resources.listeners, options.listener.as_deref(), place)?;
    listener::convert_address(&found, &mut draft)?;
    listener::note_unconverted(&found, &mut draft);
    let targets = routes::convert(found.proxy, options.cluster.as_deref(), &mut draft)?;
    cluster::convert(&resources.clusters, &targets.main, &mut draft)?;
    backends::convert(&resources.clusters, &targets, &mut draft)?;
    proxy::convert(found.proxy, &mut draft)?;
    auth::downstream(found.proxy, &mut draft)?;
    faults::convert(found.proxy, &mut draft)?;
    safety_notes(resources.admin, &mut draft);
    let header = match resources.form.label() {
        Some(form) => format!("{source} ({form})"),
        None => source.to_owned(),
    };
    let yaml = draft
        .render(&header)
        .map_err(|e| ConvertError(format!("cannot write the redcar config: {e}")))?;
    let warnings = draft.notes().iter().map(|n| n.text.clone()).collect();
    Ok(Conversion { yaml, warnings })
}

/// Things worth saying about the result as a whole.
/// A listener reachable from other hosts without client auth is pointed out (Envoy's was too, but a
/// new proxy is a good time to notice); Envoy's admin interface becomes a hint to set `admin`.
fn safety_notes(envoy_admin: bool, draft: &mut Draft) {
    let exposed = draft
        .get(&["listen"])
        .and_then(Value::as_str)
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .is_some_and(|a| !a.ip().is_loopback());
    if exposed && draft.get(&["auth"]).is_none() {
        draft.note(
            "listen",
            "listen: reachable from other hosts without client auth (as in the Envoy file); \
             consider auth.requirepass or tls",
        );
    }
    if envoy_admin {
        draft.note(
            "",
            "admin: Envoy's admin interface is not converted; set `admin: 127.0.0.1:PORT` for \
             /readyz and /metrics",
        );
    }
}

#[cfg(test)]
mod tests;
