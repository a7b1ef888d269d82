//! Files import each other one way, like the modules do (tests/layering.rs): no file of `src/`,
//! nor of a workspace crate's `crates/*/src/` (each crate scanned on its own), reaches itself
//! through the paths it names (a file's imports can then be read top to bottom;
//! docs/architecture.md, under the module table). Test code is left out (`#[cfg(test)]` modules and the files they declare).
//!
//! The rule, as this scan applies it:
//!
//! - Files are found the way rustc finds them: from `src/lib.rs` along `mod name;` (and
//!   `#[path = ".."]`), so each file is one module path (`src/a/b.rs` and `src/a/b/mod.rs` are
//!   both `a::b`). `src/main.rs` is another crate and is not scanned.
//! - An import is a path in a `use` (its `{..}` groups spread out) or a path written inline in
//!   the code, starting with `crate::`, `super::`, `self::`, `$crate::` or a child module the
//!   file declares. It goes to the file of the longest module path that prefixes it: `use
//!   super::x::Y` from `src/a/b/c.rs` goes to `src/a/b/x.rs` (or `x/mod.rs`) if `x` is a module,
//!   else to `src/a/b/mod.rs` (or `src/a/b.rs`) where the item `x` lives.
//! - A name the target file only imports (a re-export, `pub use child::X;`, or a plain `use`
//!   that its child modules see) is followed to the file that defines it: `use
//!   super::Downstream` goes where `Downstream` is written. The files it is followed through
//!   are imports too (`use super::forward::Faults` from `router/core.rs` imports
//!   `router/forward/mod.rs`, which re-exports it, and `router/forward/fault.rs`), except an
//!   ancestor of the importing file: a folder's `mod.rs` showing its surface to its own files.
//!   `*` globs are not followed.
//! - A `use` of a module itself (`use super::session;`) is no import: the paths written through
//!   it (`session::serve`) are, and they go to the files they name.
//! - A module file's own `mod child;` and its re-exports of its descendants' items (`pub use
//!   child::X;`, `pub(crate) use ..`) are no imports: that is how a folder shows its surface.
//!   Any other use of a child (a plain `use child::X;`, an inline `child::f()`) is.
//!
//! - Each group of files that reach each other (a strongly connected component, Tarjan) is one
//!   circle: reported as one ring through it (`a.rs -> b.rs -> a.rs`), then every import inside
//!   the group with the names that tie it.
//!
//! Comments and string literals are blanked first; the scan is textual, enough for code that
//! rustfmt has formatted. Method calls (`value.method()`) name no path and are not seen: an
//! `impl` in one file of a type from another is an import of that type's file, its callers are
//! not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "file_circles/read.rs"]
mod read;

use read::{blank, code_of, inline_paths, spread, uses_of, Use};

/// A module path (`["downstream", "session"]`) and the file that holds it.
type Modules = BTreeMap<Vec<String>, String>;
/// Imports between files: `(from, to)` and the names that tie them.
type Edges = BTreeMap<(String, String), BTreeSet<String>>;

/// The module a file is (`src/a/b.rs` and `src/a/b/mod.rs` → `a::b`), found from the crate's
/// root `lib` (`src/lib.rs`) along its `mod name;` lines.
fn modules(files: &BTreeMap<String, String>, lib: &str) -> Modules {
    let mut out = Modules::new();
    let mut todo = vec![(Vec::new(), lib.to_string())];
    while let Some((module, file)) = todo.pop() {
        let Some(code) = files.get(&file) else {
            continue;
        };
        let here = file.rsplit_once('/').map_or("", |(dir, _)| dir).to_string();
        let own = file.ends_with("/mod.rs") || file == lib;
        let dir = if own {
            here.clone()
        } else {
            file.trim_end_matches(".rs").to_string()
        };
        let mut path_attr = None;
        for line in code.lines().map(str::trim) {
            if let Some(p) = line.strip_prefix("#[path = \"") {
                path_attr = p.strip_suffix("\"]").map(str::to_string);
                continue;
            }
            let decl = line.split_once("mod ").filter(|(vis, _)| {
                vis.is_empty() || (vis.starts_with("pub") && vis.ends_with(' '))
            });
            let Some(name) = decl.and_then(|(_, rest)| rest.strip_suffix(';')) else {
                if !line.starts_with("#[") {
                    path_attr = None;
                }
                continue;
            };
            let child = match path_attr.take() {
                Some(p) => format!("{here}/{p}"),
                None if files.contains_key(&format!("{dir}/{name}.rs")) => {
                    format!("{dir}/{name}.rs")
                }
                None => format!("{dir}/{name}/mod.rs"),
            };
            let mut path = module.clone();
            path.push(name.to_string());
            todo.push((path, child));
        }
        out.insert(module, file);
    }
    out
}

/// Where `path`, written in module `here`, leads: the file and the name in it (`None` for a
/// path outside the crate).
fn resolve(modules: &Modules, here: &[String], path: &[String]) -> Option<(Vec<String>, usize)> {
    let mut full: Vec<String> = Vec::new();
    let mut rest = path;
    match path.first()?.as_str() {
        "crate" | "$crate" => rest = &path[1..],
        "self" => {
            full = here.to_vec();
            rest = &path[1..];
        }
        "super" => {
            full = here.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                full.pop();
                rest = &rest[1..];
            }
        }
        first => {
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
            full = here.to_vec();
        }
    }
    let base = full.len();
    full.extend(rest.iter().cloned());
    let depth = (base..=full.len())
        .rev()
        .find(|&n| modules.contains_key(&full[..n]))?;
    Some((full, depth))
}

/// The files that what `full[depth]` names in module `full[..depth]` is reached through from
/// module `here`: the file that defines it last, after each file whose `use` lines were
/// followed on the way there (at most a few steps) unless its module is `here` or one of its
/// ancestors (a folder's surface, seen by its own files); with the name.
fn defining(
    modules: &Modules,
    uses: &BTreeMap<String, Vec<Use>>,
    here: &[String],
    full: Vec<String>,
    depth: usize,
) -> (Vec<String>, String) {
    let (mut full, mut depth) = (full, depth);
    let mut through = Vec::new();
    for _ in 0..8 {
        let file = &modules[&full[..depth]];
        let Some(item) = full.get(depth) else {
            break;
        };
        let imported = uses
            .get(file)
            .into_iter()
            .flatten()
            .find(|u| &u.name == item);
        let Some(next) = imported.and_then(|u| resolve(modules, &full[..depth], &u.path)) else {
            break;
        };
        if !here.starts_with(&full[..depth]) {
            through.push(file.clone());
        }
        let (mut next_full, next_depth) = next;
        next_full.extend(full[depth + 1..].iter().cloned());
        (full, depth) = (next_full, next_depth);
    }
    through.push(modules[&full[..depth]].clone());
    let name = full.get(depth).or(full.last()).cloned().unwrap_or_default();
    (through, name)
}

/// The imports between the files of `files` (relative path → text) of the crate whose root is
/// `lib`, by the rules above.
fn edges(files: &BTreeMap<String, String>, lib: &str) -> Edges {
    let code: BTreeMap<String, String> =
        files.iter().map(|(f, t)| (f.clone(), code_of(t))).collect();
    let modules = modules(&code, lib);
    let files: BTreeMap<&String, String> = code.iter().map(|(f, t)| (f, blank(t))).collect();
    let mut uses = BTreeMap::new();
    let mut bodies = BTreeMap::new();
    for file in modules.values() {
        let (u, body) = uses_of(&files[file]);
        uses.insert(file.clone(), u);
        bodies.insert(file.clone(), body);
    }
    let mut out = Edges::new();
    for (here, file) in &modules {
        let mut found = Vec::new(); // (absolute path, depth)
        let mut aliases = BTreeMap::new(); // a module imported by name → its path
        for u in &uses[file] {
            let Some((full, depth)) = resolve(&modules, here, &u.path) else {
                continue;
            };
            let below = full[..depth].starts_with(here) && depth > here.len();
            if u.public && below {
                continue; // a re-export of a descendant
            }
            if depth == full.len() && !u.public {
                let absolute = std::iter::once("crate".to_string()).chain(full);
                aliases.insert(u.name.clone(), absolute.collect::<Vec<_>>());
                continue; // a module by name: its inline paths count
            }
            found.push((full, depth));
        }
        let mut starts: BTreeSet<String> = aliases.keys().cloned().collect();
        starts.extend(
            modules
                .keys()
                .filter(|m| m.len() == here.len() + 1 && m.starts_with(here))
                .map(|m| m[here.len()].clone()),
        );
        for path in inline_paths(&bodies[file], &starts) {
            let path = match aliases.get(&path[0]) {
                Some(module) => module.iter().chain(&path[1..]).cloned().collect(),
                None => path,
            };
            found.extend(resolve(&modules, here, &path));
        }
        for (full, depth) in found {
            let (through, name) = defining(&modules, &uses, here, full, depth);
            for to in through.into_iter().filter(|to| to != file) {
                out.entry((file.clone(), to))
                    .or_default()
                    .insert(name.clone());
            }
        }
    }
    out
}

/// The strongly connected components of more than one file (Tarjan), each sorted.
fn circles(edges: &Edges) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    struct State<'a> {
        next: &'a BTreeMap<&'a str, Vec<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        for &w in &s.next[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.stack.contains(&w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let at = s.stack.iter().rposition(|&x| x == v).unwrap_or(0);
            let mut part: Vec<String> = s.stack.drain(at..).map(str::to_string).collect();
            if part.len() > 1 {
                part.sort();
                s.out.push(part);
            }
        }
    }
    let mut s = State {
        next: &next,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for &v in next.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// One circle through `part`, from its first file back to it (shortest, breadth first), as
/// `a.rs -> b.rs -> a.rs`, then each import inside `part` with the names that tie it.
fn describe(edges: &Edges, part: &[String]) -> String {
    let inside = |f: &String| part.contains(f);
    let start = &part[0];
    let mut came: BTreeMap<&String, &String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    'search: while let Some(v) = queue.pop_front() {
        for (from, to) in edges.keys().filter(|(f, t)| f == v && inside(t)) {
            if to == start {
                came.insert(start, from);
                break 'search;
            }
            if !came.contains_key(to) {
                came.insert(to, from);
                queue.push_back(to);
            }
        }
    }
    let mut ring = vec![start];
    let mut at = came[start];
    while at != start {
        ring.push(at);
        at = came[at];
    }
    ring.push(start);
    ring.reverse();
    let ring: Vec<&str> = ring.iter().map(|f| f.trim_start_matches("src/")).collect();
    let mut out = format!("circle: {}\n", ring.join(" -> "));
    for ((from, to), names) in edges.iter().filter(|((f, t), _)| inside(f) && inside(t)) {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        out.push_str(&format!(
            "    {} -> {}: {}\n",
            from.trim_start_matches("src/"),
            to.trim_start_matches("src/"),
            names.join(", ")
        ));
    }
    out
}

/// The `.rs` files under `src` (a crate's source folder), by path relative to `root`.
fn sources(root: &Path, src: &Path) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a source folder") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).expect("under the root");
                let rel = rel.to_string_lossy().replace('\\', "/");
                files.insert(rel, std::fs::read_to_string(&path).expect("read a file"));
            }
        }
    }
    files
}

#[test]
fn files_import_one_way() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = sources(root, &root.join("src"));
    let mut all = edges(&files, "src/lib.rs");
    assert!(
        all.len() > 300,
        "only {} imports between files found: is the scan broken?",
        all.len()
    );
    // The workspace's other crates (crates/*/src): a crate is scanned on its own, as Cargo
    // already keeps imports between crates one way.
    for krate in std::fs::read_dir(root.join("crates")).expect("read crates/") {
        let src = krate.expect("dir entry").path().join("src");
        let lib = src.join("lib.rs");
        let lib = lib.strip_prefix(root).expect("under the root");
        let lib = lib.to_string_lossy().replace('\\', "/");
        all.extend(edges(&sources(root, &src), &lib));
    }
    let edges = all;
    let found: Vec<String> = circles(&edges)
        .iter()
        .map(|part| describe(&edges, part))
        .collect();
    assert!(
        found.is_empty(),
        "{} import circles between files (move what they share down into the lower file, or \
         into a new file of its own, so that the arrows point one way):\n{}",
        found.len(),
        found.join("")
    );
}

/// A name imported through a sibling module's re-export ties the importer to the re-exporting
/// file: `core.rs` reaches `forward/mod.rs`, which uses `core.rs`.
#[test]
fn a_re_export_is_an_import_of_the_file_that_makes_it() {
    let files: BTreeMap<String, String> = [
        ("src/lib.rs", "pub mod core;\npub mod forward;\n"),
        (
            "src/core.rs",
            "use crate::forward::Faults;\npub(crate) struct Core(Faults);\n",
        ),
        (
            "src/forward/mod.rs",
            "mod fault;\npub(crate) use fault::Faults;\nuse crate::core::Core;\nfn f(_: Core) {}\n",
        ),
        ("src/forward/fault.rs", "pub(crate) struct Faults;\n"),
    ]
    .into_iter()
    .map(|(f, t)| (f.to_string(), t.to_string()))
    .collect();
    let edges = edges(&files, "src/lib.rs");
    let pairs: Vec<(&str, &str)> = edges
        .keys()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("src/core.rs", "src/forward/fault.rs"),
            ("src/core.rs", "src/forward/mod.rs"),
            ("src/forward/mod.rs", "src/core.rs"),
        ]
    );
    assert_eq!(circles(&edges), [["src/core.rs", "src/forward/mod.rs"]]);
}

/// The scanner and the circle finder themselves, on a made-up crate.
#[test]
fn the_scan_finds_a_made_up_circle() {
    let files: BTreeMap<String, String> = [
        ("src/lib.rs", "pub mod a;\npub mod z;\n"),
        (
            "src/a/mod.rs",
            "//! use crate::z::Nothing;\nmod b;\nmod c;\npub(crate) use b::Thing;\n",
        ),
        (
            "src/a/b.rs",
            "use super::c::{helper, Other as O};\npub(crate) struct Thing;\n\
             fn f() { let s = \"crate::z::Q\"; }\n",
        ),
        (
            "src/a/c.rs",
            "use crate::z;\npub(crate) fn helper() -> super::Thing { z::make() }\n\
             pub(crate) struct Other;\n#[cfg(test)]\nmod tests {\n    use crate::a::b::T;\n}\n",
        ),
        ("src/z.rs", "pub(crate) fn make() {}\n"),
    ]
    .into_iter()
    .map(|(f, t)| (f.to_string(), t.to_string()))
    .collect();
    let edges = edges(&files, "src/lib.rs");
    let pairs: Vec<(&str, &str)> = edges
        .keys()
        .map(|(f, t)| (f.as_str(), t.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("src/a/b.rs", "src/a/c.rs"),
            ("src/a/c.rs", "src/a/b.rs"),
            ("src/a/c.rs", "src/z.rs")
        ],
        "the re-export in a/mod.rs is no import, super::Thing goes to b.rs where it is defined"
    );
    let found = circles(&edges);
    assert_eq!(found, [["src/a/b.rs", "src/a/c.rs"]]);
    assert_eq!(
        describe(&edges, &found[0]),
        "circle: a/b.rs -> a/c.rs -> a/b.rs\n    a/b.rs -> a/c.rs: Other, helper\n    \
         a/c.rs -> a/b.rs: Thing\n"
    );
    assert_eq!(
        spread("crate::x::{self, y::{A as B, C}, *}"),
        [
            (vec!["crate".into(), "x".into()], "x".to_string()),
            (
                vec!["crate".into(), "x".into(), "y".into(), "A".into()],
                "B".to_string()
            ),
            (
                vec!["crate".into(), "x".into(), "y".into(), "C".into()],
                "C".to_string()
            ),
            (vec!["crate".into(), "x".into()], "*".to_string()),
        ]
    );
}
