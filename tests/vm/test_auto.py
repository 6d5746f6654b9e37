# SPDX-License-Identifier: GPL-2.0
"""Mode adaptive (issue 46): the routing that tunes itself, in the module.

The threshold controller, the stream table and the stripe split, seen
through the status counters (writes_logged, writes_direct), nxdctl
routing --json (NXD_IOC_GET_AUTO) and the data: every data check compares
with an in-memory model of what the test wrote over a zeroed HDD and SSD,
never with the device under test.  Nothing here is timed: the tick's
effects are polled for.
"""
import json
import os
import random
import threading

import pytest

from nxdt import ctl, ondisk
from nxdt.destagerig import wait_until
from nxdt.facts import KiB, MiB
from nxdt.nxdvol import Volume
from nxdt.rawio import pwrite_direct, read_all

BLK = 4096


def routing(v):
    return json.loads(ctl.nxdctl("routing", v.name, "--json").stdout)


class Model:
    """What the volume must read: zeros but where the test wrote."""

    def __init__(self, size):
        self.data = bytearray(size)

    def write(self, fd, off, buf):
        pwrite_direct(fd, off, buf)
        self.data[off:off + len(buf)] = buf

    def check(self, v, what):
        got = read_all(v.dev, len(self.data))
        if got != bytes(self.data):
            bad = next(i for i in range(0, len(got), 512)
                       if got[i:i + 512] != self.data[i:i + 512])
            raise AssertionError(f"{what}: first bad sector {bad // 512}")


def adaptive(dm, loopdev, nullb, name, extra=(), ssd_mb=16):
    opts = ["mode", "adaptive"] + list(extra)
    return Volume(dm, name, loopdev(64), nullb(ssd_mb), opts)


@pytest.mark.guarantee("G10")
def test_adaptive_mode_and_bounds(dm, loopdev, nullb):
    """mode adaptive and its bounds are taken from the table line and
    sysfs, shown by dmsetup table, nxdctl config and nxdctl routing, and
    stored in the superblock (tun_flags 7, the values at bytes 312-327);
    bounds out of order, out of range or a stripe of part blocks are
    refused by sysfs and nxdctl config and change nothing."""
    v = adaptive(dm, loopdev, nullb, "nxdauto",
                 ["auto_min_threshold", "8K", "auto_max_threshold", "256K",
                  "stream_min", "1M", "stripe_size", "128K"])
    t = v.tunables()
    assert t["mode"] == "adaptive", t
    assert (t["auto_min_threshold"], t["auto_max_threshold"], t["stream_min"],
            t["stripe_size"]) == ("8192", "262144", "1048576", "131072"), t
    assert " mode adaptive " in v.table(), v.table()
    r = routing(v)
    assert r["mode"] == "adaptive" and r["active"], r
    assert (r["min_threshold"], r["max_threshold"]) == (8192, 262144), r
    assert 8192 <= r["threshold"] <= 262144, r
    assert r["stripe_bytes"] == 131072 and r["stream_min"] == 1048576, r

    before = v.tunables()
    # Refused, each leaving every tunable as it was.
    for key, val in (("auto_min_threshold", "512K"),    # above max
                     ("auto_max_threshold", "4K"),      # below min
                     ("auto_min_threshold", "2048"),    # below 4 KiB
                     ("auto_max_threshold", "2G"),
                     ("stripe_size", "6000"),
                     ("stream_min", "0"),
                     ("mode", "Adaptive")):
        assert v.sset(key, val) != 0, (key, val)
        assert v.tunables() == before, (key, val)
    for kv in ("auto_min_threshold=512K", "stripe_size=6000"):
        p = ctl.nxdctl("config", v.name, kv, check=False)
        assert p.returncode != 0, (kv, p.stdout)
        assert v.tunables() == before, kv

    # The controller takes new bounds at its next tick, with its reason.
    assert v.sset("auto_max_threshold", "16K") == 0
    assert v.sset("auto_min_threshold", "16K") == 0
    wait_until(lambda: (routing(v)["min_threshold"],
                        routing(v)["max_threshold"]) == (16384, 16384),
               what="the controller took the new bounds")
    r = routing(v)
    assert r["threshold"] == 16384, r
    # 64 KiB (write_threshold) clamped to 16 KiB, for that reason
    assert r["changes_by_reason"]["bounds"] >= 1, r
    assert r["changes"] == sum(r["changes_by_reason"].values()), r

    # Stored at the clean stop; an older module's fields all kept.
    ssd = v.ssd
    v.remove()
    sb = ondisk.newest_sb(ssd)[1]
    assert sb["tun_flags"] == 7 and sb["mode"] == 3, sb   # VALID, AUTO, SHARE
    assert (sb["auto_min_threshold"], sb["auto_max_threshold"],
            sb["stream_min"], sb["stripe_size"]) == (16384, 16384, MiB,
                                                    128 * KiB), sb
    sup = json.loads(ctl.nxdctl("show-super", ssd, "--json").stdout)
    tun = sup["superblock"]["tunables"]
    assert tun["mode"] == "adaptive" and tun["auto_max_threshold"] == 16384, tun

    # Switched at run time through sysfs, both ways.
    w = Volume(dm, "nxdauto2", loopdev(64), nullb(16))
    assert routing(w)["mode"] == "auto"
    assert w.sset("mode", "adaptive") == 0
    assert routing(w)["mode"] == "adaptive"
    assert w.sset("mode", "auto") == 0
    assert w.tunables()["mode"] == "auto"


@pytest.mark.guarantee("G2")
def test_adaptive_streams_go_to_the_hdd(dm, loopdev, nullb):
    """Mode adaptive, stream_min 128 KiB: 200 small writes at random
    distinct blocks are logged, but for the controller's counted probes
    (writes_direct rises by exactly the probes, no stream write); then 150
    sequential 4 KiB writes: the 119 after the run reached 128 KiB go to
    the HDD (stream_writes), the 31 before are logged but for the probes
    (writes_direct = stream writes + probes); then
    two threads writing alternate blocks of one run are one stream to the
    table (most of their writes go to the HDD).  The data reads back as
    the model, live and after a drain."""
    v = adaptive(dm, loopdev, nullb, "nxdstream",
                 ["stream_min", "128K", "write_threshold", "64K"])
    m = Model(16 * MiB)
    rnd = random.Random(46)
    fd = os.open(v.dev, os.O_WRONLY | os.O_DIRECT)
    try:
        # Phase 1: random 4 KiB writes, each block once, in the first 6 MiB.
        st0, r0 = v.status(), routing(v)
        blocks = rnd.sample(range(6 * MiB // BLK), 200)
        for b in blocks:
            m.write(fd, b * BLK, rnd.randbytes(BLK))
        st1, r1 = v.status(), routing(v)
        direct = st1["writes_direct"] - st0["writes_direct"]
        logged = st1["writes_logged"] - st0["writes_logged"]
        probes = r1["probes"] - r0["probes"]
        assert r1["stream_writes"] == r0["stream_writes"], (r0, r1)
        assert direct == probes, (direct, probes)
        assert logged + direct == 200, (logged, direct)
        assert logged >= 200 - 200 // 32 - 1, (logged, probes)

        # Phase 2: one sequential run of 4 KiB writes at 8 MiB.
        n = 150
        for i in range(n):
            m.write(fd, 8 * MiB + i * BLK, rnd.randbytes(BLK))
        st2, r2 = v.status(), routing(v)
        streamed = r2["stream_writes"] - r1["stream_writes"]
        probes = r2["probes"] - r1["probes"]     # only before the run proved
        assert streamed == n - (128 * KiB // BLK - 1), (streamed, r2)
        assert st2["writes_direct"] - st1["writes_direct"] == streamed + probes, \
            (st1, st2, probes)
        assert st2["writes_logged"] - st1["writes_logged"] == n - streamed - probes
        assert any(s["start"] == 8 * MiB // 512 and
                   s["next"] == (8 * MiB + n * BLK) // 512
                   for s in r2["streams"]), r2["streams"]
    finally:
        os.close(fd)

    # Phase 3: two tasks, alternate blocks of one run at 12 MiB, in step
    # (each pair of writes may reach the volume in either order).
    step = threading.Barrier(2)

    def writer(first, bufs):
        wfd = os.open(v.dev, os.O_WRONLY | os.O_DIRECT)
        try:
            for i in range(first, 256, 2):
                step.wait()
                pwrite_direct(wfd, 12 * MiB + i * BLK, bufs[i])
        finally:
            os.close(wfd)
    bufs = [rnd.randbytes(BLK) for _ in range(256)]
    for i, b in enumerate(bufs):
        m.data[12 * MiB + i * BLK:12 * MiB + (i + 1) * BLK] = b
    ts = [threading.Thread(target=writer, args=(k, bufs)) for k in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    r3 = routing(v)
    # 31 writes prove the run; out-of-order pairs are counted with it
    assert r3["stream_writes"] - r2["stream_writes"] >= 192, r3

    m.check(v, "live")
    v.drain()
    m.check(v, "after a drain")
    st = v.status()
    assert st["state"] == "ok" and st["ssd_errors"] == st["hdd_errors"] == 0, st


@pytest.mark.guarantee("G2")
def test_adaptive_stripe_split(dm, loopdev, nullb):
    """Mode adaptive, stripe_size 128 KiB, threshold held at 64 KiB by its
    bounds: a 1 MiB write 32 KiB before a stripe boundary is cut into a
    32 KiB head and a 96 KiB tail, logged (writes_logged +2), and 896 KiB
    of whole stripes sent to the HDD (writes_direct +1); a write of whole
    stripes is not cut.  The data reads back as the model, live, after a
    drain and after a reload."""
    v = adaptive(dm, loopdev, nullb, "nxdsplit",
                 ["write_threshold", "64K", "auto_min_threshold", "64K",
                  "auto_max_threshold", "64K", "stripe_size", "128K"])
    m = Model(8 * MiB)
    rnd = random.Random(4646)
    fd = os.open(v.dev, os.O_WRONLY | os.O_DIRECT)
    try:
        st0, r0 = v.status(), routing(v)
        assert r0["threshold"] == 65536, r0
        m.write(fd, 5 * 128 * KiB - 32 * KiB, rnd.randbytes(MiB))
        st1, r1 = v.status(), routing(v)
        assert r1["split_cuts"] - r0["split_cuts"] == 2, r1
        assert r1["split_log_bytes"] - r0["split_log_bytes"] == 128 * KiB, r1
        assert r1["split_hdd_bytes"] - r0["split_hdd_bytes"] == 896 * KiB, r1
        assert st1["writes_logged"] - st0["writes_logged"] == 2, (st0, st1)
        assert st1["writes_direct"] - st0["writes_direct"] == 1, (st0, st1)
        # Whole stripes: one HDD write, no cut.
        m.write(fd, 4 * MiB, rnd.randbytes(512 * KiB))
        st2, r2 = v.status(), routing(v)
        assert r2["split_cuts"] == r1["split_cuts"], r2
        assert st2["writes_direct"] - st1["writes_direct"] == 1, (st1, st2)
        # A split over logged blocks: the HDD part takes the writer's way.
        m.write(fd, 6 * MiB + 8 * KiB, rnd.randbytes(4 * KiB))
        m.write(fd, 6 * MiB - 4 * KiB, rnd.randbytes(256 * KiB + 8 * KiB))
    finally:
        os.close(fd)
    m.check(v, "live")
    v.drain()
    m.check(v, "after a drain")
    v.dm.reload(v.name, v.table())
    v.dm.suspend(v.name)
    v.dm.resume(v.name)
    m.check(v, "after a reload")


@pytest.mark.guarantee("G2")
def test_adaptive_threshold_moves_with_reasons(dm, loopdev, nullb):
    """Mode adaptive, destaging paused, bounds 8-256 KiB, watermarks 10 and
    40 %: small writes fill an 8 MiB log, and the controller lowers the
    threshold from 128 KiB towards its lower bound with reason
    log_occupancy (the cap occupancy puts on it) or destage_headroom (the
    paused destager falls behind above the low watermark: whichever a
    tick sees first; the 6.1 guest saw the second first); once the log
    is drained it never leaves the bounds; every change is counted under
    one reason (changes = the sum by reason = raises + lowers) and the
    last one names its reason; the data reads back as the model."""
    v = adaptive(dm, loopdev, nullb, "nxdthr",
                 ["write_threshold", "128K", "auto_min_threshold", "8K",
                  "auto_max_threshold", "256K", "low_watermark", "10",
                  "high_watermark", "40"], ssd_mb=8)
    v.pause()
    r0 = routing(v)
    assert r0["threshold"] == 128 * KiB, r0
    m = Model(16 * MiB)
    rnd = random.Random(4647)
    fd = os.open(v.dev, os.O_WRONLY | os.O_DIRECT)
    try:
        def lowered():
            by = routing(v)["changes_by_reason"]
            return by["log_occupancy"] + by["destage_headroom"] >= 1
        blocks = rnd.sample(range(16 * MiB // BLK), 1500)
        for i, b in enumerate(blocks):
            m.write(fd, b * BLK, rnd.randbytes(BLK))
            if i % 128 == 127 and int(v.sget("log_used_pct")) >= 30 and lowered():
                break
        wait_until(lowered, what="a lowering for log occupancy or destage headroom")
        r = routing(v)
        # the occupancy's cap: 256 KiB at 10 %, halved per 6 % up to 8 KiB
        assert 8 * KiB <= r["threshold"] < 128 * KiB, r
        assert r["lowers"] >= 1 and r["last_change"]["reason"] in (
            "log_occupancy", "destage_headroom"), r
    finally:
        os.close(fd)
    v.message("resume_destage")
    v.drain()
    r = routing(v)
    assert 8 * KiB <= r["threshold"] <= 256 * KiB, r
    assert r["changes"] == sum(r["changes_by_reason"].values()), r
    assert r["changes"] == r["raises"] + r["lowers"], r
    assert r["last_change"]["reason"] != "none", r
    assert 8 * KiB <= r["last_change"]["to"] <= 256 * KiB, r
    m.check(v, "after a drain")


TRACEFS = "/sys/kernel/tracing"
TRACE_EVENT = f"{TRACEFS}/events/nxd/nxd_io_done/enable"


def _tw(path, val):
    with open(path, "w") as f:
        f.write(val)


@pytest.mark.guarantee("G2", "G13")
def test_route_trace_event(dm, loopdev, nullb):
    """The nxd_io_done trace event (the routing trace that make bench's
    routing chunk records, bench/route_oracle.py) gives each write of the
    volume once, with its sector, size, route and alignment: 4 KiB at
    block 256 to the log, 1 MiB aligned to the HDD (in one or more bios
    that cover it exactly), 512 B at sector 1 to the log, unaligned; and
    nothing for another volume's writes."""
    v = Volume(dm, "nxdtrace", loopdev(64), nullb(16))
    other = Volume(dm, "nxdtrace2", loopdev(16), nullb(16))
    if not os.path.isdir(f"{TRACEFS}/events"):
        os.system(f"mount -t tracefs nodev {TRACEFS}")
    st = os.stat(v.dev).st_rdev
    me = f"{os.major(st)},{os.minor(st)}"
    _tw(f"{TRACEFS}/tracing_on", "0")
    _tw(f"{TRACEFS}/trace", "")
    _tw(TRACE_EVENT, "1")
    _tw(f"{TRACEFS}/tracing_on", "1")
    try:
        fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
        fo = os.open(other.dev, os.O_RDWR | os.O_DIRECT)
        try:
            pwrite_direct(fd, 256 * BLK, os.urandom(BLK))
            pwrite_direct(fd, 4 * MiB, os.urandom(MiB))
            pwrite_direct(fd, 512, os.urandom(512))
            pwrite_direct(fo, 0, os.urandom(BLK))
        finally:
            os.close(fd)
            os.close(fo)
        _tw(f"{TRACEFS}/tracing_on", "0")
        with open(f"{TRACEFS}/trace") as f:
            lines = [ln for ln in f if "nxd_io_done:" in ln]
    finally:
        _tw(TRACE_EVENT, "0")
        _tw(f"{TRACEFS}/trace", "")
        _tw(f"{TRACEFS}/tracing_on", "1")
    ev = []
    for ln in lines:
        f = ln.split("nxd_io_done:")[1].split()
        kv = dict(x.split("=", 1) for x in f[2:])
        ev.append((f[0], f[1], int(kv["sector"]), int(kv["bytes"]), kv["route"], kv["align"],
                   int(kv["ns"])))
    mine = [e for e in ev if e[0] == me and e[1] == "W"]
    assert all(e[6] > 0 for e in mine), mine
    assert (me, "W", 2048, BLK, "ssd", "4k") in [e[:6] for e in mine], mine
    assert (me, "W", 1, 512, "ssd", "no") in [e[:6] for e in mine], mine
    big = sorted((e[2], e[3]) for e in mine if e[4] == "hdd")
    pos = 8192
    for s, n in big:
        assert s == pos, f"the 1 MiB write's pieces do not tile it: {big}"
        pos += n // 512
    assert pos == 8192 + 2048, f"the 1 MiB write's pieces do not tile it: {big}"
    assert len(mine) == 2 + len(big), f"a write traced twice or an extra one: {mine}"
    assert [e for e in ev if e[0] != me and e[1] == "W"], "the other volume's write is missing"
