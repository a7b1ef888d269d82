#!/usr/bin/env bash
# A connect burst (`make bench-connect-burst`): in front of a local 3+3 Redis Cluster, redcar is
# started once per `client.accept_backlog` in BURST_BACKLOGS (default: 128, the listen queue
# before the setting existed, and the default) and bench/connect_burst.py opens BURST_CONNECTIONS
# connections from BURST_CONCURRENCY concurrent connectors (each connects again as soon as its
# connect() returns and sends PING at once; a reader thread times the +PONG; all are kept open
# until the end). Reported per run: connect and connect-to-first-reply times (p50, p99,
# max), connections that took ≥ 0.9 s (a dropped SYN is retried after 1 s), and the change of
# ListenOverflows/ListenDrops (TcpExt, /proc/net/netstat) over the run. Writes BURST_OUT.
#
# Env: BURST_CONNECTIONS (default 5000)  BURST_CONCURRENCY (default 50)
#      BURST_BACKLOGS    (default "128 4096")  BURST_ROUNDS (default 3; runs alternate backlogs)
#      BURST_OUT         (default bench/RESULTS-connect-burst.md)
#      REDCAR_BIN        (default target/release/redcar; `make bench-connect-burst` builds it)
#      REDCAR_ARGS       extra redcar arguments (split on spaces)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

CONNECTIONS=${BURST_CONNECTIONS:-5000}
CONCURRENCY=${BURST_CONCURRENCY:-50}
BACKLOGS=${BURST_BACKLOGS:-128 4096}
ROUNDS=${BURST_ROUNDS:-3}
OUT=${BURST_OUT:-$ROOT/bench/RESULTS-connect-burst.md}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}

for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"
for v in CONNECTIONS CONCURRENCY ROUNDS; do
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || die "BURST_$v must be a whole number ≥ 1"
done
for b in $BACKLOGS; do
    [[ $b =~ ^[1-9][0-9]*$ ]] || die "BURST_BACKLOGS: '$b' is not a whole number ≥ 1"
done
# The interpreter itself, not a version manager's shim (stop_pid must reach the process).
PY=$(python3 -c 'import sys; print(sys.executable)')

# Every process started from here may hold the whole burst open.
FD_HARD=$(ulimit -Hn)
[[ $FD_HARD == unlimited ]] && FD_HARD=$(cat /proc/sys/fs/nr_open)
ulimit -n "$FD_HARD" || die "could not raise the file-descriptor soft limit to $FD_HARD"
((FD_HARD >= CONNECTIONS + 200)) || die "$CONNECTIONS connections need ulimit -Hn ≥ $((CONNECTIONS + 200))"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-burst.XXXXXX")
REDCAR_PID=""
cleanup() {
    local rc=$?
    trap - EXIT
    trap "" INT TERM
    [[ -n $REDCAR_PID ]] && stop_pid "$REDCAR_PID" redcar
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    ((rc == 0)) || printf 'bench/connect_burst.sh failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# tcp_ext NAME: a TcpExt counter from /proc/net/netstat (this network namespace, every socket).
tcp_ext() {
    awk -v name="$1" '$1 == "TcpExt:" && !header { for (i = 2; i <= NF; i++) col[$i] = i; header = 1; next }
        $1 == "TcpExt:" && header { print $col[name]; exit }' /proc/net/netstat
}

log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
SOMAXCONN=$(cat /proc/sys/net/core/somaxconn)
ROWS=()

# run_burst BACKLOG ROUND: one redcar with that listen queue, one burst; appends a table row.
run_burst() {
    local backlog=$1 round=$2 port admin queue over0 drop0 over1 drop1 json
    port=$(free_port 8000 11000) || die "no free port"
    admin=$(free_port 11000 12000) || die "no free port"
    printf 'client:\n  accept_backlog: %s\n  max_connections: %s\n' "$backlog" "$((CONNECTIONS + 1000))" \
        >"$TMP/redcar.yaml"
    # shellcheck disable=SC2206 # REDCAR_ARGS is meant to split
    local cmd=("$REDCAR_BIN" --listen "127.0.0.1:$port" --cluster "$SEEDS" --admin "127.0.0.1:$admin"
        --config "$TMP/redcar.yaml" ${REDCAR_ARGS:-})
    "${cmd[@]}" </dev/null >"$TMP/redcar.log" 2>&1 &
    REDCAR_PID=$!
    wait_redcar_ready "$REDCAR_PID" "$admin" "$TMP/redcar.log"
    queue=$(ss -Hltn "sport = :$port" | awk '{ print $3; exit }')
    over0=$(tcp_ext ListenOverflows)
    drop0=$(tcp_ext ListenDrops)
    log "backlog $backlog (ss Send-Q $queue), round $round: $CONNECTIONS connections from $CONCURRENCY connectors"
    json=$("$PY" "$ROOT/bench/connect_burst.py" 127.0.0.1 "$port" "$CONNECTIONS" "$CONCURRENCY")
    over1=$(tcp_ext ListenOverflows)
    drop1=$(tcp_ext ListenDrops)
    stop_pid "$REDCAR_PID" redcar
    REDCAR_PID=""
    ROWS+=("$("$PY" - "$json" "$backlog" "$queue" "$round" "$((over1 - over0))" "$((drop1 - drop0))" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
backlog, queue, rnd, over, drop = sys.argv[2:7]
c, f = r["connect"], r["first_reply"]
print(f"| {backlog} | {queue} | {rnd} | {r['connections']} / {r['replied']} | {r['errors']} | {r['seconds']} | "
      f"{c['p50_ms']} / {c['p99_ms']} / {c['max_ms']} | {c['stalled']} | "
      f"{f['p50_ms']} / {f['p99_ms']} / {f['max_ms']} | {f['stalled']} | {over} | {drop} |")
EOF
    )")
    log "${ROWS[-1]}"
}

for ((round = 1; round <= ROUNDS; round++)); do
    for backlog in $BACKLOGS; do
        run_burst "$backlog" "$round"
    done
done

{
    echo "# Connect burst: \`client.accept_backlog\`"
    echo
    echo "Command: \`BURST_CONNECTIONS=$CONNECTIONS BURST_CONCURRENCY=$CONCURRENCY BURST_BACKLOGS=\"$BACKLOGS\" BURST_ROUNDS=$ROUNDS bench/connect_burst.sh\`"
    echo "($(date -u +%Y-%m-%dT%H:%MZ), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown commit)"
    echo "plus the working tree; redcar \`$REDCAR_BIN\` with \`${REDCAR_ARGS:-no extra arguments}\`)."
    echo
    echo "- machine: $(nproc) CPUs, $(uname -sr), net.core.somaxconn $SOMAXCONN, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- redis: $(redis-server --version | sed 's/ sha=.*//')"
    echo "- each run: a fresh redcar (default \`threading\`/\`workers\`) with \`client.accept_backlog\` as given, then"
    echo "  $CONCURRENCY threads of bench/connect_burst.py open $CONNECTIONS connections between them, each"
    echo "  connecting again as soon as connect() returns (PING sent at once, +PONG timed by a reader"
    echo "  thread per connector); all stay open until the end"
    echo "- times in ms, p50 / p99 / max; \"≥ 0.9 s\": connections that took that long (a SYN the"
    echo "  kernel dropped because the listen queue was full is sent again after 1 s)"
    echo "- ListenOverflows/ListenDrops: the change of those TcpExt counters in /proc/net/netstat over"
    echo "  the run, for the whole network namespace (other processes' listeners count too)"
    echo
    echo "| accept_backlog | ss Send-Q | round | connected / +PONG | errors | seconds | connect | ≥ 0.9 s | connect to +PONG | ≥ 0.9 s | ListenOverflows | ListenDrops |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
} >"$OUT"
log "wrote $OUT in $((SECONDS))s"
