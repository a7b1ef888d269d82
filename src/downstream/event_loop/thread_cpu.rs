//! A loop thread's CPU time, for the worker's busy share (`placement`).

/// The CPU time of the thread that made it, from `/proc/thread-self/schedstat` (its first
/// field: nanoseconds spent running), read again through the file kept open: one `pread` per
/// reading, and no clock of the vDSO (which valgrind, used by `bench/callgrind.sh`, cannot run
/// through rustix). `None` where the file is missing: the loop then reports no busy time.
pub(super) struct ThreadCpu(Option<std::fs::File>);

impl ThreadCpu {
    pub(super) fn of_this_thread() -> ThreadCpu {
        ThreadCpu(std::fs::File::open("/proc/thread-self/schedstat").ok())
    }

    pub(super) fn used(&self) -> Option<std::time::Duration> {
        use std::os::unix::fs::FileExt;
        let mut text = [0u8; 96];
        let n = self.0.as_ref()?.read_at(&mut text, 0).ok()?;
        let first = text[..n].split(|b| b.is_ascii_whitespace()).next()?;
        let nanos = std::str::from_utf8(first).ok()?.parse().ok()?;
        Some(std::time::Duration::from_nanos(nanos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_time_grows_while_the_thread_works() {
        let cpu = ThreadCpu::of_this_thread();
        let Some(before) = cpu.used() else {
            return; // no schedstat on this kernel: nothing to read
        };
        let mut x = 0u64;
        let spin = std::time::Instant::now();
        while spin.elapsed() < std::time::Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let after = cpu.used().expect("read again");
        assert!(after > before, "{before:?} -> {after:?}");
    }
}
