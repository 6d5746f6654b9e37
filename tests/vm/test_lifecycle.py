# SPDX-License-Identifier: GPL-2.0
"""nxdctl's lifecycle verbs on real devices (docs/admin-guide.md, sections 7
and 8): detach, attach, replace-ssd and grow, with an XFS mounted on the
volume the whole time.

  - test_lifecycle_xfs: files with checksums written first (part of them
    still in the log), then `nxdctl detach` while a writer creates and
    fsyncs files: the table is linear at the same length, the file system
    still mounted, every file verifies, the old SSD keeps its superblock;
    `nxdctl attach` of a fresh SSD: nxd again, new small writes are logged;
    `nxdctl replace-ssd` with a third SSD under a writer: the same; the HDD
    (a loop device) grows, `nxdctl grow`, xfs_growfs, files verify; at the
    end xfs_repair -n is clean and a remount verifies again.
  - test_lifecycle_refusals: no file system; what the verbs refuse and that
    a refusal or --dry-run leaves the table as it was.
  - test_lifecycle_detach_timeout: a drain that cannot end in time leaves
    the nxd table live.
"""
import os
import time

import pytest

from nxdt import blkdev, facts, host, nxdvol, ondisk, rawio
from nxdt.blkdev import grow_loop
from nxdt.host import run
from nxdt.ctl import nxdctl
from nxdt.lifecycle import Files, MNT, NAME, Writer, majmin, phase, status, table, udev_role


@pytest.fixture
def mnt(dm):
    """Unmounts MNT before the dm devices under it are removed."""
    os.makedirs(MNT, exist_ok=True)
    yield MNT
    if os.path.ismount(MNT):
        for _ in range(20):
            if run(["umount", MNT], check=False).returncode == 0:
                break
            time.sleep(0.5)


@pytest.mark.guarantee("G12", "G14")
def test_lifecycle_xfs(dm, loopdev, nullb, mnt):
    hdd = loopdev(400)
    ssd1, ssd2, ssd3 = nullb(64), nullb(64), nullb(64)
    p = nxdctl("create", NAME, hdd, ssd1)
    dm.created.append(NAME)
    host.wait_for(lambda: os.path.exists(dm.path(NAME)), what=dm.path(NAME))
    dev = dm.path(NAME)
    length = table(dm)["len"]
    assert length == facts.data_sectors(blkdev.dev_sectors(hdd)), p.stdout

    run(["mkfs.xfs", "-f", "-K", dev])
    run(["mount", "-t", "xfs", dev, MNT])
    files = Files(seed=61)
    files.small(150, "before")
    files.big("big/a.bin", 16)
    dm.message(NAME, "pause_destage")        # the log holds data at the switch
    files.small(100, "logged")
    s = status(dm)
    assert s["log_used_blocks"] > 0 and s["index_entries"] > 0, s

    # ---- detach under a writer ----
    phase("detach")
    with Writer(files, "during-detach") as w:
        w.wait(20)
        p = nxdctl("detach", NAME, "--timeout", 600)
        w.wait(20)
    assert not w.errors, w.errors
    assert "draining: log" in p.stderr, p.stderr
    assert "detached" in p.stdout, p.stdout
    t = table(dm)
    assert t["type"] == "linear" and t["len"] == length, t
    assert t["args"] == [majmin(hdd), str(nxdvol.hdd_data_offset(hdd) // 512)], t
    assert os.path.ismount(MNT)
    n = files.verify()
    assert udev_role(ssd1) == "ssd", "the detached SSD lost its superblock"
    print(f"detach: {w.n} files written by the writer, {n} verified")

    # ---- attach a fresh SSD ----
    phase("attach")
    p = nxdctl("attach", NAME, ssd2)
    t = table(dm)
    assert t["type"] == "nxd" and t["len"] == length, t
    assert t["args"][:2] == [majmin(hdd), majmin(ssd2)], t
    before = status(dm)
    assert before["state"] == "ok", before
    files.small(100, "after-attach")
    after = status(dm)
    assert after["writes_logged"] > before["writes_logged"], (before, after)
    files.verify()

    # ---- replace-ssd under a writer ----
    phase("replace-ssd")
    dm.message(NAME, "pause_destage")
    files.small(50, "logged2")
    assert status(dm)["log_used_blocks"] > 0
    with Writer(files, "during-replace") as w:
        w.wait(10)
        p = nxdctl("replace-ssd", NAME, ssd3, "--timeout", 600)
        w.wait(10)
    assert not w.errors, w.errors
    assert "detached" in p.stdout and "attached" in p.stdout, p.stdout
    t = table(dm)
    assert t["type"] == "nxd" and t["len"] == length, t
    assert t["args"][:2] == [majmin(hdd), majmin(ssd3)], t
    assert os.path.ismount(MNT)
    before = status(dm)
    files.small(100, "after-replace")
    after = status(dm)
    assert after["state"] == "ok" and after["writes_logged"] > before["writes_logged"], after
    files.verify()

    # ---- grow ----
    phase("grow")
    p = nxdctl("grow", NAME, check=False)
    assert p.returncode == 1 and "nothing to grow" in p.stderr, p.stderr
    grow_loop(hdd, 480)
    new_len = facts.data_sectors(blkdev.dev_sectors(hdd))
    assert new_len > length
    opts_before = nxdvol.table_opts(dm.table(NAME))
    p = nxdctl("grow", NAME)
    assert f"{length} -> {new_len} sectors" in p.stdout, p.stdout
    assert "xfs_growfs" in p.stdout, p.stdout
    assert blkdev.dev_sectors(dev) == new_len
    assert table(dm)["args"][:2] == [majmin(hdd), majmin(ssd3)]
    assert nxdvol.table_opts(dm.table(NAME)) == opts_before
    blocks = os.statvfs(MNT).f_blocks
    run(["xfs_growfs", MNT])
    assert os.statvfs(MNT).f_blocks > blocks
    files.small(100, "after-grow")
    files.big("big/b.bin", 24)
    files.verify()

    # ---- the end: fsck, remount ----
    phase("fsck")
    run(["umount", MNT])
    r = run(["xfs_repair", "-n", dev], check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    run(["mount", "-t", "xfs", dev, MNT])
    n = files.verify()
    run(["umount", MNT])
    print(f"lifecycle: {n} files verified at the end")


@pytest.mark.guarantee("G12")
def test_ssd_larger_than_the_largest_log(dm, nullb):
    """A 4 TiB SSD (64 MiB of null_blk, then dm `zero`) gets a log of the
    largest size, 128 GiB, and works: writes are logged and read back.
    Without the cap, an SSD of about 410 GiB or more could not be used at
    all: the index allocation passed INT_MAX, kvmalloc refused it with a
    WARN (the autouse dmesg check fails on it) and the table load failed."""
    head = 64 << 11                              # sectors on null_blk
    ssd = dm.create("nxbigssd", [f"0 {head} linear {nullb(64)} 0",
                                 f"{head} {(4096 << 21) - head} zero"])
    v = nxdvol.Volume(dm, "nxbig", nullb(64), ssd)
    _, sb = ondisk.newest_sb(ssd)
    assert sb["ring_blocks"] == 32 << 20, sb
    model = {b: os.urandom(facts.BLOCK) for b in (0, 7, 1000, 4095)}
    with rawio.Fd(v.dev) as f:
        for b, d in model.items():
            f.pwrite(b * facts.BLOCK, d)
        f.fsync()
        assert v.status()["index_entries"] == len(model), v.status()
        for b, d in model.items():
            assert f.pread(b * facts.BLOCK, facts.BLOCK) == d, f"block {b}"
    v.remove()


@pytest.mark.guarantee("G12", "G10")
def test_lifecycle_refusals(dm, loopdev, nullb):
    hdd = loopdev(64)
    ssd, sig, tiny = nullb(32), nullb(32), nullb(1)
    run(["mkfs.ext4", "-q", "-F", sig])
    full = blkdev.dev_sectors(hdd)
    length = facts.data_sectors(full)
    doff = nxdvol.new_data_offset(hdd) // 512       # a new volume's data area

    # A linear volume over the HDD from sector 0: its data would have to
    # move past the label, refused.
    dm.create(NAME, f"0 {length} linear {hdd} 0")
    p = nxdctl("attach", NAME, ssd, check=False)
    assert p.returncode == 1 and str(doff) in p.stderr, p.stderr
    # Past the data area's end: refused.
    dm.reload(NAME, f"0 {full - doff} linear {hdd} {doff}")
    if full - doff > length:
        p = nxdctl("attach", NAME, ssd, check=False)
        assert p.returncode == 1 and f"at most {length}" in p.stderr, p.stderr
    dm.reload(NAME, f"0 {length} linear {hdd} {doff}")
    for args, rc, msg in [
            ((sig,), 1, "holds ext4"),
            ((tiny,), 1, "too small"),
            ((hdd,), 1, ""),
            (("/nonexistent",), 2, ""),
    ]:
        p = nxdctl("attach", NAME, *args, check=False)
        assert p.returncode == rc and msg in p.stderr, (args, p.returncode, p.stderr)
    p = nxdctl("attach", NAME, ssd, "--dry-run")
    assert "format'" in p.stdout, p.stdout
    assert table(dm)["type"] == "linear"
    assert udev_role(ssd) == ""
    for verb in ("grow", "detach"):
        p = nxdctl(verb, NAME, check=False)
        assert p.returncode == 2, (verb, p.stderr)

    nxdctl("attach", NAME, ssd)
    t = table(dm)
    assert t["type"] == "nxd" and t["len"] == length, t
    assert udev_role(ssd) == "ssd"
    p = nxdctl("attach", NAME, sig, check=False)
    assert p.returncode == 1 and "replace-ssd" in p.stderr, p.stderr
    p = nxdctl("grow", NAME, check=False)
    assert p.returncode == 1 and "nothing to grow" in p.stderr, p.stderr
    p = nxdctl("replace-ssd", NAME, ssd, check=False)
    assert p.returncode == 1, p.stderr
    p = nxdctl("replace-ssd", NAME, sig, check=False)
    assert p.returncode == 1 and "holds ext4" in p.stderr, p.stderr
    p = nxdctl("detach", NAME, "--dry-run")
    assert "linear" in p.stdout and table(dm)["type"] == "nxd"
    with open(f"/sys/block/{blkdev.blk_name(dm.path(NAME))}/nxd/drain_on_suspend") as f:
        assert f.read().strip() == "0"

    # Small writes logged (destage paused), then detach: the HDD alone
    # holds them.
    dm.message(NAME, "pause_destage")
    data = os.urandom(64 * 4096)
    for i in range(64):
        rawio.pwrite_dev(dm.path(NAME), i * 8192, data[i * 4096:(i + 1) * 4096])
    assert status(dm)["log_used_blocks"] > 0
    nxdctl("detach", NAME)
    assert table(dm)["type"] == "linear"
    for i in range(64):
        assert rawio.pread_dev(hdd, doff * 512 + i * 8192, 4096) == \
            data[i * 4096:(i + 1) * 4096], i
    # The old SSD, still carrying the superblock, needs --format.
    p = nxdctl("attach", NAME, ssd, check=False)
    assert p.returncode == 1 and "--format" in p.stderr, p.stderr
    nxdctl("attach", NAME, ssd, "--format")
    assert table(dm)["type"] == "nxd"


@pytest.mark.guarantee("G12")
def test_lifecycle_detach_timeout(dm, loopdev, nullb):
    """A drain that cannot finish in time (the HDD behind dm-delay, writes
    delayed 2 s): `detach --timeout 1` gives up, the nxd table stays live
    and drain_on_suspend is set back; once the HDD is fast again detach
    works, and the HDD alone holds what was logged."""
    host.modprobe("dm-delay")
    base, ssd = loopdev(64), nullb(32)
    n = blkdev.dev_sectors(base)

    def delay(ms):
        return f"0 {n} delay {base} 0 0 {base} 0 {ms}"
    hdd = dm.create("lchddv", delay(0))
    nxdctl("create", NAME, hdd, ssd)
    dm.created.append(NAME)
    host.wait_for(lambda: os.path.exists(dm.path(NAME)), what=dm.path(NAME))
    dm.message(NAME, "pause_destage")
    data = os.urandom(64 * 4096)
    for i in range(64):
        rawio.pwrite_dev(dm.path(NAME), i * 8192, data[i * 4096:(i + 1) * 4096])
    assert status(dm)["log_used_blocks"] > 0
    dm.reload("lchddv", delay(2000))
    p = nxdctl("detach", NAME, "--timeout", 1, check=False)
    assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)
    assert "timed out" in p.stderr and "was not detached" in p.stderr, p.stderr
    assert table(dm)["type"] == "nxd"
    assert not dm.is_suspended(NAME)
    with open(f"/sys/block/{blkdev.blk_name(dm.path(NAME))}/nxd/drain_on_suspend") as f:
        assert f.read().strip() == "0"
    dm.reload("lchddv", delay(0))
    assert status(dm)["state"] == "ok"
    nxdctl("detach", NAME, "--timeout", 300)
    assert table(dm)["type"] == "linear"
    for i in range(64):
        assert rawio.pread_dev(base, nxdvol.hdd_data_offset(base) + i * 8192, 4096) == \
            data[i * 4096:(i + 1) * 4096], i
