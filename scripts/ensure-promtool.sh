#!/usr/bin/env bash
# Make sure `promtool` is installed: it checks and unit-tests the alerting rules in
# examples/prometheus/ (scripts/check-observability-examples.sh, tests/it/observability_examples.rs).
# It comes with the Debian/Ubuntu package `prometheus`, installed with apt-get when run as root
# (without recommends: no node exporter); otherwise the exact command is printed (exit 1).
# `REDCAR_PROMTOOL` names another binary (it is then only checked, never installed).
# Idempotent and quick when promtool is already there.
set -euo pipefail

find_promtool() {
    command -v "${REDCAR_PROMTOOL:-promtool}" 2>/dev/null
}

if ! promtool=$(find_promtool); then
    if [[ -n ${REDCAR_PROMTOOL:-} ]]; then
        echo "error: REDCAR_PROMTOOL=$REDCAR_PROMTOOL is not an executable" >&2
        exit 1
    fi
    echo "missing: promtool" >&2
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
        # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
        apt-get -o DPkg::Lock::Timeout=300 update
        # The package may start a Prometheus server (on :9090); nothing here uses it.
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends prometheus
    else
        echo "sudo apt-get install -y --no-install-recommends prometheus"
        exit 1
    fi
    promtool=$(find_promtool) || {
        echo "error: promtool still not found after installing" >&2
        exit 1
    }
fi

echo "ok: $("$promtool" --version 2>&1 | head -n 1)"
