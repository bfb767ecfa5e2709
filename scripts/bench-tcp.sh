#!/usr/bin/env bash
# ulnet's TCP LND on loopback next to peer tools, unpinned and pinned (issue 4, "Targets").
#
# Two processes each (server and client), every figure measured in the same run as its peer:
#   - bulk: `iperf3 -c 127.0.0.1 -l 1M` (one stream) against tcp_perf
#     (crates/ulnet/examples/tcp_perf.rs) keeping 8 PUTs of 1 MiB with ACK in flight between
#     127.0.0.2 and 127.0.0.3; target ulnet / iperf3 >= 0.9;
#   - message rate: `ucx_perftest -t tag_bw -s 8` over tcp (UCX_TLS=tcp UCX_NET_DEVICES=lo)
#     against 0-byte PUTs without ACK, 64 in flight, counted at the receiving node
#     (`tcp_perf --no-ack`); target ulnet / UCX >= 0.5;
#   - round trip: `sockperf pp --tcp -m 64 --full-rtt` (average round trip) against
#     `Node::ping` back to back (`tcp_perf --ping`, a GET of the ping buffer as lnetctl ping
#     sends); target ulnet / sockperf <= 2;
#   - for information, with no target: 0-byte PUT+ACK with 64 in flight (rate) and with 1 in
#     flight (round trip).
# Pinned: every server on CPU 0, every client on CPU 1 (taskset), for all tools.
#
# Each figure is the best of BENCH_REPEAT runs (highest rate, lowest round trip), the tools taking
# turns, which keeps other load on the host from deciding the ratio. Before each mode the script
# waits (up to BENCH_LOAD_WAIT seconds) for the 1-minute load average to drop below BENCH_MAX_LOAD
# and reports the load it measured under, and what other programs used meanwhile; before each
# round it also waits (up to BENCH_ROUND_WAIT seconds) for other programs to use less than
# BENCH_MAX_OTHERS CPUs. Missing tools are installed with apt-get (Debian
# packages iperf3, sockperf, ucx-utils); a tool still missing gives "n/a". Every process runs
# under `timeout`, and every server is killed when its run ends, so the script cannot hang.
#
# Environment: BENCH_SECONDS (5), BENCH_REPEAT (3), BENCH_MAX_LOAD (1.5), BENCH_LOAD_WAIT (300),
# BENCH_MAX_OTHERS (0.3), BENCH_ROUND_WAIT (60),
# BENCH_PORT (the ulnet nodes' accept_port; default: a free one), IPERF_PORT (5201),
# SOCKPERF_PORT (11111), UCX_PORT (13337), BENCH_RATE_INFLIGHT (64).
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${BENCH_SECONDS:-5}
REPEAT=${BENCH_REPEAT:-3}
MAX_LOAD=${BENCH_MAX_LOAD:-1.5}
LOAD_WAIT=${BENCH_LOAD_WAIT:-300}
RATE_INFLIGHT=${BENCH_RATE_INFLIGHT:-64}
MAX_OTHERS=${BENCH_MAX_OTHERS:-0.3}
ROUND_WAIT=${BENCH_ROUND_WAIT:-60}
IPERF_PORT=${IPERF_PORT:-5201}
SOCKPERF_PORT=${SOCKPERF_PORT:-11111}
UCX_PORT=${UCX_PORT:-13337}
# UCX iterations: BENCH_SECONDS or so at the 1-2.5 M msg/s UCX reaches here.
UCX_ITERATIONS=$((SECS * 2000000))
# Upper bounds on a server's and a client's life.
SERVER_LIMIT=$((SECS + 60))
CLIENT_LIMIT=$((SECS + 30))
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

# Idempotent installs: only what is missing, one apt-get update first.
install_missing() {
    local missing=() SUDO=""
    command -v iperf3 >/dev/null || missing+=(iperf3)
    command -v sockperf >/dev/null || missing+=(sockperf)
    command -v ucx_perftest >/dev/null || missing+=(ucx-utils)
    [ ${#missing[@]} -eq 0 ] && return
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing ${missing[*]} (apt)..." >&2
    $SUDO apt-get update >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${missing[@]}" >/dev/null 2>&1 ||
        echo "apt-get install ${missing[*]} failed; the missing peers will show n/a" >&2
}
install_missing

cargo build --quiet --release -p ulnet --example tcp_perf
BIN=target/release/examples/tcp_perf
TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
    stop_server
    rm -rf "$TMP"
}
trap cleanup EXIT

load1() { cut -d' ' -f1 /proc/loadavg; }

# Between rounds nothing of ours runs: waits (up to BENCH_ROUND_WAIT seconds) until other programs
# use less than BENCH_MAX_OTHERS CPUs over one second, so that a burst of other work that started
# after wait_for_quiet is less likely to land in every round.
wait_for_idle_round() {
    local waited=0 before used
    while :; do
        before=$(host_busy)
        sleep 1
        used=$(python3 -c "print('%.2f' % ($(host_busy) - $before))")
        python3 -c "import sys; sys.exit(0 if $used < $MAX_OTHERS else 1)" && return
        waited=$((waited + 1))
        [ "$waited" -ge "$ROUND_WAIT" ] && { echo "other programs use $used CPUs; measuring anyway" >&2; return; }
    done
}

# CPU seconds the whole host has been busy (user, nice, system, irq, softirq; not steal).
host_busy() {
    awk -v hz="$(getconf CLK_TCK)" '$1 == "cpu" { printf "%.2f\n", ($2 + $3 + $4 + $7 + $8) / hz }' /proc/stat
}

# CPU seconds of this script's finished children, grandchildren included, from bash's `times`
# (which must run in this shell, not in a $(...) subshell: call `times >"$TMP/times"` first).
our_cpu() {
    python3 -c '
import re, sys
line = open(sys.argv[1]).read().splitlines()[1]
print("%.2f" % sum(int(m) * 60 + float(s) for m, s in re.findall(r"(\d+)m([\d.]+)s", line)))' "$TMP/times"
}

# Waits up to LOAD_WAIT seconds for the 1-minute load average to drop below MAX_LOAD.
wait_for_quiet() {
    local waited=0
    while python3 -c "import sys; sys.exit(0 if float('$(load1)') >= $MAX_LOAD else 1)"; do
        if [ "$waited" -ge "$LOAD_WAIT" ]; then
            echo "load average still $(load1) after ${LOAD_WAIT}s; measuring anyway" >&2
            return
        fi
        sleep 5
        waited=$((waited + 5))
    done
}

# start_server <output file> <command...>: runs a server under `timeout`, in the background.
start_server() {
    local out=$1
    shift
    $SERVER_PIN timeout "$SERVER_LIMIT" "$@" >"$out" 2>&1 &
    SERVER_PID=$!
}

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}

# wait_listen <port>: until something listens on the TCP port (5 s at most) or the server died.
wait_listen() {
    for _ in $(seq 100); do
        [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

# port_busy <port>: something already listens there (another program; never ours, since every
# run stops its server).
port_busy() {
    if [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; then
        echo "port $1 is taken by another program; set the tool's *_PORT variable" >&2
        return 0
    fi
    return 1
}

client() { $CLIENT_PIN timeout "$CLIENT_LIMIT" "$@"; }

# Prints the peer's figure, or n/a.
iperf_gbits() {
    command -v iperf3 >/dev/null && ! port_busy "$IPERF_PORT" || { echo n/a; return; }
    start_server "$TMP/iperf-server.out" iperf3 -s -1 -B 127.0.0.1 -p "$IPERF_PORT"
    wait_listen "$IPERF_PORT" || { stop_server; echo n/a; return; }
    client iperf3 -c 127.0.0.1 -p "$IPERF_PORT" -l 1M -t "$SECS" -J >"$TMP/iperf.json" 2>/dev/null || true
    stop_server
    python3 -c '
import json, sys
try:
    print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e9))
except Exception:
    print("n/a")' "$TMP/iperf.json"
}

# Overall message rate of UCX tag_bw, 8-byte messages, over tcp on lo.
ucx_rate() {
    command -v ucx_perftest >/dev/null && ! port_busy "$UCX_PORT" || { echo n/a; return; }
    export UCX_TLS=tcp UCX_NET_DEVICES=lo
    start_server "$TMP/ucx-server.out" ucx_perftest -p "$UCX_PORT"
    wait_listen "$UCX_PORT" || { stop_server; unset UCX_TLS UCX_NET_DEVICES; echo n/a; return; }
    client ucx_perftest 127.0.0.1 -p "$UCX_PORT" -t tag_bw -s 8 -n "$UCX_ITERATIONS" \
        >"$TMP/ucx.out" 2>&1 || true
    stop_server
    unset UCX_TLS UCX_NET_DEVICES
    # "Final: iterations p50 avg overall MB/s-avg MB/s-overall msg/s-avg msg/s-overall"
    awk '$1 == "Final:" && $NF ~ /^[0-9.]+$/ { rate = int($NF) } END { print (rate ? rate : "n/a") }' \
        "$TMP/ucx.out"
}

# Average round trip of sockperf ping-pong over TCP, 64-byte messages, in microseconds.
sockperf_rtt() {
    command -v sockperf >/dev/null && ! port_busy "$SOCKPERF_PORT" || { echo n/a; return; }
    start_server "$TMP/sockperf-server.out" sockperf sr --tcp -i 127.0.0.1 -p "$SOCKPERF_PORT"
    wait_listen "$SOCKPERF_PORT" || { stop_server; echo n/a; return; }
    client sockperf pp --tcp -i 127.0.0.1 -p "$SOCKPERF_PORT" -t "$SECS" -m 64 --full-rtt \
        >"$TMP/sockperf.out" 2>&1 || true
    stop_server
    # "sockperf: Summary: Round trip is 4.261 usec" (colour codes stripped first).
    sed 's/\x1b\[[0-9;]*m//g' "$TMP/sockperf.out" |
        awk '/Summary: Round trip is/ { for (i = 1; i <= NF; i++) if ($i == "is") rtt = $(i + 1) }
             END { print (rtt ? rtt : "n/a") }'
}

# ulnet <field> <tcp_perf client options...>: the field from the client's line, or from the
# server's last report for received_per_sec (which needs the server's quiet period to pass).
ulnet() {
    local field=$1 line
    shift
    start_server "$TMP/server.out" "$BIN" server 127.0.0.3 "$PORT"
    for _ in $(seq 100); do
        grep -qs ready "$TMP/server.out" && break
        sleep 0.05
    done
    line=$(client "$BIN" client 127.0.0.2 127.0.0.3 "$PORT" --time "$SECS" "$@" 2>"$TMP/client.err") ||
        { echo "tcp_perf client failed: $(cat "$TMP/client.err" "$TMP/server.out")" >&2; line=""; }
    if [ "$field" = received_per_sec ] && [ -n "$line" ]; then
        for _ in $(seq 100); do
            grep -qs "^received=" "$TMP/server.out" && break
            sleep 0.05
        done
        line=$(grep "^received=" "$TMP/server.out" | tail -1 || true)
    fi
    stop_server
    value=$(echo "$line" | tr ' ' '\n' | sed -n "s/^$field=//p")
    echo "${value:-n/a}"
}

# best <higher|lower> <a> <b>: the better figure, n/a losing to any number.
best() {
    python3 -c '
import sys
way, values = sys.argv[1], [v for v in sys.argv[2:] if v not in ("n/a", "")]
print((max if way == "higher" else min)(values, key=float) if values else "n/a")' "$@"
}

# ratio <a> <b>: a / b with two decimals, or n/a.
ratio() {
    python3 -c '
import sys
a, b = sys.argv[1:]
print("n/a" if "n/a" in (a, b) or float(b) == 0 else "%.2f" % (float(a) / float(b)))' "$1" "$2"
}

# verdict <ratio> <ge|le> <target>
verdict() {
    python3 -c '
import sys
r, way, t = sys.argv[1], sys.argv[2], float(sys.argv[3])
if r == "n/a": print("n/a")
else: print("met" if (float(r) >= t if way == "ge" else float(r) <= t) else "missed")' "$@"
}

g() { [ "$1" = n/a ] && echo n/a || python3 -c "print('%.1f Gbit/s' % float('$1'))"; }
k() { [ "$1" = n/a ] && echo n/a || python3 -c "print('%.0f K/s' % ($1 / 1e3))"; }
M() { [ "$1" = n/a ] && echo n/a || python3 -c "print('%.2f M/s' % ($1 / 1e6))"; }
us() { [ "$1" = n/a ] && echo n/a || python3 -c "print('%.1f us' % float('$1'))"; }

modes=(unpinned)
[ "$(nproc)" -ge 2 ] && modes+=(pinned)

echo "host: $(nproc) CPUs, $(uname -r); BENCH_SECONDS=$SECS, best of $REPEAT; ulnet port $PORT"
rows=()
for mode in "${modes[@]}"; do
    if [ "$mode" = pinned ]; then
        SERVER_PIN="taskset -c 0"
        CLIENT_PIN="taskset -c 1"
    else
        SERVER_PIN=""
        CLIENT_PIN=""
    fi
    wait_for_quiet
    load_before=$(load1)
    times >"$TMP/times"
    busy_before=$(host_busy) ours_before=$(our_cpu) start=$(date +%s.%N)
    ip=n/a bulk=n/a ucx=n/a rate=n/a ackrate=n/a sp=n/a ping=n/a rtt=n/a
    for _ in $(seq "$REPEAT"); do
        wait_for_idle_round
        ip=$(best higher "$ip" "$(iperf_gbits)")
        bulk=$(best higher "$bulk" "$(ulnet gbit_per_sec --size 1048576 --inflight 8)")
        ucx=$(best higher "$ucx" "$(ucx_rate)")
        rate=$(best higher "$rate" "$(ulnet received_per_sec --size 0 --inflight "$RATE_INFLIGHT" --no-ack)")
        ackrate=$(best higher "$ackrate" "$(ulnet puts_per_sec --size 0 --inflight 64)")
        sp=$(best lower "$sp" "$(sockperf_rtt)")
        ping=$(best lower "$ping" "$(ulnet rtt_us --ping)")
        rtt=$(best lower "$rtt" "$(ulnet rtt_us --size 0 --inflight 1)")
    done
    # Other programs' CPU use meanwhile, in CPUs (the load average after a mode counts ours too).
    times >"$TMP/times"
    busy_after=$(host_busy) ours_after=$(our_cpu)
    others=$(python3 -c "print('%.2f' % max(0, (($busy_after - $busy_before) - ($ours_after - $ours_before)) / ($(date +%s.%N) - $start)))")
    load="$load_before; others $others CPU"
    r_bulk=$(ratio "$bulk" "$ip")
    r_rate=$(ratio "$rate" "$ucx")
    r_ping=$(ratio "$ping" "$sp")
    rows+=("| $mode | 1 MiB PUT+ACK, 8 in flight | $(g "$bulk") | iperf3 -l 1M: $(g "$ip") | $r_bulk | >= 0.9: $(verdict "$r_bulk" ge 0.9) | $load |")
    rows+=("| $mode | 0 B PUT, no ACK, $RATE_INFLIGHT in flight, counted at the receiver | $(k "$rate") | ucx_perftest tag_bw 8 B: $(M "$ucx") | $r_rate | >= 0.5: $(verdict "$r_rate" ge 0.5) | $load |")
    rows+=("| $mode | Node::ping round trip | $(us "$ping") | sockperf pp -m 64: $(us "$sp") | $r_ping | <= 2: $(verdict "$r_ping" le 2) | $load |")
    rows+=("| $mode | 0 B PUT+ACK, 64 in flight | $(k "$ackrate") | tag_bw: $(M "$ucx") | $(ratio "$ackrate" "$ucx") | - | $load |")
    rows+=("| $mode | 0 B PUT+ACK round trip, 1 in flight | $(us "$rtt") | sockperf: $(us "$sp") | $(ratio "$rtt" "$sp") | - | $load |")
    # Progress on stderr, the table at the end on stdout.
    printf '%s\n' "${rows[@]: -5}" >&2
done

echo
echo "| mode | ulnet measure | ulnet | peer | ratio | target | load average before; other programs' CPU use during |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
