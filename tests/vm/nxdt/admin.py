# SPDX-License-Identifier: GPL-2.0
"""Admin tooling for test_admin.py: lsblk and udev from a test, ext4 on a
volume's data area, removing a volume, settings saved and restored
(Saved)."""
import json
import os

from nxdt import blkdev, facts
from nxdt.host import run


def lsblk(dev):
    """lsblk's view of @dev alone: FSTYPE, UUID, LABEL (udev's database)."""
    out = json.loads(run(["lsblk", "-J", "-d", "-o", "PATH,FSTYPE,UUID,LABEL",
                          dev]).stdout)
    return out["blockdevices"][0]


def real(dev):
    return os.path.realpath(dev)


def udev_env(dev):
    out = run(["udevadm", "info", "--query=property", dev]).stdout
    return dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)


def ext4_on_data_area(md, label):
    """An ext4 on the raw array @md, labelled @label; its UUID."""
    kib = facts.data_sectors(blkdev.dev_sectors(md)) // 2
    run(["mkfs.ext4", "-q", "-F", "-L", label, md, f"{kib}k"])
    return run(["blkid", "-p", "-s", "UUID", "-o", "value", md]).stdout.strip()


def remove_vol(dm, name):
    if dm.exists(name):
        if name not in dm.created:
            dm.created.append(name)
        dm.remove(name)


class Saved:
    """Files of the host's root fs that a package replaces and dpkg -r would
    take away; put back afterwards (the guest's overlay outlives the test)."""

    def __init__(self, *paths):
        self.saved = {f: (open(f, "rb").read(), os.stat(f).st_mode & 0o7777)
                      for f in paths if os.path.exists(f)}

    def restore(self):
        for f, (b, mode) in self.saved.items():
            if not os.path.exists(f):
                with open(f, "wb") as fh:
                    fh.write(b)
                os.chmod(f, mode)
