# SPDX-License-Identifier: GPL-2.0
"""Destage test rigs for test_destage.py: waits, block checks, a striped
HDD (md RAID over loop devices), dense and clean-ahead layouts, stripe
fill runs, a volume over dm-log-writes that records the HDD's writes."""
import os
import random
import threading
import time

from nxdt import blkdev, nxdvol, rawio
from nxdt.nxdvol import Volume
from nxdt.rawio import pread_dev, pwrite_direct, read_all


STRIPE = 128 << 10                     # dm-striped 2 x 64 KiB: io_opt


def wait_until(pred, timeout=120, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def check_blocks(model, read, what):
    """Every 4 KiB block of @model ({block: data}) reads back as @read gives it."""
    for b, d in model.items():
        assert read(b) == d, f"{what} {b}"


def striped_hdd(dm, parts):
    """dm-striped over two 32 MiB loops, 64 KiB chunks: io_opt 128 KiB."""
    sectors = 32 << 11
    dm.create("nxdstripe", f"0 {2 * sectors} striped 2 128 "
              f"{parts[0].dev} 0 {parts[1].dev} 0")
    hdd = "/dev/mapper/nxdstripe"
    with open("/sys/block/" + os.path.basename(os.path.realpath(hdd)) +
              "/queue/optimal_io_size") as f:
        assert int(f.read()) == STRIPE
    return hdd


def logged_volume(dm, hdd, ssd, lwlog, order):
    """A volume "nxds" on @hdd under dm-log-writes ("nxdlw", its log on
    @lwlog), destage paused, with the 4 KiB blocks of @order written in
    that order, each random and on its own: returns (volume, model)."""
    lw = dm.create("nxdlw", f"0 {blkdev.dev_sectors(hdd)} log-writes {hdd} {lwlog.dev}")
    v = Volume(dm, "nxds", lw, ssd.dev)
    v.message("pause_destage")
    model = {}
    with rawio.Fd(v.dev) as f:
        for b in order:
            model[b] = os.urandom(4096)
            f.pwrite(b * 4096, model[b])
        f.fsync()
    assert v.status()["index_entries"] == len(model)
    return v, model


def striped_teardown(dm, ssd, parts):
    dm.remove("nxds", missing_ok=True)
    dm.remove("nxdslow", missing_ok=True)
    dm.remove("nxdstripe", missing_ok=True)
    ssd.close()
    for p in parts:
        p.close()


def dense(dm, hdd, ssd):
    v = Volume(dm, "nxds", hdd, ssd.dev)
    v.message("pause_destage")
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    blocks = list(range(1024))            # 4 MiB, every block written
    random.Random(13).shuffle(blocks)
    model = bytearray(4 << 20)
    for b in blocks:
        d = os.urandom(4096)
        pwrite_direct(fd, b * 4096, d)
        model[b * 4096:(b + 1) * 4096] = d
    os.fsync(fd)        # acknowledged direct log writes are indexed at commit
    os.close(fd)
    before = v.status()
    assert before["index_entries"] == 1024, before
    v.message("drain")
    st = v.status()
    delta = {k: st[k] - before[k] for k in
             ("destage_bios", "destaged_bytes", "destage_stripe_bios", "destage_busy_us")}
    bios, nbytes = delta["destage_bios"], delta["destaged_bytes"]
    assert nbytes == 4 << 20, st
    mean = nbytes / bios
    print(f"destage: {bios} bios, mean {mean / 1024:.0f} KiB, "
          f"{delta['destage_stripe_bios']} whole stripes")
    assert mean >= 64 << 10, (bios, nbytes)
    v.remove()
    assert read_all(hdd, 4 << 20, start=nxdvol.hdd_data_offset(hdd)) == bytes(model)
    return delta


def clean_ahead(dm, hdd, ssd, ahead, n, stride):
    v = Volume(dm, "nxds", hdd.dev, ssd.dev)
    v.message("pause_destage")
    model = {}
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    order = [0] + [stride * (i + 1) for i in range(n)] + [1]
    for b in order:
        d = os.urandom(4096)
        pwrite_direct(fd, b * 4096, d)
        model[b] = d
    os.fsync(fd)        # acknowledged direct log writes are indexed at commit
    os.close(fd)
    before = v.status()
    assert before["index_entries"] == n + 2, before
    v.message("drain")
    st = v.status()
    bios = st["destage_bios"] - before["destage_bios"]
    nblocks = st["destaged_blocks"] - before["destaged_blocks"]
    assert nblocks == n + 2, (nblocks, st)
    want = n + 1 if ahead else n + 2
    assert bios == want, \
        f"{bios} destage bios for {n} far blocks and blocks 0-1, expected {want}" + \
        (" (block 1 not copied with block 0)" if ahead else "")
    v.remove()
    off = nxdvol.hdd_data_offset(hdd.dev)
    for b, d in model.items():
        assert pread_dev(hdd.dev, off + b * 4096, 4096) == d, f"HDD block {b}"


def stripe_fill(dm, hdd, ssd, region, writer, slow=None):
    v = Volume(dm, "nxds", hdd, ssd.dev)
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    model = bytearray(os.urandom(region))
    for off in range(0, region, STRIPE):           # past the log: to the HDD
        pwrite_direct(fd, off, bytes(model[off:off + STRIPE]))
    assert v.status()["index_entries"] == 0
    rng = random.Random(21)
    lock = threading.Lock()
    stop = threading.Event()
    nblocks, nstripes = region // 4096, region // STRIPE
    gap_writes = [0]

    def gap_writer(seed, logged):
        wfd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
        wr = random.Random(seed)
        try:
            while not stop.is_set():
                b = wr.randrange(nblocks)
                if b in logged:
                    continue
                d = os.urandom(4096)
                with lock:             # one writer a block at a time: model order
                    pwrite_direct(wfd, b * 4096, d)
                    model[b * 4096:(b + 1) * 4096] = d
                    gap_writes[0] += 1
        finally:
            os.close(wfd)

    for rnd in range(4 if writer else 1):
        v.message("pause_destage")
        blocks = set()
        while len(blocks) < 3 * nstripes:
            blocks.add(rng.randrange(nblocks))
        for b in sorted(blocks, key=lambda _: rng.random()):
            d = os.urandom(4096)
            pwrite_direct(fd, b * 4096, d)
            model[b * 4096:(b + 1) * 4096] = d
        # Acknowledged direct log writes join the index at their segment's
        # commit: without this, a round may start before the last commits
        # and leave their copies to a second round (an extra bio).
        os.fsync(fd)
        before = v.status()
        per = {}
        for b in blocks:
            per[b * 4096 // STRIPE] = per.get(b * 4096 // STRIPE, 0) + 1
        threads = []
        if writer:
            assert v.sset("write_threshold", 0) == 0
            stop.clear()
            threads = [threading.Thread(target=gap_writer, args=(100 * rnd + i, blocks))
                       for i in range(4)]
            for t in threads:
                t.start()
        if slow:
            slow()
        try:
            v.message("drain")
        finally:
            stop.set()
            for t in threads:
                t.join()
        st = v.status()
        bios = st["destage_bios"] - before["destage_bios"]
        stripes = st["destage_stripe_bios"] - before["destage_stripe_bios"]
        filled = sum(1 for n in per.values() if n >= 2)
        print(f"round {rnd}: {len(blocks)} blocks in {len(per)} stripes, "
              f"{filled} with 2+: {bios} destage bios, {stripes} whole stripes, "
              f"{gap_writes[0]} gap writes so far")
        # One bio per stripe touched: whole for 2+ copies, else the block.
        assert bios == len(per), (bios, len(per), st)
        assert stripes == filled, (stripes, filled, st)
        if writer:
            assert v.sset("write_threshold", 4096) == 0
    os.close(fd)
    v.remove()
    got = read_all(hdd, region, start=nxdvol.hdd_data_offset(hdd))
    bad = [i // 4096 for i in range(0, region, 4096) if got[i:i + 4096] != model[i:i + 4096]]
    assert not bad, f"{len(bad)} blocks differ from the model: {bad[:10]}"
    if writer:
        assert gap_writes[0] > 0
