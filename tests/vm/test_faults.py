# SPDX-License-Identifier: GPL-2.0
"""dm-nxd under device faults and live management operations.

The HDD and the SSD of the volume are dm devices (nxdt.dmlib.Injector) whose
table is switched live between linear ('ok') and dm-flakey failing every
bio, only writes or only reads.  Every read that succeeds is compared with
a model of what the test wrote; writes that must fail are predicted from
the model (which blocks are logged), not taken from the volume.
"""
import os
import random
import signal
import struct
import subprocess
import threading
import time

import pytest

from nxdt import blkdev, dmlib, host, nxdvol, ondisk, rawio
from nxdt.facts import BLOCK, MiB, SECTOR
from nxdt.faultrig import degrade, HDD_MB, rig_setup, setup_vol, SSD_MB
from nxdt.ctl import nxdctl
from nxdt.host import run
from nxdt.models import LoggedModel
from nxdt.nxdvol import Volume
from nxdt.rawio import EIO
from nxdt.dmlib import delay_line
from nxdt.destagerig import wait_until
from nxdt.faultrig import failing_drain, reassemble_ok, repaired_and_drained, timed


# --------------------------------------------------------- SSD faults ---

# dm-flakey has error_reads from 6.6: make test runs these on such a kernel.
# The HDD label's FROZEN flag (docs/on-disk-format.md, struct nxd_hdd_label).
LABEL_FROZEN = 2

ERROR_READS = pytest.mark.needs_kernel("6.6", reason="dm-flakey error_reads")


@pytest.mark.guarantee("G11")
@pytest.mark.parametrize("mode", ["error", pytest.param("error_reads", marks=ERROR_READS)])
def test_ssd_read_errors(rig, mode):
    """Reads that need the SSD fail with EIO while it fails, never return
    other data; HDD-only reads keep working; the log survives the fault."""
    if mode == "error_reads" and not dmlib.flakey_supports("error_reads"):
        pytest.skip("dm-flakey has no error_reads on this kernel (< 6.6)")
    v, m = setup_vol(rig, "nxdsr", seed=2)
    full = sorted(b for b in m.logged)
    st0 = v.status()
    rig.ssdi.set(mode)
    eio = 0
    for b in full:
        m.read_eio(b * BLOCK, BLOCK)
        eio += 1
    # Ranges around logged blocks (a log piece and HDD pieces): EIO too.
    for b in full[:8]:
        lo = max(0, b - 3) * BLOCK
        m.read_eio(lo, 16 * BLOCK)
        eio += 1
    for b in m.free_blocks(24):
        m.read_ok(b * BLOCK, BLOCK)
    st = v.status()
    assert st["ssd_errors"] - st0["ssd_errors"] >= eio, (st0, st)
    rig.ssdi.set("ok")
    m.verify()                               # nothing was lost
    v.message("resume_destage")
    v.drain()
    st = v.status()
    assert st["index_entries"] == 0, st
    m.close()
    v.remove()
    m.verify(rig.hdd)                        # the HDD alone has it all


@pytest.mark.guarantee("G11")
def test_ssd_write_errors_degrade(rig):
    """Degraded (SSD writes failing, reads working): every write succeeds,
    also one that only partly covers a logged block (it waits until the
    destager has copied that block to the HDD); nothing more is logged;
    every read is right; the log empties by itself."""
    v, m = setup_vol(rig, "nxdsw", size=8 * MiB, seed=3, nfull=48, npart=16)
    st1 = degrade(v, m, rig)
    v.message("resume_destage")
    rng = random.Random(33)
    sizes = [512, 1024, 3584, 4096, 8192, 12288, 65536, 131072, MiB]
    ok = over = reads = 0
    for i in range(300):
        if rng.random() < 0.65:
            n = rng.choice(sizes)
            if rng.random() < 0.5 and m.logged:
                # aim at a (once) logged block
                b = rng.choice(sorted(m.logged))
                off = max(0, min(b * BLOCK + rng.choice([-512, 0, 512, 2048]) * rng.randrange(2),
                                 m.size - n))
                off -= off % SECTOR
                over += 1
            elif rng.random() < 0.5:
                off = rng.randrange((m.size - n) // BLOCK + 1) * BLOCK
            else:
                off = rng.randrange((m.size - n) // SECTOR + 1) * SECTOR
            d = rng.randbytes(n)
            e = m.f.pwrite_try(off, d)
            assert e == 0, f"degraded write {off}+{n}: errno {e}, want success"
            m.data[off:off + n] = d
            ok += 1
        else:
            n = rng.choice(sizes)
            off = rng.randrange((m.size - n) // SECTOR + 1) * SECTOR
            m.read_ok(off, n)
            reads += 1
    m.verify()
    assert over > 50 and reads > 50, (ok, over, reads)
    host.wait_for(lambda: v.status()["index_entries"] == 0, timeout=120,
                   what="the degraded log emptied by the destager")
    st = v.status()
    assert st["state"] == "degraded", st
    assert st["segments_written"] == st1["segments_written"], (st1, st)
    m.verify()
    m.verify(rig.hdd)                      # the HDD alone has it all
    rig.ssdi.set("ok")
    m.close()


@pytest.mark.guarantee("G11")
def test_degraded_reassembly_replays_the_frozen_log(rig):
    """A transient SSD write failure: degraded, the log frozen with its
    logged blocks still in it (destage paused).  Taken down and loaded
    again after the SSD recovered, the volume replays the frozen log (no
    'format', no loss), unfreezes it and logs again."""
    v, m = setup_vol(rig, "nxdfr", seed=4, nfull=24, npart=8)
    n_logged = len(m.logged)
    degrade(v, m, rig)
    for b in m.free_blocks(20):                # not logged: straight to the HDD
        m.write(b * BLOCK, BLOCK, False)
    st = v.status()
    assert st["index_entries"] == n_logged, st
    reassemble_ok(v, m, rig, logged_left=n_logged)


@pytest.mark.guarantee("G11", "G3")
def test_degraded_writes_over_logged_blocks_then_reassembly(rig):
    """Degraded, whole-block and partial writes over logged blocks all
    succeed; once the volume is reassembled after the SSD recovered, no
    older logged copy comes back over them."""
    v, m = setup_vol(rig, "nxdre", seed=5, nfull=24, npart=8)
    degrade(v, m, rig)
    v.message("resume_destage")
    rng = random.Random(55)
    for b in sorted(m.logged):
        if rng.random() < 0.5:
            m.write(b * BLOCK, BLOCK, False)                  # whole block
        else:
            off = b * BLOCK + SECTOR * rng.randrange(8)
            m.write(off, SECTOR, False)                       # one sector
    m.verify()
    reassemble_ok(v, m, rig)


@pytest.mark.guarantee("G11", "G12")
def test_degraded_volume_suspends_and_resumes(rig):
    """A degraded volume survives a suspend and resume (an LVM operation,
    an admin's reload): the SSD takes no superblock, the resume must not
    need one, and I/O goes on."""
    v, m = setup_vol(rig, "nxdsr2", seed=6, nfull=16, npart=4)
    degrade(v, m, rig)
    run(["dmsetup", "suspend", v.name])
    p = run(["dmsetup", "resume", v.name], check=False)
    assert p.returncode == 0, f"resume of a degraded volume failed: {p.stderr}"
    st = v.status()
    assert st["state"] == "degraded", st
    for b in m.free_blocks(8):
        m.write(b * BLOCK, BLOCK, False)
    m.verify()
    reassemble_ok(v, m, rig)


@pytest.mark.guarantee("G11", "G3")
def test_reload_sees_a_log_frozen_after_its_constructor(rig):
    """Table B is loaded while A is live and healthy.  Then A degrades,
    destages and takes whole-block writes over logged blocks to the HDD.
    At resume, B must read the HDD label again and replay only the frozen
    window, never A's older logged copies over the newer HDD data."""
    v, m = setup_vol(rig, "nxdrl", seed=7, nfull=32, npart=0)
    run(["dmsetup", "load", v.name], input=v.line() + "\n")    # B, inactive
    degrade(v, m, rig)
    v.message("resume_destage")
    for b in sorted(m.logged):
        m.write(b * BLOCK, BLOCK, False)
    m.unlog(list(m.logged))
    m.verify()
    marker = host.kmsg_mark("resume table B")
    p = run(["dmsetup", "resume", v.name], check=False)
    assert p.returncode == 0, p.stderr
    st = v.status()
    assert st["state"] == "degraded", st    # the SSD still fails writes
    assert host.wait_kmsg(marker, r"recovered \d+ segments"), "B did not recover"
    m.verify()
    reassemble_ok(v, m, rig)


@pytest.mark.guarantee("G11", "G3")
def test_grow_of_a_frozen_volume_keeps_the_window_in_its_label(rig):
    """Review finding 11.  A degraded volume destages its frozen log (the
    HDD label's window moves, the SSD superblock cannot) and takes
    whole-block writes over the once-logged blocks on the HDD.  The HDD
    grows, and the longer table is loaded while the SSD still fails
    writes: the grow writes the label, then its SSD superblock write
    fails, as a crash between the two would leave it.  The label must
    still say FROZEN; loaded again once the SSD works, the volume must
    replay nothing older than the label's window (an unfrozen label sent
    recovery back to the superblock's tail and its stale copies)."""
    full = blkdev.dev_sectors(rig.hdd_base)
    rig.hddi.sectors = full - 8192                # 4 MiB to grow into
    rig.hddi.set("ok")
    v, m = setup_vol(rig, "nxdgz", seed=11, nfull=32, npart=0)
    old_len = v.length
    logged = sorted(m.logged)
    degrade(v, m, rig)
    v.message("resume_destage")
    host.wait_for(lambda: v.status()["index_entries"] == 0, timeout=120,
                   what="the frozen log destaged")

    def label_flags():
        blk = rawio.pread_dev(rig.hdd, nxdvol.hdd_label_offset(rig.hdd), BLOCK)
        return int.from_bytes(blk[56:60], "little")

    assert label_flags() & LABEL_FROZEN, "degraded, but the HDD label is not FROZEN"
    for b in logged:                               # degraded: to the HDD
        m.write(b * BLOCK, BLOCK, False)
    m.unlog(logged)
    m.verify()
    m.close()
    v.remove()
    rig.hddi.sectors = full
    rig.hddi.set("ok")
    v.length = nxdvol.data_sectors(full)
    assert v.length > old_len, (v.length, old_len)
    marker = host.kmsg_mark("grow with the SSD failing writes")
    with pytest.raises(dmlib.DMError):
        v.create()
    rig.dm.remove(v.name, missing_ok=True)
    assert host.wait_kmsg(marker, r"grow: cannot write the SSD superblock"), \
        "no kernel message about the failed grow"
    assert label_flags() & LABEL_FROZEN, \
        "the grow rewrote the HDD label without its FROZEN window"
    rig.ssdi.set("ok")
    marker = host.kmsg_mark("grow with the SSD working")
    v.create()
    assert host.wait_kmsg(marker, r"grew volume"), "the volume did not grow"
    assert host.wait_kmsg(marker, r"SSD log unfrozen after an SSD failure"), "label not unfrozen"
    n = nxdvol.recovered_entries(marker)
    assert n == 0, f"{n} logged copies replayed from before the label's window"
    st = v.status()
    assert st["state"] == "ok" and st["degraded"] == 0, st
    assert blkdev.dev_sectors(v.dev) == v.length
    m.reopen()
    m.verify()
    assert not label_flags() & LABEL_FROZEN, "the label stayed FROZEN"


def _write_inflight(dev):
    """Writes in flight in the block device @dev (its sysfs inflight)."""
    with open(f"/sys/block/{blkdev.blk_name(dev)}/inflight") as f:
        return int(f.read().split()[1])


@pytest.mark.guarantee("G11", "G1")
def test_failed_round_fails_only_writes_waiting_for_destage(dm, loopdev, nullb):
    """Review finding 4.  Logged blocks B (the oldest segments) and A
    (a later one), fsync'd.  A discard over A is in flight on a slow HDD
    (dm-delay, 4 s writes); a 512 B write into A waits in the writer for
    it (held, not for the destager).  Then the SSD fails every I/O to B's
    segments only (dm-error in its table) and a drain starts a round,
    which fails reading them.  The held write must not fail with that
    round: once the discard lands it is logged and succeeds (a failed
    round once failed every held bio with EIO).  After the SSD healed,
    the drain ends and every block reads as written."""
    host.modprobe("dm-delay")
    hdd_base = loopdev(64)
    hdd = dm.create("nxdh4-hdd", delay_line(hdd_base, 0, 0))
    ssd_base = nullb(16)
    n_ssd = blkdev.dev_sectors(ssd_base)
    ssd = dm.create("nxdh4-ssd", f"0 {n_ssd} linear {ssd_base} 0")
    v = Volume(dm, "nxdh4", hdd, ssd)
    v.pause()
    m = LoggedModel(v, 4 * MiB, 44)
    m.base()
    blocks = m.free_blocks(9)
    a, bs = blocks[0], blocks[1:]
    m.log_blocks(bs)
    m.f.fsync()
    m.log_blocks([a])
    m.f.fsync()
    sb = ondisk.newest_sb(ssd)[1]
    segs = ondisk.walk_log(ssd, sb)
    first_a = min(i for i, sg in enumerate(segs) if any(b == a for b, _ in ondisk.data_recs(sg)))
    assert first_a > 0 and all(a not in [b for b, _ in ondisk.data_recs(sg)]
                               for sg in segs[:first_a]), segs
    # SSD sectors of B's segments: from the ring's start to A's first.
    s0 = sb["ring_start"] * BLOCK // SECTOR
    s1 = segs[first_a]["ssd_off"] // SECTOR
    assert s0 < s1, (s0, s1)
    dm.suspend("nxdh4-hdd")
    dm.load("nxdh4-hdd", delay_line(hdd_base, 0, 4000))
    dm.resume("nxdh4-hdd")
    res = {}

    def discard():
        with rawio.Fd(v.dev) as f:
            try:
                rawio.discard(f.fd, a * BLOCK, BLOCK)
                res["discard"] = 0
            except OSError as e:
                res["discard"] = e.errno

    new = m.rng.randbytes(SECTOR)

    def partial():
        with rawio.Fd(v.dev) as f:
            res["write"] = f.pwrite_try(a * BLOCK + 3 * SECTOR, new)

    td = threading.Thread(target=discard)
    td.start()
    host.wait_for(lambda: _write_inflight(v.dev) >= 1, timeout=10, interval=0.01,
                   what="the discard inside the volume")
    with nxdvol.module_param("direct_partial", "N"):
        tw = threading.Thread(target=partial)
        tw.start()
        host.wait_for(lambda: _write_inflight(v.dev) >= 2, timeout=10, interval=0.01,
                       what="the partial write inside the volume")
    dm.suspend("nxdh4-ssd")
    dm.load("nxdh4-ssd", [f"0 {s0} linear {ssd_base} 0",
                          f"{s0} {s1 - s0} error",
                          f"{s1} {n_ssd - s1} linear {ssd_base} {s1}"])
    dm.resume("nxdh4-ssd")
    assert td.is_alive() and tw.is_alive(), ("the discard should still be on the slow HDD", res)
    marker = host.kmsg_mark("round fails while a write is held")
    drain = subprocess.Popen(["dmsetup", "message", v.name, "0", "drain"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert host.wait_kmsg(marker, r"destage failed", timeout=30), "no destage round failed"
        td.join(60)
        tw.join(60)
        assert not td.is_alive() and not tw.is_alive(), ("the discard or the write hangs", res)
        assert res == {"discard": 0, "write": 0}, \
            f"errnos {res}: a failed round failed a write that waited only for a discard"
        st = v.status()
        assert st["state"] == "ok", st
    except BaseException:
        drain.send_signal(signal.SIGINT)      # the fixture's teardown can remove it
        drain.communicate(timeout=60)
        raise
    dm.suspend("nxdh4-ssd")
    dm.load("nxdh4-ssd", f"0 {n_ssd} linear {ssd_base} 0")
    dm.resume("nxdh4-ssd")
    dm.suspend("nxdh4-hdd")
    dm.load("nxdh4-hdd", delay_line(hdd_base, 0, 0))
    dm.resume("nxdh4-hdd")
    out, err = drain.communicate(timeout=180)
    assert drain.returncode == 0, f"the drain after the SSD healed: {err}"
    got = rawio.pread_dev(v.dev, a * BLOCK, BLOCK)
    old = bytes(m.data[a * BLOCK:(a + 1) * BLOCK])
    assert got[3 * SECTOR:4 * SECTOR] == new, "the held write is not on the volume"
    for i in (0, 1, 2, 4, 5, 6, 7):
        sec = got[i * SECTOR:(i + 1) * SECTOR]
        # Discarded: zeros, or the HDD's older content (design.md, Limitations).
        assert sec in (bytes(SECTOR), old[i * SECTOR:(i + 1) * SECTOR]), f"sector {i} of A"
    m.data[a * BLOCK:(a + 1) * BLOCK] = got
    m.verify()
    m.close()
    v.remove()
    m.verify(hdd)                      # drained: the HDD alone has it all


@pytest.mark.guarantee("G11", "G8")
def test_degraded_drain_copies_the_log_to_the_hdd(rig):
    """Degraded (SSD writes failing, reads working): a drain copies every
    logged block to the HDD, the HDD label records the new tail, and the
    HDD alone then holds the volume's data; reassembly replays nothing."""
    v, m = setup_vol(rig, "nxddd", seed=9, nfull=40, npart=8)
    degrade(v, m, rig)
    v.drain()
    st = v.status()
    assert st["state"] == "degraded" and st["index_entries"] == 0, st
    assert st["destaged_blocks"] >= 48, st
    m.verify(hdd=rig.hdd)                       # the HDD alone
    reassemble_ok(v, m, rig, logged_left=0)


@pytest.mark.guarantee("G11")
@ERROR_READS
def test_rmw_read_error_fails_only_that_write(rig):
    """A partial write over a logged block whose SSD copy cannot be read
    fails with EIO; the volume does not degrade, the logged copy stays
    the newest data, and other writes go on."""
    if not dmlib.flakey_supports("error_reads"):
        pytest.skip("dm-flakey has no error_reads on this kernel (< 6.6)")
    v, m = setup_vol(rig, "nxdrm", seed=8, nfull=16, npart=0)
    b = sorted(m.logged)[0]
    rig.ssdi.set("error_reads")
    e = m.f.pwrite_try(b * BLOCK + SECTOR, bytes([0xAB]) * SECTOR)
    assert e == EIO, f"partial write over an unreadable logged block: errno {e}"
    st = v.status()
    assert st["state"] == "ok" and st["degraded"] == 0, st
    for c in m.free_blocks(4):                  # whole blocks: logged, no read
        m.write(c * BLOCK, BLOCK, True)
    rig.ssdi.set("ok")
    m.verify()                                  # block b as before the failed write
    assert v.status()["state"] == "ok"


@pytest.mark.guarantee("G8")
@pytest.mark.parametrize("kind", ["partial", "whole"])
def test_lost_log_segment_is_destaged_from_the_index(rig, kind):
    """The SSD loses a committed segment's header (zeroed behind the
    volume's back).  The destager says so and destages that segment's
    blocks from the in-memory index: the log drains, the volume never
    degrades.  partial: 1-sector writes, in the writer's segments, whose
    data checksums vouch for the intact data blocks: every block reads
    back right, also from the HDD alone.  whole: 4 KiB writes, in a direct
    (ORDERED) segment, whose data nothing vouches for once its header is
    gone (a replay would stop there too): its blocks are not copied and
    read the HDD's older data; every other block reads back right."""
    nfull, npart = (0, 32) if kind == "partial" else (32, 0)
    v, m = setup_vol(rig, "nxdls", seed=12, nfull=nfull, npart=npart)
    first_hdr = 8 * 4096                      # NXD_RING_START: ring slot 0
    hdr = rawio.pread_dev(rig.ssd_base, first_hdr, BLOCK)
    seg = ondisk.parse_seg(hdr)
    assert seg, "ring slot 0 holds no segment header"
    assert seg["flags"] == (1 if kind == "whole" else 0), seg["flags"]
    lost = [b for b, _ in ondisk.data_recs(seg)] if kind == "whole" else []
    for b in lost:                            # what the HDD had before
        m.data[b * BLOCK:(b + 1) * BLOCK] = rawio.pread_dev(
            rig.hdd, nxdvol.hdd_data_offset(rig.hdd) + b * BLOCK, BLOCK)
    rawio.pwrite_dev(rig.ssd_base, first_hdr, bytes(BLOCK))
    marker = host.kmsg_mark("lost segment")
    v.drain()
    assert host.wait_kmsg(marker, r"log segment \d+ at 0 unreadable .*use index"), \
        "no message naming the segment"
    if lost:
        assert host.wait_kmsg(marker, r"logged block \d+ .*has no header to vouch for it"), \
            "no message naming a lost block"
    st = v.status()
    assert st["state"] == "ok" and st["index_entries"] == 0, st
    m.verify()
    m.verify(hdd=rig.hdd)


# --------------------------------------------------------- HDD faults ---

@pytest.mark.guarantee("G11")
@pytest.mark.parametrize("mode", ["error", "error_writes"])
def test_hdd_errors_reach_the_caller(rig, mode):
    """With the HDD failing, reads from the log still work, HDD reads and large
    writes fail with EIO (logged copies under them kept), small writes go to
    the log, hdd_errors counts; after the repair a drain leaves the HDD
    alone correct."""
    v, m = setup_vol(rig, "nxdhe", seed=5, nfull=32, npart=8)
    st0 = v.status()
    whole = sorted(m.logged - m.partial)
    partial = sorted(m.partial)
    assert len(whole) == 32 and len(partial) == 8
    rig.hddi.set(mode)
    reads_fail = mode == "error"
    hdd_eio = 0
    hdd_only = m.free_blocks(16)
    # Reads.
    for b in hdd_only[:8]:
        if reads_fail:
            m.read_eio(b * BLOCK, BLOCK)
            hdd_eio += 1
        else:
            m.read_ok(b * BLOCK, BLOCK)
    for b in whole[:12]:
        m.read_ok(b * BLOCK, BLOCK)            # from the log
    for b in partial[:4]:
        if reads_fail:       # part log, part HDD (counted as an SSD error)
            m.read_eio(b * BLOCK, BLOCK)
        else:
            m.read_ok(b * BLOCK, BLOCK)
    # Large writes go to the HDD: EIO, data unchanged, logged copies kept.
    for b in hdd_only[8:12]:
        off = (b * BLOCK) // (128 * 1024) * (128 * 1024)
        if any(x in m.logged for x in range(off // BLOCK, off // BLOCK + 32)):
            continue
        e = m.f.pwrite_try(off, m.rng.randbytes(128 * 1024))
        assert e == EIO, f"128K write to the failing HDD: errno {e}"
        hdd_eio += 1
    # One over logged blocks is cut: the part over them is logged (the log
    # owns those blocks), the rest fails on the HDD; the write gets EIO.
    b = whole[0]
    off = (b * BLOCK) // (128 * 1024) * (128 * 1024)
    new = m.rng.randbytes(128 * 1024)
    e = m.f.pwrite_try(off, new)
    assert e == EIO, f"128K write over logged blocks to the failing HDD: errno {e}"
    hdd_eio += 1
    for x in range(off // BLOCK, off // BLOCK + 32):
        if x in m.logged:
            i = x * BLOCK - off
            m.data[x * BLOCK:(x + 1) * BLOCK] = new[i:i + BLOCK]
            m.partial.discard(x)
    m.read_ok(b * BLOCK, BLOCK)
    # Small writes only need the SSD.
    for b in m.free_blocks(8, exclude=hdd_only):
        m.write(b * BLOCK, BLOCK, True)
        m.read_ok(b * BLOCK, BLOCK)
    st = v.status()
    assert st["hdd_errors"] - st0["hdd_errors"] >= hdd_eio, (st0, st, hdd_eio)
    rig.hddi.set("ok")
    m.verify()
    v.message("resume_destage")
    v.drain()
    m.close()
    v.remove()
    m.verify(rig.hdd)


@pytest.mark.guarantee("G8", "G11")
def test_destage_errors_keep_the_log(rig):
    """The HDD refuses writes while a drain destages: the log keeps the only
    copy (nothing reclaimed, reads right), the drain waits, and completes
    once the HDD is back; then the HDD alone holds the data."""
    v, m = setup_vol(rig, "nxdde", seed=6, nfull=200, npart=16)
    st0 = v.status()
    p = failing_drain(v, rig, host.kmsg_mark("destage errors"))
    try:
        time.sleep(3)                       # a few more failed rounds
        assert p.poll() is None, f"drain returned while the HDD fails: {p.communicate()}"
        st = v.status()
        for k in ("index_entries", "log_used_blocks", "segments_reclaimed", "destaged_blocks"):
            assert st[k] == st0[k], (k, st0, st)
        m.verify()
        rig.hddi.set("ok")
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    st = v.status()
    assert st["index_entries"] == 0 and st["log_used_blocks"] == 0, st
    assert st["destaged_blocks"] >= len(m.logged), st
    m.verify()
    m.close()
    v.remove()
    m.verify(rig.hdd)


@pytest.mark.guarantee("G8")
def test_destage_error_backoff_while_draining(rig):
    """After a failed destage round the destager backs off (1 s, see
    destage_throttled_ms in docs/status.md) instead of re-reading the log
    in a loop, also while a drain is waiting."""
    v, m = setup_vol(rig, "nxdbo", seed=8, nfull=200, npart=0)
    used = v.status()["log_used_blocks"] * BLOCK
    p = failing_drain(v, rig, host.kmsg_mark("destage back-off"))
    try:
        r0, t0 = blkdev.io_sectors(rig.ssd)[0], time.monotonic()
        time.sleep(4)
        reread = (blkdev.io_sectors(rig.ssd)[0] - r0) * SECTOR
        secs = time.monotonic() - t0
        assert p.poll() is None
        # A round reads at most the whole log; one per second, plus slack.
        assert reread <= (secs + 2) * used, (
            f"destager re-read {reread >> 20} MiB of a {used >> 10} KiB log in {secs:.1f} s "
            f"with the HDD failing: no back-off between failed rounds")
        rig.hddi.set("ok")
        p.communicate(timeout=300)
        assert p.returncode == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    m.verify()


@pytest.mark.guarantee("G8", "G12")
def test_drain_interrupted_then_reassembled(rig):
    """A drain stuck on a failing HDD is interruptible; the volume can be
    removed while the HDD still fails, and assembled again once it works,
    with nothing lost."""
    v, m = setup_vol(rig, "nxddi", seed=7, nfull=64, npart=8)
    rig.hddi.set("error_writes")
    marker = host.kmsg_mark("drain interrupted")
    p = subprocess.Popen(["dmsetup", "message", v.name, "0", "drain"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert host.wait_kmsg(marker, r"destage failed", timeout=60)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate(timeout=30)
        pytest.fail("drain did not stop on SIGINT within 15 s (needed SIGKILL)")
    assert p.returncode != 0, "interrupted drain reported success"
    assert time.monotonic() - t0 < 15
    m.verify()
    m.close()
    t0 = time.monotonic()
    v.remove()                       # the HDD still refuses writes
    assert time.monotonic() - t0 < 120
    repaired_and_drained(rig, v, m)


@pytest.mark.guarantee("G12")
def test_remove_during_stuck_drain(rig):
    """`dmsetup remove` while a drain waits on a failing HDD: the drain
    returns (the device is going away), the removal completes, nothing
    hangs; assembled again with the HDD repaired, nothing is lost."""
    v, m = setup_vol(rig, "nxdrd", seed=9, nfull=64, npart=8)
    m.close()
    p = failing_drain(v, rig, host.kmsg_mark("remove during drain"))
    try:
        t0 = time.monotonic()
        r = run(["dmsetup", "remove", v.name], check=False, timeout=300)
        assert r.returncode == 0, r.stderr
        v.dm.created.remove(v.name)
        p.communicate(timeout=60)
        assert p.returncode != 0, "drain reported success without emptying the log"
        assert time.monotonic() - t0 < 120
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    repaired_and_drained(rig, v, m)


@pytest.mark.guarantee("G12", "G1")
def test_live_operations_under_fio(dm, loopdev, nullb):
    """fio writes with crc32c verify while the volume is suspended and
    resumed, reloaded with other thresholds and modes, tuned through sysfs,
    and while `dmsetup remove` and `rmmod dm_nxd` are tried: those fail
    (busy, in use) without hanging, and fio never reads back wrong data."""
    hdd, ssd = loopdev(128), nullb(SSD_MB)
    v = Volume(dm, "nxdlive", hdd, ssd)
    holder = os.open(v.dev, os.O_RDONLY)       # open count > 0 throughout
    stop = threading.Event()
    results = []

    def fio_loop():
        n = 0
        while not stop.is_set() or n == 0:
            n += 1
            p = subprocess.run(
                ["fio", "--name=live", f"--filename={v.dev}", "--ioengine=libaio",
                 "--iodepth=8", "--direct=1", "--rw=randwrite",
                 "--bssplit=4k/40:8k/10:64k/10:128k/20:1m/20", "--size=32m",
                 f"--offset={(n % 2) * 32}m", "--verify=crc32c", "--verify_backlog=64",
                 "--verify_fatal=1", f"--randseed={1000 + n}", "--output-format=terse"],
                capture_output=True, text=True, timeout=1800)
            results.append((n, p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
            if p.returncode:
                return

    t = threading.Thread(target=fio_loop)
    t.start()
    counts = {"suspend": 0, "reload": 0, "remove": 0, "rmmod": 0, "sysfs": 0}
    thresholds = [4096, MiB, 0, 131072, 65536]
    modes = ["auto", "log_all", "auto", "passthrough", "auto"]
    try:
        time.sleep(3)
        for i in range(20):
            if results and results[-1][1]:
                break
            op = i % 5
            if op == 0:
                p, dt = timed(["dmsetup", "suspend", v.name])
                assert p.returncode == 0, p.stderr
                assert v.status()["state"] == "suspended"
                p, dt2 = timed(["dmsetup", "resume", v.name])
                assert p.returncode == 0, p.stderr
                counts["suspend"] += 1
            elif op == 1:
                k = counts["reload"] % len(thresholds)
                line = nxdvol.table_with(v.table(), write_threshold=thresholds[k], mode=modes[k])
                p, dt = timed(["dmsetup", "load", v.name], input=line + "\n")
                assert p.returncode == 0, p.stderr
                p, dt = timed(["dmsetup", "suspend", v.name])
                assert p.returncode == 0, p.stderr
                p, dt = timed(["dmsetup", "resume", v.name])
                assert p.returncode == 0, p.stderr
                opts = nxdvol.table_opts(v.table())
                assert opts["write_threshold"] == str(thresholds[k]), opts
                assert opts["mode"] == modes[k] and v.sget("mode") == modes[k]
                assert v.status()["state"] == "ok"
                counts["reload"] += 1
            elif op == 2:
                p, dt = timed(["dmsetup", "remove", v.name], timeout=120)
                assert p.returncode != 0, "dmsetup remove of a busy volume succeeded"
                assert "busy" in p.stderr.lower(), p.stderr
                assert dm.exists(v.name)
                counts["remove"] += 1
            elif op == 3:
                p, dt = timed(["rmmod", "dm_nxd"], timeout=120)
                assert p.returncode != 0, "rmmod dm_nxd succeeded with a volume"
                assert host.module_loaded("dm_nxd")
                counts["rmmod"] += 1
            else:
                assert v.sset("write_threshold", random.choice(["8K", "256K", "1M"])) == 0
                v.message("pause_destage")
                time.sleep(0.5)
                v.message("resume_destage")
                counts["sysfs"] += 1
            time.sleep(0.5)
    finally:
        stop.set()
        t.join(timeout=1800)
        os.close(holder)
    assert not t.is_alive(), "fio did not finish"
    bad = [r for r in results if r[1]]
    assert not bad, f"fio failed: {bad[0]}"
    assert all(c >= 3 for c in counts.values()), counts
    assert v.status()["state"] == "ok"
    # After all that, a last pass that verifies the whole area once more.
    p = subprocess.run(
        ["fio", "--name=final", f"--filename={v.dev}", "--ioengine=libaio", "--iodepth=8",
         "--direct=1", "--rw=randwrite", "--bs=64k", "--size=64m", "--verify=crc32c",
         "--verify_fatal=1", "--randseed=7", "--output-format=terse"],
        capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-2000:]
    v.drain()
    v.remove()


@pytest.mark.guarantee("G12")
def test_rmmod_refused_while_volume_exists(dm, loopdev, nullb):
    """rmmod dm_nxd is refused while a volume exists, live or suspended."""
    v = Volume(dm, "nxdrmmod", loopdev(HDD_MB), nullb(SSD_MB))
    p = run(["rmmod", "dm_nxd"], check=False, timeout=60)
    assert p.returncode != 0 and host.module_loaded("dm_nxd"), p.stderr
    v.dm.suspend(v.name)
    p = run(["rmmod", "dm_nxd"], check=False, timeout=60)
    assert p.returncode != 0 and host.module_loaded("dm_nxd"), p.stderr
    v.dm.resume(v.name)
    assert v.status()["state"] == "ok"


# ------------------------------------------- a dead SSD, given up online ---

def _label(hdd):
    """The HDD label's bytes (docs/on-disk-format.md, section 5)."""
    return rawio.pread_dev(hdd, nxdvol.hdd_label_offset(hdd), BLOCK)


def _label_lost(blk):
    """flags, abandoned_gen, lost_blocks, lost_ranges and the listed
    ranges (4 KiB blocks) of a label."""
    assert struct.unpack_from("<Q", blk, 0)[0] == ondisk.LABEL_MAGIC
    flags, = struct.unpack_from("<I", blk, 56)
    gen, = struct.unpack_from("<Q", blk, 64)
    lost, ranges, listed = struct.unpack_from("<QII", blk, 160)
    rr = [struct.unpack_from("<QQ", blk, 176 + 16 * i) for i in range(listed)]
    return flags, gen, lost, ranges, rr


def _runs(blocks):
    out = []
    for b in sorted(blocks):
        if out and out[-1][0] + out[-1][1] == b:
            out[-1][1] += 1
        else:
            out.append([b, 1])
    return [tuple(r) for r in out]


@pytest.mark.guarantee("G11")
def test_dead_ssd_log_given_up_online(rig):
    """The SSD fails every bio (reads too) with logged blocks in its log:
    `nxdctl detach --accept-log-loss` refuses without --yes and changes
    nothing; with --yes it completes online while a whole-block O_DIRECT
    write over a logged block waits (parked) on the open volume: that
    write completes, the sectors reported lost are exactly the model's
    logged blocks but that one, the HDD label is ABANDONED with the same
    count and ranges, every block reads back as the model says (the lost
    ones with the data they had before they were logged), the volume is
    linear, and the old SSD is refused later without accept_log_loss and
    replays nothing with it."""
    v = Volume(rig.dm, "nxdgone", rig.hdd, rig.ssd)
    v.pause()
    m = LoggedModel(v, 4 * MiB, 21)
    rig.models.append(m)
    m.base()
    before = bytes(m.data)              # what the HDD holds under the log
    m.log_blocks(m.free_blocks(24))
    with nxdvol.module_param("direct_partial", "N"):
        m.log_sectors(m.free_blocks(6))
    m.f.fsync()
    assert v.status()["index_entries"] == len(m.logged)
    rig.ssdi.set("error")               # dead: reads fail too
    marker = host.kmsg_mark("dead ssd")
    b = m.free_blocks(1)[0]
    m.write(b * BLOCK, BLOCK, False)    # degrades, goes to the HDD
    assert host.wait_kmsg(marker, r"SSD log frozen at segment \d+"), "log not frozen"
    st = v.status()
    assert st["state"] == "degraded" and st["index_entries"] == len(m.logged), st
    lab0 = _label(rig.hdd)

    # Without --yes: the ranges are shown, nothing changes.
    p = nxdctl("detach", v.name, "--accept-log-loss", check=False)
    assert p.returncode == 1 and "--yes" in p.stderr, (p.returncode, p.stderr)
    assert "at risk" in p.stdout, p.stdout
    assert _label(rig.hdd) == lab0
    assert v.status()["index_entries"] == len(m.logged)

    # A whole-block write over a logged block: on the HDD, then parked.
    over = sorted(m.logged - m.partial)[0]
    new = random.Random(3).randbytes(BLOCK)
    res = {}

    def writer():
        f = rawio.Fd(v.dev)
        try:
            res["e"] = f.pwrite_try(over * BLOCK, new)
        finally:
            f.close()
    t = threading.Thread(target=writer)
    t.start()
    doff = nxdvol.hdd_data_offset(rig.hdd)
    wait_until(lambda: rawio.pread_dev(rig.hdd, doff + over * BLOCK, BLOCK) == new,
               timeout=30, what="the parked write on the HDD")
    assert t.is_alive(), "a write over a logged block completed before the log went"

    p = nxdctl("detach", v.name, "--accept-log-loss", "--yes", "--timeout", 60,
               check=False)
    assert p.returncode == 0, (p.stdout, p.stderr)
    t.join(timeout=30)
    assert not t.is_alive() and res.get("e") == 0, res
    m.data[over * BLOCK:(over + 1) * BLOCK] = new
    m.unlog([over])

    lost = set(m.logged)
    reported = set()
    for line in p.stdout.splitlines():
        if line.startswith("  lost sectors "):
            s, n = map(int, line.split()[2].split("+"))
            assert s % 8 == 0 and n % 8 == 0, line
            reported.update(range(s // 8, (s + n) // 8))
    assert reported == lost, (sorted(reported ^ lost), p.stdout)
    assert f"gave up {len(lost) * 8} sectors" in p.stdout, p.stdout
    assert run(["dmsetup", "table", v.name]).stdout.split()[2] == "linear"

    flags, _, nlost, nranges, rr = _label_lost(_label(rig.hdd))
    assert flags & 1, f"label flags {flags:#x}: not ABANDONED"
    assert nlost == len(lost) and rr == _runs(lost) and nranges == len(rr), \
        (nlost, nranges, rr)

    # The lost blocks read back what the HDD had: their data before the log.
    for blk in lost:
        m.data[blk * BLOCK:(blk + 1) * BLOCK] = before[blk * BLOCK:(blk + 1) * BLOCK]
    m.unlog(list(lost))
    m.verify()
    for blk in m.free_blocks(4):        # online: writes go on
        m.write(blk * BLOCK, BLOCK, False)
    m.verify()
    m.close()
    run(["dmsetup", "remove", "--retry", v.name])      # udev may hold it a moment

    # The old SSD back: refused without accept_log_loss, nothing replayed with it.
    rig.ssdi.set("ok")
    marker = host.kmsg_mark("old ssd")
    p = run(["dmsetup", "create", v.name], input=v.line() + "\n", check=False)
    assert p.returncode != 0 and not rig.dm.exists(v.name), p.stderr
    assert host.wait_kmsg(marker, r"SSD log abandoned"), "no reason in the kernel log"
    v.recreate(["accept_log_loss"])
    m.reopen()
    st = v.status()
    assert st["index_entries"] == 0 and st["state"] == "ok", st
    m.verify()
    m.close()
    v.remove()


def _file_blocks(path):
    """The volume's 4 KiB blocks under file @path, in file order (FIEMAP
    through xfs_io; the file system block is 4 KiB)."""
    out = run(["xfs_io", "-r", "-c", "fiemap", path]).stdout
    blocks = []
    for line in out.splitlines()[1:]:
        f = line.split()
        if len(f) >= 3 and f[2] != "hole":
            a, b = (int(x) for x in f[2].strip(".").split(".."))
            blocks += range(a // 8, (b + 1) // 8)
    return blocks


@pytest.fixture
def xfs_rig(dm, loopdev, nullb):
    """The rig with an HDD XFS accepts (mkfs.xfs wants over 300 MB)."""
    yield from rig_setup(dm, loopdev, nullb, hdd_mb=400)


@pytest.mark.guarantee("G11", "G14")
def test_dead_ssd_given_up_under_mounted_xfs(xfs_rig):
    """With XFS mounted and a dead SSD, `nxdctl detach --accept-log-loss
    --yes` completes online and reports lost exactly the logged overwrites
    of one file (XFS's metadata drained to the HDD before): new files
    written and fsynced afterwards read back, xfs_repair -n finds the file
    system clean after unmount, and each overwritten block reads back as
    its old content (lost) or, for the one rewritten after the SSD died,
    as the new one."""
    mnt = "/tmp/nxd-deadxfs-mnt"         # / is read-only in the guest
    # No periodic XFS log force in the test's window: only the file's
    # overwrites are in the log when the SSD dies.
    syncd = "/proc/sys/fs/xfs/xfssyncd_centisecs"
    host.modprobe("xfs")                # the sysctl exists once xfs is loaded
    with open(syncd) as f:
        saved = f.read().strip()
    v = Volume(xfs_rig.dm, "nxdgonexfs", xfs_rig.hdd, xfs_rig.ssd)
    run(["mkfs.xfs", "-q", "-f", v.dev])
    os.makedirs(mnt, exist_ok=True)
    run(["mount", v.dev, mnt])
    try:
        with open(syncd, "w") as f:
            f.write("720000")
        rng = random.Random(11)
        path = f"{mnt}/victim"
        old = rng.randbytes(64 * BLOCK)
        with open(path, "wb") as f:
            f.write(old)
            f.flush()
            os.fsync(f.fileno())
        run(["sync"])
        v.message("drain")
        v.pause()
        blocks = _file_blocks(path)
        assert len(blocks) == 64, blocks
        over = {i: rng.randbytes(BLOCK) for i in range(0, 64, 4)}
        with rawio.Fd(path) as f:
            for i, d in over.items():
                f.pwrite(i * BLOCK, d)
            os.fdatasync(f.fd)
        logged = {blocks[i] for i in over}
        st = v.status()
        assert st["index_entries"] == len(logged), st

        xfs_rig.ssdi.set("error")               # dead: reads fail too
        marker = host.kmsg_mark("dead ssd under xfs")
        late = rng.randbytes(BLOCK)
        res = {}

        def rewrite():                      # over a logged block: waits
            with rawio.Fd(path) as f:
                res["e"] = f.pwrite_try(0, late)
                os.fdatasync(f.fd)
        t = threading.Thread(target=rewrite)
        t.start()
        assert host.wait_kmsg(marker, r"SSD log frozen at segment \d+"), "log not frozen"
        assert t.is_alive(), "a write over a logged block completed before the log went"

        p = nxdctl("detach", v.name, "--accept-log-loss", "--yes", "--timeout", 120,
                   check=False)
        assert p.returncode == 0, (p.stdout, p.stderr)
        t.join(timeout=60)
        assert not t.is_alive() and res.get("e") == 0, res
        assert os.path.ismount(mnt)
        assert run(["dmsetup", "table", v.name]).stdout.split()[2] == "linear"
        reported = set()
        for line in p.stdout.splitlines():
            if line.startswith("  lost sectors "):
                s, n = map(int, line.split()[2].split("+"))
                reported.update(range(s // 8, (s + n) // 8))
        assert reported == logged - {blocks[0]}, (sorted(reported), sorted(logged))

        # Online: new files, fsynced, read back.
        new = {f"{mnt}/after{i}": rng.randbytes(37 * 1024 + i) for i in range(20)}
        for fp, d in new.items():
            with open(fp, "wb") as f:
                f.write(d)
                f.flush()
                os.fsync(f.fileno())
        for fp, d in new.items():
            with open(fp, "rb") as f:
                assert f.read() == d, fp
    finally:
        with open(syncd, "w") as f:
            f.write(saved)
        run(["umount", mnt], check=False)
    run(["xfs_repair", "-n", v.dev])
    run(["mount", v.dev, mnt])
    try:
        with open(path, "rb") as f:
            got = f.read()
        for i in range(64):
            blk = got[i * BLOCK:(i + 1) * BLOCK]
            if i == 0:
                assert blk == late, "block 0, rewritten after the SSD died"
            elif blocks[i] in reported:
                assert blk == old[i * BLOCK:(i + 1) * BLOCK], f"lost block {i}: not its old data"
            else:
                assert blk == over.get(i, old[i * BLOCK:(i + 1) * BLOCK]), f"block {i}"
        for fp, d in new.items():
            with open(fp, "rb") as f:
                assert f.read() == d, fp
    finally:
        run(["umount", mnt])
    v.remove()


@pytest.mark.guarantee("G11")
def test_degraded_replace_ssd_with_a_readable_log(rig, nullb):
    """The SSD fails writes but still reads: `nxdctl replace-ssd` of the
    degraded volume waits for the frozen log to reach the HDD, switches to
    the new SSD (nxd, healthy, logging), and every block reads back as the
    model says, through the open descriptor."""
    v, m = setup_vol(rig, "nxdrep", seed=22, nfull=24, npart=6)
    degrade(v, m, rig)
    v.message("resume_destage")
    new = nullb(SSD_MB)
    p = nxdctl("replace-ssd", v.name, new, "--timeout", 120, check=False)
    assert p.returncode == 0, (p.stdout, p.stderr)
    words = run(["dmsetup", "table", v.name]).stdout.split()
    rdev = os.stat(new).st_rdev
    assert words[2] == "nxd" and words[4] == f"{os.major(rdev)}:{os.minor(rdev)}", words
    st = v.status()
    assert st["state"] == "ok" and st["degraded"] == 0, st
    m.unlog(list(m.logged))
    m.verify()
    b = m.free_blocks(1)[0]
    m.write(b * BLOCK, BLOCK, True)
    m.verify()
    m.close()


@pytest.mark.guarantee("G11")
def test_abandon_log_refused_on_a_healthy_volume(rig):
    """abandon_log on a healthy volume (and nxdctl detach
    --accept-log-loss) is refused with a reason and changes nothing: the
    label bytes, the logged blocks and every block as the model says."""
    v, m = setup_vol(rig, "nxdab", seed=23, nfull=16, npart=4)
    lab0 = _label(rig.hdd)
    marker = host.kmsg_mark("abandon healthy")
    p = run(["dmsetup", "message", v.name, "0", "abandon_log"], check=False)
    assert p.returncode != 0, p
    assert host.wait_kmsg(marker, r"abandon_log refused: the SSD has not failed")
    p = nxdctl("detach", v.name, "--accept-log-loss", "--yes", check=False)
    assert p.returncode == 1 and "not degraded" in p.stderr, p.stderr
    assert _label(rig.hdd) == lab0
    st = v.status()
    assert st["state"] == "ok" and st["index_entries"] == len(m.logged), st
    assert run(["dmsetup", "table", v.name]).stdout.split()[2] == "nxd"
    m.verify()
