# SPDX-License-Identifier: GPL-2.0
"""dm-nxd core data path on real block devices: routing, exact data through
the SSD log and the HDD, discards, flushes, thresholds, recovery.

Every data check compares against an in-memory model (nxdt.workloads.DiffTester)
that starts from a seeded pattern written to the raw HDD before the volume
is created (seed_hdd), never from the device under test.  Every differential
run ends with the volume not degraded and no I/O error counted.
"""
import os
import subprocess

import pytest

from nxdt.blkdev import Loop, NullBlk
from nxdt import nxdvol
from nxdt.nxdvol import Volume
from nxdt.rawio import discard, pread_direct, pwrite_direct, read_all
from nxdt.workloads import assert_healthy, DiffTester, parse_fio_json, seed_hdd
from nxdt.datapath import paused_vol, write_and_count, xfs_fio

NOPS = int(os.environ.get("NXD_DIFF_OPS", "1200"))
BASE = 32 << 20     # bytes of the HDD the devs fixture seeds




@pytest.fixture
def devs():
    """HDD: 128 MiB loop over tmpfs (zeroes on discard, counts I/O), its
    first BASE bytes a seeded pattern (hdd.base); SSD: 16 MiB memory-backed
    null_blk with discard."""
    hdd = Loop(128, "hdd")
    hdd.base = seed_hdd(hdd.dev, BASE, 0xD1FF)
    ssd = NullBlk(16)
    yield hdd, ssd
    ssd.close()
    hdd.close()


@pytest.fixture
def vol(devs, dm):
    hdd, ssd = devs
    v = Volume(dm, "nxdt", hdd.dev, ssd.dev)
    v.base = hdd.base
    yield v
    v.remove()


@pytest.mark.guarantee("G4", what="dmsetup table reloaded as it is gives the same table; state ok; log_blocks is the SSD's blocks less 8.")
def test_table_roundtrips(vol):
    t1 = vol.table()
    assert " nxd " in t1 and "write_threshold 65536" in t1
    vol.dm.reload(vol.name, t1)
    assert vol.table() == t1
    st = vol.status()
    assert st["state"] == "ok"
    assert st["log_blocks"] == 16 * 256 - 8


@pytest.mark.guarantee("G1", what="NXD_DIFF_OPS random reads, writes, overwrites, discards and flushes on 32 MiB through the default table, both routes used; every read and a final full read checked against the model.")
def test_differential_default(vol):
    t = DiffTester(vol.dev, 32 << 20, seed=1, initial=vol.base[:32 << 20])
    t.run(NOPS)
    t.verify_all()
    st = assert_healthy(vol)
    # Both routes were exercised.
    assert st["writes_logged"] > 0 and st["writes_direct"] > 0
    assert st["segments_written"] > 0
    t.close()


@pytest.mark.guarantee("G1", "G12")
def test_differential_threshold_changes(vol):
    """Thresholds and modes changed mid-run, reads verify throughout."""
    t = DiffTester(vol.dev, 24 << 20, seed=2, initial=vol.base[:24 << 20], hot=4 << 20)
    settings = [("write_threshold", 0), ("mode", "log_all"),
                ("mode", "auto"), ("write_threshold", 1 << 20),
                ("mode", "passthrough"), ("mode", "auto"),
                ("write_threshold", 4096)]

    def turn(i):
        if i and i % (NOPS // len(settings)) == 0:
            k, v = settings[(i // (NOPS // len(settings))) % len(settings)]
            assert vol.sset(k, v) == 0, (k, v)
            assert vol.sget(k) == str(v)
    t.run(NOPS, on_step=turn)
    t.verify_all()
    assert_healthy(vol)
    t.close()


@pytest.mark.guarantee("G9")
def test_log_full_small_log(dm):
    """A 3 MiB log (near the minimum) under many small writes: nothing
    fails, data verifies, and some writes were routed around the full log."""
    hdd = Loop(64, "hddf")
    base = seed_hdd(hdd.dev, 32 << 20, 3)
    ssd = NullBlk(3)
    v = Volume(dm, "nxdf", hdd.dev, ssd.dev, "high_watermark 100 low_watermark 100")
    try:
        v.message("pause_destage")
        t = DiffTester(v.dev, 32 << 20, seed=3, initial=base, max_io=256 << 10)
        for i in range(NOPS):
            off, n = t._extent(0.95)
            t.write(off, n)
            if i % 7 == 0:
                off, n = t._extent(0.5)
                t.read(off, n)
        v.message("resume_destage")
        t.verify_all()
        st = assert_healthy(v)
        assert st["writes_around_full"] > 0, st
        assert st["segments_reclaimed"] > 0, st
        t.close()
    finally:
        v.remove()
        ssd.close()
        hdd.close()


@pytest.mark.guarantee("G8")
def test_drain_then_hdd_alone_matches(devs, dm):
    """After a drain the HDD alone holds exactly the logical content."""
    hdd, ssd = devs
    v = Volume(dm, "nxdd", hdd.dev, ssd.dev)
    t = DiffTester(v.dev, 32 << 20, seed=4, initial=hdd.base)
    t.run(NOPS)
    v.message("drain")
    st = assert_healthy(v)
    assert st["index_entries"] == 0 and st["log_used_blocks"] == 0, st
    t.close()
    v.remove()
    assert read_all(hdd.dev, t.size, start=nxdvol.hdd_data_offset(hdd.dev)) == bytes(t.model)


@pytest.mark.guarantee("G4")
def test_recovery_after_remove_and_reload(devs, dm):
    """Data in the log survives table removal (clean) and reload."""
    hdd, ssd = devs
    v = Volume(dm, "nxdr", hdd.dev, ssd.dev)
    v.message("pause_destage")
    t = DiffTester(v.dev, 16 << 20, seed=5, initial=hdd.base[:16 << 20])
    t.run(NOPS // 2)
    # The run fills the 16 MiB log several times, and a full log is
    # destaged although paused: how much it holds now depends on timing.
    # Empty it, then log small writes (about 1 MiB) that surely stay.
    v.message("drain")
    for _ in range(64):
        t.write(*t._extent(1.0))
    t.flush()
    t.close()
    before = v.status()
    assert before["index_entries"] > 0 and not before["log_full"], before
    v.recreate()  # destage paused is not in the table: starts running again
    st = v.status()
    assert st["recovered_segments"] > 0
    t.fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    t.verify_all()
    t.run(NOPS // 2)
    t.verify_all()
    assert_healthy(v)
    t.close()
    v.remove()


@pytest.mark.guarantee("G2")
def test_routing_by_device_counters(dm):
    """O_DIRECT 4 KiB writes land on the SSD, 1 MiB aligned on the HDD,
    4 KiB-unaligned and 5000-byte buffered writes on the SSD (loop devices
    count I/O in /sys/block/*/stat)."""
    hdd, ssd = Loop(128, "hddr"), Loop(16, "ssdr")
    try:
        v = paused_vol(dm, (hdd, ssd))
        # 4 KiB aligned: SSD only.
        dh, ds = write_and_count(v, hdd.dev, ssd.dev, 1 << 20, 4096)
        assert dh == 0 and ds >= 8, (dh, ds)
        # 1 MiB aligned: HDD only.
        dh, ds = write_and_count(v, hdd.dev, ssd.dev, 8 << 20, 1 << 20)
        assert dh >= 2048 and ds == 0, (dh, ds)
        # 4 KiB at a 512-byte offset: SSD.
        dh, ds = write_and_count(v, hdd.dev, ssd.dev, (2 << 20) + 512, 4096)
        assert dh == 0 and ds >= 8, (dh, ds)
        # 5000 bytes, buffered: the page cache writes two pages, to the SSD.
        dh, ds = write_and_count(v, hdd.dev, ssd.dev, 3 << 20, 5000, direct=False)
        assert dh == 0 and ds >= 16, (dh, ds)
        # Threshold 0 sends 4 KiB to the HDD.
        assert v.sset("write_threshold", 0) == 0
        dh, ds = write_and_count(v, hdd.dev, ssd.dev, 5 << 20, 4096)
        assert dh >= 8 and ds == 0, (dh, ds)
        # log_all sends 1 MiB aligned to the SSD.
        assert v.sset("mode", "log_all") == 0
        dh, ds = write_and_count(v, hdd.dev, ssd.dev, 16 << 20, 1 << 20)
        assert dh == 0 and ds >= 2048, (dh, ds)
        v.remove()
    finally:
        dm.remove("nxdroute", missing_ok=True)
        ssd.close()
        hdd.close()


@pytest.mark.guarantee("G3")
def test_large_write_over_logged_copy_is_logged(vol):
    """A small logged write then a large write over it, back to back: the
    large write's block over the logged one is logged too (the log owns
    it; no INVAL), and a discard over another logged block invalidates
    it: reads never return the older logged data, also after the volume
    is removed and created again (recovery replays the INVAL)."""
    vol.message("pause_destage")
    small = os.urandom(4096)
    big = os.urandom(1 << 20)
    fd = os.open(vol.dev, os.O_RDWR | os.O_DIRECT)
    try:
        pwrite_direct(fd, 4 << 20, small)        # logged
        st0 = vol.status()
        pwrite_direct(fd, 4 << 20, big)          # its first block logged, the rest the HDD
        assert pread_direct(fd, 4 << 20, 1 << 20) == big
        pwrite_direct(fd, 6 << 20, small)        # logged
        os.fsync(fd)
        st = vol.status()
        # The small write's block, then the big write's over it; 6 MiB.
        assert st["index_entries"] == 2, (st0, st)
        assert st["writes_direct"] == st0["writes_direct"] + 1, (st0, st)
        assert st["invalidations"] == 0, st
        discard(fd, 6 << 20, 1 << 20)
        assert pread_direct(fd, 6 << 20, 4096) == bytes(4096)
        assert vol.status()["invalidations"] >= 1, vol.status()
    finally:
        os.close(fd)
    vol.recreate()
    fd = os.open(vol.dev, os.O_RDONLY | os.O_DIRECT)
    try:
        assert pread_direct(fd, 4 << 20, 1 << 20) == big
        assert pread_direct(fd, 6 << 20, 4096) == bytes(4096)
    finally:
        os.close(fd)


@pytest.mark.guarantee("G1")
def test_partial_block_merge(vol):
    """Sub-4 KiB writes to one block merge with each other and with the HDD
    copy; a read spanning log and HDD sectors is stitched together."""
    vol.message("pause_destage")
    fd = os.open(vol.dev, os.O_RDWR | os.O_DIRECT)
    base = os.urandom(1 << 20)
    pwrite_direct(fd, 0, base)                  # HDD
    model = bytearray(base)
    for off in (512, 2048, 1024, 3584, 4096 + 512):
        d = os.urandom(512)
        pwrite_direct(fd, off, d)               # logged, partial blocks
        model[off:off + 512] = d
    assert pread_direct(fd, 0, 1 << 20) == bytes(model)
    st = vol.status()
    assert st["rmw_reads"] >= 1 and st["reads_ssd"] >= 1, st
    os.close(fd)


@pytest.mark.guarantee("G1")
def test_fio_verify_raw(vol):
    """fio crc32c verify with verify_backlog over mixed sizes.  A mismatch
    makes fio (verify_fatal) stop with a nonzero exit and the job's error
    set (EILSEQ); that verify ran shows as read bytes (fio counts its
    verify reads as the job's reads: the job itself only writes), and it
    read back as many bytes as it wrote (48 MiB with these options)."""
    r = subprocess.run(
        ["fio", "--output-format=json", "--name=v", f"--filename={vol.dev}", "--direct=1",
         "--ioengine=psync", "--rw=randwrite", "--bssplit=4k/50:8k/20:64k/10:1m/20",
         "--size=48m", "--io_size=64m", "--verify=crc32c", "--verify_backlog=64",
         "--verify_fatal=1", "--randseed=7", "--numjobs=1"],
        capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    job, = parse_fio_json(r.stdout)["jobs"]
    assert job["error"] == 0, (job["error"], r.stderr)
    assert job["write"]["io_bytes"] > 0, job["write"]
    assert job["read"]["io_bytes"] == job["write"]["io_bytes"], (job["read"], job["write"])
    assert_healthy(vol)


@pytest.mark.guarantee("G1", "G14", what="XFS on the volume, two fio jobs with crc32c verify, then xfs_repair -n clean.")
def test_fio_verify_on_xfs(dm):
    hdd, ssd = Loop(512, "hddx"), NullBlk(16)
    vol = Volume(dm, "nxdx", hdd.dev, ssd.dev)
    try:
        xfs_fio(vol)
    finally:
        vol.remove()
        ssd.close()
        hdd.close()


@pytest.mark.guarantee("G1")
def test_concurrent_writers_and_readers(vol):
    """Several processes write disjoint regions with mixed sizes while the
    destager runs; each region verifies against its own model."""
    import multiprocessing as mp

    def worker(idx, q):
        try:
            base = idx * (4 << 20)
            t = DiffTester(vol.dev, 4 << 20, seed=100 + idx,
                           initial=vol.base[base:base + (4 << 20)])
            # Shift all offsets into this worker's region.
            orig_ext = t._extent
            t._extent = lambda b=0.7: (lambda o, n: (o + base, n))(*orig_ext(b))
            model = t.model
            for _ in range(NOPS // 4):
                off, n = t._extent()
                if t.rng.random() < 0.6:
                    d = t.rng.randbytes(n)
                    pwrite_direct(t.fd, off, d)
                    model[off - base:off - base + n] = d
                else:
                    got = pread_direct(t.fd, off, n)
                    assert got == bytes(model[off - base:off - base + n]), (idx, off, n)
            t.close()
            q.put((idx, None))
        except Exception as e:  # noqa: BLE001 - reported to the parent
            q.put((idx, repr(e)))

    q = mp.Queue()
    ps = [mp.Process(target=worker, args=(i, q)) for i in range(4)]
    for p in ps:
        p.start()
    res = [q.get(timeout=600) for _ in ps]
    for p in ps:
        p.join()
    assert all(err is None for _, err in res), res
    assert_healthy(vol)


def _versioned(block, version, nblocks=1):
    """@nblocks blocks from @block, each sector naming its block, version
    and sector: a read shows which write each sector came from."""
    import struct

    out = bytearray()
    for b in range(block, block + nblocks):
        for s in range(8):
            out += struct.pack("<QQI", b, version, s).ljust(512, bytes([version & 0xFF]))
    return bytes(out)


@pytest.mark.guarantee("G1", what="Reads in other processes never see a block older than its last acknowledged write, while 4 KiB logged writes, 128 KiB writes and destage rounds change the index and the direct segments of every range lock.")
def test_reads_see_acknowledged_writes_across_processes(devs, dm):
    """A writer process acknowledges versions of 128 blocks spread over 16
    regions (every range lock): 4 KiB writes (logged) and 128 KiB aligned
    writes (cut at the logged blocks' edges), destage at low_watermark 0.
    Two reader processes read the blocks the whole time: each sector must
    be of its block and at least the version acknowledged before the read
    began (the model: the writer's acknowledgements, in shared memory)."""
    import multiprocessing as mp
    import random
    import struct

    hdd, ssd = devs
    v = Volume(dm, "nxdt", hdd.dev, ssd.dev, ["low_watermark", "0"])
    blocks = [r * 256 + k for r in range(16) for k in range(8)]
    fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
    for r in range(16):         # version 0 of every block, region by region
        pwrite_direct(fd, r * 256 * 4096, _versioned(r * 256, 0, 32))
    os.close(fd)
    acked = mp.Array("q", 16 * 256, lock=False)
    done = mp.Value("i", 0, lock=False)
    ops = max(NOPS, 600)

    def writer(q):
        try:
            rng = random.Random(0x5EED)
            fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
            for ver in range(1, ops + 1):
                if rng.random() < 0.15:
                    r = rng.randrange(16)
                    pwrite_direct(fd, r * 256 * 4096, _versioned(r * 256, ver, 32))
                    for b in range(r * 256, r * 256 + 32):
                        acked[b] = ver
                else:
                    b = rng.choice(blocks)
                    pwrite_direct(fd, b * 4096, _versioned(b, ver))
                    acked[b] = ver
            os.close(fd)
            q.put(("w", None))
        except Exception as e:  # noqa: BLE001 - reported to the parent
            q.put(("w", repr(e)))
        finally:
            done.value = 1

    def reader(idx, q):
        try:
            rng = random.Random(idx)
            fd = os.open(v.dev, os.O_RDONLY | os.O_DIRECT)
            checks = 0
            while not done.value or checks < 200:
                b = rng.choice(blocks)
                n = rng.choice((1, 1, 1, 4))        # a block, or 4 over a region's blocks
                n = min(n, 256 - b % 256)
                before = [acked[x] for x in range(b, b + n)]
                got = pread_direct(fd, b * 4096, n * 4096)
                for i in range(n * 8):
                    bb, vv, ss = struct.unpack_from("<QQI", got, i * 512)
                    assert (bb, ss) == (b + i // 8, i % 8) and vv >= before[i // 8], \
                        ("block", b + i // 8, "sector", i % 8, "read", (bb, vv, ss),
                         "acknowledged before the read", before[i // 8])
                checks += 1
            os.close(fd)
            q.put(("r%d" % idx, checks))
        except Exception as e:  # noqa: BLE001
            q.put(("r%d" % idx, repr(e)))

    q = mp.Queue()
    ps = [mp.Process(target=writer, args=(q,))] + \
        [mp.Process(target=reader, args=(i, q)) for i in (1, 2)]
    for p in ps:
        p.start()
    res = dict(q.get(timeout=900) for _ in ps)
    for p in ps:
        p.join()
    assert res["w"] is None, res
    assert all(isinstance(res[k], int) and res[k] >= 200 for k in ("r1", "r2")), res
    st = v.status()
    assert_healthy(v)
    # The run went through the paths it names: logged, direct to the HDD, destaged.
    assert st["writes_logged"] > 0 and st["writes_direct"] > 0 and \
        st["destaged_blocks"] > 0, st
    v.remove()
