#!/usr/bin/env bash
# make bench: start a roshmd, run roshm-perf (baselines measured in the same
# run), write build/bench-results.json, print the table.
set -euo pipefail
B=${1:-build}
D=/tmp/roshm-bench
rm -rf "$D"; mkdir -p "$D"
"$B/dataplane/roshmd" -c perf/bench.conf >"$D/roshmd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do [[ -S $D/roshmd.sock ]] && break; sleep 0.1; done
[[ -S $D/roshmd.sock ]] || { cat "$D/roshmd.log"; exit 1; }
"$B/perf/roshm-perf" -s "$D/roshmd.sock" --json "$B/bench-results.json" all
"$B/perf/roshm-perf" -s "$D/roshmd.sock" -n 5000 sweep
