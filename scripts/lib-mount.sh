# Mount helpers for the benchmark scripts (sourced, not run).
#
# Expects BIN (the gjcfs binary), OUT (a directory for the server's log), MP (an absolute
# mountpoint) and a `die` function. `mount_store DIR` mounts DIR with --session-dir and
# waits until the server answers (statfs, which a dead mount's caches cannot answer);
# `unmount` undoes it (fusermount3 -u, then -uz, then the server is killed) and is
# installed as the EXIT trap, so no mount outlives the script.

SERVER=
unmount() {
	if grep -q " $MP fuse" /proc/mounts; then
		fusermount3 -u "$MP" 2>/dev/null || fusermount3 -uz "$MP" 2>/dev/null || true
	fi
	if [ -n "$SERVER" ]; then
		# Let it exit after the unmount; kill it if it does not.
		for _ in $(seq 50); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
		kill "$SERVER" 2>/dev/null || true
		wait "$SERVER" 2>/dev/null || true
		SERVER=
	fi
}
trap unmount EXIT

mount_store() { # mount_store DIR
	unmount
	"$BIN" mount "$MP" --session-dir "$1" 2>>"$OUT/mount.log" &
	SERVER=$!
	for _ in $(seq 400); do
		if grep -q " $MP fuse" /proc/mounts && stat -f "$MP" >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "$SERVER" 2>/dev/null || die "gjcfs mount exited: $(tail -3 "$OUT/mount.log")"
		sleep 0.05
	done
	die "not mounted after 20 s"
}
