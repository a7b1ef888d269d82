#!/usr/bin/env bash
# The near cache (issue 27; `make bench-nearcache`, and the last scenario of `make bench`): redcar
# in front of a local 3+3 Redis Cluster with its near cache off and on, under a mixed workload
# redis-benchmark cannot produce (bench/mixload: 50 clients, pipeline depth 1, 90 % GET / 10 % SET
# over 100 hot keys `hot:0..hot:99`), in interleaved rounds (off/on, then on/off, ...), a fresh
# redcar per run. Per run: ops/s, p50/p99/max latency, the commands the primaries processed
# (INFO stats total_commands_processed, summed over the primaries, before/after) per client
# command, the CPU of the six nodes and of redcar (/proc/PID/stat utime + stime) per million
# client commands, and redcar's near-cache hit ratio (/metrics). Then the staleness probe
# (`mixload --staleness`) against each: a writer straight on the key's primary, a reader through
# redcar; visibility latency p50/p99/max and stale reads after the bound (max_silence + 5 ms).
# Judges "≥ 2× throughput and ≥ 90 % fewer commands at the nodes" (on vs off), the bound, and
# writes bench/RESULTS-nearcache.md.
#
# When the redcar binary does not accept the `near_cache` section (the cache has not landed),
# only the "off" runs happen and the report says so; the script still succeeds.
#
# Env: NEARCACHE_SECONDS   (default 10) seconds per measured run
#      NEARCACHE_WARMUP    (default 1) seconds of unmeasured load on each fresh redcar first
#      NEARCACHE_ROUNDS    (default 3) rounds of every mode (off, on, and on-nowt: the cache
#                          on with write_through false), interleaved; rows report the median round
#      NEARCACHE_NOWT      (default 1) 0 skips the on-nowt mode
#      NEARCACHE_CLIENTS   (default 50) connections, pipeline depth 1
#      NEARCACHE_KEYS      (default 100) hot keys hot:0 .. hot:(N-1)
#      NEARCACHE_READ_RATIO (default 0.9) share of GETs (the rest SET)
#      NEARCACHE_VALUE_SIZE (default 32) bytes per SET value
#      NEARCACHE_THREADS   (default 1) mixload threads (one, like redis-benchmark)
#      NEARCACHE_WRITES    (default 2000) writes of the staleness probe; 0 skips it
#      NEARCACHE_MAX_SILENCE_MS (default 200) near_cache.max_silence; the probe's bound is this + 5
#      NEARCACHE_DIRECT    (default 1) also run the workload straight against one standalone
#                          redis-server in every round: the most any server answering from
#                          memory gets on this box, the ceiling of "on / off" here (skipped when
#                          NEARCACHE_DELAY_US is set)
#      NEARCACHE_DELAY_US  (default 0) > 0 puts the simulated data-centre network (bench/relay,
#                          this one-way delay) between redcar and the cluster, as in production
#      NEARCACHE_OUT       (default bench/RESULTS-nearcache.md)
#      REDCAR_BIN          (default target/release/redcar; `make bench-nearcache` builds it)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

SECS=${NEARCACHE_SECONDS:-10}
WARMUP=${NEARCACHE_WARMUP:-1}
ROUNDS=${NEARCACHE_ROUNDS:-3}
CLIENTS=${NEARCACHE_CLIENTS:-50}
KEYS=${NEARCACHE_KEYS:-100}
READ_RATIO=${NEARCACHE_READ_RATIO:-0.9}
VALUE_SIZE=${NEARCACHE_VALUE_SIZE:-32}
THREADS=${NEARCACHE_THREADS:-1}
WRITES=${NEARCACHE_WRITES:-2000}
MAX_SILENCE_MS=${NEARCACHE_MAX_SILENCE_MS:-200}
DELAY_US=${NEARCACHE_DELAY_US:-0}
DIRECT=${NEARCACHE_DIRECT:-1}
OUT=${NEARCACHE_OUT:-$ROOT/bench/RESULTS-nearcache.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
CLK_TCK=$(getconf CLK_TCK)
BOUND_MS=$((MAX_SILENCE_MS + 5))
# The targets of issue 27 (on / off).
TARGET_THROUGHPUT=2.0 # ≥ 2× throughput
TARGET_FEWER=0.90     # ≥ 90 % fewer commands at the nodes
TARGET_VIS_P99_MS=5   # staleness probe: p99 ≤ 5 ms; max ≤ the bound; no stale read after it

for tool in redis-server redis-cli cargo; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"
for v in SECS WARMUP ROUNDS CLIENTS KEYS VALUE_SIZE THREADS WRITES MAX_SILENCE_MS DELAY_US DIRECT; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "NEARCACHE_$v must be a whole number"
done
((ROUNDS >= 1 && SECS >= 1 && CLIENTS >= 1 && KEYS >= 1)) || die "NEARCACHE_ROUNDS, _SECONDS, _CLIENTS and _KEYS must be at least 1"

log "building the load generator (bench/mixload)"
CARGO_TARGET_DIR="$ROOT/target/mixload" cargo build --release --quiet \
    --manifest-path "$ROOT/bench/mixload/Cargo.toml" || die "building bench/mixload failed"
MIXLOAD=$ROOT/target/mixload/release/mixload
((DELAY_US == 0)) || DIRECT=0
if ((DELAY_US > 0)); then
    # shellcheck source=bench/relayed_cluster.sh
    source "$ROOT/bench/relayed_cluster.sh"
    log "building the latency relay (bench/relay)"
    RELAY=$(relay_build "$ROOT")
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-nearcache.XXXXXX")
mkdir -p "$TMP/runs"
REDCAR_PID=""
RELAY_PID=""
DIRECT_PID=""
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n $REDCAR_PID ]] && stop_pid "$REDCAR_PID" redcar
    [[ -n $RELAY_PID ]] && stop_pid "$RELAY_PID" relay
    [[ -n $DIRECT_PID ]] && stop_pid "$DIRECT_PID" redis-server
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    ((rc == 0)) || printf 'bench/nearcache.sh failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
START=$SECONDS

# ---------------------------------------------------------------- configs
cat >"$TMP/on.yaml" <<EOF
near_cache:
  enabled: true
  max_bytes: 64mb
  max_ttl: 30s
  max_silence: ${MAX_SILENCE_MS}ms
  keys:
    - prefix: "hot:"
EOF
CACHE=1
CACHE_NOTE=""
if ! "$REDCAR_BIN" --listen 127.0.0.1:1 --cluster 127.0.0.1:7000 --config "$TMP/on.yaml" --check-config \
    >"$TMP/check.out" 2>&1; then
    CACHE=0
    CACHE_NOTE="this redcar does not accept the near_cache section ($(head -n 1 "$TMP/check.out" | sed 's/, expected one of.*//; s/ \/[^ ]*on\.yaml//' | cut -c1-200)): the near cache is not in this build, so only the \"off\" runs were made"
    log "near cache unavailable: $CACHE_NOTE"
    printf '# near cache off (this redcar has no near_cache section)\n{}\n' >"$TMP/off.yaml"
else
    printf 'near_cache:\n  enabled: false\n' >"$TMP/off.yaml"
fi
MODES=(off)
((CACHE == 0)) || MODES+=(on)
# The cache on without write-through (a SET drops its key; the next read fills it again), to
# show what write-through adds; skipped for a redcar without the setting or NEARCACHE_NOWT=0.
sed 's/^  keys:/  write_through: false\n  keys:/' "$TMP/on.yaml" >"$TMP/on-nowt.yaml"
if ((CACHE == 1)) && [[ "${NEARCACHE_NOWT:-1}" != 0 ]] &&
    "$REDCAR_BIN" --listen 127.0.0.1:1 --cluster 127.0.0.1:7000 --config "$TMP/on-nowt.yaml" \
        --check-config >/dev/null 2>&1; then
    MODES+=(on-nowt)
fi

# ---------------------------------------------------------------- cluster
log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
NODE_PIDS=()
for f in "$TMP"/cluster/node-*/pid; do NODE_PIDS+=("$(cat "$f")"); done
PRIMARY_PORTS=()
while read -r p; do
    [[ $(redis-cli -p "$p" ROLE | head -n 1) == master ]] && PRIMARY_PORTS+=("$p")
done <"$TMP/cluster/ports"
((${#PRIMARY_PORTS[@]} == 3)) || die "expected 3 primaries, found ${#PRIMARY_PORTS[@]}"
FIRST_NODE=$(head -n 1 "$TMP/cluster/ports")
NETWORK="loopback"
if ((DELAY_US > 0)); then
    mapfile -t NODE_PORTS <"$TMP/cluster/ports"
    relay_cluster "$RELAY" "$DELAY_US" "$TMP/relay.log" "${NODE_PORTS[@]}"
    SEEDS=$RELAY_SEEDS
    NETWORK="the simulated data-centre network: bench/relay --delay-us $DELAY_US in front of every node (a round trip costs $((2 * DELAY_US)) µs more), the nodes announcing the relay's ports"
    log "redcar reaches the cluster through the relay ($DELAY_US µs one way): $SEEDS"
fi
if ((DIRECT == 1)); then
    DIRECT_PORT=$(free_port 12000 20000) || die "no free port"
    mkdir -p "$TMP/direct"
    DIRECT_CMD="redis-server --port $DIRECT_PORT --bind 127.0.0.1 --save '' --appendonly no"
    redis-server --port "$DIRECT_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$TMP/direct" \
        </dev/null >"$TMP/direct/log" 2>&1 &
    DIRECT_PID=$!
    wait_for 10 "the standalone redis-server" port_in_use "$DIRECT_PORT" || die "redis-server did not start"
fi

REDCAR_PORT=$(free_port 8000 11000) || die "no free port"
ADMIN_PORT=$(free_port 11000 12000) || die "no free port"
declare -A REDCAR_CMDS
start_redcar() { # MODE
    local cmd=("$REDCAR_BIN" --listen "127.0.0.1:$REDCAR_PORT" --cluster "$SEEDS" --admin "127.0.0.1:$ADMIN_PORT"
        --config "$TMP/$1.yaml")
    REDCAR_CMDS[$1]="${cmd[*]}"
    "${cmd[@]}" </dev/null >>"$TMP/redcar-$1.log" 2>&1 &
    REDCAR_PID=$!
    wait_redcar_ready "$REDCAR_PID" "$ADMIN_PORT" "$TMP/redcar-$1.log"
}
stop_redcar() {
    stop_pid "$REDCAR_PID" redcar
    REDCAR_PID=""
}

# ---------------------------------------------------------------- measuring
commands_at_primaries() { # [PORT...] -> total_commands_processed summed (default: the primaries)
    local p t=0 n ports=("$@")
    ((${#ports[@]} > 0)) || ports=("${PRIMARY_PORTS[@]}")
    for p in "${ports[@]}"; do
        n=$(redis-cli -p "$p" INFO stats | tr -d '\r' | awk -F: '$1 == "total_commands_processed" { print $2 }')
        t=$((t + ${n:-0}))
    done
    echo "$t"
}
metric() { # NAME -> the sum of its series on redcar's /metrics (0 when it is not there)
    http_body 127.0.0.1 "$ADMIN_PORT" /metrics 2>/dev/null |
        awk -v n="$1" 'index($0, n) == 1 && (substr($0, length(n) + 1, 1) ~ /[ {]/) { s += $NF } END { printf "%d", s + 0 }'
}
result_field() { # FILE KEY -> from mixload's RESULT line
    awk -v k="$2" '$1 == "RESULT" { for (i = 2; i <= NF; i++) { split($i, kv, "="); if (kv[1] == k) print kv[2] } }' "$1"
}
LOAD_ARGS=(--clients "$CLIENTS" --keys "$KEYS" --prefix hot: --read-ratio "$READ_RATIO" --value-size "$VALUE_SIZE" --threads "$THREADS")

# run_load KEY PORT ROUND: the measured mixload run against 127.0.0.1:PORT into $TMP/runs/KEY.out.
run_load() {
    "$MIXLOAD" --addr "127.0.0.1:$2" "${LOAD_ARGS[@]}" --seconds "$SECS" --no-populate --seed "$3" \
        >"$TMP/runs/$1.out" 2>&1 || {
        cat "$TMP/runs/$1.out" >&2
        die "mixload failed ($1)"
    }
}
# record KEY COMMANDS NODE_TICKS REDCAR_TICKS HITS MISSES: the run's data line, from its output
# and these differences (ops ops_per_sec p50 p99 max errors commands node_ticks redcar_ticks
# hits misses).
record() {
    local f=$TMP/runs/$1.out
    echo "$(result_field "$f" ops) $(result_field "$f" ops_per_sec) $(result_field "$f" p50_ms)" \
        "$(result_field "$f" p99_ms) $(result_field "$f" max_ms) $(result_field "$f" errors)" \
        "$2 $3 $4 $5 $6" >"$TMP/runs/$1.data"
    log "  $1: $(grep -v '^RESULT\|^mixload:' "$f")"
}

# measure MODE ROUND: one measured run on a fresh redcar; writes $TMP/runs/MODE.rROUND.{out,data}.
measure() {
    local mode=$1 r=$2 key=$1.r$2 c0 n0 p0 h0 m0
    start_redcar "$mode"
    "$MIXLOAD" --addr "127.0.0.1:$REDCAR_PORT" "${LOAD_ARGS[@]}" --seconds "$WARMUP" >/dev/null ||
        log "warning: warm-up through redcar ($mode) failed"
    h0=$(metric redcar_near_cache_hits_total)
    m0=$(metric redcar_near_cache_misses_total)
    c0=$(commands_at_primaries)
    n0=$(cpu_ticks "${NODE_PIDS[@]}")
    p0=$(cpu_ticks "$REDCAR_PID")
    run_load "$key" "$REDCAR_PORT" "$r"
    # CPU first: the INFO and /metrics reads after it cost the nodes and redcar a little.
    n0=$(($(cpu_ticks "${NODE_PIDS[@]}") - n0))
    p0=$(($(cpu_ticks "$REDCAR_PID") - p0))
    c0=$(($(commands_at_primaries) - c0))
    record "$key" "$c0" "$n0" "$p0" $(($(metric redcar_near_cache_hits_total) - h0)) \
        $(($(metric redcar_near_cache_misses_total) - m0))
    stop_redcar
}

# measure_direct ROUND: the same load straight on the standalone redis-server (no redcar, no
# cluster): the data line's "nodes" CPU is that server's.
measure_direct() {
    local r=$1 key=direct.r$1 c0 n0
    "$MIXLOAD" --addr "127.0.0.1:$DIRECT_PORT" "${LOAD_ARGS[@]}" --seconds "$WARMUP" >/dev/null ||
        log "warning: warm-up (direct) failed"
    c0=$(commands_at_primaries "$DIRECT_PORT")
    n0=$(cpu_ticks "$DIRECT_PID")
    run_load "$key" "$DIRECT_PORT" "$r"
    n0=$(($(cpu_ticks "$DIRECT_PID") - n0))
    record "$key" $(($(commands_at_primaries "$DIRECT_PORT") - c0)) "$n0" 0 0 0
}

log "workload: $CLIENTS clients, -P 1, $SECS s per run, $ROUNDS round(s), modes: ${MODES[*]}$( ((DIRECT == 0)) || echo ", and direct")"
for ((r = 1; r <= ROUNDS; r++)); do
    order=("${MODES[@]}")
    if ((r % 2 == 0)); then # every other round in reverse
        order=()
        for ((i = ${#MODES[@]} - 1; i >= 0; i--)); do order+=("${MODES[i]}"); done
    fi
    ((DIRECT == 0)) || measure_direct "$r"
    for mode in "${order[@]}"; do measure "$mode" "$r"; done
done

# The staleness probe against each mode: a writer straight on the key's primary, a reader
# through redcar.
STALE_CMD=""
if ((WRITES > 0)); then
    for mode in "${MODES[@]}"; do
        start_redcar "$mode"
        h0=$(metric redcar_near_cache_hits_total)
        STALE_CMD="mixload --staleness --addr 127.0.0.1:REDCAR --node 127.0.0.1:$FIRST_NODE --key hot:staleness --writes $WRITES --bound-ms $BOUND_MS"
        log "staleness probe ($mode): $STALE_CMD"
        "$MIXLOAD" --staleness --addr "127.0.0.1:$REDCAR_PORT" --node "127.0.0.1:$FIRST_NODE" --key hot:staleness \
            --writes "$WRITES" --bound-ms "$BOUND_MS" >"$TMP/runs/stale.$mode.out" 2>&1 || {
            cat "$TMP/runs/stale.$mode.out" >&2
            die "mixload --staleness failed ($mode)"
        }
        echo "$(($(metric redcar_near_cache_hits_total) - h0))" >"$TMP/runs/stale.$mode.hits"
        log "  $(grep -v '^RESULT\|^mixload' "$TMP/runs/stale.$mode.out")"
        stop_redcar
    done
fi

# ---------------------------------------------------------------- report
# shellcheck source=bench/nearcache_report.sh
source "$ROOT/bench/nearcache_report.sh"
