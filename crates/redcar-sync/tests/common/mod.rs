//! What the loom tests share.

/// Runs `f` under loom for every interleaving, with at most `LOOM_MAX_PREEMPTIONS` (default 4)
/// forced thread switches per execution: a lost wake-up or a double release here shows within
/// two, and the search grows fast with the bound (the inbox's three-thread tests: about 3 s at
/// 4, 90 s at 8).
pub fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(4);
    }
    builder.check(f);
}
