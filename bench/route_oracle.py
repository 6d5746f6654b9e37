#!/usr/bin/env python3
"""Offline oracle routing for dm-nxd's recorded routing traces (issue 46).

    bench/route_oracle.py RESULTS_DIR... [--json OUT]
    bench/route_oracle.py --self-test

The routing chunk (bench/bench_jobs.py) records every completed write of
each dm-nxd system (the nxd_io_done trace event, bench_measure.RouteTrace:
a gzipped CSV per system and job).  For each job this tool:

  1. builds a service-time table from all of that job's traces: the mean
     latency of a write by route (ssd, hdd), size bucket (power of two)
     and alignment, over every run of the job; `mode passthrough`
     (nxd-pass) gives the array's times for every size, the thresholds
     and `mode adaptive` the log's.  A mean, not a median: a logged write
     that waited for room in a full log counts its wait;
  2. prices every system's own writes with the table (its modelled cost:
     microseconds per MiB written, the routes it took);
  3. routes the writes of `mode adaptive`'s run offline (the oracle): each
     write goes where the table says its size and alignment are served
     sooner;
  4. reports adaptive's cost against the oracle's: oracle / adaptive, the
     share of the oracle's speed that adaptive reached (issue 46's target:
     >= 80 %).

The table prices a write by the mean its cell saw across the runs, at the
loads those runs had: queueing between the two devices, and the log's
room beyond what the waits in the means show, are not modelled.  That is
the limit of this oracle.  --log-pct P adds a log of P % of the SSD that
drains at the fastest destage rate the job's runs measured: on an
overflow, the logged writes of the current busy period that save the
least time per byte go to the array (a greedy; it ignores rewrites, which
free log space without a destage, so it is stricter than the module).
"""

import argparse
import csv
import gzip
import heapq
import json
import math
import os
import statistics
import sys

MIN_SAMPLES = 8         # fewer writes in a cell: the cell is unknown
ADAPTIVE = "nxd-adaptive"


def bucket(nbytes):
    """Power-of-two size bucket: 0 for <= 512 B, 1 for <= 1 KiB, ..."""
    return max(0, math.ceil(math.log2(max(nbytes, 1))) - 9)


def read_trace(path):
    """[(t_us, bytes, route, align, lat_us)] of a trace, in submit order."""
    out = []
    with gzip.open(path, "rt") as f:
        for row in csv.DictReader(f):
            out.append((float(row["t_us"]), int(row["bytes"]), row["route"], row["align"],
                        float(row["lat_us"])))
    out.sort()
    return out


def lat_table(traces):
    """{(route, bucket, align): mean lat_us} over every trace."""
    cells = {}
    for tr in traces:
        for _, b, route, al, lat in tr:
            cells.setdefault((route, bucket(b), al), []).append(lat)
    return {k: statistics.fmean(v) for k, v in cells.items() if len(v) >= MIN_SAMPLES}


def price(table, route, b, al):
    return table.get((route, bucket(b), al))


def cost(table, trace, routes=None):
    """Modelled microseconds per MiB of @trace's writes, by its own routes
    (or @routes); None if a write's cell is unknown."""
    us = nbytes = 0
    for k, (_, b, route, al, _) in enumerate(trace):
        p = price(table, routes[k] if routes else route, b, al)
        if p is None:
            return None
        us += p
        nbytes += b
    return us / (nbytes / 2**20) if nbytes else None


def oracle(table, trace, cap_bytes, drain_bps):
    """Routes of @trace: the log where the table says it is faster, within
    a log of @cap_bytes that drains at @drain_bps.  Greedy: in each busy
    period (since the log was last empty), an overflow sends the logged
    writes that save the least time per byte to the array."""
    routes = []
    level, last_t = 0.0, None
    heap = []                   # (saving per byte, index) of this busy period
    for k, (t, b, route, al, _) in enumerate(trace):
        if last_t is not None:
            level -= drain_bps * (t - last_t) / 1e6
        last_t = t
        if level <= 0:
            level, heap = 0.0, []
        s, h = price(table, "ssd", b, al), price(table, "hdd", b, al)
        if s is None or h is None:
            # Only one route was ever seen for this cell: keep it.
            routes.append(route)
            if route == "ssd":
                level += b
            continue
        if s >= h:
            routes.append("hdd")
            continue
        routes.append("ssd")
        level += b
        heapq.heappush(heap, ((h - s) / b, k))
        while level > cap_bytes and heap:
            _, j = heapq.heappop(heap)
            routes[j] = "hdd"
            level -= trace[j][1]
    return routes


def job_report(job, runs, cap_bytes=math.inf):
    """runs: {system: (trace, record)}; @cap_bytes the log (--log-pct).  A
    dict of what was found."""
    table = lat_table([tr for tr, _ in runs.values()])
    drain = max(((rec.get("counters") or {}).get("destaged_bytes", 0) /
                 max((rec.get("meter") or {}).get("seconds", 0) or rec.get("seconds", 1), 1e-3))
                for _, rec in runs.values())
    out = dict(job=job, drain_mbps=round(drain / 1e6, 2),
               cap_mib=round(cap_bytes / 2**20, 1) if cap_bytes != math.inf else None, systems={})
    for name, (tr, _) in sorted(runs.items()):
        c = cost(table, tr)
        out["systems"][name] = dict(writes=len(tr), logged=sum(1 for x in tr if x[2] == "ssd"),
                                    us_per_mib=round(c, 1) if c else None)
    if ADAPTIVE in runs:
        tr = runs[ADAPTIVE][0]
        routes = oracle(table, tr, cap_bytes, drain)
        c = cost(table, tr, routes)
        out["oracle"] = dict(writes=len(tr), logged=sum(1 for r in routes if r == "ssd"),
                             us_per_mib=round(c, 1) if c else None)
        a = out["systems"][ADAPTIVE]["us_per_mib"]
        out["adaptive_vs_oracle"] = round(c / a, 3) if c and a else None
    return out


def load(dirs):
    """{job: {system: (trace, record)}} and the SSD size in bytes."""
    jobs, ssd = {}, None
    for d in dirs:
        for root, _, files in os.walk(d):
            if "summary.json" not in files:
                continue
            with open(os.path.join(root, "summary.json")) as f:
                s = json.load(f)
            ssd = s.get("ssd_mb", 0) * 2**20 or ssd
            for r in s.get("results", []):
                t = (r.get("rtrace") or {}).get("file")
                if r.get("ok") and t and os.path.exists(os.path.join(root, t)):
                    jobs.setdefault(r["id"], {})[r["system"]] = (read_trace(os.path.join(root, t)), r)
    return jobs, ssd


def self_test():
    """The oracle on a made-up trace: small writes are faster on the log,
    large ones on the array; with room, every small write is logged; with a
    log of two writes, the rest go to the array."""
    table = {("ssd", bucket(4096), "4k"): 100.0, ("hdd", bucket(4096), "4k"): 1000.0,
             ("ssd", bucket(1 << 20), "4k"): 9000.0, ("hdd", bucket(1 << 20), "4k"): 5000.0}
    tr = [(float(i), 4096, "hdd", "4k", 0.0) for i in range(4)] + [(10.0, 1 << 20, "ssd", "4k", 0.0)]
    r = oracle(table, tr, 1 << 30, 0.0)
    assert r == ["ssd"] * 4 + ["hdd"], r
    r = oracle(table, tr, 2 * 4096, 0.0)
    assert r.count("ssd") == 2 and r[4] == "hdd", r
    # A log that drains as fast as it fills keeps every small write.
    r = oracle(table, tr, 4096, 4096 * 1e6)
    assert r[:4] == ["ssd"] * 4, r
    assert cost(table, tr, ["ssd"] * 4 + ["hdd"]) < cost(table, tr, ["hdd"] * 4 + ["ssd"])
    print("route_oracle: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--json")
    ap.add_argument("--log-pct", type=float, help="model a log of this %% of the SSD")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.dirs:
        ap.error("no results directory")
    jobs, ssd = load(a.dirs)
    if not jobs:
        sys.exit("route_oracle: no routing traces under %s" % " ".join(a.dirs))
    cap = (ssd or 0) * a.log_pct / 100 if a.log_pct else math.inf
    rep = [job_report(j, runs, cap) for j, runs in sorted(jobs.items())]
    for r in rep:
        print("%-28s oracle/adaptive %s  %s" % (
            r["job"], r.get("adaptive_vs_oracle"),
            "  ".join("%s %s" % (n, v["us_per_mib"]) for n, v in r["systems"].items())))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rep, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
