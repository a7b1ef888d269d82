#!/usr/bin/env bash
# Checks the Prometheus alerting rules shipped in examples/prometheus/:
#   - `promtool check rules redcar.rules.yml`: syntax, templates, durations;
#   - `promtool test rules redcar.rules.test.yml`: the unit tests (series in, alerts out).
# promtool comes from scripts/ensure-promtool.sh (Debian/Ubuntu package `prometheus`, installed
# with apt-get when run as root; otherwise the command to run is printed and this exits 1).
# `REDCAR_PROMTOOL` names another promtool binary.
#
# tests/it/observability_examples.rs runs the same two checks and also compares every metric
# name of the rules and of the Grafana dashboard (examples/grafana/redcar.json) with what a
# running redcar exposes.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"

dir=$root/examples/prometheus
rules=$dir/redcar.rules.yml
tests=$dir/redcar.rules.test.yml

"$root/scripts/ensure-promtool.sh" >&2 || die "promtool is not installed (see above)"
promtool=$(command -v "${REDCAR_PROMTOOL:-promtool}")

log "promtool check rules ${rules#"$root"/}"
"$promtool" check rules "$rules"

# rule_files in the test file are relative to the test file.
log "promtool test rules ${tests#"$root"/}"
"$promtool" test rules "$tests"

log "ok: the alerting rules are valid and their unit tests pass"
