#!/usr/bin/env bash
# The test steps of `make test` (after its prerequisites: the ensure-* installers, the format
# check and clippy): every step runs even when an earlier one failed, so one failing test does
# not hide the fuzz step or the soaks. At the end a summary names each step with its result and
# time; the exit status is 1 if any step failed.
#
#   1. cargo test --workspace --all-targets --no-fail-fast   unit, integration and doc tests (~10-25 min),
#      --features redcar/toolchain-tests         with the real client libraries, Chromium, promtool
#   2. cargo doc --workspace --no-deps           the API docs with private items, warnings denied
#      --document-private-items                  (RUSTDOCFLAGS="-D warnings"): every intra-doc
#                                                link resolves; under a minute
#   3. scripts/deny.sh --install                 scripts/dependencies.py (reasons, release age),
#                                                then cargo-deny (deny.toml), installed into
#                                                target/tools the first time (~2-3 min, once)
#   4. scripts/fuzz.sh                           the cargo-fuzz targets, 10 s each
#   5. tools/chaos/selftest.py                   the chaos checker's own tests (seconds)
#   6. tools/chaos/soak.py                       a 30 s chaos soak (CHAOS_SECONDS, CHAOS_SEED)
#   7. tools/chaos/soak.py --near-cache          the same soak with the near cache on every key
#   8. cargo test -p redcar-sync with --cfg loom loom's model check of the reply channels
#                                                (crates/redcar-sync/tests/loom_*.rs): every
#                                                interleaving of their threads up to
#                                                LOOM_MAX_PREEMPTIONS (default 4) forced
#                                                switches; ~1-2 min, nearly all of it the build
#                                                (its own target/loom, as every crate is
#                                                compiled with --cfg loom)
#
# CARGO (default cargo) and CHAOS_PY (default python3) come from the Makefile.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

CARGO=${CARGO:-cargo}
CHAOS_PY=${CHAOS_PY:-python3}
chaos_seconds=${CHAOS_SECONDS:-30}
seed=()
[[ -n ${CHAOS_SEED:-} ]] && seed=(--seed "$CHAOS_SEED")

names=()
results=()

# step NAME CMD...: runs CMD, records whether it passed and how long it took.
step() {
    local name=$1 start status
    shift
    printf '\n=== make test: %s: %s\n' "$name" "$*"
    start=$SECONDS
    "$@"
    status=$?
    names+=("$name")
    if ((status == 0)); then
        results+=("ok      $((SECONDS - start)) s")
    else
        results+=("FAILED  $((SECONDS - start)) s (exit $status)")
    fi
}

step "cargo test" "$CARGO" test --workspace --all-targets --features redcar/toolchain-tests --no-fail-fast
step "cargo doc" env RUSTDOCFLAGS="-D warnings" "$CARGO" doc --workspace --no-deps \
    --document-private-items
step "cargo deny" scripts/deny.sh --install
step "fuzz" scripts/fuzz.sh
step "chaos selftest" "$CHAOS_PY" tools/chaos/selftest.py
step "chaos soak" "$CHAOS_PY" tools/chaos/soak.py --seconds "$chaos_seconds" \
    --redcar target/debug/redcar "${seed[@]}"
step "chaos soak, near cache" "$CHAOS_PY" tools/chaos/soak.py --seconds "$chaos_seconds" \
    --near-cache --redcar target/debug/redcar "${seed[@]}"
step "loom" env RUSTFLAGS="--cfg loom" "$CARGO" test -p redcar-sync --release \
    --target-dir target/loom

failed=0
printf '\n=== make test: summary\n'
for i in "${!names[@]}"; do
    printf '  %-24s %s\n' "${names[$i]}" "${results[$i]}"
    [[ ${results[$i]} == ok* ]] || failed=1
done
if ((failed)); then
    echo "make test: FAILED (a failed step's output is above, under its '=== make test: STEP' line)"
    exit 1
fi
echo "make test: all steps passed"
