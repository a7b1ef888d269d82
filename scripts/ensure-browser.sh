#!/usr/bin/env bash
# Make sure a headless-capable Chromium is installed for the status page test
# (tests/it/status_page.rs) and scripts/status-screenshot.sh: the Debian/Ubuntu package
# `chromium`, installed with apt-get when run as root, otherwise the exact command is printed
# (exit 1). `REDCAR_CHROMIUM` names another binary (it is then only checked, never installed).
# Idempotent and quick when the browser is already there.
set -euo pipefail

find_browser() {
    if [[ -n ${REDCAR_CHROMIUM:-} ]]; then
        command -v "$REDCAR_CHROMIUM" 2>/dev/null
        return
    fi
    local b
    for b in chromium chromium-browser google-chrome; do
        command -v "$b" 2>/dev/null && return 0
    done
    return 1
}

if ! browser=$(find_browser); then
    if [[ -n ${REDCAR_CHROMIUM:-} ]]; then
        echo "error: REDCAR_CHROMIUM=$REDCAR_CHROMIUM is not an executable" >&2
        exit 1
    fi
    echo "missing: chromium" >&2
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        # -o DPkg::Lock::Timeout: wait up to 5 min for another apt or dpkg (unattended-upgrades,
        # another ensure script) to release its lock instead of failing at once (apt >= 1.9.11).
        apt-get -o DPkg::Lock::Timeout=300 update
        # Fonts so the screenshot has readable text; no recommends (no desktop pieces).
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends chromium fonts-dejavu-core
    else
        echo "sudo apt-get install -y --no-install-recommends chromium fonts-dejavu-core"
        exit 1
    fi
    browser=$(find_browser) || {
        echo "error: chromium still not found after installing" >&2
        exit 1
    }
fi

echo "ok: $("$browser" --version 2>/dev/null || echo "$browser")"
