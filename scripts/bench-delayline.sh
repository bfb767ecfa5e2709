#!/usr/bin/env bash
# The WAN seed's peer_credits sweep for real, through the userspace delay line, against the
# simulator's prediction for the same link (issue 22, item 6); needs root, ip and python3.
#
#   scripts/bench-delayline.sh [RATE] [DELAY] [CREDITS...]
#       (defaults: 2Gbit 25ms 1 2 4 8 16 32; BENCH_SECONDS=12, BENCH_CONCURRENCY=64,
#        BENCH_INITCWND=1000)
#
# Two network namespaces joined by ulnet-delayline (RATE each way, DELAY one way, 38 bytes of
# Ethernet framing a packet, a drop-tail queue of two bandwidth-delay products, MTU 9000),
# TCP buffers up to 128 MiB in both (the window is not the limit), no slow start after idle
# (tcp_slow_start_after_idle=0) and an initial congestion window of BENCH_INITCWND segments on
# the route (0: the kernel's 10), since the simulator has no congestion window: with few
# credits each 1 MiB leaves alone after a pause, and a window grown again from 10 segments
# costs it about half a round trip here. Then ulnetd in each
# (10.250.0.1@tcp, 10.250.0.2@tcp; peer_credits C, conns_per_peer 1) and a ulst console beside
# the first (10.250.0.3@tcp): brw write 1 MiB at BENCH_CONCURRENCY from the first to the
# second, the server's receive rate averaged from 3 s to BENCH_SECONDS. Then ulnet-sim runs
# the same pair over the same link and the same window. Prints, per C, both MB/s (10^6) and
# their ratio (target: within 10%). Built in release mode. Benchmarks are not tests: nothing
# here fails on a slow machine.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
RATE="${1:-2Gbit}"
DELAY="${2:-25ms}"
shift 2 2>/dev/null || shift $#
CREDITS=("${@:-}")
[ -z "${CREDITS[0]}" ] && CREDITS=(1 2 4 8 16 32)
SECONDS_TOTAL="${BENCH_SECONDS:-12}"
WARMUP=3
CONCURRENCY="${BENCH_CONCURRENCY:-64}"
PORT=7988
cd "$ROOT"
cargo build --release -q -p ulnetd -p ulnet-selftest -p ulnet-delayline -p ulnet-sim
BIN="$ROOT/target/release"
WORK="$(mktemp -d /tmp/bench-delayline.XXXXXX)"
NS_A="uldl-bench-$$-a"
NS_B="uldl-bench-$$-b"
DEV_A="dlb$$a"
DEV_B="dlb$$b"
PIDS=()
LINE_PID=
cleanup() {
    ip netns exec "$NS_A" env ULST_SOCKET="$WORK/ulst.sock" "$BIN/ulst" end_session \
        >/dev/null 2>&1 || true
    for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
    [ -n "$LINE_PID" ] && kill "$LINE_PID" 2>/dev/null || true
    wait 2>/dev/null || true
    ip netns del "$NS_A" 2>/dev/null || true
    ip netns del "$NS_B" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Rate and delay in numbers: bytes per second and seconds (ulnet-sim's units, via python).
read -r RATE_BPS DELAY_S < <(python3 - "$RATE" "$DELAY" <<'PY'
import re, sys
def number(text, units):
    m = re.fullmatch(r"([0-9.]+)\s*([A-Za-z/]*)", text.strip())
    if not m or m.group(2) not in units:
        sys.exit(f"cannot read {text!r}")
    return float(m.group(1)) * units[m.group(2)]
rate = number(sys.argv[1], {"Gbit": 1e9 / 8, "Mbit": 1e6 / 8, "GB/s": 1e9, "MB/s": 1e6})
delay = number(sys.argv[2], {"ms": 1e-3, "us": 1e-6, "s": 1.0})
print(int(rate), delay)
PY
)
QUEUE=$(python3 -c "print(max(1 << 20, int(2 * $RATE_BPS * 2 * $DELAY_S)))")

# --- the line and the namespaces -------------------------------------------------------------
mkfifo "$WORK/line.in"
"$BIN/ulnet-delayline" --a "$DEV_A" --b "$DEV_B" --delay "$DELAY" --rate "$RATE" \
    --overhead 38 --queue "$QUEUE" --exit-on-eof <"$WORK/line.in" >"$WORK/line.out" 2>&1 &
LINE_PID=$!
exec 9>"$WORK/line.in"
for _ in $(seq 100); do grep -q ready "$WORK/line.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$WORK/line.out" || { cat "$WORK/line.out"; exit 1; }
for side in A B; do
    ns=NS_$side dev=DEV_$side
    ip netns add "${!ns}"
    ip -n "${!ns}" link set lo up
    ip link set "${!dev}" netns "${!ns}"
    ip -n "${!ns}" link set "${!dev}" mtu 9000 up
    # Large buffers, and no slow start again after each idle moment (WAN tuning): the
    # simulator models neither the window's growth nor congestion control.
    ip netns exec "${!ns}" sysctl -qw net.ipv4.tcp_rmem="4096 131072 134217728" \
        net.ipv4.tcp_wmem="4096 16384 134217728" net.ipv4.tcp_slow_start_after_idle=0
done
ip -n "$NS_A" addr add 10.250.0.1/24 dev "$DEV_A"
ip -n "$NS_A" addr add 10.250.0.3/24 dev "$DEV_A"
ip -n "$NS_B" addr add 10.250.0.2/24 dev "$DEV_B"
INITCWND="${BENCH_INITCWND:-1000}"
if [ "$INITCWND" != 0 ]; then
    ip -n "$NS_A" route change 10.250.0.0/24 dev "$DEV_A" initcwnd "$INITCWND" initrwnd "$INITCWND"
    ip -n "$NS_B" route change 10.250.0.0/24 dev "$DEV_B" initcwnd "$INITCWND" initrwnd "$INITCWND"
fi

start_node() { # ns name nid credits
    cat >"$WORK/$2.yaml" <<EOF
global:
    accept_port: $PORT
    accept: all
net:
    - net type: tcp
      local NI(s):
        - nid: $3
      tunables:
          peer_credits: $4
          credits: $(($4 > 128 ? 2 * $4 : 256))
      lnd tunables:
          conns_per_peer: 1
EOF
    ip netns exec "$1" "$BIN/ulnetd" --config "$WORK/$2.yaml" --socket "$WORK/$2.ctl" \
        >"$WORK/$2.log" 2>&1 &
    PIDS+=($!)
}
ulst() { ip netns exec "$NS_A" env LST_SESSION=$$ ULST_SOCKET="$WORK/ulst.sock" \
    ULST_NID=10.250.0.3@tcp ULST_PORT=$PORT "$BIN/ulst" "$@"; }

# --- the real runs ---------------------------------------------------------------------------
real_mbs() { # credits -> the server's receive rate, MB/s
    start_node "$NS_A" a 10.250.0.1@tcp "$1"
    start_node "$NS_B" b 10.250.0.2@tcp "$1"
    sleep 1
    ulst new_session --timeout 600 "credits$1" >/dev/null
    ulst add_group c 10.250.0.1@tcp >/dev/null
    ulst add_group s 10.250.0.2@tcp >/dev/null
    ulst add_batch bulk >/dev/null
    ulst add_test --batch bulk --concurrency "$CONCURRENCY" --from c --to s brw write size=1M \
        >/dev/null
    ulst run bulk >/dev/null
    sleep "$WARMUP"
    ulst --json stat --delay $((SECONDS_TOTAL - WARMUP)) --count 1 s | tail -1 \
        | python3 -c "import json,sys; d=json.load(sys.stdin); print(round(d['bandwidth']['read']['avg'] * 1.048576, 1))"
    ulst stop bulk >/dev/null
    ulst end_session >/dev/null
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait "${PIDS[@]}" 2>/dev/null || true
    PIDS=()
}

# --- the simulator's prediction --------------------------------------------------------------
sim_mbs() { # credits -> the server's receive rate over the same window, MB/s
    cat >"$WORK/sim.yaml" <<EOF
name: delayline
duration: ${SECONDS_TOTAL}s
sample_interval: 1s
defaults:
  link: {bandwidth: 10Gbit, latency: 1us, mtu: 9000, queue: 1GiB}
  tunables:
    peer_credits: $1
    credits: $(($1 > 128 ? 2 * $1 : 256))
    conns_per_peer: 1
    tx_buffer_size: 128MiB
    rx_buffer_size: 128MiB
switches: [{name: a}, {name: b}]
links:
  - {between: [a, b], link: {bandwidth: $RATE_BPS, latency: $DELAY, mtu: 9000, queue: $QUEUE}}
nodes:
  - {name: client, nis: [{net: tcp, switch: a}]}
  - {name: server, nis: [{net: tcp, switch: b}]}
workloads:
  - brw: {name: write, clients: client, servers: server, op: write, size: 1MiB, concurrency: $CONCURRENCY}
EOF
    "$BIN/ulnet-sim" run "$WORK/sim.yaml" --json --out "$WORK/sim" \
        | python3 -c "import json,sys; s=json.load(sys.stdin)['workloads'][0]['bandwidth_series_mb_per_s'][$WARMUP:]; print(round(sum(s)/len(s), 1))"
}

echo "link: $RATE each way, $DELAY one way, queue $QUEUE bytes, initcwnd ${INITCWND}; brw write 1 MiB, concurrency $CONCURRENCY"
echo "| peer_credits | real MB/s | simulated MB/s | real / simulated |"
echo "|---|---|---|---|"
for credits in "${CREDITS[@]}"; do
    real=$(real_mbs "$credits")
    sim=$(sim_mbs "$credits")
    ratio=$(python3 -c "print(f'{$real / $sim:.3f}' if $sim else 'n/a')")
    echo "| $credits | $real | $sim | $ratio |"
done
exec 9>&-
wait "$LINE_PID" 2>/dev/null || true
LINE_PID=
echo "delay line: $(grep -v ready "$WORK/line.out" | tail -1)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
