#!/usr/bin/env bash
# Benchmark of search tools walking the whole mount, next to the same on the raw store, in
# the same hyperfine runs: `rg -l` (which reads the mount's .ignore and so each session
# once), `rg -uu -l` (every view as well: what rg read before the .ignore), `fd` and `fd
# --no-ignore`. Target: `rg -l` of the mount within 3x `rg -l` of the store.
# Writes a store of SESSIONS sessions of SESSION_SIZE (default 2,000 of 200KB) under
# target/bench/walk/ (kept for reruns) and mounts it read-only at target/bench/walk/mnt.
# Environment: RUNS (default 5), WARMUP (default 1), SESSIONS, SESSION_SIZE.
set -euo pipefail

BENCH=bench-walk
RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
SESSIONS=${SESSIONS:-2000}
SESSION_SIZE=${SESSION_SIZE:-200KB}

cd "$(dirname "$0")/.."
OUT=target/bench/walk
# shellcheck source=scripts/lib-bench.sh
source scripts/lib-bench.sh
for tool in rg fdfind; do
	command -v $tool >/dev/null || apt-get install -y -qq ripgrep fd-find >/dev/null ||
		die "$tool is missing and could not be installed"
done

store_of "$SESSIONS" "$SESSION_SIZE"
echo "store: $(find "$STORE" -name '*.jsonl' | wc -l) sessions, $(du -sh "$STORE" | cut -f1)"
mount_store "$STORE" --read-only

echo "== walking the mount and the store ($RUNS runs each)"
hyperfine --style basic --runs "$RUNS" --warmup "$WARMUP" --export-csv "$OUT/walk.csv" -i \
	-n "rg store" "rg -l nomatchzq $STORE" \
	-n "rg mount" "rg -l nomatchzq $MP" \
	-n "rg -uu mount" "rg -uu -l nomatchzq $MP" \
	-n "fd store" "fdfind --type f . $STORE" \
	-n "fd mount" "fdfind --type f . $MP" \
	-n "fd --no-ignore mount" "fdfind --no-ignore --type f . $MP" >/dev/null
for name in "rg store" "rg mount" "rg -uu mount" "fd store" "fd mount" "fd --no-ignore mount"; do
	echo "$name: $(ms "$(mean_of "$OUT/walk.csv" "$name")") ms"
done
raw=$(mean_of "$OUT/walk.csv" "rg store")
mounted=$(mean_of "$OUT/walk.csv" "rg mount")
check "rg -l of the mount" "$(at_most "$(ratio "$mounted" "$raw")" 3)" \
	"$(ratio "$mounted" "$raw")x rg -l of the store (target: at most 3x)"
everything=$(mean_of "$OUT/walk.csv" "rg -uu mount")
echo "rg -uu of the mount (every view): $(ratio "$everything" "$raw")x the store"
echo "files: the mount shows $(fdfind --no-ignore --type f . "$MP" | wc -l) to rg and fd without its .ignore, $(fdfind --type f . "$MP" | wc -l) with it; the store holds $(fdfind --type f . "$STORE" | wc -l)"

echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
