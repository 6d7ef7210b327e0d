#!/usr/bin/env bash
# Benchmark of `gjcfs mount` next to the raw session files, in the same hyperfine runs.
#
# Builds the release binary, generates stores under target/bench/mount/, mounts each with
# `gjcfs mount MP --session-dir DIR` in the background and measures:
#   (a) `grep -r TOKEN MP/sessions` vs `grep -r TOKEN DIR` on a ~100 MB store (target <= 3x),
#       through a mount and a read-only mount (served without file handles), and next to
#       them the mount's own tree copied to tmpfs (/dev/shm; target <= 3x) and that copy
#       served by a plain passthrough FUSE filesystem (bindfs, kernel cache on: what any
#       FUSE server costs for the same files); the requests each server gets for one grep;
#   (b) `ls -l MP/sessions/` with 10,000 sessions (target < 1 s), and the time the mount of
#       that store takes to answer (target well under 1 s);
#   (c) `cat MP/sessions/<id>/context.json` of a 100,000-entry session: cold, the first read
#       after a fresh mount (target < 0.5 s), and warm (target < 50 ms);
#   (d) 10,000 lines written to `entries/new` in one stream, in entries/s, next to
#       `gjcfs append FILE` with the same lines.
# The mount is always undone on exit (fusermount3 -u, then -uz; the server is killed).
#
# Environment: RUNS (default 10), WARMUP (default 2), COLD (cold runs, default 3),
# SESSIONS (default 10000), BIG_ENTRIES (default 100000).
set -euo pipefail

RUNS=${RUNS:-10}
WARMUP=${WARMUP:-2}
COLD=${COLD:-3}
SESSIONS=${SESSIONS:-10000}
BIG_ENTRIES=${BIG_ENTRIES:-100000}
TOKEN=GJCFS_BENCH_ABSENT_TOKEN

cd "$(dirname "$0")/.."
BENCH=bench-mount
OUT=target/bench/mount
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh

# DIR/NAME: a copy of SRC under header id number N (the id names the session).
copy_session() { # copy_session SRC NAME N DIR
	local id
	id=$(printf '00000000-0000-7000-8000-%012d' "$3")
	sed "1s/\"id\":\"[^\"]*\"/\"id\":\"$id\"/" "$1" >"$4/$2"
}

# --- stores --------------------------------------------------------------------------
GREP_DIR=$OUT/grep-store
if [ ! -d "$GREP_DIR" ]; then
	mkdir -p "$GREP_DIR.tmp"
	for seed in $(seq 1 10); do
		"$BIN" generate "$GREP_DIR.tmp/s$seed.jsonl" --size 10MB --seed "$seed" 2>/dev/null
	done
	mv "$GREP_DIR.tmp" "$GREP_DIR"
fi
LS_DIR=$OUT/ls-store-$SESSIONS
if [ ! -d "$LS_DIR" ]; then
	mkdir -p "$LS_DIR.tmp"
	"$BIN" generate "$OUT/small.jsonl" --entries 5 --seed 7 2>/dev/null
	# One sed pass writes every copy (a process per file would take minutes).
	awk -v n="$SESSIONS" -v dir="$LS_DIR.tmp" '
		{ lines[NR] = $0 }
		END {
			for (i = 1; i <= n; i++) {
				f = sprintf("%s/s%05d.jsonl", dir, i)
				h = lines[1]
				sub(/"id":"[^"]*"/, sprintf("\"id\":\"00000000-0000-7000-8000-%012d\"", i), h)
				print h > f
				for (j = 2; j <= NR; j++) print lines[j] > f
				close(f)
			}
		}' "$OUT/small.jsonl"
	mv "$LS_DIR.tmp" "$LS_DIR"
fi
BIG_DIR=$OUT/big-store-$BIG_ENTRIES
if [ ! -d "$BIG_DIR" ]; then
	mkdir -p "$BIG_DIR.tmp"
	"$BIN" generate "$BIG_DIR.tmp/big.jsonl" --entries "$BIG_ENTRIES" --seed 1 2>/dev/null
	mv "$BIG_DIR.tmp" "$BIG_DIR"
fi
grep_bytes=$(du -sb "$GREP_DIR" | cut -f1)
big_bytes=$(stat -c %s "$BIG_DIR/big.jsonl")
echo "grep store: $(ls "$GREP_DIR" | wc -l) sessions, $grep_bytes bytes"
echo "ls store: $(ls "$LS_DIR" | wc -l) sessions"
echo "big session: $BIG_ENTRIES entries, $big_bytes bytes"

# --- (a) grep -r -----------------------------------------------------------------------
echo
echo "== (a) grep -r on the ~100 MB store, through a mount and a read-only mount"
# A read-only mount serves files without handles: no request per open and close.
RO=$(cd "$OUT" && pwd)/mnt-ro
mount_store "$GREP_DIR"
mount_at "$RO" "$GREP_DIR" --read-only
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/grep.csv" -i \
	-n "grep -r raw" "grep -r $TOKEN $GREP_DIR" \
	-n "grep -r mount" "grep -r $TOKEN $MP/sessions" \
	-n "grep -r read-only mount" "grep -r $TOKEN $RO/sessions" || die "hyperfine failed (grep)"
mounted_bytes=$(find "$MP/sessions" -type f ! -name new -printf '%s\n' | awk '{ s += $1 } END { print s }')
raw=$(mean_of "$OUT/grep.csv" "grep -r raw")
mnt=$(mean_of "$OUT/grep.csv" "grep -r mount")
rom=$(mean_of "$OUT/grep.csv" "grep -r read-only mount")
ratio=$(ratio "$mnt" "$raw")
check "(a) grep -r" "$(at_most "$ratio" 3)" \
	"mount $(ms "$mnt") ms vs raw $(ms "$raw") ms = ${ratio}x (target <= 3x); read-only mount $(ms "$rom") ms = $(ratio "$rom" "$raw")x; the mount serves $mounted_bytes bytes for $grep_bytes raw"
for mp in "$MP" "$RO"; do
	before=$(server_reads "$mp")
	grep -r "$TOKEN" "$mp/sessions" >/dev/null || true
	echo "requests to the server of $mp in one warm grep -r: $(($(server_reads "$mp") - before))"
done

echo
echo "== (a) grep -r on the mount's tree copied to tmpfs, and through bindfs over that copy"
if ! command -v bindfs >/dev/null; then
	{ apt-get update -qq && apt-get install -y -qq bindfs; } >/dev/null 2>&1 ||
		die "bindfs is missing and could not be installed"
fi
BIND=$(cd "$OUT" && pwd)/bind
COPY=$(mktemp -d /dev/shm/gjcfs-bench-copy.XXXXXX)
undo_copy() {
	if grep -q " $BIND fuse" /proc/mounts; then
		fusermount3 -u "$BIND" 2>/dev/null || fusermount3 -uz "$BIND" 2>/dev/null || true
	fi
	rm -rf "$COPY"
	unmount
}
trap undo_copy EXIT
mkdir -p "$BIND"
# The files the mount shows, without its append points and symlinks.
cp -r "$MP/sessions/." "$COPY"
find "$COPY" \( -name new -o -type l \) -delete
bindfs -o kernel_cache,entry_timeout=60,attr_timeout=60 "$COPY" "$BIND"
echo "copy: $(find "$COPY" -type f | wc -l) files, $(du -sb "$COPY" | cut -f1) bytes"
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/grep-copy.csv" -i \
	-n "grep -r tmpfs copy" "grep -r $TOKEN $COPY" \
	-n "grep -r bindfs over the copy" "grep -r $TOKEN $BIND" \
	-n "grep -r mount" "grep -r $TOKEN $MP/sessions" \
	-n "grep -r read-only mount" "grep -r $TOKEN $RO/sessions" || die "hyperfine failed (grep copy)"
undo_copy
trap unmount EXIT
tmp=$(mean_of "$OUT/grep-copy.csv" "grep -r tmpfs copy")
bnd=$(mean_of "$OUT/grep-copy.csv" "grep -r bindfs over the copy")
mnt=$(mean_of "$OUT/grep-copy.csv" "grep -r mount")
rom=$(mean_of "$OUT/grep-copy.csv" "grep -r read-only mount")
ratio=$(ratio "$mnt" "$tmp")
check "(a) grep -r vs tmpfs" "$(at_most "$ratio" 3)" \
	"mount $(ms "$mnt") ms vs the same tree on tmpfs $(ms "$tmp") ms = ${ratio}x (target <= 3x); bindfs over that copy $(ms "$bnd") ms = $(ratio "$bnd" "$tmp")x"
ratio=$(ratio "$rom" "$tmp")
check "(a) grep -r vs tmpfs, read-only mount" "$(at_most "$ratio" 3)" \
	"read-only mount $(ms "$rom") ms vs the same tree on tmpfs $(ms "$tmp") ms = ${ratio}x (target <= 3x)"

# --- (b) ls -l of 10,000 sessions ----------------------------------------------------
echo
echo "== (b) ls -l of $SESSIONS sessions"
start=$(date +%s%N)
mount_store "$LS_DIR"
end=$(date +%s%N)
mount_ms=$(((end - start) / 1000000))
echo "mount until answering: $mount_ms ms"
check "(b) mount of $SESSIONS sessions" "$((mount_ms < 1000))" \
	"$mount_ms ms from start to the first answer (polled every 50 ms; target well under 1000 ms)"
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/ls.csv" \
	-n "ls -l raw" "ls -l $LS_DIR > /dev/null" \
	-n "ls -l mount" "ls -l $MP/sessions/ > /dev/null" || die "hyperfine failed (ls)"
[ "$(ls "$MP/sessions" | wc -l)" = "$SESSIONS" ] || die "the mount does not list $SESSIONS sessions"
mnt=$(mean_of "$OUT/ls.csv" "ls -l mount")
check "(b) ls -l" "$(awk -v t="$mnt" 'BEGIN { print (t < 1) ? 1 : 0 }')" \
	"$(awk -v t="$mnt" 'BEGIN { printf "%.0f", t * 1000 }') ms (raw $(awk -v t="$(mean_of "$OUT/ls.csv" "ls -l raw")" 'BEGIN { printf "%.0f", t * 1000 }') ms; target < 1000 ms)"

# --- (c) context.json of a 100,000-entry session ----------------------------------------
echo
echo "== (c) cat context.json of a $BIG_ENTRIES-entry session"
big_id=$(head -1 "$BIG_DIR/big.jsonl" | sed 's/.*"id":"\([^"]*\)".*/\1/')
# "Cold" is a fresh mount, not a cold disk: the file is read into the page cache first,
# as hyperfine's warmup does for the `gjcfs context` baseline below.
cat "$BIG_DIR/big.jsonl" >/dev/null
cold_total=0
cold_list=
for i in $(seq "$COLD"); do
	mount_store "$BIG_DIR"
	start=$(date +%s%N)
	cat "$MP/sessions/$big_id/context.json" >/dev/null
	end=$(date +%s%N)
	ms=$(((end - start) / 1000000))
	cold_list="$cold_list $ms"
	cold_total=$((cold_total + ms))
done
cold=$((cold_total / COLD))
echo "cold runs (ms):$cold_list"
check "(c) context.json cold" "$((cold < 500))" \
	"mean ${cold} ms over $COLD fresh mounts (runs:$cold_list ms; target < 500 ms)"
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/context.csv" \
	-n "cat raw file" "cat $BIG_DIR/big.jsonl > /dev/null" \
	-n "gjcfs context" "$BIN context $BIG_DIR/big.jsonl > /dev/null" \
	-n "cat context.json warm" "cat $MP/sessions/$big_id/context.json > /dev/null" ||
	die "hyperfine failed (context)"
warm=$(mean_of "$OUT/context.csv" "cat context.json warm")
check "(c) context.json warm" "$(awk -v t="$warm" 'BEGIN { print (t < 0.05) ? 1 : 0 }')" \
	"$(awk -v t="$warm" 'BEGIN { printf "%.1f", t * 1000 }') ms (target < 50 ms)"

# --- (e) an append outside the mount, seen through it ----------------------------------
echo
echo "== (e) a line appended outside to the $BIG_ENTRIES-entry session, until cat leaf shows it"
# The session is loaded (c); each round appends one message to the file as the agent does
# and times until `leaf` names it: the mount reads the new line on its own.
cp "$BIG_DIR/big.jsonl" "$BIG_DIR/big.jsonl.orig"
restore_big() { mv -f "$BIG_DIR/big.jsonl.orig" "$BIG_DIR/big.jsonl"; }
leaf_path=$MP/sessions/$big_id/leaf
seen_list=
seen_total=0
for i in $(seq 5); do
	parent=$(cat "$leaf_path")
	id=$(printf 'ee%06d' "$i")
	start=$(date +%s%N)
	printf '{"type":"message","id":"%s","parentId":"%s","timestamp":"2026-06-01T00:00:0%d.000Z","message":{"role":"user","content":"outside %d","timestamp":1}}\n' \
		"$id" "$parent" "$i" "$i" >>"$BIG_DIR/big.jsonl"
	until [ "$(cat "$leaf_path")" = "$id" ]; do
		[ $(($(date +%s%N) - start)) -lt 10000000000 ] || { restore_big; die "append $i not seen in 10 s"; }
	done
	end=$(date +%s%N)
	us=$(((end - start) / 1000))
	seen_list="$seen_list $us"
	seen_total=$((seen_total + us))
done
unmount
restore_big
seen=$((seen_total / 5))
echo "seen after (us):$seen_list"
SUMMARY+=("      (e) outside append to the $BIG_ENTRIES-entry session shown by cat leaf after ${seen} us on average (runs:$seen_list us; a reload of the file takes the cold time of (c))")

# --- (d) appends -------------------------------------------------------------------------
echo
echo "== (d) 10,000 appends through entries/new vs gjcfs append"
APPEND_DIR=$OUT/append-store
rm -rf "$APPEND_DIR" "$OUT/append-engine"
mkdir -p "$APPEND_DIR" "$OUT/append-engine"
copy_session "$OUT/small.jsonl" mount.jsonl 1 "$APPEND_DIR"
copy_session "$OUT/small.jsonl" engine.jsonl 2 "$OUT/append-engine"
awk 'BEGIN { for (i = 0; i < 10000; i++) printf "{\"role\":\"user\",\"content\":\"bench line %d\"}\n", i }' \
	>"$OUT/lines.jsonl"
mount_store "$APPEND_DIR"
new=$MP/sessions/00000000-0000-7000-8000-000000000001/entries/new
ARUNS=$(((RUNS + 1) / 2))
hyperfine --style basic --runs "$ARUNS" --export-csv "$OUT/append.csv" \
	-n "gjcfs append" "$BIN append $OUT/append-engine/engine.jsonl --agent-dir $OUT/agent < $OUT/lines.jsonl" \
	-n "entries/new" "cat $OUT/lines.jsonl > $new" || die "hyperfine failed (append)"
unmount
for f in "$APPEND_DIR/mount.jsonl" "$OUT/append-engine/engine.jsonl"; do
	n=$(($(wc -l <"$f") - 6))
	[ "$n" = $((ARUNS * 10000)) ] || die "$f holds $n appended lines, not $((ARUNS * 10000))"
done
eng=$(mean_of "$OUT/append.csv" "gjcfs append")
mnt=$(mean_of "$OUT/append.csv" "entries/new")
SUMMARY+=("      (d) appends: entries/new $(awk -v t="$mnt" 'BEGIN { printf "%.0f", 10000 / t }') entries/s ($(awk -v t="$mnt" 'BEGIN { printf "%.0f", t * 1000 }') ms), gjcfs append $(awk -v t="$eng" 'BEGIN { printf "%.0f", 10000 / t }') entries/s ($(awk -v t="$eng" 'BEGIN { printf "%.0f", t * 1000 }') ms)")

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "== summary (mean of $RUNS runs unless stated)"
for line in "${SUMMARY[@]}"; do echo "$line"; done
if [ "$FAILED" != 0 ]; then
	echo "bench-mount: some targets were missed" >&2
	exit 1
fi
echo "bench-mount: all targets met"
