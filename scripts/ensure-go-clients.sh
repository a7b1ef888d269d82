#!/usr/bin/env bash
# Build the go-redis v9 client program the tests drive (tests/clients/go/, run by
# tests/it/clients.rs and tests/it/facade.rs) into target/go-clients/redcar-go-clients, with
# the module versions pinned in tests/clients/go/go.mod and go.sum fetched from the Go module
# proxy into target/go-clients/mod (GOMODCACHE) and the build cache in target/go-clients/cache
# (GOCACHE); GOTOOLCHAIN=local, so nothing but modules is downloaded. Go itself comes from apt
# (`golang-go`) when missing and run as root; otherwise the command is printed (exit 1).
# Idempotent: when the sources have not changed since the last build it only hashes them.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$root/tests/clients/go"
out="$root/target/go-clients"
bin="$out/redcar-go-clients"

if ! command -v go >/dev/null 2>&1; then
    echo "missing: go" >&2
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
        # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
        apt-get -o DPkg::Lock::Timeout=300 update
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends golang-go
    else
        echo "sudo apt-get install -y --no-install-recommends golang-go"
        exit 1
    fi
fi

hash=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -d' ' -f1)
if [[ ! -x $bin || $(cat "$out/.src-hash" 2>/dev/null) != "$hash" ]]; then
    mkdir -p "$out"
    (
        cd "$src"
        export GOTOOLCHAIN=local GOFLAGS=-modcacherw GOMODCACHE="$out/mod" GOCACHE="$out/cache"
        go build -mod=readonly -o "$bin" .
    )
    echo "$hash" >"$out/.src-hash"
fi
echo "ok: $(go version | cut -d' ' -f3), go-redis $(sed -n 's/^require github.com\/redis\/go-redis\/v9 \(v[^ ]*\)$/\1/p' "$src/go.mod") ($bin)"
