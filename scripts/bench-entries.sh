#!/usr/bin/env bash
# Benchmark of sessions of many small entries: time and memory of the CLI and of a mount,
# next to each file's size.
#
# Builds the release binary and writes once, under target/bench/entries/, a v5 session of
# N small entries (about 200 bytes each, user and assistant messages in one chain, written
# by one awk pass) for each N in SIZES. For each session:
#   1. the CLI: wall time (hyperfine, RUNS runs; min(RUNS, 3) at 1,000,000 entries and
#      more) and peak resident memory (/usr/bin/time -f %M, one run) of
#      `gjcfs entries FILE`, `gjcfs context FILE` (both to /dev/null) and
#      `gjcfs append FILE --agent-dir DIR < one-line` (on a fresh copy of the file before
#      each run); the memory also as a multiple of the file's size;
#   2. a mount of a fresh copy of the session's directory (`gjcfs mount MP --session-dir
#      DIR`): the server's VmRSS and VmHWM (/proc/PID/status) after `ls entries/ | wc -l`,
#      after a first append (which opens the session for writing: timed, in ms) and APPENDS
#      more (each its own `printf … >> entries/new`, timed, in appends/s)
#      and after `cat context.json`.
# Prints a table of every figure. Target: the peak memory of `gjcfs entries` and of
# `gjcfs append` at most 2.5x the file's size at 300,000 and at 1,000,000 entries (checked
# for the sizes of SIZES among them). With BEFORE=PATH (another gjcfs binary) everything is
# measured for it too, the CLI in the same hyperfine runs, so both are compared under the
# same load; the targets are checked for the new binary only.
#
# Environment: SIZES (default "30 100000 300000 1000000"), RUNS (default 5), APPENDS
# (default 50), BEFORE (optional).
set -euo pipefail

SIZES=${SIZES:-30 100000 300000 1000000}
RUNS=${RUNS:-5}
APPENDS=${APPENDS:-50}
BEFORE=${BEFORE:-}
SESSION_ID=019b8e21-46cc-710a-ac1d-39560cac6399

cd "$(dirname "$0")/.."
BENCH=bench-entries
OUT=target/bench/entries
# shellcheck source=scripts/lib-bench.sh
. scripts/lib-bench.sh
[ -z "$BEFORE" ] || [ -x "$BEFORE" ] || die "BEFORE=$BEFORE is not an executable"
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is missing"

# The run's agent directory (empty: no blobs) and caches, removed at the end.
RUN=$PWD/$OUT/run
rm -rf "$RUN"
mkdir -p "$RUN/agent"
trap 'unmount; rm -rf "$RUN"' EXIT
export XDG_CACHE_HOME=$RUN/cache
printf '{"role":"user","content":"one more line"}\n' >"$RUN/one-line.jsonl"

# DIR holding `s.jsonl`, a v5 session of ENTRIES small messages, each the child of the one
# before, user and assistant in turn. Made once: reruns reuse it.
entries_store() { # entries_store DIR ENTRIES
	[ -d "$1" ] && return 0
	rm -rf "$1.tmp"
	mkdir -p "$1.tmp"
	awk -v n="$2" -v sid="$SESSION_ID" 'BEGIN {
		printf "{\"type\":\"session\",\"version\":5,\"id\":\"%s\",\"timestamp\":\"2026-01-05T12:28:24.140Z\",\"cwd\":\"/w\"}\n", sid
		parent = "null"
		for (i = 1; i <= n; i++) {
			id = sprintf("%08x", i)
			if (i % 2) message = "\"role\":\"user\""
			else message = "\"role\":\"assistant\",\"provider\":\"anthropic\",\"model\":\"claude\""
			printf "{\"type\":\"message\",\"id\":\"%s\",\"parentId\":%s,\"timestamp\":\"2026-01-05T12:28:25.000Z\",\"message\":{%s,\"content\":\"line %d of many small messages\",\"timestamp\":1767616105000}}\n", id, parent, message, i
			parent = "\"" id "\""
		}
	}' >"$1.tmp/s.jsonl"
	mv "$1.tmp" "$1"
}

peak_kib() { # peak_kib COMMAND... -> its peak resident memory in KiB (stdin passed on)
	/usr/bin/time -f %M -o "$RUN/time" "$@" >/dev/null 2>"$RUN/stderr" ||
		die "$* failed: $(tail -3 "$RUN/stderr")"
	tail -1 "$RUN/time"
}
mib() { # mib KIB -> MiB, one decimal
	awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'
}
times_size() { # times_size KIB BYTES -> the memory as a multiple of the size, two decimals
	awk -v k="$1" -v b="$2" 'BEGIN { printf "%.2f", k * 1024 / b }'
}
status_kib() { # status_kib PID FIELD -> the field of /proc/PID/status, in KiB
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}

bins=("new:$BIN")
[ -z "$BEFORE" ] || bins+=("before:$BEFORE")

declare -A R=()
# measure N: the CLI and the mount of the N-entry session, for each binary.
measure() {
	local n=$1 dir="$OUT/e$1" entry name bin runs cmds=() prepare=() csv
	entries_store "$dir" "$n"
	local file="$dir/s.jsonl" bytes
	bytes=$(stat -c %s "$file")
	R[$n,bytes]=$bytes
	runs=$RUNS
	[ "$n" -lt 1000000 ] || [ "$runs" -le 3 ] || runs=3

	# 1. The CLI. `append` writes to a fresh copy made before every run (not timed).
	for entry in "${bins[@]}"; do
		name=${entry%%:*} bin=${entry#*:}
		cmds+=(-n "$name entries" "$bin entries $file >/dev/null")
		cmds+=(-n "$name context" "$bin context $file --agent-dir $RUN/agent >/dev/null")
	done
	csv="$OUT/cli-$n.csv"
	hyperfine --runs "$runs" --warmup 1 --export-csv "$csv" "${cmds[@]}" >"$OUT/cli-$n.log" 2>&1 ||
		die "hyperfine failed: $(tail -5 "$OUT/cli-$n.log")"
	cmds=()
	for entry in "${bins[@]}"; do
		name=${entry%%:*} bin=${entry#*:}
		prepare+=("cp $file $RUN/append-$name.jsonl")
		cmds+=(-n "$name append" "$bin append $RUN/append-$name.jsonl --agent-dir $RUN/agent <$RUN/one-line.jsonl")
	done
	local acsv="$OUT/append-$n.csv"
	hyperfine --runs "$runs" --warmup 1 --prepare "$(printf '%s && ' "${prepare[@]}")true" \
		--export-csv "$acsv" "${cmds[@]}" >"$OUT/append-$n.log" 2>&1 ||
		die "hyperfine failed: $(tail -5 "$OUT/append-$n.log")"
	for entry in "${bins[@]}"; do
		name=${entry%%:*} bin=${entry#*:}
		R[$name,$n,entries,ms]=$(ms "$(mean_of "$csv" "$name entries")")
		R[$name,$n,context,ms]=$(ms "$(mean_of "$csv" "$name context")")
		R[$name,$n,append,ms]=$(ms "$(mean_of "$acsv" "$name append")")
		R[$name,$n,entries,kib]=$(peak_kib "$bin" entries "$file")
		R[$name,$n,context,kib]=$(peak_kib "$bin" context "$file" --agent-dir "$RUN/agent")
		cp "$file" "$RUN/append-$name.jsonl"
		R[$name,$n,append,kib]=$(peak_kib "$bin" append "$RUN/append-$name.jsonl" --agent-dir "$RUN/agent" <"$RUN/one-line.jsonl")
		rm -f "$RUN/append-$name.jsonl"
		printf '%-6s %7d entries %10d bytes  CLI (%d runs): entries %6d ms %8s MiB (%sx)  context %6d ms %8s MiB (%sx)  append %6d ms %8s MiB (%sx)\n' \
			"$name" "$n" "$bytes" "$runs" \
			"${R[$name,$n,entries,ms]}" "$(mib "${R[$name,$n,entries,kib]}")" "$(times_size "${R[$name,$n,entries,kib]}" "$bytes")" \
			"${R[$name,$n,context,ms]}" "$(mib "${R[$name,$n,context,kib]}")" "$(times_size "${R[$name,$n,context,kib]}" "$bytes")" \
			"${R[$name,$n,append,ms]}" "$(mib "${R[$name,$n,append,kib]}")" "$(times_size "${R[$name,$n,append,kib]}" "$bytes")"
	done

	# 2. The mount, of a fresh copy of the directory for each binary.
	local mp session pid listed t0 t1 i grown
	for entry in "${bins[@]}"; do
		name=${entry%%:*} bin=${entry#*:} mp="$PWD/$OUT/mnt-$name"
		rm -rf "$RUN/work-$name"
		cp -a "$dir" "$RUN/work-$name"
		BIN=$bin mount_at "$mp" "$RUN/work-$name"
		pid=${SERVERS[$mp]}
		session=$mp/sessions/$SESSION_ID
		# shellcheck disable=SC2012 # the count of names, as a user would take it
		listed=$(ls "$session/entries/" | wc -l)
		R[$name,$n,ls,rss]=$(status_kib "$pid" VmRSS)
		# The first write opens the session for writing (a load of the whole file, once);
		# the appends after it are what each further append costs.
		t0=$(date +%s.%N)
		printf '{"role":"user","content":"first"}\n' >>"$session/entries/new"
		t1=$(date +%s.%N)
		R[$name,$n,first]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) * 1000 }')
		t0=$(date +%s.%N)
		for i in $(seq "$APPENDS"); do
			printf '{"role":"user","content":"m %s"}\n' "$i" >>"$session/entries/new"
		done
		t1=$(date +%s.%N)
		R[$name,$n,appends,rss]=$(status_kib "$pid" VmRSS)
		R[$name,$n,rate]=$(awk -v n="$APPENDS" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", n / (b - a) }')
		cat "$session/context.json" >/dev/null
		R[$name,$n,context,rss]=$(status_kib "$pid" VmRSS)
		R[$name,$n,hwm]=$(status_kib "$pid" VmHWM)
		unmount_at "$mp"
		grown=$(($(wc -l <"$RUN/work-$name/s.jsonl") - 2 - n))
		rm -rf "$RUN/work-$name"
		[ "$grown" = "$APPENDS" ] || die "$name: the mount appended $grown entries, not $APPENDS"
		printf '%-6s %7d entries %10d bytes  mount: ls %d names, RSS %s MiB; first append %s ms, %d appends %s/s, RSS %s MiB; context.json, RSS %s MiB; peak %s MiB (%sx)\n' \
			"$name" "$n" "$bytes" "$listed" "$(mib "${R[$name,$n,ls,rss]}")" "${R[$name,$n,first]}" "$APPENDS" "${R[$name,$n,rate]}" \
			"$(mib "${R[$name,$n,appends,rss]}")" "$(mib "${R[$name,$n,context,rss]}")" \
			"$(mib "${R[$name,$n,hwm]}")" "$(times_size "${R[$name,$n,hwm]}" "$bytes")"
	done
}

echo "== sessions of small entries (RUNS=$RUNS, APPENDS=$APPENDS)"
for n in $SIZES; do
	measure "$n"
done

echo
echo "== table (ms: hyperfine mean; MiB: peak resident, (x) its multiple of the file's size)"
fmt='%-6s %8s %11s | %-22s | %-22s | %-22s | %-35s | %8s | %9s\n'
# shellcheck disable=SC2059
printf "$fmt" binary entries "file bytes" "CLI entries ms / MiB" "CLI context ms / MiB" "CLI append ms / MiB" \
	"mount RSS ls/appends/context, peak" "1st ms" "appends/s"
for n in $SIZES; do
	bytes=${R[$n,bytes]}
	for entry in "${bins[@]}"; do
		name=${entry%%:*}
		cli=()
		for cmd in entries context append; do
			kib=${R[$name,$n,$cmd,kib]}
			cli+=("$(printf '%s / %s (%sx)' "${R[$name,$n,$cmd,ms]}" "$(mib "$kib")" "$(times_size "$kib" "$bytes")")")
		done
		mount=$(printf '%s/%s/%s, %s (%sx)' "$(mib "${R[$name,$n,ls,rss]}")" "$(mib "${R[$name,$n,appends,rss]}")" \
			"$(mib "${R[$name,$n,context,rss]}")" "$(mib "${R[$name,$n,hwm]}")" "$(times_size "${R[$name,$n,hwm]}" "$bytes")")
		# shellcheck disable=SC2059
		printf "$fmt" "$name" "$n" "$bytes" "${cli[@]}" "$mount" "${R[$name,$n,first]}" "${R[$name,$n,rate]}"
	done
done

for n in $SIZES; do
	[ "$n" = 300000 ] || [ "$n" = 1000000 ] || continue
	for cmd in entries append; do
		x=$(times_size "${R[new,$n,$cmd,kib]}" "${R[$n,bytes]}")
		check "$cmd memory at $n" "$(at_most "$x" 2.5)" \
			"gjcfs $cmd peak $(mib "${R[new,$n,$cmd,kib]}") MiB for a $(mib "$(awk -v b="${R[$n,bytes]}" 'BEGIN { print b / 1024 }')") MiB file (${x}x, target <= 2.5x)"
	done
done
echo
echo "== summary"
[ "${#SUMMARY[@]}" = 0 ] || printf '%s\n' "${SUMMARY[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$FAILED"
