//! Names a newcomer can guess (docs/architecture.md, "Conventions"; the glossary is the crate
//! root's doc, `src/lib.rs`):
//!
//! - no `#[path]` attribute in the non-test code of `src/` and `crates/*/src` (a module is in
//!   the file its name says; a test module next to its parent may still point at its file);
//! - no comment in `src/`, `crates/*/src` or `tests/` names a work item (`issue` and a number)
//!   or carries an ISO date: a comment says why, and the history is in docs/decisions/ and
//!   bench/;
//! - no two `struct`/`enum` definitions in the root crate's non-test code share a name, but for
//!   [`SHARED_NAMES`], each with why the two are never met together.

mod scan;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use scan::{rust_files, sources};

/// Type names defined more than once in the root crate today, each with its reason: every one is
/// private (or nearly) to a module far from the others, so a reader never has two in view. A
/// new duplicate fails; so does an entry no longer needed.
const SHARED_NAMES: &[(&str, &str)] = &[
    (
        "BackendLabel: src/admin/readiness.rs, src/router/routes/mirror_metrics.rs",
        LABEL,
    ),
    (
        "CauseLabel: src/downstream/tracking/metrics.rs, src/near_cache/metrics.rs",
        LABEL,
    ),
    (
        "KindLabel: src/downstream/pubsub/metrics.rs, src/downstream/tracking/metrics.rs, \
         src/router/metrics.rs",
        LABEL,
    ),
    (
        "ResultLabel: src/app/metrics.rs, src/cluster/metrics.rs",
        LABEL,
    ),
];

/// Why a metrics file's label set may share its name: each is private to the one file that
/// registers its group's series, and is named after the Prometheus label it carries (`kind`,
/// `cause`, `backend`, `result`), which users see; no code outside the file names it.
const LABEL: &str = "a metrics file's private label set, named after its label";

/// The name a line defines, when it opens a `struct` or an `enum` (after any visibility).
fn defined_type(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    if let Some(after) = rest.strip_prefix("pub") {
        rest = after.trim_start();
        if rest.starts_with('(') {
            rest = rest[rest.find(')')? + 1..].trim_start();
        }
    }
    let rest = rest
        .strip_prefix("struct ")
        .or_else(|| rest.strip_prefix("enum "))?;
    let end = rest
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Whether the attribute at `lines[at]` is one of a test module's (`#[cfg(test)]`, or a `cfg`
/// with `test` in it such as `all(test, not(loom))`, among the attributes around it).
fn declares_test_module(lines: &[&str], at: usize) -> bool {
    let first = lines[..at]
        .iter()
        .rposition(|l| !l.starts_with("#["))
        .map_or(0, |i| i + 1);
    let last = lines[at..]
        .iter()
        .position(|l| !l.starts_with("#["))
        .map_or(lines.len(), |i| at + i);
    let declares_mod = lines.get(last).is_some_and(|l| l.starts_with("mod "));
    declares_mod
        && lines[first..last]
            .iter()
            .any(|l| l.starts_with("#[cfg(") && l.contains("test"))
}

/// The comment a line carries (`//`, `///` and `//!` to the end of the line), if any. A `//`
/// inside a string is not one, as long as the string does not also hold a `"` before it.
fn comment_of(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return Some(trimmed);
    }
    let at = line.find(" //")?;
    let before = &line[..at];
    before
        .matches('"')
        .count()
        .is_multiple_of(2)
        .then(|| &line[at + 1..])
}

/// Whether `text` names a work item: `issue` (any case) followed by a number, with or without a
/// `#` or a space between.
fn names_work_item(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.match_indices("issue").any(|(at, word)| {
        let before = lower[..at].chars().next_back();
        let rest = lower[at + word.len()..].trim_start_matches([' ', '#']);
        !before.is_some_and(|c| c.is_alphanumeric())
            && rest.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Whether `text` holds an ISO date (`YYYY-MM-DD`): four digits, a dash, two, a dash, two.
fn has_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.windows(10).any(|w| {
        let digit = |i: usize| w[i].is_ascii_digit();
        (0..4).all(digit)
            && w[4] == b'-'
            && digit(5)
            && digit(6)
            && w[7] == b'-'
            && digit(8)
            && digit(9)
    })
}

/// `found` must equal `allowed`: names what is new and what is stale.
fn check(rule: &str, found: BTreeSet<String>, allowed: BTreeSet<String>) {
    let new: Vec<&String> = found.difference(&allowed).collect();
    let stale: Vec<&String> = allowed.difference(&found).collect();
    assert!(
        new.is_empty() && stale.is_empty(),
        "{rule}\nnot allowed (fix it, don't list it): {new:#?}\nlisted but no longer so (remove \
         from the list in tests/names.rs): {stale:#?}"
    );
}

#[test]
fn modules_live_in_the_files_their_names_say() {
    let mut found = BTreeSet::new();
    for (file, code) in sources() {
        let lines: Vec<&str> = code.lines().map(str::trim).collect();
        for (n, line) in lines.iter().enumerate() {
            if line.starts_with("#[path") && !declares_test_module(&lines, n) {
                found.insert(format!("{file}:{}", n + 1));
            }
        }
    }
    check(
        "a `#[path]` attribute outside a test module's declaration",
        found,
        BTreeSet::new(),
    );
}

#[test]
fn comments_carry_no_work_item_numbers_or_dates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("tests"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        rust_files(&krate.expect("dir entry").path().join("src"), &mut files);
    }
    let mut found = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read a source file");
        let rel = file.strip_prefix(root).unwrap_or(file).to_string_lossy();
        for (n, line) in text.lines().enumerate() {
            let Some(comment) = comment_of(line) else {
                continue;
            };
            if names_work_item(comment) || has_date(comment) {
                found.insert(format!("{rel}:{}: {}", n + 1, comment.trim()));
            }
        }
    }
    check(
        "a comment naming a work item or carrying a date (say the reason instead)",
        found,
        BTreeSet::new(),
    );
}

#[test]
fn the_root_crates_types_have_names_of_their_own() {
    let mut defined: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (file, code) in sources().into_iter().filter(|(f, _)| f.starts_with("src/")) {
        for line in code.lines() {
            if let Some(name) = defined_type(line) {
                defined
                    .entry(name.to_string())
                    .or_default()
                    .push(file.clone());
            }
        }
    }
    let found = defined
        .into_iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("{name}: {}", files.join(", ")))
        .collect();
    let allowed = SHARED_NAMES
        .iter()
        .map(|(entry, _)| entry.to_string())
        .collect();
    check("two types of the root crate with one name", found, allowed);
}

#[test]
fn the_scans_recognize_what_they_look_for() {
    assert_eq!(
        defined_type("pub(in crate::x) struct Owed<'d> {"),
        Some("Owed")
    );
    assert_eq!(defined_type("enum Step {"), Some("Step"));
    assert_eq!(defined_type("pub struct Unit;"), Some("Unit"));
    assert_eq!(defined_type("let structure = 1;"), None);
    let test_mod = [
        "#[cfg(all(test, not(loom)))]",
        "#[path = \"x_tests.rs\"]",
        "mod tests;",
    ];
    assert!(declares_test_module(&test_mod, 1));
    let plain_mod = ["#[path = \"elsewhere.rs\"]", "mod x;"];
    assert!(!declares_test_module(&plain_mod, 0));
    assert_eq!(comment_of("    /// doc"), Some("/// doc"));
    assert_eq!(comment_of("let a = 1; // why"), Some("// why"));
    assert_eq!(comment_of("let url = \"http://x\";"), None);
    let item = format!("{} {}", "Issue", 49);
    assert!(names_work_item(&format!("see ({item})")));
    assert!(names_work_item(&format!("{}#{}", "issue", 7)));
    assert!(!names_work_item("the issue's bound"));
    assert!(!names_work_item("reissue7"));
    let date = format!("{}-{}-{}", 2026, 11, 27);
    assert!(has_date(&format!("callgrind, {date})")));
    assert!(!has_date("1,000-node map"));
}
