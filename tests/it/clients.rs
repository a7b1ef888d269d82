//! Real client libraries pointed at redcar as if it were one Redis node: redis-py (+hiredis),
//! phpredis `Redis`, predis `Client`, node-redis and ioredis (Node.js), go-redis v9, and Jedis and
//! Lettuce (Java). Each runs its smoke script from tests/clients/ against a fresh cluster behind
//! redcar; the script asserts every reply and exits non-zero on a mismatch. The Node.js, Go and
//! Java programs also read what they wrote back from the cluster itself (`redis-cli -c`, or a
//! Jedis cluster client, against `REDCAR_CLUSTER_NODE`). node-redis's client-side cache (`RESP: 3`,
//! `clientSideCache`) is checked through redcar too: served from the cache, invalidated by a write
//! straight on the cluster (tracking_node_redis.mjs).
//!
//! The libraries come from `scripts/ensure-clients.sh` (php-cli, php-redis and php-predis from
//! apt, redis-py and hiredis in the virtualenv `target/pyenv`), `scripts/ensure-node-clients.sh`
//! (`npm ci` into `target/node`), `scripts/ensure-go-clients.sh` (go-redis built into
//! `target/go-clients`) and `scripts/ensure-java-clients.sh` (Jedis and Lettuce built with Maven
//! into `target/java-clients`), all run by `make test`. A missing library fails the test with the
//! command to run; it never passes silently, with or without `CI` set.
//! `REDCAR_PYTHON` overrides the interpreter, `REDCAR_PHP` the PHP binary, `REDCAR_NODE` node,
//! `REDCAR_JAVA` java.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{Redcar, RedisCluster};

/// A smoke script normally takes well under a second; this only bounds a hang.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(60);
const INSTALL_HINT: &str = "run scripts/ensure-clients.sh (`make test` does), which installs \
     `apt-get install -y php-cli php-redis php-predis` and \
     `target/pyenv/bin/pip install redis hiredis` into a `python3 -m venv target/pyenv`";
pub(crate) const NODE_HINT: &str = "run scripts/ensure-node-clients.sh (`make test` does), which \
     installs node-redis and ioredis from tests/clients/node/package-lock.json with `npm ci` into \
     target/node (and `apt-get install -y nodejs npm` when node is missing)";
pub(crate) const GO_HINT: &str =
    "run scripts/ensure-go-clients.sh (`make test` does), which builds \
     tests/clients/go (go-redis v9) into target/go-clients/redcar-go-clients (and \
     `apt-get install -y golang-go` when go is missing)";

pub(crate) const JAVA_HINT: &str =
    "run scripts/ensure-java-clients.sh (`make test` does), which builds \
     tests/clients/java (Jedis and Lettuce) with Maven into target/java-clients (and \
     `apt-get install -y default-jdk-headless maven` when a JDK or Maven is missing)";
/// The JVM's start-up, not the workload, is most of a Java run: C1 alone (no C2 compiles) and
/// the serial collector halve its CPU time on a busy 2-core machine.
const JAVA_OPTIONS: [&str; 2] = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"];

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn script(name: &str) -> PathBuf {
    manifest_dir().join("tests/clients").join(name)
}

pub(crate) fn python() -> PathBuf {
    let python = std::env::var_os("REDCAR_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest_dir().join("target/pyenv/bin/python"));
    assert!(
        python.exists(),
        "redis-py is not installed: {} does not exist; {INSTALL_HINT}",
        python.display()
    );
    python
}

pub(crate) fn php() -> PathBuf {
    std::env::var_os("REDCAR_PHP")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("php"))
}

/// Node.js for the `*.mjs` scripts, with node-redis and ioredis installed in target/node.
pub(crate) fn node() -> PathBuf {
    let node = std::env::var_os("REDCAR_NODE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("node"));
    let modules = manifest_dir().join("target/node/node_modules");
    for lib in ["redis", "ioredis"] {
        assert!(
            modules.join(lib).join("package.json").exists(),
            "{lib} is not installed under {}; {NODE_HINT}",
            modules.display()
        );
    }
    require_with(&node, &["-e", "0"], "node", NODE_HINT);
    node
}

/// The go-redis program built from tests/clients/go.
pub(crate) fn go_clients() -> PathBuf {
    let bin = manifest_dir().join("target/go-clients/redcar-go-clients");
    assert!(
        bin.exists(),
        "go-redis is not built: {} does not exist; {GO_HINT}",
        bin.display()
    );
    bin
}

/// `java` and the Jedis/Lettuce program built from tests/clients/java.
pub(crate) fn java_clients() -> (PathBuf, PathBuf) {
    let jar = manifest_dir().join("target/java-clients/redcar-java-clients.jar");
    assert!(
        jar.exists(),
        "Jedis and Lettuce are not built: {} does not exist; {JAVA_HINT}",
        jar.display()
    );
    let java = std::env::var_os("REDCAR_JAVA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("java"));
    require_with(&java, &["-version"], "java", JAVA_HINT);
    (java, jar)
}

/// Check that `program -r/-c probe` works, else fail naming what to install.
pub(crate) fn require(program: &Path, args: &[&str], what: &str) {
    require_with(program, args, what, INSTALL_HINT);
}

fn require_with(program: &Path, args: &[&str], what: &str, hint: &str) {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{what} is not installed ({}: {e}); {hint}",
                program.display()
            )
        });
    assert!(
        out.status.success(),
        "{what} is not installed ({} {args:?} failed: {}{}); {hint}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}

/// Read a child's pipe to the end on a thread (so a chatty child never blocks on a full pipe).
fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let mut bytes = Vec::new();
            let _ = p.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    })
}

/// Start a cluster and redcar, then [`run_script`].
fn run_smoke(program: &Path, script_name: &str) {
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    run_script(program, script_name, &redcar);
}

/// Run `program tests/clients/<script> 127.0.0.1 PORT` against `redcar` with a timeout, and
/// assert it exits 0; on failure show its output and redcar's log.
pub(crate) fn run_script(program: &Path, script_name: &str, redcar: &Redcar) {
    let path = script(script_name);
    run_client(program, &[path.as_os_str()], script_name, redcar, None);
}

/// Like [`run_script`], with `REDCAR_CLUSTER_NODE` set to one of `cluster`'s nodes, where the
/// script reads back what it wrote (the Node.js scripts).
pub(crate) fn run_script_checked(
    program: &Path,
    script_name: &str,
    redcar: &Redcar,
    cluster: &RedisCluster,
) {
    let path = script(script_name);
    run_client(
        program,
        &[path.as_os_str()],
        script_name,
        redcar,
        Some(cluster),
    );
}

/// The go-redis program in `mode` (`smoke`: a plain client, `facade`: a cluster client).
pub(crate) fn run_go(mode: &str, redcar: &Redcar, cluster: &RedisCluster) {
    let name = format!("redcar-go-clients {mode}");
    run_client(
        &go_clients(),
        &[OsStr::new(mode)],
        &name,
        redcar,
        Some(cluster),
    );
}

/// The Jedis and Lettuce program in `mode` (`smoke`: plain clients, `facade`: cluster clients),
/// both libraries in one JVM: start-up costs more than their whole workload.
pub(crate) fn run_java(mode: &str, redcar: &Redcar, cluster: &RedisCluster) {
    let (java, jar) = java_clients();
    let mut args: Vec<&OsStr> = JAVA_OPTIONS.iter().map(OsStr::new).collect();
    args.extend([OsStr::new("-jar"), jar.as_os_str(), OsStr::new(mode)]);
    let name = format!("redcar-java-clients {mode}");
    run_client(&java, &args, &name, redcar, Some(cluster));
}

/// Run `program ARGS... 127.0.0.1 PORT` against `redcar` with a timeout (and
/// `REDCAR_CLUSTER_NODE=HOST:PORT` of a node of `cluster`, if given), and assert it exits 0; on
/// failure show its output and redcar's log.
fn run_client(
    program: &Path,
    args: &[&OsStr],
    script_name: &str,
    redcar: &Redcar,
    cluster: Option<&RedisCluster>,
) {
    let t0 = Instant::now();
    let mut command = Command::new(program);
    command
        .args(args)
        .arg("127.0.0.1")
        .arg(redcar.port().to_string());
    if let Some(cluster) = cluster {
        command.env("REDCAR_CLUSTER_NODE", cluster.any_node().addr());
    }
    let mut child: Child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {} {script_name}: {e}", program.display()));
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for smoke script") {
            break Some(status);
        }
        if t0.elapsed() > SCRIPT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    let outcome = match status {
        Some(s) if s.success() => {
            eprintln!("{script_name}: {} ({:?})", stdout.trim(), t0.elapsed());
            return;
        }
        Some(s) => format!("exited with {s}"),
        None => format!("timed out after {SCRIPT_TIMEOUT:?} and was killed"),
    };
    panic!(
        "{} {script_name} {outcome}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}\n\
         --- redcar log ---\n{}",
        program.display(),
        redcar.log()
    );
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs redis-py and hiredis in target/pyenv (scripts/ensure-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn redis_py_smoke_script_passes_through_redcar() {
    let python = python();
    require(
        &python,
        &["-c", "import redis, hiredis"],
        "redis-py/hiredis in the virtualenv",
    );
    run_smoke(&python, "smoke_redis_py.py");
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs PHP with phpredis (scripts/ensure-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn phpredis_smoke_script_passes_through_redcar() {
    let php = php();
    require(
        &php,
        &["-r", "exit(class_exists('Redis') ? 0 : 1);"],
        "php-cli with phpredis (php-redis)",
    );
    run_smoke(&php, "smoke_phpredis.php");
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs PHP with predis (scripts/ensure-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn predis_smoke_script_passes_through_redcar() {
    let php = php();
    require(
        &php,
        &[
            "-r",
            "require 'Predis/autoload.php'; exit(class_exists('Predis\\Client') ? 0 : 1);",
        ],
        "php-cli with predis (php-predis)",
    );
    run_smoke(&php, "smoke_predis.php");
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs Node.js with node-redis and ioredis (scripts/ensure-node-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn node_redis_and_ioredis_smoke_scripts_pass_through_redcar() {
    let node = node();
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    run_script_checked(&node, "smoke_node_redis.mjs", &redcar, &cluster);
    run_script_checked(&node, "smoke_ioredis.mjs", &redcar, &cluster);
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs Go and go-redis (scripts/ensure-go-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn go_redis_smoke_program_passes_through_redcar() {
    go_clients();
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    run_go("smoke", &redcar, &cluster);
}

#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs a JDK and Maven, Jedis and Lettuce (scripts/ensure-java-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn jedis_and_lettuce_smoke_program_passes_through_redcar() {
    java_clients();
    let cluster = RedisCluster::start(3, 1);
    let redcar = Redcar::start(&cluster.seeds());
    run_java("smoke", &redcar, &cluster);
}

/// node-redis with `RESP: 3` and its client-side cache (`clientSideCache`) through plain redcar:
/// GETs served from the cache, an invalidation when another connection writes the key straight
/// on the cluster, then the new value (tests/clients/tracking_node_redis.mjs).
#[test]
#[cfg_attr(
    not(feature = "toolchain-tests"),
    ignore = "needs Node.js with node-redis (scripts/ensure-node-clients.sh): cargo test --features toolchain-tests (make test turns it on)"
)]
fn node_redis_client_side_cache_is_invalidated_through_redcar() {
    let node = node();
    let cluster = RedisCluster::start(3, 0);
    let redcar = Redcar::start(&cluster.seeds());
    run_script_checked(&node, "tracking_node_redis.mjs", &redcar, &cluster);
}
