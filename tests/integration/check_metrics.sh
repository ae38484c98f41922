#!/usr/bin/env bash
# /metrics and the DPDK telemetry commands of a real roshmd: the page passes
# `promtool check metrics` and its counters move with real operations; the
# /roshm/* telemetry commands answer over the telemetry socket; bad requests
# get 404/405 and a silent connection does not block the control thread.
# /readyz: 200 with a file registry; a roshmd whose etcd is unreachable starts
# anyway, answers 503, counts its failed lease requests, and stops promptly.
#   check_metrics.sh ROSHMD ROSHM_PERF
set -u
roshmd=$1 perf=$2
. "$(dirname "$0")/../lib/cleanup.sh"
fail() { echo "FAIL: $*"; [[ -f "$d/roshmd.log" ]] && cat "$d/roshmd.log"; exit 1; }
for t in curl promtool python3; do
  command -v $t >/dev/null || { echo "check_metrics: skipped: $t missing (make deps installs it)"; exit 77; }
done
d=$(th_tmpdir metrics)
port=$(th_ports 2) || exit 1
prefix=$(th_prefix cm)
pid=
trap 'th_stop "$pid"; th_eal_rm "$prefix"; th_eal_rm "${prefix}e"; th_rmdir "$d"' EXIT
cat > "$d/r.conf" <<CONF
node = "metrics-node";
socket = "$d/r.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error" ];
registry: { dir = "$d/reg"; };
admin: { token_file = "$d/admin.token"; };   # its lock too: nothing left in /var/lib/roshm
metrics: { listen = "127.0.0.1:$port"; };
CONF
"$roshmd" -c "$d/r.conf" > "$d/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $d/r.sock ]] && break; sleep 0.1; done
[[ -S $d/r.sock ]] || fail "roshmd did not start"
url=http://127.0.0.1:$port/metrics
curl -sf "$url" > "$d/m0" || fail "GET /metrics"
# real operations: a latency sweep through the poller (local transport)
"$perf" -s "$d/r.sock" -n 200 sweep 4096 > "$d/perf.log" 2>&1 || fail "roshm-perf: $(tail -3 "$d/perf.log")"
curl -sf "$url" > "$d/m1" || fail "GET /metrics after work"
promtool check metrics < "$d/m1" > "$d/lint" 2>&1 || fail "promtool: $(cat "$d/lint")"
val() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
s0=$(val roshm_sqes_total "$d/m0"); s1=$(val roshm_sqes_total "$d/m1")
[[ -n "$s1" && "$s1" -gt "$s0" ]] || fail "roshm_sqes_total did not grow ($s0 -> $s1)"
[[ "$s1" -ge 2600 ]] || fail "roshm_sqes_total $s1 < the 2600+ operations run"
grep -q '^roshm_build_info{version="[^"]*",node="metrics-node"} 1$' "$d/m1" || fail "roshm_build_info"
bc=$(val 'roshm_batch_size_count' "$d/m1"); bi=$(val 'roshm_batch_size_bucket{le="+Inf"}' "$d/m1")
[[ -n "$bc" && "$bc" = "$bi" && "$bc" -gt 0 ]] || fail "batch histogram count $bc, +Inf $bi"
# buckets never decrease
awk -F'[ {}]' '/^roshm_batch_size_bucket/ { if ($NF < last) exit 1; last = $NF }' "$d/m1" ||
  fail "batch histogram buckets decrease"
grep -q '^roshm_tenant_sqes_total{tenant="default"} [1-9]' "$d/m1" || fail "per-tenant counter"
# latency and completions by transport and op (tests/integration/test_metrics.c
# checks them exactly); no rows for a transport this node does not have
lw=$(val 'roshm_op_latency_seconds_count{transport="local",op="write"}' "$d/m1")
cw=$(val 'roshm_completions_total{transport="local",op="write",status="ok"}' "$d/m1")
[[ -n "$lw" && "$lw" -gt 0 && "$lw" = "$cw" ]] || fail "local write latency count $lw, completions $cw"
grep -q 'transport="verbs"' "$d/m1" && fail "rows for verbs, which this node does not have"
[[ $(val 'roshm_registry_latency_seconds_count{backend="file",op="put"}' "$d/m1") -gt 0 ]] ||
  fail "no registry put counted"
# counters survive the client's departure (they never go down)
t1=$(val 'roshm_tenant_sqes_total{tenant="default"}' "$d/m1")
curl -sf "$url" > "$d/m2"
t2=$(val 'roshm_tenant_sqes_total{tenant="default"}' "$d/m2")
[[ "$t2" -ge "$t1" ]] || fail "tenant counter went down ($t1 -> $t2)"
# HTTP edges
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/nope")
[[ $code = 404 ]] || fail "unknown path: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url")
[[ $code = 405 ]] || fail "POST: $code"
# readiness: the file registry is always ready
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")
[[ $code = 200 ]] || fail "/readyz with the file registry: $code"
grep -q '^roshm_registry_ready 1$' "$d/m1" || fail "roshm_registry_ready"
# the standard process metrics
st=$(sed -n 's/^process_start_time_seconds \([0-9.e+]*\)$/\1/p' "$d/m1")
python3 -c 'import sys, time; t = float(sys.argv[1]); sys.exit(0 if abs(time.time() - t) < 300 else 1)' "${st:-0}" ||
  fail "process_start_time_seconds '$st' is not when roshmd started"
for k in process_cpu_seconds_total process_resident_memory_bytes process_open_fds process_max_fds; do
  grep -q "^$k [0-9]" "$d/m1" || fail "$k missing"
done
# liveness: the control thread answers and the poller (asleep or busy) is not stuck
body=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$port/healthz")
[[ $body = $'ok\n 200' || $body = 'ok 200' ]] || fail "/healthz: $body"
# a client that connects and says nothing: others are still served at once
exec 7<>/dev/tcp/127.0.0.1/$port
timeout 2 curl -sf "$url" > /dev/null || fail "a silent connection blocked /metrics"
exec 7>&-
# telemetry
sockf=$(ls /var/run/dpdk/$prefix/dpdk_telemetry.v2 2>/dev/null || ls /run/user/*/dpdk/$prefix/dpdk_telemetry.v2 2>/dev/null)
[[ -S "$sockf" ]] || fail "no telemetry socket for prefix $prefix"
python3 - "$sockf" > "$d/tel" 2>&1 <<'PY' || fail "telemetry: $(cat "$d/tel")"
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
json.loads(s.recv(16384))
def cmd(c):
    s.send(c.encode())
    return json.loads(s.recv(1 << 20))[c]
st = cmd("/roshm/stats")
assert st["node"] == "metrics-node", st
assert st["sqes"] >= 2600, st
assert len(st["batch_log2_hist"]) == 12, st
assert isinstance(cmd("/roshm/regions"), dict)
assert isinstance(cmd("/roshm/peers"), dict)
lst = json.loads((s.send(b"/"), s.recv(1 << 20))[1])["/"]
assert "/roshm/stats" in lst and "/roshm/regions" in lst and "/roshm/peers" in lst, lst
print("telemetry ok:", st["sqes"], "sqes")
PY
kill -TERM $pid; wait $pid; rc=$?
pid=
[[ $rc = 0 ]] || fail "roshmd exit $rc"
# etcd unreachable (nothing listens on port 1): roshmd runs, not ready
cat > "$d/e.conf" <<CONF
node = "metrics-etcd";
socket = "$d/e.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--file-prefix", "${prefix}e",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { backend = "etcd"; endpoints = "http://127.0.0.1:1"; secret_file = "$d/reg.secret"; };
admin: { token_file = "$d/admin-e.token"; };
metrics: { listen = "127.0.0.1:$((port + 1))"; };
CONF
head -c 32 /dev/urandom | base64 > "$d/reg.secret"
"$roshmd" -c "$d/e.conf" > "$d/roshmd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -S $d/e.sock ]] && break; sleep 0.1; done
[[ -S $d/e.sock ]] || fail "roshmd with an unreachable etcd did not start"
sleep 1
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$((port + 1))/readyz")
[[ $code = 503 ]] || fail "/readyz with etcd unreachable: $code"
curl -sf "http://127.0.0.1:$((port + 1))/metrics" > "$d/me"
grep -q '^roshm_registry_ready 0$' "$d/me" || fail "roshm_registry_ready with etcd unreachable"
# the lease grants that found nobody, by reason
ue=$(val 'roshm_registry_errors_total{backend="etcd",op="lease",reason="unreachable"}' "$d/me")
[[ -n "$ue" && "$ue" -gt 0 ]] || fail "etcd unreachable: lease errors '$ue'"
promtool check metrics < "$d/me" > "$d/lint" 2>&1 || fail "promtool (etcd): $(cat "$d/lint")"
grep -q 'etcd: http://127.0.0.1:1/v3/lease/grant' "$d/roshmd.log" || fail "no log line about etcd"
kill -0 $pid || fail "roshmd exited without etcd"
t0=$(date +%s%N)
kill -TERM $pid; wait $pid; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[[ $rc = 0 ]] || fail "roshmd (etcd unreachable) exit $rc"
[[ $ms -lt 5000 ]] || fail "roshmd (etcd unreachable) took $ms ms to stop"
echo "check_metrics: roshmd without etcd stopped in $ms ms"
echo "check_metrics: $(cat "$d/tel"); 1 passed, 0 failed"
