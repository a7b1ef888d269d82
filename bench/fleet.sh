#!/usr/bin/env bash
# "The fleet" (`make bench-fleet`, issue 49): FLEET_SIDECARS redcar processes in front of one local
# cluster, measured from the nodes' side, as docs/scale.md's model takes its inputs:
#   1. a baseline window without redcar, then the same window with the sidecars idle: per node,
#      connections (connected_clients), bytes in and out (total_net_input_bytes /
#      total_net_output_bytes), the topology commands (INFO commandstats: CLUSTER SHARDS / SLOTS /
#      NODES / INFO, EVALSHA, EVAL) and their node CPU (usec), minus the baseline;
#   2. a manual failover (CLUSTER FAILOVER on a replica) while the sidecars idle: the same counts
#      over the FLEET_WINDOW seconds after it;
# and writes FLEET_OUT. Nothing but loopback; every process it starts is stopped at exit.
#
# Env: FLEET_SIDECARS  (default 50)  redcar processes
#      FLEET_PRIMARIES (default 3)   primaries of the cluster (one replica each)
#      FLEET_WINDOW    (default 20)  seconds of each measured window
#      FLEET_INTERVAL  (default 5s)  cluster.refresh_interval of the sidecars
#      FLEET_CHECK     (default digest) cluster.change_check of the sidecars
#      FLEET_SETTLE    (default 7)   seconds between the last sidecar's start and the idle window
#                      (more than one interval: a sidecar whose first map came from a replica
#                      seed fetches it again from a primary at its first periodic round)
#      FLEET_OUT       (default bench/RESULTS-fleet.md)
#      REDCAR_BIN      (default target/release/redcar; `make bench-fleet` builds it)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

SIDECARS=${FLEET_SIDECARS:-50}
PRIMARIES=${FLEET_PRIMARIES:-3}
WINDOW=${FLEET_WINDOW:-20}
INTERVAL=${FLEET_INTERVAL:-5s}
CHECK=${FLEET_CHECK:-digest}
SETTLE=${FLEET_SETTLE:-7}
OUT=${FLEET_OUT:-$ROOT/bench/RESULTS-fleet.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"

TMP=$(mktemp -d /tmp/redcar-fleet.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid" redcar; done
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

log "cluster: $PRIMARIES primaries + $PRIMARIES replicas"
CLUSTER_PRIMARIES=$PRIMARIES "$ROOT/scripts/cluster.sh" start "$TMP/cluster" >/dev/null
SEEDS=$(cat "$TMP/cluster/seeds")
mapfile -t PORTS <"$TMP/cluster/ports"

# snapshot FILE: one line per node: port clients in out then NAME=calls:usec for the topology commands.
snapshot() {
    local port
    for port in "${PORTS[@]}"; do
        redis-cli -p "$port" INFO all | tr -d '\r' | awk -v port="$port" -F'[:=,]' '
            /^connected_clients:/ { clients = $2 }
            /^total_net_input_bytes:/ { in_ = $2 }
            /^total_net_output_bytes:/ { out = $2 }
            /^cmdstat_(cluster\|(shards|slots|nodes|info)|evalsha|eval):/ {
                name = $1; sub(/^cmdstat_/, "", name); stats = stats " " name "=" $3 ":" $5 }
            END { print port, clients, in_, out, stats }'
    done >"$1"
}

# delta A B SECONDS: per-node and total differences of two snapshots, per second.
delta() {
    awk -v secs="$3" '
        function parse(line, arr, pre,   n, f, i, kv, cu) {
            n = split(line, f, " ")
            arr[pre "clients"] = f[2]; arr[pre "in"] = f[3]; arr[pre "out"] = f[4]
            for (i = 5; i <= n; i++) { split(f[i], kv, "="); split(kv[2], cu, ":")
                arr[pre "c:" kv[1]] = cu[1]; arr[pre "u:" kv[1]] = cu[2]; names[kv[1]] = 1 }
        }
        NR == FNR { a[$1] = $0; next }
        { delete x; parse(a[$1], x, "a"); parse($0, x, "b")
          cmds = ""; calls = 0; usec = 0; scripts = 0
          for (n in names) { c = x["bc:" n] - x["ac:" n]; u = x["bu:" n] - x["au:" n]
              if (c > 0) cmds = cmds sprintf(" %s %.2f/s (%.0f µs)", n, c / secs, u / c)
              calls += c; usec += u; if (n ~ /^eval/) scripts += c }
          # Each digest script runs one CLUSTER NODES, counted under cluster|nodes as well as in
          # the script'"'"'s own calls and time: counted once.
          n = "cluster|nodes"; c = x["bc:" n] - x["ac:" n]
          if (c > 0) { nested = (scripts < c ? scripts : c); calls -= nested
              usec -= nested * (x["bu:" n] - x["au:" n]) / c }
          printf "| %s | %d | %.0f | %.0f | %.2f | %.0f |%s |\n", $1, x["bclients"],
              (x["bin"] - x["ain"]) / secs, (x["bout"] - x["aout"]) / secs, calls / secs,
              usec / secs, cmds
          tin += (x["bin"] - x["ain"]) / secs; tout += (x["bout"] - x["aout"]) / secs
          tcalls += calls / secs; tusec += usec / secs }
        END { printf "| all | | %.0f | %.0f | %.2f | %.0f | |\n", tin, tout, tcalls, tusec }
    ' "$1" "$2"
}

table_head() {
    echo "| node | clients | bytes in/s | bytes out/s | topology commands/s | their node CPU µs/s | by command |"
    echo "|---|---|---|---|---|---|---|"
}

log "baseline: ${WINDOW}s without redcar"
snapshot "$TMP/b0"
sleep "$WINDOW"
snapshot "$TMP/b1"

printf 'cluster:\n  refresh_interval: %s\n  change_check: %s\n' "$INTERVAL" "$CHECK" >"$TMP/redcar.yaml"
log "starting $SIDECARS sidecars"
for ((i = 0; i < SIDECARS; i++)); do
    port=$(free_port 20000 26000)
    admin=$(free_port 26000 32000)
    "$REDCAR_BIN" --listen "127.0.0.1:$port" --cluster "$SEEDS" --admin "127.0.0.1:$admin" \
        --config "$TMP/redcar.yaml" >"$TMP/redcar-$i.log" 2>&1 &
    PIDS+=($!)
    wait_redcar_ready "$!" "$admin" "$TMP/redcar-$i.log" "redcar $i"
    # One command through each, so each holds the connections a sidecar in use holds.
    redis-cli -p "$port" SET "fleet:$i" x >/dev/null
done
sleep "$SETTLE"
log "idle: ${WINDOW}s"
snapshot "$TMP/i0"
cpu0=$(cpu_ticks "${PIDS[@]}")
sleep "$WINDOW"
cpu1=$(cpu_ticks "${PIDS[@]}")
snapshot "$TMP/i1"

replica=$(redis-cli -p "${PORTS[0]}" CLUSTER NODES | awk '/slave/ { split($2, a, "[:@]"); print a[2]; exit }')
log "failover: CLUSTER FAILOVER on $replica, then ${WINDOW}s"
snapshot "$TMP/f0"
redis-cli -p "$replica" CLUSTER FAILOVER >/dev/null
sleep "$WINDOW"
snapshot "$TMP/f1"

hz=$(getconf CLK_TCK)
{
    echo "# The fleet: $SIDECARS sidecars in front of one cluster"
    echo
    echo "\`make bench-fleet\` (bench/fleet.sh), $(date -u +%Y-%m-%dT%H:%MZ), redcar $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)."
    echo "Cluster: $PRIMARIES primaries + $PRIMARIES replicas (redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')), loopback."
    echo "Sidecars: \`cluster.refresh_interval: $INTERVAL\`, \`cluster.change_check: $CHECK\`, one SET through each, then idle."
    echo "Per node, per second, over ${WINDOW}s windows; bytes are the node's client traffic (INFO stats), commands and"
    echo "CPU from INFO commandstats (by command: calls/s and µs per call; the CLUSTER NODES each digest script runs is"
    echo "listed under cluster|nodes too, but counted once in the totals)."
    echo
    echo "## Baseline (no redcar)"
    echo
    table_head
    delta "$TMP/b0" "$TMP/b1" "$WINDOW"
    echo
    echo "## $SIDECARS sidecars idle"
    echo
    table_head
    delta "$TMP/i0" "$TMP/i1" "$WINDOW"
    echo
    echo "The sidecars' own CPU while idle: $(awk -v t=$((cpu1 - cpu0)) -v hz="$hz" -v n="$SIDECARS" -v s="$WINDOW" 'BEGIN { printf "%.2f ms per sidecar per second", t / hz * 1000 / n / s }')."
    echo
    echo "## A manual failover while they idle (the ${WINDOW}s after CLUSTER FAILOVER)"
    echo
    table_head
    delta "$TMP/f0" "$TMP/f1" "$WINDOW"
} >"$OUT"
log "wrote $OUT"
cat "$OUT"
