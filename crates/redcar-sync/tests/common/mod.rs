//! What the loom tests share.

/// Runs `f` under loom for every interleaving, with at most `LOOM_MAX_PREEMPTIONS` (default 3)
/// forced thread switches per execution: bugs in code this size show within two or three, and
/// an unbounded search of the three-thread tests would take hours.
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}
