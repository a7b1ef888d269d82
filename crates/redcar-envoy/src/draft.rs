//! The redcar config being built from an Envoy file: keys set so far, plus one note per Envoy
//! setting that has no equivalent or was approximated, rendered as commented YAML.
//!
//! Keys are set by dotted path as the converter goes (`set(&["upstream", "outlier",
//! "base_ejection_time"], "2s")`) and read back by later steps (`get`). Rendering prints a fixed
//! header, the header notes, then each top-level key as its own YAML block with its notes just
//! above it, for example:
//!
//! ```yaml # redcar config converted from envoy.yaml by `redcar config convert-envoy`. # Settings
//! the Envoy file leaves out take redcar's defaults (docs/configuration.md). # cluster
//! health_checks: not converted; redcar PINGs only ejected nodes (...) upstream: connect_timeout:
//! 250ms ```
//!
//! A note is also a warning on stderr, so a person who only reads the terminal sees the same.

use yaml_serde::{Mapping, Value};

/// Top-level keys in the order a person would read them; anything else follows.
/// Where clients connect first, then where commands go (`cluster`, `upstream`, `router`), then
/// auth and the routing table, which names backends defined above it.
const ORDER: &[&str] = &[
    "listen",
    "unix",
    "unix_permissions",
    "tls",
    "cluster",
    "upstream",
    "router",
    "metrics",
    "auth",
    "backends",
    "routes",
    "catch_all",
    "routes_ignore_case",
];

/// A redcar config under construction.
#[derive(Debug, Default)]
/// Built fresh for each conversion (and for each extra backend's cluster, to compare it with the
/// main one); never shared between threads.
pub(super) struct Draft {
    /// The config so far, top-level keys in insertion order; `render` reorders them by [`ORDER`].
    root: Mapping,
    /// In the order recorded; each is printed above its section and repeated on stderr as a
    /// warning.
    notes: Vec<Note>,
}

/// Something the reader must know about one converted (or dropped) Envoy setting.
/// Notes are kept in the order recorded and never deduplicated within one draft; `backends.rs`
/// skips notes of an extra cluster that the main conversion already made.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Note {
    /// The top-level redcar key the note is printed above; empty: the file header.
    pub(crate) section: &'static str,
    /// One line; never holds a secret (callers name where a secret is, never its value).
    pub(crate) text: String,
}

// === impl Draft ===

impl Draft {
    /// Sets `path` (e.g. `["upstream", "outlier", "base_ejection_time"]`), creating sections.
    /// A non-mapping value met on the way is replaced by a mapping, so a later, deeper key wins
    /// over an earlier scalar; an empty `path` does nothing.
    pub(crate) fn set(&mut self, path: &[&str], value: impl Into<Value>) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut map = &mut self.root;
        for key in parents {
            let entry = map
                .entry(Value::from(*key))
                .or_insert_with(|| Value::Mapping(Mapping::new()));
            if !entry.is_mapping() {
                *entry = Value::Mapping(Mapping::new());
            }
            let Value::Mapping(inner) = entry else {
                return;
            };
            map = inner;
        }
        map.insert(Value::from(*last), value.into());
    }

    /// The value at `path`, if set.
    /// Used by later steps to see what earlier ones wrote (e.g. whether `listen` is exposed).
    pub(crate) fn get(&self, path: &[&str]) -> Option<&Value> {
        let mut value = self.root.get(*path.first()?)?;
        for key in &path[1..] {
            value = value.as_mapping()?.get(*key)?;
        }
        Some(value)
    }

    /// Records a note printed above `section` (a top-level key; "" for the header).
    /// Line breaks in `text` become spaces, so a note can never end the YAML comment it is printed
    /// as.
    pub(crate) fn note(&mut self, section: &'static str, text: impl Into<String>) {
        // A comment must stay on one line.
        let text = text.into().replace(['\r', '\n'], " ");
        self.notes.push(Note { section, text });
    }

    /// Notes each key of `parent` (a mapping) missing from `known` as not converted, naming it
    /// as `{prefix}{key}`: nothing in the Envoy file is dropped without a word.
    /// For example, with `prefix` `"listener main "`, an unknown
    /// `per_connection_buffer_limit_bytes` becomes the note `listener main
    /// per_connection_buffer_limit_bytes: not converted (no redcar equivalent)`. A `parent` that is
    /// not a mapping has no keys and adds nothing.
    pub(crate) fn note_unknown(
        &mut self,
        section: &'static str,
        parent: &Value,
        known: &[&str],
        prefix: &str,
    ) {
        for key in parent.as_mapping().into_iter().flat_map(|m| m.keys()) {
            let Some(key) = key.as_str() else { continue };
            if !known.contains(&key) {
                self.note(
                    section,
                    format!("{prefix}{key}: not converted (no redcar equivalent)"),
                );
            }
        }
    }

    /// Every note recorded, in order: the warnings [`super::convert`] hands back for stderr.
    pub(crate) fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The config as YAML: a header, then each section with its notes as comments above it.
    /// Fails only if `yaml_serde` cannot serialise a value, which would be a converter bug. Notes
    /// whose section never got a key are appended at the end, so none is lost.
    pub(crate) fn render(&self, source: &str) -> Result<String, yaml_serde::Error> {
        let mut out = format!(
            "# redcar config converted from {source} by `redcar config convert-envoy`.\n\
             # Settings the Envoy file leaves out take redcar's defaults (docs/configuration.md).\n"
        );
        self.comments(&mut out, "");
        let mut keys: Vec<&str> = ORDER
            .iter()
            .copied()
            .filter(|key| self.root.contains_key(*key))
            .collect();
        keys.extend(
            self.root
                .keys()
                .filter_map(Value::as_str)
                .filter(|key| !ORDER.contains(key)),
        );
        for key in keys {
            let Some(value) = self.root.get(key) else {
                continue;
            };
            let mut one = Mapping::new();
            one.insert(Value::from(key), value.clone());
            self.comments(&mut out, key);
            out.push_str(&yaml_serde::to_string(&one)?);
        }
        // Notes for a section that ended up with no key still reach the reader.
        for note in &self.notes {
            if !note.section.is_empty() && !self.root.contains_key(note.section) {
                out.push_str(&format!("# {}\n", note.text));
            }
        }
        Ok(out)
    }

    /// Appends the notes of `section` as `# ` lines, in the order they were recorded.
    fn comments(&self, out: &mut String, section: &str) {
        for note in self.notes.iter().filter(|n| n.section == section) {
            out.push_str(&format!("# {}\n", note.text));
        }
    }
}
