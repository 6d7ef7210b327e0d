#!/usr/bin/env bash
# Builds a demo agent directory with gjcfs's own tools, at DIR (default target/demo-agent):
#   DIR/pi-mono                       a workspace holding two real transcripts the agent
#                                     recorded (tests/fixtures/real/), in its managed scope
#   DIR/workspace                     the demo workspace (an empty project directory)
#   DIR/agent/sessions/v2-<digest>/   its managed scope: three generated sessions (branches,
#                                     compactions, labels) and one holding a user image that
#                                     the append put into the blob store
#   DIR/agent/blobs/                  that image
#   DIR/agent/sessions/--<cwd>--/     a legacy directory holding a v1 transcript
#   DIR/agent/history.db              a prompt history
# Mount it with `gjcfs mount MP --agent-dir DIR/agent`. Replaces an existing DIR/agent.
# GJCFS names the gjcfs binary to use (default: build the release binary).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/demo-agent}
if [ -z "${GJCFS:-}" ]; then
	cargo build --release --quiet
	GJCFS=$PWD/target/release/gjcfs
fi
mkdir -p "$dir/workspace"
dir=$(cd "$dir" && pwd -P)
ws=$dir/workspace
agent=$dir/agent
rm -rf "$agent"
mkdir -p -m 700 "$agent"

gen() { "$GJCFS" generate "$@" 2>/dev/null; }

echo "gjcfs demo: building the demo agent directory in $dir" >&2
# Two real conversations, recorded by the agent, in the managed scope of their own
# workspace: the scope is prepared and bound as the agent does (by generating a session
# there, which is then removed), and each transcript's header names that workspace.
real_ws=$dir/pi-mono
mkdir -p "$real_ws"
gen scope-probe.jsonl --entries 1 --cwd "$real_ws" --scope "$agent"
real_scope=$(dirname "$(ls "$agent"/sessions/v2-*/scope-probe.jsonl)")
rm "$real_scope/scope-probe.jsonl"
for real in tests/fixtures/real/before-compaction.jsonl tests/fixtures/real/large-session.jsonl; do
	id=$(head -c 200 "$real" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
	stamp=$(head -c 200 "$real" | sed -n 's/.*"timestamp":"\([^"]*\)".*/\1/p' | tr ':.' '--')
	target="$real_scope/${stamp}_$id.jsonl"
	sed '1s|"cwd":"[^"]*"|"cwd":"'"$real_ws"'"|' "$real" >"$target"
	chmod 600 "$target"
done

# The managed scope of the workspace.
gen 2026-04-15T13-44-13-429Z_main.jsonl --entries 600 --seed 1 --cwd "$ws" --scope "$agent"
gen 2026-04-16T09-02-51-007Z_refactor.jsonl --entries 150 --seed 2 --cwd "$ws" --scope "$agent"
gen 2026-04-17T17-30-05-310Z_review.jsonl --entries 40 --seed 3 --cwd "$ws" --scope "$agent"
gen 2026-04-18T08-15-00-000Z_image.jsonl --entries 12 --seed 4 --cwd "$ws" --scope "$agent"
scope=$(dirname "$(ls "$agent"/sessions/v2-*/*_image.jsonl)")

# A real picture, demo/chart.png (a 320x180 bar chart, 1,549 bytes = 2,068 base64
# characters): the append stores it in the blob store and leaves a reference in the
# transcript, and every page of the session shows it.
image=$(base64 -w0 demo/chart.png)
printf '{"role":"user","content":[{"type":"text","text":"What does this chart show?"},{"type":"image","data":"%s","mimeType":"image/png"}]}\n' \
	"$image" | "$GJCFS" append "$scope/2026-04-18T08-15-00-000Z_image.jsonl" --agent-dir "$agent" >/dev/null

# A legacy directory (the workspace path encoded: / becomes -) with a v1 transcript.
legacy=$agent/sessions/--$(printf '%s' "${ws#/}" | tr '/\\:' '---')--
mkdir -p -m 700 "$legacy"
gen "$legacy/2025-11-02T10-00-00-000Z_legacy.jsonl" --entries 80 --seed 5 --version 1 --cwd "$ws"

"$GJCFS" history add --cwd "$ws" --agent-dir "$agent" \
	"rename the session module" \
	"explain the branch summary in the tree" \
	"why does the compaction keep the last tool result?" >/dev/null

echo "gjcfs demo agent: $agent (workspaces $ws and $real_ws)" >&2
"$GJCFS" ls --all --agent-dir "$agent" >&2
