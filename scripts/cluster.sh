#!/usr/bin/env bash
# A local Redis Cluster (3 primaries + 3 replicas) on 127.0.0.1, for demos and benchmarks.
#
#   scripts/cluster.sh start DIR [BASEPORT]   start 6 nodes, create the cluster, wait for cluster_state:ok
#   scripts/cluster.sh stop DIR               stop the nodes started in DIR
#   scripts/cluster.sh status DIR             CLUSTER INFO summary of each node
#   scripts/cluster.sh kill DIR PORT          SIGKILL one node (a crash, for failure drills)
#   scripts/cluster.sh restart DIR PORT       start a killed node again (it rejoins from nodes.conf)
#
# BASEPORT 0 (default) picks free ports (each P with P+10000 free for the cluster bus);
# otherwise BASEPORT..BASEPORT+5 are used and must be free.
# After `start`, DIR holds: node-PORT/{pid,redis.log,nodes.conf}, ports (one per line),
# seeds ("127.0.0.1:p1,...,127.0.0.1:p6").
# Env: CLUSTER_NODE_TIMEOUT (ms, default 2000), CLUSTER_PRIMARIES (default 3),
#      CLUSTER_REPLICAS (per primary, default 1), CLUSTER_WAIT (s, default 30).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODE_TIMEOUT=${CLUSTER_NODE_TIMEOUT:-2000}
PRIMARIES=${CLUSTER_PRIMARIES:-3}
REPLICAS=${CLUSTER_REPLICAS:-1}
WAIT_SECS=${CLUSTER_WAIT:-30}

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

node_pids() { # DIR -> "PORT PID" lines
    local dir=$1 f
    for f in "$dir"/node-*/pid; do
        [[ -e "$f" ]] || continue
        local port=${f%/pid}
        port=${port##*/node-}
        echo "$port $(cat "$f")"
    done
}

stop_cluster() {
    local dir=$1 port pid i live=()
    [[ -d "$dir" ]] || return 0
    # SIGTERM every node at once (only live redis-servers on their own port,
    # never a recycled PID), then SIGKILL whatever is left after 10 s.
    while read -r port pid; do
        if is_pid_of "$pid" "redis-server.*:$port"; then
            kill -TERM "$pid" 2>/dev/null && live+=("$pid")
        fi
        rm -f "$dir/node-$port/pid"
    done < <(node_pids "$dir")
    for ((i = 0; i < 100 && ${#live[@]} > 0; i++)); do
        local still=()
        for pid in "${live[@]}"; do
            kill -0 "$pid" 2>/dev/null && still+=("$pid")
        done
        live=("${still[@]+"${still[@]}"}")
        ((${#live[@]} > 0)) && sleep 0.1
    done
    for pid in "${live[@]+"${live[@]}"}"; do
        log "node pid $pid ignored SIGTERM, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
    done
}

port_pair_free() { ! port_in_use "$1" && ! port_in_use $(($1 + 10000)); }

pick_ports() { # N BASEPORT
    local n=$1 base=$2 ports=() p tries=0
    if ((base != 0)); then
        for ((p = base; p < base + n; p++)); do
            port_pair_free "$p" || die "port $p or its bus port $((p + 10000)) is in use"
            ports+=("$p")
        done
    else
        while ((${#ports[@]} < n)); do
            ((tries++ < 1000)) || die "could not find $n free port pairs"
            p=$(free_port 12000 22000) || continue
            port_pair_free "$p" || continue
            [[ " ${ports[*]} " == *" $p "* ]] && continue
            ports+=("$p")
        done
    fi
    echo "${ports[@]}"
}

cluster_ok() { # PORT...: all nodes report cluster_state:ok, replicas' links are up
    local p
    for p in "$@"; do
        redis-cli -h 127.0.0.1 -p "$p" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
        local repl
        repl=$(redis-cli -h 127.0.0.1 -p "$p" INFO replication 2>/dev/null) || return 1
        if grep -q '^role:slave' <<<"$repl"; then
            grep -q '^master_link_status:up' <<<"$repl" || return 1
        fi
    done
}

start_node() { # DIR PORT: one cluster node in DIR/node-PORT (keeps an existing nodes.conf)
    local nd="$1/node-$2"
    redis-server --port "$2" --bind 127.0.0.1 --protected-mode no \
        --save "" --appendonly no --daemonize no \
        --dir "$nd" --logfile "$nd/redis.log" \
        --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout "$NODE_TIMEOUT" \
        --repl-diskless-sync-delay 0 --repl-ping-replica-period 1 \
        </dev/null >/dev/null 2>&1 &
    echo $! >"$nd/pid"
}

kill_node() { # DIR PORT
    local pid
    pid=$(cat "$1/node-$2/pid" 2>/dev/null) || die "no node $2 in $1"
    is_pid_of "$pid" "redis-server.*:$2" || die "node $2 (pid $pid) is not running"
    kill -KILL "$pid"
    rm -f "$1/node-$2/pid"
}

restart_node() { # DIR PORT
    [[ -f "$1/node-$2/nodes.conf" ]] || die "no node $2 in $1"
    [[ -f "$1/node-$2/pid" ]] && die "node $2 is running"
    start_node "$1" "$2"
    wait_for 10 "node $2 to answer PING" redis-cli -h 127.0.0.1 -p "$2" PING
}

start_cluster() {
    local dir=$1 base=${2:-0}
    local n=$((PRIMARIES * (1 + REPLICAS)))
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    if [[ -n "$(node_pids "$dir")" ]]; then
        die "$dir already has running nodes (scripts/cluster.sh stop $dir first)"
    fi
    local ports ports_line
    ports_line=$(pick_ports "$n" "$base")
    read -r -a ports <<<"$ports_line"

    # If anything below fails (or we are interrupted), stop what we started.
    trap 'rc=$?; trap - EXIT; trap "" INT TERM; if ((rc != 0)); then log "cluster start failed, stopping nodes"; stop_cluster "$dir"; fi; exit $rc' EXIT
    trap 'exit 130' INT TERM

    local p
    for p in "${ports[@]}"; do
        mkdir -p "$dir/node-$p"
        rm -f "$dir/node-$p/nodes.conf"
        start_node "$dir" "$p"
    done
    for p in "${ports[@]}"; do
        if ! wait_for 10 "node $p to answer PING" redis-cli -h 127.0.0.1 -p "$p" PING; then
            tail -n 20 "$dir/node-$p/redis.log" >&2 || true
            return 1
        fi
    done

    local addrs=() seeds
    for p in "${ports[@]}"; do addrs+=("127.0.0.1:$p"); done
    seeds=$(IFS=,; echo "${addrs[*]}")
    if ! redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$REPLICAS" --cluster-yes \
        >"$dir/create.log" 2>&1; then
        cat "$dir/create.log" >&2
        die "redis-cli --cluster create failed"
    fi
    if ! wait_for "$WAIT_SECS" "cluster_state:ok on all nodes" cluster_ok "${ports[@]}"; then
        for p in "${ports[@]}"; do
            printf 'node %s: %s %s\n' "$p" \
                "$(redis-cli -p "$p" CLUSTER INFO 2>&1 | grep -E '^cluster_state' | tr -d '\r')" \
                "$(redis-cli -p "$p" INFO replication 2>&1 | grep -E '^(role|master_link_status)' | tr -d '\r' | tr '\n' ' ')" >&2
        done
        return 1
    fi
    printf '%s\n' "${ports[@]}" >"$dir/ports"
    echo "$seeds" >"$dir/seeds"
    trap - EXIT INT TERM
    log "cluster up: $seeds (dir $dir)"
}

status_cluster() {
    local dir=$1 port pid
    while read -r port pid; do
        printf 'node %s pid %s: ' "$port" "$pid"
        if is_pid_of "$pid" redis-server; then
            redis-cli -p "$port" CLUSTER INFO 2>&1 | grep -E '^cluster_state' | tr -d '\r\n'
            printf ' %s\n' "$(redis-cli -p "$port" INFO replication | grep -E '^role' | tr -d '\r')"
        else
            echo "not running"
        fi
    done < <(node_pids "$dir")
}

cmd=${1:-}
case "$cmd" in
start)
    [[ $# -ge 2 ]] || usage
    start_cluster "$2" "${3:-0}"
    ;;
stop)
    [[ $# -ge 2 ]] || usage
    stop_cluster "$2"
    ;;
status)
    [[ $# -ge 2 ]] || usage
    status_cluster "$2"
    ;;
kill)
    [[ $# -ge 3 ]] || usage
    kill_node "$2" "$3"
    ;;
restart)
    [[ $# -ge 3 ]] || usage
    restart_node "$2" "$3"
    ;;
*) usage ;;
esac
