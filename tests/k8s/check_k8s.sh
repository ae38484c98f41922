#!/usr/bin/env bash
# The Kubernetes manifests (k8s/): every overlay and the example render with
# kustomize, validate against the Kubernetes schemas (npm kubernetes-models)
# plus roshm's own rules (validate.mjs: among them etcd serves TLS clients
# with client certificates, a NetworkPolicy lets only roshmd reach its client
# port, roshmd mounts the client certificate), and their roshmd.conf passes
# roshmd --check-config. A file breaking each rule must be refused. The
# admission policy's CEL runs on pods (policy.mjs), and the kustomization
# docs/operations.md has the reader write (Install step 5) renders.
#   check_k8s.sh SRC BUILD ROSHMD
set -u
src=$1 build=$2 roshmd=$3
for t in node npm kubectl; do
  command -v $t >/dev/null || { echo "check_k8s: skipped: $t missing"; exit 77; }
done
fail() { echo "FAIL: $*"; exit 1; }
. "$src/tests/lib/cleanup.sh"
v=$build/k8s-validate
# @bufbuild/cel runs the admission policy's CEL (tests/k8s/policy.mjs)
if [[ ! -d $v/node_modules/kubernetes-models || ! -d $v/node_modules/@bufbuild/cel ]]; then
  mkdir -p "$v"
  (cd "$v" && { [[ -f package.json ]] || npm init -y >/dev/null; } &&
   npm install --no-audit --no-fund --silent kubernetes-models@4 yaml@2 @bufbuild/cel@0.6.1) ||
    fail "npm install kubernetes-models yaml @bufbuild/cel"
fi
cp "$src/tests/k8s/validate.mjs" "$src/tests/k8s/policy.mjs" "$v/"
d=$(th_tmpdir k8s)
trap 'th_rmdir "$d"' EXIT
# No usable secret ships: the source renders only once scripts/k8s-secrets.sh
# wrote them (into a copy here, as an operator does into their checkout).
cp -r "$src/k8s" "$d/k8s"
rm -rf "$d"/k8s/*/*/secrets
kubectl kustomize "$d/k8s/overlays/tcp" > /dev/null 2> "$d/err" && fail "rendered without secrets"
grep -q "secrets/cluster.secret" "$d/err" || fail "no secrets: unclear error: $(cat "$d/err")"
"$src/scripts/k8s-secrets.sh" "$d/k8s" > "$d/sec.log" || fail "k8s-secrets.sh: $(cat "$d/sec.log")"
"$src/scripts/k8s-secrets.sh" "$d/k8s" > "$d/sec2.log" || fail "k8s-secrets.sh again"
grep -q "keeping the secrets" "$d/sec2.log" || fail "k8s-secrets.sh replaced existing secrets"
cmp -s "$d/k8s/overlays/tcp/secrets/tenants.conf" "$d/k8s/overlays/sriov-roce/secrets/tenants.conf" ||
  fail "overlays got different tenants.conf"
tok=$(cat "$d/k8s/examples/app/secrets/token")
grep -q "name = \"default\"; token = \"$tok\"" "$d/k8s/overlays/tcp/secrets/tenants.conf" ||
  fail "the example app's token is not the default tenant's"
(( $(base64 -d "$d/k8s/overlays/tcp/secrets/cluster.secret" | wc -c) == 32 )) || fail "cluster secret not 32 bytes"
# more tenants on a second run: added (same token in every overlay), the
# existing ones and the cluster secret kept
cp "$d/k8s/overlays/tcp/secrets/cluster.secret" "$d/cs.before"
"$src/scripts/k8s-secrets.sh" "$d/k8s" default teamb > "$d/sec3.log" || fail "k8s-secrets.sh default teamb"
grep -q "added tenants teamb" "$d/sec3.log" || fail "k8s-secrets.sh did not say it added teamb: $(cat "$d/sec3.log")"
grep -q "name = \"default\"; token = \"$tok\"" "$d/k8s/overlays/tcp/secrets/tenants.conf" || fail "teamb's addition changed default's token"
grep -q 'name = "teamb"; token = "[0-9a-f]\{48\}"' "$d/k8s/overlays/tcp/secrets/tenants.conf" || fail "teamb not added"
cmp -s "$d/k8s/overlays/tcp/secrets/tenants.conf" "$d/k8s/overlays/sriov-roce/secrets/tenants.conf" ||
  fail "overlays got different tenants.conf after adding a tenant"
cmp -s "$d/cs.before" "$d/k8s/overlays/tcp/secrets/cluster.secret" || fail "adding a tenant changed the cluster secret"
# new secrets (the overlays' secrets/ deleted): the example's stale token is
# replaced, and said so
mkdir "$d/keep" && cp -r "$d/k8s/overlays/tcp/secrets" "$d/keep/tcp" && cp -r "$d/k8s/overlays/sriov-roce/secrets" "$d/keep/sriov-roce"
rm -rf "$d"/k8s/overlays/*/secrets
"$src/scripts/k8s-secrets.sh" "$d/k8s" > "$d/sec4.log" || fail "k8s-secrets.sh after deleting the overlays' secrets"
grep -q "token was not tenant default's token" "$d/sec4.log" || fail "stale example token not reported: $(cat "$d/sec4.log")"
grep -q "name = \"default\"; token = \"$(cat "$d/k8s/examples/app/secrets/token")\"" "$d/k8s/overlays/tcp/secrets/tenants.conf" ||
  fail "the example's stale token was not replaced"
rm -rf "$d"/k8s/overlays/*/secrets
cp -r "$d/keep/tcp" "$d/k8s/overlays/tcp/secrets" && cp -r "$d/keep/sriov-roce" "$d/k8s/overlays/sriov-roce/secrets"
printf '%s' "$tok" > "$d/k8s/examples/app/secrets/token"
# Pod Security Admission: roshm-system runs roshmd (hostPath, IPC_LOCK, host
# network), the example mounts hostPath: both say "privileged" explicitly
for o in overlays/tcp examples/app; do
  kubectl kustomize "$d/k8s/$o" | grep -q '^    pod-security.kubernetes.io/enforce: privileged$' ||
    fail "$o: its Namespace has no pod-security.kubernetes.io/enforce label"
done
# docs/operations.md, Install step 5: the sriov-roce example's kustomization
# as the doc has the reader write it, at the top of a checkout (here the
# copy), its `kubectl apply -k` run as `kubectl kustomize`: both pods get
# the DaemonSet's nodeSelector
python3 - "$src/docs/operations.md" > "$d/doc-step5.sh" <<'PY' || fail "docs/operations.md: no block marked for check_k8s"
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r'(?m)^( *)<!-- check_k8s runs this block.*-->\n\1```sh\n(.*?)^\1```$', t, re.S)
if not m:
    sys.exit(1)
ind = m.group(1)
print(''.join(l[len(ind):] if l.startswith(ind) else l for l in m.group(2).splitlines(True)), end='')
PY
mkdir -p "$d/bin"
printf '#!/bin/sh\n[ "$1 $2" = "apply -k" ] && [ $# = 3 ] || { echo "unexpected: kubectl $*" >&2; exit 1; }\nexec %q kustomize "$3"\n' \
  "$(command -v kubectl)" > "$d/bin/kubectl"
chmod +x "$d/bin/kubectl"
(cd "$d" && PATH=$d/bin:$PATH bash -e doc-step5.sh) > "$d/out.yaml" 2> "$d/err" ||
  fail "docs/operations.md step 5 does not render: $(cat "$d/err")"
out=$(node "$v/validate.mjs" "$d/out.yaml") || fail "docs/operations.md step 5: $out"
node --input-type=module - "$d/out.yaml" "$v" <<'JS' || fail "docs/operations.md step 5: a pod without the sriov nodeSelector"
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
const { parseAllDocuments } = createRequire(process.argv[3] + "/node_modules/")("yaml");
const w = parseAllDocuments(readFileSync(process.argv[2], "utf8")).map((d) => d.toJS())
  .filter((d) => d && ["Deployment", "Job"].includes(d.kind));
process.exit(w.length === 2 && w.every((d) =>
  d.spec.template.spec.nodeSelector?.["feature.node.kubernetes.io/network-sriov.capable"] === "true") ? 0 : 1);
JS
echo "check_k8s: docs/operations.md step 5 (k8s/apps/board): $out"
# the example Job goes away after it finished (a Job cannot be re-applied)
kubectl kustomize "$d/k8s/examples/app" | grep -q 'ttlSecondsAfterFinished:' || fail "board-writer: no ttlSecondsAfterFinished"
for o in overlays/tcp overlays/sriov-roce examples/app; do
  kubectl kustomize "$d/k8s/$o" > "$d/out.yaml" 2> "$d/err" || fail "kustomize $o: $(cat "$d/err")"
  out=$(node "$v/validate.mjs" "$d/out.yaml") || fail "$o: $out"
  echo "check_k8s: $o: $out"
done
out=$(node "$v/validate.mjs" "$src/k8s/overlays/sriov-roce/sriov-node-policy.example.yaml") || fail "policy: $out"
# k8s/policy: the ValidatingAdmissionPolicy keeping /run/roshm read-only in
# tenant pods, and its binding: schemas, then its CEL parsed and run on pods
# (the example's, roshmd's, kubectl debug node's, the SR-IOV config
# daemon's, ...) in the namespaces it must cover or leave out (policy.mjs)
kubectl kustomize "$d/k8s/policy" > "$d/out.yaml" 2> "$d/err" || fail "kustomize policy: $(cat "$d/err")"
out=$(node "$v/validate.mjs" "$d/out.yaml") || fail "policy: $out"
echo "check_k8s: policy: $out"
kubectl kustomize "$d/k8s/examples/app" > "$d/app.yaml" && kubectl kustomize "$d/k8s/overlays/tcp" > "$d/tcp.yaml" ||
  fail "kustomize example or tcp"
out=$(node "$v/policy.mjs" "$d/out.yaml" "$d/app.yaml" "$d/tcp.yaml") || fail "policy: $out"
echo "check_k8s: policy: $out"
# ... and it can fail: without kube-system left out, kubectl debug there is denied
sed '/^        - kube-system$/d' "$d/out.yaml" > "$d/bad-policy.yaml"
out=$(node "$v/policy.mjs" "$d/bad-policy.yaml" "$d/app.yaml" "$d/tcp.yaml") && fail "a policy that denies kube-system accepted"
[[ "$out" == *"kubectl debug node/N -n kube-system (namespace kube-system): denied, want allowed"* ]] ||
  fail "kube-system's denial not reported: $out"
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
            "Deployment/app2: container roshm-drain: preStop must drain its own pod" \
            "Deployment/app3: a Deployment whose pods own regions needs strategy Recreate"; do
  [[ "$out" == *"$want"* ]] || fail "bad.yaml: '$want' not reported in: $out"
done
# generated names carry a hash of their contents (an edit rolls the
# DaemonSet), and everything that names them follows
kubectl kustomize "$d/k8s/overlays/tcp" > "$d/out.yaml"
cm=$(sed -n 's/^  name: \(roshmd-config-[a-z0-9]*\)$/\1/p' "$d/out.yaml" | head -1)
sec=$(sed -n 's/^  name: \(roshm-secrets-[a-z0-9]*\)$/\1/p' "$d/out.yaml" | head -1)
[[ -n $cm && -n $sec ]] || fail "ConfigMap or Secret without a content hash in its name"
grep -q "name: $cm\$" "$d/out.yaml" && grep -q "secretName: $sec\$" "$d/out.yaml" ||
  fail "the DaemonSet does not mount $cm and $sec"
# roshmd reads its configuration and secrets from files: no Role grants it
# (or anyone) access to them
grep -q '^kind: \(Cluster\)\?Role\(Binding\)\?$' "$d/out.yaml" && fail "the base grants API access (a Role or RoleBinding)"
kubectl kustomize "$d/k8s/examples/app" | grep -q "name: demo-roshm-token-[a-z0-9]*$" ||
  fail "the example's token Secret is not generated"
# sriov-roce: the DaemonSet asks for the resource the example policy makes
# (the operator's default prefix + its resourceName), the network attachment
# names the same, and the DaemonSet runs only where the policy configures VFs
pol=$src/k8s/overlays/sriov-roce/sriov-node-policy.example.yaml
res="openshift.io/$(sed -n 's/^  resourceName: *//p' "$pol")"
sel=$(sed -n '/^  nodeSelector:/{n;s/^ *//;p}' "$pol")
kubectl kustomize "$d/k8s/overlays/sriov-roce" > "$d/out.yaml"
grep -q "^ *$res: \"1\"" "$d/out.yaml" || fail "sriov-roce: the DaemonSet does not request $res"
grep -q "resourceName: $res\$" "$d/out.yaml" || fail "sriov-roce: the network attachment is not for $res"
grep -q "^ *$sel\$" "$d/out.yaml" || fail "sriov-roce: no nodeSelector '$sel' as in the policy"
# an overlay without the etcd NetworkPolicy, and a roshmd given etcd's server key
kubectl kustomize "$d/k8s/overlays/sriov-roce" > "$d/out.yaml"
node -e 'const f = require("fs"), p = process.argv[1];
  f.writeFileSync(p, f.readFileSync(p, "utf8").split(/^---$/m).filter((x) => !/kind: NetworkPolicy/.test(x)).join("---"))' "$d/out.yaml"
out=$(node "$v/validate.mjs" "$d/out.yaml") && fail "an etcd without a NetworkPolicy accepted"
[[ "$out" == *"etcd: no NetworkPolicy restricts ingress to its pods"* ]] || fail "missing policy not reported: $out"
kubectl kustomize "$d/k8s/overlays/tcp" | sed 's/key: client.key/key: server.key/' > "$d/out.yaml"
out=$(node "$v/validate.mjs" "$d/out.yaml") && fail "roshmd with etcd's server key accepted"
[[ "$out" == *"roshmd: mounts etcd's server.key"* ]] || fail "server key not reported: $out"
# the shipped configurations use the TLS files the DaemonSet mounts
kubectl kustomize "$d/k8s/overlays/tcp" | grep -q 'mountPath: /etc/roshm/etcd-tls' ||
  fail "roshmd does not mount /etc/roshm/etcd-tls"
for o in tcp sriov-roce; do
  c=$src/k8s/overlays/$o/roshmd.conf
  grep -q 'endpoints = "https://' "$c" || fail "$o roshmd.conf: etcd endpoints are not https"
  for k in cacert cert key; do
    grep -q " $k = \"/etc/roshm/etcd-tls/" "$c" || fail "$o roshmd.conf: registry.$k is not under /etc/roshm/etcd-tls"
  done
done
# the configurations the overlays ship, with the tenants k8s-secrets.sh made
for o in tcp sriov-roce; do
  sed "s#/etc/roshm/secret/tenants.conf#$d/k8s/overlays/$o/secrets/tenants.conf#" "$src/k8s/overlays/$o/roshmd.conf" > "$d/r.conf"
  ROSHM_ADVERTISE=198.18.0.1 "$roshmd" --check-config "$d/r.conf" > "$d/cc" 2>&1 || fail "$o roshmd.conf: $(cat "$d/cc")"
done
echo "check_k8s: 1 passed, 0 failed"
