#!/usr/bin/env bash
# Runs every cargo-fuzz target for FUZZ_SECONDS each (default 15). Works on the stable toolchain:
# RUSTC_BOOTSTRAP lets cargo-fuzz pass its -Z flags; the crates forbid `unsafe`, so we fuzz without
# a sanitizer (-s none), which also avoids needing nightly's sanitizer runtimes.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${FUZZ_SECONDS:-15}"
export RUSTC_BOOTSTRAP=1
targets=$(cargo fuzz list)
if [ -z "$targets" ]; then
    echo "fuzz: no targets defined"; exit 0
fi
cargo fuzz build -s none -O
for target in $targets; do
    echo "fuzz: $target for ${seconds}s"
    mkdir -p "corpus/$target"
    # Checked-in seeds (fuzz/seeds/<target>/) are a second, read-only corpus directory; new
    # inputs go to the first.
    corpora=("corpus/$target")
    if [ -d "seeds/$target" ]; then corpora+=("seeds/$target"); fi
    cargo fuzz run -s none -O "$target" "${corpora[@]}" -- \
        -max_total_time="$seconds" -rss_limit_mb=1024 -max_len=4096 -print_final_stats=0 2>&1 |
        grep -E '^(Done|==|SUMMARY|thread|panicked|ERROR)' || true
    # cargo fuzz exits non-zero on a crash; pipefail is off for grep, so check artifacts instead.
    if compgen -G "artifacts/$target/*" >/dev/null; then
        echo "fuzz: $target found a crash:"; ls "artifacts/$target"; exit 1
    fi
done
echo "fuzz: all targets clean"
