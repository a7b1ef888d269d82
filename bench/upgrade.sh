#!/usr/bin/env bash
# An upgrade in place against a plain restart, under load (`make bench-upgrade`,
# docs/operations.md): in front of a local 3+3 Redis Cluster, bench/upgrade.py runs per-request
# connectors and persistent one-at-a-time clients while redcar is upgraded in place
# UPGRADE_ROUNDS times (`redcar upgrade --pid-file`), then, with a fresh redcar, restarted as
# many times (SIGTERM, start again). Prints one JSON line per mode: refused connects, command
# errors, persistent connections closed, connect and command latency (p50/p99/max).
#
# Env: UPGRADE_ROUNDS (default 3)  UPGRADE_CONNECTORS (default 4)  UPGRADE_PERSISTENT (default 4)
#      REDCAR_BIN (default target/release/redcar; `make bench-upgrade` builds it)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$ROOT/scripts/lib.sh"

ROUNDS=${UPGRADE_ROUNDS:-3}
CONNECTORS=${UPGRADE_CONNECTORS:-4}
PERSISTENT=${UPGRADE_PERSISTENT:-4}
REDCAR_BIN=${REDCAR_BIN:-$ROOT/target/release/redcar}

for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || die "$tool not found (run scripts/ensure-redis.sh)"
done
[[ -x "$REDCAR_BIN" ]] || die "$REDCAR_BIN not found: build it first (make build)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/redcar-bench-upgrade.XXXXXX")
cleanup() {
    local rc=$?
    trap - EXIT
    "$ROOT/scripts/cluster.sh" stop "$TMP/cluster" 2>/dev/null || true
    rm -rf "$TMP"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "starting 3+3 cluster"
"$ROOT/scripts/cluster.sh" start "$TMP/cluster" 0
SEEDS=$(cat "$TMP/cluster/seeds")
for mode in upgrade restart; do
    log "$mode x $ROUNDS under load ($CONNECTORS per-request connectors, $PERSISTENT persistent clients)"
    python3 "$ROOT/bench/upgrade.py" --redcar "$REDCAR_BIN" --seeds "$SEEDS" --mode "$mode" \
        --rounds "$ROUNDS" --connectors "$CONNECTORS" --persistent "$PERSISTENT"
done
