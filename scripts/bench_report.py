#!/usr/bin/env python3
"""dm-nxd benchmark report, host side (run by scripts/bench.sh).

  bench_report.py [--no-docs] [--check-all-ran] results/<timestamp>

Reads results/<timestamp>/summary.json (written by bench_guest.py in the
guest), prints a markdown table, draws PNG plots (matplotlib, when it is
installed: Debian python3-matplotlib) into docs/bench/ and results/<ts>/,
and replaces the text between <!-- bench:begin --> and <!-- bench:end --> in
docs/performance.md.

--check-all-ran (smoke): exit 1 unless every system ran every job.  dm-nxd
is the exception: when its module is not built, does not load or its table
is refused, it is reported as skipped with the reason, not as a failure.
"""

import argparse
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "performance.md")
IMGDIR = os.path.join(REPO, "docs", "bench")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
ORDER = ["md", "ssd", "bcache", "writecache", "dmcache", "nxd"]
PATTERNS = ["randwrite", "randrewrite", "randread"]
NOMINAL = [5000, 10000, 20000, 40000, 80000, 160000]


def systems_of(s):
    return [n for n in ORDER if n in s["systems"]] + [n for n in s["systems"] if n not in ORDER]


def result(s, system, rid):
    for r in s["results"]:
        if r["system"] == system and r["id"] == rid:
            return r
    return None


def cell(r, group=None, what="iops"):
    if r is None:
        return "-"
    if not r.get("ok"):
        return "FAIL"
    gs = r["groups"]
    g = next((g for g in gs if g["group"] == group), None) if group else (gs[-1] if gs else None)
    if g is None:
        return "-"
    if what == "mbps":
        return "%.1f MB/s" % g["mbps"]
    return "%.0f (%.1f MB/s)" % (g["iops"], g["mbps"])


def markdown(s, images):
    names = systems_of(s)
    lines = []
    mode = "smoke (reduced matrix, %d s per job: numbers are not meaningful)" % s["runtime"] if s["smoke"] \
        else "full matrix, %d s per job after %d s ramp" % (s["runtime"], s["ramp"])
    hdd = s.get("hdd", {})
    lines.append("Run %s, guest kernel %s, %s; QD %d per job; array: md RAID6 of %s x %s MiB "
                 "hddsim drives, chunk %s KiB%s; SSD: brd %d MiB.  Total %s s.  Raw fio JSON: "
                 "`results/<timestamp>/`, summary: `results/summary.json`."
                 % (s["started"], s["kernel"], mode, s["iodepth"], hdd.get("count"), hdd.get("size_mb"),
                    hdd.get("chunk_kb"),
                    (", hddsim options `%s`" % hdd["hddsim_opts"]) if hdd.get("hddsim_opts") else "",
                    s["ssd_mb"], s.get("seconds", "?")))
    lines.append("")
    lines.append("| system | setup | status |")
    lines.append("|---|---|---|")
    for n in names:
        st = s["systems"][n]
        note = st.get("note", "").strip().replace("|", "/").replace("\n", " ")
        lines.append("| %s | %s | %s%s |" % (n, st.get("desc", ""), st["status"],
                                           (": " + note[:300]) if note else ""))
    lines.append("")
    lines.append("IOPS (MB/s) per job; randrewrite shows the second (measured) pass; "
                 "sizes are the NytroXD sizes, run as the nearest multiple of 512 bytes.")
    lines.append("")
    lines.append("| job | " + " | ".join(names) + " |")
    lines.append("|---" * (len(names) + 1) + "|")
    ids = []
    for r in s["results"]:
        if r["id"] not in ids:
            ids.append(r["id"])
    for rid in ids:
        j = next(r for r in s["results"] if r["id"] == rid)
        if j["job"] == "interference":
            lines.append("| interference: 4 x 8 KiB random writers | " +
                         " | ".join(cell(result(s, n, rid), "small") for n in names) + " |")
            lines.append("| interference: 1 MiB sequential writer | " +
                         " | ".join(cell(result(s, n, rid), "stream", "mbps") for n in names) + " |")
            continue
        label = rid
        if j.get("bs"):
            label = "%s %d (%d B) %s" % (j["job"], j["nominal"], j["bs"],
                                        "unaligned" if j["misalign"] else "aligned")
        what = "mbps" if j["job"] == "streaming" else "iops"
        lines.append("| %s | " % label + " | ".join(cell(result(s, n, rid), None, what) for n in names) + " |")
    lines.append("")
    for title, path in images:
        lines.append("![%s](%s)" % (title, path))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def plots(s, outdirs):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("bench_report: matplotlib not installed: no plots (apt-get install python3-matplotlib)")
        return []
    names = systems_of(s)
    made = []
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), squeeze=False)
    for col, pat in enumerate(PATTERNS):
        for row, mis in enumerate((0, 512)):
            ax = axes[row][col]
            for n in names:
                pts = sorted((r["nominal"], r["groups"][-1]["iops"]) for r in s["results"]
                             if r["system"] == n and r["job"] == pat and r.get("misalign") == mis
                             and r.get("ok") and r["groups"])
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=n)
            ax.set_title("%s, %s" % (pat, "unaligned (+512 B)" if mis else "4 KiB aligned"))
            ax.set_xscale("log")
            ax.set_xlim(4000, 200000)
            ax.set_xticks(NOMINAL)
            ax.set_xticklabels([str(n) for n in NOMINAL], fontsize=8)
            ax.minorticks_off()
            if ax.lines:
                ax.set_yscale("log")
            else:
                ax.text(0.5, 0.5, "not run", ha="center", va="center", transform=ax.transAxes)
            ax.set_xlabel("transfer size (bytes, NytroXD nominal)")
            ax.set_ylabel("IOPS")
            ax.grid(True, alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    fig.suptitle("IOPS by transfer size (QD %d%s)" % (s["iodepth"], ", SMOKE run" if s["smoke"] else ""))
    fig.tight_layout()
    for d in outdirs:
        fig.savefig(os.path.join(d, "bench-iops.png"), dpi=80)
    plt.close(fig)
    made.append(("IOPS by transfer size per system", "bench/bench-iops.png"))

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    small, stream, labels = [], [], []
    for n in names:
        r = result(s, n, "interference")
        if not r or not r.get("ok"):
            continue
        g = {x["group"]: x for x in r["groups"]}
        labels.append(n)
        small.append(g.get("small", {}).get("iops", 0))
        stream.append(g.get("stream", {}).get("mbps", 0))
    a1.bar(labels, small, color="tab:blue")
    a1.set_title("4 x 8 KiB random writers (IOPS, summed)")
    a1.set_yscale("log")
    a2.bar(labels, stream, color="tab:orange")
    a2.set_title("1 MiB sequential writer beside them (MB/s)")
    for a in (a1, a2):
        a.grid(True, axis="y", alpha=0.3)
    fig.suptitle("Interference%s" % (" (SMOKE run)" if s["smoke"] else ""))
    fig.tight_layout()
    for d in outdirs:
        fig.savefig(os.path.join(d, "bench-interference.png"), dpi=80)
    plt.close(fig)
    made.append(("Interference: small random writers beside a streamer", "bench/bench-interference.png"))
    return made


def update_doc(text):
    if os.path.exists(DOC):
        doc = open(DOC).read()
    else:
        doc = "# Performance\n"
    block = BEGIN + "\n" + text + END
    if BEGIN in doc and END in doc:
        a = doc.index(BEGIN)
        b = doc.index(END) + len(END)
        doc = doc[:a] + block + doc[b:]
    else:
        doc = doc.rstrip() + "\n\n## Benchmark results\n\n" + block + "\n"
    with open(DOC, "w") as f:
        f.write(doc)


def check_all_ran(s):
    bad = []
    for n in systems_of(s):
        st = s["systems"][n]
        rs = [r for r in s["results"] if r["system"] == n]
        failed = [r["id"] for r in rs if not r.get("ok")]
        if n == "nxd" and (st["status"] != "ran" or failed):
            print("bench_report: NOTE: dm-nxd %s: %s" % (st["status"], st.get("note", "").strip()))
            continue
        if st["status"] != "ran" or not rs or failed:
            bad.append("%s: %s %s %s" % (n, st["status"], st.get("note", ""), " ".join(failed)))
    missing = [n for n in ORDER if n not in s["systems"]]
    if missing and not os.environ.get("BENCH_SYSTEMS"):
        bad.append("systems never reached: " + ", ".join(missing))
    for b in bad:
        print("bench_report: FAILED %s" % b)
    if not bad:
        print("bench_report: every system ran (%d results)" % len(s["results"]))
    return not bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("resdir")
    ap.add_argument("--no-docs", action="store_true")
    ap.add_argument("--check-all-ran", action="store_true")
    a = ap.parse_args()
    s = json.load(open(os.path.join(a.resdir, "summary.json")))
    outdirs = [a.resdir] + ([] if a.no_docs else [IMGDIR])
    for d in outdirs:
        os.makedirs(d, exist_ok=True)
    images = plots(s, outdirs)
    text = markdown(s, images)
    with open(os.path.join(a.resdir, "report.md"), "w") as f:
        f.write(text.replace("](bench/", "]("))
    print(text)
    if not a.no_docs:
        update_doc(text)
        print("bench_report: updated %s" % os.path.relpath(DOC, REPO))
    ok = check_all_ran(s) if a.check_all_ran else True
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
