#!/usr/bin/env bash
# Skew reproduction (docs/skew.md): 4 redcar instances behind a round-robin TCP front, one of
# them 200 ms slower, clients with LIFO connection pools at 100 req/s with 10 s peaks of
# 150 req/s. Runs it twice, without and with `client.max_age`, against the same 3+3 cluster,
# and plots connections per instance over time (bench/skew.py does the front, the clients,
# the sampling and the plot).
#
# Env: SKEW_DURATION (default 80)  seconds per run
#      SKEW_MAX_AGE  (default 5s)  client.max_age in the "with" run
#      SKEW_DELAY    (default 0.2) seconds added in front of the slow instance
#      SKEW_IMG_DIR  (default docs/img) where the two PNGs go
#      SKEW_KEEP     (default none) a directory to copy the per-run JSON and logs into
#      SKEW_ARGS     (default none) extra arguments for `skew.py run`, e.g. "--idle-evict 0"
#      PYTHON        (default target/pyenv/bin/python if present, else python3); needs matplotlib
#      REDCAR_BIN    (default target/release/redcar)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

DURATION=${SKEW_DURATION:-80}
MAX_AGE=${SKEW_MAX_AGE:-5s}
DELAY=${SKEW_DELAY:-0.2}
IMG_DIR=${SKEW_IMG_DIR:-$ROOT/docs/img}
KEEP=${SKEW_KEEP:-}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}
if [[ -z "${PYTHON:-}" ]]; then
    PYTHON=python3
    [[ -x "$ROOT/target/pyenv/bin/python" ]] && PYTHON=$ROOT/target/pyenv/bin/python
fi
INSTANCES=4

for tool in redis-server redis-cli; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"
[[ "$DURATION" =~ ^[0-9]+$ ]] || die "SKEW_DURATION must be a whole number of seconds"
"$PYTHON" -c 'import sys; assert sys.version_info >= (3, 8)' 2>/dev/null ||
    die "$PYTHON: Python 3.8 or newer needed (set PYTHON=...)"
"$PYTHON" -c 'import matplotlib' 2>/dev/null ||
    die "matplotlib is missing for $PYTHON; install it with: $PYTHON -m pip install matplotlib"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-skew.XXXXXX")
REDCAR_PIDS=()
PY_PID=""
stop_redcars() {
    local pid
    for pid in "${REDCAR_PIDS[@]+"${REDCAR_PIDS[@]}"}"; do stop_pid "$pid" redcar; done
    REDCAR_PIDS=()
}
cleanup() {
    local rc=$?
    trap - EXIT; trap "" INT TERM # finish cleaning up even on a second Ctrl-C
    [[ -n "$PY_PID" ]] && stop_pid "$PY_PID" skew.py
    stop_redcars
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    if [[ -n "$KEEP" && -d "$TMP" ]]; then
        mkdir -p "$KEEP" && cp "$TMP"/*.json "$TMP"/*.log "$TMP"/*.md "$KEEP"/ 2>/dev/null || true
    fi
    rm -rf "$TMP"
    ((rc == 0)) || printf 'skew run failed (exit %s); everything it started has been stopped.\n' "$rc" >&2
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")

# start_redcars NAME [CONFIG]: INSTANCES redcar processes; sets LISTENS and ADMINS (comma lists)
start_redcars() {
    local name=$1 config=${2:-} i port admin cmd addrs=() admins=()
    for ((i = 0; i < INSTANCES; i++)); do
        port=$(free_port 8000 11000) || die "no free port" # below the ephemeral range
        admin=$(free_port 11000 12000) || die "no free port"
        [[ " ${addrs[*]-} ${admins[*]-} " == *":$port "* || " ${addrs[*]-} ${admins[*]-} " == *":$admin "* ]] &&
            { ((i--)); continue; } # picked twice before anyone listened: pick again
        cmd=("$REDCAR_BIN" --listen "127.0.0.1:$port" --cluster "$SEEDS" --admin "127.0.0.1:$admin" --workers 1)
        [[ -n "$config" ]] && cmd+=(--config "$config")
        "${cmd[@]}" </dev/null >"$TMP/redcar-$name-$i.log" 2>&1 &
        REDCAR_PIDS+=($!)
        addrs+=("127.0.0.1:$port")
        admins+=("127.0.0.1:$admin")
        log "  redcar $i: ${cmd[*]}"
    done
    for ((i = 0; i < INSTANCES; i++)); do
        wait_redcar_ready "${REDCAR_PIDS[i]}" "${admins[i]##*:}" "$TMP/redcar-$name-$i.log" "redcar $i"
    done
    LISTENS=$(IFS=,; echo "${addrs[*]}")
    ADMINS=$(IFS=,; echo "${admins[*]}")
}

# one_run NAME LABEL MAX_AGE [CONFIG]
one_run() {
    local name=$1 label=$2 age=$3 config=${4:-}
    log "run '$label': starting $INSTANCES redcar instances"
    start_redcars "$name" "$config"
    # shellcheck disable=SC2086 # SKEW_ARGS is a list of extra arguments
    local cmd=("$PYTHON" "$ROOT/bench/skew.py" run --instances "$LISTENS" --admins "$ADMINS"
        --slow 0 --delay "$DELAY" --duration "$DURATION" --max-age "$age" --label "$label"
        --out "$TMP/$name.json" -v ${SKEW_ARGS:-})
    log "run '$label': ${cmd[*]} (${DURATION} s)"
    "${cmd[@]}" 2>"$TMP/skew-$name.log" &
    PY_PID=$!
    local rc=0
    wait "$PY_PID" || rc=$?
    PY_PID=""
    tail -n 1 "$TMP/skew-$name.log" >&2
    ((rc == 0)) || log "warning: run '$label' had failed requests (see the summary)"
    [[ -s "$TMP/$name.json" ]] || die "run '$label' wrote no results"
    stop_redcars
}

printf 'client:\n  max_age: %s\n' "$MAX_AGE" >"$TMP/max-age.yaml"
one_run without "without max_age" 0s
one_run with "with client.max_age $MAX_AGE" "$MAX_AGE" "$TMP/max-age.yaml"

mkdir -p "$IMG_DIR"
"$PYTHON" "$ROOT/bench/skew.py" plot --without "$TMP/without.json" --with "$TMP/with.json" \
    --img-dir "$IMG_DIR" | tee "$TMP/summary.md"
log "done: $IMG_DIR/skew-without-max-age.png, $IMG_DIR/skew-with-max-age.png"
