#!/usr/bin/env bash
# A/B probe: does an io_uring data plane cut a proxy's CPU per command? Runs the same minimal,
# single-threaded RESP forwarder (bench/uring-probe/) over epoll and over io_uring, redcar, and
# redis directly, against one standalone redis-server, and prints a markdown table.
#
#   bench/uring-probe.sh
#
# For PROBE_ROUNDS interleaved rounds (default 3), each mode in turn (a fresh proxy per round),
# runs `redis-benchmark -c 50 -r 100000 -q --csv` for -t set and -t get at -P 1 (PROBE_N1
# requests, default 300000) and -P 16 (PROBE_N16, default 2000000). Per run: ops/s; the proxy's
# CPU µs per command from /proc/PID/stat ticks and from `perf stat` task-clock, and its context
# switches per command; the redis-server's CPU µs per command (ticks). The table gives the
# median over rounds and the min–max.
# Env: PROBE_ROUNDS, PROBE_N1, PROBE_N16, PROBE_TESTS (default "set get"), PROBE_PIPELINES
# (default "1 16"), PROBE_MODES (default "direct epoll uring redcar"; also uring-coop,
# uring-plain, uring-single: other io_uring setup flags / single-shot RECV), PROBE_SYSCALLS=1
# (also count syscalls per command with the raw_syscalls tracepoint: it slows syscalls a little,
# so leave it off for the CPU figures), REDCAR_ARGS (extra redcar flags).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
ROUNDS=${PROBE_ROUNDS:-3}
N1=${PROBE_N1:-300000}
N16=${PROBE_N16:-2000000}
TESTS=${PROBE_TESTS:-"set get"}
PIPELINES=${PROBE_PIPELINES:-"1 16"}
MODES=${PROBE_MODES:-"direct epoll uring redcar"}
SYSCALLS=${PROBE_SYSCALLS:-0}
REDCAR=$ROOT/target/release/redcar
PROBE=$ROOT/target/uring-probe/release/uring-probe
command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"
command -v redis-benchmark >/dev/null || die "redis-benchmark not found"
[[ $MODES != *redcar* || -x $REDCAR ]] || die "$REDCAR not built (cargo build --release)"

log "building the probe"
cargo build --release --quiet --manifest-path bench/uring-probe/Cargo.toml --target-dir target/uring-probe

WORK=$(mktemp -d -t redcar-uring-probe-XXXXXX)
REDIS_PID=
PROXY_PID=
PROXY_WORD=
PERF_PID=
cleanup() {
    [[ -n "$PERF_PID" ]] && kill -INT "$PERF_PID" 2>/dev/null && wait "$PERF_PID" 2>/dev/null
    [[ -n "$PROXY_PID" ]] && stop_pid "$PROXY_PID" "$PROXY_WORD"
    [[ -n "$REDIS_PID" ]] && stop_pid "$REDIS_PID" redis-server
    rm -rf "$WORK"
}
trap cleanup EXIT

is_pong() { [[ $(redis-cli -h 127.0.0.1 -p "$1" PING 2>/dev/null) == PONG ]]; }

RPORT=$(free_port) || die "no free port"
(cd "$WORK" && exec redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
    >"$WORK/redis.log" 2>&1) &
REDIS_PID=$!
wait_for 10 "redis-server on $RPORT" is_pong "$RPORT" || die "redis-server did not start"
# Fill the keyspace first, so every GET of every mode finds its key.
redis-benchmark -h 127.0.0.1 -p "$RPORT" -c 50 -r 100000 -n 300000 -P 16 -t set -q >/dev/null

cat >"$WORK/redcar.yaml" <<EOF
catch_all: one
backends:
  one:
    kind: standalone
    primary: 127.0.0.1:$RPORT
EOF

# start_proxy MODE: starts the proxy of MODE (none for direct); sets PORT, PROXY_PID, PROXY_WORD.
start_proxy() {
    local mode=$1 args=()
    if [[ $mode == direct ]]; then
        PORT=$RPORT
        return
    fi
    # A fresh port each time: an io_uring process's listening socket can outlive it briefly
    # (the ring is torn down asynchronously).
    PORT=$(free_port) || die "no free port"
    case $mode in
    redcar)
        # shellcheck disable=SC2086 # REDCAR_ARGS is meant to split
        "$REDCAR" --listen "127.0.0.1:$PORT" --config "$WORK/redcar.yaml" --log-level warn \
            ${REDCAR_ARGS:-} >"$WORK/$mode.log" 2>&1 &
        PROXY_WORD=redcar
        ;;
    epoll) args=(--mode epoll) ;;
    uring) args=(--mode uring) ;;
    uring-coop) args=(--mode uring --uring-flags coop) ;;
    uring-plain) args=(--mode uring --uring-flags plain) ;;
    uring-single) args=(--mode uring --uring-recv single) ;;
    *) die "unknown mode $mode" ;;
    esac
    if [[ $mode != redcar ]]; then
        "$PROBE" "${args[@]}" --listen "127.0.0.1:$PORT" --upstream "127.0.0.1:$RPORT" \
            >"$WORK/$mode.log" 2>&1 &
        PROXY_WORD=uring-probe
    fi
    PROXY_PID=$!
    if ! wait_for 30 "$mode on $PORT" is_pong "$PORT"; then
        cat "$WORK/$mode.log" >&2
        die "$mode did not start"
    fi
    # Correctness through the proxy: a write, a read back, a miss.
    local v="probe-$mode-$RANDOM"
    [[ $(redis-cli -h 127.0.0.1 -p "$PORT" SET "probe:$mode" "$v") == OK &&
        $(redis-cli -h 127.0.0.1 -p "$PORT" GET "probe:$mode") == "$v" &&
        $(redis-cli -h 127.0.0.1 -p "$PORT" EXISTS "probe:none") == 0 ]] ||
        die "$mode: SET/GET sanity check failed"
    if [[ $mode == uring* ]] && ! grep -qs 'kernel features' "$WORK/features.txt" 2>/dev/null; then
        grep 'kernel features' "$WORK/$mode.log" >"$WORK/features.txt" || true
    fi
}

stop_proxy() {
    [[ -n "$PROXY_PID" ]] || return 0
    kill -0 "$PROXY_PID" 2>/dev/null || {
        cat "$WORK/$1.log" >&2
        die "$1 died during the runs"
    }
    stop_pid "$PROXY_PID" "$PROXY_WORD"
    PROXY_PID=
}

EVENTS=task-clock,context-switches
[[ $SYSCALLS == 1 ]] && EVENTS+=,raw_syscalls:sys_enter
HZ=$(getconf CLK_TCK)
RESULTS=$WORK/results.tsv
: >"$RESULTS"

# machine_ticks: busy CPU of the whole machine so far (/proc/stat user+nice+system+irq+softirq).
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# busy_pct: the machine's busy CPU, percent of all cores, over 1 s (/proc/stat).
busy_pct() {
    local a b
    a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
        busy = y[1] - x[1]; idle = y[2] - x[2]; printf "%d", 100 * busy / (busy + idle + 1e-9) }'
}

# wait_quiet: the runs share 2 cores with whatever else runs here (a build would skew them):
# wait, up to PROBE_QUIET_WAIT seconds (default 900), until the machine is idle (< 10% busy).
QUIET_WAIT=${PROBE_QUIET_WAIT:-900}
NOISY_RUNS=0
wait_quiet() {
    local deadline=$((SECONDS + QUIET_WAIT)) b
    while b=$(busy_pct) && ((b >= 10)); do
        if ((SECONDS >= deadline)); then
            log "warning: machine still ${b}% busy; measuring anyway"
            NOISY_RUNS=$((NOISY_RUNS + 1))
            return 0
        fi
        log "machine ${b}% busy (another process); waiting"
        sleep 4
    done
}

# measure MODE TEST PIPELINE ROUND: one redis-benchmark run; appends a line to $RESULTS.
measure() {
    local mode=$1 test=$2 depth=$3 round=$4 n csv err
    n=$([[ $depth == 1 ]] && echo "$N1" || echo "$N16")
    local t0p=0 t1p=0 t0r t1r
    wait_quiet
    if [[ -n "$PROXY_PID" ]]; then
        perf stat -x, -e "$EVENTS" -p "$PROXY_PID" -o "$WORK/perf.txt" &
        PERF_PID=$!
        sleep 0.3 # let perf attach
        t0p=$(cpu_ticks "$PROXY_PID")
    fi
    t0r=$(cpu_ticks "$REDIS_PID")
    local m0 m1
    m0=$(machine_ticks)
    csv=$(/usr/bin/time -f '%e %U %S' -o "$WORK/bench.time" redis-benchmark -h 127.0.0.1 -p "$PORT" \
        -c 50 -r 100000 -n "$n" -P "$depth" -t "$test" -q --csv 2>"$WORK/bench.err" |
        grep -i "^\"$test\"" | tr -d '"') ||
        die "$mode $test -P $depth: redis-benchmark gave no result: $(head -c 500 "$WORK/bench.err")"
    m1=$(machine_ticks)
    t1r=$(cpu_ticks "$REDIS_PID")
    err=$(grep -ci error "$WORK/bench.err" || true)
    ((err == 0)) || die "$mode $test -P $depth: redis-benchmark reported errors: $(head -c 500 "$WORK/bench.err")"
    local perf_us=- cs=- sc=- proxy_us=-
    if [[ -n "$PROXY_PID" ]]; then
        t1p=$(cpu_ticks "$PROXY_PID")
        kill -INT "$PERF_PID"
        wait "$PERF_PID" || true
        PERF_PID=
        proxy_us=$(awk -v d=$((t1p - t0p)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }')
        read -r perf_us cs sc < <(awk -F, -v n="$n" '
            $3 == "task-clock" { tc = $1 * 1000 / n }
            $3 == "context-switches" { cs = $1 / n }
            $3 == "raw_syscalls:sys_enter" { sc = $1 / n }
            END { printf "%.3f %.3f %s\n", tc, cs, (sc == "" ? "-" : sprintf("%.3f", sc)) }' "$WORK/perf.txt")
    fi
    # CPU that none of the measured processes used (another session's build or tests): as a % of
    # one core over the run. Large values mean a disturbed run.
    local other
    other=$(awk -v m=$((m1 - m0)) -v p=$((t1p - t0p)) -v r=$((t1r - t0r)) -v hz="$HZ" \
        '{ o = m / hz - p / hz - r / hz - $2 - $3; if (o < 0) o = 0; printf "%.0f", 100 * o / $1 }' \
        "$WORK/bench.time")
    local redis_us
    redis_us=$(awk -v d=$((t1r - t0r)) -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.3f", d / hz * 1e6 / n }')
    local ops
    ops=$(cut -d, -f2 <<<"$csv")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$test" "$depth" "$round" "$ops" \
        "$proxy_us" "$perf_us" "$cs" "$sc" "$redis_us" "$other" >>"$RESULTS"
    log "round $round $mode $test -P $depth: $ops ops/s, proxy ${proxy_us} µs/cmd (ticks)" \
        "${perf_us} µs/cmd (task-clock), ${cs} cs/cmd, syscalls/cmd ${sc}; redis ${redis_us} µs/cmd;" \
        "other CPU ${other}%"
}

for ((round = 1; round <= ROUNDS; round++)); do
    for mode in $MODES; do
        start_proxy "$mode"
        for test in $TESTS; do
            for depth in $PIPELINES; do
                measure "$mode" "$test" "$depth" "$round"
            done
        done
        stop_proxy "$mode"
    done
done

echo
echo "## uring-probe: CPU per command, epoll vs io_uring vs redcar"
echo
echo "- command: \`PROBE_ROUNDS=$ROUNDS PROBE_MODES=\"$MODES\" bench/uring-probe.sh\`" \
    "(redis-benchmark -c 50 -r 100000; -P 1: $N1 requests, -P 16: $N16)"
echo "- machine: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr)," \
    "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ $MODES != *redcar* ]] ||
    echo "- redcar: $REDCAR (built $(date -r "$REDCAR" '+%F %T')), flags: --log-level warn ${REDCAR_ARGS:-(workers: default, one per core)}"
((NOISY_RUNS == 0)) || echo "- warning: $NOISY_RUNS runs started while the machine was busy with another process"
echo "- redis: $(redis-server --version | sed 's/ sha=.*//')"
[[ -s $WORK/features.txt ]] && echo "- io_uring: $(sed 's/^uring-probe: //' "$WORK/features.txt")"
echo "- median over $ROUNDS rounds (min–max); CPU µs/cmd: user+system CPU over the run / requests;" \
    "ticks = /proc/PID/stat ($HZ Hz), task-clock = perf stat; other CPU % = CPU the machine spent" \
    "outside the proxy, redis and redis-benchmark during the run, % of one core (noise from other work)"
echo
python3 - "$RESULTS" "$SYSCALLS" <<'PY'
import statistics, sys
rows = {}
order = []
for line in open(sys.argv[1]):
    mode, test, depth, _round, *vals = line.rstrip("\n").split("\t")
    key = (mode, test, depth)
    if key not in rows:
        rows[key] = []
        order.append(key)
    rows[key].append(vals)
syscalls = sys.argv[2] == "1"

def cell(values, fmt):
    if any(v == "-" for v in values):
        return "–"
    xs = [float(v) for v in values]
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"

head = ["mode", "test", "-P", "ops/s", "proxy CPU µs/cmd (ticks)", "proxy task-clock µs/cmd",
        "proxy ctx-sw/cmd"] + (["proxy syscalls/cmd"] if syscalls else []) + ["redis CPU µs/cmd (ticks)",
        "other CPU %"]
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
for mode, test, depth in order:
    v = list(zip(*rows[(mode, test, depth)]))
    cells = [mode, test, depth, cell(v[0], "{:.0f}"), cell(v[1], "{:.2f}"), cell(v[2], "{:.2f}"),
             cell(v[3], "{:.3f}")] + ([cell(v[4], "{:.3f}")] if syscalls else []) + [cell(v[5], "{:.2f}"), cell(v[6], "{:.0f}")]
    print("| " + " | ".join(cells) + " |")
PY
