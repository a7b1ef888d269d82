#!/usr/bin/env bash
# cargo-deny over redcar's dependency graph (deny.toml): licences, bans (crates that must not
# come back, wildcard versions; duplicates are reported), sources (crates.io only) and the
# RustSec advisories (vulnerable, unsound, unmaintained or yanked crates).
#
#   scripts/deny.sh            run it if cargo-deny is installed, else say how and exit 0
#   scripts/deny.sh --install  install cargo-deny into target/tools first when missing
#                              (`make deny`; cargo install --locked, a few minutes once)
#
# The advisory database is fetched (git) on each run; where it cannot be fetched, the
# advisories check is reported as skipped and the other three still run and decide the result.
#
# First, always: scripts/dependencies.py (every direct dependency has its reason in Cargo.toml
# and a release in the last 12 months, read from the crates.io index when it is reachable).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python3 scripts/dependencies.py || exit 1

export PATH="$PWD/target/tools/bin:$PATH"
if ! cargo deny --version >/dev/null 2>&1; then
    if [[ ${1:-} == --install ]]; then
        echo "deny: installing cargo-deny into target/tools (cargo install --locked; a few minutes, once)" >&2
        cargo install --locked --root target/tools cargo-deny || exit 1
    else
        echo "deny: skipped: cargo-deny is not installed (\`make deny\` installs it into target/tools)" >&2
        exit 0
    fi
fi

echo "deny: $(cargo deny --version): licenses, bans, sources"
cargo deny --log-level error check licenses bans sources || exit 1

echo "deny: fetching the advisory database"
if ! cargo deny fetch db >/dev/null 2>&1; then
    echo "deny: advisories skipped: the RustSec advisory database could not be fetched (offline?)" >&2
    echo "deny: ok (licenses, bans, sources)"
    exit 0
fi
cargo deny --log-level error check --disable-fetch advisories || exit 1
echo "deny: ok (licenses, bans, sources, advisories)"
