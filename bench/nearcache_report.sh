# shellcheck shell=bash
# The report of bench/nearcache.sh: judges the targets of issue 27 from the runs' data lines and
# writes bench/RESULTS-nearcache.md. Sourced by nearcache.sh once every run is done (it uses
# that script's variables and TMP/runs).

# ---------------------------------------------------------------- report helpers
pick() { # MODE -> the round with the median ops/s (the lower middle one for an even count)
    local f
    for f in "$TMP"/runs/"$1".r*.data; do
        [[ -f $f ]] && echo "$(awk '{ print $2 }' "$f") $(basename "$f" .data)"
    done | sort -n | awk '{ run[NR] = $2 } END { if (NR > 0) print run[int((NR + 1) / 2)] }'
}
col() { # KEY N -> field N of KEY's data line
    [[ -f $TMP/runs/$1.data ]] && awk -v n="$2" '{ print $n }' "$TMP/runs/$1.data"
    return 0
}
per_cmd() { # KEY -> commands at the primaries per client command
    awk '{ if ($1 > 0) printf "%.3f", $7 / $1 }' "$TMP/runs/$1.data"
}
cpu_m() { # KEY FIELD(8 nodes, 9 redcar) -> CPU seconds per million client commands
    awk -v f="$2" -v hz="$CLK_TCK" '{ if ($1 > 0 && !(f == 9 && $9 == 0)) printf "%.2f", $f / hz / ($1 / 1e6); else print "-" }' "$TMP/runs/$1.data"
}
hit_ratio() { # KEY -> hits / (hits + misses), or "-" when redcar reported neither
    awk '{ if ($10 + $11 > 0) printf "%.1f %%", 100 * $10 / ($10 + $11); else print "-" }' "$TMP/runs/$1.data"
}
ratio() {
    [[ -n $1 && -n $2 ]] || return 0
    awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 != 0) printf "%.2f", a / b }'
}
stale_field() { # MODE KEY
    [[ -f $TMP/runs/stale.$1.out ]] && result_field "$TMP/runs/stale.$1.out" "$2"
    return 0
}
TARGET_ROWS=()
TARGETS_MET=0
verdict() { # VALUE OP LIMIT -> met / not met / not measured
    if [[ -z $1 ]]; then
        echo "not measured"
    elif awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN { exit !((op == ">=") ? v >= l : (op == "<=") ? v <= l : v == l) }'; then
        echo "**met**"
    else
        echo "not met"
    fi
}
target() { # NAME DETAIL VALUE OP LIMIT
    local v
    v=$(verdict "$3" "$4" "$5")
    [[ $v != "**met**" ]] || TARGETS_MET=$((TARGETS_MET + 1))
    TARGET_ROWS+=("| $1 | $2 | $v |")
}

OFF=$(pick off)
ON=""
((CACHE == 0)) || ON=$(pick on)
THR=""
FEWER=""
if [[ -n $ON ]]; then
    THR=$(ratio "$(col "$ON" 2)" "$(col "$OFF" 2)")
    FEWER=$(awk -v a="$(per_cmd "$ON")" -v b="$(per_cmd "$OFF")" 'BEGIN { if (b > 0) printf "%.3f", 1 - a / b }')
fi
no_cache="near cache not in this build"
shown() { # VALUE TEXT -> TEXT when VALUE was measured, else why not
    if [[ -n $1 ]]; then echo "$2"; else echo "$no_cache"; fi
}
thr_text=""
fewer_text=""
if [[ -n $ON ]]; then
    thr_text="${THR}× (median rounds: $(col "$ON" 2) vs $(col "$OFF" 2) ops/s)"
    if ((DIRECT == 1)); then
        DIRECT_K=$(pick direct)
        CEILING=$(ratio "$(col "$DIRECT_K" 2)" "$(col "$OFF" 2)")
        thr_text+="; the ceiling here, one standalone redis-server answering every command itself: ${CEILING}× off ($(col "$DIRECT_K" 2) ops/s)"
    fi
    fewer_text="$(awk -v f="$FEWER" 'BEGIN { printf "%.1f %% fewer", 100 * f }') ($(per_cmd "$ON") vs $(per_cmd "$OFF"))"
fi
target "throughput, on / off" "$(shown "$THR" "$thr_text")" "$THR" ">=" "$TARGET_THROUGHPUT"
target "commands at the primaries per client command, on vs off" "$(shown "$FEWER" "$fewer_text")" "$FEWER" ">=" "$TARGET_FEWER"
if ((WRITES > 0)); then
    sp99=""
    smax=""
    sstale=""
    if ((CACHE == 1)); then
        sp99=$(stale_field on p99_ms)
        smax=$(stale_field on max_ms)
        sstale=$(stale_field on stale_after_bound)
    fi
    target "staleness probe (cache on): visibility p99 ≤ $TARGET_VIS_P99_MS ms" "$(shown "$sp99" "$sp99 ms")" "$sp99" "<=" "$TARGET_VIS_P99_MS"
    target "staleness probe (cache on): visibility max ≤ the bound ($BOUND_MS ms)" "$(shown "$smax" "$smax ms")" "$smax" "<=" "$BOUND_MS"
    target "staleness probe (cache on): stale reads after the bound = 0" "$(shown "$sstale" "$sstale")" "$sstale" "==" 0
fi

# ---------------------------------------------------------------- report
REPORT=$TMP/RESULTS-nearcache.md
{
    echo "# redcar near cache: benchmark results"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); the script took $((SECONDS - START)) s"
    echo "- command: \`$(env | grep -E '^(NEARCACHE_|REDCAR_BIN=)' | sort | tr '\n' ' ')bench/nearcache.sh\`"
    NUTCRACKER=0 NC_NOTE="" report_machine | grep -v '^- nutcracker' || true
    echo "- redcar: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) ($REDCAR_BIN)"
    if ((CACHE == 0)); then
        echo "- **near cache: not available** — $CACHE_NOTE"
    fi
    echo "- workload: \`mixload ${LOAD_ARGS[*]} --seconds $SECS\` (bench/mixload: each client its own connection, one command in flight; keys drawn uniformly from hot:0..hot:$((KEYS - 1)), all SET once before the warm-up), through redcar; $ROUNDS round(s), the modes interleaved (${MODES[*]}, then in reverse), a fresh redcar per run warmed up for $WARMUP s; rows report the round with the median ops/s; \`on-nowt\` is the cache on with \`write_through: false\` (a SET drops its key and the next read fills it again)"
    echo "- commands at the primaries: INFO stats \`total_commands_processed\` summed over the 3 primaries, before and after the run, divided by the client commands of the run (redcar's own health checks and the INFO calls included)"
    echo "- CPU s/M: user + system CPU seconds (/proc/PID/stat, $CLK_TCK ticks/s) per million client commands: \"nodes\" is all six cluster nodes (replicas included), \"redcar\" its process"
    echo "- hit ratio: redcar_near_cache_hits_total / (hits + misses_total) over the run, from /metrics (\"-\": redcar reported neither)"
    echo "- network between redcar and the nodes: $NETWORK"
    if ((DIRECT == 1)); then
        echo "- direct: the same load straight on one standalone redis-server (\`$DIRECT_CMD\`), in every round before the redcar modes: no proxy and no cluster, every command answered from memory by the fastest server there is for it. On / off cannot beat direct / off by much on this box: a near-cache hit costs at least what redis-server spends on a GET (a read and a write on the client's socket), and the SETs still cross redcar to the cluster"
    fi
    echo "- note: mixload, redcar and the six redis-servers share the same $(nproc) CPUs"
    echo
    echo "## Targets (issue 27)"
    echo
    echo "$TARGETS_MET of ${#TARGET_ROWS[@]} met, computed by bench/nearcache.sh from the tables below."
    echo
    echo "| target | measured | verdict |"
    echo "|---|---|---|"
    printf '%s\n' "${TARGET_ROWS[@]}"
    echo
    echo "## Mixed workload: near cache off vs on"
    echo
    echo "| near cache | ops/s | p50 ms | p99 ms | max ms | errors | commands at primaries / client command | nodes CPU s/M | redcar CPU s/M | hit ratio |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    shown_modes=("${MODES[@]}")
    ((DIRECT == 0)) || shown_modes+=(direct)
    for mode in "${shown_modes[@]}"; do
        k=$(pick "$mode")
        echo "| $mode | $(col "$k" 2) | $(col "$k" 3) | $(col "$k" 4) | $(col "$k" 5) | $(col "$k" 6) | $(per_cmd "$k") | $(cpu_m "$k" 8) | $(cpu_m "$k" 9) | $(hit_ratio "$k") |"
    done
    if [[ -n $ON ]]; then
        echo "| **on / off** | **$(ratio "$(col "$ON" 2)" "$(col "$OFF" 2)")×** | $(ratio "$(col "$ON" 3)" "$(col "$OFF" 3)")× | $(ratio "$(col "$ON" 4)" "$(col "$OFF" 4)")× | | | **$(ratio "$(per_cmd "$ON")" "$(per_cmd "$OFF")")×** | $(ratio "$(cpu_m "$ON" 8)" "$(cpu_m "$OFF" 8)")× | $(ratio "$(cpu_m "$ON" 9)" "$(cpu_m "$OFF" 9)")× | |"
    fi
    echo
    echo "Every round:"
    echo
    echo "| run | ops/s | p50 ms | p99 ms | max ms | commands at primaries | / client command | nodes CPU s/M | redcar CPU s/M | hits | misses | hit ratio |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for ((r = 1; r <= ROUNDS; r++)); do
        for mode in "${shown_modes[@]}"; do
            k=$mode.r$r
            echo "| $k | $(col "$k" 2) | $(col "$k" 3) | $(col "$k" 4) | $(col "$k" 5) | $(col "$k" 7) | $(per_cmd "$k") | $(cpu_m "$k" 8) | $(cpu_m "$k" 9) | $(col "$k" 10) | $(col "$k" 11) | $(hit_ratio "$k") |"
        done
    done
    echo
    if ((WRITES > 0)); then
        echo "## Staleness probe"
        echo
        echo "\`$STALE_CMD\`: a writer connected straight to the primary that owns \`hot:staleness\` (found by following"
        echo "\`-MOVED\` from a node) SETs a new unique value $WRITES times; one reader through redcar GETs the key in a"
        echo "tight loop. Visibility latency: from the write's acknowledgement to the end of the first read through"
        echo "redcar that returns it (or a later value). A read that *started* more than $BOUND_MS ms (max_silence"
        echo "$MAX_SILENCE_MS ms + 5 ms) after a write's acknowledgement and returned an older value is a stale read after"
        echo "the bound. The writer waits for each write to be seen (at most 2 s: \"not seen\") and pauses 0.25–0.75 ms."
        echo
        echo "| near cache | writes | reads | visible p50 ms | p99 ms | max ms | not seen in 2 s | stale reads after the bound | stale reads within it | read errors | cache hits during the probe |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        for mode in "${MODES[@]}"; do
            echo "| $mode | $(stale_field "$mode" writes) | $(stale_field "$mode" reads) | $(stale_field "$mode" p50_ms) | $(stale_field "$mode" p99_ms) | $(stale_field "$mode" max_ms) | $(stale_field "$mode" not_seen) | $(stale_field "$mode" stale_after_bound) | $(stale_field "$mode" stale_within_bound) | $(stale_field "$mode" read_errors) | $(cat "$TMP/runs/stale.$mode.hits" 2>/dev/null) |"
        done
        echo
    fi
    echo "## Setup and commands"
    echo
    echo '```'
    echo "cluster: scripts/cluster.sh start DIR 0  (3 primaries + 3 replicas): $SEEDS"
    ((DELAY_US == 0)) || echo "relay:   $RELAY --delay-us $DELAY_US RELAY_PORT=NODE_PORT ... (every node: CONFIG SET cluster-announce-port RELAY_PORT)"
    ((DIRECT == 0)) || echo "direct:  $DIRECT_CMD"
    for mode in "${MODES[@]}"; do
        echo "redcar ($mode): ${REDCAR_CMDS[$mode]:-}, with $mode.yaml:"
        sed 's/^/  /' "$TMP/$mode.yaml"
    done
    echo "load:    target/mixload/release/mixload --addr 127.0.0.1:REDCAR ${LOAD_ARGS[*]} --seconds $WARMUP   (warm-up, populates the keys)"
    echo "         target/mixload/release/mixload --addr 127.0.0.1:REDCAR ${LOAD_ARGS[*]} --seconds $SECS --no-populate --seed ROUND"
    [[ -z $STALE_CMD ]] || echo "probe:   target/mixload/release/$STALE_CMD"
    echo "counted: redis-cli -p PRIMARY INFO stats (total_commands_processed); /proc/PID/stat; GET /metrics on the admin port"
    echo '```'
    echo
    echo "## mixload output"
    echo
    echo '```'
    for f in "$TMP"/runs/*.out; do
        grep -v '^mixload' "$f" | sed "s/^/$(basename "$f" .out): /"
    done
    echo '```'
} >"$REPORT"
cp "$REPORT" "$OUT"
log "wrote $OUT in $((SECONDS - START)) s"
sed -n '/^## Targets/,/^## Setup/p' "$OUT" | sed '$d'
