#!/usr/bin/env bash
# Make sure `nutcracker` (twemproxy, Debian/Ubuntu package nutcracker) is installed: the
# reference proxy of `make bench`. Installs it with apt-get when run as root; otherwise prints the
# command to run and exits 1 (bench/run.sh then skips the nutcracker rows with a note).
set -euo pipefail

command -v nutcracker >/dev/null 2>&1 && exit 0
# Debian installs it as /usr/sbin/nutcracker, which is not on every user's PATH.
[[ -x /usr/sbin/nutcracker ]] && exit 0

echo "missing: nutcracker" >&2
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
    # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq nutcracker >/dev/null
    # The package may start a system service (on 127.0.0.1:22121 by default); the bench
    # starts its own nutcracker on a free port and does not use it.
    if command -v nutcracker >/dev/null 2>&1 || [[ -x /usr/sbin/nutcracker ]]; then
        exit 0
    fi
    echo "error: nutcracker still not found after installing" >&2
    exit 1
fi
echo "install it with: sudo apt-get install -y nutcracker" >&2
exit 1
