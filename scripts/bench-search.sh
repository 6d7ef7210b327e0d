#!/usr/bin/env bash
# Benchmark of `gjcfs search` next to `rg -l` and `grep -rl` over the raw session files, in
# the same hyperfine runs.
#
# Builds the release binary and writes under target/bench/search/:
#   - a store of SESSIONS sessions, each `gjcfs generate --size SESSION_SIZE --seed N`
#     (distinct seeds, so no two sessions are alike), with RARE planted in 5 of them by
#     `gjcfs append` (a user message);
#   - one `gjcfs generate --entries BIG_ENTRIES --seed 1` session, alone in its directory.
# For each store it measures: the first build of the index (a fresh --index directory) in
# MB/s of transcript and the index size; `gjcfs search` after one entry appended to one
# session (the incremental update and the search); and warm queries for a rare word, a
# common word, a phrase and a substring, each next to `rg -l` and `grep -rl` for the same
# text. The index directories are removed at the end; the stores are kept for reruns
# (delete target/bench/search to drop them).
#
# Environment: RUNS (default 10), WARMUP (default 2), SESSIONS (default 10000),
# SESSION_SIZE (default 54KB), BIG_ENTRIES (default 100000); BEFORE=PATH (optional) is
# another gjcfs binary (an older build) measured in the same runs, with its own index.
set -euo pipefail

RUNS=${RUNS:-10}
WARMUP=${WARMUP:-2}
SESSIONS=${SESSIONS:-10000}
SESSION_SIZE=${SESSION_SIZE:-54KB}
BIG_ENTRIES=${BIG_ENTRIES:-100000}
RARE=quokkaborealis
COMMON=buffer
PHRASE='the session'
SUBSTRING=okkabore

cd "$(dirname "$0")/.."
OUT=target/bench/search
mkdir -p "$OUT"
die() {
	echo "bench-search: error: $*" >&2
	exit 1
}
for tool in hyperfine rg; do
	if ! command -v $tool >/dev/null; then
		apt-get update -qq && apt-get install -y -qq hyperfine ripgrep >/dev/null ||
			die "$tool is missing and could not be installed"
	fi
done
cargo build --release --quiet || die "cargo build --release failed"
BIN=$PWD/target/release/gjcfs
BEFORE=${BEFORE:-}
[ -z "$BEFORE" ] || [ -x "$BEFORE" ] || die "BEFORE=$BEFORE is not an executable"
IDX=$(mktemp -d /tmp/gjcfs-bench-search.XXXXXX)
AGENT=$IDX/agent
trap 'rm -rf "$IDX"' EXIT

echo "== machine"
echo "nproc: $(nproc)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

STORE=$OUT/store-$SESSIONS
if [ ! -d "$STORE" ]; then
	mkdir -p "$STORE.tmp"
	seq 1 "$SESSIONS" | xargs -P "$(nproc)" -I{} \
		"$BIN" generate "$STORE.tmp/s{}.jsonl" --size "$SESSION_SIZE" --seed {} 2>/dev/null
	for n in 17 1234 4321 7777 9999; do
		[ -f "$STORE.tmp/s$n.jsonl" ] || continue
		echo "{\"role\":\"user\",\"content\":\"Where did the $RARE parser fail?\"}" |
			"$BIN" append "$STORE.tmp/s$n.jsonl" --agent-dir "$AGENT" 2>/dev/null
	done
	mv "$STORE.tmp" "$STORE"
fi
BIG=$OUT/big-$BIG_ENTRIES
if [ ! -d "$BIG" ]; then
	mkdir -p "$BIG.tmp"
	"$BIN" generate "$BIG.tmp/big.jsonl" --entries "$BIG_ENTRIES" --seed 1 2>/dev/null
	echo "{\"role\":\"user\",\"content\":\"Where did the $RARE parser fail?\"}" |
		"$BIN" append "$BIG.tmp/big.jsonl" --agent-dir "$AGENT" 2>/dev/null
	mv "$BIG.tmp" "$BIG"
fi

declare -a SUMMARY=()
for dir in "$STORE" "$BIG"; do
	name=$(basename "$dir")
	bytes=$(du -sb "$dir" | cut -f1)
	files=$(find "$dir" -name '*.jsonl' | wc -l)
	index=$IDX/index-$name
	search() { "$BIN" search --session-dir "$dir" --index "$index" --limit 20 "$@"; }
	echo
	echo "== $name: $files sessions, $bytes bytes"
	cat "$dir"/*.jsonl >/dev/null
	start=$(date +%s%N)
	search "$RARE" >/dev/null
	end=$(date +%s%N)
	build_ms=$(((end - start) / 1000000))
	size=$(du -sb "$index" | cut -f1)
	rate=$(awk -v b="$bytes" -v ms="$build_ms" 'BEGIN { printf "%.1f", b / 1e6 / (ms / 1000) }')
	ratio=$(awk -v s="$size" -v b="$bytes" 'BEGIN { printf "%.2f", s / b }')
	echo "first build and search: $build_ms ms = $rate MB/s; index $size bytes = ${ratio}x"
	SUMMARY+=("$name: build $build_ms ms = $rate MB/s (target >= 50), index ${ratio}x the transcripts")
	declare -a OLD=()
	if [ -n "$BEFORE" ]; then
		old_index=$IDX/before-$name
		start=$(date +%s%N)
		"$BEFORE" search --session-dir "$dir" --index "$old_index" "$RARE" >/dev/null
		end=$(date +%s%N)
		old_ms=$(((end - start) / 1000000))
		old_rate=$(awk -v b="$bytes" -v ms="$old_ms" 'BEGIN { printf "%.1f", b / 1e6 / (ms / 1000) }')
		old_ratio=$(awk -v s="$(du -sb "$old_index" | cut -f1)" -v b="$bytes" 'BEGIN { printf "%.2f", s / b }')
		echo "before: first build and search: $old_ms ms = $old_rate MB/s; index ${old_ratio}x"
		SUMMARY+=("$name: before: build $old_ms ms = $old_rate MB/s, index ${old_ratio}x the transcripts")
		old_search="$BEFORE search --session-dir $dir --index $old_index"
		OLD=(-n "before rare" "$old_search $RARE"
			-n "before common" "$old_search $COMMON"
			-n "before phrase" "$old_search '\"$PHRASE\"'"
			-n "before substring" "$old_search --substring $SUBSTRING")
	fi
	[ "$(search "$RARE" | wc -l)" -ge 1 ] || die "$RARE not found in $name"

	# One entry appended to one session, then a search (update and query).
	victim=$(find "$dir" -name '*.jsonl' | sort | sed -n 1p)
	total=0
	old_total=0
	for i in 1 2 3 4 5; do
		echo "{\"role\":\"user\",\"content\":\"appended number $i\"}" |
			"$BIN" append "$victim" --agent-dir "$AGENT" 2>/dev/null
		start=$(date +%s%N)
		search "appended" >/dev/null
		end=$(date +%s%N)
		total=$((total + (end - start) / 1000))
		if [ -n "$BEFORE" ]; then
			start=$(date +%s%N)
			$old_search "appended" >/dev/null
			end=$(date +%s%N)
			old_total=$((old_total + (end - start) / 1000))
		fi
	done
	append_ms=$(awk -v t="$total" 'BEGIN { printf "%.1f", t / 5 / 1000 }')
	echo "search after one appended entry (5 rounds, mean): $append_ms ms"
	line="$name: search after one appended entry $append_ms ms (target < 50 ms, process start and a stat per file included)"
	if [ -n "$BEFORE" ]; then
		line="$line; before: $(awk -v t="$old_total" 'BEGIN { printf "%.1f", t / 5 / 1000 }') ms"
	fi
	SUMMARY+=("$line")

	csv=$IDX/$name.csv
	hyperfine --style basic -N --warmup "$WARMUP" --runs "$RUNS" --export-csv "$csv" -i \
		-n "search rare" "$BIN search --session-dir $dir --index $index $RARE" \
		-n "rg -l rare" "rg -l $RARE $dir" \
		-n "grep -rl rare" "grep -rl $RARE $dir" \
		-n "search common" "$BIN search --session-dir $dir --index $index $COMMON" \
		-n "rg -l common" "rg -l $COMMON $dir" \
		-n "grep -rl common" "grep -rl $COMMON $dir" \
		-n "search phrase" "$BIN search --session-dir $dir --index $index '\"$PHRASE\"'" \
		-n "rg -l phrase" "rg -l '$PHRASE' $dir" \
		-n "grep -rl phrase" "grep -rl '$PHRASE' $dir" \
		-n "search substring" "$BIN search --session-dir $dir --index $index --substring $SUBSTRING" \
		-n "rg -l substring" "rg -il $SUBSTRING $dir" \
		-n "grep -rl substring" "grep -ril $SUBSTRING $dir" \
		"${OLD[@]}" >/dev/null || die "hyperfine failed"
	for q in rare common phrase substring; do
		s=$(awk -F, -v n="search $q" '$1 == n { print $2 * 1000 }' "$csv")
		med=$(awk -F, -v n="search $q" '$1 == n { print $4 * 1000 }' "$csv")
		r=$(awk -F, -v n="rg -l $q" '$1 == n { print $2 * 1000 }' "$csv")
		g=$(awk -F, -v n="grep -rl $q" '$1 == n { print $2 * 1000 }' "$csv")
		line=$(awk -v s="$s" -v m="$med" -v r="$r" -v g="$g" -v q="$q" -v n="$name" 'BEGIN {
			printf "%s: %s query: gjcfs search mean %.1f ms (median %.1f), rg -l %.1f ms (%.1fx), grep -rl %.1f ms (%.1fx)",
				n, q, s, m, r, r / s, g, g / s }')
		if [ -n "$BEFORE" ]; then
			b=$(awk -F, -v n="before $q" '$1 == n { print $4 * 1000 }' "$csv")
			line="$line; before: median $b ms"
		fi
		echo "$line"
		SUMMARY+=("$line")
	done
done

echo
echo "== summary (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s\n' "${SUMMARY[@]}"
