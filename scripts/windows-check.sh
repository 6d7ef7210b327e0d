#!/usr/bin/env bash
# Windows checks of this checkout on a Linux (Debian/Ubuntu x86_64) machine: the
# x86_64-pc-windows-gnu build, cross-compiled with mingw-w64, and its tests run under wine.
#
#   scripts/windows-check.sh          cargo check and cargo clippy -D warnings, every target
#   scripts/windows-check.sh --test   also builds the tests of gjcfs-json, gjcfs-engine, gjcfs-search,
#                                     gjcfs-vfs and gjcfs-dokan and runs them under wine, then
#                                     runs gjcfs.exe under wine (a managed session made,
#                                     appended to, listed and searched; mount without Dokan
#                                     installed refused, saying so)
#
# The tests run are those of the json, engine, vfs and Dokan adapter crates. The root crate's integration
# test binary is Unix-only (it mounts FUSE, makes FIFOs and tmpfs mounts) and gjcfs-fuse is
# empty on Windows, so neither has anything to run there.
#
# What it installs when missing: the rustup target x86_64-pc-windows-gnu, and (as root,
# with apt-get) gcc-mingw-w64-x86-64 (rusqlite's bundled SQLite is C) and wine64. A private
# wine prefix is made under $OUT with a stand-in bcryptprimitives.dll (windows/: Wine 8
# lacks that DLL; Rust's std imports ProcessPrng from it). windows/cc-wrapper.sh is the C
# compiler: mingw gcc, except that an .exe a build script must run becomes a wine launcher.
#
# Environment: OUT (default /tmp/gjcfs-windows-check): logs, the wine prefix and the run's
# temporary files (TMPDIR, removed at the end);
# CARGO_TARGET_DIR (default: target/ of the checkout).
# Exit status: 0 when every step passed; 1 when a check or a test failed; 2 when the
# tools could not be set up.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
mode=check
case "${1:-}" in
"") ;;
--test) mode=test ;;
*)
	echo "usage: scripts/windows-check.sh [--test]" >&2
	exit 2
	;;
esac
out=${OUT:-/tmp/gjcfs-windows-check}
mkdir -p "$out"
# The cross compiler's and wine's temporary files go under $out and are removed on exit, so
# a run leaves nothing in the system's temporary directory.
export TMPDIR="$out/tmp"
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR"
trap 'rm -rf "$TMPDIR"' EXIT
target=x86_64-pc-windows-gnu
t0=$(date +%s)
step() { echo "[$(($(date +%s) - t0))s] $*"; }
summary=()
note() { summary+=("$*"); }
finish() {
	echo
	echo "windows-check summary ($target):"
	for line in "${summary[@]}"; do echo "  $line"; done
	exit "$1"
}

step "rustup target add $target"
if ! rustup target add "$target" >"$out/rustup.log" 2>&1; then
	cat "$out/rustup.log"
	note "setup: FAILED (rustup target add; log $out/rustup.log)"
	finish 2
fi

need=()
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64)
if [ "$mode" = test ] && ! command -v wine >/dev/null; then need+=(wine64); fi
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ]; then
		note "setup: FAILED (missing ${need[*]}; install them, or run as root)"
		finish 2
	fi
	step "apt-get install ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	if ! { apt-get update -q && apt-get install -y -q "${need[@]}"; } >"$out/apt.log" 2>&1; then
		tail -20 "$out/apt.log"
		note "setup: FAILED (apt-get install ${need[*]}; log $out/apt.log)"
		finish 2
	fi
fi

tools="$out/tools"
mkdir -p "$tools"
cp "$here/windows/cc-wrapper.sh" "$tools/cc-wrapper.sh"
chmod +x "$tools/cc-wrapper.sh"
export CC_x86_64_pc_windows_gnu="$tools/cc-wrapper.sh"

cd "$root" || finish 2
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
status=0

step "cargo check --target $target --workspace --all-targets"
cargo check --target "$target" --workspace --all-targets --message-format=short >"$out/check.log" 2>&1
rc=$?
errors=$(grep -cE '^[^ ]+:[0-9]+:[0-9]+: error' "$out/check.log")
if [ "$rc" = 0 ]; then
	note "cargo check: ok"
else
	status=1
	note "cargo check: FAILED, $errors error sites (log $out/check.log)"
	grep -E '^[^ ]+:[0-9]+:[0-9]+: error' "$out/check.log" | sed -E 's/:[0-9]+:[0-9]+: error.*//' | sort | uniq -c | sort -rn
	finish "$status"
fi

step "cargo clippy --target $target --workspace --all-targets -- -D warnings"
if cargo clippy --target "$target" --workspace --all-targets --message-format=short -- -D warnings >"$out/clippy.log" 2>&1; then
	note "cargo clippy -D warnings: ok"
else
	status=1
	grep -E '^[^ ]+:[0-9]+:[0-9]+: (error|warning)' "$out/clippy.log" | head -30
	note "cargo clippy -D warnings: FAILED (log $out/clippy.log)"
fi
[ "$mode" = test ] || finish "$status"

export WINEPREFIX="$out/wineprefix" WINEDEBUG=-all
if [ ! -f "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]; then
	step "wine prefix and the bcryptprimitives.dll stand-in"
	wineboot -i >"$out/wineboot.log" 2>&1
	if ! x86_64-w64-mingw32-gcc -O2 -shared -o "$tools/bcryptprimitives.dll" \
		"$here/windows/bcryptprimitives.c" "$here/windows/bcryptprimitives.def" -ladvapi32 ||
		! cp "$tools/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"; then
		note "setup: FAILED (wine prefix; log $out/wineboot.log)"
		finish 2
	fi
fi

crates=(-p gjcfs-json -p gjcfs-engine -p gjcfs-search -p gjcfs-vfs -p gjcfs-dokan)
step "cargo test --target $target ${crates[*]} --no-run"
if ! cargo test --target "$target" "${crates[@]}" --no-run >"$out/test-build.log" 2>&1; then
	tail -30 "$out/test-build.log"
	note "test build: FAILED (log $out/test-build.log)"
	finish 1
fi
# The adapter's test binary links Dokan's user library (built by dokan-sys): it is put
# beside the test binaries only, so gjcfs-dokan.exe in debug/ still runs without it below.
debug="$CARGO_TARGET_DIR/$target/debug"
dll=$(ls "$debug"/build/dokan-sys-*/out/dokan2.dll 2>/dev/null | head -1)
if [ -z "$dll" ]; then
	note "test build: FAILED (dokan-sys built no dokan2.dll)"
	finish 1
fi
cp "$dll" "$debug/deps/"
step "cargo test --target $target ${crates[*]} under wine"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
cargo test --target "$target" "${crates[@]}" --no-fail-fast >"$out/test.log" 2>&1
rc=$?
grep -E '^test .* FAILED$|^failures:$' "$out/test.log" | grep -v '^failures:$' | head -40
totals=$(grep -E '^test result' "$out/test.log" | awk '{p+=$4; f+=$6; i+=$8} END {printf "%d passed, %d failed, %d ignored", p, f, i}')
if [ "$rc" = 0 ]; then
	note "tests under wine (json, engine, search, vfs, dokan): ok, $totals"
else
	status=1
	note "tests under wine (json, engine, search, vfs, dokan): FAILED, $totals (log $out/test.log)"
fi

# The command itself under wine: a managed session made, appended to and found again, and
# the mount refused with its reason: gjcfs-dokan.exe is there but Dokan is not (no
# dokan2.dll beside it), which every command but mount must not need.
step "gjcfs.exe under wine: generate --scope, append, ls, search, mount without Dokan"
smoke() {
	cargo build --target "$target" --bin gjcfs --bin gjcfs-dokan >"$out/smoke-build.log" 2>&1 || return 1
	[ ! -e "$CARGO_TARGET_DIR/$target/debug/dokan2.dll" ] || return 1
	local exe="$CARGO_TARGET_DIR/$target/debug/gjcfs.exe"
	local drive="$WINEPREFIX/drive_c" work='C:\gjcfs-smoke'
	rm -rf "$drive/gjcfs-smoke"
	mkdir -p "$drive/gjcfs-smoke/ws"
	(
		cd "$drive/gjcfs-smoke/ws" || exit 1
		export GJC_CODING_AGENT_DIR="$work\agent"
		set -e
		wine "$exe" generate --entries 20 --seed 1 --cwd "$work\ws" --scope "$work\agent" s.jsonl
		id=$(wine "$exe" ls --json | grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4)
		echo "session: $id"
		echo '{"role":"user","content":"zanzibarquokka"}' | wine "$exe" append "$id"
		wine "$exe" search zanzibarquokka | grep -q zanzibarquokka
		if wine "$exe" mount "$work\m" 2>"$out/smoke-mount.log"; then exit 1; fi
		grep -q 'Dokan is not installed' "$out/smoke-mount.log"
	) >"$out/smoke.log" 2>&1
	local rc=$?
	rm -rf "$drive/gjcfs-smoke"
	return $rc
}
if smoke; then
	note "gjcfs.exe under wine (generate --scope, append, ls, search; mount says Dokan is missing): ok"
else
	status=1
	tail -20 "$out/smoke.log"
	note "gjcfs.exe under wine: FAILED (log $out/smoke.log)"
fi
step "done"
finish "$status"
