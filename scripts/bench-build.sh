#!/usr/bin/env bash
# Build and test-suite times of this tree next to an earlier commit, in one run:
#
#   scripts/bench-build.sh [BEFORE_COMMIT]    # default: 7443656, the last single-crate tree
#
# Each tree is a git worktree in a temporary directory (outside this workspace, whose
# manifest would otherwise claim it) with a target directory of its own, so both start
# cold. For each tree, in turn (before, after, then the next measure):
# - cold: `cargo test --no-run` from an empty target directory (dependencies included);
# - incremental: touch the mount model's root file, `cargo test --no-run` again (the
#   rebuild and relink a one-line change costs);
# - suite: `cargo test` (build already done), the whole suite.
# Wall time and CPU time (user + system) come from /usr/bin/time; CPU time is the figure
# to compare when the machine is shared. The worktrees and their builds are removed on exit;
# each step's log is kept under target/bench/build/.
set -euo pipefail
cd "$(dirname "$0")/.."
before=${1:-7443656}
logs=$PWD/target/bench/build
mkdir -p "$logs"
out=$(mktemp -d)
command -v /usr/bin/time >/dev/null || { apt-get update -qq && apt-get install -y -qq time; }

cleanup() {
	for tree in before after; do
		git worktree remove --force "$out/$tree" 2>/dev/null || true
	done
	rm -rf "$out"
	git worktree prune
}
trap cleanup EXIT
git worktree add -q --detach "$out/before" "$before"
git worktree add -q --detach "$out/after" HEAD

# timed LABEL TREE COMMAND…: runs COMMAND in TREE, prints one result line.
timed() {
	local label=$1 tree=$2
	shift 2
	local log="$logs/$tree-$label.log"
	(cd "$out/$tree" && CARGO_TARGET_DIR="$out/$tree/target" /usr/bin/time -f '%e %U %S' -o "$out/time" "$@") >"$log" 2>&1 ||
		{ tail -20 "$log"; echo "bench-build: $tree $label failed" >&2; exit 1; }
	read -r wall user sys <"$out/time"
	printf '%-12s %-7s wall %7.1f s   cpu %7.1f s\n' "$label" "$tree" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')"
}

touched() { # the file a one-line change of the mount model touches in each layout
	for f in crates/vfs/src/lib.rs src/vfs/lib.rs; do
		if [ -f "$out/$1/$f" ]; then echo "$f"; return; fi
	done
	echo src/vfs/mod.rs
}

echo "before: $(git -C "$out/before" log -1 --format='%h %s')"
echo "after:  $(git -C "$out/after" log -1 --format='%h %s')"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for tree in before after; do
	rm -rf "$out/$tree/target"
	timed cold "$tree" cargo test --no-run
done
for tree in before after; do
	file=$(touched "$tree")
	echo "// bench-build" >>"$out/$tree/$file"
	timed incremental "$tree" cargo test --no-run
	git -C "$out/$tree" checkout -q -- "$file"
	(cd "$out/$tree" && CARGO_TARGET_DIR="$out/$tree/target" cargo test --no-run >/dev/null 2>&1)
done
for tree in before after; do
	timed suite "$tree" cargo test
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
