#!/usr/bin/env bash
# roshm-perf's modes, each for a moment (tiny iteration counts), against
# real roshmd processes, so that the harness of `make bench` cannot rot: the
# metrics file and every sweep (CSV, JSON, gnuplot script) must be well
# formed and hold what each mode measures. No speed is asserted: a test
# is no benchmark (DESIGN section 9). The modes: all, sweep, batch,
# clients, fair (two tenants with tokens), restart (SIGKILL + restart by
# roshm-perf), tcp-sweep and peers (two roshmd on loopback, tcp transport);
# perf/plot.sh draws the plots with gnuplot, and says so without it.
#   check_perf.sh ROSHMD ROSHM_PERF SRC
set -u
roshmd=$1 perf=$2 src=$3
. "$(dirname "$0")/../lib/cleanup.sh"
command -v python3 >/dev/null || { echo "check_perf: skipped: python3 missing"; exit 77; }
d=$(th_tmpdir perf)
pids=() prefixes=()
cleanup() {
  local p
  for p in "${pids[@]}"; do th_stop "$p"; done
  for p in "${prefixes[@]}"; do th_eal_rm "$p"; done
  th_rmdir "$d"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$d"/*.log; do [[ -e $f ]] && { echo "---- $f"; tail -30 "$f"; }; done
  exit 1
}
tok_a=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
tok_b=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
# conf NAME [EXTRA]: a roshmd config in $d/NAME.conf, socket $d/NAME.sock
conf() {
  local prefix
  prefix=$(th_prefix "$1")
  prefixes+=("$prefix")
  cat > "$d/$1.conf" <<CONF
node = "perf-$1";
socket = "$d/$1.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "$prefix",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
dataplane: { idle = "adaptive"; idle_spin_us = 200; };
registry: { dir = "$d/registry"; secret_file = "$d/registry.secret"; revalidate_ms = 500; };
admin: { token_file = "$d/$1.admin-token"; };
tenants = (
  { name = "default"; token = ""; },
  { name = "perf-a"; token = "$tok_a"; },
  { name = "perf-b"; token = "$tok_b"; }
);
quota: { clients = 16; };
${2:-}
CONF
}
start() {
  "$roshmd" -c "$d/$1.conf" > "$d/$1.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [[ -S $d/$1.sock ]] && return 0; sleep 0.1; done
  fail "roshmd $1 did not start"
}
head -c 32 /dev/urandom | base64 > "$d/registry.secret"
cp "$d/registry.secret" "$d/cluster.secret"
out=$d/bench res=$d/results.json
quick=(-t 1 -n 200 --seconds 0.01 -q --json "$res" --out "$out")

# ---- one roshmd: the local modes ----
conf local
start local
S=$d/local.sock
"$perf" -s "$S" "${quick[@]}" all > "$d/all.log" 2>&1 || fail "roshm-perf all"
"$perf" -s "$S" "${quick[@]}" sweep 65536 > "$d/sweep.log" 2>&1 || fail "roshm-perf sweep"
"$perf" -s "$S" "${quick[@]}" batch > "$d/batch.log" 2>&1 || fail "roshm-perf batch"
"$perf" -s "$S" "${quick[@]}" clients 4 > "$d/clients.log" 2>&1 || fail "roshm-perf clients"
ROSHM_TENANT=perf-a ROSHM_TOKEN=$tok_a ROSHM_FLOOD_TENANT=perf-b ROSHM_FLOOD_TOKEN=$tok_b \
  "$perf" -s "$S" "${quick[@]}" fair > "$d/fair.log" 2>&1 || fail "roshm-perf fair"
# the flooder must be another tenant, with its token
ROSHM_FLOOD_TENANT=default "$perf" -s "$S" -q fair > "$d/fair-same.log" 2>&1
[[ $? = 2 ]] || fail "fair with one tenant on both sides did not refuse (exit 2)"
ROSHM_FLOOD_TENANT=perf-b ROSHM_FLOOD_TOKEN=wrong "$perf" -s "$S" -q fair > "$d/fair-tok.log" 2>&1 &&
  fail "fair with a wrong flood token ran"
grep -q "attach as the flooding tenant" "$d/fair-tok.log" || fail "wrong token: $(cat "$d/fair-tok.log")"
# progress goes to stderr (not with -q), tables end the output
"$perf" -s "$S" -t 2 -n 200 --seconds 0.01 batch > "$d/progress.out" 2> "$d/progress.err" ||
  fail "roshm-perf batch with progress"
grep -q "^roshm-perf: batch 4: 2/2 trials$" "$d/progress.err" || fail "no progress line: $(head -3 "$d/progress.err")"
grep -q "#bytes     #iterations    BW peak\[MiB/sec\]    BW average\[MiB/sec\]   MsgRate\[Mpps\]" \
  "$d/progress.out" || fail "no perftest-style bandwidth table"
grep -q "t_typical\[usec\]" "$d/sweep.log" || fail "no perftest-style latency table"
th_stop "${pids[0]}"

# ---- restart: roshm-perf runs roshmd itself, kills it twice ----
conf restart
"$perf" -s "$d/restart.sock" "${quick[@]}" --kills 2 --daemon-log "$d/restart-roshmd.log" \
  restart "$roshmd" "$d/restart.conf" > "$d/restart.log" 2>&1 || fail "roshm-perf restart"
pgrep -f "$d/restart.conf" > /dev/null && fail "roshm-perf restart left its roshmd running"

# ---- two roshmd over tcp on loopback: tcp-sweep ----
port=$(th_ports 2) || exit 1
conf ta "transport: { tcp: { enabled = true; listen = \"127.0.0.1\"; port = $port; secret_file = \"$d/cluster.secret\"; }; };"
conf tb "transport: { tcp: { enabled = true; listen = \"127.0.0.1\"; port = $((port + 1)); secret_file = \"$d/cluster.secret\"; }; };"
start ta
start tb
"$perf" -s "$d/ta.sock" serve perf-target 4194304 > "$d/serve.log" 2>&1 &
pids+=($!)
"$perf" tcp-server 127.0.0.1 $((port + 2)) > "$d/tcp-server.log" 2>&1 &
pids+=($!)
"$perf" -s "$d/tb.sock" --remote default/perf-target --peer 127.0.0.1:$((port + 2)) "${quick[@]}" \
  tcp-sweep > "$d/tcp-sweep.log" 2>&1 || fail "roshm-perf tcp-sweep"
"$perf" -s "$d/tb.sock" --remote default/perf-target "${quick[@]}" peers > "$d/peers.log" 2>&1 ||
  fail "roshm-perf peers"

# ---- what they wrote ----
python3 "$src/perf/results_table.py" --check "$res" > /dev/null || fail "$res: $(python3 "$src/perf/results_table.py" --check "$res" 2>&1)"
# perftest's inf (its clock calibration failed under TCG) is no baseline:
# verbs_compat.py leaves such a trial out, and a kind left with none is not
# measured (no ratio of 0 that "meets" its target); results_table refuses one
vc=$d/vc; mkdir -p "$vc"
printf ' 64 1000 0.50 0.60 inf 0.70\n' > "$vc/atomic_lat-native-1.txt"
printf ' 64 1000 0.50 0.60 812.5 0.70\n' > "$vc/atomic_lat-roshm-1.txt"
printf ' 64 1000 0.50 0.60 500.0 0.70\n' > "$vc/read_lat-native-1.txt"
printf ' 64 1000 0.50 0.60 nan 0.70\n' > "$vc/read_lat-native-2.txt"
printf ' 64 1000 0.50 0.60 600.0 0.70\n' > "$vc/read_lat-roshm-1.txt"
printf ' 64 1000 0.50 0.60 550.0 0.70\n' > "$vc/read_lat-busy-1.txt"
vout=$(python3 "$src/perf/verbs_compat.py" "$vc" "$d/vc.json" 2>&1) || fail "verbs_compat.py: $vout"
echo "$vout" | grep -q "verbs_compat_atomic_lat_vs_native .*not measured" || fail "verbs_compat.py: $vout"
echo "$vout" | grep -qE "verbs_compat_read_lat_vs_native +600.000 +500.000 .*1 trials without" || fail "verbs_compat.py: $vout"
python3 - "$d/vc.json" <<'PY' || fail "verbs_compat.py's rows (above)"
import json, sys
rows = {r["metric"]: r for r in json.load(open(sys.argv[1]))}
assert "verbs_compat_atomic_lat_vs_native" not in rows, rows
assert abs(rows["verbs_compat_read_lat_vs_native"]["ratio"] - 1.2) < 1e-9, rows
# native beside a busy loop: beside the row, not in its ratio
busy = rows["verbs_compat_read_lat_vs_native"]["busy"]
assert busy["value"] == 550.0 and abs(busy["ratio"] - 600 / 550) < 1e-9, busy
PY
printf '[{"metric":"x","value":1.0,"unit":"us","target":"<= 1.20","met":true,"baseline":Infinity,"ratio":0.0}]' > "$d/bad.json"
python3 "$src/perf/results_table.py" --check "$d/bad.json" > /dev/null 2>&1 && fail "results_table.py took an inf baseline"
python3 - "$res" "$out" <<'PY' || fail "results or sweeps malformed (above)"
import csv, json, math, os, sys
res, out = sys.argv[1], sys.argv[2]
rows = {r["metric"]: r for r in json.load(open(res))}
want = ["nop_rtt_vs_rte_ring", "local_write_64b_rate_vs_floor",
        "local_write_4k_bw_vs_cross_core_copy", "local_write_64k_bw_vs_cross_core_copy",
        "local_write_1m_bw_vs_cross_core_copy", "scale_4_clients_rate_vs_1", "roshmd_rss_4_clients_mib",
        "victim_p99_under_flood_vs_idle", "victim_p99_under_flood_vs_idle_bulk",
        "victim_p99_under_flood_vs_idle_small", "restart_blackout_ms"]
bad = [m for m in want if m not in rows]
if bad:
    sys.exit(f"metrics missing: {bad}")
for m in want:
    r = rows[m]
    if not r["value"] > 0:
        sys.exit(f"{m}: value {r['value']} is not positive")
    if r.get("baseline") is not None and not (r["baseline"] > 0 and abs(r["ratio"] - r["value"] / r["baseline"]) < 1e-3 * r["ratio"]):
        sys.exit(f"{m}: ratio {r['ratio']} is not value/baseline")
for m in ("roshmd_rss_4_clients_mib", "restart_blackout_ms"):
    if rows[m].get("baseline") is not None:
        sys.exit(f"{m}: an absolute metric with a baseline")
if rows["victim_p99_under_flood_vs_idle"]["ratio"] != max(rows["victim_p99_under_flood_vs_idle_bulk"]["ratio"],
                                                         rows["victim_p99_under_flood_vs_idle_small"]["ratio"]):
    sys.exit("victim_p99_under_flood_vs_idle is not the worse of bulk and small")
sweeps = {"local_lat": 1, "local_bw": 1, "batch": 9, "clients": 3, "fair": 1, "fair_cdf": 50,
          "restart": 2, "tcp_lat": 1, "tcp_bw": 1, "peers": 1}
for name, nrows in sweeps.items():
    with open(os.path.join(out, name + ".csv")) as f:
        table = list(csv.reader(f))
    head, body = table[0], table[1:]
    if len(body) < nrows:
        sys.exit(f"{name}.csv: {len(body)} rows, want at least {nrows}")
    for row in body:
        if len(row) != len(head) or not all(math.isfinite(float(v)) for v in row):
            sys.exit(f"{name}.csv: bad row {row} under {head}")
    j = json.load(open(os.path.join(out, name + ".json")))
    if j["sweep"] != name or j["columns"] != head or len(j["rows"]) != len(body):
        sys.exit(f"{name}.json does not match {name}.csv")
    for r, row in zip(j["rows"], body):
        if [r[c] for c in head] != [float(v) for v in row] and not all(
                abs(r[c] - float(v)) <= 1e-5 * max(1, abs(r[c])) for c, v in zip(head, row)):
            sys.exit(f"{name}.json row {r} differs from the CSV's {row}")
    gp = open(os.path.join(out, name + ".gp")).read()
    if f"set output '{name}.png'" not in gp or f"'{name}.csv' using 1:" not in gp:
        sys.exit(f"{name}.gp does not draw {name}.png from {name}.csv")
# the clients sweep counts 1, 2, 4 clients; the restart sweep has one row per kill
if [float(r[0]) for r in list(csv.reader(open(os.path.join(out, "clients.csv"))))[1:]] != [1, 2, 4]:
    sys.exit("clients.csv: not 1, 2, 4 clients")
print(f"check_perf: {len(want)} metrics, {len(sweeps)} sweeps well formed")
PY
# the plots: without gnuplot a message and success; with it, a PNG per sweep
msg=$(PATH=/nonexistent /bin/bash "$src/perf/plot.sh" "$out") || fail "plot.sh without gnuplot failed"
[[ $msg == *"gnuplot not found"* ]] || fail "plot.sh without gnuplot: '$msg'"
ls "$out"/*.png > /dev/null 2>&1 && fail "PNGs without gnuplot?"
if command -v gnuplot > /dev/null; then
  "$src/perf/plot.sh" "$out" > "$d/plot.log" 2>&1 || fail "plot.sh"
  for f in "$out"/*.gp; do
    png=${f%.gp}.png
    [[ $(head -c 4 "$png" 2>/dev/null | od -An -c | tr -d ' ') == 211PNG ]] || fail "$png is not a PNG"
  done
else
  echo "check_perf: gnuplot missing (make deps installs gnuplot-nox): plots not checked"
fi
echo "check_perf: 1 passed, 0 failed"
