#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The metrics of a `make bench` run (build/bench-results.json) as a table.

  results_table.py --print RESULTS          the table on stdout (make bench ends with it)
  results_table.py --doc RESULTS DOC [DIR]  write the table, the date and commit of the run
                                            and the plots of DIR (build/bench) into DOC
                                            (docs/performance.md) between its
                                            <!-- bench:begin --> and <!-- bench:end --> lines;
                                            the PNGs are copied to docs/bench/
  results_table.py --check RESULTS          exit 1 unless RESULTS is well formed (tests)

Every metric docs/performance.md lists is in the table; one the run did
not measure says so.
"""
import datetime
import json
import math
import os
import platform
import shutil
import subprocess
import sys

# (metric, what roshm does, its baseline) in the order of the table
METRICS = [
    ("nop_rtt_vs_rte_ring", "NOP round trip", "rte_ring ping-pong, same two cores"),
    ("local_write_64b_rate_vs_floor", "64 B WRITE rate, batched", "the floor: rte_ring pipeline moving the same bytes"),
    ("local_write_4k_bw_vs_cross_core_copy", "4 KiB WRITE bandwidth", "cross-core copy of buffers just written"),
    ("local_write_64k_bw_vs_cross_core_copy", "64 KiB WRITE bandwidth", "cross-core copy"),
    ("local_write_1m_bw_vs_cross_core_copy", "1 MiB WRITE bandwidth", "cross-core copy"),
    ("scale_256_clients_rate_vs_1", "256 clients' aggregate 64 B rate", "one client's"),
    ("roshmd_rss_256_clients_mib", "roshmd private memory, 256 clients", "(absolute)"),
    ("victim_p99_under_flood_vs_idle", "tenant A's 64 B p99, B flooding (worse of the two)", "A's idle p99"),
    ("victim_p99_under_flood_vs_idle_bulk", "... B: 1 MiB WRITEs at full depth", "A's idle p99"),
    ("victim_p99_under_flood_vs_idle_small", "... B: 64 B WRITEs at full rate", "A's idle p99"),
    ("restart_blackout_ms", "SIGKILL to the next completion, median of 10", "(absolute)"),
    ("tcp_write_64b_lat_vs_tcp_pingpong", "64 B WRITE over tcp", "raw TCP ping-pong"),
    ("tcp_stream_64k_vs_tcp_stream", "64 KiB WRITEs, depth 16", "one raw TCP stream"),
    ("tcp_4k_vs_redis_set", "4 KiB WRITEs, depth 16", "Redis SET, pipeline 16"),
    ("txn_commit_lat_vs_write", "one-write transaction commit", "a plain WRITE"),
    ("verbs_write_64b_lat_vs_ib_read_lat", "64 B WRITE over verbs", "ib_read_lat -s 64"),
    ("verbs_fadd_lat_vs_ib_atomic_lat", "FETCH_ADD over verbs", "ib_atomic_lat"),
    ("verbs_compat_write_lat_vs_native", "ib_write_lat -s 64 through roshm0", "ib_write_lat on rxe0"),
    ("verbs_compat_read_lat_vs_native", "ib_read_lat -s 64 through roshm0", "ib_read_lat on rxe0"),
    ("verbs_compat_atomic_lat_vs_native", "ib_atomic_lat through roshm0", "ib_atomic_lat on rxe0"),
    ("verbs_compat_msg_rate_vs_native", "ib_write_bw -s 64 message rate through roshm0", "the same on rxe0"),
    ("verbs_compat_bw_64k_vs_native", "ib_write_bw -s 65536 through roshm0", "the same on rxe0"),
]
PLOTS = [
    ("local_lat", "local latency against message size, beside the floor"),
    ("local_bw", "local bandwidth against message size, beside the cross-core copy"),
    ("batch", "64 B WRITE rate and cycles per operation against batch size"),
    ("clients", "aggregate rate and p99 against attached clients"),
    ("fair", "tenant A's p99 per trial: B idle, bulk flood, small flood"),
    ("fair_cdf", "tenant A's latency distribution"),
    ("restart", "restart blackout per kill"),
    ("tcp_lat", "latency over tcp against message size, beside raw TCP"),
    ("tcp_bw", "bandwidth over tcp against message size, beside raw TCP"),
    ("peers", "64 B WRITE rate and cycles per operation against peer nodes"),
    ("verbs_lat", "latency over verbs against message size, beside ib_read_lat"),
]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def load(path):
    with open(path) as f:
        rows = json.load(f)
    if not isinstance(rows, list):
        raise ValueError("not a JSON array")
    for r in rows:
        for k, t in (("metric", str), ("value", (int, float)), ("unit", str), ("target", str),
                     ("met", bool)):
            if not isinstance(r.get(k), t):
                raise ValueError(f"{r.get('metric')}: '{k}' missing or not {t}")
        if not math.isfinite(r["value"]):
            raise ValueError(f"{r['metric']}: value is not finite")
        if r.get("baseline") is not None:
            if not isinstance(r["baseline"], (int, float)) or not isinstance(r.get("ratio"), (int, float)):
                raise ValueError(f"{r['metric']}: baseline without a numeric ratio")
            # a baseline that measured nothing (inf, 0) makes any ratio meaningless
            if not (math.isfinite(r["baseline"]) and r["baseline"] > 0 and math.isfinite(r["ratio"])):
                raise ValueError(f"{r['metric']}: baseline {r['baseline']} or ratio {r['ratio']} "
                                 "is not a finite measurement")
        ref = r.get("reference")
        if ref is not None and not (isinstance(ref.get("what"), str) and isinstance(ref.get("value"), (int, float))):
            raise ValueError(f"{r['metric']}: malformed reference")
    return {r["metric"]: r for r in rows}


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}"


def ref_text(r):
    ref = r.get("reference")
    if not ref:
        return ""
    s = f"{ref['what']}: {fmt(ref['value'])}"
    if ref.get("ratio") is not None:
        s += f" (ratio {ref['ratio']:.3f})"
    if not ref.get("measured", True):
        s += " (published, not measured)"
    return s


def print_table(rows):
    print(f" {'metric':42} {'roshm':>11} {'baseline':>11} {'unit':8} {'ratio':>8} {'target':>9}  met  reference")
    for m, _, _ in METRICS:
        r = rows.get(m)
        if r is None:
            print(f" {m:42} {'not measured in this run':>40}")
            continue
        print(f" {m:42} {fmt(r['value']):>11} {fmt(r.get('baseline')):>11} {r['unit']:8} "
              f"{fmt(r.get('ratio')):>8} {r['target']:>9}  {'yes' if r['met'] else 'NO ':3}  {ref_text(r)}")
    for m, r in rows.items():
        if m not in {x[0] for x in METRICS}:
            print(f" {m:42} {fmt(r['value']):>11} {fmt(r.get('baseline')):>11} {r['unit']:8} "
                  f"{fmt(r.get('ratio')):>8} {r['target']:>9}  {'yes' if r['met'] else 'NO ':3}  {ref_text(r)}")


def git_head(root):
    try:
        return subprocess.run(["git", "-C", root, "describe", "--always", "--dirty"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def doc(results, docpath, plotdir):
    rows = load(results)
    root = os.path.dirname(os.path.abspath(docpath))
    when = datetime.datetime.fromtimestamp(os.path.getmtime(results)).strftime("%Y-%m-%d %H:%M")
    out = [BEGIN,
           f"Run of {when}, commit {git_head(root)}, {os.cpu_count()} CPUs ({cpu_model()}); "
           f"filled in by `make bench-doc` from {os.path.basename(results)}.",
           "",
           "| metric | roshm | baseline | unit | ratio | target | met | reference |",
           "|---|---|---|---|---|---|---|---|"]
    for m, _, _ in METRICS:
        r = rows.get(m)
        if r is None:
            out.append(f"| `{m}` | not measured in this run | | | | | | |")
            continue
        out.append(f"| `{m}` | {fmt(r['value'])} | {fmt(r.get('baseline'))} | {r['unit']} | "
                   f"{fmt(r.get('ratio'))} | {r['target']} | {'yes' if r['met'] else '**no**'} | {ref_text(r)} |")
    if plotdir and os.path.isdir(plotdir):
        dst = os.path.join(root, "bench")
        os.makedirs(dst, exist_ok=True)
        shown = []
        for name, what in PLOTS:
            png = os.path.join(plotdir, name + ".png")
            if os.path.exists(png):
                shutil.copy(png, os.path.join(dst, name + ".png"))
                for ext in ("csv",):
                    src = os.path.join(plotdir, f"{name}.{ext}")
                    if os.path.exists(src):
                        shutil.copy(src, os.path.join(dst, f"{name}.{ext}"))
                shown.append(f"**{what}** (`{name}`)\n\n![{name}](bench/{name}.png)\n")
        if shown:
            out += ["", "### Plots of this run", ""] + shown
    out.append(END)
    with open(docpath) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"results_table: {docpath} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(docpath, "w") as f:
        f.write(head + "\n".join(out) + tail)
    print(f"results_table: {docpath} filled from {results}")


def main(argv):
    if len(argv) >= 3 and argv[1] == "--print":
        print_table(load(argv[2]))
    elif len(argv) >= 3 and argv[1] == "--check":
        rows = load(argv[2])
        print(f"results_table: {len(rows)} well-formed metrics in {argv[2]}")
    elif len(argv) >= 4 and argv[1] == "--doc":
        doc(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except (OSError, ValueError) as e:
        sys.exit(f"results_table: {e}")
