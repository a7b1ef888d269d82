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
