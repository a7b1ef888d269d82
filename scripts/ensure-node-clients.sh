#!/usr/bin/env bash
# Make sure the Node.js Redis clients the tests drive (tests/clients/*.mjs, run by
# tests/it/clients.rs and tests/it/facade.rs) are installed: node-redis (npm `redis`) and
# ioredis at the versions pinned in tests/clients/node/package-lock.json, installed with
# `npm ci` into target/node (npm's cache in target/npm-cache). Node.js and npm themselves come
# from apt (`nodejs npm`) when missing and run as root; otherwise the command is printed (exit 1).
# Idempotent: a second run only compares the lock file and takes well under a second.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/tests/clients/node"
dest="$root/target/node"
stamp="$dest/node_modules/.redcar-lock"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "missing: node and npm" >&2
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
        # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
        apt-get -o DPkg::Lock::Timeout=300 update
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends nodejs npm
    else
        echo "sudo apt-get install -y --no-install-recommends nodejs npm"
        exit 1
    fi
fi

# The installed tree matches the pinned lock file: nothing to do.
if ! cmp -s "$src/package-lock.json" "$stamp"; then
    mkdir -p "$dest"
    cp "$src/package.json" "$src/package-lock.json" "$dest/"
    (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error --cache "$root/target/npm-cache")
    cp "$src/package-lock.json" "$stamp"
fi

(cd "$dest" && node -e '
  const v = (n) => require(n + "/package.json").version;
  require("redis"); require("ioredis");
  console.log(`ok: node ${process.versions.node}, node-redis ${v("redis")}, ioredis ${v("ioredis")} (target/node)`);
')
