# What the benchmark scripts share (sourced from the repository root, not run).
#
# Expects BENCH (the script's name, for messages) and OUT (its output directory under
# target/bench/). Sets BIN (the release gjcfs, built here) and MP (an absolute mountpoint
# under OUT), installs hyperfine if it is missing, prints the machine's facts, and defines:
# - `die MESSAGE`;
# - `check LABEL OK(0|1) TEXT`, which adds a PASS/FAIL line to SUMMARY (FAILED=1 on FAIL);
# - `mean_of CSV NAME` (a hyperfine export's mean, in seconds), `ms SECONDS`, `ratio A B`
#   and `at_most X LIMIT` (1 or 0, for `check`);
# - `mount_at MP DIR [OPTION...]`, which mounts DIR with --session-dir at MP and waits
#   until the server answers (statfs, which a dead mount's caches cannot answer), and
#   `mount_store DIR [OPTION...]`, the same at MP;
# - `unmount_at MP` (fusermount3 -u, then -uz, then the server is killed) and `unmount`,
#   every mount of the script, installed as the EXIT trap so that no mount outlives it;
# - `server_reads MP`, the read calls MP's server has made (one per kernel request);
# - `generate_sessions DIR N SIZE`, N sessions of SIZE written into DIR (`s1.jsonl` …,
#   `gjcfs generate --seed K` for K = 1..N, on every core), and `store_of N SIZE`, which
#   sets STORE to the absolute path of `OUT/store-N`, written so if it is missing.

BIN=$PWD/target/release/gjcfs
MP=$OUT/mnt
mkdir -p "$OUT" "$MP"
MP=$(cd "$MP" && pwd)

die() {
	echo "$BENCH: error: $*" >&2
	exit 1
}

# The servers this script started, by mountpoint.
declare -A SERVERS=()
unmount_at() { # unmount_at MP
	if grep -q " $1 fuse" /proc/mounts; then
		fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1" 2>/dev/null || true
	fi
	local server=${SERVERS[$1]:-}
	if [ -n "$server" ]; then
		# Let it exit after the unmount; kill it if it does not.
		for _ in $(seq 50); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
		kill "$server" 2>/dev/null || true
		wait "$server" 2>/dev/null || true
		unset "SERVERS[$1]"
	fi
}
unmount() { # every mount of this script
	local mp
	for mp in "${!SERVERS[@]}"; do unmount_at "$mp"; done
	unmount_at "$MP"
}
trap unmount EXIT

mount_at() { # mount_at MP DIR [OPTION...]
	unmount_at "$1"
	mkdir -p "$1"
	# The server's stdout is not the script's: a command substitution around a mount
	# would otherwise wait for the server to exit.
	"$BIN" mount "$1" --session-dir "$2" "${@:3}" </dev/null >/dev/null 2>>"$OUT/mount.log" &
	SERVERS[$1]=$!
	for _ in $(seq 400); do
		if grep -q " $1 fuse" /proc/mounts && stat -f "$1" >/dev/null 2>&1; then
			return 0
		fi
		kill -0 "${SERVERS[$1]}" 2>/dev/null || die "gjcfs mount exited: $(tail -3 "$OUT/mount.log")"
		sleep 0.05
	done
	die "not mounted after 20 s"
}
mount_store() { # mount_store DIR [OPTION...]: at MP
	mount_at "$MP" "$@"
}

generate_sessions() { # generate_sessions DIR N SIZE
	mkdir -p "$1"
	seq "$2" | xargs -P "$(nproc)" -I{} "$BIN" generate "$1/s{}.jsonl" --size "$3" --seed {} 2>/dev/null
}

store_of() { # store_of N SIZE: STORE=OUT/store-N (absolute), N sessions of SIZE
	STORE=$OUT/store-$1
	if [ ! -d "$STORE" ]; then
		echo "== writing $1 sessions of $2"
		generate_sessions "$STORE.tmp" "$1" "$2"
		mv "$STORE.tmp" "$STORE"
	fi
	STORE=$(cd "$STORE" && pwd)
}
server_reads() { # server_reads MP -> the read calls its server made so far (one a request)
	awk '/^syscr:/ { print $2 }' "/proc/${SERVERS[$1]}/io"
}

declare -a SUMMARY=()
FAILED=0
check() { # check LABEL OK(0|1) TEXT
	if [ "$2" = 1 ]; then SUMMARY+=("PASS  $1: $3"); else
		SUMMARY+=("FAIL  $1: $3")
		FAILED=1
	fi
}
mean_of() { # mean_of CSV NAME -> seconds
	awk -F, -v n="$2" '$1 == n { print $2 }' "$1"
}
ms() { # ms SECONDS -> milliseconds, rounded
	awk -v t="$1" 'BEGIN { printf "%.0f", t * 1000 }'
}
ratio() { # ratio A B -> A / B, one decimal
	awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'
}
at_most() { # at_most X LIMIT -> 1 if X <= LIMIT, else 0
	awk -v x="$1" -v l="$2" 'BEGIN { print (x <= l) ? 1 : 0 }'
}

if ! command -v hyperfine >/dev/null; then
	echo "$BENCH: installing hyperfine" >&2
	apt-get update -qq && apt-get install -y -qq hyperfine >/dev/null ||
		die "hyperfine is missing and could not be installed"
fi
command -v fusermount3 >/dev/null || die "fusermount3 is missing (apt-get install fuse3)"
[ -e /dev/fuse ] || die "/dev/fuse is missing"

cargo build --release --quiet || die "cargo build --release failed"

echo "== machine"
echo "nproc: $(nproc)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
