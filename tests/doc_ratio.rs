//! The share of doc-comment lines (`///`, `//!`) in the non-test code of `src/` and
//! `crates/*/src` stays at or above [`FLOOR_PERCENT`]: a module a newcomer opens should say what
//! it is for, what holds and why, and a falling share is the first sign that new code stopped
//! saying so (docs/architecture.md, "Conventions").
//!
//! The count is the one `scripts/doc_ratio.py` prints, kept line for line the same so the two
//! never disagree: test files (`tests.rs`, `*_tests.rs`, `loom_*`, anything under a `tests`
//! folder) and a file's tail from `#[cfg(test)]` / `mod tests {` on are left out; every other
//! non-blank line is code, and the lines starting with `///` or `//!` are doc lines. The floor
//! is a nudge to write docs that carry invariants, units, callers and failure, not a count to
//! pad: a line that restates a signature helps nobody.

use std::path::{Component, Path, PathBuf};

/// Below this share of doc lines (in percent) the test fails. Keep in step with
/// `FLOOR_PERCENT` in scripts/doc_ratio.py.
const FLOOR_PERCENT: f64 = 18.0;

/// Where a file's inline test module starts: the rest of the file is test code.
const TEST_TAIL: &str = "\n#[cfg(test)]\nmod tests {";

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a source folder") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a file (relative to the repository) is test code by its name or folder.
fn is_test_file(rel: &Path) -> bool {
    let name = rel.file_name().map(|n| n.to_string_lossy().to_string());
    let name = name.unwrap_or_default();
    let in_tests = rel
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .any(|c| c == Component::Normal("tests".as_ref()));
    in_tests || name == "tests.rs" || name.ends_with("_tests.rs") || name.starts_with("loom_")
}

/// (lines of code, doc lines) of one file's text, its test tail left out.
fn count(text: &str) -> (usize, usize) {
    let text = text.find(TEST_TAIL).map_or(text, |cut| &text[..cut]);
    let lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let (mut code, mut doc) = (0, 0);
    for line in lines {
        code += 1;
        if line.starts_with("///") || line.starts_with("//!") {
            doc += 1;
        }
    }
    (code, doc)
}

#[test]
fn doc_comments_keep_their_share() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        let src = krate.expect("dir entry").path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    let (mut code, mut doc) = (0, 0);
    for file in &files {
        if is_test_file(file.strip_prefix(root).unwrap_or(file)) {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read a source file");
        let (c, d) = count(&text);
        code += c;
        doc += d;
    }
    assert!(
        code > 10_000,
        "only {code} lines of code found: is the scan broken?"
    );
    let share = 100.0 * doc as f64 / code as f64;
    assert!(
        share >= FLOOR_PERCENT,
        "doc comments are {share:.1}% of the non-test code ({doc} of {code} lines), below the \
         floor of {FLOOR_PERCENT}%: document what holds and why in the files with the lowest \
         share (`python3 scripts/doc_ratio.py --files` lists them, lowest first)"
    );
}

#[test]
fn the_count_leaves_out_tests_and_blank_lines() {
    let text =
        "//! Head.\n\n/// Doc.\nfn a() {}\n// plain\n\n#[cfg(test)]\nmod tests {\n/// x\n}\n";
    assert_eq!(count(text), (4, 2));
    assert!(is_test_file(Path::new("src/a/tests.rs")));
    assert!(is_test_file(Path::new("src/a/b_tests.rs")));
    assert!(is_test_file(Path::new("crates/x/src/tests/parse.rs")));
    assert!(!is_test_file(Path::new("src/a/testsuite.rs")));
}
