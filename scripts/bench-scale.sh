#!/usr/bin/env bash
# How the mount's search and listing and `gjcfs search` scale with the number of sessions,
# next to the raw files (`find -ls`, `rg -l`) in the same hyperfine runs.
#
# For each N in SIZES it writes target/bench/scale/store-N: N sessions of `gjcfs generate
# --size SESSION_SIZE --seed K` (K = 1..N, so no two are alike), RARE planted in five of
# them by `gjcfs append`; the stores are kept for reruns. It mounts each store (the mount's
# search index under a cache directory of the run, removed at the end) and times, warm:
#   - `ls MP/search/RARE/` next to `gjcfs search RARE` and `rg -l RARE DIR`;
#   - `ls -l MP/sessions/` next to `find DIR -ls`.
# Every command runs after `sleep 1.1`, which outlasts the mount's one-second cache of
# answers, so each `ls` of the search directory searches anew. The peak memory of one
# `gjcfs search` comes from /usr/bin/time -v.
#
# Environment: SIZES (default "1000 10000"), SESSION_SIZE (default 8KB), RUNS (default 5),
# WARMUP (default 1).
set -euo pipefail

SIZES=${SIZES:-1000 10000}
SESSION_SIZE=${SESSION_SIZE:-8KB}
RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
RARE=quokkaborealis

cd "$(dirname "$0")/.."
BENCH=bench-scale
OUT=target/bench/scale
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh
command -v rg >/dev/null || { apt-get update -qq && apt-get install -y -qq ripgrep >/dev/null; } ||
	die "rg is missing and could not be installed"
cargo build --release --quiet || die "cargo build --release failed"
RUN=$(mktemp -d /tmp/gjcfs-bench-scale.XXXXXX)
trap 'unmount; rm -rf "$RUN"' EXIT
export XDG_CACHE_HOME=$RUN/cache

store_of() { # store_of N -> the store's directory, written when missing
	local dir=$OUT/store-$1
	if [ ! -d "$dir" ]; then
		rm -rf "$dir.tmp"
		mkdir -p "$dir.tmp"
		seq 1 "$1" | xargs -P "$(nproc)" -I{} \
			"$BIN" generate "$dir.tmp/s{}.jsonl" --size "$SESSION_SIZE" --seed {} 2>/dev/null
		for k in 17 234 432 777 999; do
			echo "{\"role\":\"user\",\"content\":\"Where did the $RARE parser fail?\"}" |
				"$BIN" append "$dir.tmp/s$k.jsonl" --agent-dir "$RUN/agent" >/dev/null 2>&1
		done
		mv "$dir.tmp" "$dir"
	fi
	echo "$dir"
}

for n in $SIZES; do
	dir=$(store_of "$n")
	echo
	echo "== $n sessions, $(du -sb "$dir" | cut -f1) bytes"
	index=$RUN/index-$n
	search="$BIN search --session-dir $dir --index $index --limit 100 $RARE"
	$search >/dev/null
	hits=$($search | wc -l)
	mount_store "$dir"
	shown=$(ls "$MP/search/$RARE/" | grep -c -v '^results.jsonl$')
	echo "gjcfs search: $hits lines; the mount's search/$RARE/: $shown hits"
	[ "$shown" -ge 5 ] || die "the mount found $shown of the 5 planted sessions"
	csv=$RUN/search-$n.csv
	hyperfine --style basic --runs "$RUNS" --warmup "$WARMUP" --prepare 'sleep 1.1' \
		--export-csv "$csv" \
		-n "gjcfs search" "$search" \
		-n "rg -l" "rg -l $RARE $dir" \
		-n "ls MP/search/WORD/" "ls $MP/search/$RARE/" \
		-n "find -ls" "find $dir -ls" \
		-n "ls -l MP/sessions" "ls -l $MP/sessions/"
	s=$(mean_of "$csv" "gjcfs search")
	check "$n: ls MP/search/WORD/ within 2x gjcfs search" \
		"$(at_most "$(mean_of "$csv" "ls MP/search/WORD/")" "$(awk -v s="$s" 'BEGIN { print 2 * s }')")" \
		"$(ms "$(mean_of "$csv" "ls MP/search/WORD/")") ms vs $(ms "$s") ms"
	check "$n: ls -l MP/sessions within 3x find -ls" \
		"$(at_most "$(mean_of "$csv" "ls -l MP/sessions")" "$(awk -v f="$(mean_of "$csv" "find -ls")" 'BEGIN { print 3 * f }')")" \
		"$(ms "$(mean_of "$csv" "ls -l MP/sessions")") ms vs $(ms "$(mean_of "$csv" "find -ls")") ms"
	check "$n: warm gjcfs search at least 10x faster than rg -l" \
		"$(at_most "$(awk -v s="$s" 'BEGIN { print 10 * s }')" "$(mean_of "$csv" "rg -l")")" \
		"$(ms "$s") ms vs $(ms "$(mean_of "$csv" "rg -l")") ms"
	/usr/bin/time -v $search 2>"$RUN/time" >/dev/null
	echo "gjcfs search peak memory: $(awk -F': ' '/Maximum resident/ { print $2 }' "$RUN/time") KB"
	unmount_at "$MP"
done

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
