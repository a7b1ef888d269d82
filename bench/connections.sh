#!/usr/bin/env bash
# Connection benchmarks ("Connection economy"): what a stateless client pays to reach the cluster,
# direct with a cluster-aware client vs through redcar, on plain loopback and on a simulated
# data-centre network (a latency relay in front of every node, which the nodes announce).
#
#   1. per-request workload (bench/php/per_request.php): K requests of connect + 10 commands +
#      close, with phpredis RedisCluster, predis cluster mode, phpredis -> redcar TCP and
#      phpredis -> redcar Unix socket; ms per request, connect -> first reply, new TIME_WAIT sockets;
#   2. rate-limit workload (bench/ratelimit.py, redis-py): INCRBY+EXPIRE pipelines on 1, 1+1 and
#      5+5 keys, at a fixed rate and at maximum rate, redis-py RedisCluster vs redis-py -> redcar;
# then writes bench/RESULTS-connections.md.
#
# Env: CONN_REQUESTS     (default 1000) per-request workload: requests per client
#      CONN_WARMUP       (default 20)   unrecorded requests before those
#      CONN_CLIENTS      (default "phpredis-cluster predis-cluster redcar-tcp redcar-unix")
#      CONN_NETWORKS     (default "loopback simulated") networks to run
#      CONN_DELAY_US     (default 250) one-way delay of the simulated network
#      CONN_FRAGMENT_SLOTS (default 16) emulate a big cluster's topology reply on the networks in
#                        CONN_FRAGMENT_NETWORKS: deal the slots out to the 3 primaries round-robin
#                        in runs of this many slots (16384/N ranges in CLUSTER SLOTS); 0 = off
#      CONN_FRAGMENT_NETWORKS (default "simulated") networks run with the fragmented slot map
#      CONN_RATE         (default 500) fixed rate of the rate-limit workload, requests/s
#      CONN_RATE_SECONDS (default 5)   seconds per rate-limit run
#      CONN_RATE_WORKERS (default 2)   client processes (the fixed rate is split over them)
#      CONN_RATE_NETWORKS (default "simulated") networks the rate-limit workload runs on
#      CONN_RATE_TARGETS (default "cluster redcar") redis-py RedisCluster, redcar TCP (or unix)
#      CONN_RUN_TIMEOUT  (default 300) seconds before one client run is killed
#      CONN_OUT          (default bench/RESULTS-connections.md)
#      REDCAR_BIN        (default target/release/redcar; `make bench-connections` builds it)
#      RELAY_BIN         (default: built here from bench/relay into target/relay)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

REQUESTS=${CONN_REQUESTS:-1000}
WARMUP=${CONN_WARMUP:-20}
CLIENTS=${CONN_CLIENTS:-phpredis-cluster predis-cluster redcar-tcp redcar-unix}
NETWORKS=${CONN_NETWORKS:-loopback simulated}
DELAY_US=${CONN_DELAY_US:-250}
FRAGMENT_SLOTS=${CONN_FRAGMENT_SLOTS:-16}
FRAGMENT_NETWORKS=${CONN_FRAGMENT_NETWORKS:-simulated}
RATE=${CONN_RATE:-500}
RATE_SECONDS=${CONN_RATE_SECONDS:-5}
RATE_WORKERS=${CONN_RATE_WORKERS:-2}
RATE_NETWORKS=${CONN_RATE_NETWORKS:-simulated}
RATE_TARGETS=${CONN_RATE_TARGETS:-cluster redcar}
RUN_TIMEOUT=${CONN_RUN_TIMEOUT:-300}
OUT=${CONN_OUT:-$ROOT/bench/RESULTS-connections.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
PY=$ROOT/target/pyenv/bin/python
PHP_BENCH=$ROOT/bench/php/per_request.php
RATE_BENCH=$ROOT/bench/ratelimit.py

# ---------------------------------------------------------------- checks (installs nothing)
for tool in redis-server redis-cli ss php python3; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/ensure-redis.sh, scripts/ensure-clients.sh)"
done
php -r 'exit(class_exists("Redis") && class_exists("RedisCluster") ? 0 : 1);' 2>/dev/null ||
    die "phpredis not found: run scripts/ensure-clients.sh (apt-get install php-cli php-redis)"
php -r 'require "Predis/autoload.php"; exit(class_exists("Predis\\Client") ? 0 : 1);' 2>/dev/null ||
    die "predis not found: run scripts/ensure-clients.sh (apt-get install php-predis)"
[[ -x $PY ]] && "$PY" -c 'import redis' 2>/dev/null ||
    die "redis-py not found in target/pyenv: run scripts/ensure-clients.sh"
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"
for v in REQUESTS WARMUP DELAY_US FRAGMENT_SLOTS RATE RATE_SECONDS RATE_WORKERS RUN_TIMEOUT; do
    [[ "${!v}" =~ ^[0-9]+$ ]] || die "CONN_$v must be a whole number"
done
for n in $NETWORKS $RATE_NETWORKS $FRAGMENT_NETWORKS; do
    [[ $n == loopback || $n == simulated ]] || die "unknown network '$n' (loopback, simulated)"
done
# Only the simulated network needs the relay (`make bench` runs this on loopback only).
if [[ " $NETWORKS " == *" simulated "* ]]; then
    if [[ -z "${RELAY_BIN:-}" ]]; then
        log "building the latency relay (bench/relay)"
        CARGO_TARGET_DIR="$ROOT/target/relay" cargo build --release --quiet \
            --manifest-path "$ROOT/bench/relay/Cargo.toml" || die "building bench/relay failed"
        RELAY_BIN=$ROOT/target/relay/release/relay
    fi
    [[ -x "$RELAY_BIN" ]] || die "$RELAY_BIN not found"
fi

TIMEOUT=()
command -v timeout >/dev/null && TIMEOUT=(timeout "$RUN_TIMEOUT")

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-conn-bench.XXXXXX")
RES=$TMP/results
mkdir -p "$RES"
REDCAR_PID=""
RELAY_PID=""
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID" redcar
    [[ -n "$RELAY_PID" ]] && stop_pid "$RELAY_PID" relay
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    ((rc == 0)) || printf 'connection bench failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
BENCH_START=$SECONDS

# ---------------------------------------------------------------- helpers
# TIME_WAIT sockets as "local peer" lines, sorted (for comm).
tw_snapshot() { ss -tanH state time-wait 2>/dev/null | awk '{ print $(NF-1), $NF }' | sort -u; }
# tw_new BEFORE AFTER "PORT..." -> how many TIME_WAIT sockets in AFTER but not BEFORE have
# either end on one of the ports (client side: peer port; server side: local port).
tw_new() {
    comm -13 "$1" "$2" | awk -v ports="$3" '
        BEGIN { n = split(ports, a, " "); for (i = 1; i <= n; i++) want[a[i]] = 1 }
        { l = $1; sub(/.*:/, "", l); r = $2; sub(/.*:/, "", r); if ((l in want) || (r in want)) c++ }
        END { print c + 0 }'
}
# Sum of redcar_node_connections over all nodes.
node_connections() {
    http_body 127.0.0.1 "$ADMIN_PORT" /metrics 2>/dev/null |
        awk '/^redcar_node_connections[{ ]/ { s += $NF } END { print s + 0 }'
}
fresh_port() { # MIN MAX: a free port not already handed out by this script
    local p i
    for ((i = 0; i < 100; i++)); do
        p=$(free_port "$1" "$2") || return 1
        [[ " ${USED_PORTS:-} " == *" $p "* ]] && continue
        USED_PORTS="${USED_PORTS:-} $p"
        echo "$p"
        return 0
    done
    return 1
}

start_redcar() { # SEEDS
    REDCAR_CMD=("$REDCAR_BIN" --listen "127.0.0.1:$REDCAR_PORT" --unix "$REDCAR_SOCK"
        --cluster "$1" --admin "127.0.0.1:$ADMIN_PORT" --log-level warn)
    "${REDCAR_CMD[@]}" </dev/null >>"$TMP/redcar.log" 2>&1 &
    REDCAR_PID=$!
    wait_redcar_ready "$REDCAR_PID" "$ADMIN_PORT" "$TMP/redcar.log"
}

stop_redcar() {
    stop_pid "$REDCAR_PID" redcar
    REDCAR_PID=""
}

# redcar's CPU time so far (user + system, in clock ticks).
redcar_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$REDCAR_PID/stat"; }
# Sum of one redcar counter (all label values).
redcar_counter() { # NAME
    http_body 127.0.0.1 "$ADMIN_PORT" /metrics 2>/dev/null |
        awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $NF } END { print s + 0 }'
}

# ---------------------------------------------------------------- slot layouts
# A layout is "FIRST LAST PRIMARY" lines (PRIMARY 0-2) covering slots 0-16383. `created` is what
# redis-cli --cluster create makes (three contiguous ranges); `fragmented` deals the slots out to
# the three primaries round-robin in runs of FRAGMENT_SLOTS, so CLUSTER SLOTS lists
# 16384/FRAGMENT_SLOTS ranges: it emulates the big topology reply of a cluster with hundreds of
# nodes (the cluster itself stays 3 primaries + 3 replicas).
write_created_layout() { printf '0 5460 0\n5461 10922 1\n10923 16383 2\n' >"$1"; }
write_fragmented_layout() { # RUN FILE
    awk -v run="$1" 'BEGIN { for (s = 0; s < 16384; s += run) {
        e = s + run - 1; if (e > 16383) e = 16383; print s, e, int(s / run) % 3 } }' >"$2"
}
# The layout's CLUSTER NODES view with primary indexes: "PRIMARY RANGE" lines, adjacent merged.
layout_signature() { # FILE
    awk '{ if (o == $3 && $1 == l + 1) { l = $2; next } if (o != "") print o, f, l; o = $3; f = $1; l = $2 }
        END { print o, f, l }' "$1" | awk '{ print $1, ($2 == $3 ? $2 : $2 "-" $3) }' | sort
}
node_signature() { # PORT: that node's CLUSTER NODES view, node ids mapped to primary indexes
    redis-cli -p "$1" CLUSTER NODES | awk -v ids="${PRIMARY_IDS[*]}" '
        BEGIN { n = split(ids, a, " "); for (i = 1; i <= n; i++) idx[a[i]] = i - 1 }
        $3 ~ /master/ { for (i = 9; i <= NF; i++) if ($i !~ /^\[/) print (($1 in idx) ? idx[$1] : "?" $1), $i }' | sort
}
node_count_ok() { # every node knows all nodes, 3 of them primaries with slots, and replicas are linked
    local p
    for p in "${NODE_PORTS[@]}"; do
        [[ $(redis-cli -p "$p" CLUSTER NODES | awk '$8 == "connected"' | wc -l) == "${#NODE_PORTS[@]}" ]] || return 1
        [[ $(node_signature "$p") == "$LAYOUT_WANT" ]] || return 1
        redis-cli -p "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
        local repl
        repl=$(redis-cli -p "$p" INFO replication)
        if grep -q '^role:slave' <<<"$repl"; then grep -q '^master_link_status:up' <<<"$repl" || return 1; fi
    done
}
# set_layout FILE NAME: re-form the cluster with this layout. Moving slots between live primaries
# with CLUSTER SETSLOT ... NODE is refused by replicas, and without a config-epoch bump per move
# the other nodes reject claims from a lower-epoch primary (and send it UPDATEs that undo the
# move); so do what `redis-cli --cluster create` does, with our layout: FLUSHALL + CLUSTER RESET
# HARD on every node (no data yet: the workload's keys are written after, through redcar), then
# ADDSLOTSRANGE on the first 3 nodes, SET-CONFIG-EPOCH, MEET, REPLICATE (node 3+i replicates
# node i), and wait until every node reports the layout, cluster_state:ok, replicas linked, and
# `redis-cli --cluster check` passes. Same ports, new node ids.
CURRENT_LAYOUT=created
set_layout() {
    local file=$1 name=$2 p i n=${#NODE_PORTS[@]}
    [[ $CURRENT_LAYOUT == "$name" ]] && return 0
    ((n == 6)) || die "set_layout expects 3 primaries + 3 replicas"
    log "slot layout: $name ($(wc -l <"$file") ranges): re-forming the cluster"
    for p in "${NODE_PORTS[@]}"; do
        if redis-cli -p "$p" ROLE | head -n 1 | grep -q master; then
            redis-cli -p "$p" FLUSHALL >/dev/null
        fi
    done
    for p in "${NODE_PORTS[@]}"; do
        [[ $(redis-cli -p "$p" CLUSTER RESET HARD) == OK ]] || die "CLUSTER RESET HARD on $p failed"
    done
    PRIMARY_IDS=()
    for ((i = 0; i < 3; i++)); do
        p=${NODE_PORTS[i]}
        # shellcheck disable=SC2046
        [[ $(redis-cli -p "$p" CLUSTER ADDSLOTSRANGE $(awk -v i="$i" '$3 == i { print $1, $2 }' "$file")) == OK ]] ||
            die "CLUSTER ADDSLOTSRANGE on $p failed"
        PRIMARY_IDS+=("$(redis-cli -p "$p" CLUSTER MYID)")
    done
    for ((i = 0; i < n; i++)); do
        redis-cli -p "${NODE_PORTS[i]}" CLUSTER SET-CONFIG-EPOCH $((i + 1)) >/dev/null
    done
    for ((i = 1; i < n; i++)); do
        redis-cli -p "${NODE_PORTS[i]}" CLUSTER MEET 127.0.0.1 "${NODE_PORTS[0]}" >/dev/null
    done
    known() { # every node knows all the others
        local p
        for p in "${NODE_PORTS[@]}"; do
            [[ $(redis-cli -p "$p" CLUSTER NODES | wc -l) == "$n" ]] || return 1
        done
    }
    wait_for 30 "every node to meet the others" known || die "CLUSTER MEET did not complete"
    for ((i = 3; i < n; i++)); do
        [[ $(redis-cli -p "${NODE_PORTS[i]}" CLUSTER REPLICATE "${PRIMARY_IDS[i - 3]}") == OK ]] ||
            die "CLUSTER REPLICATE on ${NODE_PORTS[i]} failed"
    done
    LAYOUT_WANT=$(layout_signature "$file")
    wait_for 60 "every node to agree on the $name layout" node_count_ok || {
        for p in "${NODE_PORTS[@]}"; do node_signature "$p" | head -n 3 >&2; done
        die "the nodes did not agree on the $name slot layout"
    }
    redis-cli --cluster check "127.0.0.1:${NODE_PORTS[0]}" >"$TMP/check.log" 2>&1 &&
        grep -q 'All 16384 slots covered' "$TMP/check.log" && ! grep -q '^\[ERR\]' "$TMP/check.log" ||
        { tail -n 20 "$TMP/check.log" >&2; die "redis-cli --cluster check failed after the $name layout"; }
    CURRENT_LAYOUT=$name
    log "slot layout: $name: all nodes agree, redis-cli --cluster check OK"
}

# per_request NET CLIENT: one run of the PHP per-request workload, with TIME_WAIT counts.
per_request() {
    local net=$1 client=$2 target
    case $client in
    phpredis-cluster | predis-cluster) target=$CLIENT_SEEDS ;;
    redcar-tcp) target=127.0.0.1:$REDCAR_PORT ;;
    redcar-unix) target=$REDCAR_SOCK ;;
    *) die "unknown client '$client'" ;;
    esac
    local cmd=(php "$PHP_BENCH" "$client" "$target" "$REQUESTS" "$WARMUP")
    echo "$net: ${cmd[*]}" >>"$RES/commands"
    log "$net $client: $REQUESTS requests"
    local conns_before start=$SECONDS ticks0
    conns_before=$(node_connections)
    tw_snapshot >"$TMP/tw.before"
    ticks0=$(redcar_cpu_ticks)
    if ! "${TIMEOUT[@]}" "${cmd[@]}" >"$RES/pr-$net-$client.json" 2>"$TMP/pr.err"; then
        tail -n 20 "$TMP/pr.err" >&2
        die "per-request workload with $client ($net) failed"
    fi
    # redcar's CPU for the run (warm-up included: it is in the process's total too).
    [[ $client == redcar-* ]] && echo "$(($(redcar_cpu_ticks) - ticks0)) $((REQUESTS + WARMUP))" >"$RES/pr-$net-$client.cpu"
    sleep 0.5 # let the last closes finish their FIN exchange (through the relay too)
    tw_snapshot >"$TMP/tw.after"
    {
        echo "cluster=$(tw_new "$TMP/tw.before" "$TMP/tw.after" "$CLIENT_PORTS")"
        echo "relay_node=$(tw_new "$TMP/tw.before" "$TMP/tw.after" "$RELAYED_NODE_PORTS")"
        echo "redcar=$(tw_new "$TMP/tw.before" "$TMP/tw.after" "$REDCAR_PORT")"
        echo "node_conns_before=$conns_before"
        echo "node_conns_after=$(node_connections)"
    } >"$RES/pr-$net-$client.tw"
    log "  done in $((SECONDS - start)) s: $(tr '\n' ' ' <"$RES/pr-$net-$client.tw")"
}

# rate_limit NET TARGET SCENARIO MODE
rate_limit() {
    local net=$1 target=$2 scenario=$3 mode=$4 spec
    case $target in
    cluster) spec=cluster:$CLIENT_SEEDS ;;
    redcar) spec=redcar:127.0.0.1:$REDCAR_PORT ;;
    unix) spec=unix:$REDCAR_SOCK ;;
    *) die "unknown rate-limit target '$target'" ;;
    esac
    local cmd=("$PY" "$RATE_BENCH" "$spec" "$scenario" "$mode" "$RATE_SECONDS" "$RATE_WORKERS")
    echo "$net: ${cmd[*]}" >>"$RES/commands"
    log "$net rate-limit $scenario $mode $target"
    local ticks0
    ticks0=$(redcar_cpu_ticks)
    if ! "${TIMEOUT[@]}" "${cmd[@]}" >"$RES/rl-$net-$target-$scenario-$mode.json" 2>"$TMP/rl.err"; then
        tail -n 20 "$TMP/rl.err" >&2
        die "rate-limit workload $scenario $mode against $target ($net) failed"
    fi
    [[ $target == cluster ]] || echo "$(($(redcar_cpu_ticks) - ticks0))" >"$RES/rl-$net-$target-$scenario-$mode.cpu"
}

# ---------------------------------------------------------------- setup
log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
mapfile -t NODE_PORTS <"$TMP/cluster/ports"
NODE_SEEDS=$(cat "$TMP/cluster/seeds")
USED_PORTS="${NODE_PORTS[*]}"
REDCAR_PORT=$(fresh_port 8000 11000) || die "no free port" # below the ephemeral range
ADMIN_PORT=$(fresh_port 11000 12000) || die "no free port"
REDCAR_SOCK=$TMP/redcar.sock
((FRAGMENT_SLOTS <= 16384)) || die "CONN_FRAGMENT_SLOTS must be 0..16384"
write_created_layout "$TMP/layout-created"
if ((FRAGMENT_SLOTS > 0)); then
    write_fragmented_layout "$FRAGMENT_SLOTS" "$TMP/layout-fragmented"
fi

run_network() { # NET
    local net=$1 p c
    if ((FRAGMENT_SLOTS > 0)) && [[ " $FRAGMENT_NETWORKS " == *" $net "* ]]; then
        set_layout "$TMP/layout-fragmented" fragmented
        echo "$net: slot layout fragmented: slots dealt to the 3 primaries round-robin in runs of $FRAGMENT_SLOTS ($(wc -l <"$TMP/layout-fragmented") ranges), cluster re-formed with CLUSTER ADDSLOTSRANGE (see set_layout)" >>"$RES/setup"
    else
        set_layout "$TMP/layout-created" created
        echo "$net: slot layout as created by redis-cli --cluster create (3 ranges)" >>"$RES/setup"
    fi
    if [[ $net == simulated ]]; then
        # One relay process, one listening port per node; every node announces its relay's port
        # (and its real bus port, so gossip stays direct), so CLUSTER SLOTS / NODES / MOVED all
        # point at the relays: direct clients and redcar cross the same simulated network.
        local maps=() relay_ports=()
        for p in "${NODE_PORTS[@]}"; do
            c=$(fresh_port 22000 32000) || die "no free port"
            relay_ports+=("$c")
            maps+=("$c=$p")
        done
        RELAY_CMD=("$RELAY_BIN" --delay-us "$DELAY_US" "${maps[@]}")
        "${RELAY_CMD[@]}" </dev/null >"$TMP/relay.log" 2>&1 &
        RELAY_PID=$!
        for c in "${relay_ports[@]}"; do
            wait_for 10 "relay port $c" port_in_use "$c" || die "relay did not start: $(cat "$TMP/relay.log")"
        done
        local i
        for ((i = 0; i < ${#NODE_PORTS[@]}; i++)); do
            p=${NODE_PORTS[i]}
            redis-cli -p "$p" CONFIG SET cluster-announce-bus-port $((p + 10000)) >/dev/null
            redis-cli -p "$p" CONFIG SET cluster-announce-port "${relay_ports[i]}" >/dev/null
        done
        announced() { # every node lists all six nodes, each at a relay port
            local p want n
            want=$(printf '%s\n' "${relay_ports[@]}" | sort | tr '\n' ' ')
            for p in "${NODE_PORTS[@]}"; do
                n=$(redis-cli -p "$p" CLUSTER NODES | awk '{ split($2, a, "[:@]"); print a[2] }' | sort | tr '\n' ' ')
                [[ $n == "$want" ]] || return 1
            done
            for p in "${NODE_PORTS[@]}"; do
                redis-cli -p "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
            done
        }
        wait_for 30 "every node to announce the relay ports" announced || die "gossip did not settle"
        CLIENT_PORTS="${relay_ports[*]}"
        RELAYED_NODE_PORTS="${NODE_PORTS[*]}"
        CLIENT_SEEDS=$(printf '127.0.0.1:%s,' "${relay_ports[@]}")
        CLIENT_SEEDS=${CLIENT_SEEDS%,}
        # CLUSTER SLOTS as a client sees it (through the relay), for the report
        php "$PHP_BENCH" slots "127.0.0.1:${relay_ports[0]}" >"$RES/slots-$net.txt"
        if grep -qE ":($(IFS='|'; echo "${NODE_PORTS[*]}"))( |\$)" "$RES/slots-$net.txt"; then
            cat "$RES/slots-$net.txt" >&2
            die "CLUSTER SLOTS still shows real node ports"
        fi
        # The relay's own cost: PING round trips to node 1, direct and through its relay
        php "$PHP_BENCH" ping "127.0.0.1:${NODE_PORTS[0]}" 500 >"$RES/ping-$net-direct.json"
        php "$PHP_BENCH" ping "127.0.0.1:${relay_ports[0]}" 500 >"$RES/ping-$net-relay.json"
        php "$PHP_BENCH" slotscost "127.0.0.1:${relay_ports[0]}" 50 >"$RES/slotscost-$net.json"
    else
        CLIENT_PORTS="${NODE_PORTS[*]}"
        RELAYED_NODE_PORTS=""
        CLIENT_SEEDS=$NODE_SEEDS
        php "$PHP_BENCH" slots "127.0.0.1:${NODE_PORTS[0]}" >"$RES/slots-$net.txt"
        php "$PHP_BENCH" ping "127.0.0.1:${NODE_PORTS[0]}" 500 >"$RES/ping-$net-direct.json"
        php "$PHP_BENCH" slotscost "127.0.0.1:${NODE_PORTS[0]}" 50 >"$RES/slotscost-$net.json"
    fi
    log "$net: CLUSTER SLOTS cost: $(cat "$RES/slotscost-$net.json")"
    log "$net: starting redcar (seeds $CLIENT_SEEDS)"
    local t0 ticks0
    t0=$(date +%s%N)
    start_redcar "$CLIENT_SEEDS"
    local ready_ms=$((($(date +%s%N) - t0) / 1000000))
    # redcar's CPU while idle: 10 s, i.e. two periodic topology refreshes (every 5 s)
    ticks0=$(redcar_cpu_ticks)
    local refreshes0
    refreshes0=$(redcar_counter redcar_topology_refreshes_total)
    sleep 10
    {
        echo "ready_ms=$ready_ms"
        echo "startup_cpu_ms=$((ticks0 * 1000 / $(getconf CLK_TCK)))"
        echo "idle_cpu_ms=$((($(redcar_cpu_ticks) - ticks0) * 1000 / $(getconf CLK_TCK)))"
        echo "idle_refreshes=$(($(redcar_counter redcar_topology_refreshes_total) - refreshes0))"
    } >"$RES/redcar-$net.kv"
    echo "$net: ${REDCAR_CMD[*]}" >>"$RES/setup"
    [[ $net == simulated ]] && echo "$net: ${RELAY_CMD[*]}" >>"$RES/setup"
    php "$PHP_BENCH" setup "127.0.0.1:$REDCAR_PORT" >/dev/null || die "writing the workload's keys failed"
    for c in $CLIENTS; do per_request "$net" "$c"; done
    if [[ " $RATE_NETWORKS " == *" $net "* ]]; then
        local scenario mode t
        for scenario in fixed mixed2 mixed10; do
            for mode in "$RATE" max; do
                for t in $RATE_TARGETS; do rate_limit "$net" "$t" "$scenario" "$mode"; done
            done
        done
    fi
    {
        echo "total_cpu_ms=$(($(redcar_cpu_ticks) * 1000 / $(getconf CLK_TCK)))"
        echo "refreshes=$(redcar_counter redcar_topology_refreshes_total)"
        echo "rejected=$(redcar_counter redcar_topology_rejected_total)"
        echo "redirects=$(redcar_counter redcar_redirects_total)"
        echo "errors=$(redcar_counter redcar_command_errors_total)"
    } >>"$RES/redcar-$net.kv"
    log "$net: redcar $(tr '\n' ' ' <"$RES/redcar-$net.kv")"
    stop_redcar
}

for net in $NETWORKS; do run_network "$net"; done

# ---------------------------------------------------------------- report
CPU=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
REPORT=$TMP/RESULTS-connections.md
{
    echo "# redcar connection benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); took $((SECONDS - BENCH_START)) s"
    echo "- command: \`$(env | grep -E '^(CONN_|REDCAR_BIN|RELAY_BIN)' | sort | tr '\n' ' ')bench/connections.sh\`"
    echo "- machine: $(nproc) CPUs, ${CPU:-unknown CPU}, $(uname -sr), load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- redis: $(redis-server --version | sed 's/ sha=.*//')"
    echo "- clients: $(php -r 'require "Predis/autoload.php"; echo "php ", PHP_VERSION, ", phpredis ", phpversion("redis"), ", predis ", Predis\Client::VERSION;'), $("$PY" -c 'import redis, sys; print("python %d.%d, redis-py %s" % (sys.version_info[0], sys.version_info[1], redis.__version__))')"
    echo "- redcar: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) ($REDCAR_BIN)"
    echo "- note: clients, relay, six redis-server processes and redcar share the same $(nproc) CPUs"
    echo
    echo "## Setup"
    echo
    echo '```'
    echo "cluster: scripts/cluster.sh start DIR (3 primaries + 3 replicas): $NODE_SEEDS"
    cat "$RES/setup"
    for f in "$RES"/slots-*.txt; do
        echo "CLUSTER SLOTS ($(basename "$f" .txt | sed 's/^slots-//'), $(wc -l <"$f") ranges):"
        if (($(wc -l <"$f") > 8)); then
            head -n 6 "$f" | sed 's/^/  /'
            echo "  ..."
            tail -n 1 "$f" | sed 's/^/  /'
        else
            sed 's/^/  /' "$f"
        fi
    done
    echo '```'
    echo
    python3 "$ROOT/bench/connections_report.py" "$RES" "$DELAY_US"
    echo "## Commands"
    echo
    echo '```'
    cat "$RES/commands"
    echo '```'
} >"$REPORT"
cp "$REPORT" "$OUT"
log "wrote $OUT in $((SECONDS - BENCH_START)) s"
sed -n '/^## Per-request/,/^## Commands/p' "$OUT" | sed '$d'
