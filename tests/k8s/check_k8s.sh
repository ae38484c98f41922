#!/usr/bin/env bash
# The Kubernetes manifests (k8s/): every overlay and the example render with
# kustomize, validate against the Kubernetes schemas (npm kubernetes-models)
# plus roshm's own rules (validate.mjs: among them etcd serves TLS clients
# with client certificates, a NetworkPolicy lets only roshmd reach its client
# port, roshmd mounts the client certificate), and their roshmd.conf passes
# roshmd --check-config. A file breaking each rule must be refused.
#   check_k8s.sh SRC BUILD ROSHMD
set -u
src=$1 build=$2 roshmd=$3
for t in node npm kubectl; do
  command -v $t >/dev/null || { echo "check_k8s: skipped: $t missing"; exit 77; }
done
fail() { echo "FAIL: $*"; exit 1; }
. "$src/tests/lib/cleanup.sh"
v=$build/k8s-validate
if [[ ! -d $v/node_modules/kubernetes-models ]]; then
  mkdir -p "$v"
  (cd "$v" && npm init -y >/dev/null && npm install --no-audit --no-fund --silent kubernetes-models@4 yaml@2) ||
    fail "npm install kubernetes-models yaml"
fi
cp "$src/tests/k8s/validate.mjs" "$v/validate.mjs"
d=$(th_tmpdir k8s)
trap 'th_rmdir "$d"' EXIT
for o in overlays/tcp overlays/sriov-roce examples/app; do
  kubectl kustomize "$src/k8s/$o" > "$d/out.yaml" 2> "$d/err" || fail "kustomize $o: $(cat "$d/err")"
  out=$(node "$v/validate.mjs" "$d/out.yaml") || fail "$o: $out"
  echo "check_k8s: $o: $out"
done
out=$(node "$v/validate.mjs" "$src/k8s/overlays/sriov-roce/sriov-node-policy.example.yaml") || fail "policy: $out"
# the rules can fail
out=$(node "$v/validate.mjs" "$src/tests/k8s/bad.yaml") && fail "bad.yaml accepted"
for want in "latest tag" "IPC_LOCK missing" "cpu must be an integer" "memory requests must equal limits" \
            "hugepages-2Mi requests != limits" "medium Hugepages" "preStop (drain) missing" \
            "terminationGracePeriodSeconds" "Deployment/app" "has no tag" \
            "hugepages-1Gi requested without cpu and memory" "roshm-drain sidecar: preStop" \
            ".spec.replica: unknown field" ".spec.template.spec.containers[1].lifecyle: unknown field" \
            "etcd: clients must be served over https with --client-cert-auth" \
            "StatefulSet/etcd: etcd: does not mount Secret roshm-etcd-tls" \
            "DaemonSet/roshmd: roshmd: does not mount Secret roshm-etcd-tls" \
            "NetworkPolicy/etcd-open: etcd's client port 2379 is open to more than roshmd" \
            "NetworkPolicy/etcd-open: etcd's peer port 2380 is open to more than etcd members" \
            "Deployment/app2: container app: mounts roshmd's socket directory read-write" \
            "Deployment/app2: roshm-drain sidecar: preStop must drain its own pod"; do
  [[ "$out" == *"$want"* ]] || fail "bad.yaml: '$want' not reported in: $out"
done
# an overlay without the etcd NetworkPolicy, and a roshmd given etcd's server key
kubectl kustomize "$src/k8s/overlays/sriov-roce" > "$d/out.yaml"
node -e 'const f = require("fs"), p = process.argv[1];
  f.writeFileSync(p, f.readFileSync(p, "utf8").split(/^---$/m).filter((x) => !/kind: NetworkPolicy/.test(x)).join("---"))' "$d/out.yaml"
out=$(node "$v/validate.mjs" "$d/out.yaml") && fail "an etcd without a NetworkPolicy accepted"
[[ "$out" == *"etcd: no NetworkPolicy restricts ingress to its pods"* ]] || fail "missing policy not reported: $out"
kubectl kustomize "$src/k8s/overlays/tcp" | sed 's/key: client.key/key: server.key/' > "$d/out.yaml"
out=$(node "$v/validate.mjs" "$d/out.yaml") && fail "roshmd with etcd's server key accepted"
[[ "$out" == *"roshmd: mounts etcd's server.key"* ]] || fail "server key not reported: $out"
# the shipped configurations use the TLS files the DaemonSet mounts
kubectl kustomize "$src/k8s/overlays/tcp" | grep -q 'mountPath: /etc/roshm/etcd-tls' ||
  fail "roshmd does not mount /etc/roshm/etcd-tls"
for o in tcp sriov-roce; do
  c=$src/k8s/overlays/$o/roshmd.conf
  grep -q 'endpoints = "https://' "$c" || fail "$o roshmd.conf: etcd endpoints are not https"
  for k in cacert cert key; do
    grep -q " $k = \"/etc/roshm/etcd-tls/" "$c" || fail "$o roshmd.conf: registry.$k is not under /etc/roshm/etcd-tls"
  done
done
# the configurations the overlays ship
printf 'tenants = ( { name = "default"; token = "t"; } );\n' > "$d/tenants.conf"
for o in tcp sriov-roce; do
  sed "s#/etc/roshm/secret/tenants.conf#$d/tenants.conf#" "$src/k8s/overlays/$o/roshmd.conf" > "$d/r.conf"
  ROSHM_ADVERTISE=198.18.0.1 "$roshmd" --check-config "$d/r.conf" > "$d/cc" 2>&1 || fail "$o roshmd.conf: $(cat "$d/cc")"
done
echo "check_k8s: 1 passed, 0 failed"
