#!/usr/bin/env bash
# What confirming a replica's "absent" answer with the primary costs (issue 47;
# `router.replica_miss_check`): redcar with `--read-policy prefer-replica` in front of a local 3+3
# cluster, `redis-benchmark` reading random keys of which a share was never written (the miss
# rate), with the check on and off. Per run: the reads, the confirmations redcar sent
# (`redcar_replica_miss_checks_total`) as a share of the reads, the GETs the primaries and the
# replicas served (INFO commandstats), and redis-benchmark's rate and p50. Writes
# bench/RESULTS-replica-miss.md.
#
# Env: MISS_RATES      (default "0 5 20") percent of reads of keys that do not exist
#      MISS_KEYS       (default 100000) keyspace (redis-benchmark -r)
#      MISS_REQUESTS   (default 200000) reads per run
#      MISS_CLIENTS    (default 20) connections, pipeline depth 1
#      MISS_COMMANDS   (default "get lrange") GET of strings, LRANGE 0 9 of lists
#      MISS_OUT        (default bench/RESULTS-replica-miss.md)
#      REDCAR_BIN      (default target/release/redcar)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

RATES=${MISS_RATES:-"0 5 20"}
KEYS=${MISS_KEYS:-100000}
REQUESTS=${MISS_REQUESTS:-200000}
CLIENTS=${MISS_CLIENTS:-20}
COMMANDS=${MISS_COMMANDS:-"get lrange"}
OUT=${MISS_OUT:-$ROOT/bench/RESULTS-replica-miss.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"

TMP=$(mktemp -d -t redcar-replica-miss.XXXXXX)
REDCAR_PID=""
cleanup() {
    local rc=$?
    trap - EXIT
    [[ -n $REDCAR_PID ]] && stop_pid "$REDCAR_PID" redcar
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
PRIMARIES=() REPLICAS=()
while read -r p; do
    if [[ $(redis-cli -p "$p" ROLE | head -n 1) == master ]]; then PRIMARIES+=("$p"); else REPLICAS+=("$p"); fi
done <"$TMP/cluster/ports"
PORT=$(free_port 8000 11000) || die "no free port"
ADMIN=$(free_port 11000 12000) || die "no free port"

start_redcar() { # CHECK (true|false)
    printf 'router:\n  replica_miss_check: %s\n' "$1" >"$TMP/redcar.yaml"
    "$REDCAR_BIN" --listen "127.0.0.1:$PORT" --cluster "$SEEDS" --admin "127.0.0.1:$ADMIN" \
        --read-policy prefer-replica --config "$TMP/redcar.yaml" </dev/null >>"$TMP/redcar.log" 2>&1 &
    REDCAR_PID=$!
    wait_redcar_ready "$REDCAR_PID" "$ADMIN" "$TMP/redcar.log"
    # A map read just after the cluster was created may name no replica yet: wait for all three.
    wait_for 30 "redcar's map to name the replicas" replicas_known
}
replicas_known() {
    (($(http_body 127.0.0.1 "$ADMIN" /topology | grep -o '"replicas":\[{' | wc -l) >= 3))
}
stop_redcar() {
    stop_pid "$REDCAR_PID" redcar
    REDCAR_PID=""
}
metric() { # NAME -> the sum of its series on redcar's /metrics
    http_body 127.0.0.1 "$ADMIN" /metrics 2>/dev/null |
        awk -v n="$1" 'index($0, n) == 1 && (substr($0, length(n) + 1, 1) ~ /[ {]/) { s += $NF } END { printf "%d", s + 0 }'
}
calls() { # COMMAND PORT... -> calls of COMMAND summed over the nodes (INFO commandstats)
    local cmd=$1 p t=0 n
    shift
    for p in "$@"; do
        n=$(redis-cli -p "$p" INFO commandstats | tr -d '\r' |
            awk -F'[:=,]' -v c="cmdstat_$cmd" '$1 == c { print $3 }')
        t=$((t + ${n:-0}))
    done
    echo "$t"
}

# fill COMMAND RATE: every key of the keyspace but RATE % of them (key numbers whose last two
# digits are below RATE), in redis-benchmark's __rand_int__ spelling, written through redcar.
fill() {
    redis-cli -p "$PORT" FLUSHALL >/dev/null
    awk -v n="$KEYS" -v rate="$2" -v cmd="$1" 'BEGIN {
        for (i = 0; i < n; i++) {
            if (i % 100 < rate) continue
            k = sprintf("%s:%012d", cmd, i)
            if (cmd == "get") printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$5\r\nvalue\r\n", length(k), k
            else printf "*5\r\n$5\r\nRPUSH\r\n$%d\r\n%s\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n", length(k), k
        }
    }' | redis-cli -p "$PORT" --pipe >/dev/null
    [[ $(redis-cli -p "$PORT" WAIT 1 10000) == 1 ]] || die "the replicas did not catch up"
}

run() { # COMMAND RATE CHECK -> one result row
    local cmd=$1 rate=$2 check=$3 what c0 p0 r0 out rps p50 checks reads
    if [[ $cmd == get ]]; then what=(GET "get:__rand_int__"); else what=(LRANGE "lrange:__rand_int__" 0 9); fi
    c0=$(metric redcar_replica_miss_checks_total)
    p0=$(calls "$cmd" "${PRIMARIES[@]}")
    r0=$(calls "$cmd" "${REPLICAS[@]}")
    out=$(redis-benchmark -p "$PORT" -c "$CLIENTS" -n "$REQUESTS" -r "$KEYS" -q "${what[@]}" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -n 1)
    rps=$(sed -E 's/.*: ([0-9.]+) requests per second.*/\1/' <<<"$out")
    p50=$(sed -nE 's/.*p50=([0-9.]+) msec.*/\1/p' <<<"$out")
    checks=$(($(metric redcar_replica_miss_checks_total) - c0))
    p0=$(($(calls "$cmd" "${PRIMARIES[@]}") - p0))
    r0=$(($(calls "$cmd" "${REPLICAS[@]}") - r0))
    reads=$REQUESTS
    printf '| %s | %s %% | %s | %s | %s | %s (%s %%) | %s | %s |\n' "${what[0]}" "$rate" "$check" \
        "$reads" "$r0" "$checks" "$(awk -v c="$checks" -v r="$reads" 'BEGIN { printf "%.2f", 100 * c / r }')" \
        "$p0" "$rps / ${p50:-?} ms"
}

ROWS=()
for cmd in $COMMANDS; do
    for rate in $RATES; do
        for check in true false; do
            start_redcar "$check"
            fill "$cmd" "$rate"
            log "$cmd, $rate % misses, check $check"
            ROWS+=("$(run "$cmd" "$rate" "$check")")
            log "  ${ROWS[-1]}"
            stop_redcar
        done
    done
done

{
    echo "# Confirming a replica's \"absent\" with the primary: what it costs"
    echo
    echo "\`bench/replica_miss.sh\` ($(date -u +%Y-%m-%d)): redcar (\`${REDCAR_BIN#"$ROOT"/}\`, $("$REDCAR_BIN" --version 2>/dev/null | head -n 1))"
    echo "with \`--read-policy prefer-replica\` in front of a local 3+3 cluster; redis-benchmark, $CLIENTS clients,"
    echo "$REQUESTS reads of $KEYS random keys per run, of which the miss rate were never written (\`GET\` of"
    echo "strings, \`LRANGE 0 9\` of 3-item lists). *Checks*: \`redcar_replica_miss_checks_total\`, the reads"
    echo "asked again of the primary; *primary reads*: the command's calls on the primaries (INFO"
    echo "commandstats), the checks' second round trips. The rate and p50 move with whatever else runs"
    echo "on the machine (one run each, on and off interleaved): the share of reads is what the check adds."
    echo
    NUTCRACKER=0 NC_NOTE=""
    report_machine | grep -v nutcracker
    echo
    echo "| command | miss rate | check | reads | replica reads | checks (share of reads) | primary reads | rate (req/s) / p50 |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
} >"$OUT"
log "wrote $OUT"
