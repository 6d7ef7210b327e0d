#!/usr/bin/env bash
# The mount's start: the first `ls MP/sessions/` after a fresh `gjcfs mount`, which lists
# the store. A mount starts from the listing `gjcfs ls` saved (and saves it after its first
# scan), so the first listing reads only the files that changed since.
#
# Measures, on a store of SESSIONS generated sessions (default 50,000; the store of
# scripts/bench-mcp.sh is reused when it is there), COLD times each:
#   - the first `ls MP/sessions/ | wc -l` of a fresh mount whose cache directory holds the
#     saved listing (XDG_CACHE_HOME under OUT, filled by one `gjcfs ls --all` first);
#   - the same with an empty cache directory (what a first mount of a store costs);
#   - `gjcfs ls --all` from the saved listing, beside them;
#   - with BASE=path/to/another/gjcfs, the same first listings by that binary, in the same run.
# Environment: SESSIONS, COLD (default 3), BASE.
set -euo pipefail

SESSIONS=${SESSIONS:-50000}
COLD=${COLD:-3}
BASE=${BASE:-}

cd "$(dirname "$0")/.."
BENCH=bench-mount-start
OUT=target/bench/mount-start
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh
trap 'unmount; rm -rf "$XDG_CACHE_HOME"' EXIT
export XDG_CACHE_HOME=$PWD/$OUT/cache
OWN=$BIN

STORE=target/bench/mcp/store-$SESSIONS
if [ ! -d "$STORE" ]; then
	STORE=$OUT/store-$SESSIONS
	[ -d "$STORE" ] || generate_sessions "$STORE" "$SESSIONS" 8K
fi

# first_listing BIN LABEL [fresh]: COLD fresh mounts, each timed to its first listing.
first_listing() {
	local label=$2 fresh=${3:-} n start end count
	BIN=$1
	for n in $(seq "$COLD"); do
		[ -n "$fresh" ] && rm -rf "$XDG_CACHE_HOME"
		mkdir -p "$XDG_CACHE_HOME"
		mount_store "$STORE" --read-only
		start=$(date +%s.%N)
		count=$(ls "$MP/sessions/" | wc -l)
		end=$(date +%s.%N)
		unmount_at "$MP"
		echo "$label, run $n: $count sessions listed in $(echo "$end - $start" | bc) s"
	done
	BIN=$OWN
}

mkdir -p "$XDG_CACHE_HOME"
"$BIN" ls --all --session-dir "$STORE" >/dev/null
echo "gjcfs ls --all from the saved listing:"
/usr/bin/time -f "  %e s, %M KiB" "$BIN" ls --all --session-dir "$STORE" >/dev/null
first_listing "$BIN" "mount, saved listing"
[ -n "$BASE" ] && first_listing "$BASE" "BASE mount, saved listing"
first_listing "$BIN" "mount, empty cache" fresh
[ -n "$BASE" ] && first_listing "$BASE" "BASE mount, empty cache" fresh
echo done
