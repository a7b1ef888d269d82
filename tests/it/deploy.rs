//! The deployment artifacts (Dockerfile, examples/) against the real binary and build: every
//! redcar config they ship passes `redcar --check-config`, and the image builds the way
//! `make build` does, as a non-root user.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use std::process::Command;

use crate::redirects::write_config;
use crate::support::redcar::redcar_bin;

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("read {}: {e}", full.display()))
}

/// Secrets the examples read with `{env: NAME}`; the check resolves them like start-up does.
const EXAMPLE_SECRETS: &[(&str, &str)] = &[
    ("REDIS_PASSWORD", "example-upstream-password"),
    ("REDCAR_CLIENT_PASSWORD", "example-client-password"),
];

/// One redcar config shipped in the repository, and the flags it is started with.
struct Shipped {
    origin: String,
    yaml: String,
    args: Vec<String>,
}

/// The `redcar.yaml` of every ConfigMap in a Kubernetes manifest, with the `args` of the
/// container that mounts it (every container named `redcar`).
fn configs_in_manifest(path: &str) -> Vec<Shipped> {
    let text = repo_file(path);
    let docs: Vec<yaml_serde::Value> = yaml_serde::Deserializer::from_str(&text)
        .map(|doc| yaml_serde::Value::deserialize(doc).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect();
    let mut args = Vec::new();
    for doc in &docs {
        let containers = doc["spec"]["template"]["spec"]["containers"].as_sequence();
        for container in containers.into_iter().flatten() {
            if container["name"].as_str() == Some("redcar") {
                let list = container["args"].as_sequence().expect("redcar args");
                args = list
                    .iter()
                    .map(|a| a.as_str().expect("string arg").to_owned())
                    .collect();
            }
        }
    }
    assert!(!args.is_empty(), "{path}: no container named redcar");
    docs.iter()
        .filter(|doc| doc["kind"].as_str() == Some("ConfigMap"))
        .map(|doc| Shipped {
            origin: format!(
                "{path} ConfigMap {}",
                doc["metadata"]["name"].as_str().unwrap_or("?")
            ),
            yaml: doc["data"]["redcar.yaml"]
                .as_str()
                .unwrap_or_else(|| panic!("{path}: ConfigMap without redcar.yaml"))
                .to_owned(),
            args: args.clone(),
        })
        .collect()
}

/// Runs `redcar <args> --check-config` with `--config` pointing at the shipped YAML, in an
/// environment holding only PATH and the example secrets (no stray REDCAR_* override).
fn check(shipped: &Shipped) -> (Option<i32>, String) {
    let config = write_config(&shipped.yaml);
    let mut args = shipped.args.clone();
    let at = args
        .iter()
        .position(|a| a == "--config")
        .unwrap_or_else(|| panic!("{}: started without --config", shipped.origin));
    args[at + 1] = config.path_str().to_owned();
    let out = Command::new(redcar_bin())
        .args(&args)
        .arg("--check-config")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(EXAMPLE_SECRETS.iter().copied())
        .output()
        .expect("run redcar --check-config");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn every_shipped_config_passes_check_config() {
    let mut shipped = configs_in_manifest("examples/kubernetes/sidecar.yaml");
    shipped.extend(configs_in_manifest("examples/kubernetes/proxy-tier.yaml"));
    // The packaged config, started as the Dockerfile and the systemd unit start it.
    shipped.push(Shipped {
        origin: "examples/redcar.yaml".into(),
        yaml: repo_file("examples/redcar.yaml"),
        args: vec!["--config".into(), "/etc/redcar/redcar.yaml".into()],
    });
    assert_eq!(
        shipped.len(),
        3,
        "expected two ConfigMaps and examples/redcar.yaml"
    );
    for config in &shipped {
        let (code, output) = check(config);
        assert_eq!(code, Some(0), "{}: {output}", config.origin);
        // Secrets resolved, and never printed.
        for (_, secret) in EXAMPLE_SECRETS {
            assert!(!output.contains(secret), "{}: secret shown", config.origin);
        }
    }
}

#[test]
fn a_broken_example_config_would_fail_the_check() {
    // The check above can fail: a misspelt key (deny_unknown_fields) exits 64.
    let broken = Shipped {
        origin: "broken".into(),
        yaml: repo_file("examples/redcar.yaml").replace("op_timeout:", "op_timeuot:"),
        args: vec!["--config".into(), "x".into()],
    };
    let (code, output) = check(&broken);
    assert_eq!(code, Some(64), "{output}");
    assert!(output.contains("op_timeuot"), "{output}");
}

/// The recipe lines of a Makefile target, with `$(CARGO)` expanded to its default.
fn make_recipe(makefile: &str, target: &str) -> Vec<String> {
    let header = format!("{target}:");
    let mut lines = makefile.lines().skip_while(|l| !l.starts_with(&header));
    assert!(lines.next().is_some(), "Makefile has no `{target}` target");
    lines
        .take_while(|l| l.starts_with('\t'))
        .map(|l| l.trim().replace("$(CARGO)", "cargo"))
        .collect()
}

/// Dockerfile stages: (FROM line, instructions), continuation lines joined.
fn dockerfile_stages(dockerfile: &str) -> Vec<(String, Vec<String>)> {
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in dockerfile.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                instructions.push(std::mem::take(&mut current));
            }
        }
    }
    let mut stages: Vec<(String, Vec<String>)> = Vec::new();
    for instruction in instructions {
        if instruction.starts_with("FROM ") {
            stages.push((instruction, Vec::new()));
        } else {
            let stage = stages.last_mut().expect("instruction before FROM");
            stage.1.push(instruction);
        }
    }
    stages
}

#[test]
fn dockerfile_builds_like_make_build_and_runs_as_non_root() {
    let build = make_recipe(&repo_file("Makefile"), "build");
    assert_eq!(
        build,
        ["cargo build --release"],
        "Makefile build recipe changed"
    );
    let stages = dockerfile_stages(&repo_file("Dockerfile"));
    assert!(stages.len() >= 2, "expected a builder and a runtime stage");

    let (builder, steps) = &stages[0];
    let cargo_runs: Vec<&str> = steps
        .iter()
        .filter_map(|s| s.strip_prefix("RUN "))
        .filter(|s| s.contains("cargo"))
        .map(str::trim)
        .collect();
    assert_eq!(
        cargo_runs, build,
        "{builder}: cargo commands differ from `make build`"
    );

    let (runtime, steps) = stages.last().expect("runtime stage");
    let user = steps
        .iter()
        .filter_map(|s| s.strip_prefix("USER "))
        .next_back()
        .unwrap_or_else(|| panic!("{runtime}: no USER, so it runs as root"));
    let name = user.trim().split(':').next().unwrap_or_default();
    assert!(
        !name.is_empty() && name != "root" && name != "0",
        "{runtime}: runs as {user}"
    );
    assert!(
        steps.iter().any(|s| s == r#"ENTRYPOINT ["redcar"]"#),
        "{runtime}: entrypoint is not redcar"
    );
    let copied: PathBuf = steps
        .iter()
        .filter_map(|s| s.strip_prefix("COPY --from="))
        .map(|s| PathBuf::from(s.split_whitespace().nth(1).unwrap_or_default()))
        .next()
        .unwrap_or_default();
    assert!(
        copied.ends_with("target/release/redcar"),
        "{runtime}: copies {} instead of the release binary",
        copied.display()
    );
}
