# SPDX-License-Identifier: GPL-2.0
"""Write-path rigs for test_writepath.py: a volume over a delayed HDD,
slowing a device down, the log's segments, the HDD's pattern, a direct
write after a partial one in an open batch."""
import time

from nxdt import blkdev, host, nxdvol, ondisk, rawio
from nxdt.dmlib import delay_line
from nxdt.facts import BLOCK
from nxdt.nxdvol import Volume
from nxdt.workloads import BgWrites, pattern


def delayed_vol(dm, loopdev, nullb, name, slow="ssd", opts=None):
    """A paused volume with one device behind dm-delay (no delay yet).
    Returns (vol, the delay device's name, its backing device)."""
    host.modprobe("dm-delay")
    hdd, ssd = loopdev(64), nullb(16)
    base = ssd if slow == "ssd" else hdd
    dev = dm.create(f"{name}-{slow}", delay_line(base, 0, 0))
    if slow == "ssd":
        ssd = dev
    else:
        hdd = dev
    v = Volume(dm, name, hdd, ssd, opts=opts)
    v.pause()
    return v, f"{name}-{slow}", base


def set_write_delay(dm, slow, base, write_ms):
    """Delay the writes of dm-delay device @slow over @base by @write_ms."""
    dm.suspend(slow)
    dm.load(slow, delay_line(base, 0, write_ms))
    dm.resume(slow)


def slow_down(dm, slow, base, write_ms):
    """Delay the writes of dm-delay device @slow by @write_ms; returns a
    function giving the writes completed so far by its backing loop
    device @base."""
    set_write_delay(dm, slow, base, write_ms)
    kname = blkdev.blk_name(base)

    def writes_done():
        with open(f"/sys/block/{kname}/stat") as f:
            return int(f.read().split()[4])
    return writes_done


def log_segments(ssd):
    return ondisk.walk_log(ssd, ondisk.newest_sb(ssd)[1])


def direct_write_after_partial_in_open_batch(dm, loopdev, nullb):
    v, slow, ssd_base = delayed_vol(dm, loopdev, nullb, "nxpb")
    # Logged blocks X and Y (whole, committed), 4 MiB away from B's region.
    X_, Y_, B = 3000, 3008, 100
    with rawio.Fd(v.dev) as f:
        f.pwrite(X_ * BLOCK, pattern("x", 0, BLOCK))
        f.pwrite(Y_ * BLOCK, pattern("y", 0, BLOCK))
        f.fsync()
    st = v.status()
    assert st["index_entries"] == 2, st
    # Every SSD read now takes 2 s: an RMW read holds the writer up.
    dm.reload(slow, delay_line(ssd_base, 2000, 0))
    bg = BgWrites(v.dev)
    a = pattern("a", 0, 512)
    whole = pattern("w", 0, BLOCK)
    # W0: RMW of X, the writer waits 2 s.  Meanwhile A (partial, B not
    # logged: no RMW) and C (RMW of Y) queue up and are taken in one pass:
    # A goes into the batch, then C's read holds the pass for 2 s, during
    # which the whole-block write of B comes.
    t = [bg.start(X_ * BLOCK, pattern("w0", 0, 512))]
    time.sleep(0.7)
    t.append(bg.start(B * BLOCK, a))
    time.sleep(0.2)
    t.append(bg.start(Y_ * BLOCK, pattern("c", 0, 512)))
    time.sleep(2.0)
    t.append(bg.start(B * BLOCK, whole))
    for th in t:
        th.join(timeout=120)
        assert not th.is_alive(), "a write hung"
    assert not bg.errors, bg.errors
    dm.reload(slow, delay_line(ssd_base, 0, 0))

    def check(where):
        with rawio.Fd(v.dev, write=False) as g:
            got = g.pread(B * BLOCK, BLOCK)
        # Sector 0: A and the whole write overlapped in time, either wins.
        assert got[:512] in (a, whole[:512]), f"{where}: sector 0"
        assert got[512:] == whole[512:], \
            f"{where}: sectors 1-7 of block {B} are not the whole-block write's"

    check("live")
    v.recreate()
    check("after a reload")


def hdd_pattern(hdd, nblocks):
    """The first @nblocks blocks of the HDD's data area hold a pattern, so
    that a partial block's other sectors read as it (and not as zeros or
    an old slot).  The area is the volume's if @hdd has a label, else the
    one a volume formatted now will have."""
    base = b"".join(pattern("hdd", b, BLOCK) for b in range(nblocks))
    off = nxdvol.hdd_data_offset(hdd) or nxdvol.new_data_offset(hdd)
    rawio.pwrite_dev(hdd, off, base)
    return bytearray(base)
