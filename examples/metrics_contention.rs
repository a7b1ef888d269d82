//! What recording a command's metrics costs when several threads record the same command:
//! straight into the shared series (`Metrics::record_command`) or through a session's
//! `CommandTally` flushed every 16 commands (one `-P 16` batch).
//!
//!     cargo run --release --example metrics_contention

use redcar::metrics::{CommandTally, Metrics};
use std::time::{Duration, Instant};

fn main() {
    let metrics = Metrics::default();
    let n = 5_000_000u64;
    for threads in [1, 2] {
        for mode in ["shared", "tally"] {
            let start = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        let mut tally = CommandTally::new(&metrics);
                        for i in 0..n {
                            // A few distinct latencies, so several buckets are touched.
                            let ns = 80_000 + (i % 7) * 1000;
                            let d = Duration::from_nanos(ns);
                            if mode == "shared" {
                                metrics.record_command("get", d, false);
                            } else {
                                tally.record("get", ns, false);
                                if i % 16 == 15 {
                                    tally.flush();
                                }
                            }
                        }
                    });
                }
            });
            let ns = start.elapsed().as_nanos() as f64 / n as f64;
            println!("{threads} thread(s) {mode}: {ns:.1} ns per command per thread");
        }
    }
}
