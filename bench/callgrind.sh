#!/usr/bin/env bash
# Instructions redcar executes per command, counted by callgrind: unlike ops/s, the count does not
# depend on what else the machine is doing, so two builds can be compared on a busy box.
#
#   bench/callgrind.sh BIN [BIN...]
#
# Starts one 3+3 cluster (scripts/cluster.sh), then for each BIN in turn: redcar --workers N
# under `valgrind --tool=callgrind`, a 2,000-request warm-up, and for each scenario (test,
# pipeline depth, requests[, clients, default 10[, keep-alive 1|0, default 1]]) counters zeroed, `redis-benchmark -r 100000`
# run, counters dumped; prints instructions per request (test `mget10` is an MGET of 10 random
# keys, any other name a `redis-benchmark -t` test: `mset` is its MSET of 10 random keys, so
# `mset:1:3000 mget10:1:3000` are the split commands at `-P 1`). Env: CALLGRIND_SCENARIOS (default
# "get:16:20000 set:16:20000 get:1:5000"; `get:1:3000:1` is one client, the steadiest;
# `get:1:3000:10:0` opens a new connection per request, the per-request PHP worker's pattern),
# REDCAR_CONFIG (a config file passed to every BIN), CALLGRIND_WORKERS (default 1: `--workers`;
# 2 is the default threading on a 2-core box), CALLGRIND_KEEP=1 (keep the dumps for
# callgrind_annotate), CALLGRIND_KEYS (default 100000: `-r`, the keys drawn from; 100 with a
# near-cache config admitting `key:` measures hits), CALLGRIND_AUTH (USER:PASSWORD: redis-benchmark
# logs in as that user of REDCAR_CONFIG's `auth.users`, to measure the per-user rules and figures).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
SCENARIOS=${CALLGRIND_SCENARIOS:-"get:16:20000 set:16:20000 get:1:5000"}
[[ $# -ge 1 ]] || { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
LOGIN=()
[[ -n "${CALLGRIND_AUTH:-}" ]] && LOGIN=(--user "${CALLGRIND_AUTH%%:*}" -a "${CALLGRIND_AUTH#*:}")

WORK=$(mktemp -d -t redcar-callgrind-XXXXXX)
REDCAR_PID=
cleanup() {
    [[ -n "$REDCAR_PID" ]] && kill "$REDCAR_PID" 2>/dev/null && wait "$REDCAR_PID" 2>/dev/null
    "$ROOT/scripts/cluster.sh" stop "$WORK/cluster" >/dev/null 2>&1 || true
    if [[ -n "${CALLGRIND_KEEP:-}" ]]; then echo "dumps kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

"$ROOT/scripts/cluster.sh" start "$WORK/cluster" 0 >/dev/null
SEEDS=$(cat "$WORK/cluster/seeds")

for BIN in "$@"; do
    PORT=$(free_port 8000 11000) || die "no free port"
    ADMIN=$(free_port 11000 12000) || die "no free port"
    OUT="$WORK/$(basename "$BIN")-$PORT"
    mkdir -p "$OUT"
    args=(--workers "${CALLGRIND_WORKERS:-1}" --listen "127.0.0.1:$PORT" --admin "127.0.0.1:$ADMIN" --cluster "$SEEDS")
    [[ -n "${REDCAR_CONFIG:-}" ]] && args+=(--config "$REDCAR_CONFIG")
    valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out.%p" \
        "$BIN" "${args[@]}" >"$OUT/log" 2>&1 &
    REDCAR_PID=$!
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$ADMIN/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    redis-benchmark "${LOGIN[@]}" -p "$PORT" -t set,get -c 10 -n 2000 -r "${CALLGRIND_KEYS:-100000}" -q >/dev/null 2>&1
    for scenario in $SCENARIOS; do
        IFS=: read -r test depth requests clients keepalive <<<"$scenario"
        clients=${clients:-10}
        keepalive=${keepalive:-1}
        callgrind_control -z "$REDCAR_PID" >/dev/null 2>&1
        bench_test_args "$test"
        redis-benchmark "${LOGIN[@]}" -p "$PORT" -c "$clients" -P "$depth" -n "$requests" -k "$keepalive" -r "${CALLGRIND_KEYS:-100000}" -q "${WHAT[@]}" >/dev/null 2>&1
        callgrind_control -d "$REDCAR_PID" >/dev/null 2>&1
        sleep 0.5
        dump=$(ls -t "$OUT"/callgrind.out.* | head -1)
        total=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
        echo "$BIN $test -c $clients -P $depth -k $keepalive n=$requests: $((total / requests)) instructions/request"
    done
    kill "$REDCAR_PID" 2>/dev/null || true
    wait "$REDCAR_PID" 2>/dev/null || true
    REDCAR_PID=
done
