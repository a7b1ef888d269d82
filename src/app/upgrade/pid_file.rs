//! `--pid-file FILE`: the serving process's pid, written at start-up and by a new process when
//! it takes over; and beside it, `FILE.upgrade`, one line saying how the last upgrade went
//! (`started`, `ok <new pid>`, `failed <reason>`), which `redcar upgrade` waits on.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The pid file and its upgrade status file.
#[derive(Clone, Debug)]
pub(crate) struct PidFile {
    /// The pid file itself; the status file is derived from it (`status_path`).
    path: PathBuf,
}

impl PidFile {
    /// Touches nothing on disk until a write.
    pub(crate) fn new(path: &Path) -> PidFile {
        PidFile {
            path: path.to_path_buf(),
        }
    }

    /// Writes this process's pid (a whole file, renamed into place, so no reader sees half).
    pub(crate) fn write_own(&self) -> std::io::Result<()> {
        write_atomic(&self.path, &format!("{}\n", std::process::id()))
    }

    /// Removes the file if it still names this process (a new one may have taken it over).
    pub(crate) fn remove_if_own(&self) {
        if read_pid(&self.path) == Some(std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Records how the current upgrade goes (see the module docs).
    /// Each line starts with the time in milliseconds and this pid, so every write differs from the
    /// last even when the outcome is the same; `redcar upgrade` relies on that to see a new
    /// outcome.
    pub(crate) fn status(&self, line: &str) {
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let text = format!("{millis} {} {line}\n", std::process::id());
        if let Err(error) = write_atomic(&status_path(&self.path), &text) {
            tracing::warn!(%error, "cannot write the upgrade status next to the pid file");
        }
    }
}

/// `FILE.upgrade`.
/// The suffix is appended to the whole name (`redcar.pid.upgrade`), never replacing an extension.
pub(super) fn status_path(pid_file: &Path) -> PathBuf {
    let mut name = pid_file.as_os_str().to_os_string();
    name.push(".upgrade");
    PathBuf::from(name)
}

/// The pid in `path`, if it holds one.
/// Used by `redcar upgrade` to find the process, and here so a process never removes another's pid
/// file.
pub(super) fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The temporary name carries the pid, so two processes writing at once never share one.
fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_os_string();
    temp.push(format!(".{}.tmp", std::process::id()));
    std::fs::write(&temp, text)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pid_file_names_this_process_until_another_takes_it() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("redcar.pid");
        let file = PidFile::new(&path);
        file.write_own().expect("write");
        assert_eq!(read_pid(&path), Some(std::process::id()));
        file.status("ok 123");
        let status = std::fs::read_to_string(status_path(&path)).expect("status");
        assert!(status.trim_end().ends_with("ok 123"), "{status}");
        std::fs::write(&path, "1\n").expect("another process took over");
        file.remove_if_own();
        assert_eq!(read_pid(&path), Some(1), "left for its owner");
        file.write_own().expect("write");
        file.remove_if_own();
        assert!(!path.exists());
    }
}
