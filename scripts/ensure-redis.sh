#!/usr/bin/env bash
# Make sure the tools the tests, demo and bench need are installed:
# redis-server, redis-cli, redis-benchmark (Debian/Ubuntu packages redis-server
# and redis-tools) and cargo (with rustfmt and clippy).
set -euo pipefail

missing=()
for tool in redis-server redis-cli redis-benchmark; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done

if ((${#missing[@]} > 0)); then
    echo "missing: ${missing[*]}" >&2
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
        # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
        apt-get -o DPkg::Lock::Timeout=300 update
        apt-get -o DPkg::Lock::Timeout=300 install -y redis-server redis-tools
        # The package may start a system service on port 6379; the tests do not use it.
    else
        echo "sudo apt-get install -y redis-server redis-tools"
        exit 1
    fi
    for tool in redis-server redis-cli redis-benchmark; do
        command -v "$tool" >/dev/null 2>&1 || {
            echo "error: $tool still not found after installing" >&2
            exit 1
        }
    done
fi

if ! command -v cargo >/dev/null 2>&1; then
    cat <<'MSG'
error: cargo not found. Install the Rust toolchain with rustup:
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile default
  . "$HOME/.cargo/env"
MSG
    exit 1
fi
for component in fmt clippy; do
    if ! cargo "$component" --version >/dev/null 2>&1; then
        name=$([[ $component == fmt ]] && echo rustfmt || echo clippy)
        if command -v rustup >/dev/null 2>&1; then
            rustup component add "$name"
        else
            echo "error: cargo $component not available; install the $name component (rustup component add $name)" >&2
            exit 1
        fi
    fi
done

echo "ok: $(redis-server --version | cut -d' ' -f1-3), $(cargo --version)"
