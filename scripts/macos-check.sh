#!/usr/bin/env bash
# The macOS build of this checkout, checked on Linux (x86_64; root, or a user with pip and
# pkg-config installed):
#
#   scripts/macos-check.sh            clippy --all-targets -D warnings for x86_64- and
#                                     aarch64-apple-darwin, then links the gjcfs binary for
#                                     aarch64-apple-darwin
#   scripts/macos-check.sh --no-link  the clippy runs only
#
# What it installs: the two rustup targets; ziglang and cargo-zigbuild from PyPI into a
# virtualenv of its own under $OUT (zig is the C compiler and linker for Apple targets:
# rusqlite's bundled SQLite needs a C compiler, and the host's gcc knows no Apple target).
# fuser's build script asks pkg-config for macFUSE's `fuse` (>= 2.6) whenever the target is
# macOS: a stand-in fuse.pc is written, and for the link a libfuse.tbd text stub with the
# two symbols fuser imports (fuse_mount_compat25, fuse_unmount_compat22), install name
# /usr/local/lib/libfuse.2.dylib (where macFUSE puts it). The system calls of the engine's
# macOS module (ACLs, libproc, renamex_np, getfsstat, sysctlbyname) resolve against zig's
# libSystem stubs, so the link proves they exist there.
#
# Nothing here can RUN a macOS binary, nor mount through macFUSE: that needs a Mac.
# (The link step warns that `xcrun` is missing; zig supplies the SDK's libraries instead.)
#
# Exit status 0 when every step passed; the last line says what passed. Logs: $OUT
# (default /tmp/gjcfs-macos-check).
set -u
link=yes
case "${1:-}" in
  "") ;;
  --no-link) link=no ;;
  *) echo "usage: scripts/macos-check.sh [--no-link]" >&2; exit 2 ;;
esac
src=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/gjcfs-macos-check}
mkdir -p "$out"
t0=$(date +%s)
now() { echo $(( $(date +%s) - t0 )); }
step() { echo "[$(now)s] $*"; }
summary=()
status=0

step "rustup target add x86_64-apple-darwin aarch64-apple-darwin"
if ! rustup target add x86_64-apple-darwin aarch64-apple-darwin >"$out/rustup.log" 2>&1; then
  cat "$out/rustup.log"
  echo "macos-check: FAIL (rustup target add; log: $out/rustup.log)"
  exit 2
fi
# clippy is what denies the warnings; a toolchain without it gets it.
cargo clippy --version >/dev/null 2>&1 || rustup component add clippy >>"$out/rustup.log" 2>&1

venv="$out/zigvenv"
if [ ! -x "$venv/bin/cargo-zigbuild" ]; then
  step "pip install ziglang cargo-zigbuild (PyPI wheels)"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q ziglang cargo-zigbuild; } >"$out/pip.log" 2>&1; then
    tail -20 "$out/pip.log"
    echo "macos-check: FAIL (pip install; log: $out/pip.log)"
    exit 2
  fi
fi
export PATH="$venv/bin:$PATH"
if ! command -v pkg-config >/dev/null; then
  step "apt-get install pkg-config"
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q pkg-config; } >"$out/apt.log" 2>&1 \
    || { tail -20 "$out/apt.log"; echo "macos-check: FAIL (pkg-config; log: $out/apt.log)"; exit 2; }
fi

stand_in="$out/macfuse-stand-in"
mkdir -p "$stand_in/lib"
cat >"$stand_in/fuse.pc" <<EOF
# Stand-in for macFUSE's fuse.pc (type-checking and cross-linking on Linux only).
libdir=$stand_in/lib
Name: fuse
Description: macFUSE (stand-in)
Version: 2.9.7
Libs: -L\${libdir} -lfuse
Cflags: -D_FILE_OFFSET_BITS=64 -D_DARWIN_USE_64_BIT_INODE
EOF
cat >"$stand_in/lib/libfuse.tbd" <<'EOF'
--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '/usr/local/lib/libfuse.2.dylib'
current-version: 12.0
compatibility-version: 12.0
exports:
  - targets:     [ x86_64-macos, arm64-macos ]
    symbols:     [ _fuse_mount_compat25, _fuse_unmount_compat22 ]
...
EOF
export PKG_CONFIG_ALLOW_CROSS=1 PKG_CONFIG_PATH="$stand_in"

cd "$src" || exit 2
for target in x86_64-apple-darwin aarch64-apple-darwin; do
  started=$(now)
  step "cargo zigbuild clippy --target $target --all-targets -- -D warnings"
  log="$out/clippy-$target.log"
  cargo-zigbuild clippy --target "$target" --all-targets --message-format=short -- -D warnings >"$log" 2>&1
  rc=$?
  errors=$(grep -cE '^[^ ]+:[0-9]+:[0-9]+: error' "$log")
  step "$target: rc=$rc, $errors errors (log: $log)"
  grep -E '^[^ ]+:[0-9]+:[0-9]+: (error|warning)' "$log" | sort -u
  grep -E 'failed to run custom build command|^error: could not compile' "$log" | sort -u
  if [ "$rc" = 0 ]; then
    summary+=("$target clippy ok ($(( $(now) - started ))s)")
  else
    summary+=("$target clippy FAILED")
    status=1
  fi
done

if [ "$link" = yes ]; then
  started=$(now)
  step "cargo zigbuild build --target aarch64-apple-darwin --bin gjcfs (no debug info)"
  log="$out/link.log"
  # Debug info only costs time and disk here: nothing will debug this binary.
  CARGO_PROFILE_DEV_DEBUG=0 cargo-zigbuild build --target aarch64-apple-darwin --bin gjcfs >"$log" 2>&1
  rc=$?
  bin="${CARGO_TARGET_DIR:-$src/target}/aarch64-apple-darwin/debug/gjcfs"
  step "link rc=$rc (log: $log)"
  if [ "$rc" = 0 ] && file "$bin" | grep -q 'Mach-O 64-bit arm64 executable'; then
    file "$bin"
    summary+=("aarch64 gjcfs linked ($(( $(now) - started ))s)")
  else
    tail -30 "$log"
    summary+=("aarch64 link FAILED")
    status=1
  fi
fi

verdict=PASS
[ "$status" = 0 ] || verdict=FAIL
joined=$(printf '%s, ' "${summary[@]}")
echo "macos-check: $verdict — ${joined%, }; $(now)s in all (logs: $out)"
exit "$status"
