#!/usr/bin/env bash
# upstream.flush_interval A/B: redcar with flush_interval 0s, 100us and 500us, interleaved, in
# front of one 3+3 cluster (scripts/cluster.sh). For each run: redis-benchmark's ops/s and p50,
# and node-side reads per command (Δ total_reads_processed / Δ total_commands_processed summed
# over the primaries: Redis counts one read per batch of bytes it gets, so this approximates
# redcar's writes per command). Results: bench/README.md, "Write-coalescing window".
#
# Env: ROUNDS (default 2), REDCAR_BIN (default target/release/redcar).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
ROUNDS=${ROUNDS:-2}
D=$(mktemp -d "${TMPDIR:-/tmp}/redcar-flush.XXXXXX")
REDCAR_PID=""
cleanup() {
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID"
    "$ROOT/scripts/cluster.sh" stop "$D/cluster" >/dev/null 2>&1 || true
    rm -rf "$D"
}
trap cleanup EXIT
"$ROOT/scripts/cluster.sh" start "$D/cluster" 0 >/dev/null
SEEDS=$(cat "$D/cluster/seeds")
PRIMS=()
for p in $(cat "$D/cluster/ports"); do
    redis-cli -p "$p" ROLE | head -1 | grep -q master && PRIMS+=("$p")
done
stat() { # INFO stats field -> sum over the primaries
    local s=0 v p
    for p in "${PRIMS[@]}"; do
        v=$(redis-cli -p "$p" INFO stats | tr -d '\r' | awk -F: -v f="$1" '$1==f{print $2}')
        s=$((s + v))
    done
    echo "$s"
}
for round in $(seq 1 "$ROUNDS"); do
    for keys in "" "-r 100000"; do
        for fi in 0s 100us 500us; do
            printf 'upstream:\n  flush_interval: %s\n' "$fi" >"$D/redcar.yaml"
            PORT=$(free_port 8000 11000) || die "no free port"
            ADMIN=$(free_port 11000 12000) || die "no free port"
            "$BIN" --listen "127.0.0.1:$PORT" --admin "127.0.0.1:$ADMIN" --cluster "$SEEDS" \
                --config "$D/redcar.yaml" --log-level warn >"$D/redcar.log" 2>&1 &
            REDCAR_PID=$!
            for _ in $(seq 100); do http_ok 127.0.0.1 "$ADMIN" /readyz && break; sleep 0.1; done
            # shellcheck disable=SC2086
            redis-benchmark -h 127.0.0.1 -p "$PORT" -t set,get -n 5000 -c 50 -q $keys >/dev/null 2>&1
            r0=$(stat total_reads_processed) c0=$(stat total_commands_processed)
            # shellcheck disable=SC2086
            out=$(redis-benchmark -h 127.0.0.1 -p "$PORT" -t get,set -n 200000 -c 50 -P 1 -q $keys 2>/dev/null |
                tr '\r' '\n' | grep 'requests per second')
            r1=$(stat total_reads_processed) c1=$(stat total_commands_processed)
            echo "round=$round flush_interval=$fi keys=${keys:-fixed} node_reads_per_cmd=$(awk "BEGIN{printf \"%.3f\", ($r1-$r0)/($c1-$c0)}")"
            echo "$out" | sed 's/^/    /'
            stop_pid "$REDCAR_PID"
            REDCAR_PID=""
        done
    done
done
