#!/usr/bin/env bash
# redcar benchmark suite (`make bench`): redis-benchmark against
#   (a) a standalone redis-server (the physical limit of this machine),
#   (b) a 3+3 Redis Cluster directly (redis-benchmark --cluster --threads 1, a cluster-aware
#       client with one thread, like every other target's redis-benchmark),
#   (c) redcar in front of that same cluster,
#   (d) nutcracker (twemproxy) over 3 plain redis-servers (bench/nutcracker.sh), a reference proxy hop,
# SET and GET per CLIENTS:PIPELINE scenario; then MSET and MGET of 10 keys spread over all slots
# against (a), (c) and (d) (a cluster-aware client cannot send a cross-slot MSET/MGET at all);
# CPU seconds per million commands of every proxy (and of the redis-servers behind each target),
# read from /proc/PID/stat around each run; a scaling run with redcar --workers 1 and 2; then the
# per-request and rate-limit workloads (bench/connections.sh on loopback) and the cost of one
# client (bench/crowd.sh: CPU per command, RSS per idle client, the rate with 10,000 idle clients);
# writes bench/RESULTS.md with the ratios and which of the performance targets (issue 8) are met.
# The hop floor: the standalone node direct, through a byte pump (bench/relay with no delay: one
# connection per client, bytes copied, nothing parsed) and through redcar with that node as a
# standalone backend, SET/GET at -P 16 and -P 1: what a process in the path costs here when it adds
# no work, next to what redcar keeps.
#
# Env: BENCH_REQUESTS (default 200000) requests per test
#      BENCH_PIPELINED_REQUESTS (default 5 x BENCH_REQUESTS) requests per test with -P above 1:
#                      pipelined runs are fast, and a run of well under a second is mostly noise
#      BENCH_CLIENTS  (default 50)     parallel connections
#      BENCH_SCENARIOS (default "50:1 50:16 1:1") CLIENTS:PIPELINE pairs; 1:1 shows the
#                      unloaded cost of the extra hop (no CPU contention, no queueing)
#      BENCH_KEYSPACE (default 100000) -r: random keys, so traffic spreads over all slots
#      BENCH_MULTI_REQUESTS (default BENCH_REQUESTS/4) requests per MSET/MGET test; 0 skips them
#      BENCH_ROUNDS   (default 1)     runs of every test, interleaved; each row reports the run with
#                      the median ops/s (the lower middle one for an even count)
#      BENCH_NUTCRACKER (default 1)   0 skips the nutcracker rows
#      BENCH_SCALING_WORKERS (default "1 2 2:shared 2:pack") redcar --workers values of the scaling
#                      run, each optionally with a threading model (N:per-core, N:shared) or
#                      `--placement pack` (N:pack); "" skips it
#      BENCH_CONNECTIONS (default 1)  0 skips the per-request and rate-limit workloads
#      BENCH_FLOOR    (default 1)     0 skips the hop-floor runs (byte pump, redcar on one node)
#      BENCH_CROWD    (default 1)     0 skips the cost-of-one-client scenario (bench/crowd.sh)
#      BENCH_NEARCACHE (default 1)    0 skips the near-cache scenario (bench/nearcache.sh, run last;
#                     it writes bench/RESULTS-nearcache.md, or NEARCACHE_OUT, and RESULTS.md includes it)
#      BENCH_CALLGRIND (default 1)    0 skips the instruction counts against issue 45's targets
#                     (bench/callgrind_targets.sh, 5 callgrind runs each with 1 and 2 workers;
#                     needs valgrind; it writes bench/RESULTS-callgrind.md and RESULTS.md includes it)
#      BENCH_OUT      (default bench/RESULTS.md)
#      REDCAR_BIN     (default target/release/redcar; `make bench` builds it)
#      BENCH_RUN_TIMEOUT (default 120) seconds before one redis-benchmark run is killed
#      CONN_*         passed on to bench/connections.sh (the suite's defaults: CONN_NETWORKS=loopback
#                     CONN_RATE_NETWORKS=loopback CONN_REQUESTS=300 CONN_RATE_SECONDS=3)
#      CROWD_*        passed on to bench/crowd.sh (the suite's defaults: CROWD_REQUESTS=BENCH_REQUESTS,
#                     CROWD_NUTCRACKER=BENCH_NUTCRACKER)
#      NEARCACHE_*    passed on to bench/nearcache.sh (its own defaults)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

REQUESTS=${BENCH_REQUESTS:-200000}
CLIENTS=${BENCH_CLIENTS:-50}
SCENARIOS=${BENCH_SCENARIOS:-$CLIENTS:1 $CLIENTS:16 1:1}
KEYSPACE=${BENCH_KEYSPACE:-100000}
PIPELINED_REQUESTS=${BENCH_PIPELINED_REQUESTS:-$((REQUESTS * 5))}
MULTI_REQUESTS=${BENCH_MULTI_REQUESTS:-$((REQUESTS / 4))}
ROUNDS=${BENCH_ROUNDS:-1}
NUTCRACKER=${BENCH_NUTCRACKER:-1}
SCALING_WORKERS=${BENCH_SCALING_WORKERS-1 2 2:shared 2:pack}
CONNECTIONS=${BENCH_CONNECTIONS:-1}
FLOOR=${BENCH_FLOOR:-1}
CROWD=${BENCH_CROWD:-1}
NEARCACHE=${BENCH_NEARCACHE:-1}
CALLGRIND=${BENCH_CALLGRIND:-1}
OUT=${BENCH_OUT:-$ROOT/bench/RESULTS.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-120} # seconds per redis-benchmark run
CLK_TCK=$(getconf CLK_TCK)
# The scenarios the issue's targets are stated for (50 clients, -P 16 and -P 1).
P16="$CLIENTS:16"
P1="$CLIENTS:1"

for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"
for v in REQUESTS PIPELINED_REQUESTS CLIENTS KEYSPACE MULTI_REQUESTS RUN_TIMEOUT ROUNDS; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "BENCH_$v must be a whole number"
done
for w in $SCALING_WORKERS; do
    [[ "$w" =~ ^[1-9][0-9]*(:(shared|per-core|pack))?$ ]] ||
        die "BENCH_SCALING_WORKERS: '$w' is not a worker count (N, N:shared, N:per-core or N:pack)"
done
if [[ $CONNECTIONS == 1 ]]; then
    # Checked now rather than after the rest of the suite has run (bench/connections.sh checks too).
    if ! php -r 'require "Predis/autoload.php"; exit(class_exists("RedisCluster") && class_exists("Predis\\Client") ? 0 : 1);' \
        >/dev/null 2>&1 || ! "$ROOT/target/pyenv/bin/python" -c 'import redis' >/dev/null 2>&1; then
        die "the per-request and rate-limit workloads need php + phpredis + predis and redis-py in target/pyenv: run scripts/ensure-clients.sh, or set BENCH_CONNECTIONS=0 to skip them"
    fi
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-bench.XXXXXX")
STANDALONE_PID=""
REDCAR_PID=""
PUMP_PID=""
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID"
    [[ -n "$PUMP_PID" ]] && stop_pid "$PUMP_PID" relay
    [[ -n "$STANDALONE_PID" ]] && stop_pid "$STANDALONE_PID" redis-server
    "$ROOT/bench/nutcracker.sh" stop "$TMP/nutcracker" 2>/dev/null || true
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    ((rc == 0)) || printf 'bench failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
BENCH_START=$SECONDS

ensure_nutcracker_or_skip "$TMP" BENCH_NUTCRACKER

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
CLUSTER_PIDS=()
for f in "$TMP"/cluster/node-*/pid; do CLUSTER_PIDS+=("$(cat "$f")"); done

NC_PORT=""
NC_PID=""
NC_SERVER_PIDS=()
if [[ $NUTCRACKER == 1 ]]; then
    log "starting nutcracker over 3 plain redis-servers"
    "$ROOT/bench/nutcracker.sh" start "$TMP/nutcracker" 3
    NC_PORT=$(cat "$TMP/nutcracker/port")
    NC_PID=$(cat "$TMP/nutcracker/nutcracker.pid")
    mapfile -t NC_SERVER_PIDS <"$TMP/nutcracker/server-pids"
fi

TIMEOUT=()
command -v timeout >/dev/null && TIMEOUT=(timeout "$RUN_TIMEOUT")

REDCAR_PORT=$(free_port 8000 11000) || die "no free port" # below the ephemeral range
ADMIN_PORT=$(free_port 11000 12000) || die "no free port"
start_redcar() { # [EXTRA ARGS...]: start redcar, wait for /readyz, warm up its node connections
    REDCAR_CMD=("$REDCAR_BIN" --listen "127.0.0.1:$REDCAR_PORT" --cluster "$SEEDS" --admin "127.0.0.1:$ADMIN_PORT" "$@")
    log "starting ${REDCAR_CMD[*]}"
    "${REDCAR_CMD[@]}" </dev/null >>"$TMP/redcar.log" 2>&1 &
    REDCAR_PID=$!
    wait_redcar_ready "$REDCAR_PID" "$ADMIN_PORT" "$TMP/redcar.log"
    # Warm up redcar's upstream connections (not measured).
    "${TIMEOUT[@]}" redis-benchmark -h 127.0.0.1 -p "$REDCAR_PORT" -t set,get -n 5000 -c "$CLIENTS" \
        -r "$KEYSPACE" -q >/dev/null 2>&1 || log "warning: warm-up through redcar failed"
}
stop_redcar() {
    stop_pid "$REDCAR_PID" redcar
    REDCAR_PID=""
}
start_redcar
REDCAR_MAIN_CMD="${REDCAR_CMD[*]}"
# What `threading: auto` settled to, as redcar logged it at start-up.
REDCAR_THREADING=$(grep -o 'threading: [a-z-]*' "$TMP/redcar.log" | head -1 || true)
if [[ $NUTCRACKER == 1 ]]; then
    "${TIMEOUT[@]}" redis-benchmark -h 127.0.0.1 -p "$NC_PORT" -t set,get -n 5000 -c "$CLIENTS" \
        -r "$KEYSPACE" -q >/dev/null 2>&1 || log "warning: warm-up through nutcracker failed"
fi

# ---------------------------------------------------------------- measuring
# cpu_ticks PID... (scripts/lib.sh): user + system CPU of these processes so far, in clock ticks.
proxy_pids() { # TARGET -> the proxy process measured for it (none for the direct targets)
    case $1 in
    redcar*) echo "$REDCAR_PID" ;;
    pump) echo "$PUMP_PID" ;;
    nutcracker) echo "$NC_PID" ;;
    esac
}
server_pids() { # TARGET -> the redis-servers that serve it
    case $1 in
    standalone | pump | redcar-one) echo "$STANDALONE_PID" ;;
    cluster | redcar*) echo "${CLUSTER_PIDS[*]}" ;;
    nutcracker) echo "${NC_SERVER_PIDS[*]}" ;;
    esac
}
target_args() { # TARGET -> redis-benchmark connection args
    case $1 in
    standalone) echo "-h 127.0.0.1 -p $STANDALONE_PORT" ;;
    # One thread, as for every other target. Left to itself, --cluster runs a thread per primary
    # and notices the end of a run only at its 250 ms throughput tick, so a run reads up to 250 ms
    # long: 200,000 GETs at -P 16 read as exactly 398,406 ops/s (0.502 s) where one thread
    # measures about 540,000 (bench/README.md, "Direct cluster").
    cluster) echo "--cluster --threads 1 -h 127.0.0.1 -p $CLUSTER_PORT" ;;
    redcar*) echo "-h 127.0.0.1 -p $REDCAR_PORT" ;;
    nutcracker) echo "-h 127.0.0.1 -p $NC_PORT" ;;
    pump) echo "-h 127.0.0.1 -p $PUMP_PORT" ;;
    esac
}

declare -A CMDS
ORDER=()
ROUND=1
# run_one KEY TARGET N CMD...: one redis-benchmark run (one test) of round ROUND; keeps its CSV in
# $TMP/KEY.rROUND.csv and "N PROXY_TICKS SERVER_TICKS" (the CPU the run cost) in $TMP/KEY.rROUND.cpu.
run_one() {
    local name=$1 key=$1.r$ROUND t=$2 n=$3 pp sp p0 s0 pd=- start=$SECONDS
    shift 3
    CMDS[$name]="$*"
    ORDER+=("$key")
    log "$key: $*"
    pp=$(proxy_pids "$t")
    sp=$(server_pids "$t")
    # shellcheck disable=SC2086 # the PID lists are meant to split
    p0=$(cpu_ticks $pp)
    # shellcheck disable=SC2086
    s0=$(cpu_ticks $sp)
    if ! "${TIMEOUT[@]}" "$@" >"$TMP/$key.csv" 2>"$TMP/$key.err"; then
        tail -n 20 "$TMP/$key.err" >&2
        die "redis-benchmark failed: $key"
    fi
    # shellcheck disable=SC2086
    [[ -z $pp ]] || pd=$(($(cpu_ticks $pp) - p0))
    # shellcheck disable=SC2086
    echo "$n $pd $(($(cpu_ticks $sp) - s0))" >"$TMP/$key.cpu"
    log "  done in $((SECONDS - start)) s: $(csv_field "$TMP/$key.csv" rps) ops/s"
}
# bench_setget TARGET P [KEY PREFIX]: SET then GET (separate runs, so each has its own CPU figure).
bench_setget() {
    local t=$1 p=$2 prefix=${3:-$1} clients=${2%%:*} n=$REQUESTS test args
    ((clients > 1)) || n=$((REQUESTS / 10)) # one client is slow; latency needs fewer samples
    ((clients == 1 || ${p##*:} == 1)) || n=$PIPELINED_REQUESTS
    # shellcheck disable=SC2207
    args=($(target_args "$t"))
    for test in set get; do
        run_one "$prefix-$p-$test" "$t" "$n" redis-benchmark "${args[@]}" -t "$test" -c "$clients" \
            -n "$n" -r "$KEYSPACE" -P "${p##*:}" --csv
    done
}

# ---------------------------------------------------------------- report helpers
# csv_field FILE rps|p50|p99 -> from a redis-benchmark CSV (its one data row; p50/p99 in ms).
# With --cluster, redis-benchmark prints the primaries it found before the CSV header.
csv_field() {
    local col
    [[ -f $1 ]] || return 0
    case $2 in rps) col=2 ;; p50) col=5 ;; p99) col=7 ;; esac
    awk -F'","' -v c="$col" '/^"/ && $1 != "\"test" { gsub(/"/, "", $c); print $c; exit }' "$1"
}
# pick KEY -> $TMP/KEY.rN of the round to report: the one with the median ops/s (the lower middle
# for an even count), so a row's ops/s, latency and CPU all come from the same run.
pick() {
    local f
    for f in "$TMP/$1".r*.csv; do
        if [[ -f $f ]]; then echo "$(csv_field "$f" rps) ${f%.csv}"; fi
    done | sort -n | awk '{ run[NR] = $2 } END { if (NR > 0) print run[int((NR + 1) / 2)] }'
}
field() { # KEY rps|p50|p99 -> of the reported round of KEY
    local run
    run=$(pick "$1")
    [[ -n $run ]] && csv_field "$run.csv" "$2"
    return 0
}
cpu_m() { # KEY proxy|servers -> CPU seconds per million commands of that run (empty if not measured)
    local run f n pt st ticks
    run=$(pick "$1")
    f=$run.cpu
    [[ -n $run && -f $f ]] || return 0
    read -r n pt st <"$f"
    ticks=$([[ $2 == proxy ]] && echo "$pt" || echo "$st")
    [[ $ticks == - ]] && return 0
    awk -v t="$ticks" -v hz="$CLK_TCK" -v n="$n" 'BEGIN { if (n > 0) printf "%.2f", t / hz / (n / 1e6) }'
}
ratio() { # A B -> A/B, 2 decimals (empty if either is missing)
    [[ -n $1 && -n $2 ]] || return 0
    awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 != 0) printf "%.2f", a / b }'
}
added_us() { # A_MS B_MS -> A-B in µs, signed (empty if either is missing)
    [[ -n $1 && -n $2 ]] || return 0
    awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.0f", (a - b) * 1000 }'
}
label() {
    case $1 in
    cluster) echo "cluster (direct, --cluster --threads 1)" ;;
    pump) echo "byte pump (bench/relay, no delay)" ;;
    redcar-one) echo "redcar (the node as a standalone backend)" ;;
    nutcracker) echo "nutcracker (3 plain nodes)" ;;
    *) echo "$1" ;;
    esac
}
has_scenario() { [[ " $SCENARIOS " == *" $1 "* ]]; }

# target NAME VALUE OP LIMIT DETAIL: one row of the Targets table; met when VALUE OP LIMIT holds.
TARGET_ROWS=()
TARGETS_MET=0
TARGETS_TOTAL=0
target() {
    local name=$1 value=$2 op=$3 limit=$4 detail=$5 verdict
    TARGETS_TOTAL=$((TARGETS_TOTAL + 1))
    if [[ -z $value || -z $limit ]]; then
        verdict="not measured"
    elif awk -v v="$value" -v l="$limit" -v op="$op" 'BEGIN {
        ok = (op == ">=") ? v >= l : (op == "<=") ? v <= l : v < l; exit !ok }'; then
        verdict="**met**"
        TARGETS_MET=$((TARGETS_MET + 1))
    else
        verdict="not met"
    fi
    TARGET_ROWS+=("| $name | $detail | $verdict |")
}

evaluate_targets() {
    local test r c s n v key depth floor depth_floor
    # Throughput against the direct cluster: ≥ 1.0× at -P 16, ≥ 0.9× at -P 1.
    for depth_floor in "$P16 16 1.0" "$P1 1 0.9"; do
        read -r key depth floor <<<"$depth_floor"
        for test in set get; do
            r=$(field "redcar-$key-$test" rps)
            c=$(field "cluster-$key-$test" rps)
            v=$(ratio "$r" "$c")
            target "\`-P $depth\` ${test^^}, $CLIENTS clients: ≥ ${floor}× direct cluster" "$v" ">=" "$floor" \
                "redcar ${r:-?} / direct cluster ${c:-?} ops/s = ${v:-?}×"
        done
    done
    for test in set get; do
        r=$(field "redcar-$P1-$test" p99)
        c=$(field "cluster-$P1-$test" p99)
        v=$(added_us "$r" "$c")
        target "\`-P 1\` ${test^^}, $CLIENTS clients: p99 added over direct cluster ≤ 150 µs" "$v" "<=" 150 \
            "p99 redcar ${r:-?} ms, direct cluster ${c:-?} ms: ${v:-?} µs"
    done
    for p in $P1 $P16; do
        for test in mset mget; do
            r=$(field "redcar-$p-$test" rps)
            s=$(field "standalone-$p-$test" rps)
            v=$(ratio "$r" "$s")
            target "10-key ${test^^} across slots, $p: ≥ 0.5× one standalone node" "$v" ">=" 0.5 \
                "redcar ${r:-?} / standalone ${s:-?} ops/s = ${v:-?}×"
        done
    done
    for p in $P1 $P16; do
        for test in set get; do
            r=$(cpu_m "redcar-$p-$test" proxy)
            n=$(cpu_m "nutcracker-$p-$test" proxy)
            target "CPU per million ${test^^}, $p: redcar < nutcracker" "$r" "<" "$n" \
                "redcar ${r:-?} s, nutcracker ${n:-?} s per million commands"
        done
    done
}

# ---------------------------------------------------------------- runs
TARGETS=(standalone cluster redcar)
[[ $NUTCRACKER == 1 ]] && TARGETS+=(nutcracker)
for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
    for p in $SCENARIOS; do
        for t in "${TARGETS[@]}"; do bench_setget "$t" "$p"; done
    done
done

# Multi-key: 10 keys per command, each `key:__rand_int__` drawn separately, so they land in
# different slots. `-t mset` sends `MSET key:__rand_int__ <value>` x10 (with --cluster it would put
# all ten under one {hash tag}: a different workload), MGET is a custom command line.
MULTI_TESTS=(mset mget)
MULTI_TARGETS=(standalone redcar)
NC_MULTI_NOTE=""
if [[ $NUTCRACKER == 1 ]]; then
    # nutcracker splits MGET (and DEL) over its servers; MSET is served too since 0.4. Probe both
    # rather than trust the version: a proxy that refused them would close the connection.
    if [[ $(redis-cli -p "$NC_PORT" MSET redcar:a 1 redcar:b 2 redcar:c 3 2>&1) == OK &&
        $(redis-cli -p "$NC_PORT" MGET redcar:a redcar:b redcar:c 2>&1 | tr '\n' ' ') == "1 2 3 " ]]; then
        MULTI_TARGETS+=(nutcracker)
    else
        NC_MULTI_NOTE="nutcracker did not answer a probe MSET/MGET correctly: no multi-key rows for it"
        log "$NC_MULTI_NOTE"
    fi
fi
MGET_ARGS=(MGET)
for _ in 1 2 3 4 5 6 7 8 9 10; do MGET_ARGS+=("key:__rand_int__"); done
for ((ROUND = 1; ROUND <= ROUNDS && MULTI_REQUESTS > 0; ROUND++)); do
    for p in $SCENARIOS; do
        for t in "${MULTI_TARGETS[@]}"; do
            for test in "${MULTI_TESTS[@]}"; do
                # shellcheck disable=SC2207
                args=($(target_args "$t"))
                clients=${p%%:*}
                n=$MULTI_REQUESTS
                # One client runs ~4k MSETs/s: a quarter keeps the run about 3 s (a tenth was ~1 s
                # and swung by 3x between rounds).
                ((clients > 1)) || n=$((MULTI_REQUESTS / 4))
                cmd=(redis-benchmark "${args[@]}" -c "$clients" -n "$n" -r "$KEYSPACE" -P "${p##*:}" --csv)
                if [[ $test == mset ]]; then cmd+=(-t mset); else cmd+=("${MGET_ARGS[@]}"); fi
                run_one "$t-$p-$test" "$t" "$n" "${cmd[@]}"
            done
        done
    done
done

# Scaling: the same redcar with a fixed number of worker threads (the default is one per core),
# and optionally another threading model or `placement: pack`: BENCH_SCALING_WORKERS entries N,
# N:MODEL or N:pack.
scaling_key() { # ENTRY -> the key of its runs: w2, w2-per-core
    [[ $1 == *:* ]] && echo "w${1%%:*}-${1#*:}" || echo "w$1"
}
SCALING_SCENARIOS="$P16 $P1"
for w in $SCALING_WORKERS; do
    stop_redcar
    if [[ $w == *:pack ]]; then
        start_redcar --workers "${w%%:*}" --threading per-core --placement pack
    elif [[ $w == *:* ]]; then
        start_redcar --workers "${w%%:*}" --threading "${w#*:}"
    else
        start_redcar --workers "$w"
    fi
    key=redcar-$(scaling_key "$w")
    CMDS[$key]="${REDCAR_CMD[*]}"
    for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
        for p in $SCALING_SCENARIOS; do bench_setget redcar "$p" "$key"; done
    done
done
stop_redcar

# The hop floor: what one process in the path costs on this machine when it adds no work. The
# byte pump copies each client's bytes to its own node connection and back (no parsing, no
# batching across clients); redcar serves the same node as a standalone backend. Both against the
# standalone node measured again in the same rounds.
FLOOR_SCENARIOS="$P16 $P1"
FLOOR_TARGETS=(floor-standalone pump redcar-one)
if [[ $FLOOR == 1 ]]; then
    log "building the byte pump (bench/relay)"
    CARGO_TARGET_DIR="$ROOT/target/relay" cargo build --release --quiet \
        --manifest-path "$ROOT/bench/relay/Cargo.toml" || die "building bench/relay failed"
    PUMP_PORT=$(free_port 12000 13000) || die "no free port"
    PUMP_CMD=("$ROOT/target/relay/release/relay" --delay-us 0 --no-handshake "$PUMP_PORT=$STANDALONE_PORT")
    "${PUMP_CMD[@]}" </dev/null >>"$TMP/pump.log" 2>&1 &
    PUMP_PID=$!
    wait_for 10 "byte pump on port $PUMP_PORT" port_in_use "$PUMP_PORT"
    printf 'backends:\n  one:\n    kind: standalone\n    primary: 127.0.0.1:%s\ncatch_all: one\n' \
        "$STANDALONE_PORT" >"$TMP/redcar-one.yaml"
    # start_redcar's --cluster seeds become the unused `default` backend; routes go to `one`.
    start_redcar --config "$TMP/redcar-one.yaml"
    CMDS[redcar-one]="${REDCAR_CMD[*]}"
    for ((ROUND = 1; ROUND <= ROUNDS; ROUND++)); do
        for p in $FLOOR_SCENARIOS; do
            for t in "${FLOOR_TARGETS[@]}"; do
                if [[ $t == floor-standalone ]]; then
                    bench_setget standalone "$p" floor-standalone
                else
                    bench_setget "$t" "$p"
                fi
            done
        done
    done
    stop_redcar
    stop_pid "$PUMP_PID" relay
    PUMP_PID=""
fi

# The connection workloads start their own cluster and redcar: stop ours so they have the CPUs.
stop_pid "$STANDALONE_PID" redis-server
STANDALONE_PID=""
"$ROOT/bench/nutcracker.sh" stop "$TMP/nutcracker"
"$ROOT/scripts/cluster.sh" stop "$TMP/cluster"

CONN_NOTE=""
CONN_CMD=""
if [[ $CONNECTIONS == 1 ]]; then
    conn_env=(CONN_NETWORKS="${CONN_NETWORKS:-loopback}" CONN_RATE_NETWORKS="${CONN_RATE_NETWORKS:-loopback}"
        CONN_REQUESTS="${CONN_REQUESTS:-300}" CONN_RATE_SECONDS="${CONN_RATE_SECONDS:-3}"
        REDCAR_BIN="$REDCAR_BIN" CONN_OUT="$TMP/connections.md")
    CONN_CMD="${conn_env[*]:0:4} bench/connections.sh"
    log "per-request and rate-limit workloads: $CONN_CMD"
    env "${conn_env[@]}" "$ROOT/bench/connections.sh" || die "bench/connections.sh failed"
else
    CONN_NOTE="BENCH_CONNECTIONS=0: the per-request and rate-limit workloads were skipped (run \`make bench-connections\`)."
fi

CROWD_NOTE=""
CROWD_CMD=""
if [[ $CROWD == 1 ]]; then
    crowd_env=(CROWD_REQUESTS="${CROWD_REQUESTS:-$REQUESTS}" CROWD_NUTCRACKER="${CROWD_NUTCRACKER:-$NUTCRACKER}"
        REDCAR_BIN="$REDCAR_BIN" CROWD_OUT="$TMP/crowd.md")
    CROWD_CMD="${crowd_env[*]:0:2} bench/crowd.sh"
    log "the cost of one client: $CROWD_CMD"
    env "${crowd_env[@]}" "$ROOT/bench/crowd.sh" || die "bench/crowd.sh failed"
else
    CROWD_NOTE="BENCH_CROWD=0: the cost-of-one-client scenario was skipped (run \`make bench-crowd\`)."
fi

NEAR_NOTE=""
NEAR_OUT=${NEARCACHE_OUT:-$ROOT/bench/RESULTS-nearcache.md}
if [[ $NEARCACHE == 1 ]]; then
    log "the near cache: bench/nearcache.sh"
    env REDCAR_BIN="$REDCAR_BIN" NEARCACHE_OUT="$NEAR_OUT" "$ROOT/bench/nearcache.sh" || die "bench/nearcache.sh failed"
else
    NEAR_NOTE="BENCH_NEARCACHE=0: the near-cache scenario was skipped (run \`make bench-nearcache\`)."
fi

CG_NOTE=""
CG_OUT=$ROOT/bench/RESULTS-callgrind.md
if [[ $CALLGRIND == 1 ]] && command -v valgrind >/dev/null; then
    log "instructions per request against the targets: bench/callgrind_targets.sh"
    # Exit 1 means a target was missed: the table says which; the suite goes on.
    CALLGRIND_TARGETS_OUT="$CG_OUT" "$ROOT/bench/callgrind_targets.sh" "$REDCAR_BIN" || [[ $? == 1 ]] ||
        die "bench/callgrind_targets.sh failed"
else
    CALLGRIND=0
    CG_NOTE="Skipped (BENCH_CALLGRIND=0 or no valgrind): run \`bench/callgrind_targets.sh\`."
fi

# ---------------------------------------------------------------- report
evaluate_targets
REPORT="$TMP/RESULTS.md"
{
    echo "# redcar benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); the suite took $((SECONDS - BENCH_START)) s"
    echo "- command: \`$(env | grep -E '^(BENCH_|REDCAR_BIN=|CONN_|CROWD_|NEARCACHE_)' | sort | tr '\n' ' ')bench/run.sh\`"
    report_machine
    echo "- redcar: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) ($REDCAR_BIN), ${REDCAR_THREADING:-threading not logged}"
    echo "- rounds: $ROUNDS (every test run $ROUNDS time(s), interleaved; each row is the run with the median ops/s, the raw CSV has all)"
    echo "- workload: SET and GET (separate runs), $REQUESTS requests per test ($PIPELINED_REQUESTS pipelined with several clients, $((REQUESTS / 10)) with one client), keyspace $KEYSPACE (-r), scenarios (clients:pipeline): $SCENARIOS"
    ((MULTI_REQUESTS == 0)) || echo "- multi-key workload: MSET and MGET of 10 random keys, $MULTI_REQUESTS requests per test ($((MULTI_REQUESTS / 4)) with one client)"
    echo "- CPU s/M: user + system CPU seconds (/proc/PID/stat, $CLK_TCK ticks/s) per million client commands, read before and after each run; \"proxy\" is redcar's or nutcracker's process, \"redis-servers\" the nodes behind the target (all six cluster nodes, replicas included, for cluster and redcar)"
    echo "- note: benchmark client, all redis-server processes and the proxies share the same $(nproc) CPUs"
    echo
    echo "## Targets (issue 8)"
    echo
    echo "$TARGETS_MET of $TARGETS_TOTAL met, computed by bench/run.sh from the tables below."
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    printf '%s\n' "${TARGET_ROWS[@]}"
    echo
    echo "## Results"
    echo
    echo "| clients:pipeline | test | target | ops/s | p50 ms | p99 ms | proxy CPU s/M | redis-servers CPU s/M |"
    echo "|---:|---|---|---:|---:|---:|---:|---:|"
    for p in $SCENARIOS; do
        for test in set get; do
            for t in "${TARGETS[@]}"; do
                k=$t-$p-$test
                echo "| $p | ${test^^} | $(label "$t") | $(field "$k" rps) | $(field "$k" p50) | $(field "$k" p99) | $(cpu_m "$k" proxy) | $(cpu_m "$k" servers) |"
            done
        done
    done
    echo
    echo "## Relative to the alternatives"
    echo
    echo "nutcracker's own baseline is its 3 plain nodes (no cluster); standalone and the direct cluster are the two references both proxies are compared with."
    echo
    echo "| clients:pipeline | test | redcar / direct cluster | redcar / standalone | nutcracker / standalone | nutcracker / direct cluster | CPU/M redcar / nutcracker | p50 added over direct cluster (µs) | p99 added over direct cluster (µs) |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|"
    for p in $SCENARIOS; do
        for test in set get; do
            r=$(field "redcar-$p-$test" rps)
            c=$(field "cluster-$p-$test" rps)
            s=$(field "standalone-$p-$test" rps)
            nc=$(field "nutcracker-$p-$test" rps)
            echo "| $p | ${test^^} | $(ratio "$r" "$c") | $(ratio "$r" "$s") | $(ratio "$nc" "$s") | $(ratio "$nc" "$c") |" \
                "$(ratio "$(cpu_m "redcar-$p-$test" proxy)" "$(cpu_m "nutcracker-$p-$test" proxy)") |" \
                "$(added_us "$(field "redcar-$p-$test" p50)" "$(field "cluster-$p-$test" p50)") |" \
                "$(added_us "$(field "redcar-$p-$test" p99)" "$(field "cluster-$p-$test" p99)") |"
        done
    done
    echo
    if ((MULTI_REQUESTS > 0)); then
        echo "## Multi-key commands: 10 keys over all slots"
        echo
        echo "MSET and MGET of 10 random keys each. A cluster-aware client cannot send these to a cluster"
        echo "at all (the keys are in different slots: \`-CROSSSLOT\`), so the proxies are compared with one"
        echo "standalone redis-server. Through redcar each command becomes up to 10 per-slot commands on"
        echo "the 3 primaries, sent in parallel and merged in key order; nutcracker splits it per server."
        [[ -z $NC_MULTI_NOTE ]] || echo "Note: $NC_MULTI_NOTE."
        echo
        echo "| clients:pipeline | test | target | ops/s | p50 ms | p99 ms | proxy CPU s/M | ops/s / standalone |"
        echo "|---:|---|---|---:|---:|---:|---:|---:|"
        for p in $SCENARIOS; do
            for test in "${MULTI_TESTS[@]}"; do
                s=$(field "standalone-$p-$test" rps)
                for t in "${MULTI_TARGETS[@]}"; do
                    k=$t-$p-$test
                    rel=""
                    [[ $t == standalone ]] || rel=$(ratio "$(field "$k" rps)" "$s")
                    echo "| $p | ${test^^} (10 keys) | $(label "$t") | $(field "$k" rps) | $(field "$k" p50) | $(field "$k" p99) | $(cpu_m "$k" proxy) | $rel |"
                done
            done
        done
        echo
    fi
    if [[ -n $SCALING_WORKERS ]]; then
        echo "## Scaling: redcar worker threads"
        echo
        echo "redcar restarted with \`--workers N\` (and \`--threading MODEL\` where named, \`--threading per-core --placement pack\` for \"pack\"; otherwise the same command); \"default\" is the main run above (one worker per core: $(nproc), \`threading: auto\`, which runs per core while the workers are no more than \`connections_per_node\`, 2)."
        echo
        echo "| workers | clients:pipeline | test | ops/s | p50 ms | p99 ms | redcar CPU s/M | ops/s / direct cluster |"
        echo "|---|---:|---|---:|---:|---:|---:|---:|"
        for p in $SCALING_SCENARIOS; do
            for test in set get; do
                c=$(field "cluster-$p-$test" rps)
                for w in default $SCALING_WORKERS; do
                    k=redcar-$(scaling_key "$w")-$p-$test
                    [[ $w == default ]] && k=redcar-$p-$test
                    echo "| ${w/:/ } | $p | ${test^^} | $(field "$k" rps) | $(field "$k" p50) | $(field "$k" p99) | $(cpu_m "$k" proxy) | $(ratio "$(field "$k" rps)" "$c") |"
                done
            done
        done
        echo
    fi
    if [[ $FLOOR == 1 ]]; then
        echo "## The floor of a proxy hop on this machine"
        echo
        echo "One standalone node, measured directly and through two proxies in the same interleaved rounds:"
        echo "a byte pump (\`bench/relay --delay-us 0\`: each client gets its own connection to the node, bytes"
        echo "are copied both ways, nothing is parsed or batched: the least work a proxy process can do) and"
        echo "redcar with the node as a \`standalone\` backend. The pump's share is what a process in the path"
        echo "costs on $(nproc) CPUs shared with the benchmark client and the node when it adds no work of its own;"
        echo "a proxy keeps more only by making the node's work cheaper (several clients' commands per node"
        echo "read: the last column)."
        echo
        echo "| clients:pipeline | test | standalone ops/s | byte pump ops/s | pump / standalone | redcar ops/s | redcar / standalone | redcar / pump | pump CPU s/M | redcar CPU s/M | node CPU s/M: direct, pump, redcar |"
        echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
        for p in $FLOOR_SCENARIOS; do
            for test in set get; do
                s=$(field "floor-standalone-$p-$test" rps)
                pu=$(field "pump-$p-$test" rps)
                r=$(field "redcar-one-$p-$test" rps)
                echo "| $p | ${test^^} | $s | $pu | $(ratio "$pu" "$s") | $r | $(ratio "$r" "$s") | $(ratio "$r" "$pu") |" \
                    "$(cpu_m "pump-$p-$test" proxy) | $(cpu_m "redcar-one-$p-$test" proxy) |" \
                    "$(cpu_m "floor-standalone-$p-$test" servers), $(cpu_m "pump-$p-$test" servers), $(cpu_m "redcar-one-$p-$test" servers) |"
            done
        done
        echo
    fi
    echo "## Setup"
    echo
    echo '```'
    echo "standalone: redis-server --port $STANDALONE_PORT --save \"\" --appendonly no"
    echo "cluster:    scripts/cluster.sh start DIR  (3 primaries + 3 replicas, node timeout 2000 ms): $SEEDS"
    echo "redcar:     $REDCAR_MAIN_CMD"
    for w in $SCALING_WORKERS; do echo "redcar:     ${CMDS[redcar-$(scaling_key "$w")]}"; done
    if [[ $FLOOR == 1 ]]; then
        echo "byte pump:  ${PUMP_CMD[*]}"
        echo "redcar:     ${CMDS[redcar-one]}, with:"
        sed 's/^/  /' "$TMP/redcar-one.yaml"
    fi
    if [[ $NUTCRACKER == 1 ]]; then
        echo "nutcracker: bench/nutcracker.sh start DIR 3  (3 plain redis-servers, --save \"\" --appendonly no), pool:"
        sed 's/^/  /' "$TMP/nutcracker/nutcracker.yml"
    fi
    echo '```'
    echo
    echo "## Commands"
    echo
    echo '```'
    for k in "${ORDER[@]}"; do [[ $k != *.r1 ]] || echo "${CMDS[${k%.r1}]}"; done
    echo '```'
    echo
    if [[ $CONNECTIONS == 1 ]]; then
        echo "## Per-request and rate-limit workloads"
        echo
        echo "Run by the suite after everything above was stopped: \`$CONN_CMD\` (loopback only; the"
        echo "simulated data-centre network and the big-topology emulation: \`make bench-connections\`,"
        echo "[RESULTS-connections.md](RESULTS-connections.md)). Its report, headings one level down:"
        echo
        sed '1d; s/^#/##/' "$TMP/connections.md"
        echo
    else
        echo "## Per-request and rate-limit workloads"
        echo
        echo "$CONN_NOTE"
        echo
    fi
    echo "## The cost of one client"
    echo
    if [[ $CROWD == 1 ]]; then
        echo "Run by the suite at the end: \`$CROWD_CMD\` (alone: \`make bench-crowd\`, which writes"
        echo "[RESULTS-crowd.md](RESULTS-crowd.md)). Its report, headings one level down:"
        echo
        sed '1d; s/^#/##/' "$TMP/crowd.md"
    else
        echo "$CROWD_NOTE"
    fi
    echo
    echo "## The near cache"
    echo
    if [[ $NEARCACHE == 1 ]]; then
        echo "Run by the suite last: \`bench/nearcache.sh\` (alone: \`make bench-nearcache\`), which wrote"
        echo "[RESULTS-nearcache.md](RESULTS-nearcache.md). Its report, headings one level down:"
        echo
        sed '1d; s/^#/##/' "$NEAR_OUT"
    else
        echo "$NEAR_NOTE"
    fi
    echo
    echo "## Instructions per request against the targets (issue 45)"
    echo
    if [[ $CALLGRIND == 1 ]]; then
        echo "Run by the suite: \`bench/callgrind_targets.sh\`, which wrote [RESULTS-callgrind.md](RESULTS-callgrind.md):"
        echo
        sed '1,2d' "$CG_OUT"
    else
        echo "$CG_NOTE"
    fi
    echo
    echo "## Raw CSV (redis-benchmark --csv)"
    echo
    echo '```'
    for k in "${ORDER[@]}"; do
        grep -E '^"[^t]' "$TMP/$k.csv" | sed "s/^/$k: /" || true
    done
    echo '```'
} >"$REPORT"
cp "$REPORT" "$OUT"
log "wrote $OUT in $((SECONDS - BENCH_START)) s"
sed -n '/^## Targets/,/^## Setup/p' "$OUT" | sed '$d'
