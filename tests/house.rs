//! House rules for `src/` and the workspace crates' `crates/*/src`, checked over the non-test
//! code (test files and `#[cfg(test)]` test modules left out): no function over
//! [`MAX_FN_LINES`] lines, no file over [`MAX_FILE_LINES`], and in the modules of `src/` already
//! tidied, `pub` only on what tests/, examples/, fuzz/ and `src/main.rs` use (everything else is
//! `pub(crate)` or narrower; a workspace crate's `pub` items are its API to the proxy). Each
//! rule has an explicit allow-list of today's exceptions: a new exception fails, and so does an
//! entry that is no longer needed, so the lists only shrink and always show what is left to do
//! (docs/architecture.md, "Conventions").
//!
//! The scan is textual (braces outside strings, chars and comments), not a parser: simple
//! enough to trust, and good enough for code that rustfmt has formatted.

mod scan;

use std::collections::BTreeSet;

use scan::{code_of, sources};

/// A function longer than this (its first line to its closing brace) should be split.
const MAX_FN_LINES: usize = 80;
/// A file whose non-test code is longer than this should be split.
const MAX_FILE_LINES: usize = 450;

/// Functions over [`MAX_FN_LINES`] today, as `file: name`: to be split, then removed from here.
const LONG_FUNCTIONS: &[&str] = &[];

/// Files over [`MAX_FILE_LINES`] today (generated files, marked "do not edit" on their first
/// line, are exempt).
const LONG_FILES: &[&str] = &[];

/// The modules whose `pub` items have been narrowed: in them, plain `pub` is kept for the items
/// below only. Every module of `src/lib.rs` is here now; a new module joins once it is narrowed.
const TIDIED: &[&str] = &[
    "admin",
    "app",
    "auth",
    "backends",
    "cluster",
    "config",
    "downstream",
    "hotkeys",
    "metrics",
    "memory",
    "near_cache",
    "router",
    "sentinel",
    "upstream",
    "values",
    "workers",
];

/// Every plain `pub` item, field and re-export in [`TIDIED`] modules, as `file: name`: each is
/// used by `src/main.rs`, tests/, examples/ or a fuzz/ target, or is the type of one of
/// `Config`'s fields (public because tests/alloc builds a `Config`).
const PUBLIC: &[&str] = &[
    "src/admin/config.rs: AdminConfig",
    "src/app.rs: reload::ConfigSource",
    "src/app.rs: Listeners",
    "src/app.rs: tcp",
    "src/app.rs: bind",
    "src/app.rs: run",
    "src/app.rs: upgrade::upgrade_command",
    "src/app.rs: convert_envoy::run as convert_envoy",
    "src/app/convert_envoy.rs: run",
    "src/app/inherit.rs: inherit_or_bind",
    "src/app/upgrade/command.rs: run",
    "src/app/upgrade/mod.rs: command::run as upgrade_command",
    "src/app/reload.rs: ConfigSource",
    "src/auth/config.rs: AuthConfig",
    "src/auth/mod.rs: config::AuthConfig",
    "src/backends/config.rs: BackendConfig",
    "src/backends/config.rs: ClusterBackend",
    "src/backends/config.rs: StandaloneBackend",
    "src/backends/config.rs: RouteConfig",
    "src/cluster/config.rs: ClusterConfig",
    "src/cluster/config.rs: seeds",
    "src/cluster/config.rs: refresh_interval",
    "src/cluster/mod.rs: slot::key_slot",
    "src/cluster/slot.rs: key_slot",
    "src/config/cli.rs: Cli",
    "src/config/cli.rs: UpgradeArgs",
    "src/config/cli.rs: pid_file",
    "src/config/cli.rs: timeout",
    "src/config/cli.rs: check_config",
    "src/config/cli.rs: command",
    "src/config/cli.rs: Command",
    "src/config/cli.rs: ConfigCommand",
    "src/config/cli.rs: ConvertEnvoyArgs",
    "src/config/cli.rs: file",
    "src/config/cli.rs: listener",
    "src/config/cli.rs: cluster",
    "src/config/cli.rs: DoctorArgs",
    "src/config/cli.rs: doctor_options",
    "src/config/mod.rs: cli::{Cli, Command, ConfigCommand, ConvertEnvoyArgs, UpgradeArgs}",
    "src/config/mod.rs: Config",
    // Every field of `Config`: tests/alloc builds one with `..Config::default()`.
    "src/config/mod.rs: listen",
    "src/config/mod.rs: cluster_facade",
    "src/config/mod.rs: unix",
    "src/config/mod.rs: unix_permissions",
    "src/config/mod.rs: admin",
    "src/config/mod.rs: workers",
    "src/config/mod.rs: threading",
    "src/config/mod.rs: placement",
    "src/config/mod.rs: event_loop",
    "src/config/mod.rs: log_level",
    "src/config/mod.rs: log_format",
    "src/config/mod.rs: drain_timeout",
    "src/config/mod.rs: upgrade_timeout",
    "src/config/mod.rs: pid_file",
    "src/config/mod.rs: cluster",
    "src/config/mod.rs: sentinel",
    "src/config/mod.rs: upstream",
    "src/config/mod.rs: router",
    "src/config/mod.rs: client",
    "src/config/mod.rs: metrics",
    "src/config/mod.rs: hotkeys",
    "src/config/mod.rs: near_cache",
    "src/config/mod.rs: auth",
    "src/config/mod.rs: tls",
    "src/config/mod.rs: custom_commands",
    "src/config/mod.rs: backends",
    "src/config/mod.rs: routes",
    "src/config/mod.rs: catch_all",
    "src/config/mod.rs: routes_ignore_case",
    "src/config/mod.rs: ConfigError",
    "src/config/mod.rs: load",
    "src/config/mod.rs: worker_threads",
    "src/config/mod.rs: threading_model",
    "src/downstream/config.rs: ClientConfig",
    "src/downstream/facade.rs: FacadeConfig",
    "src/downstream/tls.rs: TlsConfig",
    "src/hotkeys/config.rs: HotKeysConfig",
    "src/memory.rs: set_collector",
    "src/metrics/mod.rs: tally::CommandTally",
    "src/metrics/mod.rs: MetricsConfig",
    "src/metrics/mod.rs: Metrics",
    "src/metrics/mod.rs: record_command",
    "src/metrics/tally.rs: CommandTally",
    "src/metrics/tally.rs: new",
    "src/metrics/tally.rs: record",
    "src/metrics/tally.rs: flush",
    "src/near_cache/config.rs: NearCacheConfig",
    "src/router/config.rs: RouterConfig",
    "src/router/fuzz.rs: fuzz_plan",
    "src/router/mod.rs: fuzz::fuzz_plan",
    "src/sentinel/mod.rs: SentinelConfig",
    "src/upstream/config.rs: UpstreamConfig",
    "src/workers.rs: Threading",
    "src/workers.rs: Placement",
    "src/workers.rs: Model",
];

/// `{`, `}`, `;`, `(`, `)`, `[` and `]` outside strings, chars and comments, with their
/// 1-based line numbers.
fn punctuation(code: &str) -> Vec<(usize, char)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let skip_to = |i: &mut usize, line: &mut usize, end: &dyn Fn(usize) -> Option<usize>| {
        while *i < chars.len() {
            if let Some(len) = end(*i) {
                *i += len;
                return;
            }
            if chars[*i] == '\n' {
                *line += 1;
            }
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if next == Some('/') => {
                skip_to(&mut i, &mut line, &|j| (chars[j] == '\n').then_some(0))
            }
            '/' if next == Some('*') => {
                i += 2;
                skip_to(&mut i, &mut line, &|j| {
                    (chars[j] == '*' && chars.get(j + 1) == Some(&'/')).then_some(2)
                });
            }
            'r' if !ident_before && matches!(next, Some('#') | Some('"')) => {
                let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
                if chars.get(i + 1 + hashes) != Some(&'"') {
                    i += 1;
                    continue;
                }
                i += 2 + hashes;
                skip_to(&mut i, &mut line, &|j| {
                    let closes =
                        chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#'));
                    closes.then_some(1 + hashes)
                });
            }
            '"' => {
                i += 1;
                skip_to(&mut i, &mut line, &|j| {
                    // A quote closes unless an odd number of backslashes escapes it.
                    let backslashes = chars[..j].iter().rev().take_while(|&&b| b == '\\').count();
                    (chars[j] == '"' && backslashes % 2 == 0).then_some(1)
                });
            }
            '\'' => {
                // A char literal ('x', '\n', '\u{..}', '{'), else a lifetime.
                if next == Some('\\') {
                    i += 2;
                    skip_to(&mut i, &mut line, &|j| (chars[j] == '\'').then_some(1));
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            '{' | '}' | ';' | '(' | ')' | '[' | ']' => {
                out.push((line, c));
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The name of the function a line declares (`pub(crate) async fn name(`), if it does.
fn declared_fn(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = match after.strip_prefix('(') {
            Some(scope) => scope.split_once(')')?.1,
            None => after,
        }
        .trim_start();
    }
    for qualifier in ["const ", "async ", "unsafe ", "extern \"C\" "] {
        rest = rest.strip_prefix(qualifier).unwrap_or(rest).trim_start();
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&rest[..end])
}

/// Every function with a body in `code`: its name, first line and length in lines.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let marks = punctuation(code);
    let mut out = Vec::new();
    for (index, text) in code.lines().enumerate() {
        let first = index + 1;
        let Some(name) = declared_fn(text) else {
            continue;
        };
        let mut nesting = 0i32; // (), [] in the signature
        let mut depth = 0i32;
        for &(line, c) in marks.iter().skip_while(|(line, _)| *line < first) {
            match c {
                '(' | '[' => nesting += 1,
                ')' | ']' => nesting -= 1,
                ';' if depth == 0 && nesting == 0 => break, // no body
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((name.to_string(), first, line - first + 1));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// What a plain `pub` line makes public: an item's name, a field's name or a `use` path.
fn public_name(line: &str) -> Option<String> {
    let mut rest = line.trim_start().strip_prefix("pub ")?.trim_start();
    for qualifier in ["const ", "async ", "unsafe "] {
        if let Some(after) = rest.strip_prefix(qualifier) {
            if !after.starts_with(|c: char| c.is_ascii_uppercase()) {
                rest = after.trim_start();
            }
        }
    }
    if let Some(path) = rest.strip_prefix("use ") {
        return Some(path.trim_end_matches(';').trim().to_string());
    }
    let keywords = [
        "fn ", "struct ", "enum ", "trait ", "type ", "const ", "static ", "mod ",
    ];
    let name_after = keywords.iter().find_map(|k| rest.strip_prefix(k));
    let name = match name_after {
        Some(after) => after,
        None => rest.split_once(':')?.0,
    };
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    Some(name[..end].to_string())
}

/// `found` must equal `allowed`: names what is new and what is stale.
fn check(rule: &str, found: BTreeSet<String>, allowed: &[&str]) {
    let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = found.difference(&allowed).collect();
    let stale: Vec<&String> = allowed.difference(&found).collect();
    assert!(
        new.is_empty() && stale.is_empty(),
        "{rule}\nnot allowed (fix it, don't list it): {new:#?}\nlisted but no longer so (remove \
         from the list in tests/house.rs): {stale:#?}"
    );
}

#[test]
fn functions_stay_short() {
    let mut long = BTreeSet::new();
    let mut seen = 0;
    for (file, code) in sources() {
        for (name, _, lines) in functions(&code) {
            seen += 1;
            if lines > MAX_FN_LINES {
                long.insert(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        seen > 1000,
        "only {seen} functions found: is the scan broken?"
    );
    check(
        &format!("functions over {MAX_FN_LINES} lines (split them into named pieces)"),
        long,
        LONG_FUNCTIONS,
    );
}

#[test]
fn files_stay_short() {
    let mut long = BTreeSet::new();
    for (file, code) in sources() {
        let generated = code
            .lines()
            .next()
            .is_some_and(|l| l.contains("generated") && l.contains("do not edit"));
        if !generated && code.lines().count() > MAX_FILE_LINES {
            long.insert(file);
        }
    }
    check(
        &format!("files over {MAX_FILE_LINES} lines of non-test code (split them)"),
        long,
        LONG_FILES,
    );
}

#[test]
fn tidied_modules_are_public_only_where_used_outside() {
    let mut public = BTreeSet::new();
    for (file, code) in sources() {
        let module = file
            .trim_start_matches("src/")
            .split(['/', '.'])
            .next()
            .unwrap_or_default()
            .to_string();
        let generated = code
            .lines()
            .next()
            .is_some_and(|l| l.contains("generated") && l.contains("do not edit"));
        if generated || !TIDIED.contains(&module.as_str()) {
            continue;
        }
        for line in code.lines() {
            if let Some(name) = public_name(line) {
                public.insert(format!("{file}: {name}"));
            }
        }
    }
    check(
        "plain `pub` in tidied modules (make it `pub(crate)` or narrower unless src/main.rs, \
         tests/, examples/ or fuzz/ need it, or a `pub` item elsewhere names it)",
        public,
        PUBLIC,
    );
}

/// The scanner itself: strings, chars, comments and bodiless declarations.
#[test]
fn the_scan_measures_functions() {
    let code = "fn a() {\n    let s = \"}\";\n    let c = '{';\n    // }\n}\n\
                trait T {\n    fn b(&self);\n    fn c(&self) -> [u8; 2] {\n        [0; 2]\n    }\n}\n\
                pub(crate) async fn d<'a>(x: &'a str) -> &'a str {\n    r#\"}\"#;\n    x\n}\n";
    let found: Vec<(String, usize, usize)> = functions(code);
    assert_eq!(
        found,
        [
            ("a".to_string(), 1, 5),
            ("c".to_string(), 8, 3),
            ("d".to_string(), 12, 4)
        ]
    );
    assert_eq!(code_of("a\n#[cfg(test)]\nmod tests {\n}\n"), "a\n");
    assert_eq!(
        code_of("a\n#[cfg(test)]\n#[path = \"x.rs\"]\nmod docs;\nb\n"),
        "a\nb\n"
    );
    assert_eq!(
        public_name("    pub cluster: Vec<String>,").as_deref(),
        Some("cluster")
    );
    assert_eq!(public_name("pub async fn run(").as_deref(), Some("run"));
    assert_eq!(public_name("pub(crate) fn run(").as_deref(), None);
    assert_eq!(
        public_name("pub const EXIT_USAGE: u8 = 64;").as_deref(),
        Some("EXIT_USAGE")
    );
}
