#!/usr/bin/env bash
# Compares builds of ulnetd/ulst on small selftest RPCs (or 1 MiB brw), taking turns on fresh
# nodes, so that a host whose speed changes from minute to minute (BENCHMARKS.md, "Findings")
# affects every build alike.
#
#   scripts/ab-selftest.sh [--bulk | --instructions | --system] ROUNDS DIR...
#
# Each DIR holds a build's `ulnetd` and `ulst` (e.g. a copy of target/release). Per round and
# build: two fresh nodes (127.0.0.2@tcp on CPU 0, 127.0.0.3@tcp on CPU 1 with PIN=1, else
# unpinned) and a console on 127.0.0.4@tcp, port 7988, then 3 s points: ping at concurrency 1,
# 8 and 64 and brw write 4 KiB at concurrency 8, as RPC/s from the client's latency counts
# (as scripts/bench-selftest.sh counts them); with --bulk, brw write and read 1 MiB at
# concurrency 1, 8 and 32 in MB/s instead; with --instructions, the user and kernel instructions
# and the cycles both daemons spend per RPC (`perf stat`) for ping and brw write 4 KiB at
# concurrency 8: measures of work that the host's changing speed moves far less than rates;
# with --system, the user and kernel cycles and instructions of the whole host per RPC
# (`perf stat -a`, which needs no PMU switch at every context switch, so it slows the daemons
# far less than counting per task) for brw write 4 KiB at concurrency 8, and the same for the
# socket floor (target/release/examples/socket_floor, or $FLOOR) once per round: where an RPC's
# cost goes, against two plain epoll loops. One line per round and build.
# Not a test: nothing fails on a slow host.

set -euo pipefail
BULK=0
INSTRUCTIONS=0
SYSTEM=0
case "${1:-}" in
    --bulk) BULK=1; shift ;;
    --instructions) INSTRUCTIONS=1; shift ;;
    --system) SYSTEM=1; shift ;;
esac
[ $# -ge 2 ] || { echo "usage: $0 [--bulk | --instructions | --system] ROUNDS DIR..." >&2; exit 2; }
if [ "$INSTRUCTIONS$SYSTEM" != 00 ] && ! command -v perf >/dev/null; then
    echo "--instructions and --system need perf (Debian: linux-perf)" >&2
    exit 2
fi
FLOOR=${FLOOR:-"$(cd "$(dirname "$0")/.." && pwd)/target/release/examples/socket_floor"}
if [ "$SYSTEM" = 1 ] && [ ! -x "$FLOOR" ]; then
    echo "--system needs the socket floor: cargo build --release -p ulnet --example socket_floor" >&2
    exit 2
fi
ROUNDS=$1; shift
BUILDS=("$@")
WORK="$(mktemp -d /tmp/ab-selftest.XXXXXX)"
export LST_SESSION=$$ ULST_SOCKET="$WORK/ulst.sock" ULST_NID=127.0.0.4@tcp ULST_PORT=7988
PIDS=()
BIN=""

# shellcheck source=scripts/selftest-nodes.sh
. "$(dirname "$0")/selftest-nodes.sh"
stop_all() { stop_selftest_nodes 7988; }
trap 'stop_all; rm -rf "$WORK"' EXIT

start_nodes() {
    local name nid cpu
    for spec in a:127.0.0.2@tcp:0 b:127.0.0.3@tcp:1; do
        IFS=: read -r name nid cpu <<<"$spec"
        printf 'global:\n    accept_port: 7988\n    accept: all\nnet:\n    - net type: tcp\n      local NI(s):\n        - nid: %s\n' \
            "$nid" >"$WORK/$name.yaml"
        if [ -n "${PIN:-}" ]; then
            taskset -c "$cpu" "$BIN/ulnetd" --config "$WORK/$name.yaml" --socket "$WORK/$name.ctl" \
                >"$WORK/$name.log" 2>&1 &
        else
            "$BIN/ulnetd" --config "$WORK/$name.yaml" --socket "$WORK/$name.ctl" \
                >"$WORK/$name.log" 2>&1 &
        fi
        PIDS+=($!)
    done
    sleep 1
    "$BIN/ulst" new_session --timeout 600 ab >/dev/null
    "$BIN/ulst" add_group a 127.0.0.2@tcp >/dev/null
    "$BIN/ulst" add_group b 127.0.0.3@tcp >/dev/null
}

field() { # group delay python-expression
    "$BIN/ulst" --json stat --delay "$2" --count 1 "$1" | tail -1 |
        python3 -c "import json,sys; d=json.load(sys.stdin); print($3)"
}

batch=""
run_test() { # concurrency test-args... (starts batch "t$batch"; callers run in subshells)
    local concurrency=$1; shift
    batch="$RANDOM$RANDOM"
    "$BIN/ulst" add_batch "t$batch" >/dev/null
    "$BIN/ulst" add_test --batch "t$batch" --concurrency "$concurrency" --from a --to b "$@" \
        >/dev/null
    "$BIN/ulst" run "t$batch" >/dev/null
}

rate() { # concurrency test-args... -> RPC/s over 3 s
    run_test "$@"
    local count="d['latency_us']['worst']['count']" first second
    first=$(field a 1 "$count")
    second=$(field a 3 "$count")
    "$BIN/ulst" stop "t$batch" >/dev/null
    echo $(((second - first) / 3))
}

bandwidth() { # direction concurrency -> MB/s (10^6) over 3 s at the receiving node
    run_test "$2" brw "$1" size=1M
    local group=b
    [ "$1" = read ] && group=a
    field "$group" 3 "round(d['bandwidth']['read']['avg'] * 1.048576, 1)"
    "$BIN/ulst" stop "t$batch" >/dev/null
}

instructions() { # concurrency test-args... -> "user/kernel/cycles" per RPC, both daemons
    run_test "$@"
    local count="d['latency_us']['worst']['count']" first second counters
    first=$(field a 1 "$count")
    # perf counts over the same 3 s as the RPC count (started together; the rate is steady).
    counters="$WORK/perf.$batch"
    perf stat -x, -e instructions:u,instructions:k,cycles -p "${PIDS[0]},${PIDS[1]}" -o "$counters" \
        -- sleep 3 &
    second=$(field a 3 "$count")
    wait $!
    "$BIN/ulst" stop "t$batch" >/dev/null
    python3 - "$counters" "$((second - first))" <<'PY'
import sys
counts = {}
for line in open(sys.argv[1]):
    fields = line.split(",")
    if len(fields) > 2 and fields[0].isdigit():
        counts[fields[2].split(":")[-1]] = int(fields[0])
rpcs = max(int(sys.argv[2]), 1)
print(f"{counts.get('u', 0) // rpcs}/{counts.get('k', 0) // rpcs}/{counts.get('cycles', 0) // rpcs}")
PY
}

host_counters() { # perf-output rpcs -> "user/kernel cycles, user/kernel instructions" per RPC
    python3 - "$1" "$2" <<'PY'
import sys
counts = {}
for line in open(sys.argv[1]):
    fields = line.split(",")
    if len(fields) > 2 and fields[0].isdigit():
        counts[fields[2]] = int(fields[0])
rpcs = max(int(float(sys.argv[2])), 1)
per = lambda event: counts.get(event, 0) // rpcs
print(f"{per('cycles:u')}/{per('cycles:k')} cycles, "
      f"{per('instructions:u')}/{per('instructions:k')} instructions")
PY
}

HOST_EVENTS=cycles:u,cycles:k,instructions:u,instructions:k

system() { # concurrency test-args... -> host-wide cost per RPC (see host_counters)
    run_test "$@"
    local count="d['latency_us']['worst']['count']" first second counters
    first=$(field a 1 "$count")
    counters="$WORK/perf.$batch"
    perf stat -a -x, -e "$HOST_EVENTS" -o "$counters" -- sleep 3 &
    second=$(field a 3 "$count")
    wait $!
    "$BIN/ulst" stop "t$batch" >/dev/null
    echo "$(((second - first) / 3)) RPC/s, $(host_counters "$counters" "$((second - first))")"
}

floor_system() { # -> the same for the socket floor (brw write 4 KiB, concurrency 8), 3 s of 5
    local pin_flag="" rate pid
    [ -n "${PIN:-}" ] && pin_flag=--pin
    "$FLOOR" brw --concurrency 8 --seconds 5 $pin_flag >"$WORK/floor.out" &
    pid=$!
    sleep 2 # its 1 s warm-up, then 1 s of the measured 5
    perf stat -a -x, -e "$HOST_EVENTS" -o "$WORK/perf.floor" -- sleep 3
    wait "$pid"
    rate=$(cat "$WORK/floor.out")
    echo "$rate RPC/s, $(host_counters "$WORK/perf.floor" "$((rate * 3))")"
}

for _ in $(seq "$ROUNDS"); do
    if [ "$SYSTEM" = 1 ]; then
        echo "socket_floor brw4k8=$(floor_system) (user/kernel, whole host) load=$(cut -d' ' -f1 /proc/loadavg)"
    fi
    for BIN in "${BUILDS[@]}"; do
        start_nodes
        if [ "$SYSTEM" = 1 ]; then
            rate 8 ping >/dev/null # warm-up: connections and buffers
            line="brw4k8=$(system 8 brw write size=4k) (user/kernel, whole host)"
        elif [ "$INSTRUCTIONS" = 1 ]; then
            rate 8 ping >/dev/null # warm-up: connections and buffers
            line="ping8=$(instructions 8 ping) brw4k8=$(instructions 8 brw write size=4k)"
            line="$line (user/kernel instructions/cycles per RPC)"
        elif [ "$BULK" = 1 ]; then
            line="write1=$(bandwidth write 1) read1=$(bandwidth read 1)"
            line="$line write8=$(bandwidth write 8) read8=$(bandwidth read 8)"
            line="$line write32=$(bandwidth write 32) read32=$(bandwidth read 32)"
        else
            rate 8 ping >/dev/null # warm-up: connections and buffers
            line="ping1=$(rate 1 ping) ping8=$(rate 8 ping) brw4k8=$(rate 8 brw write size=4k)"
            line="$line ping64=$(rate 64 ping)"
        fi
        echo "$BIN $line load=$(cut -d' ' -f1 /proc/loadavg)"
        stop_all
    done
done
