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
for v in SECS WARMUP ROUNDS CLIENTS KEYS VALUE_SIZE THREADS WRITES MAX_SILENCE_MS; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "NEARCACHE_$v must be a whole number"
done
((ROUNDS >= 1 && SECS >= 1 && CLIENTS >= 1 && KEYS >= 1)) || die "NEARCACHE_ROUNDS, _SECONDS, _CLIENTS and _KEYS must be at least 1"

log "building the load generator (bench/mixload)"
CARGO_TARGET_DIR="$ROOT/target/mixload" cargo build --release --quiet \
    --manifest-path "$ROOT/bench/mixload/Cargo.toml" || die "building bench/mixload failed"
MIXLOAD=$ROOT/target/mixload/release/mixload

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-nearcache.XXXXXX")
mkdir -p "$TMP/runs"
REDCAR_PID=""
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n $REDCAR_PID ]] && stop_pid "$REDCAR_PID" redcar
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
commands_at_primaries() { # -> total_commands_processed summed over the primaries
    local p t=0 n
    for p in "${PRIMARY_PORTS[@]}"; do
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

# measure MODE ROUND: one measured run on a fresh redcar; writes $TMP/runs/MODE.rROUND.{out,data}.
measure() {
    local mode=$1 r=$2 key=$1.r$2 c0 c1 n0 n1 p0 p1 h0 h1 m0 m1
    start_redcar "$mode"
    "$MIXLOAD" --addr "127.0.0.1:$REDCAR_PORT" "${LOAD_ARGS[@]}" --seconds "$WARMUP" >/dev/null ||
        log "warning: warm-up through redcar ($mode) failed"
    h0=$(metric redcar_near_cache_hits_total)
    m0=$(metric redcar_near_cache_misses_total)
    c0=$(commands_at_primaries)
    n0=$(cpu_ticks "${NODE_PIDS[@]}")
    p0=$(cpu_ticks "$REDCAR_PID")
    "$MIXLOAD" --addr "127.0.0.1:$REDCAR_PORT" "${LOAD_ARGS[@]}" --seconds "$SECS" --no-populate --seed "$r" \
        >"$TMP/runs/$key.out" 2>&1 || {
        cat "$TMP/runs/$key.out" >&2
        die "mixload failed ($key)"
    }
    n1=$(cpu_ticks "${NODE_PIDS[@]}")
    p1=$(cpu_ticks "$REDCAR_PID")
    c1=$(commands_at_primaries)
    h1=$(metric redcar_near_cache_hits_total)
    m1=$(metric redcar_near_cache_misses_total)
    local f=$TMP/runs/$key.out
    # ops ops_per_sec p50 p99 max errors commands node_ticks redcar_ticks hits misses
    echo "$(result_field "$f" ops) $(result_field "$f" ops_per_sec) $(result_field "$f" p50_ms)" \
        "$(result_field "$f" p99_ms) $(result_field "$f" max_ms) $(result_field "$f" errors)" \
        "$((c1 - c0)) $((n1 - n0)) $((p1 - p0)) $((h1 - h0)) $((m1 - m0))" >"$TMP/runs/$key.data"
    log "  $key: $(grep -v '^RESULT\|^mixload:' "$f")"
    stop_redcar
}

log "workload: $CLIENTS clients, -P 1, $SECS s per run, $ROUNDS round(s), modes: ${MODES[*]}"
for ((r = 1; r <= ROUNDS; r++)); do
    order=("${MODES[@]}")
    if ((r % 2 == 0)); then # every other round in reverse
        order=()
        for ((i = ${#MODES[@]} - 1; i >= 0; i--)); do order+=("${MODES[i]}"); done
    fi
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

# ---------------------------------------------------------------- report helpers
pick() { # MODE -> the round with the median ops/s (the lower middle one for an even count)
    local f
    for f in "$TMP"/runs/"$1".r*.data; do
        [[ -f $f ]] && echo "$(awk '{ print $2 }' "$f") $(basename "$f" .data)"
    done | sort -n | awk '{ run[NR] = $2 } END { if (NR > 0) print run[int((NR + 1) / 2)] }'
}
col() { # KEY N -> field N of KEY's data line
    [[ -f $TMP/runs/$1.data ]] && awk -v n="$2" '{ print $n }' "$TMP/runs/$1.data"
    return 0
}
per_cmd() { # KEY -> commands at the primaries per client command
    awk '{ if ($1 > 0) printf "%.3f", $7 / $1 }' "$TMP/runs/$1.data"
}
cpu_m() { # KEY FIELD(8 nodes, 9 redcar) -> CPU seconds per million client commands
    awk -v f="$2" -v hz="$CLK_TCK" '{ if ($1 > 0) printf "%.2f", $f / hz / ($1 / 1e6) }' "$TMP/runs/$1.data"
}
hit_ratio() { # KEY -> hits / (hits + misses), or "-" when redcar reported neither
    awk '{ if ($10 + $11 > 0) printf "%.1f %%", 100 * $10 / ($10 + $11); else print "-" }' "$TMP/runs/$1.data"
}
ratio() {
    [[ -n $1 && -n $2 ]] || return 0
    awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 != 0) printf "%.2f", a / b }'
}
stale_field() { # MODE KEY
    [[ -f $TMP/runs/stale.$1.out ]] && result_field "$TMP/runs/stale.$1.out" "$2"
    return 0
}
TARGET_ROWS=()
TARGETS_MET=0
verdict() { # VALUE OP LIMIT -> met / not met / not measured
    if [[ -z $1 ]]; then
        echo "not measured"
    elif awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN { exit !((op == ">=") ? v >= l : (op == "<=") ? v <= l : v == l) }'; then
        echo "**met**"
    else
        echo "not met"
    fi
}
target() { # NAME DETAIL VALUE OP LIMIT
    local v
    v=$(verdict "$3" "$4" "$5")
    [[ $v != "**met**" ]] || TARGETS_MET=$((TARGETS_MET + 1))
    TARGET_ROWS+=("| $1 | $2 | $v |")
}

OFF=$(pick off)
ON=""
((CACHE == 0)) || ON=$(pick on)
THR=""
FEWER=""
if [[ -n $ON ]]; then
    THR=$(ratio "$(col "$ON" 2)" "$(col "$OFF" 2)")
    FEWER=$(awk -v a="$(per_cmd "$ON")" -v b="$(per_cmd "$OFF")" 'BEGIN { if (b > 0) printf "%.3f", 1 - a / b }')
fi
no_cache="near cache not in this build"
shown() { # VALUE TEXT -> TEXT when VALUE was measured, else why not
    if [[ -n $1 ]]; then echo "$2"; else echo "$no_cache"; fi
}
thr_text=""
fewer_text=""
if [[ -n $ON ]]; then
    thr_text="${THR}× (median rounds: $(col "$ON" 2) vs $(col "$OFF" 2) ops/s)"
    fewer_text="$(awk -v f="$FEWER" 'BEGIN { printf "%.1f %% fewer", 100 * f }') ($(per_cmd "$ON") vs $(per_cmd "$OFF"))"
fi
target "throughput, on / off" "$(shown "$THR" "$thr_text")" "$THR" ">=" "$TARGET_THROUGHPUT"
target "commands at the primaries per client command, on vs off" "$(shown "$FEWER" "$fewer_text")" "$FEWER" ">=" "$TARGET_FEWER"
if ((WRITES > 0)); then
    sp99=""
    smax=""
    sstale=""
    if ((CACHE == 1)); then
        sp99=$(stale_field on p99_ms)
        smax=$(stale_field on max_ms)
        sstale=$(stale_field on stale_after_bound)
    fi
    target "staleness probe (cache on): visibility p99 ≤ $TARGET_VIS_P99_MS ms" "$(shown "$sp99" "$sp99 ms")" "$sp99" "<=" "$TARGET_VIS_P99_MS"
    target "staleness probe (cache on): visibility max ≤ the bound ($BOUND_MS ms)" "$(shown "$smax" "$smax ms")" "$smax" "<=" "$BOUND_MS"
    target "staleness probe (cache on): stale reads after the bound = 0" "$(shown "$sstale" "$sstale")" "$sstale" "==" 0
fi

# ---------------------------------------------------------------- report
REPORT=$TMP/RESULTS-nearcache.md
{
    echo "# redcar near cache: benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); the script took $((SECONDS - START)) s"
    echo "- command: \`$(env | grep -E '^(NEARCACHE_|REDCAR_BIN=)' | sort | tr '\n' ' ')bench/nearcache.sh\`"
    NUTCRACKER=0 NC_NOTE="" report_machine | grep -v '^- nutcracker' || true
    echo "- redcar: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) ($REDCAR_BIN)"
    if ((CACHE == 0)); then
        echo "- **near cache: not available** — $CACHE_NOTE"
    fi
    echo "- workload: \`mixload ${LOAD_ARGS[*]} --seconds $SECS\` (bench/mixload: each client its own connection, one command in flight; keys drawn uniformly from hot:0..hot:$((KEYS - 1)), all SET once before the warm-up), through redcar; $ROUNDS round(s), the modes interleaved (${MODES[*]}, then in reverse), a fresh redcar per run warmed up for $WARMUP s; rows report the round with the median ops/s; \`on-nowt\` is the cache on with \`write_through: false\` (a SET drops its key and the next read fills it again)"
    echo "- commands at the primaries: INFO stats \`total_commands_processed\` summed over the 3 primaries, before and after the run, divided by the client commands of the run (redcar's own health checks and the INFO calls included)"
    echo "- CPU s/M: user + system CPU seconds (/proc/PID/stat, $CLK_TCK ticks/s) per million client commands: \"nodes\" is all six cluster nodes (replicas included), \"redcar\" its process"
    echo "- hit ratio: redcar_near_cache_hits_total / (hits + misses_total) over the run, from /metrics (\"-\": redcar reported neither)"
    echo "- note: mixload, redcar and the six redis-servers share the same $(nproc) CPUs"
    echo
    echo "## Targets (issue 27)"
    echo
    echo "$TARGETS_MET of ${#TARGET_ROWS[@]} met, computed by bench/nearcache.sh from the tables below."
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    printf '%s\n' "${TARGET_ROWS[@]}"
    echo
    echo "## Mixed workload: near cache off vs on"
    echo
    echo "| near cache | ops/s | p50 ms | p99 ms | max ms | errors | commands at primaries / client command | nodes CPU s/M | redcar CPU s/M | hit ratio |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for mode in "${MODES[@]}"; do
        k=$(pick "$mode")
        echo "| $mode | $(col "$k" 2) | $(col "$k" 3) | $(col "$k" 4) | $(col "$k" 5) | $(col "$k" 6) | $(per_cmd "$k") | $(cpu_m "$k" 8) | $(cpu_m "$k" 9) | $(hit_ratio "$k") |"
    done
    if [[ -n $ON ]]; then
        echo "| **on / off** | **$(ratio "$(col "$ON" 2)" "$(col "$OFF" 2)")×** | $(ratio "$(col "$ON" 3)" "$(col "$OFF" 3)")× | $(ratio "$(col "$ON" 4)" "$(col "$OFF" 4)")× | | | **$(ratio "$(per_cmd "$ON")" "$(per_cmd "$OFF")")×** | $(ratio "$(cpu_m "$ON" 8)" "$(cpu_m "$OFF" 8)")× | $(ratio "$(cpu_m "$ON" 9)" "$(cpu_m "$OFF" 9)")× | |"
    fi
    echo
    echo "Every round:"
    echo
    echo "| run | ops/s | p50 ms | p99 ms | max ms | commands at primaries | / client command | nodes CPU s/M | redcar CPU s/M | hits | misses | hit ratio |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for ((r = 1; r <= ROUNDS; r++)); do
        for mode in "${MODES[@]}"; do
            k=$mode.r$r
            echo "| $k | $(col "$k" 2) | $(col "$k" 3) | $(col "$k" 4) | $(col "$k" 5) | $(col "$k" 7) | $(per_cmd "$k") | $(cpu_m "$k" 8) | $(cpu_m "$k" 9) | $(col "$k" 10) | $(col "$k" 11) | $(hit_ratio "$k") |"
        done
    done
    echo
    if ((WRITES > 0)); then
        echo "## Staleness probe"
        echo
        echo "\`$STALE_CMD\`: a writer connected straight to the primary that owns \`hot:staleness\` (found by following"
        echo "\`-MOVED\` from a node) SETs a new unique value $WRITES times; one reader through redcar GETs the key in a"
        echo "tight loop. Visibility latency: from the write's acknowledgement to the end of the first read through"
        echo "redcar that returns it (or a later value). A read that *started* more than $BOUND_MS ms (max_silence"
        echo "$MAX_SILENCE_MS ms + 5 ms) after a write's acknowledgement and returned an older value is a stale read after"
        echo "the bound. The writer waits for each write to be seen (at most 2 s: \"not seen\") and pauses 0.25–0.75 ms."
        echo
        echo "| near cache | writes | reads | visible p50 ms | p99 ms | max ms | not seen in 2 s | stale reads after the bound | stale reads within it | read errors | cache hits during the probe |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for mode in "${MODES[@]}"; do
            echo "| $mode | $(stale_field "$mode" writes) | $(stale_field "$mode" reads) | $(stale_field "$mode" p50_ms) | $(stale_field "$mode" p99_ms) | $(stale_field "$mode" max_ms) | $(stale_field "$mode" not_seen) | $(stale_field "$mode" stale_after_bound) | $(stale_field "$mode" stale_within_bound) | $(stale_field "$mode" read_errors) | $(cat "$TMP/runs/stale.$mode.hits" 2>/dev/null) |"
        done
        echo
    fi
    echo "## Setup and commands"
    echo
    echo '```'
    echo "cluster: scripts/cluster.sh start DIR 0  (3 primaries + 3 replicas): $SEEDS"
    for mode in "${MODES[@]}"; do
        echo "redcar ($mode): ${REDCAR_CMDS[$mode]:-}, with $mode.yaml:"
        sed 's/^/  /' "$TMP/$mode.yaml"
    done
    echo "load:    target/mixload/release/mixload --addr 127.0.0.1:REDCAR ${LOAD_ARGS[*]} --seconds $WARMUP   (warm-up, populates the keys)"
    echo "         target/mixload/release/mixload --addr 127.0.0.1:REDCAR ${LOAD_ARGS[*]} --seconds $SECS --no-populate --seed ROUND"
    [[ -z $STALE_CMD ]] || echo "probe:   target/mixload/release/$STALE_CMD"
    echo "counted: redis-cli -p PRIMARY INFO stats (total_commands_processed); /proc/PID/stat; GET /metrics on the admin port"
    echo '```'
    echo
    echo "## mixload output"
    echo
    echo '```'
    for f in "$TMP"/runs/*.out; do
        grep -v '^mixload' "$f" | sed "s/^/$(basename "$f" .out): /"
    done
    echo '```'
} >"$REPORT"
cp "$REPORT" "$OUT"
log "wrote $OUT in $((SECONDS - START)) s"
sed -n '/^## Targets/,/^## Setup/p' "$OUT" | sed '$d'
