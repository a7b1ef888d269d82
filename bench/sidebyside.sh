#!/usr/bin/env bash
# Two redcar binaries (or one binary with two sets of arguments) side by side in front of one
# 3+3 cluster, measured in interleaved redis-benchmark runs: ops/s and each proxy's CPU per
# command (utime + stime from /proc/PID/stat around the run). Both run the whole time, so the
# box's other load falls on both alike; compare medians over several rounds.
#
#   bench/sidebyside.sh BIN_A BIN_B
#
# Env: SIDE_SCENARIOS (default "get:1:200000 set:1:200000 get:16:1500000 set:16:1500000": test,
# pipeline depth, requests), SIDE_ROUNDS (default 5), SIDE_CLIENTS (default 50), A_ARGS and
# B_ARGS (extra redcar arguments for each). Prints one line per run, then the medians.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
[[ $# -eq 2 ]] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
SCENARIOS=${SIDE_SCENARIOS:-"get:1:200000 set:1:200000 get:16:1500000 set:16:1500000"}
ROUNDS=${SIDE_ROUNDS:-5}
CLIENTS=${SIDE_CLIENTS:-50}

WORK=$(mktemp -d -t redcar-side-XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid" redcar; done
    "$ROOT/scripts/cluster.sh" stop "$WORK/cluster" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

"$ROOT/scripts/cluster.sh" start "$WORK/cluster" 0 >/dev/null
SEEDS=$(cat "$WORK/cluster/seeds")
PORTS=()
BINS=("$1" "$2")
for side in A B; do
    bin=${BINS[$([[ $side == A ]] && echo 0 || echo 1)]}
    args_var=${side}_ARGS
    port=$(free_port 8000 11000) || die "no free port"
    # shellcheck disable=SC2086 # the extra arguments are meant to split
    "$bin" --listen "127.0.0.1:$port" --cluster "$SEEDS" --log-level warn ${!args_var:-} \
        >"$WORK/redcar-$side.log" 2>&1 &
    PIDS+=($!)
    PORTS+=("$port")
    wait_for 10 "redcar $side on port $port" port_in_use "$port"
done
for port in "${PORTS[@]}"; do
    redis-benchmark -p "$port" -c "$CLIENTS" -n 20000 -r 100000 -t set,get -q >/dev/null 2>&1
done
for ((round = 1; round <= ROUNDS; round++)); do
    for scenario in $SCENARIOS; do
        IFS=: read -r test depth requests <<<"$scenario"
        for side in 0 1; do
            before=$(cpu_ticks "${PIDS[side]}")
            ops=$(redis-benchmark -p "${PORTS[side]}" -c "$CLIENTS" -n "$requests" -r 100000 \
                -P "$depth" -t "$test" --csv 2>/dev/null | tail -n 1 | cut -d, -f2 | tr -d '"')
            after=$(cpu_ticks "${PIDS[side]}")
            awk -v r="$round" -v s="$scenario" -v side="$([[ $side == 0 ]] && echo A || echo B)" \
                -v ops="$ops" -v t=$((after - before)) -v n="$requests" -v hz="$(getconf CLK_TCK)" \
                'BEGIN { printf "round %s %s %s ops/s %.0f cpu_us %.2f\n", r, s, side, ops, t / hz * 1e6 / n }'
        done
    done
done | tee "$WORK/runs"
echo "medians over $ROUNDS rounds (A: ${BINS[0]} ${A_ARGS:-}; B: ${BINS[1]} ${B_ARGS:-}):"
python3 - "$WORK/runs" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    runs[(f[2], f[3])].append((float(f[5]), float(f[7])))
for scenario in dict.fromkeys(k[0] for k in runs):
    a, b = runs[(scenario, "A")], runs[(scenario, "B")]
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    print(f"{scenario}: ops/s A {med(a, 0):.0f} B {med(b, 0):.0f} (B/A {med(b, 0) / med(a, 0):.2f})"
          f" | CPU µs/cmd A {med(a, 1):.2f} B {med(b, 1):.2f} (B/A {med(b, 1) / med(a, 1):.2f})")
PY
