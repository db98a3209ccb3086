#!/usr/bin/env bash
# Fuzzes the parsers with libFuzzer: builds settee-fuzz with -sanitize=fuzzer,address (scratch path .build-fuzz,
# release) and runs every target (or the ones named) for N seconds each, starting from a copy of Fuzz/corpus/<target>.
#
#   scripts/fuzz.sh [seconds-per-target] [target…]      default 15 s; targets: json sqlpp revid revisions multipart since revtree
#
# New corpus entries and crash artifacts go to a temporary directory, never into the repository. Exits non-zero
# if any target crashed, leaked, timed out or violated an invariant, and prints the input that did it; replay it
# with `swift run settee-fuzz replay <target> <file>` (or a test in Tests/), then add it to Fuzz/corpus/<target>.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-15}"
[[ $# -gt 0 ]] && shift
all_targets=(json sqlpp revid revisions multipart since revtree mango blip)
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=("${all_targets[@]}")

scratch=.build-fuzz
flags=(--scratch-path "$scratch" -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -DSETTEE_FUZZING)
start=$(date +%s)
swift build "${flags[@]}" --product settee-fuzz
echo "fuzz build: $(( $(date +%s) - start )) s"
bin="$(swift build "${flags[@]}" --show-bin-path)/settee-fuzz"

work="$(mktemp -d "${TMPDIR:-/tmp}/settee-fuzz.XXXXXX")"
failed=()
for target in "${targets[@]}"; do
    [[ -d "Fuzz/corpus/$target" ]] || { echo "no corpus for target '$target'" >&2; exit 2; }
    dir="$work/$target"
    mkdir -p "$dir/corpus" "$dir/artifacts"
    cp -R "Fuzz/corpus/$target/." "$dir/corpus/"
    status=0
    SETTEE_FUZZ_TARGET="$target" SWIFT_BACKTRACE=enable=no ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" \
        LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$PWD/scripts/lsan-suppressions.txt:print_suppressions=0}" "$bin" \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$dir/artifacts/" "$dir/corpus" >"$dir/log" 2>&1 || status=$?
    stats="$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$dir/log" | tail -1 || true)"
    runs="$(grep -E '^stat::number_of_executed_units' "$dir/log" | awk '{print $2}' || true)"
    rate="$(grep -E '^stat::average_exec_per_sec' "$dir/log" | awk '{print $2}' || true)"
    echo "$target: exit $status, ${runs:-?} runs, ${rate:-?} exec/s, corpus $(ls "$dir/corpus" | wc -l) files; last: $stats"
    artifacts=("$dir"/artifacts/*)
    if [[ $status -ne 0 || -e "${artifacts[0]}" ]]; then
        failed+=("$target")
        echo "---- $target FAILED; log: $dir/log" >&2
        grep -E 'ERROR|Fatal error|invariant|SUMMARY|Test unit written|artifact' "$dir/log" | head -20 >&2 || true
        for artifact in "${artifacts[@]}"; do [[ -e "$artifact" ]] && echo "crashing input: $artifact" >&2; done
    fi
done

if [[ ${#failed[@]} -gt 0 ]]; then
    echo "fuzzing found problems in: ${failed[*]} (inputs and logs kept in $work)" >&2
    exit 1
fi
rm -rf "$work"
echo "fuzzing: no findings in ${targets[*]} (${seconds} s each)"
