# SPDX-License-Identifier: GPL-2.0
"""The on-disk layout of the HDD (docs/on-disk-format.md): a new volume
(format 2) keeps its label in HDD block 0 and its data from a
stripe-aligned offset, so that the raw array never shows the file system
on the volume; a volume of format 1 (data from sector 0, the label at the
end, made by the fault build's fault_skip=16) still activates and keeps
its data.

 - test_raw_array_shows_no_file_system: XFS on a new volume over md
   RAID6; the raw array, while the volume is up and once it is gone (the
   SSD missing at boot), shows no file system to blkid -p, wipefs, findfs
   or mount UUID=; the volume comes back with the data.  The same steps
   on a format 1 volume (the control) do find the XFS on the raw array:
   the checks can see what they look for.
 - test_format1_volume_keeps_working: a format 1 volume, written and
   reloaded by the module under test, keeps its layout and its data; a
   new log for its HDD keeps the layout (the data stay in place).
"""
import hashlib
import os
import struct

import pytest

from nxdt import blkdev, nxdvol, ondisk, rawio
from nxdt.facts import BLOCK, MiB
from nxdt.host import BUILD, run
from nxdt.nxdvol import Volume

MNT = "/tmp/nxd-layout-mnt"     # / is read-only in the guest


def _fs_on_raw(md, fsuuid):
    """What each tool finds of the XFS @fsuuid on the raw array @md: a
    dict of tool -> what it said (none: nothing on @md)."""
    found, raw = {}, os.path.realpath(md)
    blkdev.settle(md)
    # What is on the disks, not md's page cache: the volume writes below
    # it, and an earlier probe's cached blocks (zeros) would hide them.
    run(["blockdev", "--flushbufs", md])
    p = run(["blkid", "-p", "-o", "export", md], check=False)
    if "TYPE=xfs" in p.stdout:
        found["blkid -p"] = p.stdout.strip()
    p = run(["wipefs", "--no-act", md], check=False)
    if "xfs" in p.stdout:
        found["wipefs"] = p.stdout.strip()
    p = run(["findfs", f"UUID={fsuuid}"], check=False)
    if p.returncode == 0 and os.path.realpath(p.stdout.strip()) == raw:
        found["findfs"] = p.stdout.strip()
    os.makedirs(MNT, exist_ok=True)
    p = run(["mount", "-o", "ro,norecovery", f"UUID={fsuuid}", MNT], check=False)
    if p.returncode == 0:
        src = run(["findmnt", "-n", "-o", "SOURCE", MNT]).stdout.strip()
        run(["umount", MNT])
        if os.path.realpath(src) == raw:
            found["mount UUID="] = src
    return found


def _xfs_with_a_file(dev):
    """mkfs.xfs on @dev, one file written and synced: (fs uuid, digest)."""
    run(["mkfs.xfs", "-q", "-f", dev])
    fsuuid = run(["blkid", "-p", "-s", "UUID", "-o", "value", dev]).stdout.strip()
    assert fsuuid, f"no XFS UUID on {dev}"
    os.makedirs(MNT, exist_ok=True)
    run(["mount", dev, MNT])
    data = os.urandom(3 * MiB + 1234)
    with open(f"{MNT}/f", "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    run(["umount", MNT])
    return fsuuid, hashlib.sha256(data).hexdigest()


def _file_digest(dev):
    run(["mount", dev, MNT])
    try:
        with open(f"{MNT}/f", "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    finally:
        run(["umount", MNT])


def _layout_round(dm, md, ssd, name):
    """A new volume on @md: XFS and a file, drained.  Returns what the raw
    array shows with the volume up and once it is gone, and the
    superblock; the file reads back the same after a reload."""
    v = Volume(dm, name, md, ssd)
    fsuuid, digest = _xfs_with_a_file(v.dev)
    v.drain()
    up = _fs_on_raw(md, fsuuid)
    v.remove()
    gone = _fs_on_raw(md, fsuuid)
    _, sb = ondisk.newest_sb(ssd)
    v.recreate()
    assert _file_digest(v.dev) == digest, "the file changed across the reload"
    v.remove()
    return up, gone, sb


def _raid6(md_raid6):
    md = md_raid6(ndisks=6, disk_mb=96)          # io_opt 4 x 64 KiB; XFS wants 300 MB
    io_opt = blkdev.queue_attr(md, "optimal_io_size")
    assert io_opt == 256 << 10, io_opt
    return md, io_opt


@pytest.mark.guarantee("G14")
def test_raw_array_shows_no_file_system(dm, md_raid6, nullb):
    md, io_opt = _raid6(md_raid6)
    up, gone, sb = _layout_round(dm, md, nullb(32), "nxdlay2")
    doff = nxdvol.hdd_data_offset(md)
    assert (sb["version"], sb["label_sector"], sb["data_offset"] * 512) == (2, 0, doff), sb
    assert doff == nxdvol.data_offset_for(io_opt) * 512 and doff % io_opt == 0, doff
    label = rawio.pread_dev(md, 0, BLOCK)
    assert label[:8] == nxdvol.LABEL_MAGIC and struct.unpack_from("<I", label, 12)[0] == 2
    assert not up, f"the raw array shows the volume's XFS while it is up: {up}"
    assert not gone, f"the raw array shows the volume's XFS once it is gone: {gone}"


@pytest.mark.guarantee("G16")
def test_format1_raw_array_shows_the_file_system(dm, md_raid6, nullb, fault_module):
    """The control of the test above: a format 1 volume (fault_skip=16),
    data from sector 0, does show its XFS on the raw array to blkid -p,
    wipefs, findfs and mount UUID= once it is gone."""
    md, _ = _raid6(md_raid6)
    with open(fault_module, "w") as f:
        f.write("16")
    up, gone, sb = _layout_round(dm, md, nullb(32), "nxdlay1")
    assert (sb["version"], sb["data_offset"]) == (1, 0) and sb["label_sector"] > 0, sb
    assert "blkid -p" in up, up          # (wipefs may not open a held device)
    assert set(gone) == {"blkid -p", "wipefs", "findfs", "mount UUID="}, gone


@pytest.mark.guarantee("G4", "G12")
def test_format1_volume_keeps_working(dm, loopdev, nullb, fault_module):
    hdd, ssd = loopdev(64), nullb(32)
    with open(fault_module, "w") as f:
        f.write("16")
    v = Volume(dm, "nxdold", hdd, ssd)
    with open(fault_module, "w") as f:
        f.write("0")
    end = nxdvol.label_offset(blkdev.dev_sectors(hdd))
    assert nxdvol.hdd_label_offset(hdd) == end and nxdvol.hdd_data_offset(hdd) == 0
    model = {b: os.urandom(BLOCK) for b in (0, 1, 77, 4000)}
    with rawio.Fd(v.dev) as f:
        for b, d in model.items():
            f.pwrite(b * BLOCK, d)
        f.fsync()
    v.drain()
    for b, d in model.items():                       # format 1: from sector 0
        assert rawio.pread_dev(hdd, b * BLOCK, BLOCK) == d, f"HDD block {b}"
    v.recreate()
    _, sb = ondisk.newest_sb(ssd)
    assert (sb["version"], sb["label_sector"]) == (1, end // 512), sb
    with rawio.Fd(v.dev, write=False) as f:
        for b, d in model.items():
            assert f.pread(b * BLOCK, BLOCK) == d, f"block {b} after a reload"
    # A new log for this HDD (as attach and replace-ssd make) keeps format 1.
    v.remove()
    ssd2 = nullb(32)
    v2 = Volume(dm, "nxdold2", hdd, ssd2, opts="format")
    _, sb2 = ondisk.newest_sb(ssd2)
    assert (sb2["version"], sb2["label_sector"]) == (1, end // 512), sb2
    with rawio.Fd(v2.dev, write=False) as f:
        for b, d in model.items():
            assert f.pread(b * BLOCK, BLOCK) == d, f"block {b} with a new log"
    v2.remove()


PROBER_BIN = os.path.join(BUILD, "util-linux", "bin")


def _probe(dev):
    """What the patched blkid -p says of @dev: a dict (empty: nothing)."""
    run(["blockdev", "--flushbufs", dev])
    p = run([f"{PROBER_BIN}/blkid", "-p", "-o", "export", dev], check=False)
    assert p.returncode in (0, 2), p          # 2: nothing found
    return dict(ln.split("=", 1) for ln in p.stdout.split() if "=" in ln)


@pytest.mark.guarantee("G14")
@pytest.mark.skipif(not os.access(os.path.join(PROBER_BIN, "blkid"), os.X_OK),
                    reason="the util-linux prober test runs from make test-prober "
                           "(scripts/build-prober.sh builds its blkid and wipefs)")
def test_util_linux_prober(dm, md_raid6, nullb):
    """The libblkid prober of docs/contrib (make test-prober): its blkid -p
    names the raw array and the SSD of a volume with XFS on it as
    nxd_member with the volume's UUIDs and format, not once a byte of the
    label is changed (its checksum), and its wipefs -a leaves both
    without a signature that either blkid finds."""
    md, _ = _raid6(md_raid6)
    ssd = nullb(32)
    v = Volume(dm, "nxdprobe", md, ssd)
    _xfs_with_a_file(v.dev)
    v.drain()
    v.remove()
    _, sb = ondisk.newest_sb(ssd)
    vol, hdd = ondisk.uuid_str(sb["vol_uuid"]), ondisk.uuid_str(sb["hdd_uuid"])
    want = {"TYPE": "nxd_member", "USAGE": "other", "VERSION": "2",
            "UUID": vol, "UUID_SUB": hdd}
    for dev in (md, ssd):
        got = _probe(dev)
        assert {k: got.get(k) for k in want} == want, f"{dev}: {got}"
    # The checksum is checked: one changed byte of the label and the
    # array is no longer named (then the label is put back).
    label = rawio.pread_dev(md, 0, BLOCK)
    bad = bytearray(label)
    bad[BLOCK - 1] ^= 0xFF
    rawio.pwrite_dev(md, 0, bytes(bad))
    assert _probe(md).get("TYPE") != "nxd_member", "a label with a bad checksum was named"
    rawio.pwrite_dev(md, 0, label)
    assert _probe(md).get("TYPE") == "nxd_member"
    for dev in (md, ssd):
        p = run([f"{PROBER_BIN}/wipefs", "--no-act", dev])
        assert "nxd_member" in p.stdout, f"wipefs does not list {dev}: {p.stdout}"
        run([f"{PROBER_BIN}/wipefs", "-a", dev])
        assert _probe(dev) == {}, f"{dev} after wipefs -a: {_probe(dev)}"
        run(["blockdev", "--flushbufs", dev])
        p = run(["blkid", "-p", "-o", "export", dev], check=False)
        assert p.returncode == 2, f"stock blkid on {dev} after wipefs -a: {p.stdout}"
    assert rawio.pread_dev(md, 0, BLOCK)[:8] != nxdvol.LABEL_MAGIC, "the label magic is still there"
