#!/usr/bin/env bash
# Flame graphs of redcar under the top benchmark scenario (redis-benchmark, 50 clients, -P 16):
# redcar (built with `--profile profiling`: the release build plus full debug info) runs in front
# of a local 3+3 cluster while `perf record -F 999 --call-graph dwarf` samples it; the stacks are
# folded and drawn with inferno (`cargo install inferno`) into docs/perf/<test>-p<depth>.svg, and
# the share of the samples per kind of work (syscalls, tokio, parsing, ...) goes into
# docs/perf/<test>-p<depth>.txt.
#
# Env: FLAME_SCENARIOS (default "get:16 set:16") TEST:PIPELINE pairs, one graph each
#      FLAME_CLIENTS   (default 50)
#      FLAME_REQUESTS  (default 3000000) requests per scenario (perf samples for the whole run)
#      FLAME_CALL_GRAPH (default dwarf) perf's unwinder: dwarf, or fp (frame pointers: lighter,
#                      but Rust release code has none, so stacks are cut short)
#      FLAME_OUT_DIR   (default docs/perf)
#      FLAME_KEEP      a directory to copy the folded stacks into (for inferno-diff-folded between builds)
#      REDCAR_BIN      (default: target/profiling/redcar, built by this script)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

SCENARIOS=${FLAME_SCENARIOS:-get:16 set:16}
CLIENTS=${FLAME_CLIENTS:-50}
REQUESTS=${FLAME_REQUESTS:-3000000}
CALL_GRAPH=${FLAME_CALL_GRAPH:-dwarf}
OUT_DIR=${FLAME_OUT_DIR:-$ROOT/docs/perf}

# ---------------------------------------------------------------- tools
for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
if ! command -v perf >/dev/null; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        log "installing linux-perf"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq linux-perf >/dev/null
    fi
    command -v perf >/dev/null ||
        die "perf not found: install it (Debian: sudo apt-get install linux-perf; Ubuntu: linux-tools-\$(uname -r)), or use bench/callgrind.sh, which needs only valgrind"
fi
# Can perf sample here at all? (VMs and containers often forbid it.)
perf_works() { perf record -q -F 999 -g -o /dev/null -- true >/dev/null 2>&1; }
if ! perf_works; then
    if [[ $(id -u) -eq 0 ]]; then
        log "perf cannot sample (kernel.perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)): setting it to -1"
        sysctl -q -w kernel.perf_event_paranoid=-1 || true
    fi
    perf_works || die "perf record cannot sample on this machine (kernel.perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid); as root: sysctl -w kernel.perf_event_paranoid=-1). Without perf, bench/callgrind.sh counts instructions per function instead."
fi
CARGO_BIN=${CARGO_HOME:-$HOME/.cargo}/bin
export PATH="$PATH:$CARGO_BIN"
if ! command -v inferno-collapse-perf >/dev/null || ! command -v inferno-flamegraph >/dev/null; then
    log "installing inferno (cargo install inferno)"
    cargo install --quiet --locked inferno || die "cargo install inferno failed"
fi
if [[ -z "${REDCAR_BIN:-}" ]]; then
    log "building redcar with --profile profiling (release + debug info)"
    (cd "$ROOT" && cargo build --quiet --profile profiling) || die "cargo build --profile profiling failed"
    REDCAR_BIN=$ROOT/target/profiling/redcar
fi
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found"

# ---------------------------------------------------------------- setup
TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-flame.XXXXXX")
REDCAR_PID=""
PERF_PID=""
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM
    [[ -n "$PERF_PID" ]] && stop_pid "$PERF_PID" perf
    [[ -n "$REDCAR_PID" ]] && stop_pid "$REDCAR_PID" redcar
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    ((rc == 0)) || printf 'flamegraph failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
PORT=$(free_port 8000 11000) || die "no free port"
ADMIN=$(free_port 11000 12000) || die "no free port"
REDCAR_CMD=("$REDCAR_BIN" --listen "127.0.0.1:$PORT" --cluster "$SEEDS" --admin "127.0.0.1:$ADMIN")
"${REDCAR_CMD[@]}" </dev/null >"$TMP/redcar.log" 2>&1 &
REDCAR_PID=$!
wait_redcar_ready "$REDCAR_PID" "$ADMIN" "$TMP/redcar.log"
redis-benchmark -p "$PORT" -t set,get -n 20000 -c "$CLIENTS" -r 100000 -q >/dev/null 2>&1 ||
    log "warning: warm-up failed"

# classify FOLDED: share of samples per kind of work. A stack that entered the kernel through a
# syscall counts as that syscall; allocation, memcpy and clock reads count by their leaf frame;
# anything else by the innermost redcar or tokio frame on the stack (so an inlined-away helper or
# an iterator adapter counts as the module that called it).
classify() {
    awk '
    function module(fr) {
        if (fr ~ /^redcar(_protocol)?::protocol/) return "redcar: RESP parsing / encoding (protocol)"
        if (fr ~ /^redcar::router/) return "redcar: routing, slot hashing, reply hand-off (router)"
        if (fr ~ /^redcar::downstream/) return "redcar: client sessions (downstream)"
        if (fr ~ /^redcar::upstream/) return "redcar: node connections (upstream)"
        if (fr ~ /^redcar::metrics/) return "redcar: metrics"
        if (fr ~ /^redcar::cluster/) return "redcar: topology (cluster)"
        if (fr ~ /redcar(_protocol)?::/) return "redcar: other"
        if (fr ~ /^<?tokio::sync::oneshot/) return "tokio: oneshot channels (replies to sessions)"
        if (fr ~ /^<?(tokio|mio)::/) return "tokio: scheduling, I/O readiness, wake-ups"
        return ""
    }
    {
        n = $NF; stack = $0; sub(/ [0-9]+$/, "", stack); total += n
        k = split(stack, f, ";"); leaf = f[k]; cat = ""
        if (stack ~ /entry_SYSCALL|do_syscall_64/) {
            if (stack ~ /epoll_wait/) cat = "syscalls: epoll_wait (incl. sleeping/switching)"
            else if (stack ~ /sendto|sendmsg|sys_write|writev/) cat = "syscalls: send/write (TCP send path)"
            else if (stack ~ /recvfrom|recvmsg|sys_read/) cat = "syscalls: recv/read"
            else if (stack ~ /futex/) cat = "syscalls: futex (thread wake-ups)"
            else cat = "syscalls: other"
        } else if (leaf ~ /^(mi_|_mi_|malloc|free|realloc|cfree|__rust_(alloc|dealloc|realloc))|^<?alloc::|mimalloc/) cat = "allocation (mimalloc)"
        else if (leaf ~ /memcpy|memmove|memset|memchr|bcmp|memcmp/) cat = "memcpy, memchr & co."
        else if (leaf ~ /clock_gettime|Instant::now/) cat = "clock reads"
        else if (leaf ~ /_\[k\]$/) cat = "kernel, outside syscalls (interrupts, softirq)"
        else for (i = k; i >= 1 && cat == ""; i--) cat = module(f[i])
        if (cat == "") cat = "other"
        by[cat] += n
    }
    END {
        for (c in by) printf "%6.1f%%  %s\n", 100 * by[c] / total, c
    }' "$1" | sort -rn
}
send_path() { # FOLDED: what the send/write syscalls spend their time on (loopback TCP)
    awk '{
        n = $NF; t += n
        if ($0 !~ /entry_SYSCALL|do_syscall_64/ || $0 !~ /sendto|sendmsg|sys_write|writev/) next
        send += n
        if ($0 ~ /tcp_v4_rcv|__netif_receive_skb|process_backlog|net_rx_action/) rx += n
        if ($0 ~ /try_to_wake_up|__wake_up_common|sock_def_readable|ep_poll_callback/) wake += n
    } END {
        if (t == 0 || send == 0) exit
        printf "%6.1f%%  all send/write syscalls\n", 100 * send / t
        printf "%6.1f%%    of which the receiving side of loopback TCP, run in the sender (softirq: tcp_v4_rcv and below)\n", 100 * rx / t
        printf "%6.1f%%    of which waking the reader (try_to_wake_up: a redis-server, redis-benchmark or redcar thread)\n", 100 * wake / t
    }' "$1"
}
top_self() { # FOLDED: the 20 leaf frames with the most samples
    awk '{ n = $NF; s = $0; sub(/ [0-9]+$/, "", s); k = split(s, f, ";"); leaf[f[k]] += n; t += n }
        END { for (l in leaf) printf "%6.1f%%  %s\n", 100 * leaf[l] / t, l }' "$1" | sort -rn | awk 'NR <= 20'
}

# ---------------------------------------------------------------- runs
mkdir -p "$OUT_DIR"
for scenario in $SCENARIOS; do
    test=${scenario%%:*}
    depth=${scenario##*:}
    name=$test-p$depth
    data=$TMP/$name.data
    log "$name: perf record -F 999 --call-graph $CALL_GRAPH -p $REDCAR_PID during redis-benchmark -t $test -P $depth -c $CLIENTS -n $REQUESTS"
    perf record -q -F 999 -g --call-graph "$CALL_GRAPH" -p "$REDCAR_PID" -o "$data" >"$TMP/perf-$name.log" 2>&1 &
    PERF_PID=$!
    sleep 1 # let perf attach before the load starts
    bench=(redis-benchmark -p "$PORT" -t "$test" -P "$depth" -c "$CLIENTS" -n "$REQUESTS" -r 100000 -q)
    "${bench[@]}" >"$TMP/bench-$name.txt" 2>&1 || die "redis-benchmark failed: $(tail -n 3 "$TMP/bench-$name.txt")"
    kill -INT "$PERF_PID"
    wait "$PERF_PID" || true
    PERF_PID=""
    log "$name: $(tr '\r' '\n' <"$TMP/bench-$name.txt" | grep 'requests per second' | tail -n 1); folding stacks"
    perf script -i "$data" --no-inline >"$TMP/$name.script" 2>/dev/null
    samples=$(grep -c '^[^[:space:]]' "$TMP/$name.script" || true)
    inferno-collapse-perf --all "$TMP/$name.script" >"$TMP/$name.folded"
    rm -f "$TMP/$name.script" "$data"
    [[ -s "$TMP/$name.folded" ]] || die "perf recorded no stacks for $name (see $TMP/perf-$name.log)"
    inferno-flamegraph --title "redcar: ${test^^} -P $depth, $CLIENTS clients (perf -F 999, $CALL_GRAPH)" \
        --width 1600 <"$TMP/$name.folded" >"$OUT_DIR/$name.svg"
    {
        echo "redcar flame graph $name.svg: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
        echo "redcar: ${REDCAR_CMD[*]}"
        echo "load:   ${bench[*]}"
        echo "        $(tr '\r' '\n' <"$TMP/bench-$name.txt" | grep 'requests per second' | tail -n 1)"
        echo "perf:   perf record -F 999 -g --call-graph $CALL_GRAPH -p PID; $samples samples of redcar's threads"
        echo
        echo "Share of samples by kind of work (bench/flamegraph.sh classify):"
        classify "$TMP/$name.folded"
        echo
        echo "Inside the send path (shares of all samples):"
        send_path "$TMP/$name.folded"
        echo
        echo "Top 20 leaf frames (self time):"
        top_self "$TMP/$name.folded"
    } >"$OUT_DIR/$name.txt"
    if [[ -n "${FLAME_KEEP:-}" ]]; then
        mkdir -p "$FLAME_KEEP"
        cp "$TMP/$name.folded" "$FLAME_KEEP/"
    fi
    log "wrote $OUT_DIR/$name.svg and $name.txt"
    cat "$OUT_DIR/$name.txt"
done
