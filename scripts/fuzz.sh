#!/bin/sh
# Runs each cargo-fuzz target for the given number of seconds (default 60).
#
# The corpus of each target (fuzz/corpus/<target>, git-ignored) is seeded from the test
# fixtures: whole files for parse_session, single lines and expected-output files for
# json_roundtrip, the saved inputs for search_text and vfs_ops. cargo-fuzz needs nightly
# compiler flags; RUSTC_BOOTSTRAP=1 lets a stable toolchain accept them. Crashing inputs
# land in fuzz/artifacts/<target>/, and the script fails.
#
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]
# FUZZ_MAX_LEN sets libFuzzer's -max_len (default 65536; the real transcripts among the seeds
# are cut to it).
set -eu

seconds="${1:-60}"
max_len="${FUZZ_MAX_LEN:-65536}"
[ $# -gt 0 ] && shift
targets="${*:-parse_session json_roundtrip search_text vfs_ops}"

root="$(cd "$(dirname "$0")/.." && pwd)"
fixtures="$root/tests/fixtures"
corpus="$root/fuzz/corpus"

mkdir -p "$corpus/parse_session" "$corpus/json_roundtrip" "$corpus/search_text" "$corpus/vfs_ops"
for f in "$fixtures"/*.jsonl "$fixtures"/real/*.jsonl; do
    cp "$f" "$corpus/parse_session/$(basename "$f")"
done
n=0
for f in "$fixtures"/*.jsonl "$fixtures"/*.json; do
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        printf '%s' "$line" > "$corpus/json_roundtrip/line-$n"
    done < "$f"
done
for f in "$fixtures"/*.json; do
    cp "$f" "$corpus/json_roundtrip/$(basename "$f")"
done
cp "$root"/tests/fuzz-regressions/search_text/* "$corpus/search_text/"
cp "$root"/tests/fuzz-regressions/vfs_ops/* "$corpus/vfs_ops/"

cd "$root"
for target in $targets; do
    echo "== $target: ${seconds}s"
    RUSTC_BOOTSTRAP=1 cargo fuzz run "$target" -- \
        -max_total_time="$seconds" -dict="$root/fuzz/session.dict" -max_len="$max_len"
done
