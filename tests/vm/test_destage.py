# SPDX-License-Identifier: GPL-2.0
"""dm-nxd background destaging: several log capacities of small writes,
races between destage and overwrites/discards, merged destage bios, clean
ahead (stripe neighbours copied with the oldest blocks), idle rounds
that yield to foreground HDD I/O, pacing between the watermarks, the
drain's sweep by address, drain and drain-on-suspend.  Data is always checked against a model
(nxdt.workloads.DiffTester's starts from a seeded pattern written to the raw
HDD before the volume exists)."""
import os
import random
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from nxdt.blkdev import Loop, NullBlk
from nxdt.dmlib import delay_line
from nxdt import logwrites, nxdvol, rawio
from nxdt.host import summary
from nxdt.nxdvol import Volume, module_param
from nxdt.rawio import pread_dev, pread_direct, pwrite_direct, read_all
from nxdt.workloads import assert_healthy, BlockWriter, check_blocks_then_hdd, DiffTester, seed_hdd
from nxdt.destagerig import (STRIPE, check_blocks, clean_ahead, dense, logged_volume, stripe_fill,
                             striped_hdd, striped_teardown, wait_until)

NOPS = int(os.environ.get("NXD_DIFF_OPS", "1200"))


@pytest.fixture
def devs():
    hdd = Loop(128, "hdds")
    ssd = NullBlk(8)
    yield hdd, ssd
    ssd.close()
    hdd.close()


@pytest.mark.guarantee("G8", "G9", "G1")
def test_many_log_capacities_of_small_writes(devs, dm):
    """Writes several times the log capacity in small random writes with
    reads and overwrites mixed in: no error, data verifies, the log wraps
    many times, and once the load stops occupancy falls below the high
    watermark by itself (no drain message)."""
    hdd, ssd = devs
    base = seed_hdd(hdd.dev, 48 << 20, 11)
    v = Volume(dm, "nxds", hdd.dev, ssd.dev, "low_watermark 20 high_watermark 60")
    t = DiffTester(v.dev, 48 << 20, seed=11, initial=base, max_io=64 << 10)
    cap = v.status()["log_blocks"]
    written = 0
    while written < 4 * cap * 4096:
        off, n = t._extent(1.0)
        t.write(off, n)
        written += n
        if t.rng.random() < 0.3:
            off, n = t._extent(1.0)
            t.read(off, n)
    t.verify_all()
    st = assert_healthy(v)
    assert st["segments_reclaimed"] > 0 and st["destaged_blocks"] > cap, st
    wait_until(lambda: int(v.sget("log_used_pct")) < 60,
               what="occupancy below the high watermark")
    # Idle HDD: below the low watermark the destager still empties the log.
    wait_until(lambda: v.status()["index_entries"] == 0,
               what="idle destage to empty the log")
    t.verify_all()
    assert_healthy(v)
    t.close()


@pytest.mark.guarantee("G3", "G8")
def test_overwrite_and_discard_while_destaging(devs, dm):
    """Destager forced to run all the time (watermarks 0) while a small hot
    region is overwritten and discarded: the HDD never ends up with an
    older copy; after a drain the HDD alone matches the model."""
    hdd, ssd = devs
    base = seed_hdd(hdd.dev, 8 << 20, 12)
    v = Volume(dm, "nxds", hdd.dev, ssd.dev, "low_watermark 0 high_watermark 0")
    t = DiffTester(v.dev, 8 << 20, seed=12, initial=base, max_io=1 << 20, hot=1 << 20)
    for _ in range(NOPS):
        t.step()
    t.verify_all()
    v.message("drain")
    assert_healthy(v)
    t.close()
    v.remove()
    assert read_all(hdd.dev, t.size, start=nxdvol.hdd_data_offset(hdd.dev)) == bytes(t.model)


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("geometry", ["plain", "striped"])
def test_destage_merges_dense_region(dm, geometry):
    """A dense region of random 4 KiB writes destages in merged bios:
    mean destage bio size well above 4 KiB (a bench-style check).  The log
    holds them all: at queue depth 1 each write is its own 2-block segment.
    striped: the HDD is dm-striped over two loops (64 KiB chunks, io_opt
    128 KiB) and some destage bios are whole aligned stripes, which the
    counter destage_stripe_bios counts; plain (a loop, no io_opt): none."""
    parts = [Loop(32, f"hddm{i}") for i in range(2 if geometry == "striped" else 1)]
    ssd = NullBlk(32)
    try:
        hdd = striped_hdd(dm, parts) if geometry == "striped" else parts[0].dev
        d = dense(dm, hdd, ssd)
        if geometry == "striped":
            assert 0 < d["destage_stripe_bios"] <= d["destage_bios"], d
            assert d["destage_stripe_bios"] * STRIPE <= d["destaged_bytes"], d
        else:
            assert d["destage_stripe_bios"] == 0, d
        assert d["destage_busy_us"] > 0, d
    finally:
        striped_teardown(dm, ssd, parts)


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("ahead", [True, False], ids=["ahead", "oldest-only"])
def test_clean_ahead_copies_stripe_neighbours(dm, ahead):
    """Block 0 is logged first, block 1 last, with 4200 writes to blocks a
    stripe apart (64 blocks, 256 KiB: the loop HDD has no io_opt) in
    between, so the round that takes block 0 (at most the whole read
    buffer, 4096 blocks) cannot reach block 1's segment.  With clean ahead
    that round also copies block 1, its stripe neighbour, in one 8 KiB bio
    with block 0, and the round that later reaches block 1's segment finds
    it CLEAN and writes nothing: one destage bio per far block plus one.
    Oldest-first only (the module parameter off), blocks 0 and 1 go in
    separate rounds: one bio more.  The HDD ends up equal to the model."""
    n, stride = 4200, 64
    hdd, ssd = Loop((n + 2) * stride * 4096 // (1 << 20) + 8, "hddca"), NullBlk(128)
    try:
        with module_param("destage_clean_ahead", "Y" if ahead else "N"):
            clean_ahead(dm, hdd, ssd, ahead, n, stride)
    finally:
        dm.remove("nxds", missing_ok=True)
        ssd.close()
        hdd.close()


@pytest.fixture
def slow(dm):
    """A 128 MiB loop HDD under dm-delay ("nxdslow", no delay until
    set_delay()) and a 128 MiB null_blk SSD, for a volume "nxds"."""
    hdd, ssd = Loop(128, "hddy"), NullBlk(128)
    base = dm.create("nxdslow", delay_line(hdd.dev, 0, 0))
    def set_delay(ms):
        dm.reload("nxdslow", delay_line(hdd.dev, 0, ms))

    def finish(v, model, *fgs):
        """Once idle rounds have emptied the log of @v: no delay, and every
        block of @model and of the writers @fgs on the volume and the HDD."""
        wait_until(lambda: v.status()["index_entries"] == 0, 120, "idle rounds to empty the log")
        set_delay(0)
        want = dict(model)
        for fg in fgs:
            want.update(fg.model)
        check_blocks_then_hdd(v, hdd.dev, want)

    yield SimpleNamespace(hdd=hdd, ssd=ssd, base=base, set_delay=set_delay, finish=finish)
    dm.remove("nxds", missing_ok=True)
    dm.remove("nxdslow", missing_ok=True)
    ssd.close()
    hdd.close()


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("yld", [True, False], ids=["yield", "no-yield"])
def test_idle_round_yields_to_hdd_io(dm, slow, yld):
    """256 scattered 4 KiB blocks logged (under 1 % of the log: below
    low_watermark, so the destager runs only while the HDD is idle), then
    an HDD whose writes take 200 ms (dm-delay over a loop) and 4 destage
    writes in flight at most: the round takes about 13 s.  Once it has
    begun, two foreground writers keep HDD writes in flight (two, so that
    one is in flight while the other's thread is between writes).  With
    destage_idle_yield the round submits nothing more (and moves no tail:
    every block stays logged); without it, it goes on.  The window is
    counted in foreground writes (5 to settle, then 15 of each writer, 3 s
    at 200 ms), not in seconds.  Once the writers stop, idle rounds empty
    the log, and the HDD holds every block."""
    n, depth = 256, 4
    v = Volume(dm, "nxds", slow.base, slow.ssd.dev)
    v.message("pause_destage")
    model = {}
    with rawio.Fd(v.dev) as f:
        for i in range(n):
            model[2 * i] = os.urandom(4096)
            f.pwrite(2 * i * 4096, model[2 * i])
        f.fsync()
    assert v.status()["index_entries"] == n
    assert v.sset("write_threshold", 0) == 0      # the writers' go to the HDD
    slow.set_delay(200)
    fgs = [BlockWriter(v.dev, 4 * n + k * 64, 64) for k in (0, 1)]

    def writes_past(goal):
        return lambda: all(w.writes >= goal for w in fgs)

    with module_param("destage_idle_yield", "Y" if yld else "N"), \
            module_param("destage_depth", depth), module_param("destage_fill_min", 0):
        v.message("resume_destage")
        wait_until(lambda: v.status()["destage_bios"] >= 2 * depth, 60,
                   "the idle round's first writes")
        s0 = v.status()
        with fgs[0], fgs[1]:
            wait_until(writes_past(5), 120, "5 foreground writes each")
            b0 = v.status()["destage_bios"]
            w0 = sum(w.writes for w in fgs)
            wait_until(writes_past(20), 240, "15 more foreground writes each")
            st = v.status()
            fg_writes = sum(w.writes for w in fgs) - w0
        more = st["destage_bios"] - b0
        moved = {k: st[k] - s0[k] for k in ("writes_direct", "writes_logged",
                                              "destage_bios", "destage_throttled_ms")}
        if yld:
            assert more == 0 and st["index_entries"] == n, \
                f"the idle round wrote {more} more bios beside {fg_writes} foreground HDD " \
                f"writes ({st['index_entries']} of {n} blocks logged; {moved})"
        else:
            assert more > 2 * depth, \
                f"only {more} destage bios beside {fg_writes} foreground writes without the yield"
    slow.finish(v, model, *fgs)
    summary("destage-summary.txt", f"idle yield {'on' if yld else 'off'}: {more} destage "
            f"bios beside {fg_writes} foreground HDD writes")


def check_pauses(moved, at_least):
    """The destager's pauses (destage_throttled_ms) in @moved, counters
    over a run beside foreground HDD writes, were at least @at_least times
    its rounds (destage_busy_us); with @at_least 0, next to nothing (all of
    the HDD's time its share).  Returns (paused ms, busy ms)."""
    busy_ms = moved["destage_busy_us"] / 1000
    paused = moved["destage_throttled_ms"]
    if at_least:
        assert paused >= at_least * busy_ms, \
            f"the destager paused {paused} ms for {busy_ms:.0f} ms of rounds " \
            f"beside foreground HDD writes: {moved}"
    else:
        assert paused <= 0.15 * busy_ms + 60, \
            f"the destager paused {paused} ms for {busy_ms:.0f} ms of rounds " \
            f"with all of the HDD's time its share: {moved}"
    return paused, busy_ms


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("min_duty,share", [(10, 0), (100, 0), (100, 50)],
                         ids=["10", "100", "100-share50"])
def test_pacing_gives_the_destager_its_share(dm, slow, min_duty, share):
    """Between the watermarks, while foreground I/O keeps the HDD busy,
    the destager pauses after each round so that it takes the share of
    the HDD's time that nxd_pace_duty() gives the log's occupancy.  With
    low_watermark 1, high_watermark 100 and the log about 30 % full, a
    destage_min_duty of 10 gives it at most 38 %: its pauses
    (destage_throttled_ms) are 1.6 times its rounds (destage_busy_us) or
    more, and at least 0.6 times over the few rounds measured; 20 ms
    yields, as before, were a tenth of that.  A destage_min_duty of 100
    means no pause, unless stream_share keeps part of the HDD from the
    destager: with stream_share 50 its share is half at any occupancy, so
    its pauses are 0.6 times its rounds or more.  Every block reaches the
    HDD."""
    v = Volume(dm, "nxds", slow.base, slow.ssd.dev,
               f"low_watermark 1 high_watermark 100 stream_share {share}")
    assert v.sget("stream_share") == str(share)
    v.message("pause_destage")
    runs = int(v.status()["log_blocks"] * 0.3) // 17     # 16 blocks and a header or so each
    model = {}
    with rawio.Fd(v.dev) as f:
        for i in range(runs):
            d = os.urandom(64 << 10)
            f.pwrite(i * (128 << 10), d)
            for j in range(16):
                model[i * 32 + j] = d[j * 4096:(j + 1) * 4096]
        f.fsync()
    st = v.status()
    assert st["index_entries"] == 16 * runs, st
    used0 = st["log_used_blocks"]
    assert 20 <= int(v.sget("log_used_pct")) <= 40, st
    assert v.sset("write_threshold", 0) == 0      # the writer's go to the HDD
    slow.set_delay(10)
    fg = BlockWriter(v.dev, (runs * 32 + 1024) // 16 * 16, 4096, nblk=16)
    with module_param("destage_min_duty", min_duty):
        with fg:
            wait_until(lambda: v.status()["writes_direct"] >= 8, 60, "foreground HDD writes")
            s0 = v.status()
            v.message("resume_destage")
            wait_until(lambda: v.status()["log_used_blocks"] <= used0 * 0.4, 300,
                       "rounds to destage 60 % of the log")
            st = v.status()
        moved = {k: st[k] - s0[k] for k in ("destage_busy_us", "destage_throttled_ms",
                                              "segments_reclaimed", "destage_bios",
                                              "writes_direct")}
        assert moved["writes_direct"] > 0, moved
        paused, busy_ms = check_pauses(moved, 0.6 if min_duty == 10 or share else 0)
    slow.finish(v, model, fg)
    summary("destage-summary.txt", f"pacing, destage_min_duty {min_duty}, stream_share "
            f"{share}: paused {paused} ms for {busy_ms:.0f} ms of rounds ({moved})")


@pytest.mark.guarantee("G8", "G9")
@pytest.mark.parametrize("share", [0, 90])
def test_stream_share_on_a_full_log(dm, share):
    """stream_share decides who pays when the log fills.  A 4 MiB log
    with both watermarks at 0 (the destager's share is then 100 -
    stream_share % at any occupancy) is filled by 16 KiB writes with the
    destager paused, until it is full (a full log overrides the pause).
    Then small writes (write_threshold 16 KiB) go on while a second
    writer keeps 64 KiB writes in flight to the HDD, whose writes take
    5 ms (dm-delay).  With stream_share 0 the destager does not pause
    beside them; with 90 it takes a tenth of the HDD's time, so its
    pauses (destage_throttled_ms) are at least twice its rounds
    (destage_busy_us; nine times in theory).  Either way nothing fails,
    and every block reads back as the model has it."""
    hdd, ssd = Loop(64, "hddsh"), NullBlk(4)
    size, fg_first, fg_span = 24 << 20, 7168, 1024
    t = None
    try:
        slowdev = dm.create("nxdshd", delay_line(hdd.dev, 0, 5))
        base = seed_hdd(slowdev, size, 17)
        v = Volume(dm, "nxdsh", slowdev, ssd.dev,
                   f"low_watermark 0 high_watermark 0 write_threshold 16384 "
                   f"stream_share {share}")
        assert v.sget("stream_share") == str(share)
        t = DiffTester(v.dev, size, seed=17, initial=base, max_io=16 << 10)
        fg = BlockWriter(v.dev, fg_first, fg_span, nblk=16)
        full0 = v.status()["events_log_full"]
        v.message("pause_destage")
        for k in range(4 * v.status()["log_blocks"] // 4):
            t.write(t.rng.randrange(size // (16 << 10)) * (16 << 10), 16 << 10)
            if k % 16 == 15 and v.status()["events_log_full"] > full0:
                break
        assert v.status()["events_log_full"] > full0, v.status()
        v.message("resume_destage")
        s0 = v.status()
        with fg:
            wait_until(lambda: v.status()["writes_direct"] >= s0["writes_direct"] + 8, 60,
                       "foreground HDD writes")
            for n in range(300):
                off, ln = t._extent(1.0)
                t.write(off, ln)
            st = v.status()
        moved = {k: st[k] - s0[k] for k in ("destage_busy_us", "destage_throttled_ms",
                                              "events_log_full", "writes_around_full",
                                              "writes_logged", "writes_direct",
                                              "segments_reclaimed")}
        assert moved["segments_reclaimed"] > 0, moved
        paused, busy_ms = check_pauses(moved, 2 if share else 0)
        t.verify_all()
        check_blocks(fg.model, lambda b: pread_dev(v.dev, b * 4096, 4096), "foreground block")
        assert_healthy(v)
        summary("destage-summary.txt", f"stream_share {share} on a full log: paused {paused} ms "
                f"for {busy_ms:.0f} ms of rounds after the log was full ({moved})")
    finally:
        if t is not None:
            t.close()
        dm.remove("nxdsh", missing_ok=True)
        dm.remove("nxdshd", missing_ok=True)
        ssd.close()
        hdd.close()


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("sweep,how", [(True, "drain"), (True, "idle"), (False, "drain")],
                         ids=["sweep", "idle-sweep", "no-sweep"])
def test_drain_sweeps_by_address(dm, sweep, how):
    """While draining, or once the volume is idle, a round takes a few of
    the oldest blocks and then sweeps whole stripes by address from the
    volume's start: 6000 4 KiB blocks, every other one, written from the
    highest address down (so the lowest is the newest), more than one
    round holds.  dm-log-writes under the HDD records the order of its
    writes.  With destage_sweep the lowest block reaches the HDD before the
    1000th written (in neither the oldest 128 blocks nor the first sweep);
    without it, oldest first, after.  idle: no drain command, the destage
    resumes with the log between the watermarks and nothing written.
    Every block is on the HDD after the drain."""
    n, base_blk = 6000, 1024
    hdd, ssd, lwlog = Loop(64, "hddw"), NullBlk(64), NullBlk(64)
    try:
        order = [base_blk + 2 * i for i in reversed(range(n))]    # oldest first
        v, model = logged_volume(dm, hdd.dev, ssd, lwlog, order)
        with module_param("destage_sweep", "Y" if sweep else "N"):
            if how == "drain":
                v.drain()
            else:
                assert 25 <= int(v.sget("log_used_pct")) < 75, v.status()
                v.message("resume_destage")
                wait_until(lambda: v.status()["index_entries"] == 0, 300,
                           "rounds to empty the log")
        st = v.status()
        assert st["index_entries"] == 0, st
        v.remove()
        dm.remove("nxdlw")
        doff = nxdvol.hdd_data_offset(hdd.dev) // 512    # the data area's start
        first = {}
        for e in logwrites.parse_log(lwlog.dev):
            if not e.is_data or e.sector < doff:
                continue
            s = e.sector - doff
            for b in range(s // 8, (s + e.nr + 7) // 8):
                first.setdefault(b, e.idx)
        low, t = base_blk, order[999]
        assert low in first and t in first, "blocks missing from the HDD's write log"
        if sweep:
            assert first[low] < first[t], \
                f"the lowest block went to the HDD at write {first[low]}, after the " \
                f"1000th written one (write {first[t]}): no sweep by address"
        else:
            assert first[t] < first[low], \
                f"oldest first: the 1000th written block (HDD write {first[t]}) must go " \
                f"before the newest, lowest one (HDD write {first[low]})"
        check_blocks(model, lambda b: pread_dev(hdd.dev, doff * 512 + b * 4096, 4096),
                     "HDD block")
        summary("destage-summary.txt", f"{how} {'with' if sweep else 'without'} the sweep: "
                f"lowest block at HDD write {first[low]}, the 1000th written at {first[t]}")
    finally:
        dm.remove("nxds", missing_ok=True)
        dm.remove("nxdlw", missing_ok=True)
        lwlog.close()
        ssd.close()
        hdd.close()


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("oldest", [128, 0], ids=["oldest128", "half-buffer"])
def test_round_leaves_room_for_neighbours(dm, oldest):
    """A round that cleans ahead takes at most destage_ahead_oldest blocks
    of the oldest segments, so that the stripe neighbours of all of them
    fit in its buffer (4096 blocks).  300 stripes of a dm-striped HDD
    (io_opt 128 KiB, 32 blocks) get one 4 KiB block each, then 14 more
    each, stripe after stripe; the log stays
    below high_watermark and the sweep is off.  dm-log-writes under the
    HDD records its writes.  With the default (128) every stripe goes to
    the HDD whole, once; with 0 a round takes half its buffer of oldest
    blocks, has room for the neighbours of only some of their stripes,
    and writes the first block of the others alone.  Every block is on
    the HDD after the drain."""
    # 14: a loaded guest batches writes into segments of up to 127
    # blocks, and a round's first segment is taken whole, so a round may
    # hold 255 oldest blocks; their 14 neighbours each still fit.
    nstripes, first, per = 300, 100, 14
    parts, ssd, lwlog = [Loop(32, "hddr0"), Loop(32, "hddr1")], NullBlk(96), NullBlk(96)
    try:
        hdd = striped_hdd(dm, parts)
        sb = STRIPE // 4096
        heads = [(first + k) * sb for k in range(nstripes)]
        v, model = logged_volume(dm, hdd, ssd, lwlog,
                                 heads + [h + 1 + j for h in heads for j in range(per)])
        assert int(v.sget("log_used_pct")) < 75, v.status()
        with module_param("destage_sweep", "N"), module_param("destage_ahead_oldest", oldest):
            v.drain()
        assert v.status()["index_entries"] == 0, v.status()
        v.remove()
        dm.remove("nxdlw")
        doff = nxdvol.hdd_data_offset(hdd) // 512     # a whole number of stripes
        whole, alone = {}, []
        for e in logwrites.parse_log(lwlog.dev):
            s = e.sector - doff
            if not e.is_data or s < 0 or s // 8 not in model:
                continue
            if e.nr * 512 == STRIPE and s % (STRIPE // 512) == 0:
                whole[s // 8] = whole.get(s // 8, 0) + 1
            else:
                alone.append(e)
        if oldest:
            assert not alone and sorted(whole) == heads and set(whole.values()) == {1}, \
                f"{len(alone)} HDD writes of part of a stripe ({alone[:5]}), " \
                f"{len(whole)} of {nstripes} stripes written whole"
        else:
            assert len(alone) >= 10, \
                f"a round of half the buffer of oldest blocks wrote only {len(alone)} " \
                f"alone: it had room for all their neighbours"
        check_blocks(model, lambda b: pread_dev(hdd, doff * 512 + b * 4096, 4096),
                     "HDD block")
        summary("destage-summary.txt", f"destage_ahead_oldest {oldest}: {len(whole)} stripes "
                f"written whole, {len(alone)} writes of part of a stripe")
    finally:
        dm.remove("nxds", missing_ok=True)
        dm.remove("nxdlw", missing_ok=True)
        striped_teardown(dm, ssd, parts)
        lwlog.close()


@pytest.mark.guarantee("G8")
def test_no_idle_round_beside_small_writes(dm):
    """Below low_watermark the destager waits until the whole volume is
    idle, not only the HDD: 4 KiB writes every 5 ms for 2 s, all logged
    (the HDD sees none), start no round; once they stop, idle rounds empty
    the log and the HDD holds every block.  The status is read while the
    writes still go on (reading it takes long enough under TCG for an idle
    round to begin after them).  A window with a gap of 80 ms or more
    between two writes (a stalled guest: the volume was idle) is not
    judged; the log is emptied and another window tried, 8 at most (2 s
    each: a loaded host stalls the guest often enough to spoil most 3 s
    windows)."""
    hdd, ssd = Loop(64, "hddi"), NullBlk(32)
    rng = random.Random(27)
    model = {}
    fd = None
    judged = None
    try:
        v = Volume(dm, "nxds", hdd.dev, ssd.dev)
        fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
        for _ in range(8):
            stop = threading.Event()
            times = []

            def writer():
                while not stop.is_set():
                    b = rng.randrange(4096)
                    d = rng.randbytes(4096)
                    times.append(time.monotonic())
                    pwrite_direct(fd, b * 4096, d)
                    model[b] = d
                    time.sleep(0.005)

            s0 = v.status()
            th = threading.Thread(target=writer)
            th.start()
            try:
                time.sleep(2.0)
                st = v.status()
                used = int(v.sget("log_used_pct"))
            finally:
                stop.set()
                th.join()
            gap = max(y - x for x, y in zip(times, times[1:]))
            if gap < 0.08:
                judged = {k: st[k] - s0[k] for k in ("destage_bios", "writes_logged",
                                                      "writes_direct")}
                judged.update(gap_ms=round(gap * 1000), used_pct=used)
                break
            wait_until(lambda: v.status()["index_entries"] == 0,
                       what="idle rounds to empty the log after a stalled window")
        assert judged, "every window had a gap of 80 ms or more between two writes"
        assert judged["writes_logged"] > 50 and judged["writes_direct"] == 0, judged
        assert judged["used_pct"] < 25, f"the log passed low_watermark: {judged}"
        assert judged["destage_bios"] == 0, \
            f"a round destaged beside writes every 5 ms, below low_watermark: {judged}"
        wait_until(lambda: v.status()["index_entries"] == 0,
                   what="idle rounds to empty the log once the writes stop")
        assert v.status()["destage_bios"] > 0
        check_blocks(model, lambda b: pread_direct(fd, b * 4096, 4096), "block")
        os.close(fd)
        fd = None
        v.remove()
        doff = nxdvol.hdd_data_offset(hdd.dev)
        check_blocks(model, lambda b: pread_dev(hdd.dev, doff + b * 4096, 4096), "HDD block")
        summary("destage-summary.txt", f"no idle round beside small writes: {judged}")
    finally:
        if fd is not None:
            os.close(fd)
        dm.remove("nxds", missing_ok=True)
        ssd.close()
        hdd.close()


@pytest.mark.guarantee("G8", "G4")
def test_drain_on_suspend_and_pause(devs, dm):
    """pause_destage keeps everything logged; a suspend with drain_on_suspend
    drains anyway, and the data reads back after the resume and from the HDD
    alone."""
    hdd, ssd = devs
    v = Volume(dm, "nxds", hdd.dev, ssd.dev, "drain_on_suspend 1")
    v.message("pause_destage")
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    data = os.urandom(64 << 10)
    for i in range(16):
        pwrite_direct(fd, i * (256 << 10), data)
    os.fsync(fd)        # acknowledged direct log writes are indexed at commit
    os.close(fd)
    st = v.status()
    assert st["index_entries"] == 16 * 16, st      # paused: all still logged
    dm.suspend("nxds")
    st = v.status()
    assert st["index_entries"] == 0 and st["log_used_blocks"] == 0, st
    dm.resume("nxds")
    fd = os.open(v.dev, os.O_RDONLY | os.O_DIRECT)
    for i in range(16):
        assert pread_direct(fd, i * (256 << 10), 64 << 10) == data
    os.close(fd)
    # The HDD alone has it too.
    v.remove()
    got = read_all(hdd.dev, 16 * (256 << 10), start=nxdvol.hdd_data_offset(hdd.dev))
    for i in range(16):
        assert got[i * (256 << 10):i * (256 << 10) + (64 << 10)] == data


@pytest.mark.guarantee("G8")
def test_drain_ends_under_continuous_writes(devs, dm):
    """A drain destages what was logged before it and returns even while
    other small writes keep arriving; what it covered is on the HDD."""
    hdd, ssd = devs
    v = Volume(dm, "nxds", hdd.dev, ssd.dev)
    v.message("pause_destage")
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    before = os.urandom(1 << 20)              # 256 logged blocks in [0, 1 MiB)
    for i in range(0, len(before), 4096):
        pwrite_direct(fd, i, before[i:i + 4096])
    stop = threading.Event()
    writes = [0]

    def writer():                              # keeps the log busy in [8, 16) MiB
        rng = random.Random(21)
        while not stop.is_set():
            pwrite_direct(fd, (8 << 20) + rng.randrange(2048) * 4096, os.urandom(4096))
            writes[0] += 1
    th = threading.Thread(target=writer, daemon=True)
    th.start()
    try:
        while writes[0] < 50:
            time.sleep(0.05)
        w0 = writes[0]
        p = subprocess.run(["dmsetup", "message", v.name, "0", "drain"],
                           capture_output=True, text=True, timeout=600)
        w1 = writes[0]
    finally:
        stop.set()
        th.join(60)
    os.close(fd)
    assert p.returncode == 0, p.stderr
    assert w1 > w0, "no write went on during the drain"
    # The HDD alone holds what was logged before the drain.
    assert read_all(hdd.dev, 1 << 20, start=nxdvol.hdd_data_offset(hdd.dev)) == before
    v.remove()


def in_kernel_at(pid, func):
    """Is process @pid in the kernel, with @func on its stack?"""
    for f in ("stack", "wchan"):
        try:
            with open(f"/proc/{pid}/{f}") as fh:
                if func in fh.read():
                    return True
        except OSError:
            pass
    return False


@pytest.mark.guarantee("G8")
def test_suspend_does_not_wait_for_a_drain_message(dm, slow):
    """A drain message runs inside device-mapper's live-table SRCU, which a
    suspend waits for with the volume's I/O held.  6,000 scattered 4 KiB
    blocks are logged (more than one destage round, which takes at most
    4,096), the HDD's writes take 300 ms (dm-delay; 128 destage writes in
    flight, so a round takes seconds), and a drain message is in the
    kernel (nxd_drain on its stack) when the volume is suspended: the
    message gives up with EBUSY, and the suspend, which waits for the
    round in progress only, ends with the log not yet empty.  Had the
    suspend waited for the drain, the log would be empty by then.  After
    the resume a drain empties it, and every block reads back from the
    volume and from the HDD alone."""
    v = Volume(dm, "nxds", slow.base, slow.ssd.dev)
    v.message("pause_destage")
    rng = random.Random(44)
    model = {b: os.urandom(4096) for b in rng.sample(range((96 << 20) // 4096), 6000)}
    with rawio.Fd(v.dev) as f:
        for b, d in model.items():
            f.pwrite(b * 4096, d)
        f.fsync()
    assert v.status()["index_entries"] == len(model)
    slow.set_delay(300)
    p = subprocess.Popen(["dmsetup", "message", v.name, "0", "drain"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: p.poll() is not None or in_kernel_at(p.pid, "nxd_drain"), 60,
                   "the drain message in the kernel")
        assert p.poll() is None, p.communicate()
        dm.suspend(v.name)
        _, err = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode != 0 and "busy" in err.lower(), (p.returncode, err)
    st = v.status()
    assert st["index_entries"] > 0, st
    dm.resume(v.name)
    slow.set_delay(0)
    v.message("drain")
    assert v.status()["index_entries"] == 0
    check_blocks_then_hdd(v, slow.hdd.dev, model)


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("writer", [False, True], ids=["alone", "with-hdd-writes"])
def test_stripe_fill(dm, writer):
    """destage_fill_min 2: a round with two or more copies in one stripe of
    the HDD (its io_opt, 128 KiB here) reads the rest of the stripe and
    writes it whole.  Sparse 4 KiB writes (three a stripe on average, over
    data written to the HDD first) drain in one bio per stripe touched,
    whole aligned stripes for those with two or more; the HDD ends up
    equal to the model, the gaps included.  with-hdd-writes: during each
    drain (write_threshold 0, so they go past the log) four threads write
    4 KiB blocks of the gaps straight to the HDD; a round must not write
    the stripe data it read over such a write landed after its read, so
    those writes wait for the stripe's fill (without that wait, the model
    check fails: mutant in docs/reliability.md)."""
    parts = [Loop(32, f"hddf{i}") for i in range(2)]
    ssd = NullBlk(32)
    region = 8 << 20
    try:
        hdd = striped_hdd(dm, parts)
        with module_param("destage_fill_min", 2):
            stripe_fill(dm, hdd, ssd, region, writer)
    finally:
        striped_teardown(dm, ssd, parts)


@pytest.mark.guarantee("G8", "G1")
def test_stripe_fill_hdd_writes_complete_late(dm):
    """A fill reads its stripes in batches into the two 2 MiB halves of
    one buffer in turn (16 stripes of 128 KiB a batch here; about 50
    stripes to fill, so the third batch reuses the first half) and writes
    each stripe from it.  Over an HDD that completes reads before earlier
    writes (dm-delay: writes held 100 ms, reads not; a drive's scheduler
    or md may do the same), every stripe must still get its own data: a
    batch is read into a half only once the writes from it have
    completed.  Without that wait the first batch's stripes are written
    with the third batch's data and the model check fails."""
    parts = [Loop(32, f"hddr{i}") for i in range(2)]
    ssd = NullBlk(32)
    try:
        striped = striped_hdd(dm, parts)
        hdd = dm.create("nxdslow", delay_line(striped, 0, 0))
        with open("/sys/block/" + os.path.basename(os.path.realpath(hdd)) +
                  "/queue/optimal_io_size") as f:
            assert int(f.read()) == STRIPE
        with module_param("destage_fill_min", 2):
            stripe_fill(dm, hdd, ssd, 8 << 20, False,
                         slow=lambda: dm.reload("nxdslow", delay_line(striped, 0, 100)))
    finally:
        striped_teardown(dm, ssd, parts)


@pytest.mark.guarantee("G8")
def test_stripe_fill_hdd_write_waits_only_for_its_stripe(dm):
    """A round fills 64 stripes (two logged 4 KiB blocks each) over an HDD
    whose writes take 1 s (dm-delay over dm-striped, io_opt 128 KiB), 8
    destage writes in flight at most (destage_depth).  A 4 KiB write to a
    gap of the first stripe, past the log (write_threshold 0), must wait
    for that stripe's fill write, which writes the data it read there, but
    not for the rest of the round: it completes while most of the round's
    stripes are still to land (it once waited for all of them).  It reads
    back as written, and the logged blocks as logged."""
    parts = [Loop(32, f"hddw{i}") for i in range(2)]
    ssd = NullBlk(32)
    nst, per = 64, STRIPE // 4096
    fd = None
    try:
        striped = striped_hdd(dm, parts)
        hdd = dm.create("nxdslow", delay_line(striped, 0, 0))
        v = Volume(dm, "nxds", hdd, ssd.dev)
        v.message("pause_destage")
        fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
        model = {}
        for st in range(nst):
            for b in (st * per + 1, st * per + 5):
                model[b] = os.urandom(4096)
                pwrite_direct(fd, b * 4096, model[b])
        os.fsync(fd)
        assert v.status()["index_entries"] == 2 * nst
        dm.reload("nxdslow", delay_line(striped, 0, 1000))
        stats = ["/sys/block/" + os.path.basename(os.path.realpath(p.dev)) + "/stat"
                 for p in parts]

        def writes_done():
            return sum(int(open(f).read().split()[4]) for f in stats)

        assert v.sset("write_threshold", 0) == 0
        gap = 10
        model[gap] = os.urandom(4096)
        w0 = writes_done()
        # The round must go on after the gap write: no idle yield.
        with module_param("destage_fill_min", 2), module_param("destage_depth", 8), \
                module_param("destage_idle_yield", "N"):
            v.message("resume_destage")
            deadline = time.monotonic() + 30
            while v.status()["destage_bios"] == 0:
                assert time.monotonic() < deadline, "no destage write in 30 s"
                time.sleep(0.02)
            pwrite_direct(fd, gap * 4096, model[gap])
            landed = writes_done() - w0
            # Each stripe's fill write is two loop writes (two chunks).
            assert landed < 2 * nst, \
                f"the HDD write to stripe 0 completed only after {landed} HDD writes " \
                f"landed: it waited for the whole round's {nst} stripes, not for its own"
            deadline = time.monotonic() + 120
            while v.status()["index_entries"]:
                assert time.monotonic() < deadline, "the round did not end in 120 s"
                time.sleep(0.2)
        st = v.status()
        assert st["destage_stripe_bios"] == nst, st
        dm.reload("nxdslow", delay_line(striped, 0, 0))
        for b, d in model.items():
            assert pread_direct(fd, b * 4096, 4096) == d, f"block {b}"
        summary("destage-summary.txt", f"stripe fill fence: the gap write completed after "
                f"{landed} of the round's {2 * nst} loop writes")
    finally:
        if fd is not None:
            os.close(fd)
        striped_teardown(dm, ssd, parts)
