#!/usr/bin/env bash
# Routing through one ulnetd router against userspace TCP relays (issue 19, "Targets"); needs
# root, ip, tc, iperf3, socat and haproxy (a missing relay prints "n/a").
#
#   scripts/bench-routed.sh [RATE] [SECONDS]      (defaults: no rate limit, 10)
#
# Namespaces: a client on net tcp, one router on tcp and tcp1, a server on tcp1, the nets being
# two bridges (crates/ulnetd/tests/netns/routed.rs). Measured in turn, as bytes per second the
# router sends toward the server (its interface counters, so every figure pays the same
# headers): iperf3 (1 MiB writes) relayed by socat, then by haproxy in TCP mode, both on the
# router; then ulst brw write 1 MiB at concurrency 8 from a console beside the client through
# ulnetd on the router. Prints each rate and ulnet's ratio to each relay (targets: >= 1.0 socat,
# >= 0.9 haproxy). With RATE, every link is limited by `tc tbf` to it. Then three routers
# whose links toward the server are each limited to $ULNET_BENCH_LINK (200mbit by default):
# routed brw write at concurrency 16 through all three against the sum of iperf3's rate over
# each router's link (target >= 0.95).
# Built in release mode.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export ULNET_BENCH_RATE="${1:-}"
export ULNET_BENCH_SECONDS="${2:-10}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$ROOT"
cargo test --release -q -p ulnetd --test netns -- --ignored --nocapture --test-threads 1 bench_routed 2>&1 \
    | grep -E '^BENCH|SKIPPED|panicked'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
