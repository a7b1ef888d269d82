//! The crate's modules depend on each other one way, checked over the `crate::` paths in
//! `src/` (test code excluded): each module has a layer, and may use only modules of lower
//! layers. So `values` is a leaf, the data plane builds up from `protocol` to `downstream`, and
//! `config` sits at the edge, assembling the modules' own `*Config` types: nothing but `app`
//! (which also checks the Envoy converter's output against it) and `main` imports it
//! (docs/architecture.md, "Layers").
//!
//! The modules that live in a workspace crate of their own (`protocol` and `commands`, in
//! crates/redcar-protocol, re-exported by `src/lib.rs`) have no layer here: Cargo already keeps
//! them below every module of this crate (a crate cannot use the crate that depends on it), so
//! any module may use them, and the order inside that crate is its own. The same holds for the
//! other workspace crates (crates/*: the tools `redcar-doctor`, `redcar-top` and `redcar-envoy`,
//! which the binary runs; `redcar-units` and `redcar-tls`, which the proxy shares with them; the
//! channels of `redcar-sync`): nothing here checks them, since Cargo keeps every one of them from
//! reaching into the proxy, and the picture draws each as one box, with arrows from the modules
//! that name it and to the workspace crates it depends on.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of `src/lib.rs` and its layer: a module may use modules of lower layers only.
const LAYERS: &[(&str, u8)] = &[
    ("values", 0),
    ("workers", 0),
    ("memory", 0),
    ("reactor", 1),
    ("metrics", 1),
    ("auth", 2),
    ("hotkeys", 1),
    ("upstream", 2),
    ("cluster", 3),
    ("router", 4),
    ("near_cache", 4),
    ("sentinel", 4),
    ("backends", 5),
    ("downstream", 5),
    ("admin", 6),
    ("config", 7),
    ("app", 8),
];

/// The modules `src/lib.rs` re-exports from the workspace's crates, with their crate: below every
/// module of [`LAYERS`], which Cargo enforces.
const FROM_CRATES: &[(&str, &str)] = &[
    ("protocol", "redcar-protocol"),
    ("commands", "redcar-protocol"),
];

/// A workspace crate of crates/* not re-exported as modules: its package name and the workspace
/// crates its `[dependencies]` name (read from its Cargo.toml; only the picture uses them).
struct Crate {
    name: String,
    uses: BTreeSet<String>,
}

/// Every crate under crates/ but those of [`FROM_CRATES`], sorted by name.
fn workspace_crates(root: &Path) -> Vec<Crate> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        let manifest = entry.expect("dir entry").path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let mut name = None;
        let mut uses = BTreeSet::new();
        let mut section = "";
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line;
            } else if section == "[package]" && line.starts_with("name = ") {
                name = Some(line["name = ".len()..].trim_matches('"').to_string());
            } else if section == "[dependencies]" && line.starts_with("redcar-") {
                let dep = line.split([' ', '=']).next().unwrap_or_default();
                uses.insert(dep.to_string());
            }
        }
        let name = name.expect("a [package] name in each crates/*/Cargo.toml");
        if !FROM_CRATES.iter().any(|&(_, c)| c == name) {
            out.push(Crate { name, uses });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Whether `code` names the crate `krate` (`redcar_top::run`, `use redcar_units as units`).
fn names_crate(code: &str, krate: &str) -> bool {
    let ident = krate.replace('-', "_");
    code.contains(&format!("{ident}::")) || code.contains(&format!("use {ident}"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a file belongs to (`src/router/stateful/wait.rs` → `router`, `src/app.rs` → `app`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src/");
    let first = rel.components().next().expect("a path");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

/// The non-test part of a file: a test module written inline sits at the end, after its
/// `#[cfg(test)]`; a `#[cfg(test)] mod name;` declaration (a test file of its own) may come
/// anywhere and is only skipped; files that are test modules themselves are skipped by name.
fn code_of(file: &Path) -> Option<String> {
    let name = file.file_name()?.to_string_lossy().to_string();
    if name == "tests.rs" || name.ends_with("_tests.rs") || name == "test_server.rs" {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let mut code = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            match lines.next() {
                Some(next) if next.trim_start().starts_with("mod ") && next.ends_with(';') => {
                    continue;
                }
                _ => break,
            }
        }
        code.push_str(line);
        code.push('\n');
    }
    Some(code)
}

/// The modules `code` names as `crate::<module>`.
fn uses(code: &str) -> Vec<String> {
    code.match_indices("crate::")
        .map(|(at, _)| {
            code[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn modules_use_only_lower_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    for line in lib.lines().filter_map(|l| l.strip_prefix("pub mod ")) {
        let module = line.trim_end_matches(';');
        assert!(
            layers.contains_key(module),
            "module `{module}` of src/lib.rs has no layer in tests/layering.rs: give it one"
        );
        assert!(
            lib.contains(&format!("//! - [`{module}`]")),
            "module `{module}` is not named in src/lib.rs's layout list: say what it does there"
        );
    }
    for (module, krate) in FROM_CRATES {
        assert!(
            lib.contains(&format!("//! - [`{module}`]")) && lib.contains(&krate.replace('-', "_")),
            "module `{module}` of crate {krate} is not re-exported and named in src/lib.rs"
        );
    }
    let from_crates: BTreeSet<&str> = FROM_CRATES.iter().map(|&(m, _)| m).collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in files {
        let module = module_of(&src, &file);
        let Some(&layer) = layers.get(module.as_str()) else {
            continue; // main.rs, lib.rs
        };
        let Some(code) = code_of(&file) else {
            continue;
        };
        for used in uses(&code) {
            if used == module {
                continue;
            }
            checked += 1;
            if from_crates.contains(used.as_str()) {
                continue;
            }
            match layers.get(used.as_str()) {
                Some(&below) if below < layer => {}
                Some(&other) => wrong.push(format!(
                    "{} (`{module}`, layer {layer}) uses `{used}` (layer {other})",
                    file.strip_prefix(root).unwrap_or(&file).display()
                )),
                None => wrong.push(format!(
                    "{} uses `crate::{used}`, which has no layer",
                    file.strip_prefix(root).unwrap_or(&file).display()
                )),
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} crate:: paths found: is the scan broken?"
    );
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn config_is_imported_only_at_the_edge_and_values_by_anyone() {
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let config = layers["config"];
    let above_config: Vec<&str> = LAYERS
        .iter()
        .filter(|(_, layer)| *layer > config)
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(above_config, ["app"], "only app may import config");
    assert_eq!(layers["values"], 0, "values is a leaf");
}

/// The scanner itself: it finds the module names in paths, and skips test code.
#[test]
fn the_scan_reads_crate_paths() {
    assert_eq!(
        uses("use crate::values::units;\nlet x = crate::metrics::Metrics::default();"),
        ["values", "metrics"]
    );
    assert!(uses("use super::x; use std::io;").is_empty());
    assert!(names_crate(
        "pub(crate) use redcar_units as units;",
        "redcar-units"
    ));
    assert!(names_crate("Top(redcar_top::TopArgs),", "redcar-top"));
    assert!(!names_crate("/// the crate `redcar_units`", "redcar-units"));
}

/// The picture of the layers in docs/layers.mmd (docs/architecture.md links to it), as
/// this scan sees the code: one box per layer and per workspace crate, one arrow per module (or
/// crate) that uses another.
fn layer_picture(edges: &BTreeSet<(String, String)>, others: &[Crate]) -> String {
    let mut out = String::from(
        "%% What uses what in src/, made by tests/layering.rs from the code: do not edit by hand\n\
         %% (REDCAR_WRITE_LAYERS=1 cargo test --test layering rewrites it).\n\
         flowchart TD\n",
    );
    let top = LAYERS.iter().map(|&(_, l)| l).max().unwrap_or(0);
    for layer in (0..=top).rev() {
        out.push_str(&format!("  subgraph layer{layer}[\"layer {layer}\"]\n"));
        for &(module, _) in LAYERS.iter().filter(|&&(_, l)| l == layer) {
            out.push_str(&format!("    {module}\n"));
        }
        out.push_str("  end\n");
    }
    let crates: BTreeSet<&str> = FROM_CRATES.iter().map(|&(_, c)| c).collect();
    for krate in crates {
        out.push_str(&format!(
            "  subgraph {}[\"crate {krate}\"]\n",
            krate.replace('-', "_")
        ));
        for &(module, _) in FROM_CRATES.iter().filter(|&&(_, c)| c == krate) {
            out.push_str(&format!("    {module}\n"));
        }
        out.push_str("  end\n");
    }
    for krate in others {
        let name = &krate.name;
        out.push_str(&format!("  {}[\"crate {name}\"]\n", name.replace('-', "_")));
    }
    for (from, to) in edges {
        out.push_str(&format!("  {from} --> {to}\n"));
    }
    out
}

#[test]
fn the_layer_picture_matches_the_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let others = workspace_crates(root);
    let mut edges = BTreeSet::new();
    for krate in &others {
        for used in &krate.uses {
            edges.insert((krate.name.replace('-', "_"), used.replace('-', "_")));
        }
    }
    for file in files {
        let module = module_of(&src, &file);
        if !layers.contains_key(module.as_str()) {
            continue;
        }
        let Some(code) = code_of(&file) else {
            continue;
        };
        for used in uses(&code) {
            let known =
                layers.contains_key(used.as_str()) || FROM_CRATES.iter().any(|&(m, _)| m == used);
            if used != module && known {
                edges.insert((module.clone(), used));
            }
        }
        for krate in others.iter().filter(|k| names_crate(&code, &k.name)) {
            edges.insert((module.clone(), krate.name.replace('-', "_")));
        }
    }
    let picture = layer_picture(&edges, &others);
    let mmd = root.join("docs/layers.mmd");
    if std::env::var_os("REDCAR_WRITE_LAYERS").is_some() {
        std::fs::write(&mmd, &picture).expect("write docs/layers.mmd");
        return;
    }
    let hint =
        "the picture of the layers is stale: REDCAR_WRITE_LAYERS=1 cargo test --test layering";
    let on_disk = std::fs::read_to_string(&mmd).unwrap_or_default();
    assert_eq!(on_disk, picture, "docs/layers.mmd: {hint}");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("architecture.md");
    assert!(
        doc.contains("(layers.mmd)"),
        "docs/architecture.md links to the picture of the layers"
    );
}
