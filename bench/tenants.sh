#!/usr/bin/env bash
# Per-user rate limits (issue 48): the rate a limited client gets against its setting, and an
# unlimited neighbour's latency alone, next to a limited flooder and next to an unlimited one.
#
#   bench/tenants.sh [BIN]      (default target/release/redcar)
#
# Starts a 3-primary cluster (scripts/cluster.sh) and redcar with three users: `flood`
# (`per_user: {commands_per_second: RATE, burst: RATE/10}`), `freeflood` (no limits) and `free`
# (the neighbour). Then: `flood` alone at -c 4 -P 16 (its rate, to compare with RATE); and for
# ROUNDS rounds, `free` at -c 10 -P 1 alone, with `flood` flooding at -c 50 -P 16, with
# `freeflood` flooding the same way (redis-benchmark's avg/min/p50/p95/p99/max in ms). Env:
# TENANTS_RATE (default 5000), TENANTS_ROUNDS (default 3). Latencies need a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"
BIN=${1:-$ROOT/target/release/redcar}
RATE=${TENANTS_RATE:-5000}
ROUNDS=${TENANTS_ROUNDS:-3}

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

cat >"$WORK/redcar.yaml" <<EOF
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

as() { redis-benchmark -p "$PORT" --user "$1" -a pw -t get -r 100000 "${@:2}" 2>/dev/null; }
neighbour() {
    as free -c 10 -P 1 -n 20000 | tr '\r' '\n' | grep -A2 "latency summary" | tail -1
}
flooding() {
    as "$1" -c 50 -P 16 -n 1000000000 -q >/dev/null &
    FLOOD_PID=$!
    sleep 1
}
stop_flooding() {
    kill "$FLOOD_PID" 2>/dev/null || true
    wait "$FLOOD_PID" 2>/dev/null || true
    FLOOD_PID=
}

got=$(as flood -c 4 -P 16 -n $((RATE * 10)) -q | tr '\r' '\n' | grep "requests per second" | tail -1)
echo "limited user (commands_per_second: $RATE): $got"
echo "neighbour latency (ms):        avg       min       p50       p95       p99       max"
for round in $(seq 1 "$ROUNDS"); do
    echo "round $round alone:            $(neighbour)"
    flooding flood
    echo "round $round limited flooder:  $(neighbour)"
    stop_flooding
    flooding freeflood
    echo "round $round unlimited flooder:$(neighbour)"
    stop_flooding
done
