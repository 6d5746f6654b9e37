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
 - test_direct_write_over_inflight_hdd_write_waits: a large write over
   partly logged blocks is cut: its logged part goes to the log, the rest
   is in flight to a slow HDD; a whole-block write of one of those HDD
   blocks sent meanwhile may win or lose, but the replay agrees with the
   live volume.
 - test_direct_write_after_partial_in_open_batch: a partial write of a
   block sits in the writer's open batch (the writer is held up by an RMW
   read of another block) when a whole-block write of the same block
   comes: the block's other sectors must read as the whole-block write's
   (the partial record, committed after a direct segment, replaced it:
   2 sectors lost in a pcut slice).
 - test_hdd_write_waits_only_for_its_own_blocks_copies: an HDD write over
   blocks a destage round is copying waits for those blocks' copies to
   land, not for the whole round.
 - test_large_write_over_logged_blocks_is_cut_at_their_edges: the log
   owns the blocks it holds.  A 1 MiB write over two logged blocks of a
   region sends only those two to the log and the rest to the HDD (read
   raw: the HDD never gets the logged blocks' new data before a destage);
   one over a wholly logged region is logged whole; no INVAL is written.
   After a power cut of both devices' volatile caches, what a flush or a
   FUA covered reads back, what nothing covered reads as either version,
   and a clean stop keeps everything.
 - test_fsynced_block_survives_plain_overwrite_and_idle_round: issue 44's
   lost fsync'd block (a plain overwrite, an idle destage round, a cut).
 - test_direct_write_inside_a_cut_large_write_survives_a_replay (fault-
   injection build): a 128 KiB write over one logged block is cut; its
   HDD part is held 2 s below map; a 4 KiB write of a block of that part,
   sent meanwhile, is logged: the block reads as it live, after a replay
   and after a drain.
 - test_ready_direct_segments_share_one_ssd_flush: 8 full direct
   segments whose data lands while the writer commits the first (an SSD
   whose writes complete 3 s late) are committed with fewer SSD flushes than
   segments (one flush for all the segments whose data is in, headers
   without their own PREFLUSH); both caches cut with no flush: every
   block reads as its fsync'd old data or the new write, never as the
   slot's earlier contents (no header reached the media before its data).
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

from nxdt import host, nxdvol, ondisk, pcut, rawio
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
    """Blocks 0-15 logged; a 128 KiB write over blocks 0-31 is cut at
    block 16: 0-15 are logged, 16-31 go to the HDD (slow: dm-delay, 1 s).
    A 4 KiB write of block 20 sent while that HDD write is in flight is
    concurrent with it: block 20 may read either, and the replay must
    agree with the live volume; every other block reads as the big write."""
    v, slow, hdd_base = delayed_vol(dm, loopdev, nullb, "nxwi", "hdd",
                                     opts=["write_threshold", "65536"])
    with rawio.Fd(v.dev) as f:
        for b in range(16):
            f.pwrite(b * BLOCK, pattern("log", b, BLOCK))
        f.fsync()
    st0 = v.status()
    assert st0["index_entries"] == 16, st0
    set_write_delay(dm, slow, hdd_base, 1000)
    big = b"".join(pattern("big", b, BLOCK) for b in range(32))
    small = pattern("small", 20, BLOCK)
    bg = BgWrites(v.dev)
    t1 = bg.start(0, big)
    time.sleep(0.3)
    assert t1.is_alive(), "the HDD part of the big write completed before the delay"
    t2 = bg.start(20 * BLOCK, small)
    bg.join(t1, t2)
    set_write_delay(dm, slow, hdd_base, 0)
    st = v.status()
    assert st["writes_direct"] >= st0["writes_direct"] + 1, f"no part went to the HDD: {st}"
    assert st["invalidations"] == st0["invalidations"], f"a write invalidated logged blocks: {st}"

    def check(where):
        with rawio.Fd(v.dev, write=False) as f:
            got = f.pread(0, 32 * BLOCK)
        for b in range(32):
            if b == 20:
                # Concurrent with the big write: either.
                assert got[b * BLOCK:(b + 1) * BLOCK] in (small, big[20 * BLOCK:21 * BLOCK]), where
            else:
                assert got[b * BLOCK:(b + 1) * BLOCK] == big[b * BLOCK:(b + 1) * BLOCK], \
                    f"{where}: block {b}"
        return got[20 * BLOCK:21 * BLOCK]

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
def test_large_write_over_logged_blocks_is_cut_at_their_edges(dm, nullb):
    """The log owns the blocks it holds.  Destaging paused, both devices
    with volatile caches (dm-pcut).  R1 wholly logged, R2 with blocks 5
    and 200 logged, R3 and R5 wholly logged, all fsync'd.  A 1 MiB write
    over R1 is logged whole; one over R2 goes to the HDD but for blocks
    5 and 200, which are logged: read raw, the HDD has the new data
    everywhere else in R2 and its old data there.  No write invalidates
    a logged block.  Then a partial and a whole write into R2, an fsync,
    a FUA write over R5 (AIO, no flush), a plain unflushed write over R3;
    both caches cut: R1, R2 and R5 read as written, R3 as either version.
    A clean stop after a write over logged R4 keeps it."""
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
    in_r2 = (5, 200)

    def log_region(f, r, blocks=range(n)):
        for i in blocks:
            f.pwrite((r + i) * BLOCK, old[r][i])

    with rawio.Fd(v.dev) as f:
        for r in (R1, R3, R5):
            log_region(f, r)
        log_region(f, R2, in_r2)
        f.fsync()
        st0 = v.status()
        assert st0["index_entries"] == 3 * n + len(in_r2), st0
        doff = nxdvol.hdd_data_offset(hdd.path)
        with rawio.Fd(hdd.path, write=False) as h:
            hdd_r2 = h.pread(doff + R2 * BLOCK, MiB)
        f.pwrite(R1 * BLOCK, big[R1])
        f.pwrite(R2 * BLOCK, big[R2])
        st = v.status()
        assert st["index_entries"] == st0["index_entries"], \
            f"the logged blocks did not stay logged: {st0} -> {st}"
        assert st["invalidations"] == 0, st
        # R2: three HDD pieces (0-4, 6-199, 201-255), two logged blocks.
        assert st["writes_direct"] - st0["writes_direct"] == 3, (st0, st)
        with rawio.Fd(hdd.path, write=False) as h:
            raw = h.pread(doff + R2 * BLOCK, MiB)
        for i in range(n):
            want = hdd_r2 if i in in_r2 else big[R2]
            assert raw[i * BLOCK:(i + 1) * BLOCK] == want[i * BLOCK:(i + 1) * BLOCK], \
                f"R2 block {i} on the raw HDD: " + \
                ("the write over a logged block reached the HDD" if i in in_r2 else
                 "the part over no logged block did not go to the HDD")
        assert f.pread(R1 * BLOCK, MiB) == big[R1], "R1 live"
        assert f.pread(R2 * BLOCK, MiB) == big[R2], "R2 live"
        # Newer copies: a partial one and a whole one.
        w4 = pattern("w4", 0, 512)
        w5 = pattern("w5", 0, BLOCK)
        f.pwrite((R2 + 6) * BLOCK, w4)
        f.pwrite((R2 + 16) * BLOCK, w5)
        f.fsync()
        f.pwrite(R5 * BLOCK, big[R5])
        # FUA and nothing else (Linux AIO: no generic_write_sync flush).
        aio = rawio.AIO(1, MiB)
        aio.submit_write(f.fd, R5 * BLOCK, fua5, True, "fua5")
        assert [res for _, res in aio.reap(1, 60)] == [MiB], "the FUA write failed"
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
    (when the 128 KiB write went to the HDD whole and dropped A's entry, a
    round that copied nothing passed A's copy without an HDD flush: it
    read back as the HDD's old data on 6.1 and on 6.12; now the log owns
    A's block, so the overwrite of it is logged)."""
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
def test_direct_write_inside_a_cut_large_write_survives_a_replay(fault_module, dm, nullb):
    """A 128 KiB write W over a range whose first block is logged is cut:
    that block is logged, blocks 1-31 go to the HDD, where the
    fault-injection build keeps them queued 2 s below map (fault_skip=8).
    A 4 KiB write D of block 5, sent meanwhile, is logged and completes
    before W.  D is the later write: the block must read as D live, after
    a reload (a replay of the log) and after a drain (the destager's copy
    of D waits for W's HDD part).  Before the log owned its blocks, W went
    to the HDD whole through the writer and a lazy INVAL could drop D's
    copy at the next replay."""
    with open(fault_module, "w") as f:
        f.write("8")
    v = Volume(dm, "nxww", nullb(64), nullb(16))
    v.pause()
    off = 64 * (128 << 10)                      # 128 KiB aligned
    y = off + 5 * BLOCK                         # the block D hits
    big = b"".join(pattern("big", i, BLOCK) for i in range(32))
    d = pattern("D", 0, BLOCK)
    bg = BgWrites(v.dev)
    with rawio.Fd(v.dev) as f:
        f.pwrite(off, pattern("X", 0, BLOCK))   # the logged block in the range
        f.fsync()
        st0 = v.status()
        assert st0["index_entries"] == 1, st0
        t = bg.start(off, big, "W")
        wait_until(lambda: v.status()["writes_direct"] > st0["writes_direct"] or bg.done,
                   what="W's HDD part to be mapped")
        f.pwrite(y, d)
        f.fsync()
        assert not bg.done, "W completed before D was logged: nothing tested"
        bg.join(t)
        assert not t.is_alive(), "W hung"
        live = f.pread(off, 32 * BLOCK)
    want = bytearray(big)
    want[5 * BLOCK:6 * BLOCK] = d
    want = bytes(want)

    def check(where, got):
        bad = [i for i in range(32) if got[i * BLOCK:(i + 1) * BLOCK] != want[i * BLOCK:(i + 1) * BLOCK]]
        if bad:
            raise AckedDataLost(f"{where}: blocks {bad} wrong (block 5 reads as "
                                f"{'W' if got[5 * BLOCK:6 * BLOCK] == big[5 * BLOCK:6 * BLOCK] else 'D' if got[5 * BLOCK:6 * BLOCK] == d else 'other data'})")
    check("live", live)
    v.remove()
    v.recreate()
    v.pause()
    with rawio.Fd(v.dev, write=False) as f:
        check("after a reload", f.pread(off, 32 * BLOCK))
    v.drain()
    assert v.status()["index_entries"] == 0, v.status()
    with rawio.Fd(v.dev, write=False) as f:
        check("after a drain", f.pread(off, 32 * BLOCK))


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


@pytest.mark.guarantee("G5", "G7")
def test_ready_direct_segments_share_one_ssd_flush(dm, nullb):
    """8 x 127 whole-block writes (8 full direct segments) sent at once
    through AIO to a volume whose SSD completes every write 3 s late
    (dm-delay over dm-pcut, a volatile cache): while the writer commits
    the first segment, the other seven become ready, and the writer
    commits them after one SSD flush, without a PREFLUSH per header.
    dm-pcut counts fewer flushes than segments were written.  Then both
    caches are cut with no flush: each block must read as its old data
    (logged and fsync'd before) or as the new write, never as what the
    log slot held before (an ORDERED header durable before its data)."""
    host.modprobe("dm-delay")
    hdd, ssd = pcut.pair(dm, nullb, "nxgf", "ggf", 61, volatile=True)
    dm.create("nxgf-sd", delay_line(ssd.path, 0, 0))
    v = Volume(dm, "nxgf", hdd.path, "/dev/mapper/nxgf-sd", opts=["ssd_discard", "0"])
    v.pause()
    n = 8 * 127
    old = [pattern("old", b, BLOCK) for b in range(n)]
    new = [pattern("new", b, BLOCK) for b in range(n)]

    def write_all(fd, data):
        aio = rawio.AIO(n, BLOCK)
        for b in range(n):
            aio.submit_write(fd, b * BLOCK, data[b], False, b)
        got = []
        while len(got) < n:
            got += aio.reap(1, 120)
        bad = [t for t, res in got if res != BLOCK]
        assert not bad, f"writes failed: {bad[:8]}"

    with rawio.Fd(v.dev) as f:
        write_all(f.fd, old)
        f.fsync()
        st0 = v.status()
        assert st0["index_entries"] == n, st0
        set_write_delay(dm, "nxgf-sd", ssd.path, 3000)
        fl0 = ssd.status()["flushes"]
        write_all(f.fd, new)
        wait_until(lambda: v.status()["segments_written"] - st0["segments_written"] >= 8,
                   timeout=120, what="the 8 direct segments committed")
        set_write_delay(dm, "nxgf-sd", ssd.path, 0)
        st = v.status()
        segs = st["segments_written"] - st0["segments_written"]
        flushes = ssd.status()["flushes"] - fl0
        assert st["writes_logged"] - st0["writes_logged"] == n, (st0, st)
        assert flushes < segs, \
            f"{flushes} SSD flushes for {segs} direct segments: one flush per segment header"
        for b in range(n):
            assert f.pread(b * BLOCK, BLOCK) == new[b], f"block {b} live"
    hdd.cut()
    ssd.cut()
    v.remove()
    hdd.power_on()
    ssd.power_on()
    v.recreate()
    with rawio.Fd(v.dev, write=False) as f:
        got = f.pread(0, n * BLOCK)
    bad = [b for b in range(n) if got[b * BLOCK:(b + 1) * BLOCK] not in (old[b], new[b])]
    assert not bad, f"{len(bad)} blocks read as neither their old nor their new data, first {bad[:8]}"


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
    assert rawio.pread_dev(hdd.path, nxdvol.hdd_data_offset(hdd.path) + W * BLOCK,
                           n * BLOCK) == data, \
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
            got = rawio.pread_dev(dev, nxdvol.hdd_data_offset(dev), len(model)) if dev \
                else f.pread(0, len(model))
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
