#!/usr/bin/env python3
"""dm-nxd benchmark report, host side (run by bench/bench.sh).

  bench_report.py [--no-docs] DIR [DIR...]

Each DIR holds a summary.json (one chunk, written by bench_guest.py in the
guest) or sub-directories that do (results/<timestamp>/<chunk>/).  The
chunks are merged into one report (a job run twice: the later run counts),
written to <first DIR>/report.md, printed, and, unless --no-docs, put
between <!-- bench:begin --> and <!-- bench:end --> in docs/performance.md
with PNG plots in docs/bench/ (matplotlib: Debian python3-matplotlib).

Exit status 1 when a system could not be set up or a job failed in any
chunk, or a system is missing from a chunk: "every peer runs, or the run
fails".
"""

import argparse
import glob
import json
import math
import os
import re
import sys

import route_oracle     # bench/, beside this file
from bench_common import base_id, stall_seconds

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "performance.md")
IMGDIR = os.path.join(REPO, "docs", "bench")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
ORDER = ["md", "ssd", "bcache", "writecache", "dmcache", "nxd"]  # the default matrix
PEERS = ["bcache", "writecache", "dmcache"]
NYTRO = [5000, 10000, 20000, 40000, 80000, 160000]
NPROC = os.cpu_count() or 2      # the host's cores (the report runs on the host)


def load(dirs):
    chunks = []
    for d in dirs:
        paths = [os.path.join(d, "summary.json")] if os.path.exists(os.path.join(d, "summary.json")) \
            else sorted(glob.glob(os.path.join(d, "*", "summary.json")))
        for p in paths:
            with open(p) as f:
                s = json.load(f)
            s["path"] = os.path.relpath(os.path.dirname(p), REPO)
            h = os.path.join(os.path.dirname(p), "host.json")
            if os.path.exists(h):
                with open(h) as f:
                    s["host"] = json.load(f)
            s["samples"] = read_samples(os.path.join(os.path.dirname(p), "host-samples.txt"))
            for r in s["results"]:
                for m in (r.get("meter"), (r.get("drain") or {}).get("meter")):
                    if m and m.get("wall"):
                        m.update(host_share(s["samples"], *m["wall"]))
            chunks.append(s)
    if not chunks:
        sys.exit("bench_report: no summary.json under %s" % " ".join(dirs))
    chunks.sort(key=lambda s: s.get("started", ""))    # a job run twice: the later run counts
    results = {}
    for s in chunks:
        for r in s["results"]:
            results[(r["system"], r["id"])] = r
    return chunks, results


def read_samples(path):
    """bench.sh's host samples: [(epoch, load1, qemu pid, qemu CPU ticks)]."""
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                w = line.split()
                try:
                    out.append((float(w[0]), float(w[1]), int(w[2]), int(float(w[3]))))
                except (ValueError, IndexError):
                    pass
    return out


def host_share(samples, t0, t1):
    """Over [t0, t1]: the host cores the guest's QEMU process used (CPU
    ticks per second / 100) and the host's mean load average."""
    sel = [x for x in samples if t0 - 1 <= x[0] <= t1 + 1 and x[2]]
    if len(sel) < 2 or sel[-1][2] != sel[0][2] or sel[-1][0] - sel[0][0] < 1:
        return {}
    cores = (sel[-1][3] - sel[0][3]) / 100.0 / (sel[-1][0] - sel[0][0])
    return dict(host_cores=round(cores, 2), host_load=round(sum(x[1] for x in sel) / len(sel), 1))


def systems_of(chunks):
    seen = []
    for s in chunks:
        for n in s["systems"]:
            if n not in seen:
                seen.append(n)
    return [n for n in ORDER if n in seen] + [n for n in seen if n not in ORDER]


def median(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2.0


def with_medians(results):
    """Jobs run in rounds (id-r<k>, bench_jobs.rounds_of) also stand under
    their base id, every number of each group the median over the rounds
    that ran, and rounds=[the rounds' groups]."""
    byb = {}
    for (n, jid), r in results.items():
        b = base_id(jid)
        if b != jid and r.get("ok") and r.get("groups"):
            byb.setdefault((n, b), []).append(r)
    out = dict(results)
    for key, rs in byb.items():
        rs.sort(key=lambda r: r["id"])
        groups = []
        for g in rs[0]["groups"]:
            same = [next((x for x in r["groups"] if x.get("group") == g.get("group")), None) for r in rs]
            same = [x for x in same if x]
            m = dict(g)
            for k, v in g.items():
                vals = [x.get(k) for x in same]
                if isinstance(v, (int, float)) and not isinstance(v, bool) and \
                        all(isinstance(x, (int, float)) for x in vals):
                    m[k] = median(vals)
            groups.append(m)
        out[key] = dict(rs[0], id=key[1], groups=groups, rounds=[r["groups"] for r in rs])
    return out


class R:
    """Accessors over the merged results."""

    def __init__(self, results):
        self.res = with_medians(results)

    def rounds(self, system, jid, key="iops"):
        """Each round's value of a job run in rounds, in round order."""
        r = self.get(system, jid)
        return [g[-1].get(key) for g in r["rounds"]] if r and r.get("rounds") else []

    def get(self, system, jid):
        r = self.res.get((system, jid))
        return r if r and r.get("ok") else None

    def group(self, system, jid, group=None):
        r = self.get(system, jid)
        if not r or not r.get("groups"):
            return None
        gs = r["groups"]
        return next((g for g in gs if g["group"] == group), None) if group else gs[-1]

    def val(self, system, jid, key="iops", group=None):
        g = self.group(system, jid, group)
        return g.get(key) if g else None


def destage_mean(c):
    """Mean destage write from dm-nxd's counters: the bios' bytes (the
    stripe fill's gaps included) since target 2.3.0, the copies' bytes
    before it (runs recorded earlier)."""
    if not c.get("destage_bios"):
        return None
    return (c.get("destage_hdd_bytes") or c.get("destaged_bytes", 0)) / c["destage_bios"]


def fmt(v, nd=0):
    if v is None:
        return "-"
    return ("%%.%df" % nd) % v


def ratio(a, b):
    return a / b if a is not None and b else None


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out + [""]


def failures(chunks, results, names):
    """What makes the run fail: a system missing from a chunk, a job a
    system never ran, a failed job (a setup failure fails the system's
    jobs).  Judged on the merged results: a job re-run later counts as its
    later run."""
    bad = []
    for s in chunks:
        # The routing and cpu chunks run their own set of systems.
        for n in names if s["chunk"] not in ("routing", "cpu") else []:
            if n not in s["systems"]:
                bad.append("chunk %s: system %s did not run" % (s["chunk"], n))
        for j in s.get("jobs", []):
            for n in s["systems"]:
                if j.get("systems") and n not in j["systems"]:
                    continue
                if (n, j["id"]) not in results:
                    bad.append("chunk %s: %s never ran %s" % (s["chunk"], n, j["id"]))
    for (n, jid), r in sorted(results.items()):
        if not r.get("ok"):
            bad.append("%s %s FAILED: %s" % (n, jid, r.get("error", "")[:300]))
    return bad


def cpu_per_io(r):
    """Guest CPU microseconds (every vCPU, fio's own included) per I/O of
    job result @r, or None."""
    if not r or not r.get("ok"):
        return None
    m = r.get("meter") or {}
    ios = sum(g.get("ios") or 0 for g in r.get("groups") or [])
    if m.get("cpu_busy_pct") is None or not m.get("seconds") or not ios:
        return None
    return m["cpu_busy_pct"] / 100.0 * (m.get("vcpus") or 1) * m["seconds"] * 1e6 / ios


CPU_JOBS = ["cpu-4k-qd8-r%d" % r for r in (1, 2, 3)]


def cpu_window_us(rr, n):
    """Median guest CPU us per write of system @n over the cpu chunk's
    rounds (cpu_window), or None."""
    v = sorted(r["cpu_window"]["us_per_io"] for r in (rr.get(n, j) for j in CPU_JOBS)
               if r and r.get("cpu_window"))
    return v[len(v) // 2] if v else None


def cpu_section(rr):
    """The cpu chunk's rounds, one row per system."""
    rows = []
    for n in ("ssd", "linear", "nxd"):
        cells, iops = [], []
        for j in CPU_JOBS:
            w = (rr.get(n, j) or {}).get("cpu_window")
            cells.append("%.0f us (%d writes, %.2f s, %.0f %% busy)"
                         % (w["us_per_io"], w["ios"], w["seconds"], w["busy_pct"]) if w else "-")
            if w:
                iops.append(rr.val(n, j))
        if any(c != "-" for c in cells):
            iops = sorted(x for x in iops if x)
            rows.append([n] + cells + [fmt(cpu_window_us(rr, n)),
                                       fmt(iops[len(iops) // 2]) if iops else "-"])
    if not rows:
        return []
    L = ["### CPU per write (the cpu chunk)", "",
         "The same random 4 KiB writes at QD 8 (60 % of the SSD) on the raw SSD, dm-linear over it "
         "and dm-nxd, dm-nxd's destage paused; guest CPU time of all vCPUs (fio's own included) "
         "from the first write's submission to the last one's completion, read from /proc/stat "
         "every 20 ms, per completed write.  Three rounds, the systems interleaved.", ""]
    L += table(["system"] + ["round %d" % r for r in (1, 2, 3)] + ["median (us)", "median IOPS"],
               rows)
    L.append("The IOPS column compares the systems over the same writes (each system ends at "
             "the same count), as in the burst tables, where a cache and the raw SSD stop at the "
             "burst budget and md runs its whole runtime.")
    L.append("")
    return L


def headline(rr, names):
    """The targets of issue 44 (the write path) that the jobs measure, then
    the destage rows of issue 17."""
    rows = []

    def add(issue, target, measured, met, note=""):
        rows.append([issue, target, measured, "-" if met is None else ("yes" if met else "**no**"), note])

    def over(target, jobs, ref, fmt_range, ok, key="iops"):
        """A target over several jobs: the range of dm-nxd / ref (of the
        medians, for jobs run in rounds)."""
        rs = [ratio(rr.val("nxd", j, key), rr.val(ref, j, key)) for j in jobs]
        if all(x is not None for x in rs):
            # Each round's ratio too: the two ran one after the other.
            per = [ratio(a, b) for j in jobs
                   for a, b in zip(rr.rounds("nxd", j, key), rr.rounds(ref, j, key))]
            per = [x for x in per if x is not None]
            note = ("medians of %d rounds; each round's own ratios: %s"
                    % (len(rr.rounds("nxd", jobs[0], key)), fmt_range(min(per), max(per)))) if per else ""
            add(44, target, fmt_range(min(rs), max(rs)), ok(min(rs)), note)
        else:
            add(44, target, "not measured", None)

    small = ["randwrite-%dk-qd%d" % (k, q) for k in (4, 8, 16) for q in (8, 32)]
    pct = lambda lo, hi: "%.0f-%.0f %%" % (100 * lo, 100 * hi)  # noqa: E731
    times = lambda lo, hi: "%.2f-%.2fx" % (lo, hi)  # noqa: E731
    over("4, 8, 16 KiB random writes, QD 8 and 32: >= 90 % of the raw SSD", small, "ssd", pct,
         lambda lo: lo >= 0.9)
    over("same jobs: >= 1.3x dm-writecache", small, "writecache", times, lambda lo: lo >= 1.3)
    over("same jobs, for reference: against bcache", small, "bcache", times, lambda lo: None)
    ny = ["nytro-%d-%s" % (n, a) for n in (5000, 10000, 20000) for a in ("aligned", "unaligned")]
    over("NytroXD 5,000-20,000 B, aligned and unaligned: >= 85 % of the raw SSD", ny, "ssd", pct,
         lambda lo: lo >= 0.85)
    p = ratio(rr.val("nxd", "randwrite-4k-qd8", "p99_us"), rr.val("ssd", "randwrite-4k-qd8", "p99_us"))
    add(44, "p99 of 4 KiB writes at QD 8: <= 1.5x the raw SSD's",
        "%.2fx" % p if p is not None else "not measured", None if p is None else p <= 1.5)
    cw = {n: cpu_window_us(rr, n) for n in ("nxd", "linear")}
    x = ratio(cw["nxd"], cw["linear"])
    if x:
        add(44, "CPU per 4 KiB logged write: <= 1.3x dm-linear's",
            "%.2fx (%.0f vs %.0f us)" % (x, cw["nxd"], cw["linear"]), x <= 1.3,
            "the cpu chunk: the same 4 KiB writes at QD 8 on each, dm-nxd's destage paused, "
            "guest CPU (all vCPUs, fio's included) from the first write's submission to the "
            "last one's completion, median of 3 rounds")
    else:
        cpw = {n: cpu_per_io(rr.get(n, "randwrite-4k-qd8")) for n in ("nxd", "linear")}
        x = ratio(cpw["nxd"], cpw["linear"])
        add(44, "CPU per 4 KiB logged write: <= 1.3x dm-linear's",
            "%.2fx (%.0f vs %.0f us)" % (x, cpw["nxd"], cpw["linear"]) if x else "not measured",
            None if x is None else x <= 1.3,
            "randwrite-4k-qd8: guest CPU time (all vCPUs, fio's included) per completed write "
            "over fio's whole run; the cpu chunk (ssd, linear, nxd) measures it over the writes "
            "alone")
    s = ratio(rr.val("nxd", "streaming", "mbps"), rr.val("md", "streaming", "mbps"))
    add(44, "1 MiB streaming: >= 95 % of md alone",
        "%.0f %%" % (100 * s) if s is not None else "not measured", None if s is None else s >= 0.95)
    win = rr.group("nxd", "interference-burst", "stream") or {}
    x = ratio(win.get("window_mbps"), rr.val("md", "interference-solo", "mbps", "stream"))
    add(44, "1 MiB streaming while small writers run and the log has room: >= 95 % of md alone",
        "%.0f %% over the small writers' %s s" % (100 * x, win.get("window_s")) if x else "not measured",
        None if x is None else x >= 0.95,
        "interference-burst's streamer while the small writers ran, against md's interference-solo")
    s = ratio(rr.val("nxd", "streaming-after-small", "mbps"), rr.val("md", "streaming", "mbps"))
    add(44, "1 MiB streaming over blocks just logged, for reference: against md alone",
        "%.0f %%" % (100 * s) if s is not None else "not measured", None)
    st = rr.get("nxd", "steady-4k")
    sv = st.get("steady_iops") if st else None
    for ref, want in (("md", 10), ("bcache", 6)):
        pv = (rr.get(ref, "steady-4k") or {}).get("steady_iops")
        x = ratio(sv, pv)
        add(44, "steady state (working set 4x the log): >= %dx %s" % (want, "md alone" if ref == "md" else ref),
            "%.2fx" % x if x else "not measured", None if x is None else x >= want)
    tl = (st or {}).get("iops_timeline")
    if tl:
        # Runs before steady_seconds was recorded end within their last second.
        secs = st.get("steady_seconds") or int(math.ceil(tl[-1][0]))
        stalls = stall_seconds(tl, 0, secs)
        add(44, "no second with zero completions in a 20-minute steady run",
            "%d seconds of %d" % (stalls, secs),
            stalls == 0 if secs >= 1200 else None,
            "steady-4k's per-second IOPS log; met only by a run of 1,200 s or more "
            "(BENCH_STEADY_S)")
    d = rr.get("nxd", "drain-4k")
    mean = None
    if d:
        c = d.get("counters") or {}
        mean = destage_mean(c)
    add(17, "drain of random 4 KiB over 8x the log: mean HDD write >= 64 KiB",
        "%.1f KiB" % (mean / 1024) if mean else "not measured", None if not mean else mean >= 65536,
        "dm-nxd's destage bios (destage_hdd_bytes / destage_bios)")
    dr = d["drain"].get("mbps") if d and d.get("drain") else None
    md_direct = rr.val("md", "drain-4k", "mbps")
    x = ratio(dr, md_direct)
    add(17, "drain rate >= 5x random direct 4 KiB writes to the array",
        "%.1fx (%.2f vs %.2f MB/s)" % (x, dr, md_direct) if x else "not measured",
        None if x is None else x >= 5)
    for peer in ("writecache", "dmcache"):
        pv = (rr.get(peer, "steady-4k") or {}).get("steady_iops")
        x = ratio(sv, pv)
        add(17, "steady state, for reference: against %s" % peer, "%.2fx" % x if x else "not measured",
            None)
    bt = ((d or {}).get("drain") or {}).get("blktrace") or {}
    a = bt.get("array") or {}
    if a.get("write_count"):
        big = a["write_mean_bytes"] >= 65536 and (a.get("full_stripe_bytes_pct") or 0) >= 50
        add(17, "blktrace during the drain: large, stripe-aligned writes reach the array",
            "mean %.1f KiB, %s %% of bytes in full-stripe (%d KiB) writes; drive bios per batch %s"
            % (a["write_mean_bytes"] / 1024, fmt(a.get("full_stripe_bytes_pct"), 0),
               (a.get("stripe_bytes") or 0) // 1024, merge(d["drain"].get("meter") or d.get("meter"))),
            big, "met: mean >= 64 KiB and >= 50 % of bytes in full stripes (our reading)")
    else:
        add(17, "blktrace during the drain: large, stripe-aligned writes reach the array",
            "not measured" if not bt.get("error") else bt["error"][:80], None)
    x = ratio(rr.val("nxd", "interference-burst", "mbps", "small"),
              rr.val("md", "interference-burst", "mbps", "small"))
    add(17, "interference (burst): small writers >= 20x their bandwidth on md alone",
        "%.1fx" % x if x else "not measured", None if x is None else x >= 20,
        "md's small writers run the whole job")
    return table(["issue", "target", "dm-nxd measured", "met", "how"], rows)


ROUTE_FIXED = [("nxd-t16k", "16 KiB"), ("nxd", "64 KiB"), ("nxd-t256k", "256 KiB")]
ROUTE_ONLY = ("nxd-pass", "nxd-t16k", "nxd-t256k", "nxd-adaptive")    # the routing chunk's


def routing(rr, chunks):
    """Issue 46: mode adaptive against fixed thresholds (the routing
    chunk), on seed 004's sizes and on a phase change."""
    ids = [j for (_, j) in rr.res if j.startswith("route-")]
    if not ids:
        return []
    L = ["### Routing: mode adaptive against fixed thresholds", "",
         "The routing chunk (issue 46) in one boot: dm-nxd with `write_threshold` 16, 64 (the "
         "default) and 256 KiB, and with `mode adaptive` (starting at 64 KiB, bounds 4 KiB to "
         "1 MiB), each set up from scratch per job.  Seed 004's sizes: random writes at QD 8, "
         "IOPS; `adaptive / best` is against the best fixed threshold of that job (target: "
         ">= 95 %).", ""]
    fixed = [n for n, _ in ROUTE_FIXED]
    rep = oracle_reports(chunks)       # reads the traces once, for both tables
    orc = {r["job"]: r for r in rep}

    def logged(j, sname):
        """Percent of @sname's writes in job @j that the trace saw logged."""
        x = ((orc.get(j) or {}).get("systems") or {}).get(sname)
        return "%.0f" % (100.0 * x["logged"] / x["writes"]) if x and x["writes"] else "-"

    rows, worst, alike, differ = [], None, [], []
    for n in NYTRO:
        for a in ("aligned", "unaligned"):
            j = "route-nytro-%d-%s" % (n, a)
            v = {s: rr.val(s, j) for s in ["md", "ssd"] + fixed + ["nxd-adaptive"]}
            have = [(v[s], s) for s in fixed if v[s]]
            best = max(have) if have else None
            r = ratio(v["nxd-adaptive"], best[0]) if best else None
            if r is not None:
                worst = r if worst is None else min(worst, r)
                la, lb = logged(j, "nxd-adaptive"), logged(j, best[1])
                (alike if la == lb and la != "-" else differ).append((j[12:], r))
            rows.append(["%d %s" % (n, a)] + [fmt(v[s]) for s in ["md", "ssd"] + fixed] +
                        [fmt(v["nxd-adaptive"]), dict(ROUTE_FIXED)[best[1]] if best else "-",
                         "%.0f %%" % (100 * r) if r is not None else "-",
                         "%s / %s" % (logged(j, "nxd-adaptive"), logged(j, best[1]) if best else "-")])
    L += table(["size (B)", "md", "ssd"] + ["nxd %s" % t for _, t in ROUTE_FIXED] +
               ["nxd adaptive", "best fixed", "adaptive / best", "logged %: adaptive / best"], rows)
    L.append("`logged %` is the share of the job's writes that the routing trace saw go to the "
             "log.  Where adaptive and the best fixed threshold logged the same share, they routed "
             "alike, and the IOPS between them differ by the run's noise, not by routing.  dm-nxd "
             "logs any write that is not whole 4 KiB blocks, and any not aligned to the array's "
             "chunk, whatever the threshold: of seed 004's sizes only 159,744 B is whole blocks, "
             "and at random 4 KiB-aligned offsets few of its writes start on a 64 KiB chunk.")
    L.append("")
    if worst is not None:
        L.append("Worst adaptive / best fixed over the sizes: %.0f %% (target >= 95 %%: %s).  "
                 "Jobs where adaptive logged the same share as the best fixed threshold: %d "
                 "(their IOPS ratios, %s, are the spread between runs that routed alike); "
                 "jobs where it routed otherwise: %s."
                 % (100 * worst, "met" if worst >= 0.95 else "**not met**", len(alike),
                    ", ".join("%.0f %%" % (100 * r) for _, r in alike) or "none",
                    ", ".join("%s %.0f %%" % (j, 100 * r) for j, r in differ) or "none"))
        L.append("")
    # The phase change: bytes over the whole job (each phase runs the same
    # time, so the sum of the groups' MB/s is proportional to them).
    rows, score = [], {}
    for sname in ["md"] + fixed + ["nxd-adaptive"]:
        r = rr.get(sname, "route-phases")
        if not r:
            continue
        g = {x["group"]: x["mbps"] for x in r.get("groups", [])}
        score[sname] = sum(g.values())
        rows.append([sname] + [fmt(g.get(k), 1) for k in ("small", "stream", "mixed-small",
                                                          "mixed-stream")] + [fmt(score[sname], 1)])
    if rows:
        L.append("Phase change (`fio-jobs/phases.fio`): small random writers, then a 1 MiB "
                 "stream, then both, each for the runtime; MB/s per group, and their sum "
                 "(proportional to the bytes written over the job).")
        L.append("")
        L += table(["system", "small", "stream", "mixed: small", "mixed: stream", "sum"], rows)
        bf = max(((score[s], s) for s in fixed if s in score), default=None)
        if bf and "nxd-adaptive" in score:
            x = score["nxd-adaptive"] / bf[0]
            L.append("adaptive / best fixed (%s): %.2fx (target >= 1.15x: %s)."
                     % (dict(ROUTE_FIXED)[bf[1]], x, "met" if x >= 1.15 else "**not met**"))
            L.append("")
    return L + oracle_section(rep)


def oracle_reports(chunks):
    """bench/route_oracle.py's job reports over the routing chunk's traces."""
    dirs = [os.path.join(REPO, s["path"]) for s in chunks if s.get("chunk") == "routing"]
    jobs, ssd = route_oracle.load(dirs) if dirs else ({}, None)
    return [route_oracle.job_report(j, runs)
            for j, runs in sorted(jobs.items(), key=lambda kv: [
                int(x) if x.isdigit() else x for x in re.split(r"(\d+)", kv[0])])]


def oracle_section(rep):
    """The oracle's table, from oracle_reports()."""
    if not rep:
        return []
    names = ["nxd-pass", "nxd-t16k", "nxd", "nxd-t256k", "nxd-adaptive"]
    L = ["Offline oracle (`bench/route_oracle.py`, on the nxd_io_done traces of these runs): "
         "modelled microseconds per MiB written, from a table of each job's mean service time "
         "by route, size and alignment over all its runs (a logged write that waited for room "
         "counts its wait); the oracle sends each of `mode adaptive`'s writes where the table "
         "serves it sooner.  `oracle / adaptive` is the share of the oracle's speed that "
         "adaptive reached (target >= 80 %).", ""]
    rows, worst = [], None
    for r in rep:
        x = r.get("adaptive_vs_oracle")
        if x is not None:
            worst = x if worst is None else min(worst, x)
        rows.append([r["job"].replace("route-", "")] +
                     [fmt((r["systems"].get(n) or {}).get("us_per_mib")) for n in names] +
                     [fmt((r.get("oracle") or {}).get("us_per_mib")),
                      "%.0f %%" % (100 * x) if x is not None else "-"])
    L += table(["job"] + names + ["oracle", "oracle / adaptive"], rows)
    if worst is not None:
        L.append("Lowest oracle / adaptive: %.0f %% (target >= 80 %%: %s)."
                 % (100 * worst, "met" if worst >= 0.8 else "**not met**"))
        L.append("")
    return L


def starved(m):
    """The host was overloaded and gave the guest's QEMU clearly less CPU
    than the guest believes it used.  Under TCG a vCPU descheduled by the
    host while busy is charged, by the guest, for the time it did not run,
    so guest busy time well above the host CPU time it got means the guest
    waited for the host.  A guest waiting on its emulated drives (idle
    vCPUs) uses little of either and is not starved, however loaded the
    host (the first version of this test flagged every such job)."""
    c, v = m.get("host_cores"), m.get("vcpus") or 2
    busy = (m.get("cpu_busy_pct") or 0) / 100.0 * v
    return (c is not None and c < 0.8 * busy and
            (m.get("host_load") or 0) > NPROC)


def bound(m):
    """Which resource limited a job: the drives, the guest CPU (all vCPUs
    or one), or, when neither, a host that gave the guest too little CPU."""
    if not m or m.get("cpu_busy_pct") is None:
        return "-"
    cpu, one, drv = m["cpu_busy_pct"], m.get("cpu_max_pct") or 0, m.get("drive_busy_pct_max")
    if drv is not None and drv >= 80:
        return "drives"
    if cpu >= 85:
        return "CPU (host-starved)" if starved(m) else "CPU"
    if one >= 90:
        return "one vCPU"
    if starved(m):
        return "host-starved"
    return "neither"


def verdicts(rr, names, jids):
    """Said plainly: per system, which jobs the CPU bounded and which the
    drives; md alone first, since every cache but the raw SSD writes
    through it."""
    L = []
    for n in names:
        by = {}
        for j in jids:
            r = rr.get(n, j)
            if r and r.get("meter"):
                by.setdefault(bound(r["meter"]), []).append(j)
        if not by:
            continue
        total = sum(len(v) for v in by.values())
        cpu = by.get("CPU", []) + by.get("one vCPU", []) + by.get("CPU (host-starved)", [])
        parts = ["%s in %d of %d jobs%s" % (k, len(v), total, " (%s)" % ", ".join(v) if len(v) <= 8 else "")
                 for k, v in sorted(by.items(), key=lambda kv: -len(kv[1]))]
        line = "- **%s**: %s." % (n, "; ".join(parts))
        if n == "md" and cpu:
            line += (" **md RAID6 under TCG was CPU-bound in %d of its %d jobs**: there the guest's "
                     "CPU (md's raid6d and stripe handling, fio, the memory copies), not the emulated "
                     "drives, set the array's pace, and so the pace of every system that writes "
                     "through the array." % (len(cpu), total))
        elif n == "md":
            line += " md RAID6 was not CPU-bound in any job."
        L.append(line)
    if L:
        L = ["What bounded each system (same thresholds as above):", ""] + L + [""]
    return L


def merge(m):
    """The drives' bios per batch (dm-hddsim's merging) over a job."""
    if not m or not m.get("drive_batches"):
        return "-"
    return "%.1f" % (m["drive_bios"] / m["drive_batches"])


def markdown(chunks, rr, names, images):
    L = []
    smoke = any(s.get("smoke") for s in chunks)
    s0 = chunks[0]
    hdd = s0.get("hdd", {})
    L.append("%s: guest kernel %s (clocksource %s); array: md RAID6 of %s x %s MiB hddsim drives, chunk %s KiB%s; "
             "SSD: brd %d MiB; burst budget %s %% of the SSD; steady state %s s, settle window %s s. "
             "Raw fio JSON and summaries: `%s`."
             % ("SMOKE run (numbers are not meaningful)" if smoke else "Full run",
                s0["kernel"], s0.get("clocksource", "not recorded"), hdd.get("count"), hdd.get("size_mb"), hdd.get("chunk_kb"),
                ((", hddsim `%s`" % hdd["hddsim_opts"]) if hdd.get("hddsim_opts") else "") +
                "".join(", md %s %s" % (k.split("/")[-1].split(":")[0], k.split(":")[-1])
                        for k in s0.get("md_settings", "").split()),
                s0["ssd_mb"], s0.get("burst_pct"), s0.get("steady_s"), s0.get("steady_window_s"),
                os.path.dirname(s0["path"])))
    L.append("")

    def host(s, key, i=None):
        """host.json (bench.sh): key, or key of load sample i (0 before the boot)."""
        h = s.get("host") or {}
        try:
            return h[key] if i is None else h["load"][i][key]
        except (KeyError, IndexError, TypeError):
            return "-"

    # Before the boot no guest of ours runs: the QEMU count is other guests.
    L += table(["chunk (one boot each)", "started", "seconds in the guest", "boot (s)", "jobs",
                "vCPUs", "host load average before", "after", "other QEMU guests before"],
               [[s["chunk"], s["started"][:19], s.get("seconds", "?"), host(s, "seconds"),
                 len(s.get("jobs", [])), host(s, "vcpus"), host(s, "loadavg", 0),
                 host(s, "loadavg", 1), host(s, "qemu", 0)]
                for s in chunks])
    L.append("Guest kernel command line (less virtme-ng's own words): `%s`." % " ".join(
        w for w in s0.get("cmdline", "not recorded").split()
        if not w.startswith(("virtme", "nr_open", "init=", "rootfstype", "rootflags", "root=", "console"))))
    L.append("")
    status = {}
    for s in chunks:
        for n, st in s["systems"].items():
            cur = status.setdefault(n, dict(desc=st.get("desc", ""), status="ran", note=""))
            if st["status"] != "ran":
                cur["status"] = st["status"]
                cur["note"] += " %s: %s" % (s["chunk"], st.get("note", ""))
    L += table(["system", "setup", "status"],
               [[n, status[n]["desc"], status[n]["status"] + (": " + status[n]["note"].strip()[:300]
                                                              .replace("|", "/") if status[n]["note"] else "")]
                for n in names + [x for x in status if x not in names]])
    L.append("### Headline: the targets of the performance issues")
    L.append("")
    L += headline(rr, names)
    L += cpu_section(rr)
    L += routing(rr, chunks)

    L.append("### Burst: random writes from a clean cache (IOPS)")
    L.append("")
    L.append("Each job on a system set up from scratch; a cache's writes stop at the burst budget "
             "(%s %% of the SSD) or after the runtime, whichever comes first, so that it stays below "
             "its watermarks; the raw SSD writes the same budget (the caches are compared with it "
             "over the same writes, start-up included); md, with no cache state, runs the whole "
             "runtime.  4 KiB aligned."
             % s0.get("burst_pct"))
    nr = len(rr.rounds("nxd", "randwrite-4k-qd8"))
    if nr > 1:
        L.append("")
        L.append("The jobs of the targets (QD 8 and 32, and the NytroXD sizes) ran %d times on the "
                 "raw SSD, dm-writecache and dm-nxd, round after round, each system right after "
                 "the other in each round; their cells are the medians." % nr)
    L.append("")
    rows = []
    for k in (4, 8, 16):
        for q in (1, 8, 32):
            j = "randwrite-%dk-qd%d" % (k, q)
            nx, sd, md = rr.val("nxd", j), rr.val("ssd", j), rr.val("md", j)
            rows.append(["%d KiB QD %d" % (k, q)] + [fmt(rr.val(n, j)) for n in names] +
                        [fmt(100 * ratio(nx, sd)) if ratio(nx, sd) else "-",
                         fmt(ratio(nx, md), 1) if ratio(nx, md) else "-"])
    L += table(["job"] + names + ["nxd % of ssd", "nxd / md"], rows)
    rows = []
    for n in NYTRO:
        for a in ("aligned", "unaligned"):
            j = "nytro-%d-%s" % (n, a)
            nx, sd = rr.val("nxd", j), rr.val("ssd", j)
            rows.append(["%d B %s" % (n, a)] + [fmt(rr.val(x, j)) for x in names] +
                        [fmt(100 * ratio(nx, sd)) if ratio(nx, sd) else "-"])
    L.append("NytroXD transfer sizes (run as the nearest multiple of 512 B), QD 8, IOPS:")
    L.append("")
    L += table(["size"] + names + ["nxd % of ssd"], rows)
    L.append("Completion latency of 4 KiB writes at QD 8 (us): p50 / p99 / p99.9")
    L.append("")
    L += table(["system", "p50", "p99", "p99.9"],
               [[n] + [fmt(rr.val(n, "randwrite-4k-qd8", k)) for k in ("p50_us", "p99_us", "p99_9_us")]
                for n in names])

    L.append("### Streaming, interference, reads, mix")
    L.append("")
    rows = [["1 MiB streaming (MB/s)"] + [fmt(rr.val(n, "streaming", "mbps"), 1) for n in names],
            ["1 MiB streaming after the 4 KiB burst (MB/s)"] +
            [fmt(rr.val(n, "streaming-after-small", "mbps"), 1) for n in names],
            ["interference: 4 x 8 KiB writers (IOPS)"] +
            [fmt(rr.val(n, "interference", "iops", "small")) for n in names],
            ["interference: 1 MiB writer beside them (MB/s)"] +
            [fmt(rr.val(n, "interference", "mbps", "stream"), 1) for n in names],
            ["interference: 1 MiB writer alone (MB/s)"] +
            [fmt(rr.val(n, "interference-solo", "mbps", "stream"), 1) for n in names],
            ["interference, burst: 4 x 8 KiB writers (IOPS)"] +
            [fmt(rr.val(n, "interference-burst", "iops", "small")) for n in names],
            ["interference, burst: 1 MiB writer while they ran (MB/s)"] +
            [fmt(rr.val(n, "interference-burst", "window_mbps", "stream"), 1) for n in names],
            ["4 KiB reads of data just written (IOPS)"] +
            [fmt(rr.val(n, "read-after-write-cache")) for n in names],
            ["4 KiB reads of data kept in dm-nxd's log (destage paused) (IOPS)"] +
            [fmt(rr.val(n, "read-log")) for n in names],
            ["4 KiB reads never written through the cache (IOPS)"] +
            [fmt(rr.val(n, "read-hdd")) for n in names],
            ["70/30 read/write 4 KiB (IOPS)"] + [fmt(rr.val(n, "mix70-4k")) for n in names]]
    L += table(["job"] + names, rows)
    c = (rr.get("nxd", "read-after-write-cache") or {}).get("counters") or {}
    if c:
        L.append("dm-nxd's reads of data just written: %d read bios served from the log, %d from "
                 "the HDD (log %s %% used when the reads began)."
                 % (c.get("reads_ssd", 0), c.get("reads_hdd", 0),
                    fmt(((rr.get("nxd", "read-after-write-cache") or {}).get("occupancy_before") or {})
                        .get("used_pct"), 0)))
        c2 = (rr.get("nxd", "read-log") or {}).get("counters") or {}
        if c2:
            L.append(" With destage paused (`read-log`): %d from the log, %d from the HDD."
                     % (c2.get("reads_ssd", 0), c2.get("reads_hdd", 0)))
        L.append("")

    L.append("### Steady state, cold start and drain")
    L.append("")
    rows = []
    for n in names:
        r = rr.get(n, "steady-4k")
        if not r:
            rows.append([n] + ["-"] * 8)
            continue
        occ = r.get("occupancy_after") or {}
        cold = r.get("cold") or {}
        dr = r.get("drain") or {}
        at = cold.get("occupancy_at_resume") or {}
        rows.append([n, fmt(r.get("steady_iops")), fmt(r.get("settle_change_pct"), 1),
                     fmt(occ.get("used_pct"), 0), fmt(occ.get("dirty_pct"), 0),
                     "%s / %s" % (cold.get("stop_s", "-"), cold.get("start_s", "-"))
                     + (" (load %s, resume %s, udev %s)" % (cold.get("load_s"), cold.get("resume_s"),
                                                            cold.get("udev_s")) if "load_s" in cold else "")
                     + (" (replay %.2f s)" % (cold["recovery_us"] / 1e6) if cold.get("recovery_us") else ""),
                     fmt(at.get("dirty_pct"), 0) if cold else "-",
                     (fmt(dr.get("from_resume_s"), 1) if "from_resume_s" in dr else fmt(dr.get("seconds"), 1))
                     + ("" if dr.get("complete", True) else " (not done)"),
                     fmt(r["meter"].get("cpu_busy_pct")) + " / " + fmt(r["meter"].get("drive_busy_pct_max"))])
    L += table(["system", "steady IOPS (settle window)", "change over the window (%)", "cache used at end (%)",
                "dirty at end (%)", "cold start: stop / activate (s)", "dirty after activation (%)",
                "drain: resume to clean (s)",
                "CPU / drives busy (%)"], rows)
    rows = []
    for n in names:
        r = rr.get(n, "drain-4k")
        if not r:
            rows.append([n] + ["-"] * 6)
            continue
        if "drain" in r:
            d = r["drain"]
            arr = (d.get("blktrace") or {}).get("array") or {}
            c = r.get("counters") or {}
            mean = destage_mean(c)
            rows.append([n, fmt(r["fill"]["bytes"] / 2 ** 20), fmt((r.get("occupancy_before") or {}).get("dirty_pct")),
                         fmt(d.get("seconds"), 1) + ("" if d.get("complete") else " (not done)"),
                         fmt(d.get("mbps"), 2),
                         fmt(arr["write_mean_bytes"] / 1024, 1) if arr.get("write_count") else "-",
                         fmt(mean / 1024, 1) if mean else "-", merge(r.get("meter"))])
        else:
            rows.append([n, "-", "-", "-", fmt(rr.val(n, "drain-4k", "mbps"), 2) + " (direct writes)", "-", "-",
                         merge(r.get("meter"))])
    L.append("Drain: random 4 KiB writes, each block once, over a region 8x the SSD, %s %% of the SSD; "
             "then write everything back (md, ssd: the same kind of writes straight to the device)."
             % s0.get("drain_fill_pct"))
    L.append("")
    L += table(["system", "filled (MiB)", "dirty at start (%)", "drain (s)", "MB/s written back",
                "mean write to the array (KiB, blktrace)", "mean destage bio (KiB, dm-nxd)",
                "drive bios per batch"], rows)

    L.append("### Where the time went")
    L.append("")
    L.append("Guest CPU busy (all vCPUs and the busiest one, /proc/stat), the busiest hddsim "
             "drive's busy time, and the host cores the guest's QEMU process used (its CPU time "
             "over the job, sampled on the host every 2 s), over each job: `drives` when a drive "
             "was >= 80 %% busy; `CPU` when the vCPUs were >= 85 %% busy, `one vCPU` when one was "
             ">= 90 %% (a single thread such as md's raid6d); then the emulation, not the disks, set "
             "the pace.  Under TCG the guest cannot see the host taking its vCPUs away (its busy "
             "figures then overstate its work): `host-starved` when the guest's QEMU got less than "
             "0.8x the CPU the guest believes it used (busy %% x vCPUs) while the host's load "
             "average exceeded its %d cores; a guest waiting on its drives is not starved." % NPROC)
    L.append("")
    jids = []
    for s in chunks:
        for j in s.get("jobs", []):
            if j["id"] not in jids:
                jids.append(j["id"])
    rows = []
    for j in jids:
        row = [j]
        for n in names:
            r = rr.get(n, j)
            m = (r or {}).get("meter")
            row.append("%s/%s/%s/%s %s" % (fmt(m.get("cpu_busy_pct")), fmt(m.get("cpu_max_pct")),
                                            fmt(m.get("drive_busy_pct_max")), fmt(m.get("host_cores"), 2),
                                            bound(m))
                       if m else "-")
        rows.append(row)
    L += table(["job (CPU % all / busiest vCPU / busiest drive % / host cores)"] + names, rows)
    L += verdicts(rr, names, jids)
    rows = []
    for n in names:
        for j in jids:
            r = rr.get(n, j)
            if not r:
                continue
            for label, bt, m in (("", r.get("blktrace"), r.get("meter")),
                                 (" (drain)", (r.get("drain") or {}).get("blktrace"),
                                  (r.get("drain") or {}).get("meter") or r.get("meter"))):
                if not bt:
                    continue
                if bt.get("error"):
                    rows.append([n, j + label, bt["error"][:120], "", "", "", "", ""])
                    continue
                a, mb = bt.get("array") or {}, bt.get("members") or {}
                top = sorted(a.get("write_hist", {}).items(), key=lambda kv: -kv[1])[:4]
                rows.append([n, j + label,
                             "%d / %.1f" % (a.get("write_count", 0), a.get("write_mean_bytes", 0) / 1024),
                             "%d / %.1f" % (a.get("read_count", 0), a.get("read_mean_bytes", 0) / 1024),
                             ", ".join("%.1f KiB x%d" % (int(k) / 1024, v) for k, v in top),
                             fmt(a.get("full_stripe_bytes_pct"), 0),
                             "%d / %.1f" % (mb.get("write_count", 0), mb.get("write_mean_bytes", 0) / 1024),
                             merge(m)])
    if rows:
        L.append("Requests the system sent the array, and those md sent the drives (blktrace queue "
                 "events on the md device and the hddsim devices).  md raid456 hands its members one "
                 "4 KiB bio per stripe unit; the drive model merges contiguous queued bios into one "
                 "service (the elevator's work), hence the drives' bios per batch.")
        L.append("")
        L += table(["system", "job", "array writes / mean KiB", "array reads / mean KiB",
                    "commonest array write sizes", "% of bytes in full-stripe writes",
                    "member writes / mean KiB", "drive bios per batch"], rows)
    for title, path in images:
        L.append("![%s](%s)" % (title, path))
        L.append("")
    return "\n".join(L).rstrip() + "\n"


def plots(chunks, rr, names, outdirs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_report: matplotlib not installed: no plots (apt-get install python3-matplotlib)")
        return []
    made = []
    tag = " (SMOKE)" if any(s.get("smoke") for s in chunks) else ""

    def save(fig, fname, title):
        fig.tight_layout()
        for d in outdirs:
            fig.savefig(os.path.join(d, fname), dpi=80)
        plt.close(fig)
        made.append((title, "bench/" + fname))

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.8))
    ax = axes[0]
    for n in names:
        for q, ls in ((8, "-"), (32, ":")):
            pts = [(k, rr.val(n, "randwrite-%dk-qd%d" % (k, q))) for k in (4, 8, 16)]
            pts = [p for p in pts if p[1]]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ls=ls,
                        label="%s QD %d" % (n, q))
    ax.set_title("4/8/16 KiB aligned, QD 8 (solid) and 32 (dotted)")
    ax.set_xscale("log", base=2)
    ax.set_xticks([4, 8, 16])
    ax.set_xticklabels(["4", "8", "16"])
    ax.minorticks_off()
    ax.set_xlabel("transfer size (KiB)")
    for ax, mis in zip(axes[1:3], ("aligned", "unaligned")):
        for n in names:
            pts = [(x, rr.val(n, "nytro-%d-%s" % (x, mis))) for x in NYTRO]
            pts = [p for p in pts if p[1]]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=n)
        ax.set_title("NytroXD sizes, %s, QD 8" % mis)
        ax.set_xscale("log")
        ax.set_xticks(NYTRO)
        ax.set_xticklabels([str(x) for x in NYTRO], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel("transfer size (bytes)")
    ax = axes[3]
    for n in names:
        pts = [(q, rr.val(n, "randwrite-4k-qd%d" % q)) for q in (1, 8, 32)]
        pts = [p for p in pts if p[1]]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=n)
    ax.set_title("4 KiB aligned random writes by queue depth")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 8, 32])
    ax.set_xticklabels(["1", "8", "32"])
    ax.set_xlabel("queue depth")
    for ax in axes:
        ax.set_ylabel("IOPS")
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.set_yscale("log")
            ax.legend(fontsize=7)
    fig.suptitle("Burst random writes from a clean cache" + tag)
    save(fig, "bench-iops.png", "IOPS by transfer size and queue depth")

    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = range(len(names))
    for i, (k, lab) in enumerate((("p50_us", "p50"), ("p99_us", "p99"), ("p99_9_us", "p99.9"))):
        ax.bar([x + i * 0.27 for x in xs], [rr.val(n, "randwrite-4k-qd8", k) or 0 for n in names],
               width=0.27, label=lab)
    ax.set_xticks([x + 0.27 for x in xs])
    ax.set_xticklabels(names)
    ax.set_yscale("log")
    ax.set_ylabel("completion latency (us)")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title("4 KiB random writes, QD 8: latency percentiles" + tag)
    save(fig, "bench-latency.png", "Latency percentiles of 4 KiB writes")

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    a1.bar(names, [rr.val(n, "interference", "iops", "small") or 0 for n in names], color="tab:blue")
    a1.set_title("4 x 8 KiB random writers (IOPS, summed)")
    a1.set_yscale("log")
    w = 0.4
    a2.bar([x - w / 2 for x in xs], [rr.val(n, "interference-solo", "mbps", "stream") or 0 for n in names],
           width=w, label="alone", color="tab:gray")
    a2.bar([x + w / 2 for x in xs], [rr.val(n, "interference", "mbps", "stream") or 0 for n in names],
           width=w, label="beside the small writers", color="tab:orange")
    a2.set_xticks(list(xs))
    a2.set_xticklabels(names)
    a2.set_title("1 MiB sequential writer (MB/s)")
    a2.legend(fontsize=8)
    for a in (a1, a2):
        a.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Interference" + tag)
    save(fig, "bench-interference.png", "Interference: small random writers beside a streamer")

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for n in names:
        r = rr.get(n, "steady-4k")
        if not r:
            continue
        tl = r.get("iops_timeline") or []
        if tl:
            a1.plot([t for t, _ in tl], [v for _, v in tl], label=n, lw=1)
        oc = [x for x in (r.get("occupancy_timeline") or []) if x[1] is not None]
        if oc:
            a2.plot([x[0] for x in oc], [x[1] for x in oc], label=n + " used")
            a2.plot([x[0] for x in oc], [x[2] or 0 for x in oc], ls="--", label=n + " dirty")
    a1.set_ylabel("IOPS (1 s averages)")
    if a1.lines:
        a1.set_yscale("log")
    a1.legend(fontsize=7)
    a1.grid(True, alpha=0.3)
    a2.set_ylabel("cache occupancy (%)")
    a2.set_xlabel("seconds")
    a2.legend(fontsize=7, ncol=2)
    a2.grid(True, alpha=0.3)
    fig.suptitle("Steady state: random 4 KiB writes over 4x the SSD, QD 8" + tag)
    save(fig, "bench-steady.png", "Steady state: IOPS and cache occupancy over time")
    return made


def update_doc(text):
    doc = open(DOC).read() if os.path.exists(DOC) else "# Performance\n"
    block = BEGIN + "\n" + text + END
    if BEGIN in doc and END in doc:
        a = doc.index(BEGIN)
        b = doc.index(END) + len(END)
        doc = doc[:a] + block + doc[b:]
    else:
        doc = doc.rstrip() + "\n\n## Benchmark results\n\n" + block + "\n"
    with open(DOC, "w") as f:
        f.write(doc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--no-docs", action="store_true")
    a = ap.parse_args()
    chunks, results = load(a.dirs)
    every = systems_of(chunks)
    # The routing variants have their own section, as has dm-linear (the
    # cpu chunk's reference) unless it ran in the matrix too.
    other = set(r[0] for r in results if not r[1].startswith("cpu-"))
    names = [n for n in every if n not in ROUTE_ONLY and (n != "linear" or n in other)]
    rr = R(results)
    outdirs = [a.dirs[0]] + ([] if a.no_docs else [IMGDIR])
    for d in outdirs:
        os.makedirs(d, exist_ok=True)
    images = plots(chunks, rr, names, outdirs)
    text = markdown(chunks, rr, names, images)
    with open(os.path.join(a.dirs[0], "report.md"), "w") as f:
        f.write(text.replace("](bench/", "]("))
    print(text)
    if not a.no_docs:
        update_doc(text)
        print("bench_report: updated %s" % os.path.relpath(DOC, REPO))
    missing = [n for n in ORDER if n not in names]
    bad = failures(chunks, results, names)
    if missing and not os.environ.get("BENCH_SYSTEMS"):
        bad.append("systems never reached: " + ", ".join(missing))
    for b in bad:
        print("bench_report: FAILED %s" % b)
    if not bad:
        print("bench_report: every system ran every job (%d results in %d chunks)"
              % (len(results), len(chunks)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
