# SPDX-License-Identifier: GPL-2.0
"""Regression tests for defects that lost, or could lose, acknowledged
writes, each on the rig that exposes it (real block devices: loop,
null_blk, dm-delay).  Data is checked against a model of what the test
wrote, never against the volume.

 - test_no_hdd_write_after_suspend: once a suspend returned, the destager
   writes nothing more to the HDD (a round racing postsuspend once could).
 - test_concurrent_table_destruction: an inactive table cleared while the
   live one is removed, many times: the volume object is freed exactly
   once (the control device's list stays sane).
 - test_clean_only_after_successful_flushes: a suspend whose SSD flush
   fails must not mark the log CLEAN (a CLEAN log is replayed without data
   checksums); the SSD is a dm-pcut device with failing flushes.
 - test_direct_write_waits_for_queued_merge: a large write went straight
   to the HDD at map time because the destager had just dropped the
   logged copy under it, while a small write queued before it was merging
   that copy (RMW); the merged block, committed after, brought the old
   copy's sectors back over the large write (crash campaign run 6, seed
   357 cut 6, 6.1).
 - test_lost_block_is_not_destaged: a segment the SSD lost (header and
   data block gone) is destaged from the index, but a block failing its
   checksum is not copied: the destager used to write the slot's stale
   contents over fsync'd HDD data (test_flakey_drop[ssd], 6.12).
 - test_held_write_not_stranded_by_a_smaller_one: a partial write over
   logged blocks that found no room was held and the destager woken; a
   smaller write right after it found room and cleared the log-full flag
   before the destager looked, so with destage paused no round ran, no
   kick came and the held write never completed.  The likely cause of a
   make-test hang (6.1, test_recovery_after_remove_and_reload: destage
   paused, no round ever run, one write pending), whose pieces of one
   split 4 MiB write were seen held and cleared this way.
 - test_tail_passes_superseded_copy_only_when_newer_is_durable: the
   destager moved the tail past a segment whose block a newer, not yet
   durable segment had superseded, and a power cut lost both copies
   (crash campaign, 6.1, seed 507 cut 7).
 - test_frozen_tail_waits_for_the_newer_copy: degraded, the destager
   moved the HDD label's tail past a flushed copy whose block a newer,
   unflushed copy had superseded, after the SSD lost that copy with its
   power: the flushed write read back as older data (crash campaign, 6.1,
   seed 930 cut 0: 136 sectors).
 - test_degraded_flush_reports_lost_log_writes: acknowledged small writes
   were only in the SSD's volatile cache when it lost power and came back;
   its next write fails (degraded), and the destager finds their logged
   copies gone.  A flush after that must fail, or the data must be there:
   it used to succeed once the log was empty (7 sectors lost, 6.12 crash
   campaign, seed 841 cut 6).
 - test_degraded_journal_commit_reports_lost_log_writes: the same loss
   under ext4; its journal commit (PREFLUSH|FUA) reached dm-nxd as an
   empty flush, failed, and its FUA data, which dm core sends whatever the
   flush returned: fsync returned 0 (read in dm core, 2026-11-27).
"""
import errno
import os
import subprocess
import threading
import time

import pytest

from nxdt import blkdev, host, nxdvol, ondisk, pcut, rawio
from nxdt.facts import BLOCK, MiB
from nxdt.host import run
from nxdt.nxdvol import Volume, module_param
from nxdt.workloads import pattern
from nxdt.noloss import cached_pair, lose_acked_log_writes, pin, power_on_and_read, thread_pid


@pytest.mark.guarantee("G12")
def test_no_hdd_write_after_suspend(dm, loopdev, nullb):
    """Suspend while the destager is busy: after `dmsetup suspend` returns,
    the HDD (a loop device, which counts its I/O) sees no more writes
    until the resume; every round either finished or never started."""
    hdd = loopdev(64)
    ssd = nullb(16)
    v = Volume(dm, "nxdsu", hdd, ssd, opts=["low_watermark", "0", "high_watermark", "0"])
    kname = blkdev.blk_name(hdd)

    def hdd_writes():
        with open(f"/sys/block/{kname}/stat") as f:
            return int(f.read().split()[6])

    data = {}
    with rawio.Fd(v.dev) as f:
        for rnd in range(8):
            v.pause()
            for i in range(200):
                b = (i * 37 + rnd * 11) % 4000
                d = os.urandom(BLOCK)
                f.pwrite(b * BLOCK, d)
                data[b] = d
            v.message("resume_destage")
            time.sleep(0.05 * (rnd % 4))
            dm.suspend("nxdsu")
            before = hdd_writes()
            time.sleep(0.5)
            after = hdd_writes()
            dm.resume("nxdsu")
            assert after == before, f"round {rnd}: {after - before} HDD sectors written after suspend"
        v.drain()
        bad = [b for b, d in data.items() if f.pread(b * BLOCK, BLOCK) != d]
    assert not bad, f"{len(bad)} blocks wrong"
    assert v.status()["destaged_blocks"] > 0


@pytest.mark.guarantee("G12")
def test_concurrent_table_destruction(dm, loopdev, nullb):
    """`dmsetup clear` of an inactive table races `dmsetup remove` of the
    live one: both destroy a table of one volume.  The volume object must
    be freed once, after both; the control device's list must not show
    it afterwards (and no KASAN or list corruption report, see dmesg)."""
    hdd = loopdev(32)
    ssd = nullb(8)
    nxdctl = os.path.abspath("tools/nxdctl")
    assert os.access(nxdctl, os.X_OK), "tools/nxdctl not built"
    for i in range(10):
        v = Volume(dm, "nxdcd", hdd, ssd)
        run(["dmsetup", "load", v.name], input=v.line() + "\n")
        t = threading.Thread(target=lambda: run(["dmsetup", "clear", "nxdcd"], check=False))
        t.start()
        dm.remove("nxdcd")
        t.join()
        out = run([nxdctl, "list"], check=False)
        assert out.returncode in (0, 1), out
        assert "nxdcd" not in out.stdout, out.stdout


@pytest.mark.guarantee("G6", "G5")
def test_clean_only_after_successful_flushes(dm, loopdev, nullb):
    pcut.load_module()
    hdd = loopdev(64)
    ssd = pcut.Pcut(dm, "nxdcl-ssd", nullb(16), "gclean", 7)
    v = Volume(dm, "nxdcl", hdd, ssd.path)
    with rawio.Fd(v.dev) as f:
        for i in range(20):
            f.pwrite(i * BLOCK, os.urandom(BLOCK))
    ssd.message("fail_flush", 1)
    v.remove()                       # postsuspend: SSD flush fails
    ssd.message("fail_flush", 0)
    _, sb = ondisk.newest_sb(ssd.path)
    assert not sb["flags"] & 1, "CLEAN written although the SSD flush failed"
    # The same stop with working flushes is CLEAN (the check above can fail).
    v.recreate()
    v.remove()
    _, sb = ondisk.newest_sb(ssd.path)
    assert sb["flags"] & 1, sb


@pytest.mark.guarantee("G3", "G1")
def test_direct_write_waits_for_queued_merge(dm, loopdev, nullb):
    """A small write W merging a logged block B (RMW read held 3 s by a
    slow SSD), the destager dropping B's entry meanwhile, then a large
    write H over B: H must not overtake W to the HDD, or W's merged block
    (old sectors of B) lands over H.  Sectors of B that only H wrote must
    read H's data, live and after a reload."""
    host.modprobe("dm-delay")
    hdd = loopdev(64)
    ssd_base = nullb(16)
    n = blkdev.dev_sectors(ssd_base)
    line = lambda read_ms: f"0 {n} delay {ssd_base} 0 {read_ms} {ssd_base} 0 0"  # noqa: E731
    dm.create("nxdm-ssd", line(0))
    ssd = "/dev/mapper/nxdm-ssd"
    v = Volume(dm, "nxdm", hdd, ssd, opts=["low_watermark", "0"])
    # Mid-volume, away from what udev's probes read after each close.
    B = 4100                                # the block; H covers blocks 4096-4127
    v.pause()
    old = pattern("old", B, BLOCK)
    with rawio.Fd(v.dev) as f:
        f.pwrite(B * BLOCK, old)
        f.fsync()
    assert v.status()["index_entries"] == 1
    dm.reload("nxdm-ssd", line(3000), nosync=True)  # every SSD read now takes 3 s
    w_data = pattern("w", B, 512)
    errors = []
    t = {}

    def small():
        try:
            with rawio.Fd(v.dev) as g:
                g.pwrite(B * BLOCK + 7 * 512, w_data)     # sector 7 of B: a merge
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        t["w_done"] = time.monotonic() - t0

    t0 = time.monotonic()
    v.message("resume_destage")             # its round reads the segment: 3 s
    time.sleep(1.5)
    w = threading.Thread(target=small)
    w.start()                               # its RMW read of B: 3 s
    host.wait_for(lambda: v.status()["index_entries"] == 0, timeout=60,
                   what="the destager dropping B's entry")
    t["dropped"] = time.monotonic() - t0
    # The setup: W is still merging when H comes.
    assert w.is_alive(), f"W finished before the destager dropped B: no race set up ({t}, {errors})"
    h = pattern("h", B, 32 * BLOCK)
    with rawio.Fd(v.dev) as f:
        f.pwrite(4096 * BLOCK, h)
    w.join(timeout=120)
    assert not w.is_alive() and not errors, errors
    dm.reload("nxdm-ssd", line(0), nosync=True)
    hb = h[(B - 4096) * BLOCK:(B - 4096 + 1) * BLOCK]

    def check(when):
        with rawio.Fd(v.dev, write=False) as f:
            got = f.pread(B * BLOCK, BLOCK)
        assert got[:7 * 512] == hb[:7 * 512], \
            f"{when}: sectors 0-6 of B are not the large write's " \
            f"({'the old copy' if got[:512] == old[:512] else 'something else'})"
        assert got[7 * 512:] in (hb[7 * 512:], w_data), f"{when}: sector 7 of B"

    check("live")
    v.recreate()
    check("after reload")


@pytest.mark.guarantee("G8")
@pytest.mark.dmesg_allow(r"nxd.*(unreadable|fails its checksum|no header to vouch)")
@pytest.mark.parametrize("kind", ["whole", "partial"])
def test_lost_block_is_not_destaged(dm, loopdev, nullb, kind):
    """Block B holds O on the HDD; N is logged over it (ring slot 0: the
    header, slot 1: the data); then the SSD loses both slots (zeroed
    behind the volume's back).  A drain must not copy the zeroed slot over
    O: B reads O (a replay would have stopped at the lost segment too).
    whole: N is a 4 KiB write (a direct, ORDERED segment, no checksum: its
    lost header is what stops it); partial: 7 sectors (the writer's batch,
    whose checksum stops it).
    The volume is not degraded, yet an acknowledged write is gone: from
    then on every flush and FUA write fails (status acked_lost 1), so a
    file system learns it, until the table is reloaded."""
    hdd = loopdev(64)
    ssd = nullb(16)
    B = 300
    old = pattern("old", B, BLOCK)
    doff = nxdvol.new_data_offset(hdd)            # where the data area will start
    rawio.pwrite_dev(hdd, doff + B * BLOCK, old)
    v = Volume(dm, "nxdlb", hdd, ssd)
    v.pause()
    with rawio.Fd(v.dev) as f:
        assert f.pread(B * BLOCK, BLOCK) == old
        if kind == "whole":
            f.pwrite(B * BLOCK, pattern("new", B, BLOCK))
        else:
            with module_param("direct_partial", "N"):
                f.pwrite(B * BLOCK + 512, pattern("new", B, BLOCK - 512))
        f.fsync()
    assert v.status()["index_entries"] == 1
    ring = 8 * BLOCK                            # NXD_RING_START: ring slot 0
    assert rawio.pread_dev(ssd, ring, BLOCK)[:8] == b"\0NXDSEG1", "slot 0 holds no header"
    rawio.pwrite_dev(ssd, ring, bytes(2 * BLOCK))   # header and data block lost
    marker = host.kmsg_mark("lost block")
    v.message("resume_destage")
    v.drain()
    assert nxdvol.hdd_data_offset(hdd) == doff
    assert rawio.pread_dev(hdd, doff + B * BLOCK, BLOCK) == old, "the lost block was copied over the HDD"
    why = "has no header to vouch for it" if kind == "whole" else "fails its checksum"
    assert host.wait_kmsg(marker, r"logged block 300 .*" + why), \
        "no message naming the lost block"
    st = v.status()
    assert st["state"] == "ok" and st["index_entries"] == 0, st
    # The drain's drain_done came after it: the count, not last_event.
    assert st["acked_lost"] == 1 and st["events_acked_lost"] == 1, st
    with rawio.Fd(v.dev) as f:
        assert f.pread(B * BLOCK, BLOCK) == old
        with pytest.raises(OSError) as ei:
            f.fsync()
        assert ei.value.errno == errno.EIO, ei.value
        f.pwrite(B * BLOCK, pattern("later", B, BLOCK))     # plain writes go on
        with pytest.raises(OSError) as ei:
            f.fsync()
        assert ei.value.errno == errno.EIO, ei.value
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
    try:
        with pytest.raises(OSError) as ei:
            rawio.pwrite_direct(fd, (B + 1) * BLOCK, pattern("fua", B + 1, BLOCK))
        assert ei.value.errno == errno.EIO, ei.value
    finally:
        os.close(fd)
    # A reload is the admin's acknowledgement: flushes work again.
    dm.reload(v.name, v.line())
    st = v.status()
    assert st["acked_lost"] == 0 and st["events_acked_lost"] == 1, st
    with rawio.Fd(v.dev) as f:
        assert f.pread(B * BLOCK, BLOCK) == pattern("later", B, BLOCK)
        f.fsync()


@pytest.mark.guarantee("G5")
def test_tail_passes_superseded_copy_only_when_newer_is_durable(dm, nullb):
    """Block B logged (O, flushed), 2100 other blocks logged one segment
    each, then N logged over B (not flushed): O's segment is dead, N's
    lies past the first destage round (2048 segments).  That round moves
    the tail past O's segment; a power cut then (both devices, keep 0: the
    SSD's volatile cache is dropped) must leave B reading O or N.  The
    tail's superblock write used to be FUA without PREFLUSH, so it could
    be durable while N's segment was not: B read the HDD's older data
    (crash campaign, 6.1, seed 507 cut 7)."""
    hdd, ssd = pcut.pair(dm, nullb, "nxtl", "gtail", 31, volatile=True)
    # destage_rate 1: after the first round the destager sleeps seconds;
    # ssd_discard 0: no TRIMs in the SSD's cache.
    v = Volume(dm, "nxtl", hdd.path, ssd.path,
            opts=["low_watermark", "0", "destage_rate", "1", "ssd_discard", "0"])
    v.pause()
    B, FILL0, NFILL = 4100, 8192, 2100
    old = pattern("old", B, BLOCK)
    new = pattern("new", B, BLOCK)
    with rawio.Fd(v.dev) as f:
        f.pwrite(B * BLOCK, old)
        f.fsync()
        # One segment each (QD 1): 7 sectors in the writer's batches (a
        # direct write would join a segment with its neighbours).
        with module_param("direct_partial", "N"):
            for i in range(NFILL):
                f.pwrite((FILL0 + i) * BLOCK + 512, pattern("fill", i, BLOCK - 512))
        before = v.status()["segments_written"]
        f.pwrite(B * BLOCK, new)
        # N supersedes O once its direct segment is committed (a tick or
        # two after it was acknowledged), not flushed.
        host.wait_for(lambda: v.status()["segments_written"] > before, timeout=30,
                       interval=0.01, what="N's segment committed")
    st = v.status()
    assert st["segments_written"] >= NFILL + 2 and st["segments_reclaimed"] == 0, st
    v.message("resume_destage")
    host.wait_for(lambda: v.status()["segments_reclaimed"] > 0, timeout=300,
                   interval=0.05, what="the first destage round")
    st = v.status()
    hdd.cut()
    ssd.cut()
    # The setup: one round reclaimed O's segment and left N's in the log.
    assert st["segments_reclaimed"] < NFILL + 2 and st["index_entries"] > 0, st
    got = power_on_and_read(v, hdd, ssd, B)
    assert got in (old, new), \
        f"block {B} after the cut holds {'zeros' if got == bytes(BLOCK) else got[:16]!r}, " \
        f"neither the flushed copy nor the newer one (status before the cut: {st})"


@pytest.mark.guarantee("G9")
def test_held_write_not_stranded_by_a_smaller_one(dm, loopdev, nullb):
    """Destage paused; the log filled until it has room for a one-block
    segment and no more (what a write is room-checked for).  Then A, an
    unaligned 127-block write over logged blocks (no room: held until the
    destager makes some), and B, one aligned block elsewhere (room), while
    the destager cannot run: it is pinned to CPU 1, where a SCHED_FIFO
    process spins (RT throttling off) until B has completed.  A must
    complete: B must not have cleared the flag that makes a paused
    destager run for A.  (A spinning Python thread let the destager in at
    every GIL hand-off, and the test passed on the old module.)"""
    if os.cpu_count() < 2:
        pytest.skip("needs 2 CPUs")
    v = Volume(dm, "nxdheld", loopdev(64), nullb(16))
    v.pause()
    st = v.status()
    assert st["log_blocks"] == 4088, st
    seg = 64 * 1024
    with rawio.Fd(v.dev) as f, module_param("direct_partial", "N"):
        # One segment each: 217 x 17 + 2 + 3 x 3 = 3700 blocks, 388 free.
        # Each write leaves the first sector of its first block out, so
        # that the writer logs it in a segment of its own (whole blocks
        # would share direct segments).
        for i in range(217):
            f.pwrite(i * seg + 512, bytes([i % 251 + 1]) * (seg - 512))
        f.pwrite(20 * MiB + 512, b"\1" * (BLOCK - 512))
        for i in range(3):
            f.pwrite(21 * MiB + i * 2 * BLOCK + 512, b"\2" * (2 * BLOCK - 512))
    st = v.status()
    free = st["log_blocks"] - st["log_used_blocks"]
    # nxd_log_room: k + headers + 1 + open batch + 1 + 384 reserved blocks,
    # so a one-block write fits and nothing larger does (A's pieces, however
    # the block layer splits it, span more than one block each).
    assert free == 1 + 1 + 1 + 1 + 384, st
    kn = "%d:%d" % v.devnum()
    writer, destager = thread_pid(f"nxd-w/{kn}"), thread_pid(f"nxd-d/{kn}")
    pin(writer, 0)
    pin(destager, 1)
    pin(0, 0)
    hog = None
    a_off, a = 512, os.urandom(127 * BLOCK)
    b_off, b = 30 * MiB, os.urandom(BLOCK)
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    aio = rawio.AIO(2, len(a))
    done = {}
    rt = "/proc/sys/kernel/sched_rt_runtime_us"
    with open(rt) as f:
        rt_old = f.read().strip()
    try:
        # No RT throttling: the destager must not get 5 % of CPU 1.
        with open(rt, "w") as f:
            f.write("-1")
        # A separate process: a Python thread would give CPU 1 away at
        # every GIL hand-off.
        hog = subprocess.Popen(["chrt", "-f", "10", "taskset", "-c", "1",
                                "sh", "-c", "while :; do :; done"])
        time.sleep(0.2)
        aio.submit_write(fd, a_off, a, False, "A")
        aio.submit_write(fd, b_off, b, False, "B")
        deadline = time.monotonic() + 30
        while "B" not in done and time.monotonic() < deadline:
            for tag, res in aio.reap(1, timeout=1):
                done[tag] = res
        hog.kill()
        hog.wait()
        assert "B" in done, f"B not done while the destager could not run: {v.status()}"
        deadline = time.monotonic() + 120
        while len(done) < 2 and time.monotonic() < deadline:
            for tag, res in aio.reap(1, timeout=5):
                done[tag] = res
        if len(done) < 2:
            v.message("resume_destage")         # unstick it, then fail
            for tag, res in aio.reap(2 - len(done), timeout=120):
                done[tag] = res
            pytest.fail("the held write was still pending 120 s after the smaller "
                        f"one completed, destage paused: {v.status()}")
        assert done == {"A": len(a), "B": len(b)}, done
    finally:
        if hog and hog.poll() is None:
            hog.kill()
            hog.wait()
        with open(rt, "w") as f:
            f.write(rt_old)
        os.sched_setaffinity(0, set(range(os.cpu_count())))
        if aio.inflight == 0:
            aio.close()
        os.close(fd)
    with rawio.Fd(v.dev, write=False) as f:
        assert f.pread(a_off, len(a)) == a
        assert f.pread(b_off, len(b)) == b


@pytest.mark.guarantee("G5", "G11")
def test_frozen_tail_waits_for_the_newer_copy(dm, nullb):
    """Block B logged (O, flushed), then logged again (N, not flushed):
    O's segment is dead.  The SSD loses power (keep 0: N's segment was only
    in its cache) and stays off; the next log write fails, the volume
    degrades and freezes its log in the HDD label.  The degraded destager
    cannot read N's segment, but O's needs no read: it used to pass it,
    flushing an SSD that was gone and writing the new tail to the label all
    the same.  After power comes back, the replay started past O, found
    N's segment torn, and B read the HDD's data from before O."""
    hdd, ssd, v = cached_pair(dm, nullb, "nxft", "gfrz", 61)
    B = 300
    old = pattern("old", B, BLOCK)
    new = pattern("new", B, BLOCK)
    with rawio.Fd(v.dev) as f:
        f.pwrite(B * BLOCK, old)
        f.fsync()
        before = v.status()["segments_written"]
        f.pwrite(B * BLOCK, new)
        host.wait_for(lambda: v.status()["segments_written"] > before, timeout=30,
                       interval=0.01, what="N's segment committed")
        ssd.cut()
        try:
            f.pwrite(4096 * BLOCK, pattern("trigger", 0, BLOCK))
        except OSError as e:
            assert e.errno == errno.EIO, e
    st = v.status()
    assert st["state"] == "degraded" and st["index_entries"] == 1, st
    v.message("resume_destage")
    # Both the old code (a round that passed O, then one that failed on
    # N's segment) and the fixed one (a round that may pass nothing) back
    # off a second after a round that did not finish.
    host.wait_for(lambda: v.status()["destage_throttled_ms"] >= 1000, timeout=60,
                   interval=0.1, what="a degraded destage round")
    st = v.status()
    hdd.cut()
    got = power_on_and_read(v, hdd, ssd, B)
    assert got != new, "the SSD kept a write it was cut with: the test proves nothing"
    assert got == old, \
        f"block {B} holds {'zeros' if got == bytes(BLOCK) else got[:16]!r}, not the " \
        f"flushed copy (status before the cut: {st})"
    v.remove()


@pytest.mark.guarantee("G6", "G11")
def test_degraded_flush_reports_lost_log_writes(dm, nullb):
    hdd, ssd, v = cached_pair(dm, nullb, "nxll", "glost", 51)
    n, first = 16, 256
    with rawio.Fd(v.dev) as f:
        new = lose_acked_log_writes(v, ssd, f, first, n, 4096)
        try:
            f.fsync()
            synced = True
        except OSError as e:
            assert e.errno == errno.EIO, e
            synced = False
        got = [f.pread((first + i) * BLOCK + 512, 7 * 512) for i in range(n)]
    bad = [i for i in range(n) if got[i] != new[i]]
    assert not (synced and bad), \
        f"the flush succeeded but {len(bad)} of {n} acknowledged writes are gone: {bad}"
    assert bad, "the SSD kept writes it was cut with: the test proves nothing"
    v.remove()


@pytest.mark.guarantee("G6", "G11")
def test_degraded_journal_commit_reports_lost_log_writes(dm, nullb, tmp_path):
    """As above, but the flush is ext4's: jbd2 commits with one PREFLUSH|FUA
    write, which dm core splits into an empty flush and the data, and it
    sends the data whatever the flush returned (its superblock goes with
    FUA alone).  The flush failed, the FUA data landed on the HDD, and
    fsync of a new file returned 0 after acknowledged writes were lost:
    FUA writes must fail too."""
    hdd, ssd, v = cached_pair(dm, nullb, "nxlj", "gjrn", 53)
    n, first = 16, 12000
    # ext4 in the first 32 MiB; the lost raw writes lie beyond it.  No
    # lazy init and no bitmap prefetch: ext4lazyinit read the block bitmap
    # while the SSD was cut (CI, 6.1 and 6.12: "Cannot read block bitmap"),
    # so ext4 took its only group as corrupt and the write below failed
    # with ENOSPC before the fsync under test.
    run(["mkfs.ext4", "-F", "-q", "-b", "4096", "-E",
         "nodiscard,lazy_itable_init=0,lazy_journal_init=0", v.dev, "8192"])
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    run(["mount", "-o", "errors=continue,noinit_itable,no_prefetch_block_bitmaps",
         v.dev, str(mnt)])
    try:
        # An allocation now reads the bitmap while the SSD still serves it.
        fd = os.open(mnt / "before", os.O_CREAT | os.O_WRONLY, 0o644)
        try:
            os.write(fd, b"b" * BLOCK)
            os.fsync(fd)
        finally:
            os.close(fd)
        run(["sync", "-f", str(mnt)])
        with rawio.Fd(v.dev) as f:
            f.fsync()           # the file system so far is durable
            new = lose_acked_log_writes(v, ssd, f, first, n, 13000)
            fd = os.open(mnt / "after", os.O_CREAT | os.O_WRONLY, 0o644)
            try:
                os.write(fd, b"a" * BLOCK)
                try:
                    os.fsync(fd)
                    synced = True
                except OSError as e:
                    assert e.errno == errno.EIO, e
                    synced = False
            finally:
                os.close(fd)
            # A flush of our own waits until the log is empty, so that the
            # reads below see what the HDD was left with.
            with pytest.raises(OSError) as ei:
                f.fsync()
            assert ei.value.errno == errno.EIO, ei.value
            got = [f.pread((first + i) * BLOCK + 512, 7 * 512) for i in range(n)]
    finally:
        run(["umount", str(mnt)])
    bad = [i for i in range(n) if got[i] != new[i]]
    assert bad, "the SSD kept writes it was cut with: the test proves nothing"
    assert not synced, \
        f"ext4's fsync succeeded but {len(bad)} of {n} acknowledged writes are gone: {bad}"
    assert v.status()["state"] == "degraded"
    v.remove()
