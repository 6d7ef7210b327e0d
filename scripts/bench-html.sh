#!/usr/bin/env bash
# Benchmark of the HTML pages of large sessions (docs/benchmarks-archive.md ## HTML pages).
#
# Builds the release binary, makes two 100,000-entry sessions under target/bench/html/ —
# `gjcfs generate --entries 100000 --seed 1` (it compacts and branches: a short context, a
# large tree) and a linear conversation of 100,000 messages without compaction (the whole
# path is the context) — and measures, with hyperfine, as fresh processes:
#   (a) rendering each page: `gjcfs show FILE --format html`, beside `--format md` (the
#       same walk into Markdown) in the same run;
#   (b) each page's size;
#   (c) a headless Chromium opening each page and taking a screenshot, beside the same
#       browser opening about:blank (its start-up, the baseline) in the same run.
# Prints a summary and exits non-zero when a step fails or a page takes over 5 s in the
# browser.
#
# Environment: RUNS (default 5), WARMUP (default 1), ENTRIES (default 100000).
set -euo pipefail

RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
ENTRIES=${ENTRIES:-100000}

cd "$(dirname "$0")/.."
BENCH=bench-html
OUT=target/bench/html
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh
command -v chromium >/dev/null 2>&1 || die "chromium is missing (apt-get install chromium)"

# --- inputs ----------------------------------------------------------------------------
GENERATED=$OUT/generated-$ENTRIES.jsonl
[ -f "$GENERATED" ] || "$BIN" generate "$GENERATED" --entries "$ENTRIES" --seed 1 2>/dev/null
LINEAR=$OUT/linear-$ENTRIES.jsonl
if [ ! -f "$LINEAR" ]; then
	awk -v n="$ENTRIES" 'BEGIN {
		print "{\"type\":\"session\",\"version\":5,\"id\":\"linear\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}"
		parent = "null"
		for (i = 0; i < n; i++) {
			id = sprintf("%08x", i)
			if (i % 2 == 0) {
				m = "{\"role\":\"user\",\"content\":\"question " i " lorem ipsum dolor sit amet consectetur\",\"timestamp\":1}"
			} else {
				m = "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"answer " i " lorem ipsum dolor sit amet consectetur adipiscing\"}],\"provider\":\"anthropic\",\"model\":\"claude\",\"usage\":{\"input\":10,\"output\":20,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{\"total\":0.001}},\"timestamp\":1}"
			}
			printf "{\"type\":\"message\",\"id\":\"%s\",\"parentId\":%s,\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"message\":%s}\n", id, parent, m
			parent = "\"" id "\""
		}
	}' >"$LINEAR.tmp"
	mv "$LINEAR.tmp" "$LINEAR"
fi

# --- (a) rendering ---------------------------------------------------------------------
hyperfine -N -w "$WARMUP" -r "$RUNS" --export-csv "$OUT/render.csv" \
	-n "html generated" "$BIN show $GENERATED --format html" \
	-n "md generated" "$BIN show $GENERATED --format md" \
	-n "html linear" "$BIN show $LINEAR --format html" \
	-n "md linear" "$BIN show $LINEAR --format md"

# --- (b) sizes -------------------------------------------------------------------------
"$BIN" show "$GENERATED" --format html >"$OUT/generated.html"
"$BIN" show "$LINEAR" --format html >"$OUT/linear.html"
"$BIN" show "$LINEAR" --format md >"$OUT/linear.md"
for f in generated.html linear.html linear.md; do
	printf '%-16s %12s bytes\n' "$f" "$(wc -c <"$OUT/$f")"
done
printf 'sections: generated %s, linear %s; tree dots: generated %s, linear %s\n' \
	"$(grep -o '<section class="message' "$OUT/generated.html" | wc -l)" \
	"$(grep -o '<section class="message' "$OUT/linear.html" | wc -l)" \
	"$(grep -o '<circle ' "$OUT/generated.html" | wc -l)" \
	"$(grep -o '<circle ' "$OUT/linear.html" | wc -l)"

# --- (c) the browser -------------------------------------------------------------------
PROFILE=$(mktemp -d)
trap 'rm -rf "$PROFILE"; unmount' EXIT
shot() { # the browser command that opens $1 and writes a screenshot
	echo "env TMPDIR=$PROFILE chromium --headless --no-sandbox --disable-gpu --user-data-dir=$PROFILE --window-size=1200,1600 --screenshot=$OUT/shot.png $1"
}
hyperfine -w "$WARMUP" -r "$RUNS" --export-csv "$OUT/browser.csv" \
	-n "about:blank" "$(shot about:blank)" \
	-n "generated page" "$(shot "file://$PWD/$OUT/generated.html")" \
	-n "linear page" "$(shot "file://$PWD/$OUT/linear.html")"

for page in "generated page" "linear page"; do
	mean=$(mean_of "$OUT/browser.csv" "$page")
	check "$page opens in the browser within 5 s" "$(at_most "$mean" 5)" "$(ms "$mean") ms"
done
printf "%s\n" "${SUMMARY[@]}"
exit "$FAILED"
