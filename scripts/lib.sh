# shellcheck shell=bash
# Helpers shared by scripts/cluster.sh, scripts/demo.sh and the bench/ scripts.
# Source it; it defines functions only (no side effects).

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# port_in_use PORT: true if something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port [MIN] [MAX]: print a port in [MIN, MAX) nobody listens on.
# Defaults stay below the kernel's ephemeral range (32768+).
free_port() {
    local min=${1:-20000} max=${2:-32000} p i
    for ((i = 0; i < 500; i++)); do
        p=$((min + (RANDOM * 32768 + RANDOM) % (max - min)))
        if ! port_in_use "$p"; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# wait_for SECONDS DESCRIPTION CMD...: poll CMD every 0.1 s until it succeeds.
wait_for() {
    local secs=$1 what=$2
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            printf 'error: timed out after %ss waiting for %s\n' "$secs" "$what" >&2
            return 1
        fi
        sleep 0.1
    done
}

# http_status HOST PORT PATH: print the HTTP status code of GET PATH (no curl needed).
http_status() {
    local host=$1 port=$2 path=$3 line
    exec 4<>"/dev/tcp/$host/$port" || return 1
    printf 'GET %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$path" "$host" "$port" >&4
    IFS= read -r -t 5 line <&4 || {
        exec 4<&-
        return 1
    }
    exec 4<&-
    line=${line%$'\r'}
    set -- $line
    echo "${2:-000}"
}

# http_body HOST PORT PATH: print the body of GET PATH (headers stripped; no curl needed).
http_body() {
    local host=$1 port=$2 path=$3
    exec 4<>"/dev/tcp/$host/$port" || return 1
    printf 'GET %s HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$path" "$host" "$port" >&4
    timeout 5 cat <&4 | tr -d '\r' | awk 'body { print } /^$/ { body = 1 }'
    exec 4<&-
}

# http_ok HOST PORT PATH: true if GET PATH answers 200.
http_ok() {
    [[ "$(http_status "$@" 2>/dev/null)" == 200 ]]
}

# is_pid_of PID WORD: true if PID is alive and its command line contains WORD
# (guards against killing a recycled PID).
is_pid_of() {
    local pid=$1 word=$2
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    [[ -r /proc/$pid/cmdline ]] || return 0
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$word"
}

# is_zombie PID: true if PID has exited and waits to be reaped (state Z in /proc/PID/stat).
is_zombie() {
    local s
    s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    s=${s##*) }
    [[ ${s:0:1} == Z ]]
}

# stop_pid PID [WORD]: SIGTERM, wait up to 5 s, then SIGKILL. Only if PID matches WORD.
stop_pid() {
    local pid=$1 word=${2:-} i
    [[ -n "$pid" ]] || return 0
    if [[ -n "$word" ]]; then
        is_pid_of "$pid" "$word" || return 0
    else
        kill -0 "$pid" 2>/dev/null || return 0
    fi
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < 50; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        # Exited, but not reaped yet (a process whose starter has gone waits for PID 1): done.
        is_zombie "$pid" && break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    # Reap it if it is our child; harmless otherwise.
    wait "$pid" 2>/dev/null || true
}

# wait_redcar_ready PID ADMIN_PORT LOGFILE [NAME]: wait up to 30 s for redcar's GET /readyz;
# die with its log if it exits or is not ready in time.
wait_redcar_ready() {
    local pid=$1 admin=$2 logfile=$3 name=${4:-redcar}
    local deadline=$((SECONDS + 30))
    until http_ok 127.0.0.1 "$admin" /readyz; do
        kill -0 "$pid" 2>/dev/null || {
            cat "$logfile" >&2
            die "$name exited"
        }
        ((SECONDS < deadline)) || {
            tail -n 50 "$logfile" >&2
            die "$name not ready after 30 s"
        }
        sleep 0.1
    done
}

# ensure_nutcracker_or_skip TMP SETTING: when NUTCRACKER is 1, installs nutcracker if it can
# (scripts/ensure-nutcracker.sh); if it cannot, or NUTCRACKER is not 1 (SETTING names the variable
# that turned it off), sets NUTCRACKER=0 and NC_NOTE to the reason for the report.
ensure_nutcracker_or_skip() {
    local tmp=$1 setting=$2
    NC_NOTE=""
    if [[ $NUTCRACKER != 1 ]]; then
        NC_NOTE="$setting=0: the nutcracker rows are skipped"
        return 0
    fi
    if ! "$(dirname "${BASH_SOURCE[0]}")/ensure-nutcracker.sh" 2>"$tmp/ensure-nutcracker.err"; then
        NUTCRACKER=0
        NC_NOTE="nutcracker is not installed ($(tail -n 1 "$tmp/ensure-nutcracker.err")): its rows are skipped"
        log "$NC_NOTE"
    fi
}

# report_machine: the report lines naming the machine, redis and nutcracker (reads NUTCRACKER and
# NC_NOTE, as set by ensure_nutcracker_or_skip).
report_machine() {
    local cpu
    cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
    echo "- machine: $(nproc) CPUs, ${cpu:-unknown CPU}, $(uname -sr), load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- redis: $(redis-server --version | sed 's/ sha=.*//')"
    if [[ $NUTCRACKER == 1 ]]; then
        echo "- nutcracker: $("$(command -v nutcracker || echo /usr/sbin/nutcracker)" --version 2>&1 | head -n 1)"
    else
        echo "- nutcracker: $NC_NOTE"
    fi
}

# cpu_ticks PID...: user + system CPU of these processes (all their threads) so far, in clock
# ticks (/proc/PID/stat fields 14 and 15, counted after the ")" that ends the command name).
cpu_ticks() { stat_ticks all "$@"; }
# cpu_ticks_system PID...: the system (kernel) part of cpu_ticks: field 15 alone.
cpu_ticks_system() { stat_ticks system "$@"; }
# stat_ticks all|system PID...: what cpu_ticks and cpu_ticks_system add up.
stat_ticks() {
    local which=$1 t=0 p s stat
    shift
    for p in "$@"; do
        s=$(cat "/proc/$p/stat" 2>/dev/null) || continue
        read -r -a stat <<<"${s##*) }"
        t=$((t + stat[12]))
        [[ $which == system ]] || t=$((t + stat[11]))
    done
    echo "$t"
}

# proc_status_kb PID FIELD: a kB figure from /proc/PID/status (VmRSS, VmHWM ...); empty if gone.
proc_status_kb() {
    awk -v f="$2:" '$1 == f { print $2; exit }' "/proc/$1/status" 2>/dev/null || true
}

# Sets the array WHAT to the redis-benchmark arguments for test $1: `mget10` is an MGET of 10
# random keys, any other name a `redis-benchmark -t` test (its `mset` sends 10 keys).
# shellcheck disable=SC2034 # WHAT is read by the caller
bench_test_args() {
    if [[ $1 == mget10 ]]; then
        WHAT=(MGET key:__rand_int__ key:__rand_int__ key:__rand_int__ key:__rand_int__
            key:__rand_int__ key:__rand_int__ key:__rand_int__ key:__rand_int__
            key:__rand_int__ key:__rand_int__)
    else
        WHAT=(-t "$1")
    fi
}
