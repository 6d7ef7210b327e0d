#!/usr/bin/env bash
# Runs the prompt-history benchmark (benches/history.rs) and prints criterion's median of
# each benchmark as a Markdown table. Arguments go to the benchmark (a filter, criterion
# options); GJCFS_BENCH_HISTORY_ROWS and GJCFS_BENCH_HISTORY_DB are described there.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo bench --bench history -- "$@"
python3 - "${CARGO_TARGET_DIR:-target}/criterion" <<'PY'
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
print("| benchmark | median | mean |")
print("| --- | --- | --- |")
for group in ["history_search", "history_search_agent_sql", "history_add"]:
    for est in sorted((root / group).glob("*/new/estimates.json")):
        d = json.loads(est.read_text())
        def fmt(ns):
            for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
                if ns >= scale:
                    return f"{ns / scale:.3g} {unit}"
            return f"{ns:.3g} ns"
        name = f"{group}/{est.parent.parent.name}"
        print(f"| {name} | {fmt(d['median']['point_estimate'])} | {fmt(d['mean']['point_estimate'])} |")
PY
