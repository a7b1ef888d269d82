//! What users and their tooling depend on stays the same unless someone means to change it: the
//! command line's help (every subcommand's too), the config keys with their defaults (as
//! `--check-config` prints them), the metric families a fresh redcar exposes, and the fields its
//! log lines carry. Each is compared with a copy committed in `tests/surface/`, made from the
//! commit before: a refactor that renames a flag, a key, a series or a log field fails here.
//! A change meant to be visible rewrites the copies (`REDCAR_WRITE_SURFACE=1 cargo test --test it
//! surface`), and the diff of `tests/surface/` shows the reviewer what users will see.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::redcar::redcar_bin;
use crate::support::{Redcar, RedisCluster};

fn surface_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/surface")
}

/// Compares `now` with the committed copy `name`, or rewrites it when asked to.
fn same_as_committed(name: &str, now: &str) {
    let path = surface_dir().join(name);
    if std::env::var_os("REDCAR_WRITE_SURFACE").is_some() {
        std::fs::create_dir_all(surface_dir()).expect("create tests/surface");
        std::fs::write(&path, now).expect("write the surface copy");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed == now {
        return;
    }
    let old: BTreeSet<&str> = committed.lines().collect();
    let new: BTreeSet<&str> = now.lines().collect();
    let gone: Vec<&&str> = old.difference(&new).take(20).collect();
    let added: Vec<&&str> = new.difference(&old).take(20).collect();
    panic!(
        "tests/surface/{name} no longer matches what redcar shows users.\n\
         lines gone: {gone:#?}\nlines new: {added:#?}\n\
         If the change is meant, rewrite the copies with \
         `REDCAR_WRITE_SURFACE=1 cargo test --test it surface` and say so in the docs."
    );
}

fn output_of(args: &[&str]) -> String {
    let out = Command::new(redcar_bin())
        .args(args)
        .output()
        .expect("run redcar");
    assert!(out.status.success(), "redcar {args:?} failed: {out:?}");
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

#[test]
fn the_help_of_every_command_is_unchanged() {
    let mut all = String::new();
    let commands: &[&[&str]] = &[
        &[],
        &["doctor"],
        &["top"],
        &["config"],
        &["config", "convert-envoy"],
        &["upgrade"],
    ];
    for command in commands {
        let mut args = command.to_vec();
        args.push("--help");
        all.push_str(&format!("=== redcar {}\n", args.join(" ")));
        all.push_str(&output_of(&args));
    }
    assert!(all.contains("--cluster"), "the help lists --cluster");
    same_as_committed("help.txt", &all);
}

#[test]
fn the_config_keys_and_their_defaults_are_unchanged() {
    let printed = output_of(&[
        "--listen",
        "127.0.0.1:6380",
        "--cluster",
        "127.0.0.1:7000",
        "--check-config",
    ]);
    assert!(printed.contains("refresh_interval:"), "{printed}");
    same_as_committed("config.yaml", &printed);
}

#[test]
fn the_metric_families_of_a_fresh_redcar_are_unchanged() {
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    let (status, body) = redcar.http_get("/metrics").expect("scrape /metrics");
    assert_eq!(status, 200);
    let families: BTreeSet<String> = body
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .map(str::to_string)
        .collect();
    assert!(families.len() > 50, "{} families", families.len());
    let list: String = families.iter().map(|f| format!("{f}\n")).collect();
    same_as_committed("metrics.txt", &list);
}

#[test]
fn the_log_fields_are_unchanged() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut fields = BTreeSet::new();
    for dir in source_dirs(root) {
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read a source file");
            log_fields(&text, &mut fields);
        }
    }
    assert!(fields.contains("elapsed_ms"), "{fields:?}");
    let list: String = fields.iter().map(|f| format!("{f}\n")).collect();
    same_as_committed("log_fields.txt", &list);
}

/// `src/` and every workspace crate's `src/`.
fn source_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![root.join("src")];
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        let mut more: Vec<PathBuf> = crates
            .filter_map(Result::ok)
            .map(|e| e.path().join("src"))
            .filter(|p| p.is_dir())
            .collect();
        more.sort();
        dirs.extend(more);
    }
    dirs
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source folder") {
        let path = entry.expect("folder entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The field names of every `tracing` event in `text`: `name = value`, `%name` and `?name` in
/// the arguments of `trace!` … `error!` (and `event!`), outside string literals.
fn log_fields(text: &str, fields: &mut BTreeSet<String>) {
    for mac in [
        "trace!(", "debug!(", "info!(", "warn!(", "error!(", "event!(",
    ] {
        let mut from = 0;
        while let Some(at) = text[from..].find(mac) {
            let start = from + at + mac.len();
            let before = text[..from + at].chars().next_back();
            from = start;
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue; // e.g. `eprintln!(`: not a tracing macro
            }
            let args = macro_args(&text[start..]);
            fields_in(&args, fields);
        }
    }
}

/// The text of a macro's arguments up to its closing parenthesis, string literals blanked.
fn macro_args(text: &str) -> String {
    let mut depth = 1;
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push('"');
                let mut escaped = false;
                for s in chars.by_ref() {
                    if s == '"' && !escaped {
                        break;
                    }
                    escaped = s == '\\' && !escaped;
                }
                out.push('"');
            }
            '(' | '[' | '{' => {
                depth += 1;
                out.push(c);
            }
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Field names among a tracing macro's top-level arguments: those before its message (the first
/// string literal), as `name = value`, `%name`, `?name` or a bare `name`; `target:` and
/// `parent:` are not fields, and what follows the message are its format arguments.
fn fields_in(args: &str, fields: &mut BTreeSet<String>) {
    let mut depth = 0;
    let mut part = String::new();
    for c in args.chars().chain(std::iter::once(',')) {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            let arg = part.trim();
            if arg.starts_with('"') {
                return;
            }
            if let Some(name) = field_name(arg) {
                fields.insert(name);
            }
            part.clear();
        } else {
            part.push(c);
        }
    }
}

fn field_name(arg: &str) -> Option<String> {
    let is_name = |s: &str| {
        s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            && s.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    };
    if arg.contains(':') && !arg.contains("::") {
        return None; // `target: "…"`, `parent: …`
    }
    let name = match arg.split_once('=') {
        Some((name, _)) => name.trim(),
        None => arg.trim_start_matches(['%', '?']).trim(),
    };
    is_name(name).then(|| name.to_string())
}

#[test]
fn log_fields_are_read_from_tracing_calls() {
    let mut fields = BTreeSet::new();
    log_fields(
        "tracing::info!(node = %addr, elapsed_ms, ?why, \"x = {y}\", n = f(a, b));\n\
         eprintln!(\"nope = 1\"); warn!(target: \"t\", %self.peer, \"m\");",
        &mut fields,
    );
    let got: Vec<&str> = fields.iter().map(String::as_str).collect();
    assert_eq!(got, ["elapsed_ms", "node", "self.peer", "why"]);
}
