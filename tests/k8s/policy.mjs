// k8s/policy offline: the ValidatingAdmissionPolicy that keeps roshmd's
// socket directory read-only in tenant pods, and its binding.
//   node policy.mjs POLICY.yaml EXAMPLE.yaml OVERLAY.yaml
// POLICY: `kubectl kustomize k8s/policy`; EXAMPLE: the rendered example
// application; OVERLAY: a rendered overlay (for roshmd's own pod).
// What runs here: every CEL expression is parsed and evaluated by
// @bufbuild/cel (a CEL implementation checked against the CEL spec's
// conformance tests) on pods built below and on the pods of the example and
// of roshmd's DaemonSet; the binding's namespaceSelector is evaluated by
// matchLabels/matchExpressions rules written out here. What does not: the
// API server's own CEL environment (its type check of the expressions
// against the Pod schema, its cost limits, Kubernetes' CEL libraries, which
// these expressions do not use), and its admission chain.
import { readFileSync } from "node:fs";
import { isCelError, parse, run } from "@bufbuild/cel";
import { parseAllDocuments } from "yaml";

const load = (f) => parseAllDocuments(readFileSync(f, "utf8")).map((d) => d.toJS()).filter(Boolean);
const [polDocs, appDocs, ovlDocs] = process.argv.slice(2, 5).map(load);
const problems = [];
const bad = (msg) => problems.push(msg);

const pol = polDocs.find((d) => d.kind === "ValidatingAdmissionPolicy");
const bind = polDocs.find((d) => d.kind === "ValidatingAdmissionPolicyBinding");
if (!pol || !bind) {
  console.log("no ValidatingAdmissionPolicy with its binding");
  process.exit(1);
}
if (pol.apiVersion !== "admissionregistration.k8s.io/v1") bad(`policy: apiVersion ${pol.apiVersion}`);
if (bind.spec.policyName !== pol.metadata.name) bad("binding: names another policy");
if (!bind.spec.validationActions?.includes("Deny")) bad("binding: does not Deny");
if (pol.spec.failurePolicy !== "Fail") bad("policy: failurePolicy is not Fail");

// every expression parses (a syntax error would only show when the API
// server refuses the policy)
const exprs = [
  ...(pol.spec.matchConditions ?? []).map((c) => [`matchConditions ${c.name}`, c.expression]),
  ...(pol.spec.variables ?? []).map((v) => [`variable ${v.name}`, v.expression]),
  ...(pol.spec.validations ?? []).flatMap((v, i) =>
    [[`validation ${i}`, v.expression], ...(v.messageExpression ? [[`messageExpression ${i}`, v.messageExpression]] : [])]),
];
for (const [what, e] of exprs) {
  try { parse(e); } catch (err) { bad(`${what}: ${err.message}`); }
}
if (problems.length) {
  console.log(problems.join("\n"));
  process.exit(1);
}

// JSON as CEL sees an object: maps, lists, ints
const cel = (v) => Array.isArray(v) ? v.map(cel)
  : v && typeof v === "object" ? new Map(Object.entries(v).map(([k, x]) => [k, cel(x)]))
  : Number.isInteger(v) ? BigInt(v) : v;
function evalCel(e, vars, what) {
  let r;
  try { r = run(e, vars); } catch (err) { r = err; }
  if (isCelError(r) || r instanceof Error) throw new Error(`${what}: ${r.message}`);
  return r;
}

// What the API server does for a pod CREATE in a namespace with labels:
// the binding selects the namespace, the policy's constraints the request,
// its matchConditions decide, then every validation must be true.
function labelsMatch(sel, labels) {
  if (!sel) return true;
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const ok = { In: has && e.values.includes(labels[e.key]), NotIn: !has || !e.values.includes(labels[e.key]),
                 Exists: has, DoesNotExist: !has }[e.operator];
    if (ok === undefined) throw new Error(`namespaceSelector: operator ${e.operator}`);
    if (!ok) return false;
  }
  return true;
}
function admit(pod, ns, nsLabels = {}) {
  const labels = { "kubernetes.io/metadata.name": ns, ...nsLabels };
  const selects = (mr) => labelsMatch(mr?.namespaceSelector, labels);
  if (!selects(pol.spec.matchConstraints) || !selects(bind.spec.matchResources)) return "allowed";
  if (!pol.spec.matchConstraints.resourceRules.some((r) => r.resources.includes("pods") &&
      r.operations.includes("CREATE"))) return "allowed";
  const object = cel({ apiVersion: "v1", kind: "Pod", ...pod, metadata: { ...pod.metadata, namespace: ns } });
  const request = cel({ operation: "CREATE", namespace: ns, kind: { group: "", version: "v1", kind: "Pod" } });
  const vars = { object, oldObject: null, request, variables: new Map() };
  for (const c of pol.spec.matchConditions ?? [])
    if (evalCel(c.expression, vars, `matchConditions ${c.name}`) !== true) return "allowed";
  for (const v of pol.spec.variables ?? []) vars.variables.set(v.name, evalCel(v.expression, vars, `variable ${v.name}`));
  for (const [i, v] of (pol.spec.validations ?? []).entries()) {
    const r = evalCel(v.expression, vars, `validation ${i}`);
    if (typeof r !== "boolean") throw new Error(`validation ${i}: not a bool`);
    if (!r) return "denied";
  }
  return "allowed";
}

const podOf = (d) => ({ metadata: { name: d.metadata.name, ...d.spec.template.metadata }, spec: d.spec.template.spec });
const hostPod = (name, path, mount = {}, where = "containers") => ({
  metadata: { name },
  spec: {
    containers: [{ name: "c", image: "busybox:1.36", ...(where === "containers" ? { volumeMounts: [{ name: "h", mountPath: "/host", ...mount }] } : {}) }],
    ...(where !== "containers" ? { [where]: [{ name: "x", image: "busybox:1.36", volumeMounts: [{ name: "h", mountPath: "/host", ...mount }] }] } : {}),
    volumes: [{ name: "h", hostPath: { path } }],
  },
});
// a client pod as the example has it: the socket directory read-only
const safePod = hostPod("client", "/run/roshm", { readOnly: true });
const withSpec = (pod, spec) => ({ ...pod, spec: { ...pod.spec, ...spec } });
// a securityContext on the container, or on an init / ephemeral one added beside it
const withSc = (pod, sc, where = "containers") => where === "containers"
  ? withSpec(pod, { containers: pod.spec.containers.map((c) => ({ ...c, securityContext: sc })) })
  : withSpec(pod, { [where]: [{ name: "x", image: "busybox:1.36", securityContext: sc }] });
const withC = (pod, extra) => withSpec(pod, { containers: pod.spec.containers.map((c) => ({ ...c, ...extra })) });
const withVol = (pod, hp) => withSpec(pod, { volumes: pod.spec.volumes.map((v) => ({ ...v, hostPath: { ...v.hostPath, ...hp } })) });
// kubectl debug node/N: the node's / at /host, not read-only
const nodeDebugger = hostPod("node-debugger-n1-abcde", "/");
// the SR-IOV network operator's config daemon: / at /host, read-write
const sriovDaemon = hostPod("sriov-network-config-daemon-x", "/");
const roshmd = ovlDocs.find((d) => d.kind === "DaemonSet" && d.metadata.name === "roshmd");
const appPods = appDocs.filter((d) => ["Deployment", "Job"].includes(d.kind));
if (!roshmd) bad("overlay: no roshmd DaemonSet");
if (appPods.length < 2) bad("example: fewer than two workloads");

const cases = [
  ...appPods.map((d) => [`example ${d.kind}/${d.metadata.name}`, podOf(d), "demo", {}, "allowed"]),
  ...(roshmd ? [["roshmd's pod in roshm-system", podOf(roshmd), "roshm-system", {}, "allowed"],
                ["roshmd's pod (socket directory read-write) in demo", podOf(roshmd), "demo", {}, "denied"]] : []),
  ["/run/roshm read-only", hostPod("p", "/run/roshm", { readOnly: true }), "demo", {}, "allowed"],
  ["/run/roshm read-write", hostPod("p", "/run/roshm"), "demo", {}, "denied"],
  ["/run/roshm readOnly: false", hostPod("p", "/run/roshm", { readOnly: false }), "demo", {}, "denied"],
  ["/run/roshm/ (trailing slash) read-write", hostPod("p", "/run/roshm/"), "demo", {}, "denied"],
  ["/var/run/roshm read-write", hostPod("p", "/var/run/roshm"), "demo", {}, "denied"],
  ["/run/roshm/sub read-write", hostPod("p", "/run/roshm/sub"), "demo", {}, "denied"],
  ["/run read-write", hostPod("p", "/run"), "demo", {}, "denied"],
  ["/var/run read-write", hostPod("p", "/var/run"), "demo", {}, "denied"],
  ["/var/run/roshm read-only", hostPod("p", "/var/run/roshm", { readOnly: true }), "demo", {}, "allowed"],
  ["/run/roshm/ read-only", hostPod("p", "/run/roshm/", { readOnly: true }), "demo", {}, "allowed"],
  // any other host path, however it is spelled, read-only or not
  ...["/run/roshmx", "/var/lib/kubelet", "/run", "/", "//run", "/run//roshm", "/run/./roshm",
      "/./run", "//", "/var//run", "/run/roshm/.", "/run/roshm/sub", "/proc/1/root",
      "/proc/1/root/run", "/tmp/link-to-run"].flatMap((p) => [
    [`${p} read-write`, hostPod("p", p), "demo", {}, "denied"],
    [`${p} read-only`, hostPod("p", p, { readOnly: true }), "demo", {}, "denied"]]),
  ["/run/roshm read-write in an init container", hostPod("p", "/run/roshm", {}, "initContainers"), "demo", {}, "denied"],
  ["/run/roshm read-write in an ephemeral container", hostPod("p", "/run/roshm", {}, "ephemeralContainers"), "demo", {}, "denied"],
  ["/run/roshm read-only in an init container", hostPod("p", "/run/roshm", { readOnly: true }, "initContainers"), "demo", {}, "allowed"],
  // the host's namespaces, privileges and capabilities
  ...[["hostPID", { hostPID: true }], ["hostIPC", { hostIPC: true }], ["hostNetwork", { hostNetwork: true }]]
    .map(([what, spec]) => [`${what}`, withSpec(safePod, spec), "demo", {}, "denied"]),
  ["hostPID: false", withSpec(safePod, { hostPID: false }), "demo", {}, "allowed"],
  ["privileged", withSc(safePod, { privileged: true }), "demo", {}, "denied"],
  ["privileged in an init container", withSc(safePod, { privileged: true }, "initContainers"), "demo", {}, "denied"],
  ["privileged in an ephemeral container", withSc(safePod, { privileged: true }, "ephemeralContainers"), "demo", {}, "denied"],
  ["privileged: false", withSc(safePod, { privileged: false }), "demo", {}, "allowed"],
  ["procMount Unmasked", withSc(safePod, { procMount: "Unmasked" }), "demo", {}, "denied"],
  ["SYS_ADMIN added", withSc(safePod, { capabilities: { add: ["SYS_ADMIN"] } }), "demo", {}, "denied"],
  ["SYS_PTRACE added beside IPC_LOCK", withSc(safePod, { capabilities: { add: ["IPC_LOCK", "SYS_PTRACE"] } }), "demo", {}, "denied"],
  ["IPC_LOCK and NET_BIND_SERVICE added", withSc(safePod, { capabilities: { add: ["IPC_LOCK", "NET_BIND_SERVICE"] } }), "demo", {}, "allowed"],
  ["capabilities dropped", withSc(safePod, { capabilities: { drop: ["ALL"] } }), "demo", {}, "allowed"],
  // the allowed mount, made to write the host's directory another way
  ["/run/roshm read-only with subPath", hostPod("p", "/run/roshm", { readOnly: true, subPath: "roshmd.sock.lock" }), "demo", {}, "denied"],
  ["/run/roshm read-only with subPathExpr", hostPod("p", "/run/roshm", { readOnly: true, subPathExpr: "$(POD)" }), "demo", {}, "denied"],
  ["/run/roshm read-only, HostToContainer propagation", hostPod("p", "/run/roshm", { readOnly: true, mountPropagation: "HostToContainer" }), "demo", {}, "denied"],
  ["/run/roshm read-only, propagation None", hostPod("p", "/run/roshm", { readOnly: true, mountPropagation: "None" }), "demo", {}, "allowed"],
  ["/run/roshm type DirectoryOrCreate", withVol(safePod, { type: "DirectoryOrCreate" }), "demo", {}, "denied"],
  ["/run/roshm type Socket", withVol(safePod, { type: "Socket" }), "demo", {}, "denied"],
  ["/run/roshm type Directory", withVol(safePod, { type: "Directory" }), "demo", {}, "allowed"],
  // Pod Security baseline's other rules
  ["a hostPort", withC(safePod, { ports: [{ containerPort: 80, hostPort: 9472 }] }), "demo", {}, "denied"],
  ["a containerPort without hostPort", withC(safePod, { ports: [{ containerPort: 80 }] }), "demo", {}, "allowed"],
  ["hostPort 0", withC(safePod, { ports: [{ containerPort: 80, hostPort: 0 }] }), "demo", {}, "allowed"],
  ["seccomp Unconfined (pod)", withSpec(safePod, { securityContext: { seccompProfile: { type: "Unconfined" } } }), "demo", {}, "denied"],
  ["seccomp Unconfined (container)", withSc(safePod, { seccompProfile: { type: "Unconfined" } }), "demo", {}, "denied"],
  ["seccomp RuntimeDefault", withSpec(safePod, { securityContext: { seccompProfile: { type: "RuntimeDefault" } } }), "demo", {}, "allowed"],
  ["AppArmor Unconfined (field)", withSc(safePod, { appArmorProfile: { type: "Unconfined" } }), "demo", {}, "denied"],
  ["AppArmor unconfined (annotation)", { ...safePod, metadata: { name: "p", annotations: { "container.apparmor.security.beta.kubernetes.io/c": "unconfined" } } }, "demo", {}, "denied"],
  ["AppArmor runtime/default (annotation)", { ...safePod, metadata: { name: "p", annotations: { "container.apparmor.security.beta.kubernetes.io/c": "runtime/default" } } }, "demo", {}, "allowed"],
  ["SELinux type spc_t", withSc(safePod, { seLinuxOptions: { type: "spc_t" } }), "demo", {}, "denied"],
  ["SELinux user set (pod)", withSpec(safePod, { securityContext: { seLinuxOptions: { user: "system_u" } } }), "demo", {}, "denied"],
  ["SELinux type container_t, level set", withSc(safePod, { seLinuxOptions: { type: "container_t", level: "s0:c1,c2" } }), "demo", {}, "allowed"],
  ["an unsafe sysctl", withSpec(safePod, { securityContext: { sysctls: [{ name: "kernel.msgmax", value: "1" }] } }), "demo", {}, "denied"],
  ["a safe sysctl", withSpec(safePod, { securityContext: { sysctls: [{ name: "net.ipv4.tcp_syncookies", value: "1" }] } }), "demo", {}, "allowed"],
  ["windows hostProcess", withSc(safePod, { windowsOptions: { hostProcess: true } }), "demo", {}, "denied"],
  // volume types: restricted's list
  ...["gitRepo", "flexVolume", "nfs", "iscsi", "rbd", "cephfs", "glusterfs"].map((t) =>
    [`a ${t} volume`, withSpec(safePod, { volumes: [...safePod.spec.volumes, { name: "v", [t]: {} }] }), "demo", {}, "denied"]),
  ...["configMap", "secret", "emptyDir", "projected", "downwardAPI", "persistentVolumeClaim", "csi", "ephemeral"].map((t) =>
    [`a ${t} volume`, withSpec(safePod, { volumes: [...safePod.spec.volumes, { name: "v", [t]: {} }] }), "demo", {}, "allowed"]),
  ["privileged hostPID pod in a namespace labelled exempt", withSc(withSpec(safePod, { hostPID: true }), { privileged: true }), "ops", { "roshm.io/socket-policy": "exempt" }, "allowed"],
  ["kubectl debug node/N in default", nodeDebugger, "default", {}, "denied"],
  ["kubectl debug node/N -n kube-system", nodeDebugger, "kube-system", {}, "allowed"],
  ["kubectl debug node/N in a namespace labelled exempt", nodeDebugger, "ops", { "roshm.io/socket-policy": "exempt" }, "allowed"],
  ["kubectl debug node/N, label with another value", nodeDebugger, "ops", { "roshm.io/socket-policy": "yes" }, "denied"],
  ...["sriov-network-operator", "openshift-sriov-network-operator", "nvidia-network-operator"].map((ns) =>
    [`SR-IOV config daemon in ${ns}`, sriovDaemon, ns, {}, "allowed"]),
  ["the same daemon in a tenant namespace", sriovDaemon, "demo", {}, "denied"],
];
let n = 0;
for (const [what, pod, ns, nsLabels, want] of cases) {
  let got;
  try { got = admit(pod, ns, nsLabels); } catch (e) { got = `error: ${e.message}`; }
  if (got !== want) bad(`${what} (namespace ${ns}): ${got}, want ${want}`);
  n++;
}
if (problems.length) {
  console.log(problems.join("\n"));
  process.exit(1);
}
console.log(`${exprs.length} expressions parsed, ${n} pods admitted or denied as expected`);
