#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""demo_check.py DIR: checks what `make demo` left in DIR (build/demo).

The table: md.json and nxd.json (fio's JSON of the mixed job on the array
alone and on dm-nxd) each hold both groups, the small random writers
(group 0) and the 1 MiB streamer (group 1), each with writes done, bytes
moved and no error.  The histogram: `nxdctl histogram` of the dm-nxd run
(histogram.txt) counts the small writers' 8 KiB writes in its 4K+1 - 8K
bucket and the streamer's writes above 512K, as many as fio says it
completed (the histogram is reset before that run, and XFS passes O_DIRECT
writes of these sizes through whole).  The logs behind the row of the
streamer while the log had room: the streamer's MB/s per second on both
systems, the log's occupancy per second on dm-nxd.
Prints one line per check and a verdict; exits 1 on any failure.
"""
import glob
import json
import re
import sys

GROUPS = {0: "4 x 8 KiB random writers", 1: "1 MiB sequential writer"}


def fio_groups(path):
    text = open(path).read()
    jobs = json.loads(text[text.find("{"):])["jobs"]
    g = {}
    for j in jobs:
        w = j["write"]
        cur = g.setdefault(j["groupid"], {"ios": 0, "bytes": 0, "error": 0})
        cur["ios"] += w["total_ios"]
        cur["bytes"] += w["io_bytes"]
        cur["error"] += j.get("error", 0)
    return g


def histogram_writes(path):
    """{bucket label: count} of the write lines of `nxdctl histogram`."""
    out = {}
    for line in open(path):
        m = re.match(r"\s*Num Writes\s+(.+?)\s*=\s*(\d+)\s*$", line)
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def main(d):
    bad = []

    def check(ok, what):
        print(f"demo-check: {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            bad.append(what)

    runs = {}
    for name, label in (("md", "md RAID6 alone"), ("nxd", "dm-nxd")):
        try:
            runs[name] = fio_groups(f"{d}/{name}.json")
        except (OSError, ValueError, KeyError) as e:
            check(False, f"{label}: no fio result ({e})")
            continue
        for gid, gname in GROUPS.items():
            g = runs[name].get(gid)
            check(g is not None and g["ios"] > 0 and g["bytes"] > 0 and g["error"] == 0,
                  f"{label}, {gname}: {g}")
    # The per-second logs behind the "while the log had room" row.
    for name in ("md", "nxd"):
        files = glob.glob(f"{d}/{name}-stream_bw.*.log")   # .N: fio's job index
        try:
            n = sum(1 for _ in open(files[0])) if len(files) == 1 else 0
        except OSError:
            n = 0
        check(n >= 2, f"{name}: {n} seconds in the streamer's bandwidth log")
    try:
        n = sum(1 for _ in open(f"{d}/nxd-log.txt"))
    except OSError:
        n = 0
    check(n >= 2, f"dm-nxd: {n} samples of the log's occupancy")
    try:
        h = histogram_writes(f"{d}/histogram.txt")
    except OSError as e:
        h = {}
        check(False, f"histogram: {e}")
    check(len(h) >= 10, f"histogram: {len(h)} write buckets")
    nxd = runs.get("nxd", {})
    if h and nxd.get(0) and nxd.get(1):
        small = h.get("4K+1 - 8K", 0)
        big = sum(v for k, v in h.items()
                  if k in ("512K+1 - 1M", "1M+1 - 2M", "2M+1 - 4M", "4M+1 - 8M"))
        # Writes fio completed are all counted; a few more may come from
        # XFS itself (its log, metadata) and land in other buckets.
        check(small >= nxd[0]["ios"],
              f"histogram: {small} writes of 4K+1 - 8K, fio's small writers completed {nxd[0]['ios']}")
        check(big >= nxd[1]["ios"] * 0.9,
              f"histogram: {big} writes above 512K, fio's streamer completed {nxd[1]['ios']}")
    print(f"demo-check: {'FAIL' if bad else 'PASS'} ({len(bad)} of the checks failed)")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: demo_check.py DIR")
    sys.exit(main(sys.argv[1]))
