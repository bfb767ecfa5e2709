#!/usr/bin/env bash
# ulst against peer tools, measured in one run (issue 6, "Targets"); prints a table of ratios.
#
#   scripts/bench-selftest.sh [--quick] [--no-build] [--pinned-only | --unpinned-only]
#
# BENCH_BIN=DIR takes ulnetd and ulst from DIR instead of target/release (and skips the build),
# to compare two builds in turns under the same load.
#
# Two ulnetd nodes on loopback (127.0.0.2@tcp and 127.0.0.3@tcp, port 7988) run the selftest
# service; a ulst console on 127.0.0.4@tcp drives them. Measured, each pinned (node A and its
# peer tool on CPU 0, node B on CPU 1) and unpinned:
#
#   * ulst brw write and read, 1 MiB, concurrency 1, 8 and 32, against `iperf3 -l 1M` (one
#     stream): target ratio >= 0.9;
#   * ulst brw write 4 KiB RPC rate and ulst ping RPC rate, concurrency 8 (and 64, the rate
#     with both nodes' CPUs busy), against `ucx_perftest` over tcp (tag_bw, 8-byte messages):
#     target ratio >= 0.5.
#
# Bandwidth is the server's receive rate (write) or the client's (read) from `ulst --json stat`;
# RPC rates come from the RPC counts of the client's latency histograms over the sampling
# window. Peer tools: Debian packages iperf3 and ucx-utils; a missing tool gives "n/a".
# Benchmarks are not tests: nothing here fails on a slow machine.

set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
QUICK=0
BUILD=1
MODES="pinned unpinned"
for arg in "$@"; do
    case "$arg" in
        --quick) QUICK=1 ;;
        --no-build) BUILD=0 ;;
        --pinned-only) MODES="pinned" ;;
        --unpinned-only) MODES="unpinned" ;;
        *) echo "usage: $0 [--quick] [--no-build] [--pinned-only|--unpinned-only]" >&2; exit 2 ;;
    esac
done
SECONDS_PER_POINT=$([ "$QUICK" = 1 ] && echo 3 || echo 10)
PORT=7988

[ -n "${BENCH_BIN:-}" ] && BUILD=0
if [ "$BUILD" = 1 ]; then
    cargo build --release -q -p ulnetd -p ulnet-selftest --manifest-path "$ROOT/Cargo.toml"
fi
BIN="${BENCH_BIN:-$ROOT/target/release}"
WORK="$(mktemp -d /tmp/bench-selftest.XXXXXX)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]:-}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

export LST_SESSION=$$
export ULST_SOCKET="$WORK/ulst.sock"
export ULST_NID=127.0.0.4@tcp
export ULST_PORT=$PORT

# pin CPU: the taskset prefix for a pinned run, nothing for an unpinned one.
pin() { [ "$MODE" = pinned ] && echo "taskset -c $1" || true; }

start_node() { # name nid cpu
    cat > "$WORK/$1.yaml" <<EOF
global:
    accept_port: $PORT
    accept: all
net:
    - net type: tcp
      local NI(s):
        - nid: $2
EOF
    $(pin "$3") "$BIN/ulnetd" --config "$WORK/$1.yaml" --socket "$WORK/$1.ctl" \
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

ratio() { python3 -c "print('n/a' if 'n/a' in ('$1','$2') else round(float('$1')/float('$2'), 2))"; }

printf '| mode | measure | ulst | peer | ratio | target |\n|---|---|---|---|---|---|\n'
for MODE in $MODES; do
    start_node a 127.0.0.2@tcp 0
    start_node b 127.0.0.3@tcp 1
    sleep 1
    "$BIN/ulst" new_session --timeout 600 bench >/dev/null
    "$BIN/ulst" add_group a 127.0.0.2@tcp >/dev/null
    "$BIN/ulst" add_group b 127.0.0.3@tcp >/dev/null
    IPERF=$(iperf_mbs)
    for direction in write read; do
        for concurrency in 1 8 32; do
            value=$(ulst_bandwidth "$direction" "$concurrency")
            printf '| %s | brw %s 1 MiB, concurrency %s (MB/s) | %s | iperf3 -l 1M: %s | %s | >= 0.9 |\n' \
                "$MODE" "$direction" "$concurrency" "$value" "$IPERF" "$(ratio "$value" "$IPERF")"
        done
    done
    # The target is against UCX's streaming small-message rate (tag_bw); its ping-pong rate
    # (tag_lat round trips) is shown too, since an RPC is a round trip.
    UCX=$(ucx_rate tag_bw 2000000 1)
    PINGPONG=$(ucx_rate tag_lat 200000 2)
    # Concurrency 8 is the target's measure; 64 shows the rate once both nodes' CPUs are busy.
    for concurrency in 8 64; do
        value=$(ulst_rpc_rate "small$concurrency" "$concurrency" brw write size=4k)
        printf '| %s | brw write 4 KiB, concurrency %s (RPC/s) | %s | tag_bw 8 B: %s msg/s | %s | >= 0.5 |\n' \
            "$MODE" "$concurrency" "$value" "$UCX" "$(ratio "$value" "$UCX")"
        printf '| %s | brw write 4 KiB, concurrency %s (RPC/s) | %s | tag_lat 8 B: %s round trips/s | %s | - |\n' \
            "$MODE" "$concurrency" "$value" "$PINGPONG" "$(ratio "$value" "$PINGPONG")"
        value=$(ulst_rpc_rate "pings$concurrency" "$concurrency" ping)
        printf '| %s | ping, concurrency %s (RPC/s) | %s | tag_bw 8 B: %s msg/s | %s | >= 0.5 |\n' \
            "$MODE" "$concurrency" "$value" "$UCX" "$(ratio "$value" "$UCX")"
        printf '| %s | ping, concurrency %s (RPC/s) | %s | tag_lat 8 B: %s round trips/s | %s | - |\n' \
            "$MODE" "$concurrency" "$value" "$PINGPONG" "$(ratio "$value" "$PINGPONG")"
    done
    "$BIN/ulst" end_session >/dev/null || true
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    PIDS=()
    # The console server exits about 2 s after its session ends; the next mode's console
    # needs its port.
    for _ in $(seq 100); do
        [ -e "$ULST_SOCKET" ] || break
        sleep 0.05
    done
done
