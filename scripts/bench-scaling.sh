#!/usr/bin/env bash
# Small-RPC rate of one ulnetd server against its number of CPU partitions (issue 23: "near-linear
# small-RPC rate from 1 to 4 partitions" on a machine with 8 or more cores).
#
#   scripts/bench-scaling.sh [--partitions "1 2 4"] [--clients K] [--seconds S]
#                            [--tests "ping brw"] [--no-build]
#
# BENCH_BIN=DIR takes ulnetd, ulnetctl and ulst from DIR instead of target/release (and skips
# the build).
#
# The server (127.0.0.3@tcp) gets P partitions of one CPU each, CPUs 0 to P-1
# (`options libcfs cpu_pattern="0[0] 1[1] ..."`); ulnetd pins each partition's I/O thread to its
# CPU. K client nodes (one partition each) run under taskset on the other CPUs, from the highest
# partition count's last CPU on, round robin; their NIDs (from 127.0.0.10@tcp up) are chosen so
# that the server's partitions serve equally many (`ulnetctl cpt-of-nid` asked of the server: a
# peer's connections run on the partition of `lnet_cpt_of_nid()`). One ulst session drives all
# clients against the server at concurrency 64 per client: ping, and brw write 4 KiB. Reported per
# partition count: the rate (RPC/s, from the clients' latency counts over S seconds), that rate
# against one partition's in the same run, the server's CPU per RPC (/proc/PID/stat), and its
# serial share, the time under its core lock per RPC against its CPU per RPC
# (`ulnet_core_lock_held_seconds_total` from its metrics endpoint): with one core lock, P
# partitions give at most 1 / (s + (1 - s) / P) of one partition's rate.
#
# Needs bash, python3, taskset. Fresh nodes for every point. Benchmarks are not tests: nothing here
# fails on a slow machine.

set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PARTITIONS="1 2 4"
CLIENTS=""
SECONDS_PER_POINT=5
TESTS="ping brw"
BUILD=1
while [ $# -gt 0 ]; do
    arg=$1
    shift
    case "$arg" in
        --partitions) PARTITIONS="$1"; shift ;;
        --clients) CLIENTS="$1"; shift ;;
        --seconds) SECONDS_PER_POINT="$1"; shift ;;
        --tests) TESTS="$1"; shift ;;
        --no-build) BUILD=0 ;;
        *) echo "usage: $0 [--partitions \"1 2 4\"] [--clients K] [--seconds S] [--tests \"ping brw\"] [--no-build]" >&2; exit 2 ;;
    esac
done
[ -n "${BENCH_BIN:-}" ] && BUILD=0
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p ulnetd -p ulnetctl -p ulnet-selftest \
        --manifest-path "$ROOT/Cargo.toml"
fi
BIN="${BENCH_BIN:-$ROOT/target/release}"
CPUS=$(nproc)
MAX_P=0
for p in $PARTITIONS; do [ "$p" -gt "$MAX_P" ] && MAX_P=$p; done
# Clients on the CPUs the server does not use, one each where there are enough.
SPARE=$((CPUS > MAX_P ? CPUS - MAX_P : 1))
CLIENTS=${CLIENTS:-$SPARE}
PORT=7988
METRICS=19300

WORK="$(mktemp -d /tmp/bench-scaling.XXXXXX)"
PIDS=()
# shellcheck source=scripts/selftest-nodes.sh
. "$ROOT/scripts/selftest-nodes.sh"
trap 'stop_selftest_nodes "$PORT"; rm -rf "$WORK"' EXIT
export LST_SESSION=$$
export ULST_SOCKET="$WORK/ulst.sock"
export ULST_NID=127.0.0.4@tcp
export ULST_PORT=$PORT

start_node() { # name nid modprobe-line cpu-or-empty metrics-port
    printf 'global:\n    accept_port: %s\n    accept: all\nnet:\n    - net type: tcp\n      local NI(s):\n        - nid: %s\n' \
        "$PORT" "$2" >"$WORK/$1.yaml"
    echo "$3" >"$WORK/$1.modprobe"
    local prefix=""
    [ -n "$4" ] && prefix="taskset -c $4"
    $prefix "$BIN/ulnetd" --config "$WORK/$1.yaml" --socket "$WORK/$1.ctl" \
        --modprobe "$WORK/$1.modprobe" --metrics "127.0.0.1:$5" >"$WORK/$1.log" 2>&1 &
    PIDS+=($!)
}

# The server's CPU seconds, core lock held seconds and the clients' RPC count so far.
server_cpu() { # pid
    python3 -c "
import os
f = open('/proc/$1/stat').read().rsplit(')', 1)[1].split()
print((int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'))"
}
server_held() {
    python3 -c "
import urllib.request
text = urllib.request.urlopen('http://127.0.0.1:$METRICS/metrics', timeout=5).read().decode()
print(next((l.split()[1] for l in text.splitlines()
            if l.startswith('ulnet_core_lock_held_seconds_total ')), '0'))"
}
rpc_count() { # delay
    "$BIN/ulst" --json stat --delay "$1" --count 1 clients | tail -1 \
        | python3 -c "import json,sys; print(json.load(sys.stdin)['latency_us']['worst']['count'])"
}

# CLIENTS NIDs from 127.0.0.10@tcp up, as many on each of the server's P partitions as can be.
balanced_clients() { # partitions
    # shellcheck disable=SC2046
    "$BIN/ulnetctl" --socket "$WORK/server.ctl" cpt-of-nid $(seq -f '127.0.0.%g@tcp' 10 250) \
        | python3 -c "
import re, sys
pairs = re.findall(r'nid: (\S+)\s+cpt: (\d+)', sys.stdin.read())
buckets = [[nid for nid, cpt in pairs if int(cpt) == c] for c in range($1)]
chosen = [bucket[i // $1] for i in range($CLIENTS) for bucket in [buckets[i % $1]] if i // $1 < len(bucket)]
print(' '.join(chosen))"
}

RESULTS="$WORK/results"
: >"$RESULTS"
for test in $TESTS; do
    for p in $PARTITIONS; do
        pattern=""
        for cpt in $(seq 0 $((p - 1))); do pattern+="$cpt[$((cpt % CPUS))] "; done
        start_node server 127.0.0.3@tcp "options libcfs cpu_pattern=\"${pattern% }\"" "" "$METRICS"
        server_pid=${PIDS[0]}
        sleep 1
        read -r -a nids < <(balanced_clients "$p")
        for index in "${!nids[@]}"; do
            cpu=$(((MAX_P + index) % CPUS))
            start_node "c$index" "${nids[$index]}" "options libcfs cpu_npartitions=1" \
                "$cpu" $((METRICS + 1 + index))
        done
        sleep 1
        "$BIN/ulst" new_session --timeout 600 scaling >/dev/null
        "$BIN/ulst" add_group clients "${nids[@]}" >/dev/null
        "$BIN/ulst" add_group server 127.0.0.3@tcp >/dev/null
        "$BIN/ulst" add_batch load >/dev/null
        case $test in
            ping) args=(ping) ;;
            brw) args=(brw write size=4k) ;;
        esac
        "$BIN/ulst" add_test --batch load --concurrency 64 --from clients --to server "${args[@]}" \
            >/dev/null
        "$BIN/ulst" run load >/dev/null
        first=$(rpc_count 1)
        cpu0=$(server_cpu "$server_pid"); held0=$(server_held)
        second=$(rpc_count "$SECONDS_PER_POINT")
        cpu1=$(server_cpu "$server_pid"); held1=$(server_held)
        "$BIN/ulst" stop load >/dev/null
        echo "$test $p $first $second $cpu0 $cpu1 $held0 $held1" >>"$RESULTS"
        stop_selftest_nodes "$PORT"
        echo "$test, $p partitions: done" >&2
    done
done

python3 - "$RESULTS" "$SECONDS_PER_POINT" "$CLIENTS" "$CPUS" <<'PY'
import sys
rows = [line.split() for line in open(sys.argv[1])]
seconds, clients, cpus = float(sys.argv[2]), sys.argv[3], sys.argv[4]
print(f"{clients} clients at concurrency 64 each, {cpus} CPUs, {seconds:g} s per point")
print("| test | partitions | RPC/s | vs 1 partition | server CPU us per RPC | serial share | bound at this count |")
print("|---|---|---|---|---|---|---|")
base = {}
for test, p, first, second, cpu0, cpu1, held0, held1 in rows:
    rpcs = max(float(second) - float(first), 1)
    rate = rpcs / seconds
    cpu = (float(cpu1) - float(cpu0)) * 1e6 / rpcs
    held = (float(held1) - float(held0)) * 1e6 / rpcs
    share = held / cpu if cpu else float("nan")
    p = int(p)
    base.setdefault(test, rate)
    bound = 1 / (share + (1 - share) / p) if share == share else float("nan")
    print(f"| {test} | {p} | {rate:.0f} | {rate / base[test]:.2f} | {cpu:.2f} | {share:.2f} | {bound:.2f} |")
PY
