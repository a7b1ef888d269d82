//! `redcar upgrade --pid-file FILE`: sends SIGUSR2 to the process the pid file names and waits
//! for the outcome its status file (`FILE.upgrade`) reports. Exit status: 0 upgraded, 1 failed
//! (the old process goes on serving), 64 bad arguments or no such process.

use std::path::Path;
use std::time::{Duration, Instant};

use rustix::process::{kill_process, test_kill_process, Pid, Signal};

use super::pid_file::{read_pid, status_path};

/// Runs `redcar upgrade`; returns the exit status.
///
/// Called by `main.rs` for the `upgrade` subcommand; blocking (no runtime needed).
pub fn run(pid_file: &Path, timeout: Duration) -> u8 {
    match upgrade(pid_file, timeout) {
        Ok(message) => {
            println!("redcar upgrade: {message}");
            0
        }
        Err((code, message)) => {
            eprintln!("redcar upgrade: {message}");
            code
        }
    }
}

/// Polls the status file every 50 ms until it changes, the process exits, or `timeout`. Exit codes:
/// 64 when there is nothing to signal, 1 when the upgrade failed or said nothing in time.
/// The status file is compared with what it held before the signal, so an outcome left from an
/// earlier upgrade is never taken for this one's.
fn upgrade(pid_file: &Path, timeout: Duration) -> Result<String, (u8, String)> {
    let old =
        read_pid(pid_file).ok_or_else(|| (64, format!("{} holds no pid", pid_file.display())))?;
    let pid = Pid::from_raw(i32::try_from(old).unwrap_or(0))
        .ok_or_else(|| (64, format!("{} holds no valid pid", pid_file.display())))?;
    test_kill_process(pid).map_err(|e| (64, format!("process {old} is not running ({e})")))?;
    let status = status_path(pid_file);
    let before = std::fs::read_to_string(&status).unwrap_or_default();
    kill_process(pid, Signal::USR2).map_err(|e| (64, format!("cannot signal {old}: {e}")))?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        let now = std::fs::read_to_string(&status).unwrap_or_default();
        if now == before {
            if test_kill_process(pid).is_err() {
                return Err((
                    1,
                    format!("process {old} exited without reporting an upgrade"),
                ));
            }
            continue;
        }
        // `<millis> <pid> <outcome...>`
        let outcome: String = now.trim().splitn(3, ' ').nth(2).unwrap_or("").to_string();
        if let Some(reason) = outcome.strip_prefix("failed ") {
            return Err((
                1,
                format!("failed: {reason}; process {old} goes on serving"),
            ));
        }
        if let Some(new) = outcome.strip_prefix("ok ") {
            let new: u32 = new.trim().parse().unwrap_or(0);
            wait_for_pid_file(pid_file, new, deadline);
            return Ok(format!(
                "process {new} took over from {old}; {old} exits once its clients have moved"
            ));
        }
    }
    Err((
        1,
        format!("no outcome within {timeout:?} (see process {old}'s log)"),
    ))
}

/// The new process rewrites the pid file right after it is told to go.
/// Gives up quietly at `deadline`: the upgrade itself has already succeeded.
fn wait_for_pid_file(pid_file: &Path, new: u32, deadline: Instant) {
    while Instant::now() < deadline && read_pid(pid_file) != Some(new) {
        std::thread::sleep(Duration::from_millis(20));
    }
}
