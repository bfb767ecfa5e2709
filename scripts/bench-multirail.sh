#!/usr/bin/env bash
# Multi-rail in network namespaces (issue 5, "Targets"); needs root, ip, tc, nft.
#
#   scripts/bench-multirail.sh [RATE] [SECONDS]      (defaults: 200mbit 10)
#
# Two ulnetd processes in namespaces joined by N = 1, 2, 4 veth rails, each direction of each
# rail limited to RATE by `tc tbf`; lst brw write 1 MiB, concurrency 16, from A to B. Prints
# the aggregate bandwidth the rails carried (kernel interface counters) against N x RATE, then
# runs the link-down scenario (rail 2 of 2 set down mid-transfer, then up) and prints how long
# the fatal flag and the move took and whether lst saw any failed RPC.
# Built in release mode; the suite's helpers are crates/ulnetd/tests/netns/.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export ULNET_BENCH_RATE="${1:-200mbit}"
export ULNET_BENCH_SECONDS="${2:-10}"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$ROOT"
cargo test --release -q -p ulnetd --test netns -- --ignored --nocapture --test-threads 1 bench_multirail 2>&1 \
    | grep -E '^BENCH|SKIPPED|panicked'
cargo test --release -q -p ulnetd --test netns -- --ignored --nocapture --test-threads 1 a_link_down 2>&1 \
    | grep -E '^link|test a_link|SKIPPED|panicked'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
