#!/usr/bin/env bash
# Mounts a demo agent directory (default target/demo-agent, built with
# scripts/make-demo-agent.sh when missing; or the directory given as $2) at MOUNTPOINT
# (default /tmp/gjcfs-demo) and serves it in the foreground until Ctrl-C.
# Installs fuse3 first when it is missing and this runs as root on Debian/Ubuntu.
set -euo pipefail
cd "$(dirname "$0")/.."
mountpoint=${1:-/tmp/gjcfs-demo}
demo=${2:-target/demo-agent}

if ! command -v fusermount3 >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "gjcfs demo: installing fuse3 (fusermount3)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3 >/dev/null 2>&1 ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse3; }
  else
    echo "gjcfs demo: fusermount3 is missing; install the fuse3 package" >&2
    exit 1
  fi
fi
if [ ! -e /dev/fuse ]; then
  echo "gjcfs demo: /dev/fuse is missing; this machine cannot mount FUSE filesystems" >&2
  exit 1
fi

if [ ! -x target/release/gjcfs ]; then
  echo "gjcfs demo: building gjcfs (release; the first build takes a few minutes)" >&2
fi
cargo build --release
if [ ! -d "$demo/agent/sessions" ]; then
  GJCFS=$PWD/target/release/gjcfs scripts/make-demo-agent.sh "$demo"
fi
# The hints name real sessions: the agent's recorded conversation, and a generated one.
real=ffae836b-9420-4060-ac13-7745215f90ff
generated=$(target/release/gjcfs ls --all --json --agent-dir "$demo/agent" |
  sed -n 's/.*"id":"\([^"]*\)".*"path":"[^"]*_main\.jsonl".*/\1/p')
# An entry early in the generated session.
early=$(target/release/gjcfs entries "$generated" --agent-dir "$demo/agent" |
  sed -n '12s/^{"type":"[^"]*","id":"\([^"]*\)".*/\1/p')
cat >&2 <<EOM
gjcfs demo: mounting $demo/agent at $mountpoint (Ctrl-C unmounts). In another terminal:
  ls $mountpoint/recent $mountpoint/projects/*
  less $mountpoint/sessions/$real/context.md
  cat $mountpoint/sessions/$real/tree.txt | head -40
  echo $early > $mountpoint/sessions/$generated/leaf; head -20 $mountpoint/sessions/$generated/context.md
  tail -f $mountpoint/sessions/$generated/session.jsonl
  grep -l compaction $mountpoint/sessions/*/session.jsonl
  cat $mountpoint/usage.json | head -30; cat $mountpoint/history/prompts.jsonl
  a browser at file://$mountpoint/index.html (every session's page, its tree, the usage chart)
EOM
exec target/release/gjcfs mount "$mountpoint" --agent-dir "$demo/agent"
