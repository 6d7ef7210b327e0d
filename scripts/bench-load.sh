#!/usr/bin/env bash
# Load benchmark of the gjcfs CLI on generated 100 MB sessions (v5 and legacy v1).
#
# Builds the release binary, generates the corpora under target/bench/, times each file with
# hyperfine next to raw-file baselines (cat, wc -l) in the same run, and measures peak
# resident memory with /usr/bin/time -v. Prints a summary and exits non-zero if any step
# fails or a target is missed:
#   - `gjcfs context FILE` (load + replay + migrate + index, then build and print the
#     context) at >= 200 MB/s;
#   - peak RSS of `gjcfs entries FILE` (load, then write every record back) <= 2x the file.
# `gjcfs entries` is timed as well; it also serializes the whole session, so its rate is
# lower than a pure load. The pure library load is measured by `cargo bench` (benches/).
#
# Environment: SIZE (default 100MB), SEED (default 1), RUNS (default 10), WARMUP (default 2).
set -euo pipefail

SIZE=${SIZE:-100MB}
SEED=${SEED:-1}
RUNS=${RUNS:-10}
WARMUP=${WARMUP:-2}
MIN_MBPS=200
MAX_RSS_RATIO=2

cd "$(dirname "$0")/.."
OUT=target/bench
BIN=target/release/gjcfs
mkdir -p "$OUT"

die() {
	echo "bench-load: error: $*" >&2
	exit 1
}

if ! command -v hyperfine >/dev/null; then
	echo "bench-load: installing hyperfine" >&2
	apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null ||
		die "hyperfine is missing and could not be installed"
fi
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is missing"

cargo build --release --quiet || die "cargo build --release failed"

echo "== machine"
echo "nproc: $(nproc)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

declare -a SUMMARY=()
FAILED=0

record() {
	SUMMARY+=("$1")
}

check() { # check LABEL OK(0|1) TEXT
	if [ "$2" = 1 ]; then
		record "PASS  $1: $3"
	else
		record "FAIL  $1: $3"
		FAILED=1
	fi
}

for version in 5 1; do
	file="$OUT/v$version-$SIZE.jsonl"
	echo
	echo "== v$version corpus: $file"
	"$BIN" generate "$file" --size "$SIZE" --seed "$SEED" --version "$version" ||
		die "generating $file failed"
	bytes=$(stat -c %s "$file")
	if [ "$version" = 5 ]; then
		"$BIN" entries "$file" | cmp -s - "$file" ||
			die "gjcfs entries does not reproduce the v5 corpus byte for byte"
		echo "round trip: gjcfs entries reproduces the file byte for byte"
	fi

	csv="$OUT/hyperfine-v$version.csv"
	hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$csv" \
		-n cat "cat $file > /dev/null" \
		-n "wc -l" "wc -l $file" \
		-n "gjcfs context" "$BIN context $file > /dev/null" \
		-n "gjcfs entries" "$BIN entries $file > /dev/null" ||
		die "hyperfine failed on $file"

	while IFS=, read -r name mean stddev _rest; do
		[ "$name" = command ] && continue
		rate=$(awk -v b="$bytes" -v t="$mean" 'BEGIN { printf "%.0f", b / t / 1e6 }')
		line=$(awk -v n="$name" -v t="$mean" -v s="$stddev" -v r="$rate" \
			'BEGIN { printf "%-14s %8.1f ms ± %5.1f ms  %6d MB/s", n, t * 1000, s * 1000, r }')
		if [ "$name" = "gjcfs context" ]; then
			check "v$version load rate (gjcfs context)" "$((rate >= MIN_MBPS))" \
				"$line (target >= $MIN_MBPS MB/s)"
		else
			record "      v$version $line"
		fi
	done <"$csv"

	timefile="$OUT/time-v$version.txt"
	/usr/bin/time -v "$BIN" entries "$file" >/dev/null 2>"$timefile" ||
		die "gjcfs entries failed under /usr/bin/time"
	rss_kb=$(awk -F: '/Maximum resident set size/ { gsub(/ /, "", $2); print $2 }' "$timefile")
	[ -n "$rss_kb" ] || die "no peak RSS in $timefile"
	ratio=$(awk -v r="$rss_kb" -v b="$bytes" 'BEGIN { printf "%.2f", r * 1024 / b }')
	ok=$(awk -v x="$ratio" -v m="$MAX_RSS_RATIO" 'BEGIN { print (x <= m) ? 1 : 0 }')
	check "v$version peak RSS (gjcfs entries)" "$ok" \
		"$((rss_kb / 1024)) MiB for a $((bytes / 1000000)) MB file = ${ratio}x (target <= ${MAX_RSS_RATIO}x)"
done

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== summary (MB = 10^6 bytes; mean ± stddev of $RUNS runs)"
for line in "${SUMMARY[@]}"; do
	echo "$line"
done
if [ "$FAILED" != 0 ]; then
	echo "bench-load: some targets were missed" >&2
	exit 1
fi
echo "bench-load: all targets met"
