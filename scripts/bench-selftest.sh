#!/usr/bin/env bash
# ulst against peer tools, measured in one run (issue 6, "Targets"); prints a table of ratios.
#
#   scripts/bench-selftest.sh [--quick] [--no-build] [--pinned-only | --unpinned-only]
#                             [--partitions "1 2"] [--small | --bulk]
#
# BENCH_BIN=DIR takes ulnetd and ulst from DIR instead of target/release (and skips the build),
# to compare two builds in turns under the same load.
#
# Two ulnetd nodes on loopback (127.0.0.2@tcp and 127.0.0.3@tcp, port 7988) run the selftest
# service; a ulst console on 127.0.0.4@tcp drives them. Measured, each pinned (node A and its
# peer tool's client on CPU 0, node B and the peer's server on CPU 1) and unpinned:
#
#   * ulst brw write and read, 1 MiB, concurrency 1, 8 and 32, against `iperf3 -l 1M` (one
#     stream): target ratio >= 0.9;
#   * ulst brw write 4 KiB RPC rate and ulst ping RPC rate, concurrency 8 (and 64, the rate
#     with both nodes' CPUs busy), against `ucx_perftest` over tcp (tag_bw, 8-byte messages):
#     target ratio >= 0.5; and against the kernel-TCP floor for the same frames
#     (crates/ulnet/examples/socket_floor.rs: two plain epoll loops, no LNet);
#   * at 1 MiB and concurrency 1, that floor against ulst and against the same iperf3 figure:
#     the ceiling the RPC's round trips leave to any LNet over kernel TCP on this host.
#
# The host's speed changes from minute to minute, so every ulst point is followed at once by
# its peer's, on fresh nodes each round (BENCH_ROUNDS, 3 by default, 1 with --quick); the table
# gives the medians and the median (min-max) of the paired ratios.
#
# Bandwidth is the server's receive rate (write) or the client's (read) from `ulst --json stat`;
# RPC rates come from the RPC counts of the client's latency histograms over the sampling
# window. Peer tools: Debian packages iperf3 and ucx-utils; a missing tool gives "n/a".
# Benchmarks are not tests: nothing here fails on a slow machine.
#
# --partitions "1 2" runs every round once per CPU partition count (`options libcfs
# cpu_npartitions=N` for both nodes, fresh nodes each time) and adds, per measure, the rate
# with N partitions against the rate with the first count in the same round. Pinned then
# means: with one partition, each node under taskset as above; with more, no taskset, each
# partition's I/O thread pinned by ulnetd to its partition's CPUs (one CPU each on a 2-CPU
# host). Unpinned: no taskset and `ulnetd --no-cpu-bind`. --small keeps only the small-RPC
# rates at concurrency 64 against the socket floor (no bandwidth, no UCX), and adds what each
# RPC costs the two daemons over the same window: CPU time (us per RPC, from
# /proc/PID/stat, with the kernel's share), the times a thread waited for a node's core lock
# and the socket reads and writes, with the shares made without it
# (`ulnet_runtime_events_total{event="core_lock_wait"|"socket_read"|"socket_write"|...}`
# from each node's metrics endpoint, 127.0.0.1:19109 and up), and the server's time under its
# core lock per RPC against its CPU per RPC (`ulnet_core_lock_held_seconds_total`): the serial
# share that bounds what more partitions can gain while the lock is one; likewise its selftest
# service's state lock (`ulnet_selftest_lock_held_seconds_total`) and the times a thread found
# that lock held, and the client's (node a's) selftest lock against its CPU; and where the
# server's connections run (`ulnet_connections{cpt}`, "cpt:count"). Then the same with two
# clients (127.0.0.2 and 127.0.0.5, both on CPU 0 when pinned) and the one server: with two
# partitions the server's connections to them run on different partitions' threads (the NIDs
# hash apart), which share its core lock.
# --bulk does the same for brw write and read of 1 MiB at concurrency 16 (rates in MB/s, costs
# per RPC, that is per MiB moved), against the socket floor moving the same bulks.

set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
QUICK=0
BUILD=1
MODES="pinned unpinned"
PARTITIONS=""
SMALL=0
BULK=0
while [ $# -gt 0 ]; do
    arg=$1
    shift
    case "$arg" in
        --partitions) PARTITIONS="$1"; shift ;;
        --small) SMALL=1 ;;
        --bulk) SMALL=1; BULK=1 ;;
        --quick) QUICK=1 ;;
        --no-build) BUILD=0 ;;
        --pinned-only) MODES="pinned" ;;
        --unpinned-only) MODES="unpinned" ;;
        *) echo "usage: $0 [--quick] [--no-build] [--pinned-only|--unpinned-only] [--partitions \"1 2\"] [--small|--bulk]" >&2; exit 2 ;;
    esac
done
SECONDS_PER_POINT=$([ "$QUICK" = 1 ] && echo 3 || echo 10)
ROUNDS=${BENCH_ROUNDS:-$([ "$QUICK" = 1 ] && echo 1 || echo 3)}
PORT=7988

[ -n "${BENCH_BIN:-}" ] && BUILD=0
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p ulnetd -p ulnet-selftest --manifest-path "$ROOT/Cargo.toml"
fi
# The kernel-TCP floor for the same frames (crates/ulnet/examples/socket_floor.rs), from this
# tree: built here unless --no-build.
FLOOR="$ROOT/target/release/examples/socket_floor"
if [ "$BUILD" = 1 ] || [ -n "${BENCH_BIN:-}" ]; then
    cargo build --release -q -p ulnet --example socket_floor --manifest-path "$ROOT/Cargo.toml"
fi
BIN="${BENCH_BIN:-$ROOT/target/release}"
WORK="$(mktemp -d /tmp/bench-selftest.XXXXXX)"
PIDS=()
# shellcheck source=scripts/selftest-nodes.sh
. "$ROOT/scripts/selftest-nodes.sh"
cleanup() {
    # Ends the console server with the session, even after a failure part-way.
    stop_selftest_nodes "$PORT"
    rm -rf "$WORK"
}
trap cleanup EXIT

export LST_SESSION=$$
export ULST_SOCKET="$WORK/ulst.sock"
export ULST_NID=127.0.0.4@tcp
export ULST_PORT=$PORT

# pin CPU: the taskset prefix for a pinned run, nothing for an unpinned one.
pin() { [ "$MODE" = pinned ] && echo "taskset -c $1" || true; }

start_node() { # name nid cpu [partitions]
    local prefix flags=()
    prefix=$(pin "$3")
    [ "$SMALL" = 1 ] && flags+=(--metrics "127.0.0.1:$((19109 + ${#PIDS[@]}))")
    if [ -n "${4:-}" ]; then
        echo "options libcfs cpu_npartitions=$4" >"$WORK/$1.modprobe"
        flags+=(--modprobe "$WORK/$1.modprobe")
        [ "$MODE" = pinned ] && [ "$4" != 1 ] && prefix=""
        [ "$MODE" = pinned ] || flags+=(--no-cpu-bind)
    fi
    cat > "$WORK/$1.yaml" <<EOF
global:
    accept_port: $PORT
    accept: all
net:
    - net type: tcp
      local NI(s):
        - nid: $2
EOF
    $prefix "$BIN/ulnetd" --config "$WORK/$1.yaml" --socket "$WORK/$1.ctl" "${flags[@]}" \
        >"$WORK/$1.log" 2>&1 &
    PIDS+=($!)
}

# ulst_rate GROUP FIELD: one JSON sample after SECONDS_PER_POINT, the field's avg.
ulst_sample() { # group
    "$BIN/ulst" --json stat --delay "$SECONDS_PER_POINT" --count 1 "$1" | tail -1
}

json() { # expression on stdin (python3 keeps this script free of jq)
    python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"
}

ulst_bandwidth() { # direction concurrency -> MB/s (10^6)
    "$BIN/ulst" add_batch "bw$1$2" >/dev/null
    "$BIN/ulst" add_test --batch "bw$1$2" --concurrency "$2" --from a --to b \
        brw "$1" size=1M >/dev/null
    "$BIN/ulst" run "bw$1$2" >/dev/null
    local group=b
    [ "$1" = read ] && group=a
    ulst_sample "$group" | json "round(d['bandwidth']['read']['avg'] * 1.048576, 1)"
    "$BIN/ulst" stop "bw$1$2" >/dev/null
}

ulst_rpc_rate() { # batch concurrency test-args... -> RPC/s from the client's latency counts
    local batch=$1 concurrency=$2; shift 2
    "$BIN/ulst" add_batch "$batch" >/dev/null
    "$BIN/ulst" add_test --batch "$batch" --concurrency "$concurrency" --from a --to b "$@" \
        >/dev/null
    "$BIN/ulst" run "$batch" >/dev/null
    local first second
    first=$("$BIN/ulst" --json stat --delay 1 --count 1 a | tail -1 | json "d['latency_us']['worst']['count']")
    second=$(ulst_sample a | json "d['latency_us']['worst']['count']")
    "$BIN/ulst" stop "$batch" >/dev/null
    python3 -c "print(round(($second - $first) / $SECONDS_PER_POINT))"
}

iperf_mbs() { # -> MB/s of one stream with 1 MiB writes
    command -v iperf3 >/dev/null || { echo n/a; return; }
    $(pin 1) iperf3 -s -B 127.0.0.1 -p 15201 -1 >/dev/null 2>&1 &
    sleep 0.5
    $(pin 0) iperf3 -c 127.0.0.1 -p 15201 -t "$SECONDS_PER_POINT" -l 1M -J \
        | json "round(d['end']['sum_received']['bits_per_second'] / 8e6, 1)"
}

ucx_rate() { # test iterations divisor -> the overall message rate of an 8-byte UCX test over
    # tcp on lo, divided (tag_lat counts both directions of a round trip)
    command -v ucx_perftest >/dev/null || { echo n/a; return; }
    UCX_TLS=tcp UCX_NET_DEVICES=lo $(pin 1) ucx_perftest -p 13337 >/dev/null 2>&1 &
    sleep 1
    UCX_TLS=tcp UCX_NET_DEVICES=lo $(pin 0) ucx_perftest 127.0.0.1 -p 13337 -t "$1" -s 8 \
        -n "$2" 2>/dev/null | awk -v d="$3" '/Final:/ { print int($NF / d); exit }'
}

floor_rate() { # brw|read|ping concurrency [size] -> RPC/s of two plain epoll loops exchanging
    # the frames
    [ -x "$FLOOR" ] || { echo n/a; return; }
    local pin_flag=""
    [ "$MODE" = pinned ] && pin_flag=--pin
    # Its CPU time (user and system seconds) for --small's cost per RPC.
    /usr/bin/time -f '%U %S' -o "$WORK/floor.time" \
        "$FLOOR" "$1" --concurrency "$2" --size "${3:-4k}" --seconds "$SECONDS_PER_POINT" $pin_flag
}

floor_cost() { # rate -> the CPU us per RPC of the last floor_rate run
    [[ "$1" =~ ^[0-9.]+$ ]] || { echo n/a; return; }
    python3 -c "
u, s = map(float, open('$WORK/floor.time').read().split()[-2:])
print(round((u + s) * 1e6 / max($1 * $SECONDS_PER_POINT, 1), 2))"
}

floor_mbs() { # write|read concurrency -> MB/s (10^6) of the socket floor moving 1 MiB bulks
    local test=$1 rate
    [ "$test" = write ] && test=brw
    rate=$(floor_rate "$test" "$2" 1M)
    [ "$rate" = n/a ] && { echo n/a; return; }
    python3 -c "print(round($rate * 1.048576, 1))"
}

# One measure: the ulst figure and, right after it on the same CPUs, its peer's; kept as
# "mode|measure|target|ulst|peer" lines in $RESULTS and summarised at the end.
record() { # measure target ulst peer
    printf '%s|%s|%s|%s|%s\n' "$MODE$LABEL" "$1" "$2" "$3" "$4" >>"$RESULTS"
}

# The daemons' CPU ticks (user, system), core lock waits, socket reads and writes and those
# made without the core lock, summed over all nodes; then the server's alone.
daemon_costs() {
    local ticks counts pid index
    ticks=$(for pid in "${PIDS[@]}"; do cut -d' ' -f14,15 "/proc/$pid/stat"; done \
        | awk '{ u += $1; s += $2 } END { print u, s }')
    # A build without a counter (BENCH_BIN) counts none.
    counts=$(for index in "${!PIDS[@]}"; do
        curl -s "http://127.0.0.1:$((19109 + index))/metrics"
    done | awk '/^ulnet_runtime_events_total\{event="core_lock_wait"\}/ { w += $2 }
                /^ulnet_runtime_events_total\{event="socket_read"\}/ { r += $2 }
                /^ulnet_runtime_events_total\{event="socket_read_unlocked"\}/ { u += $2 }
                /^ulnet_runtime_events_total\{event="socket_write"\}/ { x += $2 }
                /^ulnet_runtime_events_total\{event="socket_write_unlocked"\}/ { y += $2 }
                END { print w + 0, r + 0, u + 0, x + 0, y + 0 }')
    # The server's (node b's) own CPU ticks, core lock held seconds and holds: the share of
    # its work that the one core lock serialises; then its selftest service's state lock
    # held seconds and the times a thread found that lock held.
    server=$(cut -d' ' -f14,15 "/proc/${PIDS[1]}/stat" | awk '{ print $1 + $2 }')
    held=$(curl -s "http://127.0.0.1:19110/metrics" \
        | awk '/^ulnet_core_lock_held_seconds_total / { h = $2 }
               /^ulnet_runtime_events_total\{event="core_lock_hold"\}/ { n = $2 }
               /^ulnet_selftest_lock_held_seconds_total / { s = $2 }
               /^ulnet_selftest_lock_events_total\{event="busy"\}/ { b = $2 }
               END { print h + 0, n + 0, s + 0, b + 0 }')
    # The client's (node a's) CPU ticks and its selftest service's state lock held seconds.
    client=$(cut -d' ' -f14,15 "/proc/${PIDS[0]}/stat" | awk '{ print $1 + $2 }')
    client_held=$(curl -s "http://127.0.0.1:19109/metrics" \
        | awk '/^ulnet_selftest_lock_held_seconds_total / { s = $2 } END { print s + 0 }')
    echo "$ticks $counts $server $held $client $client_held"
}

# A small-RPC point with its costs: the rate (RPC/s) as ulst_rpc_rate counts it, then the
# CPU us, the core lock waits and the socket reads per RPC over the sampling window, and the
# shares of reads and writes made without the core lock (COST_CPU, COST_SYS, COST_WAITS,
# COST_READS, COST_UNLOCKED, COST_WRITES_UNLOCKED).
small_point() { # clients batch test-args...
    local clients=$1 batch=$2 first second before after; shift 2
    "$BIN/ulst" add_batch "$batch" >/dev/null
    "$BIN/ulst" add_test --batch "$batch" --concurrency "$CONC" --from "$clients" --to b "$@" \
        >/dev/null
    "$BIN/ulst" run "$batch" >/dev/null
    first=$("$BIN/ulst" --json stat --delay 1 --count 1 "$clients" | tail -1 | json "d['latency_us']['worst']['count']")
    before=$(daemon_costs)
    second=$(ulst_sample "$clients" | json "d['latency_us']['worst']['count']")
    after=$(daemon_costs)
    # The server's connections by the partition whose thread runs them ("cpt:count ...").
    SERVER_CONNS=$(curl -s "http://127.0.0.1:19110/metrics" \
        | sed -n 's/^ulnet_connections{cpt="\([0-9]*\)"} \([0-9]*\)$/\1:\2/p' | paste -sd' ')
    "$BIN/ulst" stop "$batch" >/dev/null
    read -r RATE COST_CPU COST_SYS COST_WAITS COST_READS COST_UNLOCKED COST_WRITES_UNLOCKED \
        SERVER_CPU SERVER_HELD SERVER_HOLDS SERVER_ST_HELD SERVER_ST_BUSY CLIENT_CPU \
        CLIENT_ST_HELD < <(python3 -c "
b = [float(x) for x in '$before'.split()]; a = [float(x) for x in '$after'.split()]
rpcs = max($second - $first, 1); hz = $(getconf CLK_TCK)
cpu = (a[0] + a[1] - b[0] - b[1]) / hz * 1e6
print(round(rpcs / $SECONDS_PER_POINT), round(cpu / rpcs, 2),
      round((a[1] - b[1]) / max(a[0] + a[1] - b[0] - b[1], 1), 2), round((a[2] - b[2]) / rpcs, 3),
      round((a[3] - b[3]) / rpcs, 2), round((a[4] - b[4]) / max(a[3] - b[3], 1), 2),
      round((a[6] - b[6]) / max(a[5] - b[5], 1), 2),
      round((a[7] - b[7]) / hz * 1e6 / rpcs, 2), round((a[8] - b[8]) * 1e6 / rpcs, 2),
      round((a[9] - b[9]) / rpcs, 1), round((a[10] - b[10]) * 1e6 / rpcs, 2),
      round((a[11] - b[11]) / rpcs, 3), round((a[12] - b[12]) / hz * 1e6 / rpcs, 2),
      round((a[13] - b[13]) * 1e6 / rpcs, 2))")
}

# The small-RPC (or, with --bulk, 1 MiB) rates of the partition runs, and their costs: with
# --partitions, one round's figures with each count against the first count's.
small_rpcs() { # round -> records; sets SMALL_VALUES[measure]
    local test floor unit=RPC/s
    [ "$BULK" = 1 ] && unit=MB/s
    for test in $TESTS; do
        floor=""
        case $test in
            brw)
                small_point a "small64_$1" brw write size=4k
                floor=$(floor_rate brw 64)
                record "brw write 4 KiB, concurrency 64 (RPC/s) vs socket floor" "-" \
                    "$RATE" "$floor" ;;
            ping)
                small_point a "pings64_$1" ping
                floor=$(floor_rate ping 64)
                record "ping, concurrency 64 (RPC/s) vs socket floor" ">= 0.6" \
                    "$RATE" "$floor" ;;
            brw2) small_point a2 "small64x2_$1" brw write size=4k ;;
            ping2) small_point a2 "pings64x2_$1" ping ;;
            write|read)
                small_point a "bulk${test}_$1" brw "$test" size=1M
                floor=$(floor_rate "$([ "$test" = write ] && echo brw || echo read)" 16 1M)
                record "brw $test 1 MiB, concurrency 16 (MB/s) vs socket floor" "-" \
                    "$(mbs "$RATE")" "$(mbs "$floor")" ;;
            write2|read2) small_point a2 "bulk${test}_$1" brw "${test%2}" size=1M ;;
        esac
        local value=$RATE
        [ "$BULK" = 1 ] && value=$(mbs "$RATE")
        [ "${test%2}" = "$test" ] || record "$test: 2 clients, 1 server ($unit)" "-" "$value" "-"
        SMALL_VALUES[$test]=$value
        SMALL_VALUES[$test.cpu]=$COST_CPU
        if [ -n "$floor" ]; then
            record "$test concurrency $CONC: daemons' CPU us per RPC vs socket floor's" "-" \
                "$COST_CPU" "$(floor_cost "$floor")"
        else
            record "$test concurrency $CONC: daemons' CPU us per RPC" "-" "$COST_CPU" "-"
        fi
        record "$test concurrency $CONC: daemons' kernel share of CPU" "-" "$COST_SYS" "-"
        record "$test concurrency $CONC: core lock waits per RPC" "-" "$COST_WAITS" "-"
        record "$test concurrency $CONC: socket reads per RPC" "-" "$COST_READS" "-"
        record "$test concurrency $CONC: share of reads without the core lock" "-" \
            "$COST_UNLOCKED" "-"
        record "$test concurrency $CONC: share of writes without the core lock" "-" \
            "$COST_WRITES_UNLOCKED" "-"
        # Against the server's CPU per RPC, the time its core lock is held per RPC is the
        # serial share that bounds what partitions can gain while the lock is one.
        record "$test concurrency $CONC: server's core lock held us per RPC vs its CPU us" "-" \
            "$SERVER_HELD" "$SERVER_CPU"
        record "$test concurrency $CONC: server's core lock holds per RPC" "-" \
            "$SERVER_HOLDS" "-"
        record "$test concurrency $CONC: server's connections by partition (cpt:count)" "-" \
            "${SERVER_CONNS:-n/a}" "-"
        # The selftest service's state lock is the other serial section on the server.
        record "$test concurrency $CONC: server's selftest lock held us per RPC vs its CPU us" \
            "-" "$SERVER_ST_HELD" "$SERVER_CPU"
        record "$test concurrency $CONC: server's selftest lock found held per RPC" "-" \
            "$SERVER_ST_BUSY" "-"
        record "$test concurrency $CONC: client's selftest lock held us per RPC vs its CPU us" \
            "-" "$CLIENT_ST_HELD" "$CLIENT_CPU"
    done
}

mbs() { # RPC/s of 1 MiB -> MB/s (10^6)
    [[ "$1" =~ ^[0-9.]+$ ]] || { echo n/a; return; }
    python3 -c "print(round($1 * 1.048576, 1))"
}
CONC=64
TESTS="brw ping brw2 ping2"
if [ "$BULK" = 1 ]; then
    CONC=16
    TESTS="write read write2 read2"
fi
declare -A SMALL_VALUES FIRST_VALUES

RESULTS="$WORK/results"
: >"$RESULTS"
LABEL=""
for MODE in $MODES; do
    for round in $(seq "$ROUNDS"); do
      first=""
      for partitions in ${PARTITIONS:-default}; do
        echo "$MODE round $round of $ROUNDS ($partitions partitions)" >&2
        [ -n "$PARTITIONS" ] && LABEL=", $partitions CPT" || partitions=""
        # Fresh nodes every round: a round's connections keep whatever speed the host gave
        # them (BENCHMARKS.md, "Host effects").
        start_node a 127.0.0.2@tcp 0 "$partitions"
        start_node b 127.0.0.3@tcp 1 "$partitions"
        [ "$SMALL" = 1 ] && start_node c 127.0.0.5@tcp 0 "$partitions"
        sleep 1
        "$BIN/ulst" new_session --timeout 600 bench >/dev/null
        "$BIN/ulst" add_group a 127.0.0.2@tcp >/dev/null
        "$BIN/ulst" add_group b 127.0.0.3@tcp >/dev/null
        if [ "$SMALL" = 1 ]; then
            "$BIN/ulst" add_group a2 127.0.0.2@tcp 127.0.0.5@tcp >/dev/null
            small_rpcs "${round}_${partitions:-1}"
            if [ -z "$first" ]; then
                first=$partitions
                for key in "${!SMALL_VALUES[@]}"; do FIRST_VALUES[$key]=${SMALL_VALUES[$key]}; done
            elif [ -n "$PARTITIONS" ]; then
                for test in $TESTS; do
                    record "$test concurrency $CONC vs $first CPT" "-" \
                        "${SMALL_VALUES[$test]}" "${FIRST_VALUES[$test]}"
                    record "$test concurrency $CONC: CPU us per RPC vs $first CPT" "-" \
                        "${SMALL_VALUES[$test.cpu]}" "${FIRST_VALUES[$test.cpu]}"
                done
            fi
            stop_selftest_nodes "$PORT"
            continue
        fi
        for direction in write read; do
            for concurrency in 1 8 32; do
                value=$(ulst_bandwidth "$direction" "$concurrency")
                peer=$(iperf_mbs)
                record "brw $direction 1 MiB, concurrency $concurrency (MB/s) vs iperf3 -l 1M" \
                    ">= 0.9" "$value" "$peer"
                [ "$concurrency" = 1 ] || continue
                # One RPC at a time is the transfer plus the small messages around it, each a
                # wake-up of the other side: the same frames between bare epoll loops give
                # the ceiling any LNet over kernel TCP has here, against the same iperf3.
                floor=$(floor_mbs "$direction" 1)
                record "brw $direction 1 MiB, concurrency 1 (MB/s) vs socket floor" "-" \
                    "$value" "$floor"
                record "(socket floor) brw $direction 1 MiB, concurrency 1 (MB/s) vs iperf3 -l 1M" \
                    "-" "$floor" "$peer"
            done
        done
        # The target is against UCX's streaming small-message rate (tag_bw); its ping-pong
        # rate (tag_lat round trips) is shown too, since an RPC is a round trip. Concurrency 8
        # is the target's measure; 64 shows the rate once both nodes' CPUs are busy.
        for concurrency in 8 64; do
            value=$(ulst_rpc_rate "small${concurrency}_$round" "$concurrency" brw write size=4k)
            record "brw write 4 KiB, concurrency $concurrency (RPC/s) vs tag_bw 8 B (msg/s)" \
                ">= 0.5" "$value" "$(ucx_rate tag_bw 2000000 1)"
            record "brw write 4 KiB, concurrency $concurrency (RPC/s) vs socket floor" "-" \
                "$value" "$(floor_rate brw "$concurrency")"
            value=$(ulst_rpc_rate "pings${concurrency}_$round" "$concurrency" ping)
            record "ping, concurrency $concurrency (RPC/s) vs tag_bw 8 B (msg/s)" \
                ">= 0.5" "$value" "$(ucx_rate tag_bw 2000000 1)"
            record "ping, concurrency $concurrency (RPC/s) vs socket floor" "-" \
                "$value" "$(floor_rate ping "$concurrency")"
        done
        record "ping, concurrency 8 (RPC/s) vs tag_lat 8 B (round trips/s)" "-" \
            "$(ulst_rpc_rate "pingl_$round" 8 ping)" "$(ucx_rate tag_lat 200000 2)"
        stop_selftest_nodes "$PORT"
      done
    done
done

# Per mode and measure: medians over the rounds and the median (min-max) of the paired ratios.
python3 - "$RESULTS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, measure, target, ulst, peer = line.rstrip("\n").split("|")
    rows.setdefault((mode, measure, target), []).append((ulst, peer))
print("| mode | measure | ulst | peer | ratio, median (min-max) | target |")
print("|---|---|---|---|---|---|")
def num(text):
    try:
        return float(text)
    except ValueError:
        return None
for (mode, measure, target), pairs in rows.items():
    ulst = [v for v in (num(u) for u, _ in pairs) if v is not None]
    peer = [v for v in (num(p) for _, p in pairs) if v is not None]
    ratios = [num(u) / num(p) for u, p in pairs if num(u) is not None and num(p)]
    fmt = lambda v: f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
    med = lambda xs: "n/a" if not xs else fmt(statistics.median(xs))
    ratio = "n/a" if not ratios else (
        f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
    # A value that is not a number (the connections by partition) is shown as measured.
    shown = med(ulst) if ulst else " / ".join(sorted({u for u, _ in pairs})) or "n/a"
    print(f"| {mode} | {measure} | {shown} | {med(peer)} | {ratio} | {target} |")
PY
