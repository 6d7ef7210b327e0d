#!/usr/bin/env bash
# Reading through the mount again, and loading one session, next to the raw files and the
# original engine, in the same runs:
#   1. `grep -r` of an absent word over the mount of SESSIONS sessions of SESSION_SIZE
#      (written and read-only mounts), next to the same tree copied to tmpfs (/dev/shm);
#      warm, after a first pass; the requests one pass costs each server (/proc/PID/io
#      syscr: a read of /dev/fuse a request);
#   2. every session's `context.json` read twice through a fresh mount: the first pass
#      (every session loaded and rendered) and the second (what the kernel and the server
#      kept), next to `cat` of the same files on tmpfs; the server's peak memory;
#   3. `gjcfs context FILE` of one session of each of LOAD_SIZES, next to `cat FILE` in the
#      same hyperfine run, and with GJC_PEER the original engine's in-process load of the
#      same file (`gjc-peer time`: loadEntriesFromFile, migrate, buildSessionContext;
#      median of its runs, engine start-up excluded).
# Stores are kept under target/bench/reread/ for reruns; every mount is undone on exit.
#
# Environment: STORE (a store to use instead), SESSIONS (default 2000), SESSION_SIZE
# (default 54KB), LOAD_SIZES (default
# "20MB 100MB 500MB"), RUNS (default 5), WARMUP (default 1), GJC_PEER (optional).
set -euo pipefail

SESSIONS=${SESSIONS:-2000}
SESSION_SIZE=${SESSION_SIZE:-54KB}
LOAD_SIZES=${LOAD_SIZES:-20MB 100MB 500MB}
RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
TOKEN=GJCFS_BENCH_ABSENT_TOKEN

cd "$(dirname "$0")/.."
BENCH=bench-reread
OUT=$PWD/target/bench/reread
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh
RUN=$(mktemp -d /tmp/gjcfs-bench-reread.XXXXXX)
SHM=/dev/shm/gjcfs-bench-reread.$$
trap 'unmount; rm -rf "$RUN" "$SHM"' EXIT
export XDG_CACHE_HOME=$RUN/cache
RO=$OUT/mnt-ro

STORE=${STORE:-$OUT/store-$SESSIONS}
if [ ! -d "$STORE" ]; then
	echo "== generating $SESSIONS sessions of $SESSION_SIZE"
	generate_sessions "$STORE.tmp" "$SESSIONS" "$SESSION_SIZE"
	mv "$STORE.tmp" "$STORE"
fi
requests() { # requests MP COMMAND... -> the requests MP's server got while COMMAND ran
	local before
	before=$(server_reads "$1")
	"${@:2}" >/dev/null 2>&1 || true
	echo $(($(server_reads "$1") - before))
}

echo "== grep -r over $SESSIONS sessions"
mount_store "$STORE"
mount_at "$RO" "$STORE" --read-only
mkdir -p "$SHM"
cp -r "$RO/." "$SHM/" 2>/dev/null || true
echo "tree: $(find "$SHM" -type f | wc -l) files, $(du -sb "$SHM" | cut -f1) bytes"
grep -r "$TOKEN" "$MP" >/dev/null || true
grep -r "$TOKEN" "$RO" >/dev/null || true
hyperfine -N --style basic --runs "$RUNS" --warmup "$WARMUP" -i --export-csv "$RUN/grep.csv" \
	-n "grep -r tmpfs" "grep -r $TOKEN $SHM" \
	-n "grep -r mount" "grep -r $TOKEN $MP" \
	-n "grep -r read-only mount" "grep -r $TOKEN $RO"
tmpfs=$(mean_of "$RUN/grep.csv" "grep -r tmpfs")
for name in "grep -r mount" "grep -r read-only mount"; do
	t=$(mean_of "$RUN/grep.csv" "$name")
	check "$name within 3x tmpfs" "$(at_most "$t" "$(awk -v b="$tmpfs" 'BEGIN { print 3 * b }')")" \
		"$(ms "$t") ms vs $(ms "$tmpfs") ms ($(ratio "$t" "$tmpfs")x)"
done
echo "requests of one warm pass: mount $(requests "$MP" grep -r "$TOKEN" "$MP"), read-only $(requests "$RO" grep -r "$TOKEN" "$RO")"
unmount_at "$MP"
unmount_at "$RO"

echo "== every context.json twice, through a fresh mount"
mount_store "$STORE"
contexts() { find "$1/sessions" -mindepth 2 -maxdepth 2 -name context.json -print0 | xargs -0 cat >/dev/null; }
first=$( { /usr/bin/time -f %e bash -c "$(declare -f contexts); contexts $MP"; } 2>&1)
second=$( { /usr/bin/time -f %e bash -c "$(declare -f contexts); contexts $MP"; } 2>&1)
on_tmpfs=$( { /usr/bin/time -f %e bash -c "$(declare -f contexts); contexts $SHM"; } 2>&1)
peak=$(awk '/VmHWM/ { print $2 }' "/proc/${SERVERS[$MP]}/status")
echo "first pass $first s, second $second s, the same files on tmpfs $on_tmpfs s; server peak $peak KiB"
check "second pass of context.json near the page cache (within 3x tmpfs)" \
	"$(at_most "$second" "$(awk -v b="$on_tmpfs" 'BEGIN { print 3 * b }')")" \
	"$second s vs $on_tmpfs s"
unmount_at "$MP"

echo "== load and context of one session"
for size in $LOAD_SIZES; do
	file=$OUT/load-$size.jsonl
	[ -f "$file" ] || "$BIN" generate "$file" --size "$size" --seed 1 2>/dev/null
	hyperfine -N --style basic --runs "$RUNS" --warmup "$WARMUP" --export-csv "$RUN/load-$size.csv" \
		-n "cat" "cat $file" \
		-n "gjcfs context" "$BIN context $file" >/dev/null
	cat_s=$(mean_of "$RUN/load-$size.csv" "cat")
	ctx=$(mean_of "$RUN/load-$size.csv" "gjcfs context")
	kib=$(/usr/bin/time -v "$BIN" context "$file" 2>&1 >/dev/null | awk -F': ' '/Maximum resident/ { print $2 }')
	line="$size: gjcfs context $(ms "$ctx") ms ($kib KiB peak), cat $(ms "$cat_s") ms ($(ratio "$ctx" "$cat_s")x)"
	if [ -n "${GJC_PEER:-}" ]; then
		runs=3
		[ "$size" = 500MB ] && runs=1
		pure=$("$GJC_PEER" time "$file" --runs "$runs" 2>/dev/null | sed -n 's/.*"pure_ms_median":\([0-9.]*\).*/\1/p')
		line="$line, original pure load $(printf '%.0f' "$pure") ms ($(ratio "$pure" "$(ms "$ctx")")x gjcfs)"
	fi
	echo "$line"
	SUMMARY+=("      $line")
done

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
