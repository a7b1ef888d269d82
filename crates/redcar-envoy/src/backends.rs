//! The clusters prefix routes send keys to, other than the catch-all one → `backends.<name>`
//! (`kind: cluster` with the cluster's endpoints as seeds). A redcar backend has no settings
//! of its own: `cluster.*` timings, `upstream.*` timeouts, outlier detection, passwords and TLS
//! apply to every backend, so each such setting that differs from the catch-all cluster's
//! gets a note naming it.
//!
//! For example, a route to cluster `users` next to the catch-all `main` gives `backends.users:
//! {kind: cluster, seeds: [...]}`; if `users` has another `connect_timeout` than `main`, a note
//! names `upstream.connect_timeout` as not converted for it, without the values.

use yaml_serde::{Mapping, Value};

use super::draft::Draft;
use super::prefix::backend_name;
use super::route::Targets;
use super::ConvertError;

/// Converts `targets.others`; the main cluster is already in `draft`.
/// Each cluster is converted with `cluster::convert` into its own draft; only its seeds are kept,
/// the rest is compared with the main cluster's and named in a note where it differs. Notes the
/// main conversion already made are not repeated.
pub(super) fn convert(
    clusters: &Value,
    targets: &Targets,
    draft: &mut Draft,
) -> Result<(), ConvertError> {
    for name in &targets.others {
        // The same conversion as the main cluster's, into a draft of its own, then compared.
        let mut own = Draft::default();
        super::cluster::convert(clusters, name, &mut own)?;
        let backend = backend_name(name, &targets.main);
        let seeds = own
            .get(&["cluster", "seeds"])
            .cloned()
            .ok_or_else(|| ConvertError(format!("bug: cluster `{name}` converted no seeds")))?;
        let mut entry = Mapping::new();
        entry.insert("kind".into(), "cluster".into());
        entry.insert("seeds".into(), seeds);
        draft.set(&["backends", backend.as_str()], Value::Mapping(entry));
        if backend != *name {
            draft.note(
                "backends",
                format!("cluster {name} is the backend {backend} (redcar reserves `default`)"),
            );
        }
        for section in ["cluster", "upstream"] {
            let mut differing = Vec::new();
            differences(
                section,
                own.get(&[section]),
                draft.get(&[section]),
                &mut differing,
            );
            differing.retain(|key| key != "cluster.seeds");
            if !differing.is_empty() {
                draft.note(
                    "backends",
                    format!(
                        "cluster {name} {}: not converted; redcar applies one {section}.* to \
                         every backend, and these differ from the catch-all cluster {}'s",
                        differing.join(", "),
                        targets.main
                    ),
                );
            }
        }
        // The cluster's own notes, except the one saying how its password was written: it was
        // not (the note above names upstream.password when it differs from the main one's).
        let known: Vec<String> = draft.notes().iter().map(|n| n.text.clone()).collect();
        for note in own.notes() {
            if !known.contains(&note.text) && !note.text.contains("auth_password: inline") {
                draft.note("backends", format!("backend {backend}: {}", note.text));
            }
        }
    }
    Ok(())
}

/// The dotted keys under `at` whose values differ between `own` and `main` (either side
/// missing counts). Values are not shown: some are passwords.
/// Recurses through mappings; a leaf is reported once, by its full dotted path.
fn differences(at: &str, own: Option<&Value>, main: Option<&Value>, out: &mut Vec<String>) {
    match (own, main) {
        (Some(Value::Mapping(a)), Some(Value::Mapping(b))) => {
            let mut keys: Vec<&str> = a.keys().chain(b.keys()).filter_map(Value::as_str).collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                differences(&format!("{at}.{key}"), a.get(key), b.get(key), out);
            }
        }
        (Some(Value::Mapping(a)), None) => {
            for key in a.keys().filter_map(Value::as_str) {
                differences(&format!("{at}.{key}"), a.get(key), None, out);
            }
        }
        (None, Some(Value::Mapping(b))) => {
            for key in b.keys().filter_map(Value::as_str) {
                differences(&format!("{at}.{key}"), None, b.get(key), out);
            }
        }
        (a, b) if a != b => out.push(at.to_owned()),
        _ => {}
    }
}
