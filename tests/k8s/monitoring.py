#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Offline checks of k8s/monitoring (tests/k8s/check_monitoring.sh runs them).

  monitoring.py rules RULE OUT            the PrometheusRule's groups as a rules file
  monitoring.py alert-tests RULE SCENARIOS OUT
                                          a `promtool test rules` file: each alert fires
                                          on its scenario, not before its time, and no
                                          alert fires on the healthy series
  monitoring.py dashboard-rules DASH OUT  every dashboard query as a recording rule
                                          (promtool check rules parses them)
  monitoring.py names RULE DASH PAGE...   every metric name the alerts and the dashboard
                                          use is one the /metrics PAGEs declare, and every
                                          label they name is one its samples carry
  monitoring.py render MODE FILE          kustomize output: MODE operator (base + the
                                          component), annotations, or base (no CRDs)
Exit 0 when all is well, 1 with one line per problem.
"""
import json
import re
import sys

import yaml

# Labels Prometheus adds to every series of a target (ServiceMonitor: job,
# instance, namespace, pod, service, endpoint, container; our relabeling:
# kubernetes_node), and series it makes itself for each target.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "endpoint", "container",
                 "kubernetes_node"}
PROMETHEUS_SERIES = {"up"}
# Grafana's variables, as they would be expanded in a query.
GRAFANA_VARS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h",
                "instance": ".*", "datasource": "prometheus"}

problems = []


def bad(msg):
    problems.append(msg)


def done():
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


def load_rule(path):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    rule = [d for d in docs if d.get("kind") == "PrometheusRule"]
    if len(rule) != 1:
        sys.exit(f"{path}: expected one PrometheusRule, found {len(rule)}")
    return rule[0]


def alerts_of(rule):
    return [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]


def dashboard_queries(dash):
    """(where, expr) of every panel target, rows' panels included."""
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                if "expr" in t:
                    out.append((f"panel {p.get('id')} '{p.get('title')}' {t.get('refId')}", t["expr"]))
    walk(dash.get("panels", []))
    return out


def expand(expr):
    return re.sub(r"\$\{?(\w+)\}?", lambda m: GRAFANA_VARS.get(m[1], m[0]), expr)


# ---- PromQL: the metric names and label names an expression uses ----------------------

FUNCS = {
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh",
    "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh",
    "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg",
    "delta", "deriv", "exp", "floor", "histogram_count", "histogram_fraction",
    "histogram_quantile", "histogram_sum", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
    "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi",
    "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets",
    "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_desc", "sqrt", "stddev_over_time",
    "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp", "vector", "year",
}
AGGREGATIONS = {"sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk",
                "quantile", "count_values", "group"}
FUNCS |= AGGREGATIONS
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = LABEL_LISTS | {"bool", "and", "or", "unless", "offset", "atan2", "inf", "nan"}
IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def parse(expr):
    """[(metric, {label names in its matchers})], {label names in by/on/... lists}."""
    metrics, grouping = [], set()
    i, n = 0, len(expr)
    last_metric = None
    while i < n:
        c = expr[i]
        if c in "\"'`":
            j = i + 1
            while j < n and expr[j] != c:
                j += 2 if expr[j] == "\\" else 1
            i = j + 1
            continue
        if c == "[":
            i = expr.index("]", i) + 1
            continue
        if c == "{":
            j = i + 1
            names = set()
            while j < n and expr[j] != "}":
                m = IDENT.match(expr, j)
                if m:
                    names.add(m[0])
                    j = m.end()
                    while j < n and expr[j] in " =!~":
                        j += 1
                    q = expr[j]
                    k = j + 1
                    while k < n and expr[k] != q:
                        k += 2 if expr[k] == "\\" else 1
                    j = k + 1
                else:
                    j += 1
            if last_metric is not None:
                metrics[last_metric][1].update(names)
            i = j + 1
            last_metric = None
            continue
        if c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            m = re.compile(r"[0-9.]+(e[+-]?[0-9]+)?[a-z]*").match(expr, i)
            i = m.end()
            last_metric = None
            continue
        m = IDENT.match(expr, i)
        if m:
            word = m[0]
            j = m.end()
            while j < n and expr[j] == " ":
                j += 1
            if word in LABEL_LISTS:
                if j < n and expr[j] == "(":
                    k = expr.index(")", j)
                    grouping.update(IDENT.findall(expr[j + 1:k]))
                    i = k + 1
                else:
                    i = j
                last_metric = None
                continue
            after = IDENT.match(expr, j)
            if word in KEYWORDS or (j < n and expr[j] == "(" and word in FUNCS) or \
                    (word in AGGREGATIONS and after and after[0] in ("by", "without")):
                i = m.end()
                last_metric = None
                continue
            if j < n and expr[j] == "(":
                bad(f"unknown function {word}() in: {expr}")
            metrics.append((word, set()))
            last_metric = len(metrics) - 1
            i = m.end()
            continue
        if not c.isspace():
            last_metric = None
        i += 1
    return metrics, grouping


def page_names(paths):
    """Names the pages declare (# TYPE; histograms as _bucket, _sum, _count)
    and the label names each sample name carries."""
    names, labels = set(), {}
    for path in paths:
        for line in open(path):
            if line.startswith("# TYPE "):
                _, _, fam, kind = line.split()
                names.update([fam + s for s in ("_bucket", "_sum", "_count")] if kind == "histogram"
                             else [fam])
            elif line.strip() and not line.startswith("#"):
                m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? ", line)
                if not m:
                    bad(f"{path}: not a sample line: {line.strip()}")
                    continue
                labels.setdefault(m[1], set()).update(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m[3] or ""))
    return names, labels


def check_names(rule_path, dash_path, pages):
    names, labels = page_names(pages)
    if not any(n.startswith("roshm_") for n in names):
        bad(f"no roshm_ metric in {pages}")
    exprs = [(f"alert {a['alert']}", str(a["expr"])) for a in alerts_of(load_rule(rule_path))]
    dash = json.load(open(dash_path))
    exprs += [(w, expand(e)) for w, e in dashboard_queries(dash)]
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", q or "")
        if v.get("type") == "query":
            if not m:
                bad(f"variable {v.get('name')}: not label_values(metric, label): {q}")
            else:
                exprs.append((f"variable {v['name']}", f"{m[1]}{{{m[2]}=\"x\"}}"))
    used, unchecked = set(), set()
    for where, e in exprs:
        metrics, grouping = parse(e)
        if not metrics:
            bad(f"{where}: uses no metric: {e}")
        known = set(TARGET_LABELS)
        complete = True
        for name, matchers in metrics:
            used.add(name)
            if name in PROMETHEUS_SERIES:
                continue
            if name not in names:
                bad(f"{where}: roshmd exports no metric {name}")
                complete = False
                continue
            if name not in labels:
                complete = False  # declared, no sample on these pages: labels unknown
                unchecked.add(name)
                continue
            known |= labels[name]
            for lab in matchers - labels[name] - TARGET_LABELS:
                bad(f"{where}: {name} has no label {lab}")
        if complete:
            for lab in grouping - known:
                bad(f"{where}: no metric it uses has a label {lab} (by/on/...)")
    print(f"names: {len(exprs)} queries use {len(used)} metric names, all exported"
          + (f"; no samples to check labels against: {', '.join(sorted(unchecked))}" if unchecked else ""))


# ---- promtool inputs --------------------------------------------------------------------

def write_rules(rule_path, out):
    spec = load_rule(rule_path)["spec"]
    yaml.safe_dump({"groups": spec["groups"]}, open(out, "w"), sort_keys=False)


def render_annotations(text, labels):
    return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: labels.get(m[1], "<no value>"), text)


def write_alert_tests(rule_path, scen_path, out):
    alerts = {a["alert"]: a for a in alerts_of(load_rule(rule_path))}
    scen = yaml.safe_load(open(scen_path))
    tests = []
    for s in scen["alerts"]:
        a = alerts.get(s["alert"])
        if not a:
            bad(f"{scen_path}: no alert {s['alert']} in the rules")
            continue
        labels = {k: str(v) for k, v in s["labels"].items()}
        exp = dict(labels, **{k: str(v) for k, v in a.get("labels", {}).items()})
        ann = {k: render_annotations(" ".join(str(v).split()), labels)
               for k, v in a.get("annotations", {}).items()}
        checks = [{"eval_time": s["quiet"], "alertname": s["alert"], "exp_alerts": []}] if "quiet" in s else []
        checks.append({"eval_time": s["fires"], "alertname": s["alert"],
                       "exp_alerts": [{"exp_labels": exp, "exp_annotations": ann}]})
        tests.append({"name": s["alert"], "interval": "1m",
                      "input_series": [{"series": x, "values": v} for x, v in s["series"]],
                      "alert_rule_test": checks})
    for name in sorted(set(alerts) - {s["alert"] for s in scen["alerts"]}):
        bad(f"{scen_path}: alert {name} has no scenario")
    tests.append({"name": "healthy", "interval": "1m",
                  "input_series": [{"series": x, "values": v} for x, v in scen["healthy"]],
                  "alert_rule_test": [{"eval_time": scen["healthy_eval"], "alertname": n, "exp_alerts": []}
                                      for n in sorted(alerts)]})
    yaml.safe_dump({"rule_files": ["roshm-rules.yaml"], "evaluation_interval": "1m", "tests": tests},
                   open(out, "w"), sort_keys=False, width=1000)


def write_dashboard_rules(dash_path, out):
    dash = json.load(open(dash_path))
    ids, rules = set(), []

    def walk(panels):
        for p in panels:
            if p.get("id") in ids:
                bad(f"panel id {p.get('id')} twice")
            ids.add(p.get("id"))
            g = p.get("gridPos", {})
            if g.get("x", 0) + g.get("w", 0) > 24:
                bad(f"panel {p.get('id')}: wider than the grid")
            walk(p.get("panels", []))
            if p.get("type") != "row" and not p.get("targets"):
                bad(f"panel {p.get('id')} '{p.get('title')}': no query")
            if p.get("type") != "row" and p.get("datasource", {}).get("uid") != "${datasource}":
                bad(f"panel {p.get('id')}: not on the dashboard's data source variable")
            for t in p.get("targets", []):
                rules.append({"record": f"dashboard:panel_{p.get('id')}_{t.get('refId')}",
                              "expr": expand(t.get("expr", ""))})
                left = re.findall(r"\$\{?\w+", expand(t.get("expr", "")))
                if left:
                    bad(f"panel {p.get('id')}: undefined variables {left}")
    walk(dash.get("panels", []))
    if not dash.get("uid") or not dash.get("title"):
        bad("the dashboard needs a uid and a title")
    yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, open(out, "w"), sort_keys=False)
    print(f"dashboard: {len(ids)} panels, {len(rules)} queries")


# ---- kustomize output -------------------------------------------------------------------

# The fields this repository may use, from the prometheus-operator v1 CRDs
# (monitoring.coreos.com_servicemonitors.yaml, _prometheusrules.yaml).
SM_SPEC = {"attachMetadata", "bodySizeLimit", "endpoints", "jobLabel", "keepDroppedTargets",
           "labelLimit", "labelNameLengthLimit", "labelValueLengthLimit", "namespaceSelector",
           "podTargetLabels", "sampleLimit", "scrapeClass", "scrapeProtocols", "selector",
           "targetLabels", "targetLimit"}
SM_ENDPOINT = {"authorization", "basicAuth", "bearerTokenFile", "bearerTokenSecret", "enableHttp2",
               "filterRunning", "followRedirects", "honorLabels", "honorTimestamps", "interval",
               "metricRelabelings", "oauth2", "params", "path", "port", "proxyUrl", "relabelings",
               "scheme", "scrapeTimeout", "targetPort", "tlsConfig", "trackTimestampsStaleness"}
RELABEL = {"action", "modulus", "regex", "replacement", "separator", "sourceLabels", "targetLabel"}
PR_GROUP = {"name", "interval", "limit", "partial_response_strategy", "query_offset", "labels", "rules"}
PR_RULE = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
SEVERITIES = {"critical", "warning", "info"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")


def fields(where, obj, allowed):
    if not isinstance(obj, dict):
        bad(f"{where}: not a mapping")
        return
    for k in obj:
        if k not in allowed:
            bad(f"{where}.{k}: unknown field")


def subset(a, b):
    return all(b.get(k) == v for k, v in (a or {}).items())


def check_render(mode, path):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    by = {}
    for d in docs:
        by.setdefault(d["kind"], []).append(d)
    ds = [d for d in by.get("DaemonSet", []) if d["metadata"]["name"] == "roshmd"]
    if len(ds) != 1:
        return bad("no roshmd DaemonSet")
    ds = ds[0]
    tmpl = ds["spec"]["template"]
    c = [c for c in tmpl["spec"]["containers"] if c["name"] == "roshmd"][0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    crds = [d for d in docs if d["apiVersion"].startswith("monitoring.coreos.com/")]
    ann = tmpl["metadata"].get("annotations", {})
    if mode == "base":
        if crds:
            bad("the base has prometheus-operator objects: " + ", ".join(d["kind"] for d in crds))
        if any(k.startswith("prometheus.io/") for k in ann):
            bad("the base has scrape annotations")
        return
    if mode == "annotations":
        if crds:
            bad("the annotations component brings prometheus-operator objects")
        if ann.get("prometheus.io/scrape") != "true":
            bad('pod annotation prometheus.io/scrape is not "true"')
        if str(ann.get("prometheus.io/port")) != str(ports.get("metrics")):
            bad(f"prometheus.io/port {ann.get('prometheus.io/port')} is not the metrics port {ports.get('metrics')}")
        if ann.get("prometheus.io/path") != "/metrics":
            bad("prometheus.io/path is not /metrics")
        print(f"render: pod annotations prometheus.io/scrape, port {ann.get('prometheus.io/port')}, "
              f"path {ann.get('prometheus.io/path')}")
        return
    ns = ds["metadata"].get("namespace")
    sms, prs = by.get("ServiceMonitor", []), by.get("PrometheusRule", [])
    if len(sms) != 1 or len(prs) != 1:
        return bad(f"expected one ServiceMonitor and one PrometheusRule, found {len(sms)}, {len(prs)}")
    sm, pr = sms[0], prs[0]
    for d in (sm, pr):
        if d["apiVersion"] != "monitoring.coreos.com/v1":
            bad(f"{d['kind']}: apiVersion {d['apiVersion']}")
        if d["metadata"].get("namespace") != ns:
            bad(f"{d['kind']}: namespace {d['metadata'].get('namespace')}, roshmd's is {ns}")
    fields("ServiceMonitor.spec", sm["spec"], SM_SPEC)
    svcs = [s for s in by.get("Service", []) if subset(sm["spec"]["selector"].get("matchLabels"),
                                                       s["metadata"].get("labels", {}))]
    if len(svcs) != 1:
        return bad(f"the ServiceMonitor selects {len(svcs)} Services, not one")
    svc = svcs[0]
    if svc["metadata"].get("namespace") != ns:
        bad("the metrics Service is not in roshmd's namespace")
    if not svc["spec"].get("selector") or not subset(svc["spec"]["selector"], tmpl["metadata"]["labels"]):
        bad("the metrics Service does not select roshmd's pods")
    sp = {p.get("name"): p for p in svc["spec"]["ports"]}
    for i, ep in enumerate(sm["spec"]["endpoints"]):
        fields(f"ServiceMonitor.spec.endpoints[{i}]", ep, SM_ENDPOINT)
        for j, r in enumerate(ep.get("relabelings", []) + ep.get("metricRelabelings", [])):
            fields(f"ServiceMonitor.spec.endpoints[{i}].relabelings[{j}]", r, RELABEL)
            if r.get("targetLabel") == "node":
                bad("a target label `node` would rename roshm's own node label to exported_node")
        p = sp.get(ep.get("port"))
        if not p:
            bad(f"endpoint port {ep.get('port')} is not a port of Service {svc['metadata']['name']}")
        elif p.get("targetPort") not in ports and p.get("targetPort") not in ports.values():
            bad(f"Service port {p.get('name')} targets {p.get('targetPort')}, not a roshmd container port")
        if ep.get("path", "/metrics") != "/metrics":
            bad(f"endpoint path {ep.get('path')}")
        for k in ("interval", "scrapeTimeout"):
            if k in ep and not DURATION.match(ep[k]):
                bad(f"endpoint {k} {ep[k]} is not a duration")
    fields("PrometheusRule.spec", pr["spec"], {"groups"})
    names = set()
    for g in pr["spec"]["groups"]:
        fields(f"PrometheusRule group {g.get('name')}", g, PR_GROUP)
        for r in g["rules"]:
            fields(f"PrometheusRule rule {r.get('alert')}", r, PR_RULE)
            if r.get("alert") in names:
                bad(f"alert {r['alert']} twice")
            names.add(r.get("alert"))
            if r.get("labels", {}).get("severity") not in SEVERITIES:
                bad(f"alert {r.get('alert')}: severity not one of {sorted(SEVERITIES)}")
            for k in ("summary", "description"):
                if not r.get("annotations", {}).get(k):
                    bad(f"alert {r.get('alert')}: no {k}")
            if "for" in r and not DURATION.match(str(r["for"])):
                bad(f"alert {r.get('alert')}: for {r['for']} is not a duration")
    cms = [m for m in by.get("ConfigMap", []) if m["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    if len(cms) != 1:
        return bad(f"expected one ConfigMap labelled grafana_dashboard=1, found {len(cms)}")
    for k, v in cms[0]["data"].items():
        try:
            d = json.loads(v)
            if not d.get("panels"):
                bad(f"dashboard ConfigMap {k}: no panels")
        except ValueError as e:
            bad(f"dashboard ConfigMap {k}: not JSON: {e}")
    print(f"render: ServiceMonitor -> Service {svc['metadata']['name']} -> roshmd:{ports.get('metrics')}, "
          f"{len(names)} alerts, dashboard {cms[0]['metadata']['name']}")


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "rules" and len(args) == 2:
        write_rules(*args)
    elif cmd == "alert-tests" and len(args) == 3:
        write_alert_tests(*args)
    elif cmd == "dashboard-rules" and len(args) == 2:
        write_dashboard_rules(*args)
    elif cmd == "names" and len(args) >= 3:
        check_names(args[0], args[1], args[2:])
    elif cmd == "render" and len(args) == 2 and args[0] in ("operator", "annotations", "base"):
        check_render(*args)
    else:
        sys.exit(__doc__)
    done()


if __name__ == "__main__":
    main(sys.argv)
