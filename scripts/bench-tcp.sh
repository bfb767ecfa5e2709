#!/usr/bin/env bash
# ulnet's TCP LND on loopback next to iperf3, unpinned and pinned.
#
# Two processes each (server and client), like iperf3:
#   - iperf3 -c 127.0.0.1 -l 1M -t 5 (one stream);
#   - tcp_perf (crates/ulnet/examples/tcp_perf.rs): 1 MiB PUTs with ACK, 8 in flight, between
#     127.0.0.2 and 127.0.0.3; also the 0-byte PUT rate (64 in flight) and the 0-byte PUT+ACK
#     round-trip rate (1 in flight), which have no peer tool here.
# Pinned: server on CPU 0, client on CPU 1 (taskset), for both tools. Prints the ratio
# ulnet / iperf3 for the bulk figure (issue 4's target: >= 0.9).
#
# Each figure is the best of BENCH_REPEAT runs (3), iperf3 and ulnet taking turns, which keeps
# other load on the host from deciding the ratio.
#
# Environment: BENCH_SECONDS (5), BENCH_REPEAT (3), BENCH_PORT (the ulnet nodes' accept_port; default: a free one),
# IPERF_PORT (5201).
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${BENCH_SECONDS:-5}
REPEAT=${BENCH_REPEAT:-3}
# A port free on both node addresses (other programs on the host may hold the usual ones).
PORT=${BENCH_PORT:-$(python3 -c '
import socket
for port in range(17988, 27988, 7):
    try:
        for ip in ("127.0.0.2", "127.0.0.3"):
            s = socket.socket(); s.bind((ip, port)); s.close()
        print(port); break
    except OSError:
        pass')}
IPERF_PORT=${IPERF_PORT:-5201}

if ! command -v iperf3 >/dev/null; then
    echo "installing iperf3 (apt)..." >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get install -y iperf3 >/dev/null 2>&1 ||
        { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y iperf3 >/dev/null; }
fi

cargo build --quiet --release -p ulnet --example tcp_perf
BIN=target/release/examples/tcp_perf
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# iperf3 <server pinning> <client pinning>: prints Gbit/s received.
iperf() {
    $1 iperf3 -s -1 -B 127.0.0.1 -p "$IPERF_PORT" >/dev/null 2>&1 &
    SERVER_PID=$!
    sleep 0.5
    $2 iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -l 1M -t "$SECS" -J >"$TMP/iperf.json"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))' "$TMP/iperf.json"
}

# ulnet <server pinning> <client pinning> <size> <inflight> <field>: prints the field.
ulnet() {
    $1 "$BIN" server 127.0.0.3 "$PORT" >"$TMP/server.out" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 100); do
        grep -qs ready "$TMP/server.out" && break
        sleep 0.05
    done
    line=$($2 "$BIN" client 127.0.0.2 127.0.0.3 "$PORT" --size "$3" --inflight "$4" --time "$SECS" 2>"$TMP/client.err") ||
        { echo "tcp_perf client failed: $(cat "$TMP/client.err" "$TMP/server.out")" >&2; }
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    value=$(echo "$line" | tr ' ' '\n' | sed -n "s/^$5=//p")
    echo "${value:-0}"
}

best() {
    python3 -c "import sys; print(max(sys.argv[1:], key=float))" "$1" "$2"
}

modes=(unpinned)
[ "$(nproc)" -ge 2 ] && modes+=(pinned)

printf '%-9s %14s %18s %8s %16s %16s\n' mode "iperf3 Gbit/s" "ulnet 1MiBx8 Gbit/s" ratio "0B PUT/s (x64)" "0B RTT/s (x1)"
for mode in "${modes[@]}"; do
    if [ "$mode" = pinned ]; then
        server_pin="taskset -c 0"
        client_pin="taskset -c 1"
    else
        server_pin=""
        client_pin=""
    fi
    ip=0 bulk=0 rate=0 rtt=0
    for _ in $(seq "$REPEAT"); do
        ip=$(best "$ip" "$(iperf "$server_pin" "$client_pin")")
        bulk=$(best "$bulk" "$(ulnet "$server_pin" "$client_pin" 1048576 8 gbit_per_sec)")
        rate=$(best "$rate" "$(ulnet "$server_pin" "$client_pin" 0 64 puts_per_sec)")
        rtt=$(best "$rtt" "$(ulnet "$server_pin" "$client_pin" 0 1 puts_per_sec)")
    done
    ratio=$(python3 -c "print('%.2f' % ($bulk / $ip if $ip else 0))")
    printf '%-9s %14s %18s %8s %16s %16s\n' "$mode" "$ip" "$bulk" "$ratio" "$rate" "$rtt"
done
