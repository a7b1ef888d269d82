#!/usr/bin/env bash
# The one-at-a-time command's cost against its targets (issue 45): instructions per request,
# counted by callgrind (bench/callgrind.sh), the median of CALLGRIND_RUNS runs (default 5), with
# `--workers 1` and `--workers 2`, printed next to predixy's figures (../shared/MEASURED.md: the
# same scenarios, measured the same way) as a Markdown report.
#
#   bench/callgrind_targets.sh [BIN]      (default target/release/redcar)
#
# Env: CALLGRIND_RUNS (default 5), CALLGRIND_TARGETS_OUT (also write the report there).
# Exits 1 when a median is over its target, so `make bench` shows it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/target/release/redcar}
RUNS=${CALLGRIND_RUNS:-5}
command -v valgrind >/dev/null || { echo "valgrind not found: sudo apt-get install valgrind" >&2; exit 2; }

# scenario, target: the issue's bounds, predixy's instructions per request rounded down (5,744,
# 6,446, 4,618, 4,747); MSET/MGET: redcar's own at a085151 ("no worse").
TARGETS="get:1:5000=5700 get:1:3000:1=6400 get:16:20000=4600 set:16:20000=4700 mset:1:3000=31678 mget10:1:3000=34883"
SCENARIOS=$(for t in $TARGETS; do printf '%s ' "${t%%=*}"; done)

TMP=$(mktemp -d -t redcar-cgtargets-XXXXXX)
trap 'rm -rf "$TMP"' EXIT
# One cluster per worker count; the binary runs RUNS times in it, each run its own process.
BINS=()
for _ in $(seq 1 "$RUNS"); do BINS+=("$BIN"); done
for workers in 1 2; do
    CALLGRIND_WORKERS=$workers CALLGRIND_SCENARIOS="$SCENARIOS" "$ROOT/bench/callgrind.sh" "${BINS[@]}" 2>/dev/null |
        grep 'instructions/request' >"$TMP/w$workers-r1" || true
done

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print a[int((NR + 1) / 2)]}'; }
over=0
{
    echo "# Instructions per request against the targets (issue 45)"
    echo
    echo "Command: \`CALLGRIND_RUNS=$RUNS bench/callgrind_targets.sh $BIN\` ($(date -u +%F), $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'));"
    echo "each figure the median of $RUNS runs of \`bench/callgrind.sh\`. Targets: predixy's figures measured the"
    echo "same way (\`WorkerThreads 1\`) and rounded down as the issue states them, and for MSET/MGET redcar's"
    echo "own at a085151 (\"no worse\")."
    echo
    echo "| scenario | target | \`--workers 1\` | \`--workers 2\` | met |"
    echo "|---|---:|---:|---:|---|"
    for t in $TARGETS; do
        scenario=${t%%=*}
        target=${t##*=}
        IFS=: read -r test depth requests clients _ <<<"$scenario"
        pattern="$test -c ${clients:-10} -P $depth -k 1 n=$requests:"
        w1=$(cat "$TMP"/w1-r* | grep -F -- " $pattern" | awk '{print $(NF-1)}' | median)
        w2=$(cat "$TMP"/w2-r* | grep -F -- " $pattern" | awk '{print $(NF-1)}' | median)
        met=yes
        for v in $w1 $w2; do
            if [[ $v == - || $v -gt $target ]]; then met=no; over=1; fi
        done
        echo "| \`$scenario\` | $target | $w1 | $w2 | $met |"
    done
} | tee "$TMP/report.md"
[[ -n "${CALLGRIND_TARGETS_OUT:-}" ]] && cp "$TMP/report.md" "$CALLGRIND_TARGETS_OUT"
exit "$over"
