#!/usr/bin/env bash
# How search, listings and usage scale with the number of sessions, next to the raw files
# (`find -ls`, `rg -l`) in the same hyperfine runs.
#
# For each N in SIZES it writes target/bench/scale/store-N: N sessions of `gjcfs generate
# --size SESSION_SIZE --seed K` (K = 1..N, so no two are alike), RARE planted in five of
# them by `gjcfs append`; the stores are kept for reruns. Each store gets a cache directory
# of the run (its search index, saved listing and usage; removed at the end), and:
#   1. `gjcfs search RARE` with no mount: the index checked against the store (a stat a
#      file), next to `rg -l RARE`;
#   2. the store mounted (the mount's watcher follows the index the first search built):
#      `gjcfs search RARE` trusting the index, `ls MP/search/RARE/`, `ls -l MP/sessions/`,
#      next to `find DIR -ls`;
#   3. `gjcfs ls --all` and `gjcfs usage`, warm (their saved listing and usage), next to
#      `find DIR -ls`;
#   4. the peak memory of each command (/usr/bin/time -v) and of the mount's server, and
#      the index's size next to the store's.
# Every command runs after `sleep 1.1`, which outlasts the mount's one-second cache of
# answers and attributes, so each `ls` searches and lists anew.
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
RUN=$(mktemp -d /tmp/gjcfs-bench-scale.XXXXXX)
trap 'unmount; rm -rf "$RUN"' EXIT
export XDG_CACHE_HOME=$RUN/cache

store_of() { # store_of N -> the store's directory, written when missing
	local dir=$OUT/store-$1
	if [ ! -d "$dir" ]; then
		rm -rf "$dir.tmp"
		generate_sessions "$dir.tmp" "$1" "$SESSION_SIZE"
		for k in 17 234 432 777 999; do
			echo "{\"role\":\"user\",\"content\":\"Where did the $RARE parser fail?\"}" |
				"$BIN" append "$dir.tmp/s$k.jsonl" --agent-dir "$RUN/agent" >/dev/null 2>&1
		done
		mv "$dir.tmp" "$dir"
	fi
	(cd "$dir" && pwd)
}

peak_kib() { # peak_kib COMMAND... -> the command's peak resident memory (KiB)
	/usr/bin/time -v "$@" 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ { print $2 }'
}

claimed() { # claimed -> whether a watcher holds the claim of the run's index
	local claim
	claim=$(find "$XDG_CACHE_HOME/gjcfs/search" -name search.sqlite.watch 2>/dev/null | head -1)
	[ -n "$claim" ] && ! flock -n -s "$claim" true
}

for n in $SIZES; do
	dir=$(store_of "$n")
	echo
	echo "== $n sessions, $(du -sb "$dir" | cut -f1) bytes"
	rm -rf "$XDG_CACHE_HOME"
	search="$BIN search --session-dir $dir --limit 100 $RARE"
	build=$( { /usr/bin/time -f %e $search >/dev/null; } 2>&1)
	hits=$($search | wc -l)
	[ "$hits" -ge 5 ] || die "gjcfs search found $hits of the 5 planted sessions"
	index=$(du -cb "$XDG_CACHE_HOME"/gjcfs/search/*/search.sqlite* | tail -1 | cut -f1)
	echo "index built in $build s: $index bytes, $(ratio "$index" "$(du -sb "$dir" | cut -f1)")x the store"
	"$BIN" ls --session-dir "$dir" >/dev/null
	"$BIN" usage --session-dir "$dir" >/dev/null

	csv=$RUN/checked-$n.csv
	hyperfine -N --style basic --runs "$RUNS" --warmup "$WARMUP" --export-csv "$csv" \
		-n "gjcfs search (checked)" "$search" \
		-n "rg -l" "rg -l $RARE $dir"
	checked=$(mean_of "$csv" "gjcfs search (checked)")
	rg_l=$(mean_of "$csv" "rg -l")

	mount_store "$dir"
	for _ in $(seq 100); do claimed && break; sleep 0.1; done
	claimed || die "the mount did not take the index's claim"
	shown=$(ls "$MP/search/$RARE/" | grep -c -v '^results.jsonl$')
	[ "$shown" -ge 5 ] || die "the mount found $shown of the 5 planted sessions"
	csv=$RUN/mounted-$n.csv
	hyperfine -N --style basic --runs "$RUNS" --warmup "$WARMUP" --prepare 'sleep 1.1' \
		--export-csv "$csv" \
		-n "gjcfs search (trusted)" "$search" \
		-n "ls MP/search/WORD/" "ls $MP/search/$RARE/" \
		-n "find -ls" "find $dir -ls" \
		-n "ls -l MP/sessions" "ls -l $MP/sessions/" \
		-n "gjcfs ls --all" "$BIN ls --session-dir $dir" \
		-n "gjcfs usage" "$BIN usage --session-dir $dir"
	trusted=$(mean_of "$csv" "gjcfs search (trusted)")
	find_ls=$(mean_of "$csv" "find -ls")
	within() { # within LABEL NAME FACTOR BASE BASE-NAME
		local t
		t=$(mean_of "$csv" "$2")
		check "$n: $1" "$(at_most "$t" "$(awk -v b="$4" -v f="$3" 'BEGIN { print f * b }')")" \
			"$(ms "$t") ms vs $(ms "$4") ms $5 ($(ratio "$t" "$4")x)"
	}
	within "ls MP/search/WORD/ within 2x gjcfs search" "ls MP/search/WORD/" 2 "$trusted" "gjcfs search"
	within "ls -l MP/sessions within 3x find -ls" "ls -l MP/sessions" 3 "$find_ls" "find -ls"
	within "gjcfs ls --all within 3x find -ls" "gjcfs ls --all" 3 "$find_ls" "find -ls"
	within "gjcfs usage within 3x find -ls" "gjcfs usage" 3 "$find_ls" "find -ls"
	check "$n: trusted gjcfs search < 20 ms" "$(at_most "$trusted" 0.020)" "$(ms "$trusted") ms"
	check "$n: trusted gjcfs search at least 10x faster than rg -l" \
		"$(at_most "$(awk -v s="$trusted" 'BEGIN { print 10 * s }')" "$rg_l")" \
		"$(ms "$trusted") ms vs $(ms "$rg_l") ms ($(ratio "$rg_l" "$trusted")x; checked: $(ms "$checked") ms)"
	check "$n: index at most 0.5x the store" \
		"$(at_most "$index" "$(awk -v s="$(du -sb "$dir" | cut -f1)" 'BEGIN { print s / 2 }')")" \
		"$index bytes"
	echo "peak memory (KiB): search $(peak_kib $search), ls --all $(peak_kib "$BIN" ls --session-dir "$dir"), usage $(peak_kib "$BIN" usage --session-dir "$dir"), mount server $(awk '/VmHWM/ { print $2 }' "/proc/${SERVERS[$MP]}/status")"
	unmount_at "$MP"
done

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
