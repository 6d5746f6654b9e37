# SPDX-License-Identifier: GPL-2.0
"""Management checks for test_mgmt.py: the histogram as nxdctl prints it
in JSON, table cells, counter deltas, udev held off (UdevPaused), a writer
process and its I/O pattern."""
import json
import os

from nxdt import ctl, host, rawio
from nxdt.ctl import nxdctl
from nxdt.facts import BLOCK, KiB, MiB
from nxdt.host import run


LABELS = ["< 4K", "4K", "4K+1 - 8K", "8K+1 - 16K", "16K+1 - 32K", "32K+1 - 64K",
          "64K+1 - 128K", "128K+1 - 256K", "256K+1 - 512K", "512K+1 - 1M",
          "1M+1 - 2M", "2M+1 - 4M", "4M+1 - 8M", "8M+1 - 16M", "16M+1 - 32M", "> 32M"]


def hist_json(vol):
    """`nxdctl histogram VOL --json` as {(dir, bucket, route, align): (count, bytes)}
    plus a check of its bucket table against nxd_ioctl.h's definition."""
    d = json.loads(nxdctl("histogram", vol, "--json").stdout)
    assert len(d["buckets"]) == 16
    out = {}
    for i, b in enumerate(d["buckets"]):
        assert b["label"] == LABELS[i]
        lo = 0 if i == 0 else (4096 if i == 1 else (4096 << (i - 2)) + 1)
        hi = None if i == 15 else (4095 if i == 0 else (4096 if i == 1 else 4096 << (i - 1)))
        assert (b["min_bytes"], b["max_bytes"]) == (lo, hi), (i, b)
        for dr in ctl.DIRS:
            tot = [0, 0]
            for r in ctl.ROUTES:
                for a in ctl.ALIGNS:
                    c = b[dr][r][a]
                    out[(dr, i, r, a)] = (c["count"], c["bytes"])
                    tot[0] += c["count"]
                    tot[1] += c["bytes"]
                    if c["count"]:
                        assert c["time_ns"] > 0, (dr, i, r, a, c)
            assert [b[dr]["count"], b[dr]["bytes"]] == tot, (dr, i, b[dr])
    return out


def delta(now, before):
    return {k: (v[0] - before[k][0], v[1] - before[k][1])
            for k, v in now.items() if v != before[k]}


def cells(*spec):
    """Expected non-zero cells: (dir, nbytes, route, align[, count])."""
    out = {}
    for s in spec:
        d, n, r, a = s[:4]
        c = s[4] if len(s) > 4 else 1
        k = (d, ctl.bucket_of(n), r, a)
        cnt, byt = out.get(k, (0, 0))
        out[k] = (cnt + c, byt + c * n)
    return out


class UdevPaused:
    """Keep udev from running rules (e.g. blkid probes after a close of a
    written device) while a histogram is measured."""

    def __enter__(self):
        self.on = run(["udevadm", "control", "--ping"], check=False).returncode == 0
        if self.on:
            # Every probe of the devices just made must be over: on a loaded
            # host the usual 10 s were not enough and a blkid probe's reads
            # landed in the histogram.
            assert host.udev_settle(300), "udev did not settle in 300 s"
            run(["udevadm", "control", "--stop-exec-queue"])
        return self

    def __exit__(self, *a):
        if self.on:
            run(["udevadm", "control", "--start-exec-queue"])
            host.udev_settle()


def writer(dev, base, n, q):
    """n write requests: even ones 4 KiB into the logged area, odd ones
    128 KiB aligned into a disjoint area (to the HDD).  Reports counts."""
    try:
        f = rawio.Fd(dev)
        small = os.urandom(4096)
        large = os.urandom(128 * KiB)
        for i in range(n):
            if i % 2 == 0:
                f.pwrite(base + (i // 2 % 512) * BLOCK, small)
            else:
                f.pwrite(base + 8 * MiB + (i // 2 % 32) * 128 * KiB, large)
        f.close()
        q.put(None)
    except Exception as e:  # noqa: BLE001 - reported to the parent
        q.put(repr(e))


def io_pattern(v):
    with rawio.Fd(v.dev) as f:
        for i in range(100):
            f.pwrite(i * BLOCK, os.urandom(4096))
        for i in range(50):
            f.pwrite(MiB + i * 8192, os.urandom(8192))
        for i in range(4):
            f.pwrite((4 + i) * MiB, os.urandom(MiB))
        for i in range(20):
            f.pread(i * BLOCK, 4096)
