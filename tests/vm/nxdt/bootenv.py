# SPDX-License-Identifier: GPL-2.0
"""A volume across boots for test_boot.py: the environment of the boot
(Env), what a boot reads back, resealing a label without metadata."""
import json
import random
import shutil
import struct

from nxdt import facts, ondisk, rawio
from nxdt.ctl import NXDCTL
from nxdt.facts import KiB, MiB
from nxdt.fstack import sha
from nxdt.host import run


REGION = 8 * MiB            # written and checksummed at the volume's start


class Env:
    def __init__(self, tmp_path):
        self.tab = tmp_path / "nxdtab"
        self.removed = tmp_path / "removed"

    def run(self, argv, check=True):
        if argv[0] == "/usr/sbin/nxdctl":
            argv = [NXDCTL, *argv[1:]]
        return run(["env", f"NXD_CONFIG={self.tab}",
                    f"NXD_REMOVED_DIR={self.removed}", *map(str, argv)],
                   check=check)

    def nxdctl(self, *args, check=True):
        return self.run([NXDCTL, *args], check=check)

    def reboot(self):
        """What a reboot does to /run/nxd/removed."""
        shutil.rmtree(self.removed, ignore_errors=True)


def vol_uuid(env, name):
    vols = json.loads(env.nxdctl("list", "--json").stdout)["volumes"]
    return next(v["uuid"] for v in vols if v["name"] == name)


def status(env, name):
    return json.loads(env.nxdctl("status", name, "--json", "--interval",
                                 "0").stdout)["volumes"][0]


def threshold(env, name):
    out = env.nxdctl("threshold", name).stdout
    return int(out.split()[1])


def write_some(dev, seed):
    """Small writes (logged) and a large one (to the HDD) in REGION."""
    rnd = random.Random(seed)
    for _ in range(24):
        rawio.pwrite_dev(dev, rnd.randrange(REGION // 4096 - 16) * 4096,
                     rnd.randbytes(4096 * rnd.choice([1, 2, 8])))
    rawio.pwrite_dev(dev, 2 * MiB, rnd.randbytes(MiB))
    rawio.pwrite_dev(dev, 5 * MiB + 512, rnd.randbytes(3 * KiB))


def region_sum(dev):
    return sha(rawio.pread_dev(dev, 0, REGION))


def reseal_without_meta(ssd):
    """Zero the stored name and tunables (bytes 160-311) in both superblock
    copies and reseal them: a superblock as the module wrote it before
    they were stored."""
    for i in range(2):
        blk = bytearray(rawio.pread_dev(ssd, i * facts.BLOCK, facts.BLOCK))
        assert ondisk.parse_sb(bytes(blk)) is not None
        blk[160:312] = bytes(152)
        struct.pack_into("<I", blk, 8, 0)
        struct.pack_into("<I", blk, 8, ondisk.crc32c_raw(blk))
        rawio.pwrite_dev(ssd, i * facts.BLOCK, bytes(blk))
