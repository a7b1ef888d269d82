#!/usr/bin/env bash
# Per-user rate limits (issue 48): the rate a limited client gets against its setting, and
# whether a limited user flooding moves an unlimited neighbour's latency (the issue: the
# neighbour's p99 within 10 % of its p99 without the flooder).
#
#   bench/tenants.sh [BIN]      (default target/release/redcar)
#
# Starts a 3-primary cluster (scripts/cluster.sh) and one redcar with three users: `flood`
# (`per_user: {commands_per_second: RATE, burst: RATE/10}`), `freeflood` (no limits) and `free`
# (the neighbour). First `flood` alone at -c 4 -P 16 (its rate, to compare with RATE). Then
# ROUNDS rounds, each with the same neighbour workload (bench/mixload: `free`, 10 clients,
# pipeline 1, GET/SET 90/10 over 1000 keys, paced at PACE commands/s in all, open loop, SECONDS
# s; its p50/p99 from the write of each command to the end of its reply) in three conditions:
# alone; next to `flood` flooding (redis-benchmark GET -c 50 -P 16, far over RATE); next to
# `flood` sending at 95 % of RATE without flooding (`atrate`: mixload, 50 clients, paced: the
# same work let through, none of it over the limit, so `limited` against `atrate` is what
# being over the limit costs the neighbour); next to `freeflood` flooding like `flood` (no
# limit: shows what the limit saves). The conditions'
# order alternates from round to round (drift on a shared box falls on both sides). Per
# condition: the neighbour's p50/p99/max, the flooder's commands/s, rate-limited decisions and
# errors over the run (from /metrics), redcar's CPU % and the 1-minute load average. Last, the
# medians over the rounds and the ratios the issue asks about (median p99 with the limited
# flooder / median p99 alone, and each round's own ratio).
#
# Env: TENANTS_RATE (500), TENANTS_ROUNDS (5), TENANTS_SECONDS (5), TENANTS_PACE (2000),
# TENANTS_EVENT_LOOP (true; false: the task path), TENANTS_UNLIMITED (1; 0 leaves the unlimited
# flooder out). Latencies need a quiet machine: run it when `uptime` is lowest.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
BIN=${1:-$ROOT/target/release/redcar}
RATE=${TENANTS_RATE:-500}
ROUNDS=${TENANTS_ROUNDS:-5}
SECONDS_PER_RUN=${TENANTS_SECONDS:-5}
PACE=${TENANTS_PACE:-2000}
EVENT_LOOP=${TENANTS_EVENT_LOOP:-true}
UNLIMITED=${TENANTS_UNLIMITED:-1}

WORK=$(mktemp -d -t redcar-tenants-XXXXXX)
REDCAR_PID=
FLOOD_PID=
cleanup() {
    [[ -n "$FLOOD_PID" ]] && kill "$FLOOD_PID" 2>/dev/null && wait "$FLOOD_PID" 2>/dev/null
    [[ -n "$REDCAR_PID" ]] && kill "$REDCAR_PID" 2>/dev/null && wait "$REDCAR_PID" 2>/dev/null
    "$ROOT/scripts/cluster.sh" stop "$WORK/cluster" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

log "building the load generator (bench/mixload)"
CARGO_TARGET_DIR="$ROOT/target/mixload" cargo build --release --quiet \
    --manifest-path "$ROOT/bench/mixload/Cargo.toml" || die "building bench/mixload failed"
MIXLOAD=$ROOT/target/mixload/release/mixload

cat >"$WORK/redcar.yaml" <<EOF
event_loop: $EVENT_LOOP
auth:
  users:
    - name: flood
      acl: "on >pw ~* +@all"
      limits:
        per_user: {commands_per_second: $RATE, burst: $((RATE / 10))}
    - name: freeflood
      acl: "on >pw ~* +@all"
    - name: free
      acl: "on >pw ~* +@all"
EOF
CLUSTER_REPLICAS=0 "$ROOT/scripts/cluster.sh" start "$WORK/cluster" 0 >/dev/null
PORT=$(free_port 8000 11000) || die "no free port"
ADMIN=$(free_port 11000 12000) || die "no free port"
"$BIN" --listen "127.0.0.1:$PORT" --admin "127.0.0.1:$ADMIN" --cluster "$(cat "$WORK/cluster/seeds")" \
    --config "$WORK/redcar.yaml" >"$WORK/redcar.log" 2>&1 &
REDCAR_PID=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$ADMIN/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -sf "http://127.0.0.1:$ADMIN/readyz" >/dev/null || die "redcar not ready: $(tail -5 "$WORK/redcar.log")"

as() { redis-benchmark -p "$PORT" --user "$1" -a pw -t get -r 100000 "${@:2}" 2>/dev/null; }
# figure NAME USER: a per-user counter from /metrics (0 when absent).
figure() {
    curl -sf "http://127.0.0.1:$ADMIN/metrics" |
        awk -v n="$1" -v u="user=\"$2\"" '$1 ~ "^"n"[{]" && index($1, u) { s += $2 } END { printf "%d\n", s }'
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$REDCAR_PID/stat"; }
load1() { cut -d' ' -f1 /proc/loadavg; }
flooding() {
    if [[ "$1" == atrate ]]; then
        "$MIXLOAD" --addr "127.0.0.1:$PORT" --user flood --password pw --clients 50 --keys 1000 \
            --prefix flood: --no-populate --read-ratio 1 --seconds 3600 --rate $((RATE * 95 / 100)) \
            >/dev/null 2>&1 &
        FLOOD_PID=$!
        sleep 1
        return
    fi
    # redis-benchmark itself in the background (not through `as`: $! would be a subshell, and
    # killing it would leave the flooder running).
    redis-benchmark -p "$PORT" --user "$1" -a pw -t get -r 100000 -c 50 -P 16 -n 1000000000 \
        -q >/dev/null 2>&1 &
    FLOOD_PID=$!
    sleep 1
}
stop_flooding() {
    kill "$FLOOD_PID" 2>/dev/null || true
    wait "$FLOOD_PID" 2>/dev/null || true
    FLOOD_PID=
}
# run CONDITION ROUND: the neighbour for SECONDS, next to CONDITION's flooder (none: alone).
# Appends "condition round p50 p99 max flooder_cps limited_per_s flooder_errors cpu% load" to
# $WORK/rows and prints it.
run() {
    local cond=$1 round=$2 user= c0 l0 e0 t0 c1 l1 e1 t1 out
    case $cond in
        limited) user=flood ;;
        atrate) user=atrate ;;
        unlimited) user=freeflood ;;
    esac
    [[ -n "$user" ]] && flooding "$user"
    [[ "$user" == atrate ]] && user=flood
    if [[ -n "$user" ]]; then
        c0=$(figure redcar_user_commands_total "$user")
        l0=$(figure redcar_user_rate_limited_total "$user")
        e0=$(figure redcar_user_command_errors_total "$user")
    fi
    t0=$(cpu_ticks)
    out=$("$MIXLOAD" --addr "127.0.0.1:$PORT" --user free --password pw --clients 10 \
        --keys 1000 --prefix tenants: --seconds "$SECONDS_PER_RUN" --rate "$PACE" | grep '^RESULT')
    t1=$(cpu_ticks)
    local cps=0 lps=0 errs=0
    if [[ -n "$user" ]]; then
        c1=$(figure redcar_user_commands_total "$user")
        l1=$(figure redcar_user_rate_limited_total "$user")
        e1=$(figure redcar_user_command_errors_total "$user")
        cps=$(((c1 - c0) / SECONDS_PER_RUN))
        lps=$(((l1 - l0) / SECONDS_PER_RUN))
        errs=$((e1 - e0))
        stop_flooding
    fi
    field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$out"; }
    local row
    row=$(printf '%-9s %5s %8s %8s %8s %9s %9s %6s %6s %5s %6s' "$cond" "$round" \
        "$(field p50_ms)" "$(field p99_ms)" "$(field max_ms)" "$cps" "$lps" "$errs" \
        "$(((t1 - t0) * 100 / $(getconf CLK_TCK) / SECONDS_PER_RUN))" "$(load1)" "$(field behind)")
    [[ "$(field errors)" == 0 ]] || die "neighbour errors: $out"
    echo "$row" | tee -a "$WORK/rows"
}

echo "redcar $("$BIN" --version 2>/dev/null | head -1), event_loop: $EVENT_LOOP, $(nproc) cores, load $(load1)"
got=$(as flood -c 4 -P 16 -n $((RATE * 10)) -q | tr '\r' '\n' | grep "requests per second" | tail -1)
echo "limited user (commands_per_second: $RATE, burst $((RATE / 10))): $got"
echo "neighbour: 10 clients paced at $PACE commands/s for ${SECONDS_PER_RUN} s; flooders: GET -c 50 -P 16"
echo "condition round  p50(ms)  p99(ms)  max(ms) flood c/s limited/s errors  cpu%  load behind"
conds=(alone limited atrate)
[[ "$UNLIMITED" == 1 ]] && conds+=(unlimited)
for round in $(seq 1 "$ROUNDS"); do
    order=("${conds[@]}")
    if ((round % 2 == 0)); then # alternate: reversed on even rounds
        order=()
        for ((i = ${#conds[@]} - 1; i >= 0; i--)); do order+=("${conds[i]}"); done
    fi
    for cond in "${order[@]}"; do run "$cond" "$round"; done
done

# Medians over the rounds, and the ratios against the neighbour alone.
python3 - "$WORK/rows" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r[0], {})[int(r[1])] = (float(r[2]), float(r[3]), int(r[5]), int(r[8]))
alone = by["alone"]
med = lambda xs: statistics.median(xs)
a50, a99 = med(v[0] for v in alone.values()), med(v[1] for v in alone.values())
print(f"median alone: p50 {a50:.3f} ms, p99 {a99:.3f} ms, redcar cpu {med(v[3] for v in alone.values())}%")
for cond in ("limited", "atrate", "unlimited"):
    if cond not in by:
        continue
    got = by[cond]
    p50, p99 = med(v[0] for v in got.values()), med(v[1] for v in got.values())
    paired = [got[r][1] / alone[r][1] for r in sorted(got) if r in alone]
    print(f"median next to the {cond} flooder: p50 {p50:.3f} ms, p99 {p99:.3f} ms, "
          f"flooder {med(v[2] for v in got.values()):.0f} commands/s, redcar cpu {med(v[3] for v in got.values())}%")
    print(f"  p99 ratio (medians) {p99 / a99:.2f}, p50 ratio {p50 / a50:.2f}; "
          f"each round's p99 ratio {', '.join(f'{x:.2f}' for x in paired)} (median {med(paired):.2f})")
if "limited" in by and "atrate" in by:
    lim, at = by["limited"], by["atrate"]
    paired = [lim[r][1] / at[r][1] for r in sorted(lim) if r in at]
    print(f"over the limit against at the rate: p99 ratio (medians) "
          f"{med(v[1] for v in lim.values()) / med(v[1] for v in at.values()):.2f}; "
          f"each round's {', '.join(f'{x:.2f}' for x in paired)} (median {med(paired):.2f})")
EOF
