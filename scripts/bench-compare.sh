#!/usr/bin/env bash
# This build's load, search and mount figures next to another gjcfs binary (an older
# main), in the same hyperfine runs, with the raw-file baselines beside them:
#   load:   `gjcfs context FILE` of a generated SIZE session, next to `cat FILE`;
#   search: warm `gjcfs search` of a rare and a common word over SESSIONS sessions (each
#           binary with its own index, built first), next to `rg -l`;
#   mount:  each binary's `gjcfs mount --session-dir` of the SESSIONS store and of the big
#           session: `ls -l MP/sessions/`, `grep -r` of an absent word and a warm
#           `cat .../context.json` of the big session, next to the same on the raw files.
# Peak memory of both `gjcfs context` runs comes from /usr/bin/time -v. Every mount is
# undone on exit. Stores are kept under target/bench/compare/ for reruns.
#
# Usage: BEFORE=PATH scripts/bench-compare.sh
# Environment: BEFORE (the other binary, required), RUNS (default 10), WARMUP (default 2),
# SESSIONS (default 2000), SESSION_SIZE (default 54KB), SIZE (default 100MB).
set -euo pipefail

RUNS=${RUNS:-10}
WARMUP=${WARMUP:-2}
SESSIONS=${SESSIONS:-2000}
SESSION_SIZE=${SESSION_SIZE:-54KB}
SIZE=${SIZE:-100MB}
TOKEN=GJCFS_BENCH_ABSENT_TOKEN

cd "$(dirname "$0")/.."
BENCH=bench-compare
OUT=$PWD/target/bench/compare
# shellcheck source=scripts/lib-bench.sh
source scripts/lib-bench.sh
[ -x "${BEFORE:-}" ] || die "BEFORE=PATH to the other gjcfs binary is required"
BEFORE=$(cd "$(dirname "$BEFORE")" && pwd)/$(basename "$BEFORE")
command -v rg >/dev/null || { apt-get install -y -qq ripgrep >/dev/null || die "rg is missing"; }
echo "now:    $("$BIN" --version)"
echo "before: $("$BEFORE" --version)"

STORE=$OUT/store-$SESSIONS
BIG=$OUT/big-$SIZE
if [ ! -d "$STORE" ]; then
	echo "== generating $SESSIONS sessions of $SESSION_SIZE"
	generate_sessions "$STORE.tmp" "$SESSIONS" "$SESSION_SIZE"
	mv "$STORE.tmp" "$STORE"
fi
if [ ! -d "$BIG" ]; then
	echo "== generating one session of $SIZE"
	mkdir -p "$BIG.tmp"
	"$BIN" generate "$BIG.tmp/big.jsonl" --size "$SIZE" --seed 1 2>/dev/null
	mv "$BIG.tmp" "$BIG"
fi
FILE=$BIG/big.jsonl

run() { # run NAME-OF-CSV hyperfine-arguments...
	hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/$1.csv" \
		"${@:2}" || die "hyperfine failed ($1)"
}
line() { # line CSV NAME... -> "name: N ms" for each
	local csv=$1 name
	for name in "${@:2}"; do
		SUMMARY+=("$(printf '%-28s %8s ms' "$name" "$(ms "$(mean_of "$OUT/$csv.csv" "$name")")")")
	done
}

echo "== load"
run load -n "cat" "cat $FILE > /dev/null" \
	-n "context now" "$BIN context $FILE > /dev/null" \
	-n "context before" "$BEFORE context $FILE > /dev/null"
line load "cat" "context now" "context before"
for who in now before; do
	bin=$BIN
	[ "$who" = before ] && bin=$BEFORE
	kib=$(/usr/bin/time -v "$bin" context "$FILE" 2>&1 >/dev/null |
		awk -F: '/Maximum resident/ { gsub(/ /, "", $2); print $2 }')
	SUMMARY+=("$(printf '%-28s %8s MiB' "context peak RSS $who" "$((kib / 1024))")")
done

echo "== search (index built first, then warm)"
for who in now before; do
	bin=$BIN
	[ "$who" = before ] && bin=$BEFORE
	rm -rf "$OUT/index-$who"
	"$bin" search --session-dir "$STORE" --index "$OUT/index-$who" zzzprime >/dev/null 2>&1 || true
done
for word in tool buffer; do
	run "search-$word" -i -n "rg -l $word" "rg -l $word $STORE" \
		-n "search $word now" "$BIN search --session-dir $STORE --index $OUT/index-now $word" \
		-n "search $word before" "$BEFORE search --session-dir $STORE --index $OUT/index-before $word"
	line "search-$word" "rg -l $word" "search $word now" "search $word before"
done
rm -rf "$OUT/index-now" "$OUT/index-before"

echo "== mount"
NOW_MP=$OUT/mnt-now
BEFORE_MP=$OUT/mnt-before
NOW_BIG=$OUT/mnt-now-big
BEFORE_BIG=$OUT/mnt-before-big
mount_at "$NOW_MP" "$STORE"
BIN=$BEFORE mount_at "$BEFORE_MP" "$STORE"
mount_at "$NOW_BIG" "$BIG"
BIN=$BEFORE mount_at "$BEFORE_BIG" "$BIG"
run ls -n "ls -l raw" "ls -l $STORE > /dev/null" \
	-n "ls -l mount now" "ls -l $NOW_MP/sessions/ > /dev/null" \
	-n "ls -l mount before" "ls -l $BEFORE_MP/sessions/ > /dev/null"
line ls "ls -l raw" "ls -l mount now" "ls -l mount before"
run grep -i -n "grep -r raw" "grep -r $TOKEN $STORE" \
	-n "grep -r mount now" "grep -r $TOKEN $NOW_MP/sessions" \
	-n "grep -r mount before" "grep -r $TOKEN $BEFORE_MP/sessions"
line grep "grep -r raw" "grep -r mount now" "grep -r mount before"
sid_now=$(ls "$NOW_BIG/sessions")
sid_before=$(ls "$BEFORE_BIG/sessions")
run context -n "context.json now" "cat $NOW_BIG/sessions/$sid_now/context.json > /dev/null" \
	-n "context.json before" "cat $BEFORE_BIG/sessions/$sid_before/context.json > /dev/null"
line context "context.json now" "context.json before"
unmount

echo "== summary (means; load average after: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%s\n' "${SUMMARY[@]}"
