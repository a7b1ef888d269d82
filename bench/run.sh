#!/usr/bin/env bash
# redcar benchmark: redis-benchmark SET/GET against
#   (a) a standalone redis-server,
#   (b) a 3+3 Redis Cluster directly (redis-benchmark --cluster),
#   (c) redcar in front of that same cluster,
# with pipeline depth 1 and 16; then MSET and MGET of 10 keys spread over all slots against
# (a) and (c) only (a cluster-aware client cannot send a cross-slot MSET/MGET at all);
# then writes bench/RESULTS.md.
#
# Env: BENCH_REQUESTS (default 200000) requests per test
#      BENCH_CLIENTS  (default 50)     parallel connections
#      BENCH_SCENARIOS (default "50:1 50:16 1:1") CLIENTS:PIPELINE pairs; 1:1 shows the
#                      unloaded cost of the extra hop (no CPU contention, no queueing)
#      BENCH_KEYSPACE (default 100000) -r: random keys, so traffic spreads over all slots
#      BENCH_MULTI_REQUESTS (default BENCH_REQUESTS/4) requests per MSET/MGET test; 0 skips them
#      BENCH_OUT      (default bench/RESULTS.md)
#      REDCAR_BIN     (default target/release/redcar; `make bench` builds it)
#      BENCH_RUN_TIMEOUT (default 120) seconds before one redis-benchmark run is killed
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

REQUESTS=${BENCH_REQUESTS:-200000}
CLIENTS=${BENCH_CLIENTS:-50}
SCENARIOS=${BENCH_SCENARIOS:-$CLIENTS:1 $CLIENTS:16 1:1}
KEYSPACE=${BENCH_KEYSPACE:-100000}
MULTI_REQUESTS=${BENCH_MULTI_REQUESTS:-$((REQUESTS / 4))}
OUT=${BENCH_OUT:-$ROOT/bench/RESULTS.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-120} # seconds per redis-benchmark run

for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"
[[ "$REQUESTS" =~ ^[0-9]+$ ]] || die "BENCH_REQUESTS must be a number"
[[ "$MULTI_REQUESTS" =~ ^[0-9]+$ ]] || die "BENCH_MULTI_REQUESTS must be a number"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-bench.XXXXXX")
STANDALONE_PID=""
REDCAR_PID=""
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID"
    [[ -n "$STANDALONE_PID" ]] && stop_pid "$STANDALONE_PID" redis-server
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    ((rc == 0)) || printf 'bench failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- setup
log "starting standalone redis-server"
STANDALONE_PORT=$(free_port 20000 32000) || die "no free port"
mkdir -p "$TMP/standalone"
redis-server --port "$STANDALONE_PORT" --bind 127.0.0.1 --protected-mode no \
    --save "" --appendonly no --daemonize no \
    --dir "$TMP/standalone" --logfile "$TMP/standalone/redis.log" </dev/null >/dev/null 2>&1 &
STANDALONE_PID=$!
wait_for 10 "standalone redis-server" redis-cli -p "$STANDALONE_PORT" PING

log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
CLUSTER_PORT=$(head -n 1 "$TMP/cluster/ports")

log "starting redcar"
REDCAR_PORT=$(free_port 8000 11000) || die "no free port" # below the ephemeral range
ADMIN_PORT=$(free_port 11000 12000) || die "no free port"
REDCAR_CMD=("$REDCAR_BIN" --listen "127.0.0.1:$REDCAR_PORT" --cluster "$SEEDS" --admin "127.0.0.1:$ADMIN_PORT")
"${REDCAR_CMD[@]}" </dev/null >"$TMP/redcar.log" 2>&1 &
REDCAR_PID=$!
wait_redcar_ready "$REDCAR_PID" "$ADMIN_PORT" "$TMP/redcar.log"

TIMEOUT=()
command -v timeout >/dev/null && TIMEOUT=(timeout "$RUN_TIMEOUT")

# Warm up redcar's upstream connections (not measured).
"${TIMEOUT[@]}" redis-benchmark -h 127.0.0.1 -p "$REDCAR_PORT" -t set,get -n 5000 -c "$CLIENTS" \
    -r "$KEYSPACE" -q >/dev/null 2>&1 || log "warning: warm-up through redcar failed"

# ---------------------------------------------------------------- runs
declare -A CMDS
target_args() { # TARGET -> redis-benchmark connection args
    case $1 in
    standalone) echo "-h 127.0.0.1 -p $STANDALONE_PORT" ;;
    cluster) echo "--cluster -h 127.0.0.1 -p $CLUSTER_PORT" ;;
    redcar) echo "-h 127.0.0.1 -p $REDCAR_PORT" ;;
    esac
}
TARGETS=(standalone cluster redcar)
for p in $SCENARIOS; do
    for t in "${TARGETS[@]}"; do
        # shellcheck disable=SC2207
        args=($(target_args "$t"))
        clients=${p%%:*}
        n=$REQUESTS
        ((clients > 1)) || n=$((REQUESTS / 10)) # one client is slow; latency needs fewer samples
        cmd=(redis-benchmark "${args[@]}" -t set,get -c "$clients" -n "$n" -r "$KEYSPACE" -P "${p##*:}" --csv)
        CMDS[$t-$p]="${cmd[*]}"
        log "P=$p $t: ${cmd[*]}"
        start=$SECONDS
        if ! "${TIMEOUT[@]}" "${cmd[@]}" >"$TMP/$t-$p.csv" 2>"$TMP/$t-$p.err"; then
            tail -n 20 "$TMP/$t-$p.err" >&2
            die "redis-benchmark against $t (P=$p) failed"
        fi
        log "  done in $((SECONDS - start)) s: $(grep -E '^"(SET|GET)"' "$TMP/$t-$p.csv" | cut -d, -f1,2 | tr '\n' ' ')"
    done
done

# Multi-key: 10 keys per command, each `key:__rand_int__` drawn separately, so they land in
# different slots. `-t mset` sends `MSET key:__rand_int__ <value>` x10 (with --cluster it would put
# all ten under one {hash tag}: a different workload), MGET is a custom command line.
MULTI_TESTS=(mset mget)
MULTI_TARGETS=(standalone redcar)
MGET_ARGS=(MGET)
for _ in 1 2 3 4 5 6 7 8 9 10; do MGET_ARGS+=("key:__rand_int__"); done
if ((MULTI_REQUESTS > 0)); then
    for p in $SCENARIOS; do
        for t in "${MULTI_TARGETS[@]}"; do
            for test in "${MULTI_TESTS[@]}"; do
                # shellcheck disable=SC2207
                args=($(target_args "$t"))
                clients=${p%%:*}
                n=$MULTI_REQUESTS
                ((clients > 1)) || n=$((MULTI_REQUESTS / 10))
                cmd=(redis-benchmark "${args[@]}" -c "$clients" -n "$n" -r "$KEYSPACE" -P "${p##*:}" --csv)
                if [[ $test == mset ]]; then cmd+=(-t mset); else cmd+=("${MGET_ARGS[@]}"); fi
                CMDS[$t-$p-$test]="${cmd[*]}"
                log "P=$p $t $test: ${cmd[*]}"
                start=$SECONDS
                if ! "${TIMEOUT[@]}" "${cmd[@]}" >"$TMP/$t-$p-$test.csv" 2>"$TMP/$t-$p-$test.err"; then
                    tail -n 20 "$TMP/$t-$p-$test.err" >&2
                    die "redis-benchmark $test against $t (P=$p) failed"
                fi
                log "  done in $((SECONDS - start)) s: $(sed -n 2p "$TMP/$t-$p-$test.csv" | cut -d, -f2)"
            done
        done
    done
fi

# field TARGET P TEST NAME -> value from the CSV (rps, p50, p99)
field() {
    local col
    case $4 in rps) col=2 ;; p50) col=5 ;; p99) col=7 ;; esac
    awk -F'","' -v t="\"$3" -v c="$col" '$1 == t { gsub(/"/, "", $c); print $c; exit }' "$TMP/$1-$2.csv"
}
# mfield TARGET P TEST NAME -> value from a multi-key CSV (its one data row)
mfield() {
    local col
    case $4 in rps) col=2 ;; p50) col=5 ;; p99) col=7 ;; esac
    awk -F'","' -v c="$col" 'NR == 2 { gsub(/"/, "", $c); print $c; exit }' "$TMP/$1-$2-$3.csv"
}
calc() { awk "BEGIN { printf \"$1\", $2 }" 2>/dev/null || echo "n/a"; }

# ---------------------------------------------------------------- report
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
REPORT="$TMP/RESULTS.md"
{
    echo "# redcar benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "- machine: $(nproc) CPUs, ${CPU:-unknown CPU}, $(uname -sr)"
    echo "- redis: $(redis-server --version | sed 's/ sha=.*//')"
    echo "- redcar: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) ($REDCAR_BIN)"
    echo "- workload: SET and GET, $REQUESTS requests per test ($((REQUESTS / 10)) with one client), keyspace $KEYSPACE (-r), scenarios (clients:pipeline): $SCENARIOS"
    ((MULTI_REQUESTS == 0)) || echo "- multi-key workload: MSET and MGET of 10 random keys, $MULTI_REQUESTS requests per test ($((MULTI_REQUESTS / 10)) with one client), standalone and redcar only"
    echo "- note: benchmark client, all redis-server processes and redcar share the same $(nproc) CPUs"
    echo
    echo "## Setup"
    echo
    echo '```'
    echo "standalone: redis-server --port $STANDALONE_PORT --save \"\" --appendonly no"
    echo "cluster:    scripts/cluster.sh start DIR  (3 primaries + 3 replicas, node timeout 2000 ms): $SEEDS"
    echo "redcar:     ${REDCAR_CMD[*]}"
    echo '```'
    echo
    echo "## Commands"
    echo
    echo '```'
    for p in $SCENARIOS; do for t in "${TARGETS[@]}"; do echo "${CMDS[$t-$p]}"; done; done
    if ((MULTI_REQUESTS > 0)); then
        for p in $SCENARIOS; do
            for t in "${MULTI_TARGETS[@]}"; do
                for test in "${MULTI_TESTS[@]}"; do echo "${CMDS[$t-$p-$test]}"; done
            done
        done
    fi
    echo '```'
    echo
    echo "## Results"
    echo
    echo "| clients:pipeline | test | target | ops/s | p50 ms | p99 ms |"
    echo "|---:|---|---|---:|---:|---:|"
    for p in $SCENARIOS; do
        for test in SET GET; do
            for t in "${TARGETS[@]}"; do
                label=$t
                [[ $t == cluster ]] && label="cluster (direct, --cluster)"
                echo "| $p | $test | $label | $(field "$t" "$p" "$test" rps) | $(field "$t" "$p" "$test" p50) | $(field "$t" "$p" "$test" p99) |"
            done
        done
    done
    echo
    echo "## redcar relative to the alternatives"
    echo
    echo "| clients:pipeline | test | ops/s redcar / direct cluster | ops/s redcar / standalone | p50 added over direct cluster (µs) | p99 added over direct cluster (µs) |"
    echo "|---:|---|---:|---:|---:|---:|"
    for p in $SCENARIOS; do
        for test in SET GET; do
            r=$(field redcar "$p" "$test" rps)
            c=$(field cluster "$p" "$test" rps)
            s=$(field standalone "$p" "$test" rps)
            r50=$(field redcar "$p" "$test" p50)
            c50=$(field cluster "$p" "$test" p50)
            r99=$(field redcar "$p" "$test" p99)
            c99=$(field cluster "$p" "$test" p99)
            echo "| $p | $test | $(calc '%.2f' "${r:-0} / ${c:-1}") | $(calc '%.2f' "${r:-0} / ${s:-1}") | $(calc '%+.0f' "(${r50:-0} - ${c50:-0}) * 1000") | $(calc '%+.0f' "(${r99:-0} - ${c99:-0}) * 1000") |"
        done
    done
    echo
    if ((MULTI_REQUESTS > 0)); then
        echo "## Multi-key commands: 10 keys over all slots"
        echo
        echo "MSET and MGET of 10 random keys each. A cluster-aware client cannot send these to a cluster"
        echo "at all (the keys are in different slots: \`-CROSSSLOT\`), so redcar is compared with one"
        echo "standalone redis-server. Through redcar each command becomes up to 10 per-slot commands on"
        echo "the 3 primaries, sent in parallel and merged in key order."
        echo
        echo "| clients:pipeline | test | target | ops/s | p50 ms | p99 ms | ops/s redcar / standalone |"
        echo "|---:|---|---|---:|---:|---:|---:|"
        for p in $SCENARIOS; do
            for test in "${MULTI_TESTS[@]}"; do
                s=$(mfield standalone "$p" "$test" rps)
                r=$(mfield redcar "$p" "$test" rps)
                label="${test^^} (10 keys)"
                echo "| $p | $label | standalone | $s | $(mfield standalone "$p" "$test" p50) | $(mfield standalone "$p" "$test" p99) | |"
                echo "| $p | $label | redcar | $r | $(mfield redcar "$p" "$test" p50) | $(mfield redcar "$p" "$test" p99) | $(calc '%.2f' "${r:-0} / ${s:-1}") |"
            done
        done
        echo
    fi
    echo "## Raw CSV (redis-benchmark --csv)"
    echo
    for p in $SCENARIOS; do
        for t in "${TARGETS[@]}"; do
            echo "### $t, clients:pipeline $p"
            echo
            echo '```'
            grep -E '^"' "$TMP/$t-$p.csv" || true
            if ((MULTI_REQUESTS > 0)) && [[ $t != cluster ]]; then
                for test in "${MULTI_TESTS[@]}"; do grep -E '^"[^t]' "$TMP/$t-$p-$test.csv" || true; done
            fi
            echo '```'
            echo
        done
    done
} >"$REPORT"
cp "$REPORT" "$OUT"
log "wrote $OUT"
sed -n '/^## Results/,/^## Raw/p' "$OUT" | sed '$d'
