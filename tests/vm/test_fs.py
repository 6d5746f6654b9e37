# SPDX-License-Identifier: GPL-2.0
"""File systems on dm-nxd over an md RAID6 with a null_blk SSD log: the
"under a parallel file system" checks (Lustre OSTs are XFS-like or ldiskfs,
an ext4 with OST options, on a RAID6).

  - geometry: the volume exports the md array's io_min/io_opt, mkfs.xfs
    picks su/sw from them and mke2fs stride/stripe_width;
  - a mixed workload (a few thousand small files extracted from the host's
    /usr/include, appends, overwrites, fsync, renames, deletes, new small
    files, a random-4K "database" file and a large sequential file) with
    `drain` messages in the background and write_threshold changed midway,
    checked against a sha256 manifest built from the sources, after which
    xfs_repair -n / e2fsck -fn are clean and a remount verifies again;
  - online operations: growing the HDD, then the volume (a longer table,
    which moves the HDD label at resume) and XFS under a live mount,
    detaching the SSD (drain, table switched to linear) and attaching a new
    one (format);
  - a power cut: writes to the HDD and the SSD dropped at one instant
    (dm-flakey drop_writes under both), then recovery at table load, the
    file system's log replay, fsck, and every file fsynced before the cut.

Environment:
  NXD_FS_BIG_MB   size of the large sequential file (default 100: above
                  the 64 MiB SSD, so the 1 MiB-threshold phase fills the log)
  NXD_FS_FILES    small files extracted from NXD_FS_SRC (default 2000)
  NXD_FS_SRC      source tree of the small files (default /usr/include)
"""
import os
import re
import time

import pytest

from nxdt import blkdev, host, nxdvol
from nxdt.blkdev import md_grow_members
from nxdt.ctl import NXDCTL
from nxdt.facts import data_sectors, MiB, parse_status
from nxdt.fstack import (CrashWriters, Drainer, Fs, MNT, phase, sha, sha_file, Stack, T0,
                         to_linear, Tree)
from nxdt.host import CmdError, Kmsg, run
from nxdt.nxdvol import nxd_line, nxd_sysfs
from nxdt.fstack import NFILES, crash_setup_fs, workload

# 6 x 300 MiB members: a 1196 MiB RAID6 (4 data disks).  mkfs.xfs ignores
# the device's stripe geometry below 1 GiB, so the volume must be above it.
BIG_DISKS, BIG_DISK_MB = 6, 300
# The other tests only need room for XFS's 300 MB minimum.
SMALL_DISKS, SMALL_DISK_MB = 4, 200


@pytest.fixture(autouse=True)
def _t0():
    T0[0] = time.monotonic()


@pytest.fixture
def fsmount(dm):
    """Unmounts (and thaws) whatever a test left mounted at MNT, before the
    dm devices under it are removed."""
    made = []

    def make(kind, dev):
        f = Fs(kind, dev)
        made.append(f)
        return f
    yield make
    for f in made:
        if f.frozen:
            run(["fsfreeze", "-u", MNT], check=False)
    if os.path.ismount(MNT):
        for _ in range(20):
            p = run(["umount", MNT], check=False)
            if p.returncode == 0:
                break
            time.sleep(0.5)
        else:
            holders = run(f"fuser -vm {MNT} 2>&1", check=False).stdout
            raise AssertionError(f"cannot unmount {MNT}: {p.stderr.strip()}\n{holders}")


@pytest.fixture
def big_stack(dm, md_raid6, nullb):
    return Stack(dm, md_raid6, nullb, BIG_DISKS, BIG_DISK_MB)


@pytest.mark.guarantee("G14", "G1")
@pytest.mark.parametrize("kind", ["xfs", "ext4"])
def test_fs_workload_on_raid6(kind, big_stack, fsmount):
    """Geometry hints reach mkfs; the mixed workload with background drains
    and threshold changes verifies against the manifest, fsck is clean, and a
    remount verifies again."""
    st = big_stack
    su, sw = st.check_geometry()
    fs = fsmount(kind, st.dev)
    if kind == "ext4":
        # mke2fs finds the geometry by itself too (dry run, writes nothing;
        # only verbose output shows the stride).
        dry = run(["mkfs.ext4", "-n", "-v", "-F", "-b", "4096", st.dev]).stdout
        m = re.search(r"Stride=(\d+) blocks, Stripe width=(\d+) blocks", dry)
        assert m and (int(m.group(1)) * 4096, int(m.group(2)) * 4096) == (su, sw), dry
        # OST-like bytes-per-inode, but with inodes enough for our files.
        ratio = MiB
        while ratio > 16384 and blkdev.dev_size_bytes(st.dev) // ratio < 2 * (NFILES + 1500):
            ratio //= 2
        fs.mkfs(ext4_ratio=ratio)
    else:
        fs.mkfs()
    assert fs.geometry() == (su, sw), f"{kind} geometry {fs.geometry()} != hints {(su, sw)}"
    fs.mount()
    tree = Tree(MNT, seed=11)
    dr, settings = workload(st, fs, tree)
    s = st.status()
    assert s["state"] == "ok" and s["degraded"] == 0 and s["ssd_errors"] == 0, s
    assert s["writes_logged"] > 0 and s["writes_direct"] > 0, s
    assert s["destaged_blocks"] > 0 and s["segments_reclaimed"] > 0, s
    assert dr.drains > 0 and dr.max_used > 0, (dr.drains, dr.max_used)
    n = tree.verify()                   # cold cache: log and HDD pieces
    fs.umount()
    fs.check()
    fs.mount()
    assert tree.verify() == n
    fs.umount()
    print(f"{kind}: {n} files, ops {tree.counts}, thresholds {settings}, "
          f"{dr.drains} drains (log peak {dr.max_used} blocks), status {s}")


@pytest.mark.guarantee("G12", "G14")
def test_fs_grow_hdd(dm, md_raid6, nullb, fsmount):
    """Growing the RAID under a mounted file system: `format` of the active
    volume stays refused; a longer nxd table, loaded and resumed with the
    file system live and the log holding blocks, moves the HDD label to the
    new end; xfs_growfs then grows the file system, and everything written
    before and after verifies, fsck is clean."""
    st = Stack(dm, md_raid6, nullb, SMALL_DISKS, SMALL_DISK_MB)
    fs = fsmount("xfs", st.dev)
    fs.mkfs(discard=False)
    fs.mount()
    tree = Tree(MNT, seed=21)
    tree.extract(300)
    tree.db_file(size=8 * MiB, writes=600)
    tree.big_file("big/a.bin", 32)
    old_len = st.length
    new_md = md_grow_members(st.md, st.members, SMALL_DISK_MB + 100)
    new_len = data_sectors(new_md)
    assert new_len > old_len

    k = Kmsg("grow: format active")
    with pytest.raises(CmdError):
        dm.load(st.NAME, nxd_line(st.md, st.ssd, new_len, ["format"]))
    assert k.grep(r"Refusing to format the log of an active volume"), k.lines()
    run(["dmsetup", "clear", st.NAME])
    assert blkdev.dev_sectors(st.dev) == old_len
    dm.message(st.NAME, "pause_destage")
    tree.new_small(100)
    os.sync()
    assert st.status()["log_used_blocks"] > 0

    k = Kmsg("grow: longer table")
    dm.reload(st.NAME, nxd_line(st.md, st.ssd, new_len))
    assert k.grep(rf"grew volume .* from {old_len} to {new_len} data sectors"), k.lines()
    assert blkdev.dev_sectors(st.dev) == new_len
    assert st.status()["state"] == "ok"
    fs.grow()
    assert os.statvfs(MNT).f_blocks * os.statvfs(MNT).f_frsize > old_len * 512
    tree.new_small(200, into="after-grow")
    tree.big_file("big/b.bin", 48)
    tree.verify()
    fs.umount()
    fs.check()
    fs.mount()
    tree.verify()
    fs.umount()


@pytest.mark.guarantee("G12", "G14")
def test_fs_detach_ssd_then_new_ssd(dm, md_raid6, nullb, fsmount):
    """Online SSD removal: freeze, drain, table switched to `linear` over the
    HDD (same length), thaw; the file system keeps working, fscks clean and
    verifies.  Then a new SSD is attached with `format`, and the volume is
    removed and assembled again from its devices."""
    st = Stack(dm, md_raid6, nullb, SMALL_DISKS, SMALL_DISK_MB)
    fs = fsmount("xfs", st.dev)
    fs.mkfs(discard=False)
    fs.mount()
    dm.message(st.NAME, "pause_destage")     # the log holds data at the switch
    tree = Tree(MNT, seed=31)
    tree.extract(400)
    tree.appends(100)
    tree.db_file(size=8 * MiB, writes=800)
    tree.big_file("big/a.bin", 24)
    before = st.status()
    assert before["index_entries"] > 0 and before["log_used_blocks"] > 0, before

    to_linear(dm, st, fs, st.length)        # drains even while paused
    assert dm.table(st.NAME).split()[2] == "linear"
    tree.new_small(150, into="on-linear")
    tree.overwrites(50)
    tree.verify()
    fs.umount()
    fs.check()
    fs.mount()
    tree.verify()

    # A new SSD, formatted while the file system stays mounted.
    new_ssd = nullb(32, discard=1, irqmode=0)
    k = Kmsg("attach new ssd")
    dm.load(st.NAME, nxd_line(st.md, new_ssd, st.length, ["format"]))
    dm.suspend(st.NAME)
    dm.resume(st.NAME)
    assert k.grep(r"formatted volume"), k.lines()
    tree.new_small(200, into="new-ssd")
    tree.db_file(rel="db/t2.dat", size=4 * MiB, writes=400)
    s = parse_status(dm.status(st.NAME))
    assert s["state"] == "ok" and s["writes_logged"] > 0, s
    tree.verify()
    fs.umount()
    # Remove and assemble again from the two devices (clean shutdown).
    dm.remove(st.NAME)
    k = Kmsg("reassemble")
    dm.create(st.NAME, nxd_line(st.md, new_ssd, st.length))
    assert k.grep(r"recovered .* \(clean\)"), k.lines()
    fs.check()
    fs.mount()
    tree.verify()
    fs.umount()


@pytest.mark.guarantee("G12", "G14")
def test_fs_drain_on_suspend_then_linear(dm, md_raid6, nullb, fsmount):
    """drain_on_suspend=1 is documented to leave "the HDD alone up to date"
    once the volume is suspended (dm-nxd(4)).  With a mounted file system the
    plain way to take the SSD out is then one table reload to linear: its
    suspend drains (presuspend), freezes the file system (dm lockfs), drains
    the freeze's writes (postsuspend) and swaps.  The file system must then
    be complete on the HDD alone."""
    st = Stack(dm, md_raid6, nullb, SMALL_DISKS, SMALL_DISK_MB)
    fs = fsmount("xfs", st.dev)
    fs.mkfs(discard=False)
    fs.mount()
    nxd_sysfs(st.dev, "drain_on_suspend", 1)
    tree = Tree(MNT, seed=51)
    tree.extract(300)
    tree.new_small(300)                     # the last ones still dirty in the cache
    dm.suspend(st.NAME)                     # drain, lockfs, drain again
    after = st.status()
    dm.load(st.NAME, f"0 {st.length} linear {st.md} {nxdvol.hdd_data_offset(st.md) // 512}")
    dm.resume(st.NAME)
    fs.umount()
    problems = []
    if after["log_used_blocks"] or after["index_entries"]:
        problems.append(f"log after the suspend: {after['log_used_blocks']} blocks used, "
                        f"{after['index_entries']} index entries")
    p = run(["xfs_repair", "-n", st.dev], check=False)
    if p.returncode:
        problems.append(f"xfs_repair -n exit {p.returncode}")
    try:
        fs.mount()
        tree.verify()
        fs.umount()
    except (CmdError, AssertionError) as e:
        problems.append(f"mount/verify on the HDD alone: {str(e)[:300]}")
    assert not problems, "; ".join(problems)


@pytest.mark.guarantee("G5", "G14")
@pytest.mark.parametrize("kind", ["xfs", "ext4"])
def test_fs_power_cut(kind, dm, md_raid6, nullb, fsmount):
    """Writes to the HDD and the SSD are dropped from one instant on (both
    dm-linear views switched to flakey drop_writes in one suspend), while
    fsync'ing writers and background drains run.  The volume is then torn
    down, the views restored and the volume assembled again: recovery runs
    (unclean), the file system replays its log, fsck is clean, and every file
    fsynced before the cut has its content."""
    host.modprobe("dm-flakey")
    st = Stack(dm, md_raid6, nullb, SMALL_DISKS, SMALL_DISK_MB, ssd_mb=32, views=True)
    fs = crash_setup_fs(kind, st, fsmount)
    tree = Tree(MNT, seed=41)
    tree.extract(300)
    tree.db_file(size=4 * MiB, writes=300)
    run(["sync", "-f", MNT])
    w = CrashWriters(MNT, seed=42)
    with Drainer(dm, st.NAME, pause=1.0) as dr:
        w.start()
        try:
            phase("writers running")
            time.sleep(float(os.environ.get("NXD_FS_CRASH_AFTER", "8")))
            committed, seq = w.snapshot()
            t_cut = time.monotonic()
            pre = st.status()
            # The cut: both views suspended together (noflush: queued bios
            # wait), flakey drop_writes loaded, both resumed.
            phase("power cut")
            dm.load("fshddv", st._view_line(st.md, "flakey"))
            dm.load("fsssdv", st._view_line(st.ssd_base, "flakey"))
            run(["dmsetup", "suspend", "--noflush", "--nolockfs", "fshddv", "fsssdv"])
            run(["dmsetup", "resume", "fshddv", "fsssdv"])
            time.sleep(1.5)                 # writers carry on into the void
        finally:
            dr.abort()
            w.stop()
    # After the cut the devices no longer keep what they acknowledge, which
    # no real power cut lets anyone see: dm-nxd may find a log segment gone
    # and degrade, the file system may shut down.  Only errors before count.
    assert not w.errors_before(t_cut), w.errors
    fs.shutdown()                           # no log flush, no more I/O
    fs.umount()
    dm.remove(st.NAME)                      # its clean-shutdown writes are dropped too
    for view, base in (("fshddv", st.md), ("fsssdv", st.ssd_base)):
        dm.reload(view, st._view_line(base, "linear"))
    assert committed, "no file was fsynced before the cut"
    assert pre["log_used_blocks"] > 0 or pre["writes_logged"] > 0, pre

    k = Kmsg("assemble after the cut")
    dm.create(st.NAME, nxd_line(st.hdd, st.ssd, st.length))
    rec = k.grep(r"recovered \d+ segments")
    assert rec and "unclean shutdown" in rec[-1], k.lines()
    s = st.status()
    assert s["state"] == "ok", s
    k = Kmsg("fs log replay")
    fs.mount()
    log = "\n".join(k.lines())
    if kind == "xfs":
        assert "Starting recovery" in log and "Ending recovery" in log, log
    else:
        assert "recovery complete" in log, log
    fs.umount()
    fs.check()
    fs.mount()
    tree.verify(skip=("crash/", "seq/"))    # synced before the writers started
    bad = []
    for rel, idx in committed.items():
        p = os.path.join(MNT, rel)
        got = sha_file(p) if os.path.exists(p) else None
        if got not in w.hist[rel][idx:]:
            bad.append((rel, idx, len(w.hist[rel]), got))
    for rel, (n, want) in seq.items():
        p = os.path.join(MNT, rel)
        if not os.path.exists(p) or os.path.getsize(p) < n:
            bad.append((rel, n, "short"))
            continue
        with open(p, "rb") as f:
            if sha(f.read(n)) != want:
                bad.append((rel, n, "prefix"))
    fs.umount()
    assert not bad, f"{len(bad)} fsynced files lost or wrong after the cut: {bad[:10]}"
    print(f"{kind} cut: {len(committed)} small + {len(seq)} seq files durable at the cut, "
          f"{dr.drains} drains, recovery: {rec[-1]}")


@pytest.mark.guarantee("G12")
def test_assemble_after_hdd_grew(dm, md_raid6, nullb):
    """`nxdctl assemble` finds a volume by its SSD before and after the md
    array under it grew (the kernel itself still accepts the volume at its
    formatted length)."""
    if not os.access(NXDCTL, os.X_OK):
        pytest.skip("tools/nxdctl not built (make tools)")
    md = md_raid6(ndisks=4, disk_mb=64)
    ssd = nullb(16, discard=1, irqmode=0)
    length = data_sectors(blkdev.dev_sectors(md))
    dm.create("fsasm", nxd_line(md, ssd, length))
    dm.remove("fsasm")

    def assemble():
        p = run([NXDCTL, "assemble", ssd, "--name", "fsasm"], check=False)
        if dm.exists("fsasm"):
            dm.created.append("fsasm")
            dm.remove("fsasm")
        return p

    p = assemble()
    assert p.returncode == 0, f"before the grow: {p.stdout}{p.stderr}"
    md_grow_members(md, md_raid6.members[md], 96)
    dm.create("fsasm", nxd_line(md, ssd, length))     # the kernel: fine
    dm.remove("fsasm")
    p = assemble()
    assert p.returncode == 0, f"after the grow: {p.stdout}{p.stderr}"
