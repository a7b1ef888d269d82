#!/usr/bin/env bash
# "The cost of one client" (`make bench-crowd`): what each connected client costs redcar, in front
# of a local 3+3 Redis Cluster, with nutcracker (twemproxy, bench/nutcracker.sh) alongside and a
# standalone redis-server as the reference where it applies:
#   1. CPU per command: redis-benchmark -c 50 -r 100000 -t get / -t set at -P 1 and -P 16; the
#      proxy's user + system CPU (/proc/PID/stat, all threads) over the run / requests, the system
#      (kernel) part of it, and ops/s;
#   2. RSS per idle client: bench/crowd.py opens N connections, one PING each, then holds them
#      idle; (VmRSS after - VmRSS before) / N, per N in CROWD_SIZES, each on a freshly started
#      proxy (and redis-server direct);
#   3. the active rate with the crowd: the same redis-benchmark -P 1 GET run before the crowd of
#      CROWD_ACTIVE_SIZE connects and again while it is connected and idle; the ratio;
#   4. memory given back: CROWD_BIG_CLIENTS clients each SET a CROWD_BIG_BYTES value (or each GET
#      one), then idle; RSS per client after, next to the idle crowd's figure;
# judges the targets and writes bench/RESULTS-crowd.md. The script and every process it starts run
# with the file-descriptor soft limit raised to the hard limit (ulimit -n).
#
# Env: CROWD_SIZES       (default "10000 15000") idle crowds to measure
#      CROWD_REQUESTS    (default 200000) requests per -P 1 run (CPU and active-rate runs)
#      CROWD_PIPELINED_REQUESTS (default 5 x CROWD_REQUESTS) requests per -P 16 run
#      CROWD_ACTIVE_REQUESTS (default CROWD_REQUESTS) requests per active-rate run (item 3)
#      CROWD_ACTIVE_SIZE (default: the first of CROWD_SIZES) the crowd of the active-rate runs
#      CROWD_ROUNDS      (default 1) every measurement this many times; the median is reported
#      CROWD_NUTCRACKER  (default 1) 0 skips nutcracker
#      CROWD_CLIENTS     (default 50) redis-benchmark -c
#      CROWD_KEYSPACE    (default 100000) redis-benchmark -r
#      CROWD_BIG_CLIENTS (default 200) clients of item 4; 0 skips it
#      CROWD_BIG_BYTES   (default 1048576) the value each of them SETs or GETs
#      CROWD_BIG_SLACK_KB (default 8) item 4 is met when KB per client after the big value is at
#                        most the idle crowd's KB per client plus this
#      CROWD_SETTLE      (default 1) seconds between the crowd's last reply and reading RSS
#      CROWD_BIG_SETTLE  (default 3) the same for item 4 (allocators return memory lazily)
#      CROWD_CONCURRENCY (default 256) connections bench/crowd.py has between connect and reply
#      CROWD_BIG_CONCURRENCY (default 32) the same for item 4 (200 x 1 MB at once overran redcar's
#                        1 s op_timeout on the 2-core box: the test is what stays after, not a flood)
#      CROWD_RUN_TIMEOUT (default 120) seconds before one redis-benchmark run or crowd is given up
#      CROWD_OUT         (default bench/RESULTS-crowd.md)
#      REDCAR_BIN        (default target/release/redcar; `make bench-crowd` builds it)
#      REDCAR_ARGS       extra redcar arguments (split on spaces)
#      CROWD_MAX_CONNECTIONS (default: the largest crowd + 1000) redcar's client.max_connections,
#                        passed in a --config file (the default 10000 would refuse the crowds)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

SIZES=${CROWD_SIZES:-10000 15000}
REQUESTS=${CROWD_REQUESTS:-200000}
PIPELINED_REQUESTS=${CROWD_PIPELINED_REQUESTS:-$((REQUESTS * 5))}
ACTIVE_REQUESTS=${CROWD_ACTIVE_REQUESTS:-$REQUESTS}
read -r FIRST_SIZE _ <<<"$SIZES"
ACTIVE_SIZE=${CROWD_ACTIVE_SIZE:-$FIRST_SIZE}
ROUNDS=${CROWD_ROUNDS:-1}
NUTCRACKER=${CROWD_NUTCRACKER:-1}
CLIENTS=${CROWD_CLIENTS:-50}
KEYSPACE=${CROWD_KEYSPACE:-100000}
BIG_CLIENTS=${CROWD_BIG_CLIENTS:-200}
BIG_BYTES=${CROWD_BIG_BYTES:-1048576}
BIG_SLACK_KB=${CROWD_BIG_SLACK_KB:-8}
SETTLE=${CROWD_SETTLE:-1}
BIG_SETTLE=${CROWD_BIG_SETTLE:-3}
CONCURRENCY=${CROWD_CONCURRENCY:-256}
BIG_CONCURRENCY=${CROWD_BIG_CONCURRENCY:-32}
RUN_TIMEOUT=${CROWD_RUN_TIMEOUT:-120}
OUT=${CROWD_OUT:-$ROOT/bench/RESULTS-crowd.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
CLK_TCK=$(getconf CLK_TCK)
# The targets (the script judges these; see "Targets" in the report).
CPU_P1_US=5.0
CPU_P16_US=0.9
IDLE_KB=2
ACTIVE_RATIO=0.9

for tool in redis-server redis-cli redis-benchmark python3 timeout; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"
[[ -n $SIZES ]] || die "CROWD_SIZES is empty"
MAX_SIZE=0
for v in $SIZES; do
    [[ $v =~ ^[1-9][0-9]*$ ]] || die "CROWD_SIZES: '$v' is not a whole number"
    ((v <= MAX_SIZE)) || MAX_SIZE=$v
done
for v in REQUESTS PIPELINED_REQUESTS ACTIVE_REQUESTS ACTIVE_SIZE ROUNDS CLIENTS KEYSPACE BIG_CLIENTS \
    BIG_BYTES BIG_SLACK_KB SETTLE BIG_SETTLE CONCURRENCY BIG_CONCURRENCY RUN_TIMEOUT; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "CROWD_$v must be a whole number"
done
((ROUNDS >= 1 && REQUESTS >= 1 && PIPELINED_REQUESTS >= 1 && ACTIVE_REQUESTS >= 1)) ||
    die "CROWD_ROUNDS and the request counts must be at least 1"
MAX_CONNECTIONS=${CROWD_MAX_CONNECTIONS:-$((MAX_SIZE + 1000))}

# The interpreter itself, not a version manager's shim: a shim may run python as its child, and
# then stopping the PID we hold would leave the crowd connected.
PY=$(python3 -c 'import sys; print(sys.executable)')

# File descriptors: every process started from here inherits the raised soft limit.
FD_HARD=$(ulimit -Hn)
[[ $FD_HARD == unlimited ]] && FD_HARD=$(cat /proc/sys/fs/nr_open)
ulimit -n "$FD_HARD" || die "could not raise the file-descriptor soft limit to the hard limit $FD_HARD"
FD_SOFT=$(ulimit -Sn)
((FD_SOFT >= MAX_SIZE + 200)) ||
    die "a crowd of $MAX_SIZE needs about $((MAX_SIZE + 200)) file descriptors per process; ulimit -Hn is $FD_HARD"
# Local ports: every crowd connection to one address needs its own ephemeral port.
read -r PORT_LO PORT_HI </proc/sys/net/ipv4/ip_local_port_range
PORT_SPAN=$((PORT_HI - PORT_LO + 1))
((MAX_SIZE + CLIENTS + 500 <= PORT_SPAN)) ||
    die "a crowd of $MAX_SIZE needs more local ports than the ephemeral range $PORT_LO-$PORT_HI ($PORT_SPAN)"
if ((MAX_CONNECTIONS < MAX_SIZE + CLIENTS + 10)); then
    die "CROWD_MAX_CONNECTIONS=$MAX_CONNECTIONS leaves no room for the crowd of $MAX_SIZE and $CLIENTS benchmark clients"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-crowd.XXXXXX")
mkdir -p "$TMP/runs" "$TMP/csv"
declare -A TPID TPORT
CROWD_PID=""
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n $CROWD_PID ]] && stop_pid "$CROWD_PID" crowd.py
    [[ -n ${TPID[redcar]:-} ]] && stop_pid "${TPID[redcar]}" redcar
    [[ -n ${TPID[redis]:-} ]] && stop_pid "${TPID[redis]}" redis-server
    "$ROOT/bench/nutcracker.sh" stop "$TMP/nutcracker" 2>/dev/null || true
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    ((rc == 0)) || printf 'bench/crowd.sh failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
START=$SECONDS

ensure_nutcracker_or_skip "$TMP" CROWD_NUTCRACKER
PROXIES=(redcar)
[[ $NUTCRACKER == 1 ]] && PROXIES+=(nutcracker)

log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
CLUSTER_PORT=$(head -n 1 "$TMP/cluster/ports")

printf 'client:\n  max_connections: %s\n  idle_timeout: 0s\n' "$MAX_CONNECTIONS" >"$TMP/redcar-crowd.yaml"
TIMEOUT=(timeout "$RUN_TIMEOUT")

# ---------------------------------------------------------------- the processes under test
# start_target redcar|nutcracker|redis: a fresh process (so each RSS figure starts from the same
# state), ready and warmed up (SET + GET through it: its node connections are open).
REDCAR_CMD=()
REDIS_CMD=()
FD_LIMITS=()
start_target() {
    local t=$1 port admin pid
    case $t in
    redcar)
        port=$(free_port 8000 11000) || die "no free port" # below the ephemeral range
        admin=$(free_port 11000 12000) || die "no free port"
        # shellcheck disable=SC2206 # REDCAR_ARGS is meant to split
        REDCAR_CMD=("$REDCAR_BIN" --listen "127.0.0.1:$port" --cluster "$SEEDS" --admin "127.0.0.1:$admin"
            --config "$TMP/redcar-crowd.yaml" ${REDCAR_ARGS:-})
        log "starting ${REDCAR_CMD[*]}"
        "${REDCAR_CMD[@]}" </dev/null >"$TMP/redcar.log" 2>&1 &
        pid=$!
        TPID[redcar]=$pid
        wait_redcar_ready "$pid" "$admin" "$TMP/redcar.log"
        ;;
    nutcracker)
        log "starting nutcracker over 3 plain redis-servers"
        "$ROOT/bench/nutcracker.sh" start "$TMP/nutcracker" 3
        port=$(cat "$TMP/nutcracker/port")
        pid=$(cat "$TMP/nutcracker/nutcracker.pid")
        TPID[nutcracker]=$pid
        ;;
    redis)
        port=$(free_port 20000 32000) || die "no free port"
        mkdir -p "$TMP/redis"
        # maxclients: Redis's default 10000 would refuse the crowd; it keeps 32 descriptors spare.
        REDIS_CMD=(redis-server --port "$port" --bind 127.0.0.1 --protected-mode no --save "" --appendonly no
            --maxclients "$((FD_SOFT - 32))")
        log "starting ${REDIS_CMD[*]}"
        "${REDIS_CMD[@]}" --daemonize no --dir "$TMP/redis" --logfile "$TMP/redis/redis.log" \
            </dev/null >/dev/null 2>&1 &
        pid=$!
        TPID[redis]=$pid
        wait_for 10 "redis-server on port $port" redis-cli -p "$port" PING
        ;;
    esac
    TPORT[$t]=$port
    "${TIMEOUT[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -n 5000 -c "$CLIENTS" \
        -r "$KEYSPACE" -q >/dev/null 2>&1 || log "warning: warm-up through $t failed"
    if [[ " ${FD_LIMITS[*]} " != *" $t:"* ]]; then
        FD_LIMITS+=("$t:$(awk '/^Max open files/ { print $4 "/" $5 }' "/proc/$pid/limits")")
    fi
    if [[ $t == redcar && -z ${REDCAR_FD_LOG+x} ]]; then
        REDCAR_FD_LOG=$(grep -i -m 1 -E 'file descriptor|nofile|open files|fd limit|rlimit' "$TMP/redcar.log" | sed 's/\x1b\[[0-9;]*m//g' || true)
    fi
}
stop_target() {
    local t=$1
    case $t in
    redcar) stop_pid "${TPID[redcar]}" redcar ;;
    nutcracker) "$ROOT/bench/nutcracker.sh" stop "$TMP/nutcracker" ;;
    redis) stop_pid "${TPID[redis]}" redis-server ;;
    esac
    TPID[$t]=""
}

# ---------------------------------------------------------------- the crowd helper
CROWD_CMDS=()
# crowd_start TARGET COUNT MODE: bench/crowd.py against TARGET; returns once every connection has
# its reply, dies if any failed for good. Sets CROWD_PID, CROWD_SECONDS, CROWD_RETRIES.
crowd_start() {
    local t=$1 n=$2 mode=$3 line deadline=$((SECONDS + RUN_TIMEOUT + 10))
    local cmd=("$PY" "$ROOT/bench/crowd.py" --port "${TPORT[$t]}" --count "$n" --mode "$mode"
        --concurrency "$([[ $mode == ping ]] && echo "$CONCURRENCY" || echo "$BIG_CONCURRENCY")" --timeout "$RUN_TIMEOUT")
    [[ $mode == ping ]] || cmd+=(--value-bytes "$BIG_BYTES" --key "crowd:$mode")
    local shown="bench/crowd.py ${cmd[*]:2}"
    local generic=${shown/--port ${TPORT[$t]}/--port PORT}
    [[ " ${CROWD_CMDS[*]} " == *" $generic "* ]] || CROWD_CMDS+=("$generic")
    log "crowd: $shown ($t)"
    rm -f "$TMP/crowd.out" "$TMP/crowd.err" # so the wait below cannot see the last crowd's line
    "${cmd[@]}" >"$TMP/crowd.out" 2>"$TMP/crowd.err" &
    CROWD_PID=$!
    until [[ -s $TMP/crowd.out && $(tail -c 1 "$TMP/crowd.out") == "" ]]; do
        kill -0 "$CROWD_PID" 2>/dev/null || break
        if ((SECONDS > deadline)); then
            cat "$TMP/crowd.err" >&2
            die "bench/crowd.py did not report within $((RUN_TIMEOUT + 10)) s ($t, $n clients)"
        fi
        sleep 0.1
    done
    line=$(head -n 1 "$TMP/crowd.out" 2>/dev/null || true)
    if [[ -z $line ]] || ! read -r CROWD_ANSWERED CROWD_SECONDS CROWD_RETRIES < <(
        "$PY" -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["ready"]
print(d["answered"], d["seconds"], d["retries"])' "$line" 2>/dev/null
    ); then
        cat "$TMP/crowd.err" >&2
        die "only part of the crowd of $n connected to $t and answered: ${line:-bench/crowd.py exited}"
    fi
    ((CROWD_ANSWERED == n)) || die "crowd: $CROWD_ANSWERED of $n answered"
    log "  $n clients connected and answered in $CROWD_SECONDS s ($CROWD_RETRIES retries)"
}
# crowd_alive: print "ALIVE CLOSED" of the held crowd (bench/crowd.py checks each connection).
crowd_alive() {
    local before deadline=$((SECONDS + 30))
    before=$(wc -l <"$TMP/crowd.out")
    kill -USR1 "$CROWD_PID"
    until (($(wc -l <"$TMP/crowd.out") > before)); do
        ((SECONDS < deadline)) || die "bench/crowd.py did not answer SIGUSR1"
        sleep 0.1
    done
    "$PY" -c 'import json, sys; d = json.loads(sys.argv[1]); print(d["alive"], d["closed"] + d["unexpected"])' \
        "$(tail -n 1 "$TMP/crowd.out")"
}
crowd_stop() {
    stop_pid "$CROWD_PID" crowd.py
    CROWD_PID=""
}

# ---------------------------------------------------------------- measuring helpers
# csv_field FILE rps|p50|p99 -> from a redis-benchmark CSV (its one data row; p50/p99 in ms).
csv_field() {
    local col
    case $2 in rps) col=2 ;; p50) col=5 ;; p99) col=7 ;; esac
    awk -F'","' -v c="$col" '/^"/ && $1 != "\"test" { gsub(/"/, "", $c); print $c; exit }' "$1"
}
# bench_run TARGET NAME N DEPTH TEST: one redis-benchmark run; prints "rps p50 p99 ticks
# system_ticks" (the CPU ticks the target's process spent meanwhile, and the kernel's part), keeps the CSV as $TMP/csv/NAME.csv and the
# command line (port left out) in $TMP/bench-cmds. Run it in $(...): a failure stops the script.
bench_run() {
    local t=$1 name=$2 n=$3 depth=$4 test=$5 t0 t1 s0 s1 cmd
    cmd=(redis-benchmark -h 127.0.0.1 -p "${TPORT[$t]}" -c "$CLIENTS" -n "$n" -r "$KEYSPACE" -P "$depth" -t "$test" --csv)
    local shown="${cmd[*]}"
    echo "${shown/-p ${TPORT[$t]}/-p PORT}" >>"$TMP/bench-cmds"
    t0=$(cpu_ticks "${TPID[$t]}")
    s0=$(cpu_ticks_system "${TPID[$t]}")
    if ! "${TIMEOUT[@]}" "${cmd[@]}" >"$TMP/csv/$name.csv" 2>"$TMP/csv/$name.err"; then
        tail -n 20 "$TMP/csv/$name.err" >&2
        die "redis-benchmark failed: $name"
    fi
    t1=$(cpu_ticks "${TPID[$t]}")
    s1=$(cpu_ticks_system "${TPID[$t]}")
    echo "$(csv_field "$TMP/csv/$name.csv" rps) $(csv_field "$TMP/csv/$name.csv" p50) $(csv_field "$TMP/csv/$name.csv" p99) $((t1 - t0)) $((s1 - s0))"
}
rss_kb() { proc_status_kb "${TPID[$1]}" VmRSS; }
hwm_kb() { proc_status_kb "${TPID[$1]}" VmHWM; }
# pick COL KEY -> the file $TMP/runs/KEY.rN whose column COL is the median over the rounds (the
# lower middle one for an even count), so every figure of a row comes from the same run.
pick() {
    local col=$1 f
    for f in "$TMP/runs/$2".r*; do
        [[ -f $f ]] && echo "$(awk -v c="$col" '{ print $c; exit }' "$f") $f"
    done | sort -g | awk '{ run[NR] = $2 } END { if (NR > 0) print run[int((NR + 1) / 2)] }'
}
get() { # KEY COL -> column COL of the reported round of KEY (empty if not measured)
    local f
    f=$(pick 1 "$1")
    [[ -n $f ]] && awk -v c="$2" '{ print $c; exit }' "$f"
    return 0
}
calc() { # FORMAT EXPR A B -> printf FORMAT of the awk EXPR on a=A, b=B (empty if A or B is missing)
    [[ -n ${3:-} && -n ${4:-} ]] || return 0
    awk -v a="$3" -v b="$4" "BEGIN { printf \"$1\", $2 }" 2>/dev/null || true
}
ratio() { [[ -n ${1:-} && -n ${2:-} ]] && awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 != 0) printf "%.2f", a / b }'; return 0; }

# ---------------------------------------------------------------- 1. CPU per command
log "1. CPU per command"
for t in "${PROXIES[@]}"; do start_target "$t"; done
CPU_TESTS=()
for ((r = 1; r <= ROUNDS; r++)); do
    for depth in 1 16; do
        n=$REQUESTS
        ((depth == 1)) || n=$PIPELINED_REQUESTS
        for test in get set; do
            for t in "${PROXIES[@]}"; do
                key=cpu-$t-$depth-$test
                [[ " ${CPU_TESTS[*]} " == *" $depth-$test "* ]] || CPU_TESTS+=("$depth-$test")
                res=$(bench_run "$t" "$key.r$r" "$n" "$depth" "$test")
                read -r rps p50 p99 ticks sys_ticks <<<"$res"
                us=$(awk -v t="$ticks" -v hz="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.3f", t / hz * 1e6 / n }')
                sys_us=$(awk -v t="$sys_ticks" -v hz="$CLK_TCK" -v n="$n" 'BEGIN { printf "%.3f", t / hz * 1e6 / n }')
                # columns: µs/command ops/s p50 p99 requests ticks system-µs/command
                echo "$us $rps $p50 $p99 $n $ticks $sys_us" >"$TMP/runs/$key.r$r"
                log "  $t -P $depth ${test^^}: $rps ops/s, $us µs CPU per command ($sys_us in the kernel)"
            done
        done
    done
done
for t in "${PROXIES[@]}"; do stop_target "$t"; done

# ---------------------------------------------------------------- 2 + 3. the idle crowd
log "2. RSS per idle client; 3. active rate with the crowd of $ACTIVE_SIZE"
CROWD_TARGETS=(redis "${PROXIES[@]}")
for ((r = 1; r <= ROUNDS; r++)); do
    for n in $SIZES; do
        for t in "${CROWD_TARGETS[@]}"; do
            start_target "$t"
            active=0
            [[ $t != redis && $n == "$ACTIVE_SIZE" ]] && active=1
            if ((active)); then
                res=$(bench_run "$t" "active-$t-$n-without.r$r" "$ACTIVE_REQUESTS" 1 get)
                read -r w_rps w_p50 w_p99 _ <<<"$res"
                log "  $t GET -P 1 without the crowd: $w_rps ops/s"
            fi
            sleep "$SETTLE"
            before=$(rss_kb "$t")
            crowd_start "$t" "$n" ping
            sleep "$SETTLE"
            after=$(rss_kb "$t")
            hwm=$(hwm_kb "$t")
            kb=$(awk -v a="$after" -v b="$before" -v n="$n" 'BEGIN { printf "%.2f", (a - b) / n }')
            log "  $t: RSS $before -> $after kB with $n idle clients: $kb KB per client"
            if ((active)); then
                res=$(bench_run "$t" "active-$t-$n-with.r$r" "$ACTIVE_REQUESTS" 1 get)
                read -r c_rps c_p50 c_p99 _ <<<"$res"
                log "  $t GET -P 1 with $n idle clients: $c_rps ops/s"
                # columns: ratio ops/s-without ops/s-with p50-without p50-with p99-without p99-with
                echo "$(ratio "$c_rps" "$w_rps") $w_rps $c_rps $w_p50 $c_p50 $w_p99 $c_p99" >"$TMP/runs/active-$t-$n.r$r"
            fi
            res=$(crowd_alive)
            read -r alive closed <<<"$res"
            ((closed == 0)) || log "  warning: $t closed $closed of the $n idle clients"
            crowd_stop
            stop_target "$t"
            # columns: KB/client before-kB after-kB peak-kB connect-seconds alive closed retries
            echo "$kb $before $after $hwm $CROWD_SECONDS $alive $closed $CROWD_RETRIES" >"$TMP/runs/crowd-$t-$n.r$r"
        done
    done
done

# ---------------------------------------------------------------- 4. a big value, then idle
BIG_MODES=()
((BIG_CLIENTS == 0)) || BIG_MODES=(set get)
preset_big() { # TARGET: the value every GET client reads, written behind the target (not through it)
    local t=$1 p
    local value_cmd=(head -c "$BIG_BYTES" /dev/zero)
    case $t in
    redcar) "${value_cmd[@]}" | tr '\0' x | redis-cli -c -h 127.0.0.1 -p "$CLUSTER_PORT" -x SET crowd:get >/dev/null ;;
    redis) "${value_cmd[@]}" | tr '\0' x | redis-cli -h 127.0.0.1 -p "${TPORT[redis]}" -x SET crowd:get >/dev/null ;;
    nutcracker) # on each of its servers: whichever one the key hashes to has it
        while read -r p; do
            "${value_cmd[@]}" | tr '\0' x | redis-cli -h 127.0.0.1 -p "$p" -x SET crowd:get >/dev/null
        done < <(sed -n 's/^ *- 127\.0\.0\.1:\([0-9]*\):.*/\1/p' "$TMP/nutcracker/nutcracker.yml")
        ;;
    esac
}
if ((${#BIG_MODES[@]} > 0)); then
    log "4. $BIG_CLIENTS clients with a $BIG_BYTES-byte SET or GET each, then idle"
fi
for ((r = 1; r <= ROUNDS; r++)); do
    for mode in "${BIG_MODES[@]}"; do
        targets=("${PROXIES[@]}")
        # A SET into redis-server stores the values: its RSS grows by them, not by the clients.
        [[ $mode == get ]] && targets+=(redis)
        for t in "${targets[@]}"; do
            start_target "$t"
            [[ $mode == get ]] && preset_big "$t"
            sleep "$SETTLE"
            before=$(rss_kb "$t")
            crowd_start "$t" "$BIG_CLIENTS" "$mode"
            sleep "$BIG_SETTLE"
            after=$(rss_kb "$t")
            hwm=$(hwm_kb "$t")
            res=$(crowd_alive)
            read -r alive closed <<<"$res"
            ((closed == 0)) || log "  warning: $t closed $closed of the $BIG_CLIENTS clients"
            crowd_stop
            stop_target "$t"
            kb=$(awk -v a="$after" -v b="$before" -v n="$BIG_CLIENTS" 'BEGIN { printf "%.2f", (a - b) / n }')
            log "  $t ${mode^^}: RSS $before -> $after kB (peak $hwm) after $BIG_CLIENTS clients went idle: $kb KB per client"
            echo "$kb $before $after $hwm $CROWD_SECONDS $alive $closed" >"$TMP/runs/big-$mode-$t.r$r"
        done
    done
done

# ---------------------------------------------------------------- targets
TARGET_ROWS=()
TARGETS_MET=0
TARGETS_TOTAL=0
target() { # NAME VALUE OP LIMIT DETAIL: met when VALUE OP LIMIT
    local name=$1 value=$2 op=$3 limit=$4 detail=$5 verdict
    TARGETS_TOTAL=$((TARGETS_TOTAL + 1))
    if [[ -z $value || -z $limit ]]; then
        verdict="not measured"
    elif awk -v v="$value" -v l="$limit" -v op="$op" 'BEGIN { exit !((op == ">=") ? v >= l : v <= l) }'; then
        verdict="**met**"
        TARGETS_MET=$((TARGETS_MET + 1))
    else
        verdict="not met"
    fi
    TARGET_ROWS+=("| $name | $detail | $verdict |")
}
for dl in "1 $CPU_P1_US" "16 $CPU_P16_US"; do
    read -r depth limit <<<"$dl"
    for test in get set; do
        v=$(get "cpu-redcar-$depth-$test" 1)
        target "redcar CPU per \`-P $depth\` ${test^^} ≤ $limit µs" "$v" "<=" "$limit" \
            "${v:-?} µs per command ($(get "cpu-redcar-$depth-$test" 6) ticks of 1/$CLK_TCK s over $(get "cpu-redcar-$depth-$test" 5) commands; $(get "cpu-redcar-$depth-$test" 7) µs of it in the kernel)"
    done
done
for n in $SIZES; do
    v=$(get "crowd-redcar-$n" 1)
    target "redcar RSS per idle client at $n clients ≤ $IDLE_KB KB" "$v" "<=" "$IDLE_KB" \
        "${v:-?} KB per client (RSS $(calc '%.1f' 'a / 1024' "$(get "crowd-redcar-$n" 2)" 1) → $(calc '%.1f' 'a / 1024' "$(get "crowd-redcar-$n" 3)" 1) MB)"
done
v=$(get "active-redcar-$ACTIVE_SIZE" 1)
target "redcar \`-P 1\` GET ops/s with $ACTIVE_SIZE idle clients ≥ ${ACTIVE_RATIO}× without" "$v" ">=" "$ACTIVE_RATIO" \
    "$(get "active-redcar-$ACTIVE_SIZE" 3) / $(get "active-redcar-$ACTIVE_SIZE" 2) ops/s = ${v:-?}×"
IDLE_REF=$(get "crowd-redcar-$FIRST_SIZE" 1)
for mode in "${BIG_MODES[@]}"; do
    v=$(get "big-$mode-redcar" 1)
    limit=$(calc '%.2f' 'a + b' "$IDLE_REF" "$BIG_SLACK_KB")
    target "redcar memory per client after a $((BIG_BYTES / 1024)) KB ${mode^^} comes back near the idle figure (≤ idle + $BIG_SLACK_KB KB)" \
        "$v" "<=" "$limit" "${v:-?} KB per client after going idle; idle crowd ${IDLE_REF:-?} KB per client (limit ${limit:-?})"
done

# ---------------------------------------------------------------- report
label() {
    case $1 in
    redis) echo "redis-server (direct)" ;;
    nutcracker) echo "nutcracker" ;;
    *) echo "$1" ;;
    esac
}
mb() { calc '%.1f' 'a / 1024' "${1:-}" 1; }
REPORT="$TMP/RESULTS-crowd.md"
{
    echo "# The cost of one client (bench/crowd.sh)"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); the run took $((SECONDS - START)) s"
    echo "- command: \`$(env | grep -E '^(CROWD_|REDCAR_BIN=|REDCAR_ARGS=)' | sort | tr '\n' ' ')bench/crowd.sh\`"
    report_machine
    echo "- redcar: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) ($REDCAR_BIN)"
    echo "- file descriptors: \`ulimit -n\` raised to the hard limit $FD_HARD for the script and everything it starts; max open files (soft/hard) as each process saw them: ${FD_LIMITS[*]}"
    if [[ -n $REDCAR_FD_LOG ]]; then
        echo "- redcar's log on its descriptor limit: \`$REDCAR_FD_LOG\`"
    else
        echo "- redcar's log on its descriptor limit: none (no start-up line about it)"
    fi
    echo "- local ports: ephemeral range $PORT_LO–$PORT_HI ($PORT_SPAN ports) for a largest crowd of $MAX_SIZE"
    echo "- rounds: $ROUNDS (each figure is the round with the median of the judged column)"
    echo
    echo "## Targets"
    echo
    echo "$TARGETS_MET of $TARGETS_TOTAL met, judged by bench/crowd.sh from the tables below."
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    printf '%s\n' "${TARGET_ROWS[@]}"
    echo
    echo "## 1. CPU per command"
    echo
    echo "\`redis-benchmark -c $CLIENTS -r $KEYSPACE -t get|set -P 1|16\` ($REQUESTS requests at \`-P 1\`, $PIPELINED_REQUESTS at \`-P 16\`)"
    echo "through each proxy, both running side by side and warmed up; CPU is the proxy process's user + system"
    echo "time (all threads, \`/proc/PID/stat\`, $CLK_TCK ticks/s) over the run, divided by the requests. One tick"
    echo "is $(calc '%.3f' '1e6 / a / b' "$CLK_TCK" "$REQUESTS") µs per command at \`-P 1\` and $(calc '%.3f' '1e6 / a / b' "$CLK_TCK" "$PIPELINED_REQUESTS") µs at \`-P 16\`."
    echo "\"of it kernel\" is the system part (field 15 alone): the loopback TCP path, wake-ups and"
    echo "context switches, which any proxy on this machine pays per read and per write."
    echo
    echo "| -P | test | redcar ops/s | redcar CPU µs/cmd | of it kernel | nutcracker ops/s | nutcracker CPU µs/cmd | of it kernel | CPU redcar / nutcracker | ops/s redcar / nutcracker |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for dt in "${CPU_TESTS[@]}"; do
        depth=${dt%-*} test=${dt#*-}
        rr=$(get "cpu-redcar-$depth-$test" 2) ru=$(get "cpu-redcar-$depth-$test" 1) rk=$(get "cpu-redcar-$depth-$test" 7)
        nr=$(get "cpu-nutcracker-$depth-$test" 2) nu=$(get "cpu-nutcracker-$depth-$test" 1) nk=$(get "cpu-nutcracker-$depth-$test" 7)
        echo "| $depth | ${test^^} | $rr | $ru | $rk | $nr | $nu | $nk | $(ratio "$ru" "$nu") | $(ratio "$rr" "$nr") |"
    done
    echo
    echo "## 2. RSS per idle client"
    echo
    echo "Each row is a freshly started process, warmed up (5,000 SET + GET from $CLIENTS clients); VmRSS"
    echo "(\`/proc/PID/status\`) is read ${SETTLE} s before bench/crowd.py connects N clients (one \`PING\` each, then"
    echo "idle) and ${SETTLE} s after the last \`+PONG\`. KB per client = (after − before) / N. Peak is VmHWM."
    echo "\"alive\": connections still open when checked after the measurement (the crowd's own check)."
    echo
    echo "| clients | target | RSS before MB | RSS after MB | added MB | KB per client | × redis-server | × nutcracker | peak MB | connect s | alive |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for n in $SIZES; do
        base=$(get "crowd-redis-$n" 1)
        nck=$(get "crowd-nutcracker-$n" 1)
        for t in "${CROWD_TARGETS[@]}"; do
            k=crowd-$t-$n
            kb=$(get "$k" 1)
            vs_redis="" vs_nc=""
            [[ $t == redis ]] || vs_redis=$(ratio "$kb" "$base")
            [[ $t == nutcracker ]] || vs_nc=$(ratio "$kb" "$nck")
            echo "| $n | $(label "$t") | $(mb "$(get "$k" 2)") | $(mb "$(get "$k" 3)") |" \
                "$(calc '%.1f' '(a - b) / 1024' "$(get "$k" 3)" "$(get "$k" 2)") | $kb | $vs_redis | $vs_nc |" \
                "$(mb "$(get "$k" 4)") | $(get "$k" 5) | $(get "$k" 6) / $n |"
        done
    done
    echo
    echo "## 3. Active rate with the crowd"
    echo
    echo "\`redis-benchmark -c $CLIENTS -P 1 -t get -r $KEYSPACE -n $ACTIVE_REQUESTS\` on the same process, before the"
    echo "crowd of $ACTIVE_SIZE connects and again while it is connected and idle."
    echo
    echo "| target | idle clients | ops/s without | ops/s with | with / without | p50 ms without → with | p99 ms without → with |"
    echo "|---|---:|---:|---:|---:|---|---|"
    for t in "${PROXIES[@]}"; do
        k=active-$t-$ACTIVE_SIZE
        echo "| $(label "$t") | $ACTIVE_SIZE | $(get "$k" 2) | $(get "$k" 3) | $(get "$k" 1) | $(get "$k" 4) → $(get "$k" 5) | $(get "$k" 6) → $(get "$k" 7) |"
    done
    echo
    if ((${#BIG_MODES[@]} > 0)); then
        echo "## 4. A client that moved a big value and went idle"
        echo
        echo "$BIG_CLIENTS clients ($BIG_CONCURRENCY at a time), each \`SET crowd:set:<i>\` with a $BIG_BYTES-byte value (or each"
        echo "\`GET crowd:get\`, a $BIG_BYTES-byte value written beforehand behind the proxy), then idle; VmRSS"
        echo "${BIG_SETTLE} s after the last reply against VmRSS before they connected (fresh process, warmed up)."
        echo "\"× idle\" compares with the plain idle crowd of $FIRST_SIZE above; \"% of the value kept\" is"
        echo "KB per client over the value's size. redis-server direct has no SET row: it stores the values."
        echo
        echo "| test | target | RSS before MB | RSS after MB | peak MB | KB per client after | idle crowd KB per client | × idle | % of the value kept | alive |"
        echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        for mode in "${BIG_MODES[@]}"; do
            for t in "${PROXIES[@]}" redis; do
                k=big-$mode-$t
                [[ -n $(pick 1 "$k") ]] || continue
                kb=$(get "$k" 1)
                idle=$(get "crowd-$t-$FIRST_SIZE" 1)
                echo "| ${mode^^} $((BIG_BYTES / 1024)) KB | $(label "$t") | $(mb "$(get "$k" 2)") | $(mb "$(get "$k" 3)") |" \
                    "$(mb "$(get "$k" 4)") | $kb | $idle | $(ratio "$kb" "$idle") |" \
                    "$(calc '%.1f' 'a * 1024 * 100 / b' "$kb" "$BIG_BYTES") | $(get "$k" 6) / $BIG_CLIENTS |"
            done
        done
        echo
    fi
    echo "## Commands"
    echo
    echo '```'
    echo "cluster:    scripts/cluster.sh start DIR  (3 primaries + 3 replicas): $SEEDS"
    echo "redcar:     ${REDCAR_CMD[*]}"
    echo "            with $(basename "$TMP")/redcar-crowd.yaml:"
    sed 's/^/              /' "$TMP/redcar-crowd.yaml"
    echo "redis:      $(printf '%q ' "${REDIS_CMD[@]}")"
    if [[ $NUTCRACKER == 1 ]]; then
        echo "nutcracker: bench/nutcracker.sh start DIR 3  (3 plain redis-servers), pool:"
        sed 's/^/  /' "$TMP/nutcracker/nutcracker.yml" 2>/dev/null || echo "  (stopped)"
    fi
    echo "warm-up:    redis-benchmark -h 127.0.0.1 -p PORT -t set,get -n 5000 -c $CLIENTS -r $KEYSPACE -q"
    awk '!seen[$0]++' "$TMP/bench-cmds"
    printf '%s\n' "${CROWD_CMDS[@]}"
    echo '```'
    echo
    echo "(ports and the nutcracker pool are those of the last process started; every row had a fresh one)"
} >"$REPORT"
cp "$REPORT" "$OUT"
log "wrote $OUT in $((SECONDS - START)) s"
sed -n '/^## Targets/,/^## Commands/p' "$OUT" | sed '$d'
