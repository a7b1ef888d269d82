#!/usr/bin/env bash
# redcar demo: a local 3+3 Redis Cluster, redcar in front of it, a short
# readable workload through redcar with a plain (non-cluster) redis-cli, and a
# small redis-benchmark comparison. Builds nothing (`make demo` builds first).
#
#   scripts/demo.sh                 uses target/release/redcar
#   REDCAR_BIN=path scripts/demo.sh
#   DEMO_REQUESTS=20000 DEMO_CLIENTS=20 scripts/demo.sh
#   DEMO_KEEP=1 scripts/demo.sh     at the end, keep the cluster, redcar and its status page up
#                                   until Ctrl-C (`DEMO_KEEP=1 make demo` does the same)
#
# Everything (nodes, redcar, temp dir) is cleaned up on exit, error or Ctrl-C.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
REQUESTS=${DEMO_REQUESTS:-20000}
CLIENTS=${DEMO_CLIENTS:-20}
KEEP=${DEMO_KEEP:-0}

for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-demo.XXXXXX")
REDCAR_PID=""
DRILL_PID=""
BENCH_PID=""
KEEP_PID=""
KEEPING=0
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n "$KEEP_PID" ]] && stop_pid "$KEEP_PID" sleep
    [[ -n "$BENCH_PID" ]] && stop_pid "$BENCH_PID" redis-benchmark
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID"
    [[ -n "$DRILL_PID" ]] && stop_pid "$DRILL_PID"
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    if ((rc != 0)); then
        printf '\ndemo failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    fi
    exit "$rc"
}
trap cleanup EXIT
# Ctrl-C while DEMO_KEEP holds everything up is how the demo is meant to end: exit 0.
trap 'if ((KEEPING)); then echo; exit 0; else exit 130; fi' INT TERM

hr() { printf '\n== %s ==\n' "$*"; }

# ---------------------------------------------------------------- setup
hr "Starting a Redis Cluster: 3 primaries + 3 replicas on 127.0.0.1"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
mapfile -t NODE_PORTS <"$TMP/cluster/ports"
NODE1=${NODE_PORTS[0]}

LISTEN_PORT=$(free_port 8000 11000) || die "no free port" # below the ephemeral range
ADMIN_PORT=$(free_port 11000 12000) || die "no free port"
hr "Starting redcar"
echo "$REDCAR_BIN --listen 127.0.0.1:$LISTEN_PORT --cluster $SEEDS --admin 127.0.0.1:$ADMIN_PORT"
"$REDCAR_BIN" --listen "127.0.0.1:$LISTEN_PORT" --cluster "$SEEDS" \
    --admin "127.0.0.1:$ADMIN_PORT" </dev/null >"$TMP/redcar.log" 2>&1 &
REDCAR_PID=$!

redcar_ready() {
    kill -0 "$REDCAR_PID" 2>/dev/null || return 2
    http_ok 127.0.0.1 "$ADMIN_PORT" /readyz
}
deadline=$((SECONDS + 30))
until redcar_ready; do
    if ! kill -0 "$REDCAR_PID" 2>/dev/null; then
        echo "redcar exited; its log:" >&2
        cat "$TMP/redcar.log" >&2
        die "redcar did not start"
    fi
    if ((SECONDS >= deadline)); then
        tail -n 50 "$TMP/redcar.log" >&2
        die "redcar not ready after 30 s (GET /readyz on 127.0.0.1:$ADMIN_PORT)"
    fi
    sleep 0.1
done
echo "redcar is ready: /healthz -> $(http_status 127.0.0.1 "$ADMIN_PORT" /healthz), /readyz -> 200"

# ---------------------------------------------------------------- workload
rc() { redis-cli -h 127.0.0.1 -p "$LISTEN_PORT" "$@"; }    # through redcar
node() { local p=$1; shift; redis-cli -h 127.0.0.1 -p "$p" "$@"; } # direct to a node

# owner_of SLOT: "127.0.0.1:PORT" of the primary serving SLOT, from CLUSTER SLOTS
# (redis-cli prints it flattened: start, end, ip, port, id, ... per range).
owner_of() {
    node "$NODE1" CLUSTER SLOTS | awk -v slot="$1" '
        NF == 0 { next }
        { t[n++] = $0 }
        END {
            for (i = 0; i + 3 < n; i++)
                if (t[i] ~ /^[0-9]+$/ && t[i+1] ~ /^[0-9]+$/ && t[i+2] ~ /\./ &&
                    slot >= t[i] + 0 && slot <= t[i+1] + 0) { print t[i+2] ":" t[i+3]; exit }
        }'
}

hr "Plain redis-cli (no -c, no cluster support) talking to redcar on :$LISTEN_PORT"
printf '%-18s %-6s %-18s %-4s %s\n' KEY SLOT OWNER SET GET
for key in user:1 user:2 user:3 cart:42 session:abc order:7 "{user:1}:profile"; do
    slot=$(node "$NODE1" CLUSTER KEYSLOT "$key")
    owner=$(owner_of "$slot")
    set_reply=$(rc SET "$key" "value-of-$key")
    get_reply=$(rc GET "$key")
    printf '%-18s %-6s %-18s %-4s %s\n' "$key" "$slot" "$owner" "$set_reply" "$get_reply"
done

echo
echo "INCR demo:counter x3  -> $(rc INCR demo:counter) $(rc INCR demo:counter) $(rc INCR demo:counter)"
echo "HSET user:1:h name ada lang rust -> $(rc HSET user:1:h name ada lang rust)"
echo "HGETALL user:1:h -> $(rc HGETALL user:1:h | paste -sd' ' -)"

# A real pipeline: five commands written in one go on one connection, then
# five replies read back (keys on different nodes).
resp_cmd() {
    local LC_ALL=C a
    printf '*%d\r\n' "$#"
    for a in "$@"; do printf '$%d\r\n%s\r\n' "${#a}" "$a"; done
}
read_reply() { # FD -> prints one reply on one line
    local fd=$1 line n i
    IFS= read -r -t 5 line <&"$fd" || { echo "(timeout)"; return 1; }
    line=${line%$'\r'}
    case ${line:0:1} in
    '+' | ':') printf '%s' "${line:1}" ;;
    '-') printf '(error) %s' "${line:1}" ;;
    '$')
        if [[ ${line:1} == -1 ]]; then printf '(nil)'; else
            IFS= read -r -t 5 line <&"$fd"
            printf '"%s"' "${line%$'\r'}"
        fi
        ;;
    '*')
        n=${line:1}
        printf '['
        for ((i = 0; i < n; i++)); do
            ((i > 0)) && printf ', '
            read_reply "$fd"
        done
        printf ']'
        ;;
    *) printf '?%s' "$line" ;;
    esac
}
hr "Pipeline: 5 commands in one write on one connection, keys on different nodes"
echo "(the MGET keys share the {user:1} hash tag, so they live in one slot)"
exec 5<>"/dev/tcp/127.0.0.1/$LISTEN_PORT"
{
    resp_cmd SET pipe:a 1
    resp_cmd INCRBY pipe:a 41
    resp_cmd GET user:3
    resp_cmd GET cart:42
    resp_cmd MGET user:1 "{user:1}:profile" "{user:1}:missing"
} >&5
for c in "SET pipe:a 1" "INCRBY pipe:a 41" "GET user:3" "GET cart:42" "MGET user:1 {user:1}:profile {user:1}:missing"; do
    printf '  %-50s -> %s\n' "$c" "$(read_reply 5)"
done
exec 5>&-

hr "Transaction, blocking pop and pub/sub through the same plain connection type"
exec 5<>"/dev/tcp/127.0.0.1/$LISTEN_PORT"
{
    resp_cmd MULTI
    resp_cmd SET "{acct:7}:balance" 100
    resp_cmd INCRBY "{acct:7}:balance" -30
    resp_cmd RPUSH "{acct:7}:log" "debit 30"
    resp_cmd EXEC
} >&5
for c in "MULTI" "SET {acct:7}:balance 100" "INCRBY {acct:7}:balance -30" "RPUSH {acct:7}:log \"debit 30\"" "EXEC"; do
    printf '  %-50s -> %s\n' "$c" "$(read_reply 5)"
done
exec 5>&-
echo "(queued by redcar, sent to the slot's primary as one MULTI ... EXEC unit)"
exec 5<>"/dev/tcp/127.0.0.1/$LISTEN_PORT"
resp_cmd SUBSCRIBE demo:news >&5
printf '  %-50s -> %s\n' "SUBSCRIBE demo:news" "$(read_reply 5)"
printf '  %-50s -> %s\n' "PUBLISH demo:news hello (count: that node only)" "$(rc PUBLISH demo:news hello)"
printf '  %-50s -> %s\n' "(pushed to the subscriber)" "$(read_reply 5)"
exec 5>&-
exec 5<>"/dev/tcp/127.0.0.1/$LISTEN_PORT"
resp_cmd BLPOP demo:jobs 5 >&5
sleep 0.2
printf '  %-50s -> %s\n' "RPUSH demo:jobs job-1 (another client)" "$(rc RPUSH demo:jobs job-1)"
printf '  %-50s -> %s\n' "BLPOP demo:jobs 5 (was blocked)" "$(read_reply 5)"
exec 5>&-
echo "(BLPOP and SUBSCRIBE ran on dedicated connections: the shared ones never block)"

# ---------------------------------------------------------------- benchmark
count_clients() { # PORT -> number of ordinary client connections (not replication, not us)
    node "$1" CLIENT LIST 2>/dev/null |
        awk '!/cmd=client\|list/ && !/flags=[A-Za-z]*[SM]/ { n++ } END { print n + 0 }'
}
role_of() { node "$1" INFO replication | tr -d '\r' | awk -F: '/^role:/ { print ($2 == "master") ? "primary" : "replica" }'; }

csv_field() { # CSVFILE TEST FIELDNUM
    awk -F'","' -v t="\"$2" -v f="$3" '$1 == t { gsub(/"/, "", $f); print $f }' "$1"
}

hr "redis-benchmark: $REQUESTS requests, $CLIENTS clients, SET and GET on 100000 random keys"
echo "redcar:         redis-benchmark -h 127.0.0.1 -p $LISTEN_PORT -t set,get -n $REQUESTS -c $CLIENTS -r 100000 --csv"
redis-benchmark -h 127.0.0.1 -p "$LISTEN_PORT" -t set,get -n "$REQUESTS" -c "$CLIENTS" -r 100000 --csv \
    >"$TMP/bench-redcar.csv" 2>"$TMP/bench-redcar.err" &
BENCH_PID=$!
# Sample redcar's upstream connections while the benchmark runs.
sleep 0.5
declare -A DURING
for p in "${NODE_PORTS[@]}"; do DURING[$p]=$(count_clients "$p"); done
wait "$BENCH_PID" || { cat "$TMP/bench-redcar.err" >&2; die "redis-benchmark through redcar failed"; }
BENCH_PID=""

echo "direct cluster: redis-benchmark --cluster -h 127.0.0.1 -p $NODE1 -t set,get -n $REQUESTS -c $CLIENTS -r 100000 --csv"
declare -A AFTER
for p in "${NODE_PORTS[@]}"; do AFTER[$p]=$(count_clients "$p"); done
redis-benchmark --cluster -h 127.0.0.1 -p "$NODE1" -t set,get -n "$REQUESTS" -c "$CLIENTS" -r 100000 --csv \
    >"$TMP/bench-direct.csv" 2>"$TMP/bench-direct.err" ||
    { cat "$TMP/bench-direct.err" >&2; die "redis-benchmark --cluster failed"; }

hr "Summary"
echo "Cluster: ${#NODE_PORTS[@]} redis-server nodes ($SEEDS)"
echo "redcar:  127.0.0.1:$LISTEN_PORT (admin 127.0.0.1:$ADMIN_PORT), pid $REDCAR_PID"
if [[ $KEEP == 1 ]]; then
    echo "status page: http://127.0.0.1:$ADMIN_PORT/ (slot map, node health, rates, events; up until Ctrl-C)"
else
    echo "status page: http://127.0.0.1:$ADMIN_PORT/ (slot map, node health, rates, events; gone when the demo ends: DEMO_KEEP=1 keeps it)"
fi
echo
printf '%-24s %12s %12s %12s %12s\n' "target" "SET ops/s" "GET ops/s" "SET p50 ms" "GET p50 ms"
for t in redcar direct; do
    f="$TMP/bench-$t.csv"
    label=$([[ $t == redcar ]] && echo "through redcar" || echo "direct (--cluster)")
    printf '%-24s %12s %12s %12s %12s\n' "$label" \
        "$(csv_field "$f" SET 2)" "$(csv_field "$f" GET 2)" \
        "$(csv_field "$f" SET 5)" "$(csv_field "$f" GET 5)"
done
echo
echo "Connections held by redcar to each node ($CLIENTS benchmark clients connected to redcar):"
printf '  %-8s %-8s %16s %20s\n' node role "during benchmark" "after (idle, kept)"
total_d=0
total_a=0
for p in "${NODE_PORTS[@]}"; do
    printf '  %-8s %-8s %16s %20s\n' "$p" "$(role_of "$p")" "${DURING[$p]}" "${AFTER[$p]}"
    total_d=$((total_d + DURING[$p]))
    total_a=$((total_a + AFTER[$p]))
done
printf '  %-17s %16s %20s\n' total "$total_d" "$total_a"
echo
echo "Without redcar every application process would hold its own connections to"
echo "every primary; with redcar the cluster sees only redcar's $total_a connections."

# ---------------------------------------------------------------- failure drill
metric() { # ADMIN_PORT SERIES -> its value (0 when absent)
    http_body 127.0.0.1 "$1" /metrics | awk -v s="$2" '$1 == s { v = $2 } END { print v + 0 }'
}
get_calls() { node "$1" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_get:calls=\([0-9]*\),.*/\1/p'; }

VICTIM=""
for p in "${NODE_PORTS[@]}"; do
    [[ $(role_of "$p") == replica ]] && { VICTIM=$p; break; }
done
DRILL_PORT=$(free_port 8000 11000) || die "no free port"
DRILL_ADMIN=$(free_port 11000 12000) || die "no free port"
hr "Failure drill: a replica is killed (SIGKILL) under read load"
echo "$REDCAR_BIN --listen 127.0.0.1:$DRILL_PORT --cluster $SEEDS --read-policy prefer-replica"
"$REDCAR_BIN" --listen "127.0.0.1:$DRILL_PORT" --cluster "$SEEDS" --read-policy prefer-replica \
    --admin "127.0.0.1:$DRILL_ADMIN" </dev/null >"$TMP/drill.log" 2>&1 &
DRILL_PID=$!
wait_for 30 "the drill redcar to be ready" http_ok 127.0.0.1 "$DRILL_ADMIN" /readyz
DRILL_REQUESTS=$((REQUESTS * 10))
redis-benchmark -h 127.0.0.1 -p "$DRILL_PORT" -t get -n "$DRILL_REQUESTS" -c "$CLIENTS" -r 100000 -q \
    >"$TMP/drill-bench.out" 2>&1 &
BENCH_PID=$!
sleep 1
echo "while $CLIENTS clients GET through it: scripts/cluster.sh kill <dir> $VICTIM   (replica $VICTIM)"
"$ROOT/scripts/cluster.sh" kill "$TMP/cluster" "$VICTIM"
sleep 0.5 # read it now: once the cluster flags the replica as failed, it leaves redcar's map
ejected=$(metric "$DRILL_ADMIN" "redcar_node_ejections_total{node=\"127.0.0.1:$VICTIM\"}")
wait "$BENCH_PID" || { cat "$TMP/drill-bench.out" >&2; die "redis-benchmark during the drill failed"; }
BENCH_PID=""
gets=$(metric "$DRILL_ADMIN" 'redcar_commands_total{command="get"}')
errors=$(metric "$DRILL_ADMIN" 'redcar_command_errors_total{command="get"}')
printf '  %-46s %s\n' "GETs answered through redcar:" "$gets"
printf '  %-46s %s\n' "error replies to clients:" "$errors"
printf '  %-46s %s\n' "reads retried on another node:" "$(metric "$DRILL_ADMIN" redcar_retries_total)"
printf '  %-46s %s\n' "replica $VICTIM ejected (times, 0.5 s after):" "$ejected"
echo "  (Envoy's redis_proxy had no retries: its users saw ~10 s of read errors per lost replica)"
"$ROOT/scripts/cluster.sh" restart "$TMP/cluster" "$VICTIM"
# Back in rotation once the cluster clears its failure flag, redcar's next map lists it again and
# a health check (if it was still ejected) answered PONG: then it serves reads again.
victim_serving() {
    redis-benchmark -h 127.0.0.1 -p "$DRILL_PORT" -t get -n 2000 -c 5 -r 100000 -q >/dev/null 2>&1
    (($(get_calls "$VICTIM") > 0))
}
wait_for 30 "replica $VICTIM to serve reads again" victim_serving
echo "restarted: scripts/cluster.sh restart <dir> $VICTIM -> back in rotation" \
    "($(get_calls "$VICTIM") GETs served by it since)"

if [[ $KEEP == 1 ]]; then
    hr "Kept up until Ctrl-C (DEMO_KEEP=1)"
    echo "redcar:      redis-cli -p $LISTEN_PORT   (admin 127.0.0.1:$ADMIN_PORT)"
    echo "status page: http://127.0.0.1:$ADMIN_PORT/"
    echo "cluster:     $SEEDS"
    echo "Press Ctrl-C to stop everything and clean up."
    KEEPING=1
    # In the background, so Ctrl-C runs the trap at once.
    sleep infinity &
    KEEP_PID=$!
    wait "$KEEP_PID" || true
fi
