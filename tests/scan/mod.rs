//! The source files the rule tests read (tests/house.rs, tests/names.rs), and the non-test part
//! of each: what a test module or a test file holds is left out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Files that are test modules by name (`tests.rs`, `*_tests.rs`, `test_server.rs`, anything
/// under a `tests/` folder) or that a `#[cfg(test)] mod name;` declares next to their parent.
pub fn test_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let name = file.file_name().map(|n| n.to_string_lossy().to_string());
        let name = name.unwrap_or_default();
        let under_tests = file.components().any(|c| c.as_os_str() == "tests");
        if name == "tests.rs"
            || name.ends_with("_tests.rs")
            || name == "test_server.rs"
            || under_tests
        {
            out.insert(file.clone());
        }
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            let declared = pair[1]
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'));
            if let (true, Some(module)) = (pair[0] == "#[cfg(test)]", declared) {
                let dir = file.parent().expect("a folder");
                let stem = file.file_stem().expect("a name").to_string_lossy();
                let base = match stem.as_ref() {
                    "mod" | "lib" | "main" => dir.to_path_buf(),
                    _ => dir.join(stem.as_ref()),
                };
                out.insert(base.join(format!("{module}.rs")));
                out.insert(base.join(module).join("mod.rs"));
                out.insert(dir.join(format!("{module}.rs")));
            }
        }
    }
    out
}

/// The non-test part of a file: up to its first `#[cfg(test)]` whose next line opens an inline
/// module (`mod tests {`), without the `#[cfg(test)]` declarations of out-of-line test modules
/// (`#[cfg(test)] #[path = ...] mod tests;`); other test items count as code.
pub fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() == "#[cfg(test)]" {
            let mut j = i + 1;
            while j < lines.len() && lines[j].trim().starts_with("#[") {
                j += 1;
            }
            let next = lines.get(j).map_or("", |l| l.trim());
            if next.starts_with("mod ") && next.ends_with('{') {
                return out;
            }
            if next.starts_with("mod ") && next.ends_with(';') {
                i = j + 1;
                continue;
            }
        }
        out.push_str(lines[i]);
        i += 1;
    }
    out
}

/// The non-test source files under `src/` and `crates/*/src` with their relative paths and code.
pub fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        rust_files(&krate.expect("dir entry").path().join("src"), &mut files);
    }
    let tests = test_files(&files);
    let mut out = Vec::new();
    for file in files.iter().filter(|f| !tests.contains(*f)) {
        let text = std::fs::read_to_string(file).expect("read a source file");
        let rel = file.strip_prefix(root).unwrap_or(file);
        let rel = rel.to_string_lossy().replace('\\', "/");
        out.push((rel, code_of(&text)));
    }
    out.sort();
    out
}
