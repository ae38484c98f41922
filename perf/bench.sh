#!/usr/bin/env bash
# make bench: every metric of DESIGN section 9 this machine can measure, each
# next to its baseline measured in the same run; results merged into
# build/bench-results.json and printed as a table; every sweep written as
# CSV and JSON under build/bench/ and drawn there as PNG (perf/plot.sh).
# SKIP_VERBS=1 leaves out the Soft-RoCE VMs (several minutes under TCG).
set -euo pipefail
B=${1:-build}
OUT=$B/bench-results.json
BO=$B/bench
P=$B/perf/roshm-perf
rm -f "$OUT"
rm -rf "$BO"
mkdir -p "$BO"
start=$(date +%s)
# The scale run attaches 256 clients: each holds a socket and two wakeup
# sockets on both sides (roshm-perf raises its own soft limit; roshmd
# inherits this one).
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)"

echo "== local path (one roshmd) =="
D=/tmp/roshm-bench
rm -rf "$D"; mkdir -p "$D"
"$B/dataplane/roshmd" -c perf/bench.conf >"$D/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $D/roshmd.sock ]] && break; sleep 0.1; done
[[ -S $D/roshmd.sock ]] || { cat "$D/roshmd.log"; exit 1; }
"$P" -s "$D/roshmd.sock" --json "$OUT" all
echo
echo "== local sweeps: latency and bandwidth against message size, rate against batch size =="
"$P" -s "$D/roshmd.sock" -t 3 -n 2000 --out "$BO" sweep 8388608
"$P" -s "$D/roshmd.sock" -t 3 --out "$BO" batch
echo
echo "== scale: 1 .. 256 attached clients =="
"$P" -s "$D/roshmd.sock" -t 3 --json "$OUT" --out "$BO" clients 256
echo
echo "== fairness: tenant bench-a's p99 while tenant bench-b floods =="
# the tokens of perf/bench.conf, passed the way libroshm takes them
tok() { sed -n "s/.*name = \"$1\"; token = \"\([^\"]*\)\".*/\1/p" perf/bench.conf; }
ROSHM_TENANT=bench-a ROSHM_TOKEN=$(tok bench-a) ROSHM_FLOOD_TENANT=bench-b \
  ROSHM_FLOOD_TOKEN=$(tok bench-b) "$P" -s "$D/roshmd.sock" -n 5000 --json "$OUT" --out "$BO" fair
kill -TERM "$pid"; wait "$pid"
echo
echo "== restart: SIGKILL of roshmd under a writing client, restarted at once =="
"$P" -s "$D/roshmd.sock" --kills 10 --daemon-log "$D/restart.log" --json "$OUT" --out "$BO" \
  restart "$B/dataplane/roshmd" perf/bench.conf

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
bg_a "$P" -s "$SOCK_A" serve bench-target 8388608 >"$D2/serve.log" 2>&1
srv+=("$BG_PID")
bg_a "$P" -s "$SOCK_A" serve bench-txn 1048576 64 512 >"$D2/serve-txn.log" 2>&1
srv+=("$BG_PID")
bg_a "$P" tcp-server "$ADDR_A" 7600 >"$D2/tcp-server.log" 2>&1
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
in_b "$P" -s "$SOCK_B" --remote default/bench-target --peer "$ADDR_A:7600" \
  "${redis_opt[@]}" -n 5000 --json "$OUT" tcp
echo
echo "== tcp sweeps: latency and bandwidth against message size, beside raw TCP =="
in_b "$P" -s "$SOCK_B" --remote default/bench-target --peer "$ADDR_A:7600" -t 3 -n 2000 \
  --seconds 0.15 --out "$BO" tcp-sweep
echo
echo "== transactions over tcp: commit latency beside a plain WRITE =="
in_b "$P" -s "$SOCK_B" --remote default/bench-txn -n 2000 --json "$OUT" txn
cleanup
trap - EXIT
echo
echo "== peers: one node writing to 1 .. 4 peer nodes over tcp (loopback) =="
D3=/tmp/roshm-bench-peers
rm -rf "$D3"; mkdir -p "$D3/registry"
head -c 32 /dev/urandom | base64 > "$D3/cluster.secret"
ppids=()
pcleanup() {
  for p in "${ppids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${ppids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap pcleanup EXIT
for n in 0 1 2 3 4; do
  cat > "$D3/p$n.conf" <<CONF
node = "peer-$n";
socket = "$D3/p$n.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "roshm-bp-$n",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
dataplane: { idle = "adaptive"; idle_spin_us = 200; };
registry: { dir = "$D3/registry"; secret_file = "$D3/cluster.secret"; revalidate_ms = 500; };
transport: { tcp: { enabled = true; listen = "127.0.0.1"; port = $((7481 + n));
                    secret_file = "$D3/cluster.secret"; }; };
admin: { token_file = "$D3/p$n.admin-token"; };
CONF
  "$B/dataplane/roshmd" -c "$D3/p$n.conf" > "$D3/p$n.log" 2>&1 &
  ppids+=($!)
done
for n in 0 1 2 3 4; do
  for _ in $(seq 100); do [[ -S $D3/p$n.sock ]] && break; sleep 0.1; done
  [[ -S $D3/p$n.sock ]] || { cat "$D3/p$n.log"; exit 1; }
done
targets=
for n in 1 2 3 4; do
  "$P" -s "$D3/p$n.sock" serve "peer-target-$n" 1048576 > "$D3/serve-$n.log" 2>&1 &
  ppids+=($!)
  targets+=${targets:+,}default/peer-target-$n
done
"$P" -s "$D3/p0.sock" --remote "$targets" -t 3 --out "$BO" peers
pcleanup
trap - EXIT
echo
echo "== verbs over Soft-RoCE: two qemu VMs (TCG), roshm beside perftest on the same rxe devices =="
# Several minutes under TCG; SKIP_VERBS=1 leaves it out.
if [[ -n "${SKIP_VERBS:-}" ]]; then
  echo "bench: verbs skipped (SKIP_VERBS)"
else
  rc=0
  BENCH_JSON=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT") BENCH_OUT=$(cd "$BO" && pwd) \
    VM_TIMEOUT=1500 tests/softroce/run2.sh "$B" bench_verbs guest_bench_verbs.sh \
    'guest: roshm-perf exit 0' || rc=$?
  [[ $rc = 77 ]] && echo "bench: verbs not measured (Soft-RoCE VMs need qemu, busybox, perftest: make deps)"
  [[ $rc != 0 && $rc != 77 ]] && echo "bench: verbs run failed (VM consoles above)"
  echo
  echo "== unmodified perftest through libroshm-verbs (roshm0) beside native perftest (rxe0), Soft-RoCE VMs =="
  rc=0
  BENCH_JSON=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT") \
    VM_TIMEOUT=900 tests/softroce/run2.sh "$B" bench_verbs_compat guest_bench_verbs_compat.sh \
    'guest: verbs_compat.py exit 0' || rc=$?
  [[ $rc != 0 && $rc != 77 ]] && echo "bench: verbs-compat run failed (VM consoles above)"
fi
echo
echo "== plots =="
perf/plot.sh "$BO"
echo
echo "== all metrics ($OUT), $(( $(date +%s) - start )) s; targets and how to read them: docs/performance.md =="
python3 perf/results_table.py --print "$OUT" || cat "$OUT"
echo " sweeps: $BO/*.csv, *.json, *.png; make bench-doc writes this run into docs/performance.md"
