#!/usr/bin/env bash
# Instructions per command through redcar, counted by callgrind (independent of machine load),
# for two builds against one local cluster: the method of bench/README.md ("Resilience features
# on the hot path").
#
#   bench/callgrind_ab.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#
# Each run: redcar --workers 1 under valgrind, 2,000 warm-up requests, counters zeroed, then
# `redis-benchmark -c 10 -r 100000 -n N -t TEST -P DEPTH`; prints Ir / N per binary and test.
# Needs valgrind, redis-server, redis-cli, redis-benchmark. Everything runs on 127.0.0.1 and
# is stopped (by PID) on exit.
set -euo pipefail

BEFORE=$1
AFTER=$2
ROUNDS=${3:-1}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$(mktemp -d /tmp/redcar-callgrind.XXXXXX)
REDCAR_PID=

cleanup() {
    if [[ -n "$REDCAR_PID" ]]; then kill "$REDCAR_PID" 2>/dev/null || true; fi
    CLUSTER_REPLICAS=0 "$ROOT/scripts/cluster.sh" stop "$WORK/cluster" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

CLUSTER_REPLICAS=0 "$ROOT/scripts/cluster.sh" start "$WORK/cluster" 0 >/dev/null
SEEDS=$(cat "$WORK/cluster/seeds")

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# run BIN TEST DEPTH N -> instructions per command
run() {
    local bin=$1 test=$2 depth=$3 n=$4 port admin out
    port=$(free_port)
    admin=$(free_port)
    out="$WORK/callgrind.out"
    rm -f "$out"*
    valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" --workers 1 --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" \
        --cluster "$SEEDS" >"$WORK/redcar.log" 2>&1 &
    REDCAR_PID=$!
    for _ in $(seq 300); do
        curl -sf "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-benchmark -h 127.0.0.1 -p "$port" -c 10 -r 100000 -n 2000 -t "$test" -q >/dev/null
    callgrind_control -z "$REDCAR_PID" >/dev/null
    redis-benchmark -h 127.0.0.1 -p "$port" -c 10 -r 100000 -n "$n" -t "$test" -P "$depth" -q >/dev/null
    callgrind_control -d "$REDCAR_PID" >/dev/null
    kill "$REDCAR_PID"
    wait "$REDCAR_PID" 2>/dev/null || true
    REDCAR_PID=
    # The dump made right after the benchmark (the zeroed counters plus the run).
    local dump
    dump=$(ls "$out".* 2>/dev/null | head -1)
    local ir
    ir=$(grep -m1 '^summary:' "$dump" | awk '{print $2}')
    echo $((ir / n))
}

printf '%-22s %10s %10s\n' test before after
for _ in $(seq "$ROUNDS"); do
    for spec in "get 16 20000" "set 16 20000" "get 1 5000"; do
        read -r test depth n <<<"$spec"
        b=$(run "$BEFORE" "$test" "$depth" "$n")
        a=$(run "$AFTER" "$test" "$depth" "$n")
        printf '%-22s %10s %10s\n' "${test^^} -P $depth, N=$n" "$b" "$a"
    done
done
