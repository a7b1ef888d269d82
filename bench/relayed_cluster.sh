# shellcheck shell=bash
# Puts the simulated data-centre network (bench/relay) in front of a running local cluster: one
# relay process with a listening port per node, every node announcing its relay's port (and its
# real bus port, so gossip stays direct), so CLUSTER SLOTS / NODES / MOVED all point at the
# relays and whoever follows them crosses the delay. Source it after scripts/lib.sh; functions
# only.

# relay_build ROOT: prints the relay binary, built into ROOT/target/relay unless RELAY_BIN is set.
relay_build() {
    if [[ -n "${RELAY_BIN:-}" ]]; then
        echo "$RELAY_BIN"
        return
    fi
    CARGO_TARGET_DIR="$1/target/relay" cargo build --release --quiet \
        --manifest-path "$1/bench/relay/Cargo.toml" || die "building bench/relay failed"
    echo "$1/target/relay/release/relay"
}

# relay_cluster RELAY DELAY_US LOG NODE_PORT...: starts the relay (one way DELAY_US) in front of
# these nodes and waits until every node lists all of them at their relay ports and the cluster
# is ok. Sets RELAY_PID, RELAY_PORTS (in NODE_PORT order) and RELAY_SEEDS (host:port,...).
relay_cluster() {
    local relay=$1 delay=$2 log_file=$3
    shift 3
    local nodes=("$@") maps=() p c i
    RELAY_PORTS=()
    for p in "${nodes[@]}"; do
        for ((i = 0; i < 50; i++)); do # a port not already handed to another node
            c=$(free_port 22000 32000) || die "no free port"
            [[ " ${RELAY_PORTS[*]} ${nodes[*]} " == *" $c "* ]] || break
        done
        RELAY_PORTS+=("$c")
        maps+=("$c=$p")
    done
    "$relay" --delay-us "$delay" "${maps[@]}" </dev/null >"$log_file" 2>&1 &
    RELAY_PID=$!
    for c in "${RELAY_PORTS[@]}"; do
        wait_for 10 "relay port $c" port_in_use "$c" || die "relay did not start: $(cat "$log_file")"
    done
    for ((i = 0; i < ${#nodes[@]}; i++)); do
        p=${nodes[i]}
        redis-cli -p "$p" CONFIG SET cluster-announce-bus-port $((p + 10000)) >/dev/null
        redis-cli -p "$p" CONFIG SET cluster-announce-port "${RELAY_PORTS[i]}" >/dev/null
    done
    RELAY_WANT=$(printf '%s\n' "${RELAY_PORTS[@]}" | sort | tr '\n' ' ')
    RELAY_NODES=("${nodes[@]}")
    wait_for 30 "every node to announce the relay ports" relay_announced || die "gossip did not settle"
    RELAY_SEEDS=$(printf '127.0.0.1:%s,' "${RELAY_PORTS[@]}")
    RELAY_SEEDS=${RELAY_SEEDS%,}
}

# relay_announced: every node lists all the nodes, each at its relay port, and says the cluster
# is ok (uses RELAY_WANT and RELAY_NODES from relay_cluster).
relay_announced() {
    local p n
    for p in "${RELAY_NODES[@]}"; do
        n=$(redis-cli -p "$p" CLUSTER NODES | awk '{ split($2, a, "[:@]"); print a[2] }' | sort | tr '\n' ' ')
        [[ $n == "$RELAY_WANT" ]] || return 1
        redis-cli -p "$p" CLUSTER INFO | grep -q '^cluster_state:ok' || return 1
    done
}
