# Shared by scripts/ab-selftest.sh and scripts/bench-selftest.sh; sourced, not run.

# stop_selftest_nodes PORT: ends the console session (its server exits with it), kills the
# nodes listed in PIDS, then waits until the console's socket (ULST_SOCKET) is gone and PORT
# is free, so the next console can listen there and does not reuse the old server.
stop_selftest_nodes() {
    [ -n "${BIN:-}" ] && "$BIN/ulst" end_session >/dev/null 2>&1 || true
    for pid in "${PIDS[@]:-}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    PIDS=()
    for _ in $(seq 200); do
        [ -e "$ULST_SOCKET" ] || ss -Htln "sport = :$1" | grep -q . || return 0
        sleep 0.05
    done
}
