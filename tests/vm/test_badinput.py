# SPDX-License-Identifier: GPL-2.0
"""dm-nxd against bad input: table lines, messages, sysfs values, control
device requests, unprivileged callers and corrupt on-disk metadata.

Every refusal must come with the constructor's message in the kernel log
(`device-mapper: table: <dev>: nxd: <message>`), leave no dm device, no
nxd volume (NXD_IOC_LIST) and no change on the devices; nothing may oops
(the conftest dmesg check).  Data checks compare with what the test wrote.
"""
import errno
import hashlib
import json
import os
import random
import struct

import pytest

from nxdt import blkdev, ctl, facts, host, nxdvol, ondisk, rawio
from nxdt.facts import BLOCK, KiB, MiB
from nxdt.dmlib import DMError
from nxdt.host import run
from nxdt.nxdvol import refuse, Volume
from nxdt.ondisk import check_log_matches_writes
from nxdt.workloads import check, fill, seg_expect, seg_setup
from nxdt.badinput import RT_REMOVED, bad_lines, stats_req

HDD_MB = 64
SSD_MB = 8


@pytest.fixture
def pair(loopdev, nullb):
    """A blank HDD (64 MiB loop) and SSD (8 MiB null_blk)."""
    return loopdev(HDD_MB), nullb(SSD_MB)


@pytest.mark.guarantee("G10")
def test_table_lines_refused(dm, pair):
    """Bad table lines (argument counts, unknown options, missing values,
    out-of-range and malformed numbers, watermark order, missing devices)
    are each refused with their message and change nothing; the devices
    still work afterwards."""
    hdd, ssd = pair
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    lines = bad_lines(hdd, ssd, L)
    # The first few through a create, which must leave no device behind;
    # the rest loaded into one existing device, whose live table must stay
    # (the same constructor refuses them; a load sends no uevent, a failed
    # create two, and udev's work on them was most of this test's time).
    dm.create("nxdbadh", f"0 {L} error")
    for i, (line, msg) in enumerate(lines):
        refuse(dm, line, msg, devs=(hdd, ssd), load=None if i < 4 else "nxdbadh")
    dm.remove("nxdbadh")
    # The devices are still usable: the same line without the error works.
    v = Volume(dm, "nxdok", hdd, ssd, ["write_threshold", "1G", "low_watermark", "100",
                                    "high_watermark", "100"])
    opts = nxdvol.table_opts(v.table())
    assert opts["write_threshold"] == str(1 << 30)
    assert opts["low_watermark"] == opts["high_watermark"] == "100"
    v.remove()


@pytest.mark.guarantee("G10")
def test_table_boundaries_accepted(dm, pair):
    """The largest accepted values and size suffixes (so that the refusals
    above are about the value, not the syntax)."""
    hdd, ssd = pair
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    for opts, want in [
        (["write_threshold", "64K", "mode", "auto"],
         {"write_threshold": "65536", "mode": "auto"}),
        (["write_threshold", "1073741824", "destage_rate", "1000000"],
         {"write_threshold": "1073741824", "destage_rate": "1000000"}),
        (["WRITE_THRESHOLD", "0", "mode", "passthrough", "low_watermark", "0",
          "high_watermark", "0"],
         {"write_threshold": "0", "mode": "passthrough", "low_watermark": "0",
          "high_watermark": "0"}),
        (["mode", "log_all", "ssd_discard", "0", "drain_on_suspend", "1"],
         {"mode": "log_all", "ssd_discard": "0", "drain_on_suspend": "1"}),
    ]:
        v = Volume(dm, "nxdok", hdd, ssd, opts, length=L)
        got = nxdvol.table_opts(v.table())
        for k, val in want.items():
            assert got[k] == val, (opts, got)
            assert v.sget(k) == val
        v.remove()


@pytest.mark.guarantee("G10", "G9")
def test_ssd_minimum_size(dm, loopdev):
    """2080 KiB (8 metadata blocks + 4 segments) is the smallest SSD: 4 KiB
    less is refused, exactly that much works and keeps data."""
    made = []
    try:
        hdd = loopdev(HDD_MB)
        small = blkdev.loop_bytes(2076 * KiB, made)
        L = facts.data_sectors(blkdev.dev_sectors(hdd))
        refuse(dm, f"0 {L} nxd {hdd} {small}",
               r"SSD smaller than the minimum log size \(2080 KiB\)", devs=(hdd, small))
        tiny = blkdev.loop_bytes(2 * MiB, made)
        refuse(dm, f"0 {L} nxd {hdd} {tiny}", r"SSD smaller than the minimum", devs=(hdd, tiny))
        ok = blkdev.loop_bytes(2080 * KiB, made)
        v = Volume(dm, "nxdmin", hdd, ok)
        st = v.status()
        assert st["log_blocks"] == 512, st
        rng = random.Random(11)
        model = bytearray(4 * MiB)
        with rawio.Fd(v.dev) as f:
            # 3 MiB of small writes through a 2 MiB log: it fills and wraps.
            for i in range(768):
                off = rng.randrange(1024) * BLOCK
                d = rng.randbytes(BLOCK)
                f.pwrite(off, d)
                model[off:off + BLOCK] = d
            f.fsync()
        check(v, model)
        v.recreate()
        check(v, model)
        v.remove()
    finally:
        for d, p in reversed(made):
            blkdev.loop_destroy(d, p)


@pytest.mark.guarantee("G10")
def test_hdd_too_small_for_length(dm, loopdev, nullb):
    """A length above the HDD's data area, and a 1 MiB HDD, are refused; the
    exact maximum length is accepted."""
    hdd = loopdev(HDD_MB)
    ssd = nullb(SSD_MB)
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    assert L == (HDD_MB - 1) * 2048
    for bad in (L + 1, L + 8, L + 2048, blkdev.dev_sectors(hdd)):
        refuse(dm, f"0 {bad} nxd {hdd} {ssd}",
               "Volume larger than the HDD less its 1 MiB label area", devs=(hdd, ssd))
    made = []
    try:
        one = blkdev.loop_bytes(MiB, made)            # no room at all beside the label
        refuse(dm, f"0 8 nxd {one} {ssd}", "Volume larger than the HDD", devs=(one, ssd))
    finally:
        for d, p in made:
            blkdev.loop_destroy(d, p)
    v = Volume(dm, "nxdlen", hdd, ssd, length=L)
    assert blkdev.dev_sectors(v.dev) == L
    v.remove()


@pytest.mark.guarantee("G10")
def test_same_device_twice(dm, loopdev, nullb):
    """HDD and SSD the same device, by path and by major:minor, are refused."""
    hdd = loopdev(HDD_MB)
    st = os.stat(hdd)
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    refuse(dm, f"0 {L} nxd {hdd} {hdd}", "HDD and SSD are the same device", devs=(hdd,))
    # Same device under two names.
    mm = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    refuse(dm, f"0 {L} nxd {hdd} {mm}", "HDD and SSD are the same device", devs=(hdd,))


@pytest.mark.guarantee("G10")
def test_ssd_with_foreign_data(dm, pair):
    """An SSD holding other data (random, or one non-zero byte) is refused as
    not an nxd log; `format` takes it and writes both superblock copies; a
    blank SSD with a labelled HDD is refused."""
    hdd, ssd = pair
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    junk = random.Random(5).randbytes(8192)
    rawio.pwrite_dev(ssd, 0, junk)
    refuse(dm, f"0 {L} nxd {hdd} {ssd}",
           "SSD holds data that is not an nxd log: add 'format'", devs=(hdd, ssd))
    # A single non-zero byte in block 1 is enough.
    rawio.pwrite_dev(ssd, 0, bytes(8192))
    rawio.flip_byte(ssd, 4096 + 4095, 0x01)
    refuse(dm, f"0 {L} nxd {hdd} {ssd}", "SSD holds data that is not an nxd log",
           devs=(hdd, ssd))
    # 'format' takes it.
    v = Volume(dm, "nxdfmt", hdd, ssd, ["format"])
    assert "format" not in v.table()
    v.remove()
    sbs = ondisk.read_sbs(ssd)
    assert sbs[0] and sbs[1], "format did not write both superblock copies"
    # A blank SSD with an HDD that carries a label: refused, not formatted.
    rawio.pwrite_dev(ssd, 0, bytes(2 * BLOCK))
    refuse(dm, f"0 {L} nxd {hdd} {ssd}",
           "HDD belongs to an nxd volume but the SSD has no log", devs=(hdd, ssd))


@pytest.mark.guarantee("G10")
def test_ssd_log_of_another_volume(dm, loopdev, nullb):
    """An SSD log with an HDD that is not its own is refused, whatever the
    HDD holds; afterwards both volumes still assemble with their data."""
    hdd_a, ssd_a = loopdev(HDD_MB), nullb(SSD_MB)
    hdd_b, ssd_b = loopdev(HDD_MB), nullb(SSD_MB)
    hdd_c = loopdev(HDD_MB)             # blank
    hdd_s = loopdev(HDD_MB // 2)        # blank and smaller
    a = Volume(dm, "nxda", hdd_a, ssd_a)
    a.pause()
    model_a = fill(a, 21)
    a.remove()
    b = Volume(dm, "nxdb", hdd_b, ssd_b)
    model_b = fill(b, 22)
    b.remove()
    ua = ondisk.newest_sb(ssd_a)[1]["vol_uuid"]
    ub = ondisk.newest_sb(ssd_b)[1]["vol_uuid"]
    L = facts.data_sectors(blkdev.dev_sectors(hdd_a))
    lines = refuse(dm, f"0 {L} nxd {hdd_b} {ssd_a}",
                   "SSD log and HDD label belong to different volumes",
                   devs=(hdd_b, ssd_a, hdd_a, ssd_b))
    # Both volumes are named: the SSD log's, then the HDD label's.
    assert any(ondisk.uuid_str(ua) in ln and ondisk.uuid_str(ub) in ln
               and ln.find(ondisk.uuid_str(ua)) < ln.find(ondisk.uuid_str(ub)) for ln in lines), lines
    refuse(dm, f"0 {L} nxd {hdd_a} {ssd_b}",
           "SSD log and HDD label belong to different volumes", devs=(hdd_a, ssd_b))
    refuse(dm, f"0 {L} nxd {hdd_c} {ssd_a}",
           "HDD has no nxd label: this SSD log belongs to a different HDD", devs=(hdd_c, ssd_a))
    Ls = facts.data_sectors(blkdev.dev_sectors(hdd_s))
    refuse(dm, f"0 {Ls} nxd {hdd_s} {ssd_a}",
           "HDD is smaller than this SSD log's volume", devs=(hdd_s, ssd_a))
    a.recreate()
    check(a, model_a)
    b = Volume(dm, "nxdb", hdd_b, ssd_b)
    check(b, model_b)


@pytest.mark.guarantee("G10")
def test_second_volume_over_active_devices(dm, loopdev, nullb):
    """The HDD or the SSD of a live volume is refused for another volume; the
    live volume is unchanged."""
    hdd, ssd = loopdev(HDD_MB), nullb(SSD_MB)
    hdd2, ssd2 = loopdev(HDD_MB), nullb(SSD_MB)
    a = Volume(dm, "nxdact", hdd, ssd, ["write_threshold", "32768", "destage_rate", "7"])
    a.pause()
    model = fill(a, 31)
    table0, tun0 = a.table(), a.tunables()
    L = a.length
    for h, s in ((hdd, ssd2), (hdd2, ssd), (hdd, ssd)):
        refuse(dm, f"0 {L} nxd {h} {s} 2 write_threshold 4096",
               "HDD or SSD already used by another nxd volume", devs=(hdd2, ssd2))
    assert a.table() == table0 and a.tunables() == tun0
    assert a.status()["state"] == "ok"
    check(a, model)
    # The devices are still free for a volume of their own.
    b = Volume(dm, "nxdother", hdd2, ssd2)
    b.remove()


@pytest.mark.guarantee("G10")
def test_refused_reload_changes_nothing(dm, pair):
    """A reload of an active volume that the constructor refuses ('format'
    while active) must leave the live volume as it was: table, tunables
    (sysfs), data."""
    hdd, ssd = pair
    a = Volume(dm, "nxdrl", hdd, ssd, ["write_threshold", "32768", "mode", "auto"])
    a.pause()
    model = fill(a, 41)
    table0, tun0 = a.table(), a.tunables()
    refuse(dm, a.line(["write_threshold", "4096", "mode", "log_all", "format"]),
           "Refusing to format the log of an active volume", load=a.name)
    assert a.table() == table0, "refused reload changed the live table line"
    assert a.tunables() == tun0, "refused reload changed the live tunables"
    check(a, model)
    a.recreate()
    check(a, model)


@pytest.mark.guarantee("G10")
def test_read_threshold_refused(dm, pair):
    """read_threshold was removed: a table line naming it (as printed by
    versions that had it) is refused with its own message, as a reload of
    a live volume, which keeps its table, tunables, counters and data, and
    for a new device; the option shows nowhere (table, sysfs, list)."""
    hdd, ssd = pair
    a = Volume(dm, "nxdrt", hdd, ssd, ["write_threshold", "32768", "mode", "auto"])
    a.pause()
    model = fill(a, 43)
    table0, tun0 = a.table(), a.tunables()
    w = table0.split()
    assert w[5] == "24" and "read_threshold" not in w, table0
    assert nxdvol.table_opts(table0) == tun0, (table0, tun0)
    assert not os.path.exists(a.sysfs("read_threshold"))
    st0 = a.status()
    # The 16-argument line of the old TABLE format, as a saved
    # `dmsetup table` would have it.
    old = w[:5] + ["16"] + w[6:8] + ["read_threshold", "0"] + w[8:]
    refuse(dm, " ".join(old), RT_REMOVED, load=a.name)
    refuse(dm, a.line(["write_threshold", "4096", "read_threshold", "1M",
                       "mode", "log_all"]), RT_REMOVED, load=a.name)
    # A new device over the same pair: refused for the option first.
    refuse(dm, a.line(["read_threshold", "0"]), RT_REMOVED)
    assert a.table() == table0, "refused reload changed the live table line"
    assert a.tunables() == tun0, "refused reload changed the live tunables"
    st = a.status()
    # Counters only foreground I/O or a new table would move (the
    # destager may still cover unheaded direct segments while paused).
    for k in ("state", "log_blocks", "writes_logged", "writes_direct",
              "ssd_errors", "hdd_errors", "recovered_segments", "degraded"):
        assert st[k] == st0[k], (k, st0, st)
    lv = next(x for x in ctl.list_vols()[2] if x["name"] == a.name)
    assert lv["reserved0"] == 0 and lv["write_threshold"] == 32768, lv
    check(a, model)
    # The same line without read_threshold loads.
    a.dm.reload(a.name, " ".join(w))
    assert a.table() == table0 and a.tunables() == tun0
    check(a, model)


@pytest.mark.guarantee("G10")
def test_messages_refused(dm, pair):
    """Unknown messages and arguments get EINVAL and a kernel message; drain
    while suspended gets EBUSY at once and keeps the log."""
    hdd, ssd = pair
    v = Volume(dm, "nxdmsg", hdd, ssd)
    v.pause()
    model = fill(v, 51, MiB)
    for msg in (["frobnicate"], ["drain", "now"], ["pause_destage", "1"], ["resume"]):
        marker = host.kmsg_mark(f"message {msg}")
        p = run(["dmsetup", "message", v.name, "0", *msg], check=False)
        assert p.returncode != 0, f"message {msg} accepted"
        assert "Invalid argument" in p.stderr, p.stderr
        assert host.wait_kmsg(marker, r"nxd: .*unrecognised message"), msg
    assert v.status()["index_entries"] > 0
    # drain while suspended: EBUSY, right away, and the log is kept.
    v.dm.suspend(v.name)
    try:
        p = run(["dmsetup", "message", v.name, "0", "drain"], check=False, timeout=60)
        assert p.returncode != 0 and "busy" in p.stderr.lower(), (p.returncode, p.stderr)
        st = v.status()
        assert st["state"] == "suspended" and st["index_entries"] > 0, st
    finally:
        v.dm.resume(v.name)
    v.drain()
    st = v.status()
    assert st["index_entries"] == 0 and st["log_used_blocks"] == 0, st
    check(v, model)


SYSFS_BAD = [
    ("write_threshold", ["abc", "-1", "99999999999999999999", "1073741825", "2G",
                         "12abc", "64KB", "0x10", "1.5", "\n", " ", "1" * 40]),
    ("mode", ["bogus", "auto2", "\n"]),
    ("low_watermark", ["101", "-1", "76", "18446744073709551617"]),  # 76 > high (75)
    ("high_watermark", ["24", "101", "abc"]),                       # 24 < low (25)
    ("destage_rate", ["1000001", "-3", "99999999999999999999"]),
    ("ssd_discard", ["2", "-1", "yes"]),
    ("drain_on_suspend", ["2", "x"]),
    ("stream_share", ["91", "100", "-1", "x"]),     # the log must still drain
]


@pytest.mark.guarantee("G10")
def test_sysfs_bad_values(dm, pair):
    """Bad values for the tunables get EINVAL and change nothing; read-only
    attributes refuse writes; good values with a suffix or a newline are
    accepted."""
    hdd, ssd = pair
    v = Volume(dm, "nxdsys", hdd, ssd)
    tun0, table0 = v.tunables(), v.table()
    assert tun0["write_threshold"] == "65536" and tun0["low_watermark"] == "25"
    n = 0
    for key, vals in SYSFS_BAD:
        for val in vals:
            e = v.sset(key, val)
            assert e == errno.EINVAL, f"{key}={val!r}: errno {e}, want EINVAL"
            assert v.tunables() == tun0, f"{key}={val!r} changed something"
            assert v.table() == table0
            n += 1
    for key in ("state", "log_used_pct"):
        e = v.sset(key, "ok")
        assert e in (errno.EACCES, errno.EPERM), (key, e)
    assert not os.path.exists(v.sysfs("read_threshold"))
    assert v.sset("read_threshold", "0") == errno.ENOENT
    assert v.sget("state") == "ok"
    # Good values still work (also with a suffix or a newline).
    assert v.sset("write_threshold", "128K\n") == 0
    assert v.sget("write_threshold") == "131072"
    assert nxdvol.table_opts(v.table())["write_threshold"] == "131072"
    assert v.sset("low_watermark", "75") == 0 and v.sset("high_watermark", "75") == 0
    assert n >= 30


@pytest.mark.guarantee("G10", "G13")
def test_control_bad_requests(dm, pair):
    """Control-device requests with a bad version, flags, reserved fields,
    names, device numbers or sizes get EINVAL or ENODEV; buffers are never
    written past the size given; bad addresses get EFAULT, foreign ioctl
    numbers ENOTTY."""
    hdd, ssd = pair
    v = Volume(dm, "nxdio", hdd, ssd)
    fill(v, 61, MiB)
    ma, mi = v.devnum()
    vdev = ctl.encode_dev(ma, mi)
    fd = os.open(ctl.CONTROL, os.O_RDONLY)
    G, L = ctl.GET_STATS, ctl.LIST
    try:
        # A good request, by name and by device number.
        b = stats_req(ctl.STATS_SIZE, name=v.name)
        assert ctl.ioctl(fd, G, b) == 0
        st = ctl.parse_stats(b.get())
        assert st["size"] == ctl.STATS_SIZE and st["dev"] == vdev
        assert st["counters"]["writes_logged"] > 0
        assert all(r == 0 for r in st["reserved"])
        b = stats_req(ctl.STATS_SIZE, name="whatever-name", dev=vdev)
        assert ctl.ioctl(fd, G, b) == 0, "dev must select the volume when set"

        cases = [
            (dict(name=v.name, version=0), errno.EINVAL),
            (dict(name=v.name, version=2), errno.EINVAL),
            (dict(name=v.name, version=0xFFFFFFFF), errno.EINVAL),
            (dict(name=v.name, flags=2), errno.EINVAL),
            (dict(name=v.name, flags=3), errno.EINVAL),
            (dict(name=v.name, flags=0x80000000), errno.EINVAL),
            (dict(name=v.name, reserved=1), errno.EINVAL),
            (dict(name=b"A" * ctl.NAME_LEN), errno.EINVAL),     # unterminated
            (dict(name=b"A" * (ctl.NAME_LEN - 1)), errno.ENODEV),
            (dict(name="nosuch"), errno.ENODEV),
            (dict(name=""), errno.ENODEV),
            (dict(dev=ctl.encode_dev(1, 3)), errno.ENODEV),      # /dev/null
            (dict(dev=ctl.encode_dev(ma, mi + 1000)), errno.ENODEV),
        ]
        for kw, want in cases:
            b = stats_req(ctl.STATS_SIZE, **kw)
            got = ctl.ioctl(fd, G, b)
            assert got == want, f"GET_STATS {kw}: errno {got}, want {want}"
        for size in (0, 1, 8, ctl.HDR_SIZE - 1):
            b = stats_req(size, bufsize=ctl.STATS_SIZE, name=v.name)
            assert ctl.ioctl(fd, G, b) == errno.EINVAL, size

        # Short and long requests: the kernel fills min(size, its size) and
        # never writes past it.
        for size in (ctl.HDR_SIZE, 1000, ctl.STATS_SIZE - 8):
            b = stats_req(size, bufsize=ctl.STATS_SIZE + 512, name=v.name)
            assert ctl.ioctl(fd, G, b) == 0, size
            out = b.get()
            assert struct.unpack_from("<I", out, 0)[0] == size
            assert out[size:] == b"\xa5" * (len(out) - size), f"wrote past size {size}"
        for size in (ctl.STATS_SIZE + 8, 8192, 0xFFFFFFFF):
            b = stats_req(size, bufsize=8192, name=v.name)
            assert ctl.ioctl(fd, G, b) == 0, size
            out = b.get()
            assert struct.unpack_from("<I", out, 0)[0] == ctl.STATS_SIZE
            assert out[ctl.STATS_SIZE:] == b"\xa5" * (8192 - ctl.STATS_SIZE)

        # Bad addresses: EFAULT, nothing else.
        assert ctl.ioctl(fd, G, 0) == errno.EFAULT
        g = ctl.RawBuf(ctl.HDR_SIZE, guard=True, at_end=True)
        g.put(ctl.hdr(ctl.STATS_SIZE, name=v.name))
        assert ctl.ioctl(fd, G, g) == errno.EFAULT       # header ok, rest unmapped
        assert ctl.ioctl(fd, G, g.addr + ctl.HDR_SIZE) == errno.EFAULT

        # Commands that are not ours.
        for cmd in (ctl.IOC(3, 0xDC, 1, ctl.STATS_SIZE), ctl.IOC(2, 0xDB, 1, ctl.STATS_SIZE),
                    ctl.IOC(1, 0xDB, 1, ctl.STATS_SIZE), ctl.IOC(0, 0xDB, 1, 0),
                    ctl.IOC(3, 0xDB, 0, ctl.STATS_SIZE), ctl.IOC(3, 0xDB, 4, ctl.STATS_SIZE),
                    ctl.IOC(3, 0xDB, 255, ctl.STATS_SIZE), 0x80081272, 0x1261):
            b = stats_req(ctl.STATS_SIZE, name=v.name)
            assert ctl.ioctl(fd, cmd, b) == errno.ENOTTY, hex(cmd)
        # The size in the number does not matter (hdr.size versions the ABI).
        b = stats_req(ctl.STATS_SIZE, name=v.name)
        assert ctl.ioctl(fd, ctl.IOC(3, 0xDB, 1, 0), b) == 0
        # NXD_IOC_GET_AUTO (nr 3): no flags, a known volume.
        A = ctl.IOC(3, 0xDB, 3, ctl.STATS_SIZE)
        assert ctl.ioctl(fd, A, stats_req(ctl.HDR_SIZE, name=v.name)) == 0
        assert ctl.ioctl(fd, A, stats_req(ctl.HDR_SIZE, name=v.name, flags=1)) == errno.EINVAL
        assert ctl.ioctl(fd, A, stats_req(ctl.HDR_SIZE, name="nosuch")) == errno.ENODEV

        # LIST
        b = ctl.RawBuf(ctl.LIST_SIZE)
        b.put(ctl.hdr(ctl.LIST_SIZE))
        assert ctl.ioctl(fd, L, b) == 0
        count, total, vols = ctl.list_vols(fd)
        assert count == total >= 1 and any(x["name"] == v.name for x in vols)
        for kw, want in ((dict(flags=1), errno.EINVAL), (dict(version=2), errno.EINVAL),
                         (dict(reserved=7), errno.EINVAL),
                         (dict(name=b"B" * ctl.NAME_LEN), errno.EINVAL)):
            b = ctl.RawBuf(ctl.LIST_SIZE)
            b.put(ctl.hdr(ctl.LIST_SIZE, **kw))
            assert ctl.ioctl(fd, L, b) == want, kw
        b = ctl.RawBuf(ctl.LIST_SIZE)
        b.put(b"\xa5" * ctl.LIST_SIZE)
        b.put(ctl.hdr(ctl.LIST_VOLS_OFF - 1))
        assert ctl.ioctl(fd, L, b) == errno.EINVAL
        b.put(ctl.hdr(ctl.LIST_VOLS_OFF))
        assert ctl.ioctl(fd, L, b) == 0
        out = b.get()
        c, t = struct.unpack_from("<II", out, ctl.HDR_SIZE)
        assert c == t == total
        assert out[ctl.LIST_VOLS_OFF:] == b"\xa5" * (ctl.LIST_SIZE - ctl.LIST_VOLS_OFF)
    finally:
        os.close(fd)
    # Still answering, and the reset (root) works.
    assert ctl.get_stats(v.name, reset=True)["counters"]["writes_logged"] > 0
    assert ctl.get_stats(v.name)["counters"]["writes_logged"] == 0


# ---------------------------------------------------------- non-root ----

NOBODY_SCRIPT = r"""
import errno, fcntl, json, os, struct
HDR = "<IIIIQ128s"
out = {}
def req(size, name, flags):
    b = bytearray(max(size, 2048))
    struct.pack_into(HDR, b, 0, size, 1, flags, 0, 0, name.encode().ljust(128, b"\0"))
    return b
def call(fd, cmd, buf):
    try:
        fcntl.ioctl(fd, cmd, buf, True)
        return 0
    except OSError as e:
        return e.errno
try:
    fd = os.open("/dev/nxd-control", os.O_RDONLY)
except OSError as e:
    out["open_ro"] = e.errno
else:
    out["open_ro"] = 0
    b = req(%(stats)d, "%(name)s", 0)
    out["stats"] = call(fd, %(get)d, b)
    out["writes"] = struct.unpack_from("<Q", b, 152 + 8 * 4)[0]
    b = req(%(stats)d, "%(name)s", 1)
    out["reset"] = call(fd, %(get)d, b)
    b = req(%(list)d, "", 0)
    out["list"] = call(fd, %(lst)d, b)
    out["list_total"] = struct.unpack_from("<I", b, 156)[0]
    os.close(fd)
try:
    os.close(os.open("/dev/nxd-control", os.O_RDWR))
    out["open_rw"] = 0
except OSError as e:
    out["open_rw"] = e.errno
try:
    fd = os.open("%(sysfs)s", os.O_WRONLY)
    try:
        os.write(fd, b"4096")
        out["sysfs_write"] = 0
    except OSError as e:
        out["sysfs_write"] = e.errno
    os.close(fd)
except OSError as e:
    out["sysfs_write"] = e.errno
with open("%(sysfs)s") as f:
    out["sysfs_read"] = f.read().strip()
print(json.dumps(out))
"""


@pytest.mark.guarantee("G10", "G13")
def test_unprivileged_caller(dm, pair):
    """As nobody: the 0640 root:root control node is refused; with its group,
    statistics and list are readable, reset gets EPERM, O_RDWR is refused;
    sysfs writes and dmsetup message are refused."""
    hdd, ssd = pair
    v = Volume(dm, "nxdnobody", hdd, ssd)
    fill(v, 71, MiB)
    st0 = os.stat(ctl.CONTROL)
    script = NOBODY_SCRIPT % dict(stats=ctl.STATS_SIZE, list=ctl.LIST_SIZE, get=ctl.GET_STATS,
                                  lst=ctl.LIST, name=v.name,
                                  sysfs=v.sysfs("write_threshold"))
    try:
        os.chown(ctl.CONTROL, 0, 0)
        os.chmod(ctl.CONTROL, 0o640)
        p = host.as_nobody(script)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["open_ro"] == errno.EACCES, r          # 0640 root:root
        assert r["sysfs_write"] in (errno.EACCES, errno.EPERM), r
        assert r["sysfs_read"] == "65536"

        os.chown(ctl.CONTROL, 0, 65534)                   # the group of the caller
        writes = ctl.get_stats(v.name)["counters"]["writes_logged"]
        p = host.as_nobody(script)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        assert r["open_ro"] == 0 and r["stats"] == 0, r
        assert r["writes"] == writes, r
        assert r["reset"] == errno.EPERM, r
        assert r["list"] == 0 and r["list_total"] >= 1, r
        assert r["open_rw"] == errno.EACCES, r
        # The refused reset cleared nothing.
        assert ctl.get_stats(v.name)["counters"]["writes_logged"] == writes
        # Not through dm's control node either.
        p = host.as_nobody("import subprocess,sys; sys.exit(subprocess.run(['dmsetup','message',"
                        f"'{v.name}','0','drain']).returncode)")
        assert p.returncode != 0
        assert v.sget("write_threshold") == "65536"
    finally:
        os.chown(ctl.CONTROL, st0.st_uid, st0.st_gid)
        os.chmod(ctl.CONTROL, st0.st_mode & 0o7777)


# ---------------------------------------------- corrupt on-disk metadata ---

@pytest.fixture
def filled(dm, pair):
    """A volume with logged and direct data, removed cleanly: (hdd, ssd, model)."""
    hdd, ssd = pair
    v = Volume(dm, "nxdmeta", hdd, ssd)
    v.pause()
    model = fill(v, 81)
    st = v.status()
    assert st["index_entries"] > 0, st
    v.remove()
    return hdd, ssd, model


@pytest.mark.guarantee("G7")
@pytest.mark.parametrize("which,where", [("newest", "crc"), ("older", "crc"),
                                         ("newest", "magic"), ("older", "magic")])
def test_one_superblock_copy_corrupt(dm, filled, which, where):
    """With the newest or the older superblock copy damaged (checksum or magic)
    the volume assembles from the other, its data intact, and survives
    another cycle."""
    hdd, ssd, model = filled
    i, sb = ondisk.newest_sb(ssd)
    victim = i if which == "newest" else 1 - i
    # crc: a byte of the volume UUID (covered by the checksum); magic: byte 1.
    rawio.flip_byte(ssd, victim * BLOCK + (30 if where == "crc" else 1))
    v = Volume(dm, "nxdmeta", hdd, ssd)
    check(v, model)
    st = v.status()
    assert st["state"] == "ok", st
    # The copy written by this activation went to the damaged block: both
    # are valid again, and the volume survives another cycle.
    v.recreate()
    check(v, model)


@pytest.mark.guarantee("G7", "G10")
@pytest.mark.parametrize("where,msg", [
    ("crc", "SSD superblock corrupt in both copies"),
    ("magic", "SSD holds data that is not an nxd log"),
])
def test_both_superblock_copies_corrupt(dm, filled, where, msg):
    """With both superblock copies damaged the table is refused; restoring the
    blocks brings the volume back."""
    hdd, ssd, model = filled
    saved = rawio.pread_dev(ssd, 0, 2 * BLOCK)
    for c in (0, 1):
        rawio.flip_byte(ssd, c * BLOCK + (30 if where == "crc" else 1))
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    refuse(dm, f"0 {L} nxd {hdd} {ssd}", msg, devs=(hdd, ssd))
    rawio.pwrite_dev(ssd, 0, saved)
    v = Volume(dm, "nxdmeta", hdd, ssd)
    check(v, model)


NEWER_FORMAT = "nxd metadata of a format this module does not know: load a newer dm-nxd, do not 'format'"


@pytest.mark.guarantee("G7", "G10")
@pytest.mark.parametrize("where", ["superblocks", "label"])
def test_newer_format_version_refused(dm, filled, where):
    """Metadata of an unknown (newer) format version, checksums valid, in
    both superblock copies or in the HDD label, is refused with a message
    that says to load a newer module and not to format (the corrupt-copies
    message suggests 'format', which would throw the log away); restored,
    the data are intact."""
    hdd, ssd, model = filled
    offs = [(ssd, 0), (ssd, BLOCK)] if where == "superblocks" else \
        [(hdd, nxdvol.hdd_label_offset(hdd))]
    saved = [rawio.pread_dev(d, o, BLOCK) for d, o in offs]
    for d, o in offs:
        ondisk.set_version(d, o, 99)
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    refuse(dm, f"0 {L} nxd {hdd} {ssd}", NEWER_FORMAT, devs=(hdd, ssd))
    for (d, o), b in zip(offs, saved):
        rawio.pwrite_dev(d, o, b)
    v = Volume(dm, "nxdmeta", hdd, ssd)
    check(v, model)


@pytest.mark.guarantee("G7", "G10")
def test_hdd_label_corrupt(dm, filled):
    """One byte of the HDD label changed (magic, UUID, reserved) is refused;
    restored, the data is intact."""
    hdd, ssd, model = filled
    off = nxdvol.hdd_label_offset(hdd)
    saved = rawio.pread_dev(hdd, off, BLOCK)
    assert struct.unpack_from("<Q", saved)[0] == ondisk.LABEL_MAGIC
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    for pos in (1, 20, 4000):       # magic, volume UUID, reserved (crc only)
        rawio.flip_byte(hdd, off + pos)
        refuse(dm, f"0 {L} nxd {hdd} {ssd}",
               "HDD has no nxd label: this SSD log belongs to a different HDD", devs=(hdd, ssd))
        rawio.pwrite_dev(hdd, off, saved)
    v = Volume(dm, "nxdmeta", hdd, ssd)
    check(v, model)


# Segment-level corruption: workloads.seg_setup's twelve writes, one segment
# each; segment #CUT is the one corrupted.
CUT = 6


def _dev_sha(dev):
    """sha256 of a whole device, read around the page cache."""
    h = hashlib.sha256()
    size = blkdev.dev_size_bytes(dev)
    for off in range(0, size, 4 * MiB):
        h.update(rawio.pread_dev(dev, off, min(4 * MiB, size - off)))
    return h.hexdigest()


@pytest.mark.guarantee("G7", "G10")
def test_clean_log_ending_early_refused(dm, pair):
    """After a clean stop, the last segment's header damaged: the CLEAN
    superblock vouches for the log up to head_seq, so the activation is
    refused, the kernel log names the lost segment and the way on
    (accept_log_loss), and neither device changed (whole-device sha256
    before and after, the refused table removed).  With accept_log_loss
    the volume comes up with the segments before it, its data as the
    writes before the lost one left it."""
    hdd, ssd = pair
    v, base, writes = seg_setup(dm, hdd, ssd, "nxdseg", 91)
    v.remove()                                  # clean shutdown
    i, sb = ondisk.newest_sb(ssd)
    assert sb["flags"] & 1, sb
    segs = check_log_matches_writes(ssd, sb, writes)
    last = segs[-1]
    assert last["seq"] + 1 == sb["head_seq"], (last["seq"], sb)
    rawio.flip_byte(ssd, last["ssd_off"] + 4000)            # header checksum breaks
    before = {d: _dev_sha(d) for d in (hdd, ssd)}
    marker = host.kmsg_mark("clean log cut")
    with pytest.raises(DMError):
        v.create()
    seq = last["seq"]
    hits = host.wait_kmsg(marker, rf"nxd recovery: \S+: clean SSD log ends early at seg {seq} "
                          rf"\(pos {last['pos']}\): segs {seq}-{seq} lost")
    log = "\n".join(host.dmesg_since(marker))
    assert hits, log
    assert "reload with 'accept_log_loss' to continue without them" in log, log
    dm.remove(v.name, missing_ok=True)
    assert {d: _dev_sha(d) for d in (hdd, ssd)} == before, "the refused activation wrote"
    v.recreate(opts="accept_log_loss")
    st = v.status()
    assert st["recovered_segments"] == len(writes) - 1, st
    check(v, seg_expect(base, writes[:-1]))


@pytest.mark.guarantee("G7", "G5")
@pytest.mark.parametrize("what", ["header", "data"])
def test_segment_corrupt_after_crash(dm, loopdev, nullb, what):
    """Crash images (both devices copied while the volume is live): recovery
    checks every data checksum, stops at the damaged segment, and after a
    new activation writes over the cut, segments of the old generation that
    lie where the chain continues are not replayed."""
    hdd, ssd = loopdev(HDD_MB), nullb(SSD_MB)
    hdd2, ssd2 = loopdev(HDD_MB), nullb(SSD_MB)
    hdd3, ssd3 = loopdev(HDD_MB), nullb(SSD_MB)
    v, base, writes = seg_setup(dm, hdd, ssd, "nxdcrash", 92)
    blkdev.copy_dev(ssd, ssd2, SSD_MB * MiB)
    blkdev.copy_dev(hdd, hdd2, HDD_MB * MiB)
    v.remove()
    i, sb = ondisk.newest_sb(ssd2)
    assert not sb["flags"] & 1, "the crash image has a clean superblock"
    segs = check_log_matches_writes(ssd2, sb, writes)
    if what == "header":
        rawio.flip_byte(ssd2, segs[CUT]["ssd_off"] + 4000)
    else:
        rawio.flip_byte(ssd2, segs[CUT]["ssd_off"] + BLOCK + 100)   # first data block
    v2 = Volume(dm, "nxdcrash2", hdd2, ssd2)
    st = v2.status()
    assert st["recovered_segments"] == CUT, st
    check(v2, seg_expect(base, writes[:CUT]))
    # One new segment of the same size lands where segment CUT was, so the
    # old segment CUT + 1 sits exactly where the chain continues, with the
    # sequence number it expects; only its generation tells it apart.
    v2.pause()
    new = (14 * BLOCK, random.Random(93).randbytes(2 * BLOCK))
    with rawio.Fd(v2.dev) as f:
        f.pwrite(*new)
        f.fsync()
    # (v2's destager may have reclaimed the recovered segments already: the
    # segments are found by position, the counts taken from the superblock.)
    i2, sb2 = ondisk.newest_sb(ssd2)
    fresh = ondisk.parse_seg(rawio.pread_dev(ssd2, segs[CUT]["ssd_off"], BLOCK))
    stale = ondisk.parse_seg(rawio.pread_dev(ssd2, segs[CUT + 1]["ssd_off"], BLOCK))
    assert fresh and fresh["gen"] == sb2["gen"] and fresh["seq"] == segs[CUT]["seq"], fresh
    assert ondisk.data_recs(fresh) == [(14, 0xFF), (15, 0xFF)], fresh
    assert stale and stale["seq"] == fresh["seq"] + 1 and stale["gen"] < sb2["gen"], \
        "layout assumption broken"
    blkdev.copy_dev(ssd2, ssd3, SSD_MB * MiB)
    blkdev.copy_dev(hdd2, hdd3, HDD_MB * MiB)
    v2.remove()
    i3, sb3 = ondisk.newest_sb(ssd3)
    assert not sb3["flags"] & 1 and sb3["tail_seq"] <= fresh["seq"], sb3
    v3 = Volume(dm, "nxdcrash3", hdd3, ssd3)
    st = v3.status()
    assert st["recovered_segments"] == fresh["seq"] - sb3["tail_seq"] + 1, (st, sb3)
    check(v3, seg_expect(base, writes[:CUT] + [new]))


@pytest.mark.guarantee("G10")
def test_inactive_table_and_clear(dm, pair):
    """A table that is loaded but never resumed: the volume is known to the
    control device, holds its devices against other volumes, has no sysfs
    directory yet; `dmsetup clear` and remove drop it without a trace."""
    hdd, ssd = pair
    n0 = ctl.list_vols()[1]
    run(["dmsetup", "create", "nxdinact", "--notable"])
    dm.created.append("nxdinact")
    # No table yet: udev makes no /dev/mapper link; find dm-N from the minor.
    minor = int(run(["dmsetup", "info", "-c", "--noheadings", "-o", "minor", "nxdinact"]).stdout)
    kname = f"dm-{minor}"
    L = facts.data_sectors(blkdev.dev_sectors(hdd))
    run(["dmsetup", "load", "nxdinact"], input=f"0 {L} nxd {hdd} {ssd} 2 write_threshold 8K\n")
    count, total, vols = ctl.list_vols()
    assert total == n0 + 1 and any(x["name"] == "nxdinact" for x in vols), vols
    st = ctl.get_stats("nxdinact")
    assert st["counters"]["log_blocks"] == 0      # no active table: no gauges
    assert os.path.isdir(f"/sys/block/{kname}/dm")
    assert not os.path.exists(f"/sys/block/{kname}/nxd")
    refuse(dm, f"0 {L} nxd {hdd} {ssd}", "HDD or SSD already used by another nxd volume")
    run(["dmsetup", "clear", "nxdinact"])
    assert ctl.list_vols()[1] == n0
    run(["dmsetup", "load", "nxdinact"], input=f"0 {L} nxd {hdd} {ssd}\n")
    run(["dmsetup", "remove", "nxdinact"])
    dm.created.remove("nxdinact")
    assert ctl.list_vols()[1] == n0
    # The devices are free again and hold a volume.
    v = Volume(dm, "nxdafter", hdd, ssd)
    assert v.status()["state"] == "ok"
