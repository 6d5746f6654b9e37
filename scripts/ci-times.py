#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""ci-times.py JUNIT...: where a `make test` run's guest time went.

Reads the junit XML files scripts/test.sh leaves (build/logs/KVER-junit.xml)
and prints, per kernel, the seconds per test file and the slowest test
cases, as markdown (the tables of docs/bench/runs/ci-*.md).
"""
import collections
import os
import sys
import xml.etree.ElementTree as ET


def cases(path):
    for tc in ET.parse(path).getroot().iter("testcase"):
        f = tc.get("classname", "").rsplit(".", 1)[-1] + ".py"
        yield f, f"{f}::{tc.get('name')}", float(tc.get("time", 0))


def main(paths):
    per = {}
    for p in paths:
        kv = os.path.basename(p).replace("-junit.xml", "")
        per[kv] = list(cases(p))
    print("| file | " + " | ".join(per) + " |")
    print("|---|" + "---:|" * len(per))
    files = sorted({f for cs in per.values() for f, _, _ in cs})
    sums = {kv: collections.Counter() for kv in per}
    for kv, cs in per.items():
        for f, _, t in cs:
            sums[kv][f] += t
    for f in files:
        print(f"| {f} | " + " | ".join(f"{sums[kv][f]:.0f}" for kv in per) + " |")
    print("| **all** | " + " | ".join(f"**{sum(sums[kv].values()):.0f}**" for kv in per) + " |")
    for kv, cs in per.items():
        print(f"\nSlowest on {kv}:\n")
        print("| test | s |")
        print("|---|---:|")
        for _, name, t in sorted(cs, key=lambda c: -c[2])[:20]:
            print(f"| {name} | {t:.0f} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: ci-times.py JUNIT...")
    sys.exit(main(sys.argv[1:]))
