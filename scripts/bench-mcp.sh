#!/usr/bin/env bash
# Benchmark of `gjcfs mcp` next to the commands whose answers it gives, in the same
# hyperfine runs, over a store of SESSIONS sessions (default 50,000 of SESSION_SIZE, 8KB,
# read with --session-dir), with RARE planted in 5 of them by `gjcfs append`:
#   - one `search_sessions` call — the server started, initialized and asked once, which
#     is the most an agent pays for a call — next to `gjcfs search` for a rare and a common
#     word (target: within 2x); one `files_touched` call next to `gjcfs files`;
#   - the peak resident memory (GNU time) of `gjcfs search`, and of one server answering
#     one call, each tool once, and CALLS/2 and CALLS calls of every tool in turn, two at
#     a time (target: bounded, stated in docs/PERFORMANCE.md; the peak does not grow with
#     calls).
# The index is built first (timed once) and shared by both sides, in OUT's cache.
# Writes under target/bench/mcp/ (the store is kept for reruns).
# Environment: RUNS (default 10), WARMUP (default 2), SESSIONS, SESSION_SIZE, CALLS
# (default 200).
set -euo pipefail

BENCH=bench-mcp
RUNS=${RUNS:-10}
WARMUP=${WARMUP:-2}
SESSIONS=${SESSIONS:-50000}
SESSION_SIZE=${SESSION_SIZE:-8KB}
CALLS=${CALLS:-200}
RARE=quokkaborealis
COMMON=buffer

cd "$(dirname "$0")/.."
OUT=target/bench/mcp
# shellcheck source=scripts/lib-bench.sh
source scripts/lib-bench.sh
[ -x /usr/bin/time ] || die "GNU time is missing (apt-get install time)"

STORE=$OUT/store-$SESSIONS
if [ ! -d "$STORE" ]; then
	echo "== writing $SESSIONS sessions of $SESSION_SIZE"
	generate_sessions "$STORE.tmp" "$SESSIONS" "$SESSION_SIZE"
	for n in 17 1234 4321 7777 9999; do
		echo "{\"role\":\"user\",\"content\":\"Where did the $RARE parser fail?\"}" |
			"$BIN" append "$STORE.tmp/s$n.jsonl" --agent-dir "$OUT/agent" >/dev/null 2>&1
	done
	mv "$STORE.tmp" "$STORE"
fi
export XDG_CACHE_HOME=$PWD/$OUT/cache
STORE=$(cd "$STORE" && pwd)
echo "store: $(find "$STORE" -name '*.jsonl' | wc -l) sessions, $(du -sh "$STORE" | cut -f1)"
SID=$(head -1 "$STORE/s17.jsonl" | sed -n 's/^{"type":"session","version":5,"id":"\([^"]*\)".*/\1/p')
FILE=$(grep -o '"name":"read","arguments":{"path":"[^"]*"' "$STORE/s17.jsonl" | head -1 |
	sed 's/.*"path":"\([^"]*\)"/\1/')
[ -n "$SID" ] && [ -n "$FILE" ] || die "cannot read a session id and a read path from s17.jsonl"
# A relative path is the session's workspace's.
case $FILE in
/*) ;;
*) FILE=$(head -1 "$STORE/s17.jsonl" | sed -n 's/.*"cwd":"\([^"]*\)".*/\1/p')/$FILE ;;
esac

echo "== the index, built once (both sides then share it)"
rm -rf "$XDG_CACHE_HOME"
start=$(date +%s.%N)
"$BIN" search "$RARE" --session-dir "$STORE" --json >/dev/null
echo "first build: $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }') s"

# The requests of one client: initialize, then the calls given.
requests() {
	echo '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
	echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
	local id=1
	for call in "$@"; do
		echo "{\"jsonrpc\":\"2.0\",\"id\":$id,\"method\":\"tools/call\",\"params\":$call}"
		id=$((id + 1))
	done
}
tool() { # tool NAME ARGUMENTS-JSON
	echo "{\"name\":\"$1\",\"arguments\":$2}"
}
REQ=$OUT/requests
mkdir -p "$REQ"
requests "$(tool search_sessions "{\"query\":\"$RARE\"}")" >"$REQ/rare.jsonl"
requests "$(tool search_sessions "{\"query\":\"$COMMON\"}")" >"$REQ/common.jsonl"
requests "$(tool files_touched "{\"path\":\"$FILE\"}")" >"$REQ/files.jsonl"
every=(
	"$(tool search_sessions "{\"query\":\"$COMMON\",\"limit\":100}")"
	"$(tool read_session "{\"session\":\"$SID\",\"limit\":100,\"max_chars\":20000}")"
	"$(tool list_sessions '{"limit":100}')"
	"$(tool session_tree "{\"session\":\"$SID\"}")"
	"$(tool files_touched "{\"path\":\"$FILE\",\"limit\":100}")"
	"$(tool usage '{"by":"session","limit":100}')"
)
calls=()
for ((i = 0; i < CALLS; i++)); do calls+=("${every[i % ${#every[@]}]}"); done
requests "${calls[@]}" >"$REQ/every.jsonl"
requests "${calls[@]:0:CALLS/2}" >"$REQ/half.jsonl"
requests "${every[@]}" >"$REQ/once.jsonl"
[ "$(wc -l <"$REQ/every.jsonl")" = $((CALLS + 2)) ] || die "a request is not one line"
# A client that keeps the server's input open until every call is answered (at the end
# of its input the server finishes what it is working on and lets the rest go, as a
# client that left wants): serve.sh REQUESTS CALLS OUT.
cat >"$REQ/serve.sh" <<SCRIPT
#!/bin/sh
{ cat "\$1"; while [ "\$(grep -c '"id"' "\$3" 2>/dev/null)" -le "\$2" ]; do sleep 0.05; done; } |
	"$BIN" mcp --session-dir "$STORE" >"\$3"
SCRIPT
chmod +x "$REQ/serve.sh"
# Each answer must be an answer, not an error.
"$REQ/serve.sh" "$REQ/rare.jsonl" 1 "$OUT/answers"
grep -q '"structuredContent"' "$OUT/answers" || die "search_sessions did not answer"
"$REQ/serve.sh" "$REQ/every.jsonl" "$CALLS" "$OUT/answers"
answers=$(grep -c '"isError":false' "$OUT/answers" || true)
[ "$answers" = "$CALLS" ] || die "of $CALLS calls, $answers answered"

echo "== search_sessions next to gjcfs search ($RUNS runs each)"
hyperfine --style basic --runs "$RUNS" --warmup "$WARMUP" --export-csv "$OUT/search.csv" \
	-n "search rare" "$BIN search $RARE --session-dir $STORE --json" \
	-n "mcp rare" "$BIN mcp --session-dir $STORE < $REQ/rare.jsonl" \
	-n "search common" "$BIN search $COMMON --session-dir $STORE --json" \
	-n "mcp common" "$BIN mcp --session-dir $STORE < $REQ/common.jsonl" \
	-n "files" "$BIN files $FILE --session-dir $STORE --json" \
	-n "mcp files" "$BIN mcp --session-dir $STORE < $REQ/files.jsonl" >/dev/null
for pair in rare common; do
	cli=$(mean_of "$OUT/search.csv" "search $pair")
	mcp=$(mean_of "$OUT/search.csv" "mcp $pair")
	echo "$pair: gjcfs search $(ms "$cli") ms, search_sessions $(ms "$mcp") ms ($(ratio "$mcp" "$cli")x)"
	check "search_sessions, $pair word" "$(at_most "$(ratio "$mcp" "$cli")" 2)" \
		"$(ratio "$mcp" "$cli")x gjcfs search (target: at most 2x)"
done
cli=$(mean_of "$OUT/search.csv" files)
mcp=$(mean_of "$OUT/search.csv" "mcp files")
echo "files: gjcfs files $(ms "$cli") ms, files_touched $(ms "$mcp") ms ($(ratio "$mcp" "$cli")x)"
check "files_touched" "$(at_most "$(ratio "$mcp" "$cli")" 2)" "$(ratio "$mcp" "$cli")x gjcfs files"

echo "== peak memory (GNU time)"
peak() { # peak COMMAND... -> KiB
	/usr/bin/time -f '%M' -o "$OUT/peak" "$@" >/dev/null
	cat "$OUT/peak"
}
search_kib=$(peak "$BIN" search "$COMMON" --session-dir "$STORE" --json)
one_kib=$(peak "$REQ/serve.sh" "$REQ/common.jsonl" 1 "$OUT/answers")
once_kib=$(peak "$REQ/serve.sh" "$REQ/once.jsonl" "${#every[@]}" "$OUT/answers")
half_kib=$(peak "$REQ/serve.sh" "$REQ/half.jsonl" $((CALLS / 2)) "$OUT/answers")
every_kib=$(peak "$REQ/serve.sh" "$REQ/every.jsonl" "$CALLS" "$OUT/answers")
echo "gjcfs search: $((search_kib / 1024)) MiB"
echo "gjcfs mcp, one search_sessions call: $((one_kib / 1024)) MiB"
echo "gjcfs mcp, each tool once (${#every[@]} calls): $((once_kib / 1024)) MiB"
echo "gjcfs mcp, $((CALLS / 2)) calls of every tool: $((half_kib / 1024)) MiB"
echo "gjcfs mcp, $CALLS calls of every tool: $((every_kib / 1024)) MiB"
check "server memory" "$(at_most "$(ratio "$every_kib" "$half_kib")" 1.1)" \
	"$CALLS calls peak at $(ratio "$every_kib" "$half_kib")x what $((CALLS / 2)) do (nothing grows with calls)"

echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
