# SPDX-License-Identifier: GPL-2.0
"""The write path: direct log writes (whole blocks, and partial end blocks
with no logged copy, remapped by map to their log slots, header written
by the writer after the data, PREFLUSH first: ORDERED segments) next to
the writer's own batches (partial blocks with a logged copy, merges).
Data is checked against a model of what the test wrote, never against
the volume.

 - test_aligned_writes_take_the_direct_path: whole-block writes land in
   ORDERED segments (flag set, no data checksum, one header per group of
   writes), not in batches copied by the writer; they read back live,
   after a clean reload and after a replay that had to trust the headers.
 - test_partial_write_merges_a_direct_write_in_flight: a partial write
   that comes while a direct write of the same block is still on its way
   to a slow SSD must merge that write's data, not the older copy: the
   other sectors of the block must read as the direct write's, live and
   after a reload.
 - test_direct_write_over_inflight_hdd_write_waits: an HDD write over
   logged blocks is in flight; a whole-block write of one of its blocks
   sent meanwhile may win or lose, but the replay agrees with the live
   volume and the old logged copy never comes back.
 - test_direct_write_after_partial_in_open_batch: a partial write of a
   block sits in the writer's open batch (the writer is held up by an RMW
   read of another block) when a whole-block write of the same block
   comes: the block's other sectors must read as the whole-block write's
   (the partial record, committed after a direct segment, replaced it:
   2 sectors lost in a pcut slice).
 - test_hdd_write_waits_only_for_its_own_blocks_copies: an HDD write over
   blocks a destage round is copying waits for those blocks' copies to
   land, not for the whole round.
 - test_plain_hdd_write_over_logged_blocks: a 1 MiB write over logged
   blocks goes to the HDD without FUA and is acknowledged when it lands
   (its INVAL is logged lazily); after a power cut of both devices'
   volatile caches, what a flush covered reads as the HDD write (with the
   small writes that followed it, whole or partial), what it did not reads
   as either version, and a clean stop keeps the HDD write too.
 - test_direct_write_in_the_writers_window_survives_a_replay (fault-
   injection build): a 4 KiB direct write sent while the writer holds a
   128 KiB write over logged blocks between its check and its
   registration must read back the same after a reload as after the
   fsync.
 - test_lazy_invals_of_an_out_of_order_stream_join: 40 plain 1 MiB HDD
   writes over logged blocks, sent last region first, leave one pending
   lazy INVAL range, not 40: no segment is written before the next flush,
   which logs one INVAL record of 40 MiB (a stream at queue depth > 1
   lands out of order; one range per write meant an HDD flush and an
   INVAL segment every 33 writes).
 - test_partial_ends_take_the_direct_path: a write's partial end blocks
   with no logged copy go to the direct segment with their sector masks
   (the HDD keeps the other sectors: they read as its pattern, live, after
   a replay and after a drain); a partial write of a block the direct
   segment holds merges in the writer's batch instead.
 - test_partial_direct_write_keeps_off_a_writer_held_block: a partial
   write of a block that a big write in the writer covers does not go
   direct, or its later segment would replace the big write's copy.
 - test_failed_direct_write_split_below_is_redone_once: a direct log
   write that a dm device under the SSD split (it crossed a 1 MiB
   boundary of dm-pcut) fails there and is redone on the HDD, where it is
   split too: it completes once, with its data on the HDD (redone as the
   SSD left it, chained with no completion count, it completed after its
   first HDD piece and again after the second: the 6.12 crash campaign's
   NULL bi_blkg oops in the writer)."""
import threading
import time

import pytest

from nxdt import host, ondisk, pcut, rawio
from nxdt.destagerig import wait_until
from nxdt.dmlib import delay_line
from nxdt.facts import BLOCK, MiB
from nxdt.noloss import power_on_and_read
from nxdt.nxdvol import Volume, module_param
from nxdt.workloads import BgWrites, pattern
from nxdt.writepath import (delayed_vol, direct_write_after_partial_in_open_batch, hdd_pattern,
                            log_segments, set_write_delay, slow_down)

SEG_ORDERED = 1


@pytest.mark.guarantee("G2", "G1")
def test_aligned_writes_take_the_direct_path(dm, loopdev, nullb):
    hdd = loopdev(64)
    ssd = nullb(16)
    v = Volume(dm, "nxwp", hdd, ssd)
    v.pause()
    blocks = [7, 3, 1000, 1001, 1002, 4095, 3]        # 3 twice: the newer wins
    model = {}
    with rawio.Fd(v.dev) as f:
        for i, b in enumerate(blocks):
            d = pattern("d", i, BLOCK)
            f.pwrite(b * BLOCK, d)
            model[b] = d
        f.fsync()
        for b, d in model.items():
            assert f.pread(b * BLOCK, BLOCK) == d, f"block {b} live"
    st = v.status()
    assert st["writes_logged"] == len(blocks), st
    assert st["index_entries"] == len(model), st
    # Suspended (table reloaded below), the log on the SSD is final.
    v.remove()
    segs = log_segments(ssd)
    recs = [r for s in segs for r in ondisk.data_recs(s)]
    assert [b for b, _ in recs] == blocks, "records are not the writes, in order"
    assert all(s["flags"] == SEG_ORDERED for s in segs), [s["flags"] for s in segs]
    assert all(m == 0xFF for _, m in recs)
    assert all(v_ == 0 for s in segs for t, b, v_, m in s["recs"]), "ORDERED records carry a crc"
    # The i-th data record's block is in slot i + 1 after its header.
    for s in segs:
        for i, (b, _) in enumerate(ondisk.data_recs(s)):
            got = rawio.pread_dev(ssd, s["ssd_off"] + (1 + i) * BLOCK, BLOCK)
            assert got in (model[b], pattern("d", blocks.index(b), BLOCK)), \
                f"slot of block {b} holds something else"
    # Unclean: clear CLEAN in the superblock copies so recovery walks the
    # log from the tail and trusts the ORDERED headers.
    ondisk.clear_sb_clean(ssd)
    v.recreate()
    v.pause()
    assert v.status()["recovered_blocks"] == len(blocks)
    with rawio.Fd(v.dev, write=False) as f:
        for b, d in model.items():
            assert f.pread(b * BLOCK, BLOCK) == d, f"block {b} after a replay"
    # Clean reload.
    v.recreate()
    with rawio.Fd(v.dev, write=False) as f:
        for b, d in model.items():
            assert f.pread(b * BLOCK, BLOCK) == d, f"block {b} after a reload"


@pytest.mark.guarantee("G1")
def test_partial_write_merges_a_direct_write_in_flight(dm, loopdev, nullb):
    v, slow, ssd_base = delayed_vol(dm, loopdev, nullb, "nxwm")
    B = 512
    old = pattern("old", B, BLOCK)
    new = pattern("new", B, BLOCK)
    part = pattern("part", B, 512)
    with rawio.Fd(v.dev) as f:
        f.pwrite(B * BLOCK, old)                  # logged, the older copy
        f.fsync()
    # SSD writes take 700 ms from now: the direct write's data, its header
    # and the partial write's batch are each that slow.
    set_write_delay(dm, slow, ssd_base, 700)
    bg = BgWrites(v.dev)
    t1 = bg.start(B * BLOCK, new)
    time.sleep(0.2)                                # its data is in flight now
    assert t1.is_alive(), "the direct write completed before the delay"
    t2 = bg.start(B * BLOCK + 3 * 512, part)
    bg.join(t1, t2)
    set_write_delay(dm, slow, ssd_base, 0)
    # The partial write came after the whole one was submitted and before
    # it completed: sector 3 may hold either, every other sector is new's.
    want_other = new[:3 * 512] + new[4 * 512:]

    def check(where):
        with rawio.Fd(v.dev, write=False) as f:
            got = f.pread(B * BLOCK, BLOCK)
        assert got[:3 * 512] + got[4 * 512:] == want_other, \
            f"{where}: sectors besides 3 are not the direct write's " \
            f"({'older copy' if got[:512] == old[:512] else 'other'})"
        assert got[3 * 512:4 * 512] in (part, new[3 * 512:4 * 512]), where

    check("live")
    v.remove()
    ondisk.clear_sb_clean(v.ssd)
    v.recreate()
    check("after a replay")


@pytest.mark.guarantee("G3")
def test_direct_write_over_inflight_hdd_write_waits(dm, loopdev, nullb):
    """Blocks 0-31 logged; a 128 KiB write over them goes to the HDD (FUA,
    slow: dm-delay) and INVALs them; a 4 KiB write of block 5 sent while
    that HDD write is in flight is concurrent with it: block 5 may read
    either, never the old logged copy, and the replay must agree with the
    live volume."""
    v, slow, hdd_base = delayed_vol(dm, loopdev, nullb, "nxwi", "hdd",
                                     opts=["write_threshold", "65536"])
    with rawio.Fd(v.dev) as f:
        for b in range(32):
            f.pwrite(b * BLOCK, pattern("log", b, BLOCK))
        f.fsync()
    assert v.status()["index_entries"] == 32
    set_write_delay(dm, slow, hdd_base, 1000)
    big = b"".join(pattern("big", b, BLOCK) for b in range(32))
    small = pattern("small", 5, BLOCK)
    bg = BgWrites(v.dev)
    t1 = bg.start(0, big)
    time.sleep(0.3)
    assert t1.is_alive(), "the HDD write completed before the delay"
    t2 = bg.start(5 * BLOCK, small)
    bg.join(t1, t2)
    set_write_delay(dm, slow, hdd_base, 0)

    def check(where):
        with rawio.Fd(v.dev, write=False) as f:
            got = f.pread(0, 32 * BLOCK)
        for b in range(32):
            want = small if b == 5 else big[b * BLOCK:(b + 1) * BLOCK]
            if b == 5:
                # Concurrent with the big write: either, never the old copy.
                assert got[b * BLOCK:(b + 1) * BLOCK] in (small, big[5 * BLOCK:6 * BLOCK]), where
            else:
                assert got[b * BLOCK:(b + 1) * BLOCK] == want, f"{where}: block {b}"
        return got[5 * BLOCK:6 * BLOCK]

    live = check("live")
    v.remove()
    ondisk.clear_sb_clean(v.ssd)
    v.recreate()
    assert check("after a replay") == live, "the replay disagrees with the live volume"


@pytest.mark.guarantee("G8")
def test_writer_does_not_wait_for_a_destage_round(dm, loopdev, nullb):
    """A destage round is copying blocks 0-31 to a slow HDD (dm-delay, 5 s
    writes); a 128 KiB write over those logged blocks must wait for those
    copies to land, but only it: a partial-block write elsewhere, which
    the writer thread logs, completes while the round's copies are still
    on their way (the loop device under the delay has completed none of
    them).  The writer once waited for the round itself."""
    v, slow, hdd_base = delayed_vol(dm, loopdev, nullb, "nxwf", "hdd")
    with rawio.Fd(v.dev) as f:
        for b in range(32):
            f.pwrite(b * BLOCK, pattern("log", b, BLOCK))
        f.fsync()
    loop_writes_done = slow_down(dm, slow, hdd_base, 5000)
    w0 = loop_writes_done()
    v.message("resume_destage")
    host.wait_for(lambda: v.status()["destage_bios"] > 0, timeout=30, interval=0.02,
                   what="the destage round's HDD writes")
    big = b"".join(pattern("big", b, BLOCK) for b in range(32))
    small = pattern("small", 0, 512)
    bg = BgWrites(v.dev, after=loop_writes_done)
    t1 = bg.start(0, big, "big")
    time.sleep(0.3)                              # the writer has fenced it
    t2 = bg.start(3000 * BLOCK + 512, small, "small")
    t2.join(60)
    assert "small" in bg.done, bg.errors
    assert bg.done["small"] == w0, \
        f"the partial write completed only after {bg.done['small'] - w0} HDD writes landed: " \
        "the writer waited for the destage round"
    t1.join(60)
    assert not bg.errors, bg.errors
    set_write_delay(dm, slow, hdd_base, 0)
    with rawio.Fd(v.dev, write=False) as f:
        assert f.pread(0, 32 * BLOCK) == big
        assert f.pread(3000 * BLOCK + 512, 512) == small


@pytest.mark.guarantee("G3", "G8")
def test_hdd_write_waits_only_for_its_own_blocks_copies(dm, loopdev, nullb):
    """A destage round copies 256 scattered logged blocks (one bio each) to
    a slow HDD (dm-delay, 1 s writes), at most 16 bios at a time (module
    parameter destage_depth).  A 128 KiB HDD write over the first 16 of them must wait
    for those copies to land, so no older copy lands after it, but not for
    the rest of the round: it completes while most of the round's copies
    are still to land (it once waited for the whole round and its flush).
    The data reads back as the big write, live and after a replay."""
    v, slow, hdd_base = delayed_vol(dm, loopdev, nullb, "nxfb", "hdd")
    n = 256
    with rawio.Fd(v.dev) as f:
        for i in range(n):
            f.pwrite(2 * i * BLOCK, pattern("log", i, BLOCK))
        f.fsync()
    loop_writes_done = slow_down(dm, slow, hdd_base, 1000)
    w0 = loop_writes_done()
    big = b"".join(pattern("big", b, BLOCK) for b in range(32))
    with module_param("destage_depth", 16):
        v.message("resume_destage")
        host.wait_for(lambda: v.status()["destage_bios"] > 0, timeout=30, interval=0.02,
                       what="the destage round's HDD writes")
        with rawio.Fd(v.dev) as f:
            f.pwrite(0, big)
        landed = loop_writes_done() - w0
    assert landed < n, \
        f"the HDD write over 16 logged blocks completed only after {landed} HDD writes " \
        f"landed: it waited for the whole round of {n} copies, not for its own blocks'"
    host.wait_for(lambda: v.status()["index_entries"] == 0, timeout=120, interval=0.2,
                   what="the round to end")
    set_write_delay(dm, slow, hdd_base, 0)

    def check(where):
        with rawio.Fd(v.dev, write=False) as f:
            assert f.pread(0, 32 * BLOCK) == big, f"{where}: the big write"
            for i in range(16, n):
                assert f.pread(2 * i * BLOCK, BLOCK) == pattern("log", i, BLOCK), \
                    f"{where}: logged block {2 * i}"

    check("live")
    v.remove()
    ondisk.clear_sb_clean(v.ssd)
    v.recreate()
    check("after a replay")


@pytest.mark.guarantee("G3", "G6")
def test_plain_hdd_write_over_logged_blocks(dm, nullb):
    hdd, ssd = pcut.pair(dm, nullb, "nxlz", "glazy", 41, volatile=True)
    opts = ["ssd_discard", "0"]
    v = Volume(dm, "nxlz", hdd.path, ssd.path, opts=opts)
    v.pause()
    n = MiB // BLOCK
    R1, R2, R3, R4, R5 = 256, 1024, 2048, 4096, 6144
    regions = (R1, R2, R3, R4, R5)
    old = {r: [pattern(f"a{r}", i, BLOCK) for i in range(n)] for r in regions}
    big = {r: b"".join(pattern(f"w{r}", i, BLOCK) for i in range(n)) for r in regions}
    fua5 = b"".join(pattern("fua5", i, BLOCK) for i in range(n))

    def log_region(f, r):
        for i in range(n):
            f.pwrite((r + i) * BLOCK, old[r][i])

    with rawio.Fd(v.dev) as f:
        for r in (R1, R2, R3, R5):
            log_region(f, r)
        f.fsync()
        st = v.status()
        assert st["index_entries"] == 4 * n, st
        fua0 = hdd.status()["fua"]
        f.pwrite(R1 * BLOCK, big[R1])
        f.pwrite(R2 * BLOCK, big[R2])
        assert hdd.status()["fua"] == fua0, "the HDD write over logged blocks had FUA"
        st = v.status()
        assert st["index_entries"] == 2 * n, f"logged copies not dropped when the writes landed: {st}"
        assert f.pread(R1 * BLOCK, MiB) == big[R1], "R1 live"
        # Newer copies of blocks whose INVAL is not logged yet: a partial
        # one (the writer merges it) and a whole one (direct path).
        w4 = pattern("w4", 0, 512)
        w5 = pattern("w5", 0, BLOCK)
        f.pwrite((R2 + 6) * BLOCK, w4)
        f.pwrite((R2 + 16) * BLOCK, w5)
        f.fsync()
        # A FUA write over blocks whose INVAL is still lazy: durable at
        # once, so the older logged copy must never come back over it.
        f.pwrite(R5 * BLOCK, big[R5])
        # FUA and nothing else (Linux AIO: no generic_write_sync flush).
        aio = rawio.AIO(1, MiB)
        aio.submit_write(f.fd, R5 * BLOCK, fua5, True, "fua5")
        assert [res for _, res in aio.reap(1, 60)] == [MiB], "the FUA write failed"
        assert hdd.status()["fua"] > fua0, "no FUA reached the HDD"
        # Not covered by any flush: may read as either version.
        f.pwrite(R3 * BLOCK, big[R3])
    r2 = bytearray(big[R2])
    r2[6 * BLOCK:6 * BLOCK + 512] = w4
    r2[16 * BLOCK:17 * BLOCK] = w5
    want = {R1: big[R1], R2: bytes(r2), R5: fua5}

    def check(where, regions):
        with rawio.Fd(v.dev, write=False) as g:
            for r, d in regions.items():
                got = g.pread(r * BLOCK, MiB)
                bad = [i for i in range(n) if got[i * BLOCK:(i + 1) * BLOCK] != d[i * BLOCK:(i + 1) * BLOCK]]
                assert not bad, f"{where}: region {r}: {len(bad)} blocks wrong, first {bad[:8]}"

    check("live", want)
    st = v.status()
    hdd.cut()
    ssd.cut()
    v.remove()
    hdd.power_on()
    ssd.power_on()
    v.recreate()
    check(f"after the power cut (status before it: {st})", want)
    with rawio.Fd(v.dev, write=False) as g:
        got = g.pread(R3 * BLOCK, MiB)
    for i in range(n):
        b = got[i * BLOCK:(i + 1) * BLOCK]
        assert b in (old[R3][i], big[R3][i * BLOCK:(i + 1) * BLOCK]), \
            f"R3 block {i} after the cut is neither version"
    # A clean stop logs the lazy INVALs: the reload keeps the HDD write.
    v.pause()
    with rawio.Fd(v.dev) as f:
        log_region(f, R4)
        f.fsync()
        f.pwrite(R4 * BLOCK, big[R4])
    v.recreate()
    check("after a clean stop", {R4: big[R4]})


class AckedDataLost(AssertionError):
    """An acknowledged and flushed block read back as neither its own data
    nor a later write's."""


@pytest.mark.guarantee("G5", "G3")
def test_fsynced_block_survives_plain_overwrite_and_idle_round(dm, nullb):
    """A 4 KiB write, fsync'd (logged); a 128 KiB aligned write over it
    with no fsync (straight to the HDD); the destager's next round; then
    both devices lose their volatile caches.  The block must read back as
    the fsync'd data or the later write, never as what the HDD held before
    (without the HDD flush of a round that copies nothing but passes
    copies that lazy HDD writes superseded, it read back as the HDD's old
    data on 6.1 and on 6.12)."""
    hdd, ssd = pcut.pair(dm, nullb, "nxov", "gover", 51, volatile=True)
    v = Volume(dm, "nxov", hdd.path, ssd.path)
    off = 64 * (128 << 10)                      # 128 KiB aligned
    old = bytes(BLOCK)                          # what the HDD holds: never written
    a = pattern("A", 0, BLOCK)
    big = b"".join(pattern("big", i, BLOCK) for i in range(32))
    # Destaging paused until the overwrite is in: an idle round between the
    # two writes (100 ms without I/O, which a loaded TCG host can give)
    # would copy A to the HDD and flush it first.
    v.pause()
    with rawio.Fd(v.dev) as f:
        f.pwrite(off, a)
        f.fsync()
        st = v.status()
        assert st["index_entries"] == 1, f"A was not logged: {st}"
        r0 = st["segments_reclaimed"]
        f.pwrite(off, big)                      # aligned 128 KiB: the HDD, no flush
        assert f.pread(off, BLOCK) == big[:BLOCK], "live read"
    v.message("resume_destage")
    # The destager's next round (the volume is idle now): wait for it by
    # its own counter, not for a time.
    host.wait_for(lambda: v.status()["segments_reclaimed"] > r0, timeout=120,
                  what="a destage round that frees the segment holding A")
    hdd.cut()
    ssd.cut()
    got = power_on_and_read(v, hdd, ssd, off // BLOCK)
    if got not in (a, big[:BLOCK]):
        raise AckedDataLost("the fsync'd block read back as "
                            + ("the HDD's data from before it" if got == old else "other data")
                            + " after the power cut")


@pytest.mark.guarantee("G5", "G3")
def test_direct_write_in_the_writers_window_survives_a_replay(fault_module, dm, nullb):
    """A 128 KiB write over a range with a logged block goes through the
    writer (an HDD write over logged blocks); the fault-injection build
    holds it 500 ms between the writer's check for direct segments over
    the range and its registration (fault_skip=4, a window that is
    otherwise microseconds wide).  A 4 KiB write of another block of the
    range, sent inside that window, completes; after both and an fsync,
    the block must read back the same live and after a clean reload (a
    replay of the log).  When the lazy drop of the big write missed the
    4 KiB write's segment, not yet committed, the block read as the 4 KiB
    write live and as the 128 KiB write after the reload (6.12)."""
    with open(fault_module, "w") as f:
        f.write("4")
    v = Volume(dm, "nxww", nullb(64), nullb(16))
    v.pause()
    off = 64 * (128 << 10)                      # 128 KiB aligned
    y = off + 5 * BLOCK                         # the block the 4 KiB write hits
    big = b"".join(pattern("big", i, BLOCK) for i in range(32))
    d = pattern("D", 0, BLOCK)
    with rawio.Fd(v.dev) as f:
        f.pwrite(off, pattern("X", 0, BLOCK))   # a logged block in the range
        f.fsync()
        assert v.status()["index_entries"] == 1, v.status()
        errs = []

        def big_write():
            try:
                with rawio.Fd(v.dev) as g:
                    g.pwrite(off, big)
            except OSError as e:
                errs.append(e)
        t = threading.Thread(target=big_write)
        t0 = time.monotonic()
        t.start()
        time.sleep(0.15)                        # inside the writer's 500 ms
        f.pwrite(y, d)
        t_d = time.monotonic() - t0
        t.join(60)
        t_big = time.monotonic() - t0
        assert not t.is_alive() and not errs, errs
        f.fsync()
        live = f.pread(y, BLOCK)
    assert live in (d, big[5 * BLOCK:6 * BLOCK]), "live read: neither write"
    # The 4 KiB write must have been inside the window to test anything.
    assert t_d < t_big, f"the 4 KiB write completed at {t_d:.2f}s, after the big one ({t_big:.2f}s)"
    v.remove()
    v.recreate()
    with rawio.Fd(v.dev, write=False) as f:
        after = f.pread(y, BLOCK)
    if after != live:
        raise AckedDataLost(f"block read back as the {'4 KiB' if live == d else '128 KiB'} write "
                            f"after an fsync, as the "
                            f"{'128 KiB' if after == big[5 * BLOCK:6 * BLOCK] else 'other'} "
                            f"data after a reload (4 KiB write done at {t_d:.2f}s, 128 KiB "
                            f"at {t_big:.2f}s)")


@pytest.mark.guarantee("G3")
def test_destage_copy_waits_for_an_earlier_hdd_write(fault_module, dm, nullb):
    """A 128 KiB write W, with nothing logged under it, goes straight to
    the HDD; the fault-injection build keeps it queued 2 s before it goes
    down (fault_skip=8, an HDD with a deep queue).  A 4 KiB write D of a
    block in W's range, sent while W is held, is logged and completes;
    then a drain destages it.  The round's copy of D must not reach the
    HDD before W: otherwise W lands over the copy after the round dropped
    D's entry, and the block, read as D after D completed, reads as W with
    no write in flight (a round must wait for the HDD writes mapped before
    its blocks were logged)."""
    with open(fault_module, "w") as f:
        f.write("8")
    v = Volume(dm, "nxlw", nullb(64), nullb(16))
    v.pause()
    off = 64 * (128 << 10)                      # 128 KiB aligned
    y = off + 5 * BLOCK
    big = b"".join(pattern("W", i, BLOCK) for i in range(32))
    d = pattern("D", 0, BLOCK)
    done = threading.Event()
    errs = []

    def big_write():
        try:
            with rawio.Fd(v.dev) as g:
                g.pwrite(off, big)
        except OSError as e:
            errs.append(e)
        done.set()
    with rawio.Fd(v.dev) as f:
        t = threading.Thread(target=big_write)
        t.start()
        wait_until(lambda: v.status()["writes_direct"] >= 1 or done.is_set(),
                   what="the 128 KiB write to be mapped to the HDD")
        f.pwrite(y, d)
        f.fsync()                               # D's segment committed: the drain takes it
        st = v.status()
        held = not done.is_set()
        assert held, "the 128 KiB write landed before the 4 KiB one was logged: nothing tested"
        assert st["writes_logged"] >= 1 and st["index_entries"] == 1, st
        v.drain()
        t.join(60)
        assert not t.is_alive() and not errs, errs
        assert v.status()["index_entries"] == 0, v.status()
        after = f.pread(y, BLOCK)
    assert after == d, ("the block reads as the earlier HDD write after a round destaged the "
                        f"later logged one: {'W' if after == big[5 * BLOCK:6 * BLOCK] else 'other'}")


@pytest.mark.guarantee("G3")
def test_lazy_invals_of_an_out_of_order_stream_join(dm, loopdev, nullb):
    hdd = loopdev(64)
    ssd = nullb(16)
    v = Volume(dm, "nxlj", hdd, ssd)
    v.pause()
    n, per = 40, MiB // BLOCK       # 40 regions of 1 MiB, a logged block each
    model = {}
    with rawio.Fd(v.dev) as f:
        for k in range(n):
            d = pattern("old", k, BLOCK)
            f.pwrite((k * per + 5) * BLOCK, d)
        f.fsync()
        assert v.status()["index_entries"] == n
        segs0 = v.status()["segments_written"]
        # Plain 1 MiB HDD writes over them, last region first: each lands
        # before the next starts, none continues the range before it.
        for k in reversed(range(n)):
            d = b"".join(pattern(f"w{k}", i, BLOCK) for i in range(per))
            f.pwrite(k * MiB, d)
            model[k] = d
        st = v.status()
        assert st["index_entries"] == 0, f"logged copies not dropped: {st}"
        assert st["segments_written"] == segs0, \
            f"{st['segments_written'] - segs0} segments written before any flush: the " \
            f"{n} lazy INVALs were not joined into one range (one per write, and a " \
            f"commit at the 33rd)"
        f.fsync()
        assert v.status()["segments_written"] == segs0 + 1, "the flush logged no INVAL segment"
        for k, d in model.items():
            assert f.pread(k * MiB, MiB) == d, f"region {k} live"
    v.remove()
    invals = [(b, c) for s in log_segments(ssd) for t, b, c, _ in s["recs"] if t == 2]
    assert invals == [(0, n * per)], f"INVAL records {invals}, expected one of {n} MiB"
    v.recreate()
    with rawio.Fd(v.dev, write=False) as f:
        for k, d in model.items():
            assert f.pread(k * MiB, MiB) == d, f"region {k} after a clean reload"


@pytest.mark.guarantee("G1", "G5")
def test_direct_write_after_partial_in_open_batch(dm, loopdev, nullb):
    # A partial write of a block with no logged copy goes to the batch only
    # with direct_partial off (or when the fast path refuses it).
    with module_param("direct_partial", "N"):
        direct_write_after_partial_in_open_batch(dm, loopdev, nullb)


@pytest.mark.guarantee("G11")
def test_failed_direct_write_split_below_is_redone_once(dm, nullb):
    hdd, ssd = pcut.pair(dm, nullb, "nxsp", "gsplit", 71)
    v = Volume(dm, "nxsp", hdd.path, ssd.path,
               opts=["mode", "log_all", "ssd_discard", "0"])
    v.pause()
    n = ondisk.SEG_MAX_BLOCKS - 1          # one whole direct segment
    per_mib = MiB // BLOCK
    _, sb = ondisk.newest_sb(ssd.path)
    head = sb["ring_start"] + sb["head_pos"]
    # The next direct segment opens at the ring's head; its data slots
    # cross an SSD MiB boundary when the first one is past per_mib - n.
    # Smaller direct segments first (each header + k blocks, k >= 1) move
    # the head there.
    d = next(d for d in range(per_mib + 2) if d != 1 and
             (head + d + 1) % per_mib > per_mib - n)
    W = 200                                 # blocks 200-326: an HDD MiB boundary too
    data = b"".join(pattern("split", i, BLOCK) for i in range(n))
    with rawio.Fd(v.dev) as f:
        at = 4096
        while d:
            k = min(n, d - 1)
            if d - (k + 1) == 1:
                k -= 1
            f.pwrite(at * BLOCK, b"".join(pattern("pre", at + i, BLOCK) for i in range(k)))
            f.fsync()
            at += k
            d -= k + 1
        assert v.status()["segments_written"] >= 1
        ssd.message("fail_writes", 1)
        failed = ssd.status()["failed"]
        f.pwrite(W * BLOCK, data)
        st = v.status()
        assert st["state"] == "degraded", st
        assert ssd.status()["failed"] - failed >= 2, \
            "the direct write was not split on the SSD: the test proves nothing " \
            f"(head {head}, status {st})"
        assert f.pread(W * BLOCK, n * BLOCK) == data, "the redone write reads back wrong"
    assert rawio.pread_dev(hdd.path, W * BLOCK, n * BLOCK) == data, \
        "the HDD does not hold the redone write"
    assert v.status()["hdd_errors"] == 0
    v.remove()


@pytest.mark.guarantee("G2", "G1")
def test_partial_ends_take_the_direct_path(dm, loopdev, nullb):
    hdd, ssd = loopdev(64), nullb(16)
    model = hdd_pattern(hdd, 32)
    v = Volume(dm, "nxpe", hdd, ssd)
    v.pause()
    # (offset, length): whole block 0 and sectors 0-1 of 1; sectors 3-4 of
    # 8; sectors 4-7 of 16 and whole 17-18; then sector 5 of block 1,
    # which w1 holds: that one merges in the writer's batch.
    writes = [(0, 5120), (8 * BLOCK + 1536, 1024), (16 * BLOCK + 2048, 10240),
              (BLOCK + 5 * 512, 512)]
    want_direct = [(0, 0xFF), (1, 0x03), (8, 0x18), (16, 0xF0), (17, 0xFF), (18, 0xFF)]
    with rawio.Fd(v.dev) as f:
        for i, (off, n) in enumerate(writes):
            d = pattern("pe", i, n)
            f.pwrite(off, d)
            model[off:off + n] = d
        f.fsync()

        def check(where, dev=None):
            got = rawio.pread_dev(dev, 0, len(model)) if dev else f.pread(0, len(model))
            for b in range(32):
                assert got[b * BLOCK:(b + 1) * BLOCK] == model[b * BLOCK:(b + 1) * BLOCK], \
                    f"{where}: block {b}"
        check("live")
    st = v.status()
    assert st["rmw_reads"] == 1, st
    v.remove()
    segs = log_segments(ssd)
    direct = [r for s in segs if s["flags"] == SEG_ORDERED for r in ondisk.data_recs(s)]
    batch = [r for s in segs if s["flags"] != SEG_ORDERED for r in ondisk.data_recs(s)]
    assert direct == want_direct, f"direct records {direct}"
    assert batch == [(1, 0x23)], f"the writer's records {batch}"
    ondisk.clear_sb_clean(ssd)
    v.recreate()
    v.pause()
    with rawio.Fd(v.dev, write=False) as f:
        check("after a replay")
    v.drain()
    assert v.status()["index_entries"] == 0
    check("on the HDD after a drain", hdd)


@pytest.mark.guarantee("G1")
def test_partial_direct_write_keeps_off_a_writer_held_block(dm, loopdev, nullb):
    """A 600 KiB write (log_all: too big for a direct segment) is in the
    writer, its first segment on a slow SSD, when a 512 B write of one of
    its blocks comes: that one must not go direct.  Its segment would be
    committed after the writer's and replace the big write's copy of the
    block, whose other sectors would then read as the HDD's old data."""
    v, slow, ssd_base = delayed_vol(dm, loopdev, nullb, "nxpq",
                                     opts=["mode", "log_all"])
    model = hdd_pattern(v.hdd, 200)
    B = 40
    big = pattern("big", 0, 150 * BLOCK)
    part = pattern("part", 0, 512)
    dm.reload(slow, delay_line(ssd_base, 0, 700))
    bg = BgWrites(v.dev)
    t1 = bg.start(0, big)
    time.sleep(0.3)                     # its first segment is on its way
    assert t1.is_alive(), "the big write completed before the delay"
    t2 = bg.start(B * BLOCK + 3 * 512, part)
    for t in (t1, t2):
        t.join(120)
        assert not t.is_alive(), "a write hung"
    assert not bg.errors, bg.errors
    dm.reload(slow, delay_line(ssd_base, 0, 0))
    model[:len(big)] = big

    def check(where):
        with rawio.Fd(v.dev, write=False) as f:
            got = f.pread(B * BLOCK, BLOCK)
        want = model[B * BLOCK:(B + 1) * BLOCK]
        # Sector 3: the two writes overlapped in time, either wins.
        assert got[:3 * 512] + got[4 * 512:] == want[:3 * 512] + want[4 * 512:], \
            f"{where}: sectors of block {B} besides 3 are not the big write's"
        assert got[3 * 512:4 * 512] in (part, want[3 * 512:4 * 512]), where

    check("live")
    v.remove()
    direct = [r for s in log_segments(v.ssd) if s["flags"] == SEG_ORDERED
              for r in ondisk.data_recs(s)]
    # None: the big write went to the writer whole, and so did the small one.
    assert not direct, f"direct records {direct}"
    ondisk.clear_sb_clean(v.ssd)
    v.recreate()
    check("after a replay")
