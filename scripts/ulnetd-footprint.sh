#!/usr/bin/env bash
# ulnetd's start-up time (spawn to the ready line) and idle resident memory, one TCP NI on
# 127.0.0.5, release build. Targets (issue 4): ready within 100 ms, idle RSS at most 16 MiB.
# Usage: scripts/ulnetd-footprint.sh [RUNS]   (PORT=... to move off 7991)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-10}"
port="${PORT:-7991}"
cargo build --release -q -p ulnetd
bin="$PWD/target/release/ulnetd"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat >"$dir/node.yaml" <<YAML
global:
    accept_port: $port
    accept: all
net:
    - net type: tcp
      local NI(s):
        - nid: 127.0.0.5@tcp
YAML

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }

times=()
for _ in $(seq 1 "$runs"); do
    start=${EPOCHREALTIME/./}
    coproc DAEMON { exec "$bin" --config "$dir/node.yaml" --socket "$dir/ulnetd.sock" 2>/dev/null; }
    read -r ready <&"${DAEMON[0]}"
    end=${EPOCHREALTIME/./}
    times+=("$((end - start))")
    pid=$DAEMON_PID
    kill -TERM "$pid"
    wait "$pid"
done
echo "$ready"
printf 'spawn to ready (us):'
printf ' %s' "${times[@]}"
echo
printf 'median: %s us\n' "$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')"

coproc DAEMON { exec "$bin" --config "$dir/node.yaml" --socket "$dir/ulnetd.sock" 2>/dev/null; }
read -r _ <&"${DAEMON[0]}"
pid=$DAEMON_PID
sleep 1
echo "idle RSS: $(rss_kib "$pid") KiB"
kill -TERM "$pid"
wait "$pid"
