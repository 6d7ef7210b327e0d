#!/usr/bin/env bash
# Every session's `context.json` read through a fresh mount, twice, by this build and by
# another gjcfs binary (an older main), in turn: the first pass (each session's directory
# listed by `find`, then every context loaded and rendered), the second (what the kernel
# and the server kept) and a third after 1.1 s (once what the kernel keeps briefly, one
# second, is gone). Writable and read-only mounts, ROUNDS times each, alternating the
# builds; prints each pass, the server's peak memory (VmHWM) and the means. Every mount is
# undone on exit.
#
# Usage: BEFORE=PATH scripts/bench-first-read.sh
# Environment: BEFORE (the other binary, required), STORE (default the 2,000 sessions of
# scripts/bench-compare.sh, generated when missing), ROUNDS (default 3).
set -euo pipefail

ROUNDS=${ROUNDS:-3}
cd "$(dirname "$0")/.."
BENCH=bench-first-read
OUT=$PWD/target/bench/first-read
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh
[ -x "${BEFORE:-}" ] || die "BEFORE=PATH to the other gjcfs binary is required"
BEFORE=$(cd "$(dirname "$BEFORE")" && pwd)/$(basename "$BEFORE")
STORE=${STORE:-$PWD/target/bench/compare/store-2000}
if [ ! -d "$STORE" ]; then
	echo "== generating 2000 sessions of 54KB"
	generate_sessions "$STORE.tmp" 2000 54KB
	mv "$STORE.tmp" "$STORE"
fi
RUN=$(mktemp -d /tmp/gjcfs-bench-first-read.XXXXXX)
trap 'unmount; rm -rf "$RUN"' EXIT
NOW=$BIN

contexts() { find "$1/sessions" -mindepth 2 -maxdepth 2 -name context.json -print0 | xargs -0 cat >/dev/null; }
seconds() { # seconds COMMAND... -> how long it took
	local start
	start=$(date +%s.%N)
	"$@"
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'
}

for round in $(seq "$ROUNDS"); do
	for who in before now; do
		for mode in writable read-only; do
			BIN=$NOW
			[ "$who" = before ] && BIN=$BEFORE
			option=()
			[ "$mode" = read-only ] && option=(--read-only)
			export XDG_CACHE_HOME=$RUN/cache-$who-$mode-$round
			mount_store "$STORE" "${option[@]}"
			first=$(seconds contexts "$MP")
			second=$(seconds contexts "$MP")
			sleep 1.1
			later=$(seconds contexts "$MP")
			peak=$(awk '/VmHWM/ { print int($2 / 1024) }' "/proc/${SERVERS[$MP]}/status")
			unmount_at "$MP"
			echo "round $round $who $mode: first pass $first s, second $second s, later $later s, server peak $peak MiB" |
				tee -a "$RUN/passes"
		done
	done
done
echo "== means over $ROUNDS rounds (load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
awk '{ key = $3 " " $4; first[key] += $7; second[key] += $10; later[key] += $13; peak[key] += $17; n[key]++ }
	END { for (k in n) printf "%-22s first pass %.2f s, second %.2f s, later %.2f s, server peak %d MiB\n",
		k, first[k] / n[k], second[k] / n[k], later[k] / n[k], peak[k] / n[k] }' \
	"$RUN/passes" | sort
