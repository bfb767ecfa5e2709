#!/usr/bin/env bash
# Multi-rail in network namespaces (issue 5, "Targets"); needs root, ip, tc, nft.
#
#   scripts/bench-multirail.sh [RATE] [SECONDS]      (defaults: 200mbit 10)
#
# Two ulnetd processes in namespaces joined by N = 1, 2, 4 veth rails, each direction of each
# rail limited to RATE by `tc tbf`; lst brw write 1 MiB, concurrency 16, from A to B. Prints
# the aggregate bandwidth the rails carried (kernel interface counters) against N x RATE, then
# runs the two failover scenarios on 2 rails of 100mbit under GETs (pings, eight threads) from
# an initiator node in A to daemon B: rail 2 set down in A mid-transfer (then up), and an
# nftables black hole on B's end of rail 2 (then removed). Prints how long the fatal flag and
# the move off rail 2 took (upper bounds: one-second windows), how soon rail 2 was used again,
# and how many pings were answered and failed (a failure would be a lost message).
# Built in release mode; the suite's helpers are crates/ulnetd/tests/netns/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export ULNET_BENCH_RATE="${1:-200mbit}"
export ULNET_BENCH_SECONDS="${2:-10}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$ROOT"
cargo test --release -q -p ulnetd --test netns -- --ignored --nocapture --test-threads 1 bench_multirail 2>&1 \
    | grep -E '^BENCH|SKIPPED|panicked'
cargo test --release -q -p ulnetd --test netns -- --nocapture --test-threads 1 a_link_down a_black_hole 2>&1 \
    | grep -E '^(down|hole): (NI|traffic|rail|[0-9])|^test a_|SKIPPED|panicked'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
