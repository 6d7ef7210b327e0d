#!/usr/bin/env bash
# What removing sessions from the search index costs: the first build of an index over a
# store of SESSIONS generated sessions, then `gjcfs search` right after DELETE of them are
# removed (the update that drops them, and the query), for this tree's release binary and,
# with BEFORE=PATH, another gjcfs binary, alternating, ROUNDS times each. Each round works
# on a fresh copy of the store and a fresh index. Also reports the index's size, and how
# often a word planted in the removed sessions only is left in the index file's bytes.
#
# Environment: SESSIONS (default 2000), SESSION_SIZE (default 54KB), DELETE (default 200),
# ROUNDS (default 3), BEFORE (optional).
set -euo pipefail

SESSIONS=${SESSIONS:-2000}
SESSION_SIZE=${SESSION_SIZE:-54KB}
DELETE=${DELETE:-200}
ROUNDS=${ROUNDS:-3}
BEFORE=${BEFORE:-}
WORD=zqxjkvbwordunique

cd "$(dirname "$0")/.."
cargo build --release --quiet
BIN=$PWD/target/release/gjcfs
OUT=target/bench/search-delete
STORE=$OUT/store-$SESSIONS
TMP=$(mktemp -d /tmp/gjcfs-bench-delete.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if [ ! -d "$STORE" ]; then
	mkdir -p "$STORE.tmp"
	seq 1 "$SESSIONS" | xargs -P "$(nproc)" -I{} \
		"$BIN" generate "$STORE.tmp/s{}.jsonl" --size "$SESSION_SIZE" --seed {} 2>/dev/null
	# The planted word, in the sessions that are removed.
	for n in $(seq 1 "$DELETE"); do
		echo "{\"role\":\"user\",\"content\":\"where is $WORD now\"}" |
			"$BIN" append "$STORE.tmp/s$n.jsonl" --agent-dir "$TMP/agent" 2>/dev/null
	done
	mv "$STORE.tmp" "$STORE"
fi
ms() { echo $((($2 - $1) / 1000000)); }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "store: $SESSIONS sessions, $(du -sb "$STORE" | cut -f1) bytes; removing $DELETE"
for round in $(seq 1 "$ROUNDS"); do
	for which in after before; do
		bin=$BIN
		if [ $which = before ]; then
			[ -n "$BEFORE" ] || continue
			bin=$BEFORE
		fi
		rm -rf "$TMP/store" "$TMP/index"
		cp -r "$STORE" "$TMP/store"
		search() { "$bin" search --session-dir "$TMP/store" --index "$TMP/index" "$@" >/dev/null || true; }
		t0=$(date +%s%N)
		search "$WORD"
		t1=$(date +%s%N)
		size=$(du -sb "$TMP/index" | cut -f1)
		for n in $(seq 1 "$DELETE"); do rm "$TMP/store/s$n.jsonl"; done
		t2=$(date +%s%N)
		search "$WORD"
		t3=$(date +%s%N)
		left=$(cat "$TMP/index"/search.sqlite* | grep -ao "$WORD" | wc -l || true)
		echo "round $round $which: build $(ms "$t0" "$t1") ms, index $size bytes;" \
			"search after removing $DELETE: $(ms "$t2" "$t3") ms; '$WORD' left in the index files: $left"
	done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
