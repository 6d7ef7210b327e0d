#!/usr/bin/env bash
# Benchmark of the views from the command line (docs/benchmarks-archive.md ## Views).
#
# Builds the release binary, generates its inputs under target/bench/views/ and times, with
# hyperfine, each command as a fresh process (nothing cached in the process; the files are
# in the page cache):
#   (a) `gjcfs show ID --format md` of a 100,000-entry session (target < 0.5 s), next to
#       `gjcfs context FILE` (the same load, printing context.json) and
#       `gjcfs show ID --format tree` in the same run;
#   (b) `gjcfs usage` over a 10,000-session store (target < 2 s), and `--by day --json`.
#       The store holds one generated 40-entry session (seed 1) copied under 10,000
#       session ids, every fifth naming the one before as its parentSession (a fork, whose
#       replies are copies), so every file is read and parsed.
#   (c) `cat sessions/ID/context.md` of the 100,000-entry session through `gjcfs mount`:
#       cold (first read after a fresh mount; target < 0.5 s) and warm;
#   (d) `cat usage.json` at the root of a mount of the 10,000-session store: cold (target
#       < 2 s) and warm, reads 1.1 s apart so each rescans the store (target < 100 ms).
# Prints a summary and exits non-zero when a step fails or a target is missed.
#
# Environment: RUNS (default 10), WARMUP (default 2), SESSIONS (default 10000),
# BIG_ENTRIES (default 100000), STORE_ENTRIES (default 40), COLD (default 3).
set -euo pipefail

RUNS=${RUNS:-10}
WARMUP=${WARMUP:-2}
SESSIONS=${SESSIONS:-10000}
BIG_ENTRIES=${BIG_ENTRIES:-100000}
STORE_ENTRIES=${STORE_ENTRIES:-40}
COLD=${COLD:-3}

cd "$(dirname "$0")/.."
BENCH=bench-views
OUT=target/bench/views
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh

# --- inputs ----------------------------------------------------------------------------
BIG_DIR=$OUT/big-$BIG_ENTRIES
if [ ! -d "$BIG_DIR" ]; then
	mkdir -p "$BIG_DIR.tmp"
	"$BIN" generate "$BIG_DIR.tmp/big.jsonl" --entries "$BIG_ENTRIES" --seed 1 2>/dev/null
	mv "$BIG_DIR.tmp" "$BIG_DIR"
fi
big_id=$(head -1 "$BIG_DIR/big.jsonl" | sed 's/.*"id":"\([^"]*\)".*/\1/')
STORE=$OUT/store-$SESSIONS-$STORE_ENTRIES
if [ ! -d "$STORE" ]; then
	mkdir -p "$STORE.tmp"
	"$BIN" generate "$OUT/store-source.jsonl" --entries "$STORE_ENTRIES" --seed 1 2>/dev/null
	# One awk pass writes every copy (a process per file would take minutes).
	awk -v n="$SESSIONS" -v dir="$STORE.tmp" '
		function id(i) { return sprintf("00000000-0000-7000-8000-%012d", i) }
		{ lines[NR] = $0 }
		END {
			for (i = 0; i < n; i++) {
				f = sprintf("%s/2026-01-01T00-00-00-000Z_%s.jsonl", dir, id(i))
				h = lines[1]
				sub(/"id":"[^"]*"/, "\"id\":\"" id(i) "\"", h)
				if (i % 5 == 4) sub(/}$/, ",\"parentSession\":\"" id(i - 1) "\"}", h)
				print h > f
				for (j = 2; j <= NR; j++) print lines[j] > f
				close(f)
			}
		}' "$OUT/store-source.jsonl"
	rm "$OUT/store-source.jsonl"
	mv "$STORE.tmp" "$STORE"
fi
echo "big session: $BIG_ENTRIES entries, $(stat -c %s "$BIG_DIR/big.jsonl") bytes, id $big_id"
echo "store: $(ls "$STORE" | wc -l) sessions of $STORE_ENTRIES entries, $(du -sb "$STORE" | cut -f1) bytes"

# --- (a) show --format md of the 100,000-entry session -----------------------------------
echo
echo "== (a) gjcfs show ID --format md of a $BIG_ENTRIES-entry session"
"$BIN" show "$big_id" --format md --session-dir "$BIG_DIR" >"$OUT/big.context.md" ||
	die "gjcfs show failed"
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/show.csv" \
	-n "gjcfs context FILE" "$BIN context $BIG_DIR/big.jsonl > /dev/null" \
	-n "gjcfs show ID --format md" "$BIN show $big_id --format md --session-dir $BIG_DIR > /dev/null" \
	-n "gjcfs show ID --format tree" "$BIN show $big_id --format tree --session-dir $BIG_DIR > /dev/null" ||
	die "hyperfine failed (show)"
md=$(mean_of "$OUT/show.csv" "gjcfs show ID --format md")
check "(a) show --format md" "$(awk -v t="$md" 'BEGIN { print (t < 0.5) ? 1 : 0 }')" \
	"$(ms "$md") ms (gjcfs context $(ms "$(mean_of "$OUT/show.csv" "gjcfs context FILE")") ms, --format tree $(ms "$(mean_of "$OUT/show.csv" "gjcfs show ID --format tree")") ms; target < 500 ms)"

# --- (b) usage over the 10,000-session store ----------------------------------------------
echo
echo "== (b) gjcfs usage over $SESSIONS sessions"
"$BIN" usage --session-dir "$STORE" || die "gjcfs usage failed"
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/usage.csv" \
	-n "gjcfs usage" "$BIN usage --session-dir $STORE > /dev/null" \
	-n "gjcfs usage --by day --json" "$BIN usage --by day --json --session-dir $STORE > /dev/null" ||
	die "hyperfine failed (usage)"
usage=$(mean_of "$OUT/usage.csv" "gjcfs usage")
check "(b) usage" "$(awk -v t="$usage" 'BEGIN { print (t < 2) ? 1 : 0 }')" \
	"$(ms "$usage") ms over $SESSIONS sessions (--by day --json $(ms "$(mean_of "$OUT/usage.csv" "gjcfs usage --by day --json")") ms; target < 2000 ms)"

# --- (c) the same views through the mount ---------------------------------------------
# Cold: the first read after a fresh mount (the session or store not loaded yet), timed
# with date over COLD mounts; warm: hyperfine on the mount left by the last cold run.
# Runs in this shell (not in a command substitution), so the mount stays tracked.
cold_read() { # cold_read DIR PATH-IN-MOUNT; sets COLD_MS (mean) and COLD_LIST
	local total=0 start end ms
	COLD_LIST=
	for _ in $(seq "$COLD"); do
		mount_store "$1"
		start=$(date +%s%N)
		cat "$MP/$2" >/dev/null
		end=$(date +%s%N)
		ms=$(((end - start) / 1000000))
		COLD_LIST="$COLD_LIST $ms"
		total=$((total + ms))
	done
	echo "cold runs of $2 (ms):$COLD_LIST"
	COLD_MS=$((total / COLD))
}
echo
echo "== (c) cat sessions/ID/context.md through the mount ($BIG_ENTRIES entries)"
cat "$BIG_DIR/big.jsonl" >/dev/null # a fresh mount, not a cold disk
cold_read "$BIG_DIR" "sessions/$big_id/context.md"
md_cold=$COLD_MS
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/mount-md.csv" \
	-n "cat context.md warm" "cat $MP/sessions/$big_id/context.md > /dev/null" ||
	die "hyperfine failed (context.md)"
check "(c) context.md cold" "$((md_cold < 500))" "$md_cold ms over $COLD fresh mounts (runs:$COLD_LIST ms; target < 500 ms)"
SUMMARY+=("      (c) context.md warm: $(ms "$(mean_of "$OUT/mount-md.csv" "cat context.md warm")") ms")

echo
echo "== (d) cat usage.json at the root of a mount of $SESSIONS sessions"
cold_read "$STORE" "usage.json"
usage_cold=$COLD_MS
# Warm, revalidated: 1.1 s apart, so the kernel's attributes (1 s) and the mount's own
# recheck window (0.5 s) have run out and the store is scanned and stat'ed again (nothing
# changed: no session is read). Back to back, the second of two reads within 0.5 s is
# served from the mount's cache without a scan.
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --prepare "sleep 1.1" \
	--export-csv "$OUT/mount-usage.csv" \
	-n "cat usage.json warm" "cat $MP/usage.json > /dev/null" ||
	die "hyperfine failed (usage.json)"
hyperfine --style basic --warmup "$WARMUP" --runs "$RUNS" --export-csv "$OUT/mount-usage-b2b.csv" \
	-n "cat usage.json back to back" "cat $MP/usage.json > /dev/null" ||
	die "hyperfine failed (usage.json back to back)"
unmount
usage_warm=$(mean_of "$OUT/mount-usage.csv" "cat usage.json warm")
check "(d) usage.json cold" "$((usage_cold < 2000))" "$usage_cold ms over $COLD fresh mounts (runs:$COLD_LIST ms; target < 2000 ms)"
check "(d) usage.json warm" "$(awk -v t="$usage_warm" 'BEGIN { print (t < 0.1) ? 1 : 0 }')" \
	"$(ms "$usage_warm") ms, reads 1.1 s apart, every one rescanning the store (back to back: $(ms "$(mean_of "$OUT/mount-usage-b2b.csv" "cat usage.json back to back")") ms; target < 100 ms)"

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
