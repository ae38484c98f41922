#!/usr/bin/env bash
# make bench: every metric of DESIGN section 9 this machine can measure, each
# next to its baseline measured in the same run; results merged into
# build/bench-results.json and printed as a table.
set -euo pipefail
B=${1:-build}
OUT=$B/bench-results.json
rm -f "$OUT"

echo "== local path (one roshmd) =="
D=/tmp/roshm-bench
rm -rf "$D"; mkdir -p "$D"
"$B/dataplane/roshmd" -c perf/bench.conf >"$D/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $D/roshmd.sock ]] && break; sleep 0.1; done
[[ -S $D/roshmd.sock ]] || { cat "$D/roshmd.log"; exit 1; }
"$B/perf/roshm-perf" -s "$D/roshmd.sock" --json "$OUT" all
"$B/perf/roshm-perf" -s "$D/roshmd.sock" -n 2000 sweep 1048576
kill -TERM "$pid"; wait "$pid"

echo
echo "== two nodes over the tcp transport =="
D2=/tmp/roshm-bench-2n
rm -rf "$D2"; mkdir -p "$D2"
source "$(dirname "$0")/../scripts/twonode.sh"
srv=() 
cleanup() {
  for p in "${srv[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${srv[@]}"; do wait "$p" 2>/dev/null || true; done
  twonode_down >/dev/null 2>&1 || true
}
trap cleanup EXIT
# Pollers sleep as soon as they are idle: two roshmd, their clients and the
# kernel's TCP work share this machine's two cores.
twonode_up "$B" "$D2" 0
echo "bench: $TN_MODE"
bg_a "$B/perf/roshm-perf" -s "$SOCK_A" serve bench-target 8388608 >"$D2/serve.log" 2>&1
srv+=("$BG_PID")
bg_a "$B/perf/roshm-perf" -s "$SOCK_A" serve bench-txn 1048576 64 512 >"$D2/serve-txn.log" 2>&1
srv+=("$BG_PID")
bg_a "$B/perf/roshm-perf" tcp-server "$ADDR_A" 7600 >"$D2/tcp-server.log" 2>&1
srv+=("$BG_PID")
redis_port=$((PORT_A + 100))
redis_opt=()
if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
  bg_a redis-server --bind "$ADDR_A" --port "$redis_port" --save "" --appendonly no \
    --protected-mode no --daemonize no >"$D2/redis.log" 2>&1
  srv+=("$BG_PID")
  redis_opt=(--redis "$ADDR_A:$redis_port")
else
  echo "bench: redis-server/redis-benchmark missing: tcp_4k_vs_redis_set not measured"
fi
sleep 0.5
in_b "$B/perf/roshm-perf" -s "$SOCK_B" --remote default/bench-target --peer "$ADDR_A:7600" \
  "${redis_opt[@]}" -n 5000 --json "$OUT" tcp
echo
echo "== transactions over tcp: commit latency beside a plain WRITE =="
in_b "$B/perf/roshm-perf" -s "$SOCK_B" --remote default/bench-txn -n 2000 --json "$OUT" txn
cleanup
trap - EXIT
echo
echo "== verbs over Soft-RoCE: two qemu VMs (TCG), roshm beside perftest on the same rxe devices =="
# Several minutes under TCG; SKIP_VERBS=1 leaves it out.
if [[ -n "${SKIP_VERBS:-}" ]]; then
  echo "bench: verbs skipped (SKIP_VERBS)"
else
  rc=0
  BENCH_JSON=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT") VM_TIMEOUT=900 \
    tests/softroce/run2.sh "$B" bench_verbs guest_bench_verbs.sh 'guest: roshm-perf exit 0' || rc=$?
  [[ $rc = 77 ]] && echo "bench: verbs not measured (Soft-RoCE VMs need qemu, busybox, perftest: make deps)"
  [[ $rc != 0 && $rc != 77 ]] && echo "bench: verbs run failed (VM consoles above)"
fi
echo
echo "== all metrics ($OUT); targets and how to read them: docs/performance.md =="
python3 - "$OUT" <<'PY' 2>/dev/null || cat "$OUT"
import json, sys
rows = json.load(open(sys.argv[1]))
print(f" {'metric':42} {'roshm':>12} {'baseline':>12} {'unit':8} {'ratio':>7} {'target':>8}  met")
for r in rows:
    print(f" {r['metric']:42} {r['value']:12.3f} {r['baseline']:12.3f} {r['unit']:8} {r['ratio']:7.3f} {r['target']:>8}  {'yes' if r['met'] else 'NO'}")
PY
