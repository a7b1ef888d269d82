#!/usr/bin/env bash
# The test steps of `make test` (after its prerequisites: the ensure-* installers, the format
# check and clippy): every step runs even when an earlier one failed, so one failing test does
# not hide the fuzz step or the soaks. At the end a summary names each step with its result and
# time; the exit status is 1 if any step failed.
#
#   1. cargo test --workspace --all-targets --no-fail-fast   unit, integration and doc tests (~10-25 min)
#   2. scripts/deny.sh                           cargo-deny (deny.toml) when it is installed
#                                                (`make deny` installs it), else a note; seconds
#   3. scripts/fuzz.sh                           the cargo-fuzz targets, 10 s each
#   4. tools/chaos/selftest.py                   the chaos checker's own tests (seconds)
#   5. tools/chaos/soak.py                       a 30 s chaos soak (CHAOS_SECONDS, CHAOS_SEED)
#   6. tools/chaos/soak.py --near-cache          the same soak with the near cache on every key
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

step "cargo test" "$CARGO" test --workspace --all-targets --no-fail-fast
step "cargo deny" scripts/deny.sh
step "fuzz" scripts/fuzz.sh
step "chaos selftest" "$CHAOS_PY" tools/chaos/selftest.py
step "chaos soak" "$CHAOS_PY" tools/chaos/soak.py --seconds "$chaos_seconds" \
    --redcar target/debug/redcar "${seed[@]}"
step "chaos soak, near cache" "$CHAOS_PY" tools/chaos/soak.py --seconds "$chaos_seconds" \
    --near-cache --redcar target/debug/redcar "${seed[@]}"

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
