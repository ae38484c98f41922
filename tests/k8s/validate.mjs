// Validate rendered Kubernetes manifests offline: the kubernetes-models
// schemas, plus what those schemas do not check for roshm. Usage:
//   node validate.mjs FILE...   (multi-document YAML); exit 1 on any problem
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

// Unknown fields: the schemas accept them, so walk each object along the
// models' TypeScript interfaces (their .d.ts files list every field).
const nm = path.join(path.dirname(fileURLToPath(import.meta.url)), "node_modules");
const ifaces = new Map();
function iface(file) {
  if (ifaces.has(file)) return ifaces.get(file);
  const r = { props: null, imports: new Map() };
  if (existsSync(file)) {
    const src = readFileSync(file, "utf8").replace(/\/\*\*[\s\S]*?\*\//g, "");
    for (const m of src.matchAll(/import \{ (\w+) \} from "([^"]+)";/g))
      r.imports.set(m[1], m[2].startsWith(".") ? path.resolve(path.dirname(file), m[2] + ".d.ts")
                                                : path.join(nm, m[2] + ".d.ts"));
    const body = src.match(/export interface I\w+(?: extends [\w, <>]+)? \{([\s\S]*?)\n\}/);
    if (body) r.props = new Map([...body[1].matchAll(/^\s*"([^"]+)"\??: (.+?);?$/gm)].map((m) => [m[1], m[2]]));
  }
  ifaces.set(file, r);
  return r;
}
function unknownFields(obj, file, at, out) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return;
  const d = iface(file);
  if (!d.props) return; // not an interface (a type alias): nothing to compare with
  for (const [k, v] of Object.entries(obj)) {
    const t = d.props.get(k);
    if (t === undefined) { out.push(`${at}.${k}: unknown field`); continue; }
    const m = t.match(/^(?:Array<)?(I\w+)>?$/);
    if (!m || !d.imports.has(m[1])) continue;
    const f = d.imports.get(m[1]);
    if (Array.isArray(v)) v.forEach((e, i) => unknownFields(e, f, `${at}.${k}[${i}]`, out));
    else unknownFields(v, f, `${at}.${k}`, out);
  }
}

const problems = [];
const bad = (doc, msg) => problems.push(`${doc.kind}/${doc.metadata?.name}: ${msg}`);
const crd = {
  "k8s.cni.cncf.io/v1/NetworkAttachmentDefinition": (d) => {
    if (typeof d.spec?.config !== "string") return bad(d, "spec.config must be a string");
    try { JSON.parse(d.spec.config); } catch (e) { bad(d, `spec.config is not JSON: ${e.message}`); }
    if (Object.keys(d.spec).some((k) => k !== "config")) bad(d, "unknown field in spec");
  },
  "sriovnetwork.openshift.io/v1/SriovNetworkNodePolicy": (d) => {
    for (const k of ["resourceName", "numVfs", "nicSelector", "nodeSelector"])
      if (d.spec?.[k] === undefined) bad(d, `spec.${k} is required`);
  },
};
const mediums = new Set(["", "Memory", "HugePages", "HugePages-2Mi", "HugePages-1Gi"]);
const qty = (v) => {
  if (v === undefined) return undefined;
  const m = String(v).match(/^([0-9.]+)(m|Ki|Mi|Gi|Ti)?$/);
  if (!m) return NaN;
  const mul = { m: 1e-3, Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4 }[m[2]] ?? 1;
  return Number(m[1]) * mul;
};

function podChecks(doc, spec) {
  const isRoshmd = doc.kind === "DaemonSet" && doc.metadata?.name === "roshmd";
  const isEtcd = doc.kind === "StatefulSet" && doc.metadata?.name === "etcd";
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    const img = c.image ?? "";
    const tag = img.includes("@") ? "digest" : img.split("/").pop().split(":")[1];
    if (!tag) bad(doc, `container ${c.name}: image ${img} has no tag`);
    if (tag === "latest") bad(doc, `container ${c.name}: image ${img} uses the latest tag`);
    const rq = c.resources?.requests ?? {}, lim = c.resources?.limits ?? {};
    for (const k of Object.keys({ ...rq, ...lim }).filter((k) => k.startsWith("hugepages-"))) {
      if (qty(rq[k]) !== qty(lim[k])) bad(doc, `container ${c.name}: ${k} requests != limits`);
      if (rq.cpu === undefined || rq.memory === undefined)
        bad(doc, `container ${c.name}: ${k} requested without cpu and memory`);
    }
    if (isRoshmd && c.name === "roshmd") {
      for (const k of ["cpu", "memory"])
        if (rq[k] === undefined || qty(rq[k]) !== qty(lim[k]))
          bad(doc, `roshmd: ${k} requests must equal limits (Guaranteed QoS)`);
      if (!Number.isInteger(qty(rq.cpu))) bad(doc, "roshmd: cpu must be an integer (exclusive cores)");
      if (!(c.securityContext?.capabilities?.add ?? []).includes("IPC_LOCK"))
        bad(doc, "roshmd: IPC_LOCK missing (pinned memory regions)");
      if (!c.lifecycle?.preStop) bad(doc, "roshmd: preStop (drain) missing");
      if (!c.readinessProbe || !c.livenessProbe) bad(doc, "roshmd: readiness and liveness probes");
    }
    if (c.name === "roshm-drain" && !c.lifecycle?.preStop)
      bad(doc, "roshm-drain sidecar: preStop (drain) missing");
    // a pod drains its own regions (drain --pod, with its tenant's token),
    // never its whole tenant on the node nor the node
    const stop = (c.lifecycle?.preStop?.exec?.command ?? []).join(" ");
    if (!isRoshmd && /\broshmctl\b.*\bdrain\b/.test(stop) && !/\bdrain --pod\b/.test(stop))
      bad(doc, `container ${c.name}: preStop must drain its own pod (roshmctl drain --pod)`);
    // a pod that owns regions drains them before its own process is told to
    // stop (Kubernetes runs a container's preStop, then sends it SIGTERM),
    // and its replacement starts only when it is gone: one owner per name
    if (!isRoshmd && /\bdrain --pod\b/.test(stop) && doc.kind === "Deployment" &&
        doc.spec?.strategy?.type !== "Recreate")
      bad(doc, "a Deployment whose pods own regions needs strategy Recreate (one owner per region name)");
    // roshmd's socket directory: pods get it read-only, so that none can
    // put another socket in roshmd's place
    const runVols = new Set((spec.volumes ?? []).filter((v) => v.hostPath?.path === "/run/roshm")
      .map((v) => v.name));
    if (!isRoshmd)
      for (const m of c.volumeMounts ?? [])
        if (runVols.has(m.name) && !m.readOnly)
          bad(doc, `container ${c.name}: mounts roshmd's socket directory read-write (readOnly: true)`);
    if (isEtcd && c.name === "etcd") {
      const args = [...(c.command ?? []), ...(c.args ?? [])].join(" ");
      if (!/--client-cert-auth\b/.test(args) || !/--listen-client-urls[= ]https:\/\//.test(args) ||
          !/--trusted-ca-file[= ]\S/.test(args))
        bad(doc, "etcd: clients must be served over https with --client-cert-auth and --trusted-ca-file");
    }
  }
  // etcd's TLS material: etcd mounts it; roshmd mounts the CA and its client
  // certificate, never etcd's server key
  const tls = (spec.volumes ?? []).find((v) => v.secret?.secretName === "roshm-etcd-tls");
  const mounted = tls && (spec.containers ?? []).some((c) => (c.volumeMounts ?? []).some((m) => m.name === tls.name));
  if ((isRoshmd || isEtcd) && !mounted)
    bad(doc, `${isEtcd ? "etcd" : "roshmd"}: does not mount Secret roshm-etcd-tls`);
  if (isRoshmd && mounted && (!tls.secret.items || tls.secret.items.some((i) => i.key === "server.key")))
    bad(doc, "roshmd: mounts etcd's server.key (list the items: ca.crt, client.crt, client.key)");
  for (const v of spec.volumes ?? [])
    if (v.emptyDir && !mediums.has(v.emptyDir.medium ?? ""))
      bad(doc, `volume ${v.name}: emptyDir medium ${v.emptyDir.medium} is not a Kubernetes medium`);
  if (isRoshmd && !((spec.terminationGracePeriodSeconds ?? 30) > 20))
    bad(doc, "roshmd: terminationGracePeriodSeconds must exceed drain.timeout_ms (20 s)");
}

// Who reaches etcd: a NetworkPolicy must select its pods, open the client
// port to roshmd only (pods, or node addresses for host-network roshmd) and
// the peer port to etcd members only.
function etcdPolicy(all) {
  const etcd = all.find((d) => d.kind === "StatefulSet" && d.metadata?.name === "etcd");
  if (!etcd) return;
  const labels = etcd.spec?.template?.metadata?.labels ?? {};
  const selects = (sel) => !sel?.matchExpressions?.length &&
    Object.entries(sel?.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  const named = (f, name) => !f.namespaceSelector && f.podSelector?.matchLabels?.["app.kubernetes.io/name"] === name;
  const pols = all.filter((d) => d.kind === "NetworkPolicy" && selects(d.spec?.podSelector) &&
    (d.spec?.policyTypes ?? ["Ingress"]).includes("Ingress"));
  if (!pols.length) bad(etcd, "etcd: no NetworkPolicy restricts ingress to its pods");
  for (const p of pols)
    for (const r of p.spec.ingress ?? []) {
      const ports = r.ports?.length ? r.ports.map((x) => x.port ?? "*") : ["*"];
      const open = (num, name) => ports.includes(num) || ports.includes(name) || ports.includes("*");
      const from = r.from ?? [];
      if (open(2379, "client") && (!from.length || from.some((f) => !named(f, "roshmd") &&
          !(f.ipBlock && !String(f.ipBlock.cidr).endsWith("/0")))))
        bad(p, "etcd's client port 2379 is open to more than roshmd");
      if (open(2380, "peer") && (!from.length || from.some((f) => !named(f, "etcd"))))
        bad(p, "etcd's peer port 2380 is open to more than etcd members");
    }
}

let n = 0;
const all = [];
for (const file of process.argv.slice(2)) {
  for (const y of parseAllDocuments(readFileSync(file, "utf8"))) {
    if (y.errors.length) { problems.push(`${file}: ${y.errors[0].message}`); continue; }
    const doc = y.toJS();
    if (!doc) continue;
    n++;
    all.push(doc);
    const key = `${doc.apiVersion}/${doc.kind}`;
    if (crd[key]) { crd[key](doc); continue; }
    const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/") : ["", doc.apiVersion];
    let Model;
    try {
      Model = (await import(`kubernetes-models/${group ? group + "/" : ""}${version}/${doc.kind}`))[doc.kind];
    } catch {
      bad(doc, `unknown apiVersion/kind ${key}`);
      continue;
    }
    // kustomize folds long base64 values of generated Secrets over lines; the
    // API server's decoder (Go's encoding/base64) skips the newlines, the
    // schema's "byte" format does not: compare what the server decodes
    const checked = doc.kind === "Secret" && doc.data ?
      { ...doc, data: Object.fromEntries(Object.entries(doc.data).map(([k, v]) =>
        [k, typeof v === "string" ? v.replace(/[\r\n]/g, "") : v])) } : doc;
    try { new Model(checked).validate(); } catch (e) { bad(doc, e.message.split("\n").slice(0, 3).join(" ")); }
    const unknown = [];
    unknownFields(doc, path.join(nm, "kubernetes-models", group, version, doc.kind + ".d.ts"), "", unknown);
    for (const u of unknown) bad(doc, u);
    const spec = doc.kind === "Pod" ? doc.spec : doc.spec?.template?.spec;
    if (spec) podChecks(doc, spec);
  }
}
etcdPolicy(all);
if (problems.length) {
  for (const p of problems) console.log("  " + p);
  console.log(`validate: ${problems.length} problem(s) in ${n} objects`);
  process.exit(1);
}
console.log(`validate: ${n} objects OK`);
