//! Envoy's admin `/config_dump` (JSON): the listeners of its `ListenersConfigDump` (static, and
//! the active state of dynamic ones) and the clusters of its `ClustersConfigDump`, whole dumps
//! or the per-resource entries `?resource=` prints.
//!
//! | `@type` (after the package) | read |
//! | --- | --- |
//! | `ListenersConfigDump` | static listeners; dynamic ones' active (or warming) state |
//! | `ClustersConfigDump` | static, active, then warming clusters not already seen |
//! | `BootstrapConfigDump` | whether Envoy's admin is on; other bootstrap keys noted |
//! | the per-resource forms of the above (`?resource=`) | the same, one entry each |
//! | anything else (secrets, routes, ...) | named once in a note |
//!
//! Listeners Envoy is draining or failed to load are not read: they do not serve clients.

use yaml_serde::Value;

use super::draft::Draft;
use super::resources::{bootstrap_notes, Form, Resources};
use super::ConvertError;

/// Gathers listeners and clusters from every `configs[]` entry that holds some.
/// Entries of a kind the converter does not read (secrets, routes, ...) are named once in a
/// header note; an Envoy admin interface in the bootstrap entry is reported as `admin`.
pub(super) fn gather(doc: &Value, draft: &mut Draft) -> Result<Resources, ConvertError> {
    let mut admin = false;
    let mut listeners = Vec::new();
    let mut clusters = Clusters::default();
    let mut unread: Vec<&str> = Vec::new();
    for entry in entries(&doc["configs"]) {
        match message(entry) {
            "ListenersConfigDump" => {
                for item in entries(&entry["static_listeners"]) {
                    listeners.extend(present(&item["listener"]));
                }
                for item in entries(&entry["dynamic_listeners"]) {
                    listeners.extend(dynamic_listener(item, draft));
                }
            }
            "ListenersConfigDump.StaticListener" => listeners.extend(present(&entry["listener"])),
            "ListenersConfigDump.DynamicListener" => {
                listeners.extend(dynamic_listener(entry, draft));
            }
            "ClustersConfigDump" => clusters.add_dump(entry),
            "ClustersConfigDump.StaticCluster" | "ClustersConfigDump.DynamicCluster" => {
                clusters.add(&entry["cluster"]);
            }
            "BootstrapConfigDump" => {
                admin = entry["bootstrap"]["admin"].is_mapping();
                bootstrap_notes(&entry["bootstrap"], draft);
            }
            other if !unread.contains(&other) => unread.push(other),
            _ => {}
        }
    }
    if !unread.is_empty() {
        draft.note(
            "",
            format!(
                "config_dump {}: not read; redcar needs only the listener and the cluster",
                unread.join(", ")
            ),
        );
    }
    Ok(Resources {
        form: Form::ConfigDump,
        listeners: Value::Sequence(listeners),
        clusters: Value::Sequence(clusters.all()),
        admin,
    })
}

/// An entry's `@type` without the URL and package:
/// `type.googleapis.com/envoy.admin.v3.ListenersConfigDump` → `ListenersConfigDump`.
/// Unknown or missing types come back as text too, so they can be listed in the note.
fn message(entry: &Value) -> &str {
    let Some(full) = entry["@type"].as_str() else {
        return "(entry without @type)";
    };
    // Package names are lower case; the message name is the first capitalised part.
    full.find(|c: char| c.is_ascii_uppercase())
        .map_or(full, |start| &full[start..])
}

/// The items of a sequence; anything else (absent, a mapping) yields none instead of an error,
/// since dumps leave empty lists out.
fn entries(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_sequence().into_iter().flatten()
}

/// A clone of `value` if it is a mapping: a missing or null resource is skipped, not an error.
fn present(value: &Value) -> Option<Value> {
    value.as_mapping().map(|_| value.clone())
}

/// The listener Envoy serves (`active_state`); one still warming is taken as it will be.
fn dynamic_listener(item: &Value, draft: &mut Draft) -> Option<Value> {
    let name = item["name"].as_str().unwrap_or("(unnamed)");
    if let Some(active) = present(&item["active_state"]["listener"]) {
        return Some(active);
    }
    if let Some(warming) = present(&item["warming_state"]["listener"]) {
        draft.note(
            "",
            format!("dynamic listener {name} is still warming in Envoy: converted as it will be"),
        );
        return Some(warming);
    }
    if !item["error_state"].is_null() || !item["draining_state"].is_null() {
        draft.note(
            "",
            format!("dynamic listener {name} has no active or warming state (only draining or failed): not read"),
        );
    }
    None
}

/// Clusters in the order a cluster is most likely to be the one Envoy uses: static, active,
/// then warming ones not already seen.
/// Warming clusters go last because Envoy is not yet using them; one with the same name as a found
/// cluster is a newer version of it, which the converter leaves to the next dump.
#[derive(Default)]
struct Clusters {
    /// Static and active clusters in dump order.
    found: Vec<Value>,
    /// Clusters still warming; they count only under a name no found cluster has.
    warming: Vec<Value>,
}

impl Clusters {
    /// Takes a whole `ClustersConfigDump`: static and active clusters are found, warming ones kept
    /// aside until [`Clusters::all`].
    fn add_dump(&mut self, dump: &Value) {
        for key in ["static_clusters", "dynamic_active_clusters"] {
            for item in entries(&dump[key]) {
                self.add(&item["cluster"]);
            }
        }
        for item in entries(&dump["dynamic_warming_clusters"]) {
            self.warming.extend(present(&item["cluster"]));
        }
    }

    /// A cluster found in a per-resource entry; a null one (absent in the dump) is skipped.
    fn add(&mut self, cluster: &Value) {
        self.found.extend(present(cluster));
    }

    /// The found clusters, then each warming cluster whose name is not among them.
    fn all(mut self) -> Vec<Value> {
        for cluster in self.warming {
            let seen = self.found.iter().any(|c| c["name"] == cluster["name"]);
            if !seen {
                self.found.push(cluster);
            }
        }
        self.found
    }
}
