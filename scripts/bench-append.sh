#!/usr/bin/env bash
# Benchmark of appends through a mount: what one append costs as the session grows.
#
# Builds the release binary and makes, under target/bench/append/, sessions of 30, 30,000
# and 300,000 small entries (a generated start, then `gjcfs append` of short messages) and
# a 90 MB session of about 300 entries. Each is mounted with `gjcfs mount MP --session-dir
# DIR` and timed with hyperfine:
#   (a) one writer: APPENDS lines, each its own `printf … >> entries/new` (an open, a write
#       and a close per line, as a shell script appends), in appends/s;
#   (b) a storm: 8 such writers at once on the same session, in appends/s altogether.
# Target: an append costs the same at 30 entries and at 300,000 (the rate at 300,000 within
# 2x of the rate at 30). With BEFORE=PATH (another gjcfs binary) the measurements are made
# for it too, in the same hyperfine run, so both are compared under the same load — but for
# the 300,000-entry session, where a binary whose appends cost the entry count would take
# many minutes (BEFORE_ALL=1 measures it there too).
#
# Environment: RUNS (default 5), APPENDS (default 200), BEFORE (optional), BEFORE_ALL.
set -euo pipefail

RUNS=${RUNS:-5}
APPENDS=${APPENDS:-200}
BEFORE=${BEFORE:-}

cd "$(dirname "$0")/.."
BENCH=bench-append
OUT=target/bench/append
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh
[ -z "$BEFORE" ] || [ -x "$BEFORE" ] || die "BEFORE=$BEFORE is not an executable"

# The stores are made once and copied for each binary before it appends (the appends
# stay in the copy: "after" says how many entries it held when the runs were done).
#
# DIR holding one session of about ENTRIES small entries: a 30-entry generated start, the
# rest short messages appended by `gjcfs append`.
small_entries_store() { # small_entries_store DIR ENTRIES
	[ -d "$1" ] && return 0
	mkdir -p "$1.tmp"
	"$BIN" generate "$1.tmp/s.jsonl" --entries 30 --seed 3 2>/dev/null
	if [ "$2" -gt 30 ]; then
		awk -v n="$(($2 - 30))" 'BEGIN { for (i = 0; i < n; i++) printf "{\"role\":\"user\",\"content\":\"line %d\"}\n", i }' |
			"$BIN" append "$1.tmp/s.jsonl" 2>/dev/null
	fi
	mv "$1.tmp" "$1"
}
small_entries_store "$OUT/e30" 30
small_entries_store "$OUT/e30000" 30000
small_entries_store "$OUT/e300000" 300000
if [ ! -d "$OUT/big90" ]; then
	mkdir -p "$OUT/big90.tmp"
	"$BIN" generate "$OUT/big90.tmp/s.jsonl" --size 90MB --seed 5 2>/dev/null
	mv "$OUT/big90.tmp" "$OUT/big90"
fi

# One writer's script: APPENDS lines to NEW, a printf (open, write, close) each.
writer() { # writer NEW TAG
	printf 'for i in $(seq %d); do printf '"'"'{"role":"user","content":"%s %%s"}\\n'"'"' "$i" >> %s; done' \
		"$APPENDS" "$2" "$1"
}
storm() { # storm NEW: 8 writers at once
	local w script=""
	for w in 1 2 3 4 5 6 7 8; do script+="( $(writer "$1" "w$w") ) & "; done
	printf '%s wait' "$script"
}

declare -A RATE=()
# measure LABEL DIR: mounts DIR with each binary and times (a) and (b).
measure() {
	local label=$1 dir=$2 csv="$OUT/$1.csv" bins=("new:$BIN") cmds=() entry name bin mp new
	if [ -n "$BEFORE" ] && { [ "$label" != e300000 ] || [ -n "${BEFORE_ALL:-}" ]; }; then
		bins+=("before:$BEFORE")
	fi
	local entries
	entries=$(($(wc -l <"$dir/s.jsonl") - 1))
	for entry in "${bins[@]}"; do
		name=${entry%%:*} bin=${entry#*:} mp="$PWD/$OUT/mnt-$name"
		# Each binary appends to a fresh copy of the store, so both start alike.
		rm -rf "$OUT/work-$name"
		cp -a "$dir" "$OUT/work-$name"
		BIN=$bin mount_at "$mp" "$OUT/work-$name"
		new=$(echo "$mp"/sessions/*/entries/new)
		# Loaded before timing: the first access reads the whole session.
		ls "$(dirname "$new")" >/dev/null
		cmds+=(-n "$name one writer" "$(writer "$new" "$name")")
		cmds+=(-n "$name 8 writers" "$(storm "$new")")
	done
	hyperfine --runs "$RUNS" --warmup 1 --export-csv "$csv" "${cmds[@]}" >"$OUT/$label.log" 2>&1 ||
		die "hyperfine failed: $(tail -5 "$OUT/$label.log")"
	for entry in "${bins[@]}"; do
		name=${entry%%:*}
		unmount_at "$PWD/$OUT/mnt-$name"
		local one eight
		one=$(mean_of "$csv" "$name one writer")
		eight=$(mean_of "$csv" "$name 8 writers")
		RATE[$name,$label,1]=$(awk -v n="$APPENDS" -v t="$one" 'BEGIN { printf "%.0f", n / t }')
		RATE[$name,$label,8]=$(awk -v n="$APPENDS" -v t="$eight" 'BEGIN { printf "%.0f", 8 * n / t }')
		printf '%-8s %-8s %7d entries (%7d after) %9d bytes: one writer %5s appends/s, 8 writers %5s appends/s\n' \
			"$name" "$label" "$entries" "$(($(wc -l <"$OUT/work-$name/s.jsonl") - 1))" \
			"$(stat -c %s "$dir/s.jsonl")" "${RATE[$name,$label,1]}" "${RATE[$name,$label,8]}"
	done
}

echo "== appends through the mount ($APPENDS per writer, $RUNS runs)"
for store in e30 e30000 e300000 big90; do
	measure "$store" "$OUT/$store"
done

echo
slowest=$(awk -v a="${RATE[new,e300000,1]}" -v b="${RATE[new,e30,1]}" 'BEGIN { printf "%.2f", b / a }')
check "append cost" "$(at_most "$slowest" 2)" \
	"one writer at 300,000 entries: ${RATE[new,e300000,1]}/s against ${RATE[new,e30,1]}/s at 30 (${slowest}x, target <= 2x)"
slowest=$(awk -v a="${RATE[new,e300000,8]}" -v b="${RATE[new,e30,8]}" 'BEGIN { printf "%.2f", b / a }')
check "storm cost" "$(at_most "$slowest" 2)" \
	"8 writers at 300,000 entries: ${RATE[new,e300000,8]}/s against ${RATE[new,e30,8]}/s at 30 (${slowest}x, target <= 2x)"
echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$FAILED"
