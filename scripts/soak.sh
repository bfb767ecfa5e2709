#!/usr/bin/env bash
# Soak: two ulnetd nodes in network namespaces joined by RAILS veth rails (each limited with
# `tc tbf`), and a third node C on another LNet net reached from A through ROUTERS router
# daemons; mixed `ulst` load (brw write and read of 1 MiB and 4 KiB, ping from A to B, brw
# write 1 MiB and read 4 KiB from A to C through the routers), and a chaos driver that, at
# random, sets rail links down and up, black-holes rails with nftables, adds and removes LNet
# drop and delay rules (`ulnetctl fault`), kills and restarts the server daemon or a router,
# and takes a router's link down. Root only. Not part of `cargo test`: minutes by hand or in
# CI, an hour for a real soak.
#
#   sudo scripts/soak.sh [SECONDS]   (default 120; SOAK_SEED, RAILS, ROUTERS, RATE, EPOCH,
#                                     PARTITIONS)
#
# Every daemon runs PARTITIONS CPU partitions (`options libcfs cpu_npartitions=N`, 2 by
# default): an I/O thread and a TCP peer table per partition, each peer's connections on its
# partition's thread, so the chaos also hits connections that hash to different threads.
#
# The routed side: A's tcp2 NI 10.78.0.1 and router K's 10.78.0.1K share bridge brr, router K's
# tcp3 NI 10.79.0.1K and C's 10.79.0.100 share bridge brc (bridges in their own namespace).
# ROUTERS=0 leaves it out.
#
# Rail 1 is never broken: the console (10.77.1.3@tcp, in node A's namespace) drives both nodes
# over it. Load runs in epochs of EPOCH seconds, each its own lst session; the chaos acts during
# the epoch and the rails are repaired before it ends. Checked throughout, and the run fails on
# the first violation:
#   * no panic: no daemon log says "panicked", no daemon exited unless the driver killed it;
#   * no hang: each daemon answers `ulnetctl net show` within 10 s after every action, and
#     `ulst stop` returns within selftest's RPC expiry (64 s) plus 30 s, so every RPC completed
#     or failed within its deadline;
#   * progress: RPCs complete at the end of every epoch without a drop rule or restart;
#   * memory: each daemon's RSS, once the load has stopped, within 2x its idle RSS.
# Each epoch also reports the error nodes `ulst show_error` counts: RPCs whose small request,
# reply or 4 KiB bulk was in a dying rail's socket buffer are lost as in the kernel and fail
# at selftest's 64 s expiry (docs/decisions/0008-fast-failover.md), so errors are expected
# after a link down or black hole and are not a failure here. That no PUT is delivered twice
# is checked exactly where it can be, by the engine's harness (`engine/testing/`, dedupe).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DURATION=${1:-120}
SEED=${SOAK_SEED:-$$}
RAILS=${RAILS:-3}
ROUTERS=${ROUTERS:-2}
RATE=${RATE:-200mbit}
EPOCH=${EPOCH:-30}
PARTITIONS=${PARTITIONS:-2}
PORT=7988
BIN="${SOAK_BIN:-$ROOT/target/release}"
[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (network namespaces)" >&2; exit 2; }
for tool in ip tc nft python3; do
    command -v "$tool" >/dev/null || { echo "soak.sh: needs $tool" >&2; exit 2; }
done
if [ -z "${SOAK_BIN:-}" ]; then
    cargo build --release -q -p ulnetd -p ulnetctl -p ulnet-selftest --manifest-path "$ROOT/Cargo.toml"
fi
# glibc raises its mmap threshold each time a large block is freed, after which 1 MiB bulk
# buffers come from the heap and stay in the process when freed (RSS 20 MiB after a load that
# leaves 11 MiB with the threshold fixed; BENCHMARKS.md, "Findings"). Fixed here, as a
# deployment would in ulnetd's environment, so that the memory check sees what ulnet keeps.
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-131072}
RANDOM=$SEED
WORK="$(mktemp -d /tmp/soak.XXXXXX)"
NS_A=ulsoak-a
NS_B=ulsoak-b
NS_C=ulsoak-c
NS_SW=ulsoak-sw
ROUTER_NODES=$(for k in $(seq "$ROUTERS"); do printf 'r%s ' "$k"; done)
NODES="a b"
if [ "$ROUTERS" -gt 0 ]; then NODES="a b c $ROUTER_NODES"; fi
declare -A PID
log() { echo "soak: $(date +%T) $*" >&2; }
fail() {
    log "FAILED (seed $SEED): $*"
    for node in $NODES; do
        echo "--- last lines of node $node's log" >&2
        tail -n 20 "$WORK/$node.log" >&2 || true
    done
    exit 1
}

cleanup() {
    ip netns exec "$NS_A" env ULST_SOCKET="$WORK/ulst.sock" "$BIN/ulst" end_session \
        >/dev/null 2>&1 || true
    for node in $NODES; do [ -n "${PID[$node]:-}" ] && kill "${PID[$node]}" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for ns in "$NS_A" "$NS_B" "$NS_C" "$NS_SW" $(for r in $ROUTER_NODES; do echo "ulsoak-$r"; done); do
        ip netns del "$ns" 2>/dev/null || true
    done
    [ -n "${KEEP:-}" ] && echo "soak: logs kept in $WORK" >&2 || rm -rf "$WORK"
}
trap cleanup EXIT

# --- fabric ------------------------------------------------------------------------------
ip netns del "$NS_A" 2>/dev/null || true
ip netns del "$NS_B" 2>/dev/null || true
ip netns add "$NS_A"
ip netns add "$NS_B"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
for rail in $(seq "$RAILS"); do
    ip link add "sa$rail" netns "$NS_A" type veth peer "sb$rail" netns "$NS_B"
    ip -n "$NS_A" addr add "10.77.$rail.1/24" dev "sa$rail"
    ip -n "$NS_B" addr add "10.77.$rail.2/24" dev "sb$rail"
    for end in "$NS_A sa$rail" "$NS_B sb$rail"; do
        set -- $end
        ip -n "$1" link set "$2" up
        tc -n "$1" qdisc add dev "$2" root tbf rate "$RATE" burst 256kb latency 50ms
    done
done
ip -n "$NS_A" addr add 10.77.1.3/24 dev sa1

# The routed side: a veth from NS to bridge BRIDGE in the switch namespace, limited to RATE.
attach() { # ns name bridge address/len port
    ip link add "$2" netns "$1" type veth peer "$5" netns "$NS_SW"
    ip -n "$NS_SW" link set "$5" master "$3"
    ip -n "$NS_SW" link set "$5" up
    ip -n "$1" addr add "$4" dev "$2"
    ip -n "$1" link set "$2" up
    tc -n "$1" qdisc add dev "$2" root tbf rate "$RATE" burst 256kb latency 50ms
}
if [ "$ROUTERS" -gt 0 ]; then
    for ns in "$NS_SW" "$NS_C" $(for r in $ROUTER_NODES; do echo "ulsoak-$r"; done); do
        ip netns del "$ns" 2>/dev/null || true
        ip netns add "$ns"
        ip -n "$ns" link set lo up
    done
    for bridge in brr brc; do
        ip -n "$NS_SW" link add "$bridge" type bridge
        ip -n "$NS_SW" link set "$bridge" up
    done
    attach "$NS_A" sar brr 10.78.0.1/24 pa
    ip -n "$NS_A" addr add 10.78.0.3/24 dev sar
    attach "$NS_C" eth0 brc 10.79.0.100/24 pc
    for k in $(seq "$ROUTERS"); do
        attach "ulsoak-r$k" eth0 brr "10.78.0.1$k/24" "pr${k}a"
        attach "ulsoak-r$k" eth1 brc "10.79.0.1$k/24" "pr${k}c"
    done
fi
GATEWAYS_TCP2="10.78.0.[11-1$ROUTERS]@tcp2"
GATEWAYS_TCP3="10.79.0.[11-1$ROUTERS]@tcp3"

ns_of() {
    case $1 in a) echo "$NS_A" ;; b) echo "$NS_B" ;; c) echo "$NS_C" ;; *) echo "ulsoak-$1" ;; esac
}
host_of() { [ "$1" = a ] && echo 1 || echo 2; }

# A net item with one NI, and a route item.
net_item() { printf '    - net type: %s\n      local NI(s):\n        - nid: %s\n' "$1" "$2"; }
route_item() { printf '    - net: %s\n      gateway: %s\n' "$1" "$2"; }

start_node() { # a|b|c|rK
    local node=$1 host
    {
        printf 'global:\n    accept_port: %s\n    accept: all\nnet:\n' "$PORT"
        case $node in
            a|b)
                host=$(host_of "$node")
                printf '    - net type: tcp\n      local NI(s):\n'
                for rail in $(seq "$RAILS"); do printf '        - nid: 10.77.%s.%s@tcp\n' "$rail" "$host"; done
                if [ "$node" = a ] && [ "$ROUTERS" -gt 0 ]; then
                    net_item tcp2 10.78.0.1@tcp2
                    printf 'route:\n'; route_item tcp3 "$GATEWAYS_TCP2"
                fi ;;
            c)
                net_item tcp3 10.79.0.100@tcp3
                printf 'route:\n'; route_item tcp2 "$GATEWAYS_TCP3" ;;
            r*)
                net_item tcp2 "10.78.0.1${node#r}@tcp2"
                net_item tcp3 "10.79.0.1${node#r}@tcp3"
                printf 'routing:\n    enable: 1\n' ;;
        esac
    } >"$WORK/$node.yaml"
    echo "options libcfs cpu_npartitions=$PARTITIONS" >"$WORK/$node.modprobe"
    ip netns exec "$(ns_of "$node")" "$BIN/ulnetd" --config "$WORK/$node.yaml" \
        --modprobe "$WORK/$node.modprobe" --socket "$WORK/$node.ctl" >>"$WORK/$node.log" 2>&1 &
    PID[$node]=$!
    for _ in $(seq 100); do
        [ -S "$WORK/$node.ctl" ] && ctl "$node" net show >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    fail "node $node did not come up"
}

ctl() { # node args...: ulnetctl on the node's socket, 10 s at most
    local node=$1; shift
    timeout 10 ip netns exec "$(ns_of "$node")" "$BIN/ulnetctl" --socket="$WORK/$node.ctl" "$@"
}

# The console in A's namespace: on tcp only, or (with routers) a node of its own on tcp and
# tcp2 with a route to tcp3 (`ulst --config`).
if [ "$ROUTERS" -gt 0 ]; then
    {
        printf 'global:\n    accept_port: %s\n    accept: all\nnet:\n' "$PORT"
        net_item tcp 10.77.1.3@tcp
        net_item tcp2 10.78.0.3@tcp2
        printf 'route:\n'; route_item tcp3 "$GATEWAYS_TCP2"
    } >"$WORK/console.yaml"
    CONSOLE="ULST_CONFIG=$WORK/console.yaml"
else
    CONSOLE=ULST_NID=10.77.1.3@tcp
fi
ulst() { # args...: ulst in A's namespace, without a time limit
    ip netns exec "$NS_A" env ULST_SOCKET="$WORK/ulst.sock" "$CONSOLE" ULNETD="$BIN/ulnetd" \
        ULST_PORT=$PORT LST_SESSION=$$ "$BIN/ulst" "$@"
}
lst() { ulst "$@"; }

# Ends the session; its console server exits with it: wait until its socket is gone, so the
# next command starts a new server rather than reaching the dying one.
end_session() {
    lst end_session >/dev/null 2>&1 || true
    for _ in $(seq 200); do [ -e "$WORK/ulst.sock" ] || return 0; sleep 0.05; done
}

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/${PID[$1]}/status"; }

check_alive() { # what: every daemon alive, answering, and no panic logged
    for node in $NODES; do
        kill -0 "${PID[$node]}" 2>/dev/null || fail "node $node exited after: $1"
        ctl "$node" net show >/dev/null || fail "node $node did not answer after: $1"
    done
    for node in $NODES; do
        if grep -q panicked "$WORK/$node.log"; then fail "a panic in node $node after: $1"; fi
    done
}

# --- chaos -------------------------------------------------------------------------------
FAULTS=0
for node in $ROUTER_NODES; do start_node "$node"; done
for node in $NODES; do case $node in r*) ;; *) start_node "$node" ;; esac; done
if ctl a fault drop show >/dev/null 2>&1; then FAULTS=1; else log "no 'ulnetctl fault': drop and delay rules skipped"; fi
# Idle size: the nodes with their peers and connections up (a short light session), no load.
warm_up() {
    lst new_session --timeout 600 warmup >/dev/null
    lst add_group c 10.77.1.1@tcp >/dev/null
    lst add_group s 10.77.1.2@tcp >/dev/null
    lst add_batch warm >/dev/null
    lst add_test --batch warm --loop 100 --concurrency 1 --from c --to s ping >/dev/null
    if [ "$ROUTERS" -gt 0 ]; then
        lst add_group r 10.79.0.100@tcp3 >/dev/null
        lst add_test --batch warm --loop 100 --concurrency 1 --from c --to r ping >/dev/null
    fi
    lst run warm >/dev/null
    sleep 3
    lst stop warm >/dev/null
    end_session
    sleep 2
}
warm_up
declare -A IDLE
for node in $NODES; do IDLE[$node]=$(rss_kib "$node"); done
log "seed $SEED, $RAILS rails and $ROUTERS routers at $RATE, idle RSS (KiB):$(for node in $NODES; do printf ' %s %s' "$node" "${IDLE[$node]}"; done)"

# A restarted daemon's idle RSS: the larger of its own, read before it has served anything, and
# the warmed-up one of the daemon it replaces (the same binary and configuration), so that a
# node which then serves sessions is held to what a node that has served one holds idle.
restarted_idle() { # node
    local fresh
    fresh=$(rss_kib "$1")
    [ "$fresh" -gt "${IDLE[$1]}" ] && IDLE[$1]=$fresh
    return 0
}

# One chaos action against a broken rail (2..RAILS) or a node; repaired before it returns.
# Sets DIRTY when the epoch may legitimately see RPC errors (a drop rule, a restart).
chaos() {
    local rail=$((2 + RANDOM % (RAILS - 1))) hold=$((1 + RANDOM % 4)) action
    local router=$((1 + RANDOM % (ROUTERS > 0 ? ROUTERS : 1)))
    action=$((RANDOM % (ROUTERS > 0 ? 7 : 5)))
    case $action in
        0)
            log "rail $rail: link down for ${hold}s"
            ip -n "$NS_A" link set "sa$rail" down
            sleep "$hold"; check_alive "rail $rail down"
            ip -n "$NS_A" link set "sa$rail" up ;;
        1)
            log "rail $rail: black hole for ${hold}s"
            printf 'table inet soak {\n chain input { type filter hook input priority 0; iifname "sb%s" drop; }\n chain output { type filter hook output priority 0; oifname "sb%s" drop; }\n}\n' \
                "$rail" "$rail" >"$WORK/hole.nft"
            ip netns exec "$NS_B" nft -f "$WORK/hole.nft"
            sleep "$hold"; check_alive "black hole on rail $rail"
            ip netns exec "$NS_B" nft delete table inet soak ;;
        2)
            [ "$FAULTS" = 1 ] || return 0
            log "drop rule 1 in 20 for ${hold}s"
            ctl a fault drop add -s '*@tcp' -d '*@tcp' -r 20 >/dev/null || fail "fault drop add"
            DIRTY=1
            sleep "$hold"; check_alive "drop rule"
            ctl a fault drop del -a >/dev/null || fail "fault drop del" ;;
        3)
            [ "$FAULTS" = 1 ] || return 0
            log "delay rule 1 in 10 by 1 s for ${hold}s"
            ctl b fault delay add -s '*@tcp' -d '*@tcp' -r 10 -l 1 >/dev/null \
                || fail "fault delay add"
            sleep "$hold"; check_alive "delay rule"
            ctl b fault delay del -a >/dev/null || fail "fault delay del" ;;
        4)
            # Rarely: a restart costs the epoch's session.
            [ $((RANDOM % 4)) = 0 ] || return 0
            log "node b: SIGKILL and restart"
            kill -9 "${PID[b]}"; wait "${PID[b]}" 2>/dev/null || true
            DIRTY=1
            start_node b
            sleep 1
            restarted_idle b ;;
        5)
            # Rarely: RPCs inside the router when it dies are lost (LNet delivers to the
            # next hop), so the epoch may see errors.
            [ $((RANDOM % 3)) = 0 ] || return 0
            log "router $router: SIGKILL, restart after ${hold}s"
            kill -9 "${PID[r$router]}"; wait "${PID[r$router]}" 2>/dev/null || true
            DIRTY=1
            sleep "$hold"
            start_node "r$router"
            restarted_idle "r$router" ;;
        6)
            log "router $router: tcp3 link down for ${hold}s"
            ip -n "ulsoak-r$router" link set eth1 down
            DIRTY=1
            sleep "$hold"; check_alive "router $router link down"
            ip -n "ulsoak-r$router" link set eth1 up ;;
    esac
    check_alive "action $action"
}

# --- epochs ------------------------------------------------------------------------------
END=$((SECONDS + DURATION))
epoch=0
while [ "$SECONDS" -lt "$END" ]; do
    epoch=$((epoch + 1))
    DIRTY=0
    lst new_session --timeout 600 "soak$epoch" >/dev/null
    lst add_group c 10.77.1.1@tcp >/dev/null
    lst add_group s 10.77.1.2@tcp >/dev/null
    lst add_batch load >/dev/null
    lst add_test --batch load --loop 100000000 --concurrency 8 --from c --to s brw write size=1M check=full >/dev/null
    lst add_test --batch load --loop 100000000 --concurrency 8 --from c --to s brw read size=1M check=full >/dev/null
    lst add_test --batch load --loop 100000000 --concurrency 8 --from c --to s brw write size=4k check=full >/dev/null
    lst add_test --batch load --loop 100000000 --concurrency 8 --from c --to s ping >/dev/null
    if [ "$ROUTERS" -gt 0 ]; then
        lst add_group r 10.79.0.100@tcp3 >/dev/null
        lst add_test --batch load --loop 100000000 --concurrency 4 --from c --to r brw write size=1M check=full >/dev/null
        lst add_test --batch load --loop 100000000 --concurrency 4 --from c --to r brw read size=4k check=full >/dev/null
    fi
    lst run load >/dev/null
    epoch_end=$((SECONDS + EPOCH))
    while [ "$SECONDS" -lt "$epoch_end" ] && [ "$SECONDS" -lt "$END" ]; do
        sleep $((1 + RANDOM % 3))
        chaos
    done
    rate=$(lst --json stat --delay 2 --count 1 c 2>/dev/null | tail -1 \
        | python3 -c "import json,sys; print(json.load(sys.stdin)['rpc_rate']['write']['avg'])" \
        2>/dev/null || echo 0)
    started=$SECONDS
    timeout 94 ip netns exec "$NS_A" env ULST_SOCKET="$WORK/ulst.sock" "$CONSOLE" \
        ULNETD="$BIN/ulnetd" ULST_PORT=$PORT LST_SESSION=$$ "$BIN/ulst" stop load >/dev/null \
        || fail "epoch $epoch: 'ulst stop' did not return within 94 s"
    groups="c s"
    if [ "$ROUTERS" -gt 0 ]; then groups="c s r"; fi
    errors=$(lst show_error $groups 2>&1 | grep -o 'Total [0-9]* error nodes in [csr]' | tr '\n' ' ' || true)
    log "epoch $epoch: client RPC rate ${rate}/s at its end, stopped in $((SECONDS - started)) s; $errors"
    python3 -c "import sys; sys.exit(0 if float('$rate') > 0 else 1)" \
        || [ "$DIRTY" = 1 ] || fail "epoch $epoch: no RPC completed at its end"
    end_session
    check_alive "epoch $epoch"
done

# --- memory after the load ---------------------------------------------------------------
sleep 10
for node in $NODES; do
    idle=${IDLE[$node]}
    now=$(rss_kib "$node")
    log "node $node: RSS ${now} KiB after the load (idle ${idle} KiB)"
    [ "$now" -le $((2 * idle)) ] || fail "node $node holds ${now} KiB, over 2x its idle ${idle} KiB"
done
log "passed: $epoch epochs in ${DURATION}s, seed $SEED"
