# SPDX-License-Identifier: GPL-2.0
"""GlusterFS on dm-nxd: the product card's "XFS underneath a PFS" layering
with a real parallel file system (tests/vm/nxdt/gluster.py builds it).

One stack for the module: three bricks, each XFS on its own nxd volume over
its own md RAID6 (4 x 170 MiB loop members, chunk 64 KiB) and its own
null_blk SSD (64 MiB); one glusterd; a distributed volume over the three
bricks and a dispersed one (2+1) over the same file systems, both mounted
with the FUSE client.  The tests run in order on it:

  - test_pfs_workload: through both mounts, small files created, written,
    fsync'd, renamed, rewritten and appended, large sequential files, and an
    IOR-like fio pattern of the NytroXD transfer sizes (fio's verify
    headers); every file checked against the sha256 of what was written,
    cold (new client, page cache dropped); each brick's nxd volume logged
    some of Gluster's writes to the SSD and sent others to the array; the
    histograms are printed.
  - test_pfs_brick_killed_and_restarted: a brick process of the dispersed
    volume is SIGKILLed while a writer keeps creating fsync'd files, then
    restarted (volume start force) and healed; a brick of the distributed
    volume likewise, idle; everything verifies.
  - test_pfs_nxd_to_linear_and_back: one brick's nxd volume is drained and
    switched to linear and later attached to its SSD again (a new log),
    with the brick's XFS mounted and a writer running through Gluster all
    along; everything verifies.
  - test_pfs_fsck: Gluster stopped, every brick's xfs_repair -n clean, the
    nxd volumes healthy (no SSD or HDD error, not degraded).

On its own stack (PcutStack), test_pfs_power_cut_pcut: every device under
three bricks (RAID6 members and SSDs) behind dm-pcut, the no-loss tests'
fixture (a volatile write cache, unflushed writes dropped at the cut), one
cut of all of them at once while writers fsync through Gluster; devices
powered on, arrays assembled, nxd recovered, XFS and glusterd started
again; every fsync'd file checked, heal and xfs_repair -n clean.

The power cut of the whole guest with Gluster on top is
scripts/pfs-powercut.sh (two boots, loop devices on 9p: no volatile cache;
`make test-pfs` runs both).

Environment: NXD_PFS_SMALL (small files on the distributed volume, default
120; half as many on the dispersed one), NXD_PFS_BIG_MB (each large file,
default 8).
"""
import multiprocessing
import os
import re
import time

import pytest

from nxdt import blkdev, facts, fstack, gluster, host
from nxdt.gluster import Files, fill_volume, phase
from nxdt.pfsstack import (DISP, DIST, PC_DISP, PC_DIST, PcutStack, Stack, Writer, histograms,
                           mmp_seq, ost_mke2fs_args, pc_durable, pc_writer_main)

NSMALL = int(os.environ.get("NXD_PFS_SMALL", "120"))
BIG_MB = int(os.environ.get("NXD_PFS_BIG_MB", "8"))


@pytest.fixture(scope="module")
def pfs(nxd_module):
    st = Stack()
    try:
        st.build()
    except BaseException:
        st.teardown()
        raise
    yield st
    errors = st.teardown()
    assert not errors, "teardown: " + "; ".join(errors)


@pytest.fixture(autouse=True)
def _t0():
    gluster.T0[0] = time.monotonic()


@pytest.mark.guarantee("G14")
def test_pfs_workload(pfs):
    st = pfs
    t = time.monotonic()
    for seed, vol, nsmall, nbig in ((1, DIST, NSMALL, 2), (2, DISP, NSMALL // 2, 1)):
        st.files[vol], st.ior[vol] = fill_volume(st.mnt(vol), vol, seed, nsmall, nbig, BIG_MB)
    secs = time.monotonic() - t
    st.verify_all()
    for b in st.bricks:
        s = b.status()
        n, nbytes, ns, nbs = gluster.ssd_share(b.stats())
        phase(f"brick {b.i}: {n} writes ({nbytes >> 20} MiB), {ns} to the SSD "
              f"({nbs >> 10} KiB); status {s['state']} logged {s['writes_logged']} "
              f"direct {s['writes_direct']} destaged {s['destaged_blocks']} blocks")
        assert s["state"] == "ok" and not s["ssd_errors"] and not s["hdd_errors"], s
        assert s["writes_logged"] > 0 and s["writes_direct"] > 0, s
        assert 0 < ns < n, (n, ns)
    print(histograms(st))
    print(f"workload: {secs:.0f}s; {st.files[DIST].counts} + {st.files[DISP].counts}, "
          f"IOR {st.ior[DIST].total_bytes()} B per volume")


@pytest.mark.guarantee("G14")
def test_pfs_brick_killed_and_restarted(pfs):
    st = pfs
    g = st.gluster
    assert st.files, "test_pfs_workload did not run"
    # Dispersed volume: one brick of three may go; a writer keeps going.
    path = st.bricks[0].brick_dir(DISP)
    with Writer(st.files[DISP], "during-kill") as w:
        w.wait(10)
        phase(f"SIGKILL brick {path} of {DISP}")
        old = g.kill_brick(DISP, path)
        w.wait(20)
        phase(f"restart the bricks of {DISP}")
        g.restart_bricks(DISP)
        assert g.brick_pid(DISP, path) not in (None, old)
        w.wait(10)
    assert not w.errors, w.errors
    # A new client: the old one's files and locks are closed.
    g.remount(DISP)
    phase(f"heal {DISP}")
    g.heal(DISP)
    # Distributed volume: a brick goes down idle and comes back.
    path = st.bricks[1].brick_dir(DIST)
    phase(f"SIGKILL brick {path} of {DIST}")
    g.kill_brick(DIST, path)
    g.restart_bricks(DIST)
    st.files[DIST].small(20, into="after-kill")
    st.verify_all()
    print(f"writer: {w.n} files through the kill and restart")


@pytest.mark.guarantee("G14", "G12")
def test_pfs_nxd_to_linear_and_back(pfs):
    st = pfs
    assert st.files, "test_pfs_workload did not run"
    b = st.bricks[2]
    with Writer(st.files[DIST], "during-linear") as w1, Writer(st.files[DISP], "during-linear") as w2:
        w1.wait(5)
        w2.wait(5)
        phase(f"brick {b.i}: drain, switch {b.name} to linear (XFS and Gluster live)")
        s = b.to_linear()
        assert b.table_kind() == "linear"
        w1.wait(10)
        w2.wait(10)
        st.files[DIST].small(20, into="on-linear")
        phase(f"brick {b.i}: attach the SSD again (format: a new log)")
        b.to_nxd()
        assert b.table_kind() == "nxd"
        w1.wait(10)
        w2.wait(10)
    assert not (w1.errors or w2.errors), (w1.errors, w2.errors)
    st.files[DISP].small(20, into="after-attach")
    after = b.status()
    assert after["state"] == "ok" and after["writes_logged"] > 0, after
    st.verify_all()
    print(f"status at the switch {s}; after the attach {after}; "
          f"writers {w1.n} + {w2.n} files")


@pytest.mark.guarantee("G14")
def test_pfs_fsck(pfs):
    st = pfs
    assert st.files, "test_pfs_workload did not run"
    st.gluster.stop()
    for b in st.bricks:
        s = b.status()
        assert s["state"] == "ok" and not s["degraded"], s
        assert not s["ssd_errors"] and not s["hdd_errors"], s
        b.umount()
        phase(f"xfs_repair -n brick {b.i}")
        b.fsck()


# ------------------------------------------- power cut under dm-pcut ---

PC_SEED = int(os.environ.get("NXD_PFS_PCUT_SEED", "301"))
# NXD_PFS_PCUT_LIE=1: every pcut device ignores flushes and FUA from the
# writers' start (a lying disk), so this test must fail: the check that it
# can see a loss.
PC_LIE = os.environ.get("NXD_PFS_PCUT_LIE") == "1"


@pytest.mark.guarantee("G14", "G5")
@pytest.mark.watchdog(1500)
def test_pfs_power_cut_pcut(nxd_module):
    """A power cut of every brick's disks at once with Gluster on top.
    Every device under the bricks (the RAID6 members and the SSD of each)
    is a dm-pcut device with a volatile write cache, all in one cut group:
    a verified workload, then writers through both mounts (small files
    fsync'd with their directory; 256 KiB appends fsync'd every MiB) record
    each fsync that returned, and at a seeded group op all fifteen devices
    lose power at once (each unflushed cached write kept with probability
    1/2, torn at 512 B with 1/4; writes in flight lost).  Then the Gluster
    processes are killed, the bricks unmounted, nxd removed and the arrays
    stopped; the devices power on, the arrays are assembled, nxd recovers
    its logs, XFS replays its log, glusterd starts the bricks, both volumes
    are mounted: every file of the workload and every fsync'd file must be
    there with its contents, the dispersed volume heals to 0 pending
    entries, every nxd volume is `ok` without errors and every brick's
    `xfs_repair -n` is clean.  Unlike scripts/pfs-powercut.sh (loop
    devices on 9p, no volatile cache), a missing flush anywhere between
    Gluster and the disks loses data here."""
    import random
    rng = random.Random(PC_SEED)
    st = PcutStack(PC_SEED)
    try:
        st.build()
        g = st.gluster
        files = {}
        for seed, vol in ((PC_SEED, PC_DIST), (PC_SEED + 1, PC_DISP)):
            f = files[vol] = Files(g.mounts[vol], seed=seed)
            f.small(30)
            f.renames(8)
            f.rewrites(8)
            f.big("big/seq0.bin", 4)
        host.run(["sync"])
        for vol in (PC_DIST, PC_DISP):
            g.remount(vol)
        fstack.drop_caches()
        for vol in (PC_DIST, PC_DISP):
            files[vol].verify(g.mounts[vol])
        logs = {}
        procs = []
        stop_ev = multiprocessing.Event()
        for vol, kind in ((PC_DIST, "small"), (PC_DISP, "small"), (PC_DIST, "seq")):
            log = f"{gluster.ROOT}/pcut-{vol}-{kind}.log"
            if os.path.exists(log):
                os.unlink(log)
            logs[(vol, kind)] = log
            procs.append(multiprocessing.Process(
                target=pc_writer_main, args=(g.mounts[vol], f"cut-{kind}", log, kind, stop_ev),
                daemon=True))
        if PC_LIE:
            phase("NXD_PFS_PCUT_LIE: every device ignores flushes from here on")
            for p in st.pcuts:
                p.message("ignore_flush", 1)
        for p in procs:
            p.start()

        def recorded():
            return [sum(1 for ln in open(lg) if ln[0] in "fs") if os.path.exists(lg) else 0
                    for lg in logs.values()]
        host.wait_for(lambda: min(recorded()) >= 5, timeout=600, interval=1,
                       what="every writer past 5 fsyncs")
        n = rng.randint(200, 3000)
        first = st.pcuts[rng.randrange(len(st.pcuts))]
        ops0 = first.status()["group_ops"]
        phase(f"cut of all {len(st.pcuts)} devices at group op {ops0} + {n} "
              f"(writers at {recorded()} fsyncs)")
        first.cut_after(n, 0)
        host.wait_for(lambda: all(p.status()["state"] == "cut" for p in st.pcuts),
                       timeout=900, interval=0.5, what="every pcut device cut")
        cut = {p.name: p.status() for p in st.pcuts}
        phase("cut: " + ", ".join(f"{k} kept {s['kept']} dropped {s['dropped']} torn {s['torn']} "
                                  f"inflight {s['lost_inflight']}" for k, s in cut.items()))
        st.after_cut_down()
        stop_ev.set()
        for p in procs:
            p.join(timeout=300)
            assert not p.is_alive(), "a writer outlived the Gluster processes"
        st.power_on()
        notes = st.recover()
        phase("; ".join(notes))
        for b in st.bricks:
            s = b.status()
            assert s["state"] == "ok" and not s["ssd_errors"] and not s["hdd_errors"], (b.name, s)
        st.start_gluster()
        fstack.drop_caches()
        for vol in (PC_DIST, PC_DISP):
            files[vol].verify(g.mounts[vol], skip=("cut-",))
        bad = []
        nsmall = nseq = 0
        for (vol, kind), log in logs.items():
            small, seq, _errs = pc_durable(log)
            nsmall += len(small)
            nseq += len(seq)
            for rel, want in small.items():
                path = os.path.join(g.mounts[vol], rel)
                got = fstack.sha_file(path) if os.path.exists(path) else None
                if got != want:
                    bad.append((vol, rel, "missing" if got is None else "wrong"))
            for rel, (size, want) in seq.items():
                path = os.path.join(g.mounts[vol], rel)
                if not os.path.exists(path) or os.path.getsize(path) < size:
                    bad.append((vol, rel, f"shorter than {size}"))
                    continue
                with open(path, "rb") as fh:
                    if fstack.sha(fh.read(size)) != want:
                        bad.append((vol, rel, f"first {size} bytes wrong"))
        assert nsmall and nseq, (nsmall, nseq)
        assert not bad, f"{len(bad)} fsync'd files lost or wrong after the cut: {bad[:10]}"
        pending = g.heal(PC_DISP)
        g.stop()
        for b in st.bricks:
            s = b.status()
            assert s["state"] == "ok" and not s["degraded"], (b.name, s)
            assert not s["ssd_errors"] and not s["hdd_errors"], (b.name, s)
            b.umount()
            phase(f"xfs_repair -n brick {b.i} ({b.name})")
            b.fsck()
        print(f"pcut power cut, seed {PC_SEED}: {nsmall} small + {nseq} sequential fsync'd "
              f"files checked; heal {pending}; {'; '.join(notes)}")
    finally:
        errors = st.teardown()
    assert not errors, "teardown: " + "; ".join(errors)


# ------------------------------------------------ Lustre OST stand-in ---


MMP_SEQ_CLEAN = 0xFF4D4D50


@pytest.mark.guarantee("G14")
def test_lustre_ost_standin(dm, md_raid6, nullb):
    """The ldiskfs stand-in of a Lustre OST on dm-nxd: the geometry derived
    from the exported hints of an nxd volume over a 6-disk RAID6 (chunk
    64 KiB: stride 16, stripe width 64), the mke2fs line mkfs.lustre would
    run formatted on the volume (ext4: Debian has no ldiskfs), recorded in
    the superblock, MMP on (failover pair), e2fsck -fn clean, mounted with
    Lustre's OST mount option (the MMP block then shows the mount), a file
    written and read back, clean again."""
    md = md_raid6(ndisks=6, disk_mb=64, chunk_kb=64)
    ssd = nullb(32, discard=1, irqmode=0)
    length = facts.data_sectors(blkdev.dev_sectors(md))
    dev = dm.create("ost0", f"0 {length} nxd {md} {ssd}")
    args, stride, width, _ = ost_mke2fs_args(dev)
    assert (stride, width) == (16, 64), (stride, width)
    host.run(args)
    out = host.run(["dumpe2fs", "-h", dev]).stdout
    for want in (r"^RAID stride:\s+16$", r"^RAID stripe width:\s+64$",
                 r"^Filesystem features:.*\bmmp\b", r"^Filesystem features:.*\bflex_bg\b",
                 r"^Filesystem features:.*\bquota\b", r"^Inode size:\s+512$",
                 r"^Filesystem volume name:\s+lfs01-OST0000$"):
        assert re.search(want, out, re.M), f"{want} not in dumpe2fs -h:\n{out}"
    p = host.run(["e2fsck", "-fn", dev], check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    mnt = f"{gluster.ROOT}/ost0"
    os.makedirs(mnt, exist_ok=True)
    host.run(["mount", "-t", "ext4", "-o", "errors=remount-ro", dev, mnt])
    try:
        data = os.urandom(3 * facts.MiB + 5000)
        with open(f"{mnt}/obj", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # MMP: while mounted, the MMP block carries a live sequence (what
        # the failover partner's mount checks); clean again after umount.
        seq = mmp_seq(dev)
        assert seq not in (None, MMP_SEQ_CLEAN), seq
    finally:
        host.run(["umount", mnt])
    assert mmp_seq(dev) == MMP_SEQ_CLEAN
    fstack.drop_caches()
    host.run(["mount", "-t", "ext4", "-o", "ro", dev, mnt])
    try:
        assert fstack.sha_file(f"{mnt}/obj") == fstack.sha(data)
    finally:
        host.run(["umount", mnt])
    p = host.run(["e2fsck", "-fn", dev], check=False)
    assert p.returncode == 0, p.stdout + p.stderr
    print(" ".join(args))
