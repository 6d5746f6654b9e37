# SPDX-License-Identifier: GPL-2.0
"""Boot-time assembly: /etc/nxd/nxdtab, nxd-assemble.service's command
lines, the device-mapper UUID create gives, a removed volume staying
removed, drain-on-stop.

The unit is not started through systemd (the guest's init is not): its
ExecStart= and ExecStop= lines are read from systemd/nxd-assemble.service
and run as they are, with the tree's nxdctl for /usr/sbin/nxdctl, so that
a change of the unit changes what is tested.  The config file and the
folder of removal marks are the test's own (NXD_CONFIG, NXD_REMOVED_DIR);
emptying that folder stands for a reboot (it is on tmpfs).
"""
import hashlib
import json
import os
import random
import shutil

import nxdvm
from nxdvm import run
import nxdaux as X
from nxdfacts import unit_cmd
from nxdaux import KiB, MiB

REPO = nxdvm.REPO
NXDCTL = os.path.join(REPO, "tools", "nxdctl")
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


def dm_uuid(name):
    return run(["dmsetup", "info", "-c", "--noheadings", "-o", "uuid",
                name]).stdout.strip()


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
        X.pwrite_dev(dev, rnd.randrange(REGION // 4096 - 16) * 4096,
                     rnd.randbytes(4096 * rnd.choice([1, 2, 8])))
    X.pwrite_dev(dev, 2 * MiB, rnd.randbytes(MiB))
    X.pwrite_dev(dev, 5 * MiB + 512, rnd.randbytes(3 * KiB))


def region_sum(dev):
    return hashlib.sha256(X.pread_dev(dev, 0, REGION)).hexdigest()


def test_boot_assembly(dm, loopdev, tmp_path):
    env = Env(tmp_path)
    start, stop = unit_cmd("ExecStart"), unit_cmd("ExecStop")
    assert start[1:] == ["assemble", "--all"] and stop[1:] == ["stop", "--all"]
    hdd = {"boota": loopdev(128), "bootb": loopdev(128)}
    ssd = {"boota": loopdev(32), "bootb": loopdev(32)}
    thr = {"boota": 128 * KiB, "bootb": 256 * KiB}

    # create: a new volume gets the DM UUID NXD-<volume uuid>.
    uuid, dmu, csum = {}, {}, {}
    for i, n in enumerate(("boota", "bootb")):
        p = env.nxdctl("create", n, hdd[n], ssd[n], "--write-threshold",
                       f"{thr[n] // KiB}K")
        dm.created.append(n)
        uuid[n], dmu[n] = vol_uuid(env, n), dm_uuid(n)
        assert dmu[n] == f"NXD-{uuid[n]}", (dmu[n], uuid[n], p.stdout)
        assert f"dmsetup rename {n} --setuuid {dmu[n]}" in p.stdout, p.stdout
        env.nxdctl("pause-destage", n)          # the log holds writes
        write_some(dm.path(n), seed=i)
        csum[n] = region_sum(dm.path(n))
        assert status(env, n)["dirty_blocks"] > 0

    # Removed by hand: marked, then a "reboot" forgets the marks.
    for n in ("boota", "bootb"):
        env.nxdctl("remove", n)
        assert not dm.exists(n)
        assert (env.removed / uuid[n]).exists()
    env.reboot()

    env.tab.write_text(
        "# tests/vm/test_boot.py\n"
        f"boota UUID={uuid['boota']} write-threshold=128K,drain-on-stop\n"
        f"\n  bootb\tUUID={uuid['bootb'].upper()}  noauto,write_threshold=256K  # by hand\n")

    # Boot: the configured volume comes back under its name, with its
    # DM UUID, threshold and data; the noauto one does not.
    p = env.run(start)
    assert "bootb: noauto" in p.stdout, p.stdout
    assert dm.exists("boota") and not dm.exists("bootb"), p.stdout
    assert dm_uuid("boota") == dmu["boota"]
    assert threshold(env, "boota") == thr["boota"]
    assert region_sum(dm.path("boota")) == csum["boota"]
    c = X.get_stats("boota")["counters"]
    assert c["recovered_blocks"] > 0, c          # the log was replayed

    # Removed on purpose: assemble --all leaves it alone.
    env.nxdctl("remove", "boota")
    p = env.run(start)
    assert not dm.exists("boota") and not dm.exists("bootb"), p.stdout
    assert f"volume {uuid['boota']} was removed with nxdctl remove" in p.stdout, p.stdout

    # By hand: back, with the config's name, options and the same DM UUID;
    # the noauto one too.
    for n in ("boota", "bootb"):
        env.nxdctl("assemble", ssd[n] if n == "boota" else hdd[n])
        assert dm.exists(n)
        assert dm_uuid(n) == dmu[n]
        assert threshold(env, n) == thr[n]
        assert region_sum(dm.path(n)) == csum[n]
    assert not (env.removed / uuid["boota"]).exists()
    p = env.run(start)                          # nothing left to do
    assert "already active as boota" in p.stdout, p.stdout

    # Logged writes in both; shutdown: boota (drain-on-stop) is drained,
    # bootb is not; both are removed.
    for i, n in enumerate(("boota", "bootb")):
        env.nxdctl("pause-destage", n)
        write_some(dm.path(n), seed=10 + i)
        csum[n] = region_sum(dm.path(n))
        st = status(env, n)
        assert st["log_used_bytes"] > 0 and st["dirty_blocks"] > 0, st
    p = env.run(stop)
    assert "boota: drain-on-stop" in p.stdout, p.stdout
    assert "bootb: drain-on-stop" not in p.stdout, p.stdout
    assert not dm.exists("boota") and not dm.exists("bootb")
    assert not (env.removed / uuid["boota"]).exists()   # stop marks nothing
    sup = {n: json.loads(env.nxdctl("show-super", ssd[n], "--json").stdout)
           for n in ("boota", "bootb")}
    assert sup["boota"]["log"]["data_blocks"] == 0, sup["boota"]["log"]
    assert sup["bootb"]["log"]["data_blocks"] > 0, sup["bootb"]["log"]

    # Next boot: boota's log is empty, its data on the HDD.
    env.reboot()
    env.run(start)
    st = status(env, "boota")
    assert st["log_used_bytes"] == 0 and st["dirty_blocks"] == 0, st
    assert X.get_stats("boota")["counters"]["recovered_blocks"] == 0
    assert region_sum(dm.path("boota")) == csum["boota"]
    assert not dm.exists("bootb")
    env.run(stop)
    assert not dm.exists("boota")
