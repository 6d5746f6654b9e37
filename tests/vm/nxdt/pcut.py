# SPDX-License-Identifier: GPL-2.0
"""The dm-pcut fixture (tests/fixtures/pcut): a volatile write cache with a
seeded power cut, per device.  The module is built on the host:

    make -C tests/fixtures/pcut KDIR=/usr/src/linux-headers-$KVER KVER=$KVER

 - build_cmd(kver) / module_path(): where the module is, how it is built;
 - load_module(): dm-mod + insmod build/<kver>/pcut/dm-pcut.ko;
 - Pcut: one pcut device over a backing device (create, message, status,
   cut, power_on = a fresh table over the same backing device, remove);
 - parse_status(): the status line as a dict.
"""
import os
import subprocess
from nxdt.host import KVER, REPO


def module_path(kver=KVER):
    return os.path.join(REPO, "build", kver, "pcut", "dm-pcut.ko")


def build_cmd(kver):
    return ["make", "-s", "-C", os.path.join(REPO, "tests/fixtures/pcut"),
            f"KDIR=/usr/src/linux-headers-{kver}", f"KVER={kver}"]


def module_loaded():
    return os.path.isdir("/sys/module/dm_pcut")


def load_module():
    """insmod dm-pcut (once); raises if it was not built for this kernel."""
    ko = module_path()
    if not os.path.exists(ko):
        raise FileNotFoundError(f"{ko} not built: run `{' '.join(build_cmd(KVER))}` on the host")
    subprocess.run(["modprobe", "dm-mod"], check=False)
    if not module_loaded():
        subprocess.run(["insmod", ko], check=True, capture_output=True)
    return ko


def unload_module():
    return subprocess.run(["rmmod", "dm_pcut"], capture_output=True, text=True)


def parse_status(line):
    """"live group_ops=3 writes=1 ..." -> {"state": "live", "group_ops": 3, ...}"""
    f = line.split()
    if len(f) > 3 and f[0].isdigit() and f[2] == "pcut":
        f = f[3:]           # a whole `dmsetup status` line: start length type
    d = {"state": f[0]}
    for kv in f[1:]:
        k, _, v = kv.partition("=")
        d[k] = int(v)
    return d


class Pcut:
    """One pcut device named @name over @backing (a /dev path or major:minor)
    in cut group @group, through a dmlib.DM (ioctl) client."""

    def __init__(self, dm, name, backing, group, seed, sectors=None):
        self.dm, self.name, self.backing = dm, name, backing
        self.group, self.seed = group, seed
        if sectors is None:
            with open(f"/sys/class/block/{os.path.basename(os.path.realpath(backing))}/size") as f:
                sectors = int(f.read())
        self.sectors = sectors
        self.path = dm.create(name, self.table())

    def table(self):
        return f"0 {self.sectors} pcut {self.backing} {self.group} {self.seed}"

    @property
    def devno(self):
        return self.dm.devno(self.name)

    def message(self, *words):
        self.dm.message(self.name, " ".join(map(str, words)))

    def status(self):
        return parse_status(self.dm.status(self.name))

    def set(self, keep=None, torn=None, delay_us=None, max_cached=None):
        for k, v in (("keep", keep), ("torn", torn), ("delay_us", delay_us),
                     ("max_cached", max_cached)):
            if v is not None:
                self.message(k, v)

    def cut(self):
        self.message("cut")

    def cut_after(self, n, gap=None):
        """Cut this device when the group's op counter has advanced by @n
        from now; with @gap, cut every other member of the group @gap group
        ops later (gap 0: at the same op)."""
        if gap is None:
            self.message("cut_after", n)
        else:
            self.message("cut_after", n, gap)

    def power_on(self):
        """A fresh table over the same backing device (power on).  The old
        instance's postsuspend waits until the cut is written out."""
        self.dm.reload(self.name, self.table())

    def remove(self):
        self.dm.remove(self.name)
