#!/usr/bin/env bash
# k8s/monitoring, offline (tests/k8s/monitoring.py does the parsing):
# - the PrometheusRule's rules pass `promtool check rules`, and each alert
#   fires on its scenario, not before its time, with its annotations, and
#   none on healthy series (`promtool test rules`, tests/k8s/monitoring-alerts.yaml);
# - every dashboard query parses (promtool, as recording rules);
# - every metric name the alerts and the dashboard use is one that real
#   roshmd processes declare on /metrics (two nodes, tcp, after real
#   operations between them), and every label they name is one the
#   samples carry; a dashboard and a rule with a made-up name or label are
#   refused;
# - an overlay with the component renders (kubectl kustomize) into a ServiceMonitor
#   that selects the metrics Service, whose port targets roshmd's metrics
#   port, a PrometheusRule of known fields, and the dashboard ConfigMap; the
#   annotations component into the pod scrape annotations; the base alone
#   into neither; with the kube-prometheus component, a Role that lets
#   kube-prometheus's prometheus-k8s discover roshmd. A broken render is refused.
#   check_monitoring.sh SRC ROSHMD ROSHM_PERF
set -u
src=$1 roshmd=$2 perf=$3
for t in promtool python3 kubectl curl; do
  command -v $t >/dev/null || { echo "check_monitoring: skipped: $t missing (make deps installs it)"; exit 77; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "check_monitoring: skipped: python3-yaml missing"; exit 77; }
. "$src/tests/lib/cleanup.sh"
d=$(th_tmpdir monitoring)
pa= pb= ps=
pfx=$(th_prefix mon)
trap 'th_stop "$ps"; [[ -n $ps ]] && th_eal_rm "roshm-perf-$ps"; th_stop "$pa"; th_stop "$pb"; th_eal_rm "${pfx}a"; th_eal_rm "${pfx}b"; th_rmdir "$d"' EXIT
fail() { echo "FAIL: $*"; for l in "$d"/*.log; do [[ -f $l ]] && { echo "---- $l"; tail -20 "$l"; }; done; exit 1; }
mon="python3 $src/tests/k8s/monitoring.py"
rule=$src/k8s/monitoring/prometheusrule.yaml
dash=$src/k8s/monitoring/grafana/roshm.json

# the rules, and each alert on its scenario
$mon rules "$rule" "$d/roshm-rules.yaml" || fail "rules"
promtool check rules "$d/roshm-rules.yaml" > "$d/promtool.out" 2>&1 || fail "promtool check rules: $(cat "$d/promtool.out")"
$mon alert-tests "$rule" "$src/tests/k8s/monitoring-alerts.yaml" "$d/alerts-test.yaml" || fail "alert scenarios"
(cd "$d" && promtool test rules alerts-test.yaml) > "$d/promtool.out" 2>&1 || fail "promtool test rules: $(cat "$d/promtool.out")"
echo "check_monitoring: $(grep -c '^- alert:\|^  - alert:' "$d/roshm-rules.yaml") alerts: rules valid, each fires on its scenario"

# the dashboard's queries parse
$mon dashboard-rules "$dash" "$d/dashboard-rules.yaml" || fail "dashboard"
promtool check rules "$d/dashboard-rules.yaml" > "$d/promtool.out" 2>&1 || fail "a dashboard query: $(cat "$d/promtool.out")"

# two real roshmd (tcp on loopback, a shared file registry), real operations
p=$(th_ports 4) || exit 1
ma=$p mb=$((p + 1)) ta=$((p + 2)) tb=$((p + 3))
head -c 32 /dev/urandom | base64 > "$d/cluster.secret"
for n in a b; do
  if [[ $n == a ]]; then mp=$ma tp=$ta; else mp=$mb tp=$tb; fi
  cat > "$d/$n.conf" <<CONF
node = "mon-$n";
socket = "$d/$n.sock";
eal = [ "--no-huge", "-m", "128", "--no-pci", "--no-shconf", "--file-prefix", "${pfx}$n",
        "--log-level", "lib.eal:error", "--no-telemetry" ];
registry: { dir = "$d/registry"; revalidate_ms = 200; };
transport: { tcp: { enabled = true; listen = "127.0.0.1"; port = $tp; secret_file = "$d/cluster.secret"; }; };
metrics: { listen = "127.0.0.1:$mp"; };
admin: { token_file = "$d/$n.admin-token"; };
CONF
  "$roshmd" -c "$d/$n.conf" > "$d/$n.log" 2>&1 &
  if [[ $n == a ]]; then pa=$!; else pb=$!; fi
done
for _ in $(seq 100); do [[ -S $d/a.sock && -S $d/b.sock ]] && break; sleep 0.1; done
[[ -S $d/a.sock && -S $d/b.sock ]] || fail "roshmd did not start"
# roshm-perf: its EAL runtime directory (roshm-perf-PID) goes when it is done
run_perf() { local log=$1 p rc; shift; "$perf" "$@" > "$d/$log" 2>&1 & p=$!; wait $p; rc=$?; th_eal_rm "roshm-perf-$p"; return $rc; }
"$perf" -s "$d/a.sock" serve mon 1048576 16 256 > "$d/serve.log" 2>&1 &
ps=$!
run_perf sweep.log -s "$d/b.sock" --remote default/mon -n 100 sweep 4096 || fail "remote sweep"
run_perf txn.log -s "$d/b.sock" --remote default/mon -t 1 -n 100 txn || fail "remote transactions"
run_perf local.log -s "$d/a.sock" -n 100 sweep 64 || fail "local sweep"
curl -sf "http://127.0.0.1:$ma/metrics" > "$d/a.prom" || fail "GET /metrics on node a"
curl -sf "http://127.0.0.1:$mb/metrics" > "$d/b.prom" || fail "GET /metrics on node b"
grep -q '^roshm_peer_up{node="mon-a",transport="tcp"} 1$' "$d/b.prom" || fail "node b has no peer mon-a"
grep -q '^roshm_completions_total{transport="tcp",op="txn_commit",status="ok"} [1-9]' "$d/b.prom" ||
  fail "no transaction counted on node b"
out=$($mon names "$rule" "$dash" "$d/a.prom" "$d/b.prom") || fail "names: $out"
echo "check_monitoring: $out"

# ... and the check refuses what roshmd does not export
python3 - "$dash" "$d/bad-dash.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = next(p for p in d["panels"] if p.get("targets"))
p["targets"] += [
    {"refId": "X", "expr": 'rate(roshm_made_up_total[5m])'},
    {"refId": "Y", "expr": 'sum by (colour) (rate(roshm_sqes_total[5m]))'},
    {"refId": "Z", "expr": 'roshm_peer_up{peer="a"}'},
]
json.dump(d, open(sys.argv[2], "w"))
PY
sed 's/roshm_registry_ready == 0/roshm_registry_up == 0/' "$rule" > "$d/bad-rule.yaml"
out=$($mon names "$d/bad-rule.yaml" "$d/bad-dash.json" "$d/a.prom" "$d/b.prom") && fail "made-up names accepted"
for want in "roshmd exports no metric roshm_made_up_total" "no metric it uses has a label colour" \
            "roshm_peer_up has no label peer" "alert RoshmRegistryNotReady: roshmd exports no metric roshm_registry_up"; do
  [[ "$out" == *"$want"* ]] || fail "'$want' not reported in: $out"
done

# rendered with kustomize, as docs/operations.md says: an overlay with the
# component added (its secrets made first), the annotations component
# likewise; the base alone brings neither (no CRDs forced on anyone)
cp -r "$src/k8s" "$d/k8s"
rm -rf "$d"/k8s/*/*/secrets
"$src/scripts/k8s-secrets.sh" "$d/k8s" > "$d/secrets.log" 2>&1 || fail "k8s-secrets.sh: $(cat "$d/secrets.log")"
for m in operator annotations; do
  c=../../monitoring; [[ $m == annotations ]] && c=../../monitoring/annotations
  printf 'components:\n  - %s\n' "$c" >> "$d/k8s/overlays/tcp/kustomization.yaml"
  kubectl kustomize "$d/k8s/overlays/tcp" > "$d/$m.yaml" 2> "$d/err" || fail "kustomize $m: $(cat "$d/err")"
  sed -i '/^components:$/,$d' "$d/k8s/overlays/tcp/kustomization.yaml"
  out=$($mon render $m "$d/$m.yaml") || fail "$m render: $out"
  [[ -n $out ]] && echo "check_monitoring: $out"
done
kubectl kustomize "$d/k8s/base" > "$d/base.yaml" 2> "$d/err" || fail "kustomize base: $(cat "$d/err")"
out=$($mon render base "$d/base.yaml") || fail "base render: $out"
# kube-prometheus (jsonnet): its component gives Prometheus (prometheus-k8s
# in monitoring) discovery in roshm-system
printf 'components:\n  - ../../monitoring\n  - ../../monitoring/kube-prometheus\n' >> "$d/k8s/overlays/tcp/kustomization.yaml"
kubectl kustomize "$d/k8s/overlays/tcp" > "$d/kp.yaml" 2> "$d/err" || fail "kustomize kube-prometheus: $(cat "$d/err")"
sed -i '/^components:$/,$d' "$d/k8s/overlays/tcp/kustomization.yaml"
python3 - "$d/kp.yaml" <<'PY' || fail "kube-prometheus: no Role letting prometheus-k8s discover roshmd in roshm-system"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"] == "prometheus-k8s")
rb = next(d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"] == {
    "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "prometheus-k8s"})
assert role["metadata"]["namespace"] == rb["metadata"]["namespace"] == "roshm-system"
assert {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"} in rb["subjects"]
can = {(g, r, v) for x in role["rules"] for g in x["apiGroups"] for r in x["resources"] for v in x["verbs"]}
for r in ("services", "endpoints", "pods"):
    for v in ("get", "list", "watch"):
        assert ("", r, v) in can, (r, v)
assert any(d["kind"] == "ServiceMonitor" for d in docs)
PY
python3 - "$d/operator.yaml" "$dash" <<'PY' || fail "the dashboard ConfigMap is not the dashboard"
import json, sys, yaml
cm = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "ConfigMap"
          and d["metadata"].get("labels", {}).get("grafana_dashboard") == "1")
assert json.loads(cm["data"]["roshm.json"]) == json.load(open(sys.argv[2]))
PY
# ... and a broken one is refused
python3 - "$d/operator.yaml" "$d/bad.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
ep = next(d for d in docs if d["kind"] == "ServiceMonitor")["spec"]["endpoints"][0]
ep["port"] = "metric"
ep["scrapeTimeOut"] = ep.pop("scrapeTimeout")
next(d for d in docs if d["kind"] == "PrometheusRule")["spec"]["groups"][0]["rules"][0]["labels"] = {}
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
PY
out=$($mon render operator "$d/bad.yaml") && fail "a broken ServiceMonitor accepted"
for want in "endpoint port metric is not a port of Service roshmd-metrics" "endpoints[0].scrapeTimeOut: unknown field" \
            "alert RoshmdDown: severity not one of"; do
  [[ "$out" == *"$want"* ]] || fail "'$want' not reported in: $out"
done
out=$($mon render base "$d/operator.yaml") && fail "operator objects in the base accepted"

th_stop "$ps"; th_eal_rm "roshm-perf-$ps"; ps=
for p in pa pb; do
  kill -TERM "${!p}"; wait "${!p}"; rc=$?
  eval "$p="
  [[ $rc = 0 ]] || fail "roshmd exit $rc"
done
echo "check_monitoring: 1 passed, 0 failed"
