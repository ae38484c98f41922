#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 14's verbs_compat_* metrics from perftest outputs (make bench).

  verbs_compat.py DIR RESULTS

DIR holds KIND-VARIANT-TRIAL.txt: the client output of one perftest run,
VARIANT native (rxe0), roshm (roshm0 through libroshm-verbs) or busy (rxe0
beside a busy loop where roshm's poller spins: not a target, printed
beside native and kept as the row's "busy" and reference), written by
tests/softroce/guest_bench_verbs_compat.sh. Each metric is the median over
trials of roshm's figure over the median of native's, from the same run.
The rows are merged into RESULTS (a JSON array, created if missing), in the
format of perf/results_table.py. A trial whose figure is not finite
(perftest prints inf or nan when its clock calibration fails under TCG)
measured nothing and is left out; a kind without a trial of either is not
measured (not in RESULTS: the table says so). Exit 1 if no kind was.
"""
import json
import math
import os
import statistics
import sys

# kind: (metric, column of the result line, unit, lower is better, target, what)
KINDS = {
    "write_lat": ("verbs_compat_write_lat_vs_native", 4, "us", True, 1.2,
                  "ib_write_lat -s 64, t_typical (an RC ping-pong, both sides posting)"),
    "read_lat": ("verbs_compat_read_lat_vs_native", 4, "us", True, 1.2,
                 "ib_read_lat -s 64, t_typical (one RDMA READ per round trip)"),
    "atomic_lat": ("verbs_compat_atomic_lat_vs_native", 4, "us", True, 1.2,
                   "ib_atomic_lat (FETCH_AND_ADD), t_typical"),
    "msg_rate": ("verbs_compat_msg_rate_vs_native", 4, "Mpps", False, 0.5,
                 "ib_write_bw -s 64, MsgRate"),
    "bw_64k": ("verbs_compat_bw_64k_vs_native", 3, "MB/s", False, 0.9,
               "ib_write_bw -s 65536, BW average"),
}
# FreeFlow on mlx4, as published by others (not measured here): roshm / native
FREEFLOW = {
    "write_lat": ("FreeFlow write lat 2.64 vs 1.24 us", 2.64 / 1.24),
    "msg_rate": ("FreeFlow msg rate 0.435 vs 5.0 Mpps", 0.435 / 5.0),
}


def figure(path, col):
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) > col and parts[0].isdigit() and parts[1].isdigit():
                return float(parts[col])
    raise ValueError(f"{path}: no result line")


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    d, out = argv[1], argv[2]
    files = os.listdir(d)
    rows, bad = [], []
    print(f" {'metric':36} {'roshm0':>10} {'native':>10} {'unit':5} {'ratio':>7} {'target':>8}  trials")
    for kind, (metric, col, unit, lower, target, what) in KINDS.items():
        vals, dropped = {}, 0
        for v in ("native", "roshm", "busy"):
            got = [figure(os.path.join(d, f), col) for f in sorted(files)
                   if f.startswith(f"{kind}-{v}-") and f.endswith(".txt")]
            # perftest prints inf or nan when its clock calibration failed
            # (TCG): such a trial measured nothing
            vals[v] = [x for x in got if math.isfinite(x) and x > 0]
            dropped += len(got) - len(vals[v])
        if not vals["native"] or not vals["roshm"]:
            bad.append(kind)
            print(f" {metric:36} not measured (native {len(vals['native'])}, roshm "
                  f"{len(vals['roshm'])} runs with a finite figure; {dropped} without)")
            continue
        r, nat = statistics.median(vals["roshm"]), statistics.median(vals["native"])
        ratio = r / nat
        met = ratio <= target if lower else ratio >= target
        cmp = "<=" if lower else ">="
        row = {"metric": metric, "value": r, "unit": unit, "baseline": nat, "ratio": ratio,
               "target": f"{cmp} {target:.2f}", "met": bool(met),
               "reference": {"what": what, "value": nat, "measured": True}}
        if vals["busy"]:
            # native beside a busy loop where roshm's poller spins: the CPU
            # that poller takes, on its own (not a target)
            b = statistics.median(vals["busy"])
            row["busy"] = {"what": "native beside a busy loop", "value": b, "ratio": r / b,
                           "vs_native": b / nat, "trials": len(vals["busy"])}
            row["reference"] = {"what": "native beside a busy loop in place of the poller",
                                "value": b, "ratio": r / b, "measured": True}
        if kind in FREEFLOW:
            row["reference"] = {"what": FREEFLOW[kind][0], "value": FREEFLOW[kind][1],
                                "ratio": FREEFLOW[kind][1], "measured": False}
        rows.append(row)
        print(f" {metric:36} {r:10.3f} {nat:10.3f} {unit:5} {ratio:7.3f} {cmp} {target:5.2f}  "
              f"{len(vals['roshm'])}+{len(vals['native'])}  ({what})"
              + (f" ({dropped} trials without a finite figure left out)" if dropped else ""))
        if "busy" in row:
            bz = row["busy"]
            print(f" {'  native beside a busy loop':36} {bz['value']:10.3f} {nat:10.3f} {unit:5} "
                  f"{bz['vs_native']:7.3f}   (roshm0 / it: {bz['ratio']:.3f}; {bz['trials']} trials)")
    old = []
    if os.path.exists(out):
        with open(out) as f:
            old = json.load(f)
    names = {r["metric"] for r in rows}
    merged = [r for r in old if r.get("metric") not in names] + rows
    with open(out, "w") as f:
        json.dump(merged, f, indent=1)
    if bad:
        print(f"verbs_compat: no measurement for {', '.join(bad)}")
    if not rows:
        sys.exit("verbs_compat: nothing measured")


if __name__ == "__main__":
    main(sys.argv)
