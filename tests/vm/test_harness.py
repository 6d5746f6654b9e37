# SPDX-License-Identifier: GPL-2.0
"""Checks of the test harness itself: fixtures, helpers, dmesg checker."""

import hashlib
import os
import uuid

import pytest

from nxdt import blkdev, dmlib, host, workloads
from nxdt.host import run
from nxdt.harness import MiB, dm_client


@pytest.mark.guarantee("G16")
def test_module_loaded(nxd_module, dm):
    """dm-nxd.ko of this kernel is loaded and the nxd target registered."""
    assert host.module_loaded("dm_nxd")
    assert host.KVER in nxd_module
    targets = dm.targets().split()
    assert "nxd" in targets, f"target nxd not registered: {targets}"


@pytest.mark.guarantee("G16")
def test_brd_devices(brd):
    """The brd fixture gives NXD_BRD_NR ram disks of NXD_BRD_SIZE_MB each."""
    size_mb = int(os.environ.get("NXD_BRD_SIZE_MB", "256"))
    assert len(brd) == int(os.environ.get("NXD_BRD_NR", "4"))
    for d in brd:
        assert os.path.exists(d)
        assert blkdev.dev_size_bytes(d) == size_mb * MiB
    pattern = os.urandom(4096)
    with open(brd[0], "r+b", buffering=0) as f:
        f.seek(MiB)
        f.write(pattern)
        os.fsync(f.fileno())
        f.seek(MiB)
        assert f.read(4096) == pattern


@pytest.mark.guarantee("G16")
def test_nullb_sizes_and_stat(nullb):
    """The null_blk fixture makes memory-backed devices of the size and block
    size asked, whose I/O counters count what was written."""
    a = nullb(64)
    b = nullb(128, blocksize=4096)
    assert a != b
    assert blkdev.dev_size_bytes(a) == 64 * MiB
    assert blkdev.dev_size_bytes(b) == 128 * MiB
    assert blkdev.logical_block_size(a) == 512
    assert blkdev.logical_block_size(b) == 4096
    r0, w0 = blkdev.io_sectors(a)
    blkdev.wipe(a, 2 * MiB)
    r1, w1 = blkdev.io_sectors(a)
    assert w1 - w0 == 2 * MiB // 512
    # memory_backed: data survives
    data = os.urandom(8192)
    with open(b, "r+b", buffering=0) as f:
        f.write(data)
        os.fsync(f.fileno())
    run(["sh", "-c", "echo 1 > /proc/sys/vm/drop_caches"])
    with open(b, "rb", buffering=0) as f:
        assert f.read(8192) == data


@pytest.mark.guarantee("G16")
def test_loop_devices(loopdev):
    """The loop fixture makes devices of the size and sector size asked."""
    a = loopdev(32)
    b = loopdev(48, sector_size=4096)
    assert a.startswith("/dev/loop") and b.startswith("/dev/loop")
    assert blkdev.dev_size_bytes(a) == 32 * MiB
    assert blkdev.dev_size_bytes(b) == 48 * MiB
    assert blkdev.logical_block_size(b) == 4096
    blkdev.wipe(a, MiB)
    assert blkdev.io_sectors(a)[1] >= MiB // 512


@pytest.mark.guarantee("G16")
def test_md_raid6_assembles(md_raid6):
    """The md_raid6 fixture makes a RAID6 of the disks asked that keeps its
    data when stopped and assembled again."""
    md = md_raid6(ndisks=4, disk_mb=32)
    name = os.path.basename(md)
    with open(f"/sys/block/{name}/md/level") as f:
        assert f.read().strip() == "raid6"
    with open(f"/sys/block/{name}/md/raid_disks") as f:
        assert int(f.read()) == 4
    # two data disks' worth, less the metadata reserve
    size = blkdev.dev_size_bytes(md)
    assert 48 * MiB <= size <= 64 * MiB, size
    data = os.urandom(256 * 1024)
    with open(md, "r+b", buffering=0) as f:
        f.write(data)
        os.fsync(f.fileno())
    # stop and assemble again from the members: data still there
    members = md_raid6.members[md]
    blkdev.md_stop(md)
    run(["mdadm", "--assemble", "--run", md, *members])
    host.wait_for(lambda: os.path.exists(md), what=md)
    with open(md, "rb", buffering=0) as f:
        assert f.read(len(data)) == data
    assert "raid6" in open("/proc/mdstat").read()


@pytest.mark.guarantee("G16")
def test_dmsetup_wrapper(dm, nullb):
    """The dm client, through both transports (the same calls): changes
    by dmsetup (the dm fixture) and by ioctls (dmlib.DMIoctl, nodes in a
    private directory); queries and messages are ioctls in both."""
    dev = nullb(64)
    dm_client(dm, dev)
    d = dmlib.DMIoctl(nodedir="/tmp/nxd-harness/dev")
    try:
        dm_client(d, dev)
        assert not d.created
    finally:
        errs = d.cleanup()
        d.close()
    assert not errs, errs


@pytest.mark.guarantee("G16")
def test_fio_helper(nullb):
    """The fio helper runs a job and reports its bytes and errors."""
    dev = nullb(64)
    res = workloads.run_fio(dev, rw="randwrite", bs="4k", size="4M", iodepth=4)
    s = workloads.fio_summary(res)
    assert s["errors"] == 0
    assert s["write"]["io_bytes"] == 4 * MiB
    assert s["write"]["iops"] > 0
    assert s["read"]["io_bytes"] == 0
    assert workloads.parse_fio_json('fio: note\n{"jobs": []}') == {"jobs": []}


@pytest.mark.guarantee("G16")
def test_dmesg_checker_flags_problems():
    """The kernel-log checker flags WARNING, BUG, oops, Call Trace, general
    protection fault, hung task, UBSAN, KASAN and lockdep lines, passes
    ordinary ones, and honours an allow list."""
    samples = [
        "[   12.5] WARNING: CPU: 1 PID: 77 at drivers/md/dm.c:100 f+0x10/0x20",
        "[   12.6] BUG: kernel NULL pointer dereference, address: 0000000000000008",
        "[   12.7] Oops: 0002 [#1] PREEMPT SMP NOPTI",
        "[   12.8] Call Trace:",
        "[   12.9] general protection fault, probably for non-canonical address",
        "[   13.0] INFO: task kworker/0:1:12 blocked for more than 120 seconds.",
        "[   13.1] UBSAN: shift-out-of-bounds in x.c:1:2",
        "[   13.2] BUG: KASAN: use-after-free in f+0x1/0x2",
        "[   13.3] WARNING: possible circular locking dependency detected",
    ]
    benign = [
        "[    1.0] dm-nxd: loading out-of-tree module taints kernel.",
        "[    1.1] device-mapper: ioctl: 4.47.0-ioctl initialised",
        f"[    1.2] {host.MARK_PREFIX} begin tests/vm/test_x.py::test_oops_path [ab]",
    ]
    assert host.find_kernel_problems(benign + samples) == samples
    assert host.find_kernel_problems(benign) == []
    assert host.find_kernel_problems(samples[:1], allow=[r"drivers/md/dm\.c"]) == []


@pytest.mark.guarantee("G16")
def test_dmesg_marker_roundtrip():
    """A line written to the kernel log after a marker is found by
    dmesg_since(marker)."""
    marker = host.kmsg_mark("harness probe")
    line = f"nxd-harness: probe line {uuid.uuid4().hex}"
    host.kmsg_write(line)
    after = host.dmesg_since(marker)
    assert any(line in a for a in after)
    assert not any(marker in a for a in after)
    assert host.find_kernel_problems(after) == []


@pytest.mark.guarantee("G16")
def test_dmesg_lines_read_as_dmesg_prints():
    """host.dmesg_lines() reads /dev/kmsg itself: the same lines as dmesg(1)
    prints, time stamps, escapes and multi-line records included, up to a
    marker (dmesg runs after it, and the kernel may log more)."""
    marker = host.kmsg_mark("dmesg format probe")
    ours = host.dmesg_lines()
    theirs = host.run(["dmesg"]).stdout.splitlines()

    def upto(lines):
        i = max(j for j, ln in enumerate(lines) if marker in ln)
        return lines[:i + 1]
    assert len(upto(ours)) > 10
    assert upto(ours) == upto(theirs)


@pytest.mark.guarantee("G16")
def test_replay_oracle_orders_plain_after_fua():
    """hdd_mask_legit, test_crash's rule for a plain HDD log entry logged
    after an overlapping FUA entry (dm-log-writes logs plain writes only at
    the next flush), on a made-up workload: point 1 after op 0, then a FUA
    write (op 1) over sector 8, whose older value A is in the SSD's log."""
    from nxdt.logwrites import LogEntry, hdd_mask_legit
    S = 512

    def sec(tag):
        return tag * S

    A, F, C, X, Y, Z = (sec(t) for t in (b"A", b"F", b"C", b"X", b"Y", b"Z"))

    class Wl:
        events = [("w", 8 * S, A), ("s", 8 * S, F), ("w", 8 * S, C),
                  ("w", 24 * S, X), ("s", 24 * S, Y)]
        durable = [(1, 0.0)]

    def h(b):
        return hashlib.blake2b(b, digest_size=8).digest()

    ssd = {h(A), h(Z)}
    legit = hdd_mask_legit(Wl, 64 * S, lambda: ssd)

    def what(r):
        return r[0] if r else None

    plain = LogEntry(0, 8, 8, 0, 0, None)
    # A plain op after the FUA op: log order.
    assert what(legit(8, C, F, plain, 1)) == "keep"
    # A destager copy of the older value: fenced before the FUA write.
    assert what(legit(8, A, F, plain, 1)) == "mask"
    # ... but only an older value of that sector that is in the SSD's log.
    assert hdd_mask_legit(Wl, 64 * S, lambda: set())(8, A, F, plain, 1) is None
    assert legit(8, Z, F, plain, 1) is None
    # A direct plain write, the newest before the FUA op in its window.
    assert what(legit(24, X, Y, plain, 1)) == "mask"
    assert legit(24, A, Y, plain, 1) is None
    # Before the first mark nothing is explained.
    assert legit(8, A, F, plain, -1) is None
