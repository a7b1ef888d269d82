#!/usr/bin/env bash
# nutcracker (twemproxy) over plain redis-servers on 127.0.0.1: the reference proxy of `make bench`.
#
#   bench/nutcracker.sh start DIR [SERVERS]   start SERVERS (default 3) non-cluster redis-servers
#                                             (no persistence) and one nutcracker pool over them
#   bench/nutcracker.sh stop DIR              stop everything started in DIR
#
# nutcracker cannot talk to cluster-mode nodes (a key on the wrong node is answered with MOVED), so
# it gets its own plain nodes, as many as the cluster has primaries. The pool: `hash: fnv1a_64` +
# `distribution: ketama` (twemproxy's recommended consistent hashing), `redis: true`,
# `server_connections: 1` (one connection per node, like redcar's one pipelined connection per
# node), `preconnect: true`, `auto_eject_hosts: false`.
# After `start`, DIR holds: port (the pool's listen port), nutcracker.pid, server-pids (one per
# line), nutcracker.yml, logs. Env: NUTCRACKER_BIN (default: nutcracker on PATH or /usr/sbin).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"

nutcracker_bin() {
    if [[ -n "${NUTCRACKER_BIN:-}" ]]; then echo "$NUTCRACKER_BIN"; return; fi
    command -v nutcracker 2>/dev/null || echo /usr/sbin/nutcracker
}

start() {
    local dir=$1 n=${2:-3} i p bin
    bin=$(nutcracker_bin)
    [[ -x "$bin" ]] || die "nutcracker not found (scripts/ensure-nutcracker.sh)"
    mkdir -p "$dir"
    : >"$dir/server-pids"
    local servers=()
    for ((i = 1; i <= n; i++)); do
        p=$(free_port 20000 32000) || die "no free port"
        mkdir -p "$dir/server-$i"
        redis-server --port "$p" --bind 127.0.0.1 --protected-mode no --save "" --appendonly no \
            --daemonize no --dir "$dir/server-$i" --logfile "$dir/server-$i/redis.log" \
            </dev/null >/dev/null 2>&1 &
        echo "$!" >>"$dir/server-pids"
        wait_for 10 "plain redis-server $i" redis-cli -p "$p" PING
        servers+=("   - 127.0.0.1:$p:1 server$i")
    done
    local port stats
    port=$(free_port 8000 11000) || die "no free port"
    stats=$(free_port 11000 12000) || die "no free port"
    {
        echo "bench:"
        echo "  listen: 127.0.0.1:$port"
        echo "  hash: fnv1a_64"
        echo "  distribution: ketama"
        echo "  redis: true"
        echo "  preconnect: true"
        echo "  server_connections: 1"
        echo "  auto_eject_hosts: false"
        echo "  servers:"
        printf '%s\n' "${servers[@]}"
    } >"$dir/nutcracker.yml"
    "$bin" --test-conf -c "$dir/nutcracker.yml" >/dev/null 2>&1 ||
        die "nutcracker rejected $dir/nutcracker.yml"
    "$bin" -c "$dir/nutcracker.yml" -s "$stats" -a 127.0.0.1 -o "$dir/nutcracker.log" \
        -p "$dir/nutcracker.pid.own" </dev/null >/dev/null 2>&1 &
    echo "$!" >"$dir/nutcracker.pid"
    echo "$port" >"$dir/port"
    # Ready when a key round-trips through it to a node.
    wait_for 10 "nutcracker" redis-cli -p "$port" SET redcar:bench:probe 1 ||
        { tail -n 20 "$dir/nutcracker.log" >&2; die "nutcracker did not start"; }
}

stop() {
    local dir=$1 pid
    [[ -d "$dir" ]] || return 0
    if [[ -f "$dir/nutcracker.pid" ]]; then
        stop_pid "$(cat "$dir/nutcracker.pid")" nutcracker
        rm -f "$dir/nutcracker.pid"
    fi
    if [[ -f "$dir/server-pids" ]]; then
        while read -r pid; do stop_pid "$pid" redis-server; done <"$dir/server-pids"
        rm -f "$dir/server-pids"
    fi
}

case ${1:-} in
start) start "${2:?DIR}" "${3:-3}" ;;
stop) stop "${2:?DIR}" ;;
*)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
