#!/usr/bin/env bash
# Runs every fuzz target (fuzz/fuzz_targets) for SECONDS each: 10 by default,
# the smoke run CI makes; the documented long run uses more (fuzz/README.md).
# Each target starts from its committed corpus (fuzz/corpus/<target>, which
# the run extends) and the seeds (fuzz/seeds/<target>). Prints each target's
# executions and the total; a crash, a panic or a failed assertion fails the
# run and leaves the input in fuzz/artifacts/<target>/.
# Needs the nightly toolchain and cargo-fuzz (scripts/setup.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-10}"
targets=(answer_lines policy keyring payload http claims differential)
total=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    log="$(mktemp)"
    set +e
    cargo +nightly fuzz run --sanitizer none "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1
    status=$?
    set -e
    runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo 0)"
    if [ "$status" -ne 0 ]; then
        tail -40 "$log"
        echo "fuzz: $t FAILED after $runs executions (the input is in fuzz/artifacts/$t/)"
        exit 1
    fi
    total=$((total + runs))
    printf 'fuzz: %-13s %10d executions in %ss, 0 crashes\n' "$t" "$runs" "$seconds"
    rm -f "$log"
done
echo "fuzz: ${total} executions in all, 0 crashes"
