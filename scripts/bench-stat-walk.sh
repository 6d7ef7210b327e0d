#!/usr/bin/env bash
# Benchmark of walks that only stat (du, find -ls, ls -lR) over the whole mount, next to
# the same walks over the raw store and over a tmpfs copy of the mounted tree, in the same
# run. Target: within 3x the tmpfs copy, which takes the sizes of views rendered before
# without rendering them again.
#
# The store is SESSIONS sessions of SESSION_SIZE (default 2,000 of 200KB, kept under
# target/bench/stat-walk/ for reruns). Each walk is timed RUNS times (default 1), each
# time on a fresh mount, in three states of the server's cache directory:
# - "first": empty (nothing of the store was ever rendered: every view is rendered);
# - "again": the same mount walked a second time (what it kept of each session);
# - "restarted": a new mount over the cache directory the first one left (the saved sizes).
# With BASE=/path/to/an/older/gjcfs, that binary's "first" and "restarted" walks are
# timed in the same run. The server's peak resident memory is printed after each walk.
set -euo pipefail

BENCH=bench-stat-walk
RUNS=${RUNS:-1}
SESSIONS=${SESSIONS:-2000}
SESSION_SIZE=${SESSION_SIZE:-200KB}

cd "$(dirname "$0")/.."
OUT=target/bench/stat-walk
# shellcheck source=scripts/lib-bench.sh
source scripts/lib-bench.sh

store_of "$SESSIONS" "$SESSION_SIZE"
CACHE=$(cd "$OUT" && pwd)/cache
# Where every server of this script keeps its caches (the saved listing and view sizes).
export XDG_CACHE_HOME=$CACHE
COPY=/dev/shm/gjcfs-bench-stat-walk
cleanup() {
	unmount
	rm -rf "$COPY"
}
trap cleanup EXIT
echo "store: $(find "$STORE" -name '*.jsonl' | wc -l) sessions, $(du -sh "$STORE" | cut -f1)"

WALKS=("du -s --apparent-size ." "find . -ls" "ls -lR .")
# walk NAME DIR -> seconds
walk() {
	local start end
	start=$(date +%s%N)
	# shellcheck disable=SC2086 # the walk's own words
	(cd "$2" && $1 >/dev/null)
	end=$(date +%s%N)
	echo "scale=3; ($end - $start) / 1000000000" | bc
}
peak() { # the peak resident memory of MP's server, in MiB
	awk '/VmHWM/ {printf "%d", $2 / 1024}' "/proc/${SERVERS[$MP]}/status"
}
serve() { # serve BINARY [fresh]: a new mount of the store at MP, with an empty cache if fresh
	unmount_at "$MP"
	[ "${2:-}" = fresh ] && rm -rf "$CACHE"
	local own=$BIN
	BIN=$1
	mount_store "$STORE" --read-only
	BIN=$own
	ls "$MP/sessions" >/dev/null
}

echo "== the tmpfs copy of the mounted tree"
rm -rf "$COPY"
serve "$BIN" fresh
mkdir -p "$COPY"
cp -r "$MP/sessions" "$COPY/"
echo "copy: $(find "$COPY" -type f | wc -l) files, $(du -sh --apparent-size "$COPY" | cut -f1)"

declare -A TOTAL=()
add() { TOTAL[$1]=$(echo "${TOTAL[$1]:-0} + $2" | bc); }
for run in $(seq "$RUNS"); do
	for w in "${WALKS[@]}"; do
		add "$w|store" "$(walk "$w" "$STORE")"
		add "$w|copy" "$(walk "$w" "$COPY/sessions")"
		for bin in "$BIN" ${BASE:+"$BASE"}; do
			label=now
			[ "$bin" = "$BIN" ] || label=base
			serve "$bin" fresh
			add "$w|$label first" "$(walk "$w" "$MP/sessions")"
			echo "run $run, $w, $label: first walk, server peak $(peak) MiB"
			if [ "$label" = now ]; then
				add "$w|$label again" "$(walk "$w" "$MP/sessions")"
			fi
			serve "$bin"
			add "$w|$label restarted" "$(walk "$w" "$MP/sessions")"
			echo "run $run, $w, $label: restarted walk, server peak $(peak) MiB"
		done
	done
done

echo "== mean seconds of $RUNS runs"
for w in "${WALKS[@]}"; do
	line="$w:"
	for state in store copy "now first" "now again" "now restarted" ${BASE:+"base first"} ${BASE:+"base restarted"}; do
		line="$line $state $(echo "scale=3; ${TOTAL[$w|$state]} / $RUNS" | bc)"
	done
	echo "$line"
	copy=$(echo "scale=3; ${TOTAL[$w|copy]} / $RUNS" | bc)
	restarted=$(echo "scale=3; ${TOTAL[$w|now restarted]} / $RUNS" | bc)
	check "$w, restarted" "$(at_most "$(ratio "$restarted" "$copy")" 3)" \
		"$(ratio "$restarted" "$copy")x the tmpfs copy (target: at most 3x)"
done

echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
