//! Freezing a node the test started (SIGSTOP) and making sure it is resumed (SIGCONT), also
//! when the test panics, so the cluster's cleanup finds live processes.

/// Sends `sig` (`-STOP`, `-CONT`, …) to `pid` with kill(1); panics if it fails.
pub fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .arg(sig)
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {sig} {pid}: {status}");
}

/// Resumes a SIGSTOPped process when dropped. Never panics (it may run while unwinding).
pub struct Resume(pub u32);

impl Drop for Resume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .arg("-CONT")
            .arg(self.0.to_string())
            .status();
    }
}

/// Freezes `pid` for `how_long` while `client` reads `keys` (each holding its own name) in
/// turns, then resumes it. Returns how many reads came back right, and a line for each that
/// did not (how far into the freeze, the key, what came back).
pub fn read_own_names_while_frozen(
    pid: u32,
    how_long: std::time::Duration,
    keys: &[String],
    client: &mut super::RespClient,
) -> (usize, Vec<String>) {
    signal(pid, "-STOP");
    let _resume = Resume(pid);
    let frozen = std::time::Instant::now();
    let (mut reads, mut failures) = (0, Vec::new());
    while frozen.elapsed() < how_long {
        for key in keys {
            match client.cmd(&["GET", key.as_str()]) {
                Ok(super::Value::Bulk(Some(v))) if v == key.as_bytes() => reads += 1,
                other => failures.push(format!(
                    "{} ms into the freeze, GET {key}: {other:?}",
                    frozen.elapsed().as_millis()
                )),
            }
        }
    }
    (reads, failures)
}
