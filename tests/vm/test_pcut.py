# SPDX-License-Identifier: GPL-2.0
"""The dm-pcut fixture itself (tests/fixtures/pcut), checked against a model
of what a disk with a volatile write cache must keep and lose.

Every test writes recognisable 512 B sectors (tag + sector number) through
a pcut device over a memory-backed null_blk, and compares both the pcut
device and the backing device (read directly) with the model: a fixture
that wrote through to the backing device, or kept unflushed writes at a
cut with keep 0, fails here.
"""
import errno
import os
import subprocess

import pytest

from nxdt import dmlib, host, pcut, rawio
from nxdt.blkdev import NullBlk
from nxdt.dmlib import DMIoctl
from nxdt.pcutcheck import (Dev, MiB, SZ, diff_sectors, expect_eio, fresh_dev, half_run,
                            read_backing, sect)


@pytest.fixture(scope="module", autouse=True)
def pcut_module():
    pcut.load_module()
    yield
    p = pcut.unload_module()
    if p.returncode:        # reported, not raised: it would hide the test's failure
        print(f"rmmod dm_pcut failed: {p.stderr.strip()}")


@pytest.fixture
def env():
    """(dm, new_backing(mib)) with cleanup of both."""
    dm = DMIoctl(nodedir="/tmp/pcut-test/dev")
    made = []
    Dev.opened = []

    def backing(mib=SZ // MiB):
        nb = NullBlk(mib, discard=True)
        made.append(nb)
        return nb.dev
    yield dm, backing
    for d in Dev.opened:
        d.close()
    errs = dm.cleanup()
    dm.close()
    for nb in reversed(made):
        nb.close()
    assert not errs, errs


@pytest.mark.guarantee("G16")
def test_unflushed_writes_lost_at_cut_keep0(env):
    """With keep 0 a cut loses every unflushed write and keeps every flushed
    one; reads before the cut see the cache; I/O after the cut fails with
    EIO."""
    dm, bdev, pc, d, durable = fresh_dev(env, "pct0", "gt0", 1, keep=0, torn=0)
    latest = bytearray(SZ)
    d.write(1, 0, 65536, latest)
    os.fsync(d.fd)                          # PREFLUSH
    durable[:] = latest
    d.write(2, 32768, 65536, latest)        # over half of write 1
    d.write(3, 1 << 20, 4096, latest)
    d.write(4, 2 << 20, 512, latest)        # one sector
    assert d.read_all() == bytes(latest), "reads must see the cache"
    bk = read_backing(bdev)
    assert bk == bytes(durable), \
        f"unflushed writes reached the backing device: sectors {diff_sectors(bk, durable)[:10]}"
    st = pc.status()
    assert st["state"] == "live" and st["writes"] == 4 and st["flushes"] >= 1, st
    assert st["cached"] == 3, st
    pc.cut()
    expect_eio(lambda: d.read(0, 4096))
    expect_eio(lambda: d.write(5, 0, 4096))
    expect_eio(lambda: os.fsync(d.fd))
    d.close()
    pc.wait_cut()       # the worker writes kept records after the cut
    st = pc.status()
    assert st["state"] == "cut" and st["dropped"] == 3 and st["kept"] == 0, st
    assert read_backing(bdev) == bytes(durable)
    pc.power_on()
    d = Dev(pc.path)
    got = d.read_all()
    d.close()
    assert got == bytes(durable), f"after power-on: sectors {diff_sectors(got, durable)[:10]} differ"


@pytest.mark.guarantee("G16")
def test_flush_and_fua_writes_survive(env):
    """Flushed and FUA writes survive a cut with keep 0; plain writes, also
    over them, are lost."""
    dm, bdev, pc, d, durable = fresh_dev(env, "pct1", "gt1", 2, keep=0, torn=0)
    d.write(1, 0, 8192, durable)
    os.fsync(d.fd)
    d.write(2, 8192, 8192)                  # plain: lost
    d.write(3, 16384, 8192, durable, fua=True)
    d.write(4, 0, 4096)                     # plain over flushed write 1: lost
    d.write(5, 32768, 8192)                 # plain, then FUA over half of it
    d.write(6, 32768, 4096, durable, fua=True)
    d.write(7, 36864, 512)                  # plain after the FUA: lost
    bk = read_backing(bdev)
    assert bk == bytes(durable), \
        f"backing before the cut: sectors {diff_sectors(bk, durable)[:10]} (FUA not persisted, or plain writes were)"
    st = pc.status()
    assert st["fua"] == 2 and st["writes"] == 7, st
    pc.cut()
    d.close()
    pc.power_on()
    got = read_backing(bdev)
    assert got == bytes(durable), f"sectors {diff_sectors(got, durable)[:10]} differ"
    d = Dev(pc.path)
    assert d.read_all() == bytes(durable)
    d.close()


@pytest.mark.guarantee("G16")
def test_keep_all(env):
    """With keep 100 a cut keeps every cached write."""
    dm, bdev, pc, d, latest = fresh_dev(env, "pct2", "gt2", 3, keep=100, torn=0)
    for t in range(1, 41):
        d.write(t, (t * 37 % 200) * 4096, 4096 * (1 + t % 3), latest)
    assert read_backing(bdev) == bytes(SZ), "nothing was flushed"
    pc.cut()
    d.close()
    st = pc.status()
    assert st["kept"] == 40 and st["dropped"] == 0 and st["torn"] == 0, st
    pc.power_on()
    got = read_backing(bdev)
    assert got == bytes(latest), f"sectors {diff_sectors(got, latest)[:10]} differ"


@pytest.mark.guarantee("G16")
def test_keep_half_torn_and_seeded(env):
    """With keep 50 and torn writes a cut keeps, tears at 512 B and drops
    records, and the same seed keeps the same sectors."""
    dm, backing = env
    n = 200
    runs = []
    for seed, name in ((77, "pct3a"), (77, "pct3b"), (78, "pct3c")):
        bdev = backing()
        runs.append(half_run(dm, bdev, name, seed, n))
    img, st = runs[0]
    assert st["kept"] + st["torn"] + st["dropped"] == n, st
    assert st["kept"] > 0 and st["torn"] > 0 and st["dropped"] > 0, st
    full = empty = partial = 0
    for t in range(n):
        off = t * 8192
        present = 0
        for j in range(8):
            s = img[off + j * 512:off + (j + 1) * 512]
            want = sect(t + 1, off // 512 + j)
            assert s in (want, bytes(512)), f"extent {t} sector {j}: foreign data"
            present += s == want
        assert img[off + 4096:off + 8192] == bytes(4096)
        full += present == 8
        empty += present == 0
        partial += 0 < present < 8
    assert partial <= st["torn"] and full >= st["kept"] and empty >= st["dropped"], \
        (full, empty, partial, st)
    assert partial > 0
    assert runs[1][0] == img and runs[1][1]["kept"] == st["kept"], \
        "same seed, same writes: the cut must keep the same sectors"
    assert runs[2][0] != img, "another seed should keep another set"


@pytest.mark.guarantee("G16")
def test_cut_after_fires_at_the_nth_group_op(env):
    """cut_after cuts a device at exactly the nth op of its group, and the
    other device after the gap."""
    dm, backing = env
    a = pcut.Pcut(dm, "pct4a", backing(), "gt4", 5)
    b = pcut.Pcut(dm, "pct4b", backing(), "gt4", 6)
    for first, other, n, gap in ((a, b, 10, 5), (b, a, 7, 0), (a, b, 4, 9)):
        first.power_on()
        other.power_on()
        base = first.status()["group_ops"]
        first.cut_after(n, gap)
        devs = {first.name: Dev(first.path), other.name: Dev(other.path)}
        failed = {}
        for i in range(1, n + gap + 4):
            name = first.name if i % 2 else other.name
            try:
                devs[name].write(i, i * 4096, 4096)
            except OSError as e:
                assert e.errno == errno.EIO
                failed.setdefault(name, i)
        for x in devs.values():
            x.close()
        want_first = n if n % 2 else n + 1          # first device's ops are odd
        k = n + gap
        want_other = k if k % 2 == 0 else k + 1
        assert failed.get(first.name) == want_first, (n, gap, failed)
        assert failed.get(other.name) == want_other, (n, gap, failed)
        assert first.status()["cut_op"] == base + n
        assert other.status()["cut_op"] == base + n + gap
        assert first.status()["group_ops"] == base + n + gap + 3


@pytest.mark.guarantee("G16")
def test_out_of_order_completion(env):
    """Writes complete out of order after their random delay."""
    dm, backing = env
    pc = pcut.Pcut(dm, "pct5", backing(), "gt5", 7)
    pc.set(delay_us=500)
    p = subprocess.run(["fio", "--name=ooo", f"--filename={pc.path}", "--ioengine=libaio",
                        "--direct=1", "--rw=randwrite", "--bs=4k", "--iodepth=16",
                        "--size=8M", "--io_size=4M", "--randseed=7"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    st = pc.status()
    assert st["writes"] >= 1024 and st["ooo"] > 0, st


@pytest.mark.guarantee("G16")
def test_discard_is_a_cached_write_of_zeros(env):
    """A discard is a cached write of zeros: lost at a cut unless flushed."""
    dm, bdev, pc, d, durable = fresh_dev(env, "pct6", "gt6", 8, keep=0, torn=0)
    d.write(1, 0, 65536, durable)
    os.fsync(d.fd)
    rawio.discard(d.fd, 8192, 16384)
    latest = bytearray(durable)
    latest[8192:8192 + 16384] = bytes(16384)
    assert d.read(0, 65536) == bytes(latest[:65536])
    assert read_backing(bdev) == bytes(durable), "unflushed discard reached the backing device"
    rawio.discard(d.fd, 40960, 4096)
    os.fsync(d.fd)
    durable[:] = latest
    durable[40960:45056] = bytes(4096)
    rawio.discard(d.fd, 0, 4096)             # not flushed: lost
    assert pc.status()["discards"] == 3
    pc.cut()
    d.close()
    pc.power_on()
    assert read_backing(bdev) == bytes(durable)


@pytest.mark.guarantee("G16")
def test_fail_switches(env):
    """The fail_flush, fail_writes and fail_reads switches fail those with EIO,
    a failed flush persists nothing, and switched off the device works
    again."""
    dm, bdev, pc, d, latest = fresh_dev(env, "pct7", "gt7", 9)
    pc.message("fail_flush", 1)
    d.write(1, 0, 4096, latest)
    expect_eio(lambda: os.fsync(d.fd))
    assert read_backing(bdev) == bytes(SZ), "a failed flush persisted data"
    pc.message("fail_flush", 0)
    pc.message("fail_writes", 1)
    expect_eio(lambda: d.write(2, 4096, 4096))
    pc.message("fail_writes", 0)
    pc.message("fail_reads", 1)
    expect_eio(lambda: d.read(0, 4096))
    pc.message("fail_reads", 0)
    assert d.read(0, 8192) == bytes(latest[:8192])
    os.fsync(d.fd)
    d.close()
    assert read_backing(bdev) == bytes(latest)
    assert pc.status()["failed"] >= 3


@pytest.mark.guarantee("G16")
def test_cache_writeback_and_clean_stop(env):
    """A full cache writes its oldest records back; a clean stop (suspend or
    removal without a cut) writes everything back."""
    dm, bdev, pc, d, latest = fresh_dev(env, "pct8", "gt8", 10, max_cached=2048)
    for t in range(16):
        d.write(t + 1, t * 262144, 262144, latest)   # 4 MiB through a 1 MiB cache
    d.close()
    host.wait_for(lambda: pc.status()["cached_sectors"] <= 2048, timeout=30,
                   what="the cache to write back below max_cached")
    bk = read_backing(bdev)
    assert bk[:1 << 20] == bytes(latest[:1 << 20]), "oldest records not written back"
    pc.remove()
    assert read_backing(bdev) == bytes(latest)


@pytest.mark.guarantee("G16")
def test_bad_table_and_messages(env):
    """Bad dm-pcut tables and messages are refused."""
    dm, backing = env
    bdev = backing()
    for t in (f"0 100 pcut {bdev}", f"0 100 pcut {bdev} g x", "0 100 pcut /dev/nonexistent g 1",
              f"0 100 pcut {bdev} {'g' * 40} 1"):
        with pytest.raises(dmlib.DMError):
            dm.create("pct9", t)
    pc = pcut.Pcut(dm, "pct9", bdev, "gt9", 11)
    for m in ("keep 101", "torn x", "cut_after 0", "fail_flush 2", "bogus", "delay_us"):
        with pytest.raises(dmlib.DMError):
            pc.message(m)
    rdev = os.stat(bdev).st_rdev
    assert dmlib.params(dm.table("pct9")) == f"{os.major(rdev)}:{os.minor(rdev)} gt9 11"
