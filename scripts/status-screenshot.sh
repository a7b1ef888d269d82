#!/usr/bin/env bash
# Takes the README's picture of the status page: starts a local 3+3 Redis Cluster and redcar,
# runs some traffic (redis-benchmark plus a few deliberately slow EVALs), kills one replica (its
# reads fail once, redcar ejects it), and saves a headless-Chromium screenshot of
# http://127.0.0.1:ADMIN/ to docs/img/status-page.png (or $1).
#
#   scripts/status-screenshot.sh [OUT.png]
#   REDCAR_BIN=target/release/redcar scripts/status-screenshot.sh
#
# Needs redis-server/redis-cli/redis-benchmark (scripts/ensure-redis.sh) and chromium
# (scripts/ensure-browser.sh; REDCAR_CHROMIUM names another binary). Uses target/release/redcar
# when built, else target/debug/redcar. Everything it starts is stopped on exit.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

OUT=${1:-$ROOT/docs/img/status-page.png}
if [[ -z ${REDCAR_BIN:-} ]]; then
    REDCAR_BIN=$ROOT/target/release/redcar
    [[ -x $REDCAR_BIN ]] || REDCAR_BIN=$ROOT/target/debug/redcar
fi
[[ -x $REDCAR_BIN ]] || die "$REDCAR_BIN not found: build it first (cargo build)"
CHROMIUM=${REDCAR_CHROMIUM:-chromium}
command -v "$CHROMIUM" >/dev/null || die "$CHROMIUM not found (run scripts/ensure-browser.sh)"
for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-shot.XXXXXX")
REDCAR_PID=""
BENCH_PIDS=()
cleanup() {
    local rc=$?
    trap - EXIT
    trap "" INT TERM
    for pid in "${BENCH_PIDS[@]}"; do stop_pid "$pid" redis-benchmark; done
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID" redcar
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A long node timeout keeps the cluster from flagging the killed replica `fail` (which would take
# it out of the slot map: the page would list it as gone), so the picture shows it ejected.
log "starting a 3+3 cluster"
CLUSTER_NODE_TIMEOUT=60000 "$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
mapfile -t PORTS <"$TMP/cluster/ports"

LISTEN=$(free_port 8000 11000) || die "no free port"
ADMIN=$(free_port 11000 12000) || die "no free port"
# Reads prefer replicas so every node has traffic; one failure ejects; slow log from 40 ms; the
# near cache on for the benchmark's keys; the hot keys sampled more often.
cat >"$TMP/redcar.yaml" <<YAML
router:
  read_policy: prefer-replica
upstream:
  outlier:
    consecutive_failures: 1
    base_ejection_time: 120s
    max_ejection_time: 120s
metrics:
  slowlog_threshold: 40ms
near_cache:
  enabled: true
  keys:
    - prefix: "key:"
hotkeys:
  sample_rate: 4
YAML
log "starting redcar on 127.0.0.1:$LISTEN (admin $ADMIN)"
"$REDCAR_BIN" --config "$TMP/redcar.yaml" --listen "127.0.0.1:$LISTEN" --cluster "$SEEDS" \
    --admin "127.0.0.1:$ADMIN" </dev/null >"$TMP/redcar.log" 2>&1 &
REDCAR_PID=$!
wait_redcar_ready "$REDCAR_PID" "$ADMIN" "$TMP/redcar.log"

log "traffic: redis-benchmark through redcar (a mix of commands, one process each)"
BENCH_PIDS=()
for spec in get:4 set:2 hset:1 incr:1 mset:1 lpush:1; do
    redis-benchmark -h 127.0.0.1 -p "$LISTEN" -c "${spec#*:}" -r 100000 -n 100000000 -q \
        -t "${spec%:*}" >/dev/null 2>&1 &
    BENCH_PIDS+=($!)
done
# A few hot keys (read from the near cache) and one big value, for the hot- and big-key panels.
redis-benchmark -h 127.0.0.1 -p "$LISTEN" -c 2 -r 20 -n 100000000 -q -t get >/dev/null 2>&1 &
BENCH_PIDS+=($!)
head -c 300000 /dev/zero | tr '\0' x | redis-cli -p "$LISTEN" -x SET report:big >/dev/null
redis-cli -p "$LISTEN" GET report:big >/dev/null
# Replicas appear in CLUSTER SLOTS a little after the cluster is created.
all_replicas() {
    [[ $(http_body 127.0.0.1 "$ADMIN" /status.json | grep -o '"role":"replica"' | wc -l) -eq 3 ]]
}
wait_for 30 "redcar's map to list the 3 replicas" all_replicas
sleep 2

# The first replica (ROLE answers "slave" first on a replica).
replica=""
for p in "${PORTS[@]}"; do
    if [[ $(redis-cli -p "$p" ROLE | head -1) == slave ]]; then
        replica=$p
        break
    fi
done
[[ -n $replica ]] || die "no replica found"

# The event log says when redcar ejected it (the first read that failed on it).
ejected() {
    http_body 127.0.0.1 "$ADMIN" /status.json | grep -q "\"kind\":\"node_ejected\",\"node\":\"127.0.0.1:$replica\""
}
log "killing replica 127.0.0.1:$replica"
"$ROOT/scripts/cluster.sh" kill "$TMP/cluster" "$replica"
wait_for 30 "the killed replica to be ejected" ejected

# A few slow commands for the slow-log panel: a Lua busy loop of some tens of milliseconds.
for i in 1 2 3 4 5 6; do
    redis-cli -p "$LISTEN" EVAL 'local n = 0 for i = 1, 8000000 do n = n + i end return n' \
        1 "report:$i" >/dev/null || true
done
sleep 4 # let the rates and percentiles fill a window

log "screenshot → $OUT"
mkdir -p "$(dirname "$OUT")"
"$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$TMP/chromium" --window-size=1280,1700 --virtual-time-budget=4000 \
    --screenshot="$OUT" "http://127.0.0.1:$ADMIN/" >"$TMP/chromium.log" 2>&1 ||
    {
        cat "$TMP/chromium.log" >&2
        die "chromium failed"
    }
[[ -s $OUT ]] || die "no screenshot written"
log "done: $OUT"
