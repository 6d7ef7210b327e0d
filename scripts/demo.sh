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

cargo build --release --quiet
if [ ! -d "$demo/agent/sessions" ]; then
  GJCFS=$PWD/target/release/gjcfs scripts/make-demo-agent.sh "$demo"
fi
cat >&2 <<EOM
gjcfs demo: mounting $demo/agent at $mountpoint (Ctrl-C unmounts). In another terminal:
  ls -l $mountpoint/sessions $mountpoint/projects/*
  cat $mountpoint/sessions/*/context.json | head -40
  ls $mountpoint/sessions/*/entries | head
  grep -rl compaction $mountpoint/sessions/*/entries | head
  ls $mountpoint/blobs; cat $mountpoint/history/prompts.jsonl
EOM
exec target/release/gjcfs mount "$mountpoint" --agent-dir "$demo/agent"
