#!/usr/bin/env bash
# Per-command CPU and syscalls of redcar and of the cluster's primaries, counted by `perf stat`
# (task-clock, context switches and syscall tracepoints) around one redis-benchmark run. Counts
# per command move far less with machine noise than ops/s do: use them, over interleaved rounds,
# to tell whether a change saved syscalls or CPU.
#
#   bench/syscalls.sh BIN [BIN...]
#
# Starts one 3+3 cluster (scripts/cluster.sh), then for each round and each BIN: redcar (default
# settings, plus REDCAR_ARGS), a 20,000-request warm-up, and for each scenario (test:pipeline:
# requests) `redis-benchmark -c SYSCALLS_CLIENTS -r 100000` under `perf stat`; test `mget10` is
# an MGET of 10 random keys, any other name a `redis-benchmark -t` test (`mset` sends 10 keys).
# Prints one line per run: ops/s, p50/p99, then per request: redcar's CPU µs, sendto, recvfrom,
# epoll_wait, futex and context switches; the primaries' CPU µs, read, write and context
# switches. Env:
# SYSCALLS_SCENARIOS (default "get:16:1000000 get:1:300000"), SYSCALLS_ROUNDS (default 3),
# SYSCALLS_CLIENTS (default 50), SYSCALLS_KEYS (default 100000: `-r`, the keys drawn from; 100 with
# a near-cache config admitting `key:` measures hits), REDCAR_ARGS. Needs perf with the syscalls
# tracepoints.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
SCENARIOS=${SYSCALLS_SCENARIOS:-"get:16:1000000 get:1:300000"}
ROUNDS=${SYSCALLS_ROUNDS:-3}
CLIENTS=${SYSCALLS_CLIENTS:-50}
KEYS=${SYSCALLS_KEYS:-100000}
[[ $# -ge 1 ]] || { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"

WORK=$(mktemp -d -t redcar-syscalls-XXXXXX)
REDCAR_PID=
cleanup() {
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID" redcar
    "$ROOT/scripts/cluster.sh" stop "$WORK/cluster" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

"$ROOT/scripts/cluster.sh" start "$WORK/cluster" 0 >/dev/null
SEEDS=$(cat "$WORK/cluster/seeds")
FIRST=$(cut -d, -f1 <<<"$SEEDS")
PRIMARY_PIDS=$(redis-cli -h 127.0.0.1 -p "${FIRST##*:}" CLUSTER NODES |
    awk '/master/ { split($2, a, "[:@]"); print a[2] }' |
    while read -r port; do redis-cli -p "$port" INFO server | tr -d '\r' | sed -n 's/^process_id://p'; done |
    paste -sd,)
EVENTS=task-clock,context-switches,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom
EVENTS+=,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_read,syscalls:sys_enter_write

for ((round = 1; round <= ROUNDS; round++)); do
    for BIN in "$@"; do
        PORT=$(free_port 8000 11000) || die "no free port"
        # shellcheck disable=SC2086 # REDCAR_ARGS is meant to split
        "$BIN" --listen "127.0.0.1:$PORT" --cluster "$SEEDS" --log-level warn ${REDCAR_ARGS:-} &
        REDCAR_PID=$!
        wait_for 10 "redcar on port $PORT" port_in_use "$PORT"
        redis-benchmark -p "$PORT" -t get -n 20000 -c "$CLIENTS" -r "$KEYS" -q >/dev/null 2>&1
        for scenario in $SCENARIOS; do
            IFS=: read -r test depth n <<<"$scenario"
            perf stat -x, -e "$EVENTS" -p "$REDCAR_PID" -o "$WORK/redcar.txt" & p1=$!
            perf stat -x, -e "$EVENTS" -p "$PRIMARY_PIDS" -o "$WORK/primaries.txt" & p2=$!
            sleep 0.3
            bench_test_args "$test"
            csv=$(redis-benchmark -p "$PORT" -n "$n" -c "$CLIENTS" -P "$depth" -r "$KEYS" --csv "${WHAT[@]}" |
                tail -n 1 | tr -d '"')
            kill -INT "$p1" "$p2"
            wait "$p1" "$p2" || true
            python3 - "$round" "$BIN" "$scenario" "$csv" "$n" "$WORK" <<'PY'
import sys
round_, binary, scenario, csv, n, work = sys.argv[1:]
n = int(n)
fields = csv.split(",")
def per_command(path):
    counts = {}
    for line in open(path):
        parts = line.strip().split(",")
        if len(parts) > 2 and parts[0][:1].isdigit():
            counts[parts[2].replace("syscalls:sys_enter_", "")] = float(parts[0]) / n
    return counts
r, s = per_command(f"{work}/redcar.txt"), per_command(f"{work}/primaries.txt")
print(f"round {round_} {binary} {scenario}: ops/s {fields[1]} p50 {fields[4]} p99 {fields[6]} ms"
      f" | redcar µs {r.get('task-clock', 0) * 1000:.2f} sendto {r.get('sendto', 0):.3f}"
      f" recvfrom {r.get('recvfrom', 0):.3f} epoll_wait {r.get('epoll_wait', 0):.3f}"
      f" futex {r.get('futex', 0):.3f} cs {r.get('context-switches', 0):.3f}"
      f" | primaries µs {s.get('task-clock', 0) * 1000:.2f} read {s.get('read', 0):.3f}"
      f" write {s.get('write', 0):.3f} cs {s.get('context-switches', 0):.3f}")
PY
        done
        stop_pid "$REDCAR_PID" redcar
        REDCAR_PID=
    done
done
