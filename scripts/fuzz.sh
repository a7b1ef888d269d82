#!/usr/bin/env bash
# Runs redcar's cargo-fuzz targets (fuzz/) for FUZZ_SECONDS each, starting from the committed
# seed corpus in fuzz/corpus/<target>.
#
#   scripts/fuzz.sh                    10 s per target (what `make test` runs)
#   FUZZ_SECONDS=600 scripts/fuzz.sh   a long run (`make fuzz`)
#
# Needs the nightly toolchain (libFuzzer's sanitizer flags). cargo-fuzz is used from PATH, else
# installed from crates.io into target/tools (nothing outside the project). Without a nightly
# toolchain it says so and exits 0: the same invariants also run in `cargo test` over a fixed
# sample of inputs (protocol::fuzz, router::fuzz).
# It says what it does at each phase: installing cargo-fuzz (first run, ~2 min), building the
# instrumented targets with cargo's own progress lines (first run ~3-7 min), then each run.
# A crash leaves its input in fuzz/artifacts/<target>/ and fails this script.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SECONDS_EACH=${FUZZ_SECONDS:-10}
TARGETS=(resp_parse command_plan)

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: skipped: no nightly toolchain (rustup toolchain install nightly)" >&2
    exit 0
fi
export PATH="$PWD/target/tools/bin:$PATH"
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz into target/tools (cargo install --locked; first run only, ~2 min)" >&2
    cargo install --locked --root target/tools cargo-fuzz
fi
# The build is most of the step's time the first time: its progress shows here, not hidden
# behind the run's filtered output. `cargo fuzz run` below reuses it (same flags).
echo "fuzz: building the fuzz targets (${TARGETS[*]}) with nightly and the address sanitizer (first run ~3-7 min)" >&2
cargo +nightly fuzz build --fuzz-dir fuzz
for target in "${TARGETS[@]}"; do
    echo "fuzz: $target for ${SECONDS_EACH}s"
    # A scratch copy of the seeds, so what a run discovers does not end up in the repository.
    corpus=$(mktemp -d)
    trap 'rm -rf "$corpus"' EXIT
    cp fuzz/corpus/"$target"/* "$corpus"/
    cargo +nightly fuzz run --fuzz-dir fuzz "$target" "$corpus" -- \
        -max_total_time="$SECONDS_EACH" -print_final_stats=1 2>&1 |
        grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|==[0-9]+==|SUMMARY|Done )|panicked|ERROR' || true
    # grep's status is not the fuzzer's: check the pipeline's first command.
    if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
        echo "fuzz: $target FAILED (input saved in fuzz/artifacts/$target/)" >&2
        exit 1
    fi
    rm -rf "$corpus"
done
echo "fuzz: ok"
