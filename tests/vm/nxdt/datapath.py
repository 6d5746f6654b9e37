# SPDX-License-Identifier: GPL-2.0
"""Data-path rigs for test_datapath.py: a paused volume, writes counted by
route, fio on XFS."""
import os
import subprocess

from nxdt.blkdev import disk_stat
from nxdt.host import sh
from nxdt.nxdvol import Volume
from nxdt.rawio import pwrite_direct


def paused_vol(dm, devs, opts=""):
    hdd, ssd = devs
    v = Volume(dm, "nxdroute", hdd.dev, ssd.dev, opts)
    v.message("pause_destage")
    return v


def write_and_count(v, hdd, ssd, off, n, direct=True):
    h0, s0 = disk_stat(hdd)[1], disk_stat(ssd)[1]
    if direct:
        fd = os.open(v.dev, os.O_RDWR | os.O_DIRECT)
        pwrite_direct(fd, off, os.urandom(n))
        # A direct log write is acknowledged before its segment header is
        # written: the flush writes it now, not into the next count.
        os.fsync(fd)
    else:
        fd = os.open(v.dev, os.O_RDWR)
        os.pwrite(fd, os.urandom(n), off)
        os.fsync(fd)
    os.close(fd)
    return disk_stat(hdd)[1] - h0, disk_stat(ssd)[1] - s0


def xfs_fio(vol):
    sh(f"mkfs.xfs -q -f {vol.dev}")
    os.makedirs("/tmp/nxd-mnt", exist_ok=True)
    sh(f"mount {vol.dev} /tmp/nxd-mnt")
    try:
        r = subprocess.run(
            ["fio", "--name=x", "--directory=/tmp/nxd-mnt", "--direct=1",
             "--rw=randwrite", "--bssplit=4k/40:16k/20:128k/20:1m/20",
             "--size=24m", "--verify=crc32c", "--verify_fatal=1",
             "--randseed=9", "--numjobs=2"],
            capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        sh("umount /tmp/nxd-mnt")
    sh(f"xfs_repair -n {vol.dev}")
