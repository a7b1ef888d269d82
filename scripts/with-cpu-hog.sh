#!/usr/bin/env bash
# Runs a command on a busy machine: one CPU hog per core (a shell loop at `nice -n 19`, so it
# takes what nothing else wants), started before the command and stopped after it, by PID.
# The suite must pass so (docs/testing.md, "On a busy machine"):
#
#   scripts/with-cpu-hog.sh make test
#   scripts/with-cpu-hog.sh cargo test --test it connections
#
# Env: HOGS (default: the number of cores) hog processes to start.
set -euo pipefail

(($# > 0)) || {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}
HOGS=${HOGS:-$(nproc)}
PIDS=()
stop_hogs() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for ((i = 0; i < HOGS; i++)); do
    nice -n 19 sh -c 'while :; do :; done' &
    PIDS+=($!)
done
printf 'with-cpu-hog: %d hog(s) at nice 19 (pids %s) while running: %s\n' "$HOGS" "${PIDS[*]}" "$*" >&2
"$@"
