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
import json

import pytest

from nxdt import blkdev, ctl, nxdvol, ondisk
from nxdt.facts import KiB, unit_cmd
from nxdt.bootenv import (Env, region_sum, reseal_without_meta, status, threshold, vol_uuid,
                          write_some)


@pytest.mark.guarantee("G15", "G4")
def test_boot_assembly(dm, loopdev, tmp_path):
    """nxd-assemble.service's own command lines: a configured volume comes back
    at boot under its name, DM UUID, options and data, a noauto or removed
    one does not, and drain-on-stop leaves the log empty."""
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
        uuid[n], dmu[n] = vol_uuid(env, n), dm.info(n)["uuid"]
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
    assert dm.info("boota")["uuid"] == dmu["boota"]
    assert threshold(env, "boota") == thr["boota"]
    assert region_sum(dm.path("boota")) == csum["boota"]
    c = ctl.get_stats("boota")["counters"]
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
        assert dm.info(n)["uuid"] == dmu[n]
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
    assert ctl.get_stats("boota")["counters"]["recovered_blocks"] == 0
    assert region_sum(dm.path("boota")) == csum["boota"]
    assert not dm.exists("bootb")
    env.run(stop)
    assert not dm.exists("boota")


@pytest.mark.guarantee("G15", "G4")
def test_stored_name_tunables(dm, loopdev, tmp_path):
    """The SSD superblock keeps the volume's name and its tunables, sysfs
    changes included, and assemble without a config file brings them back;
    a superblock without them (older module) still assembles, as
    nxd-<uuid> with the defaults."""
    env = Env(tmp_path)
    start = unit_cmd("ExecStart")
    assert not env.tab.exists()                 # no config file at all
    hdd, ssd = loopdev(128), loopdev(32)
    env.nxdctl("create", "ostx", hdd, ssd)
    dm.created.append("ostx")
    uuid, dmu = vol_uuid(env, "ostx"), dm.info("ostx")["uuid"]
    sb = ondisk.newest_sb(ssd)[1]
    assert sb["name"] == "ostx", sb
    assert sb["tun_flags"] & 1 and sb["write_threshold"] == 64 * KiB, sb

    # Changed live through sysfs: on disk once the volume is stopped.
    sysfs = f"/sys/block/{blkdev.blk_name(dm.path('ostx'))}/nxd"
    with open(f"{sysfs}/write_threshold", "w") as f:
        f.write("32768")
    with open(f"{sysfs}/low_watermark", "w") as f:
        f.write("10")
    assert threshold(env, "ostx") == 32 * KiB
    env.nxdctl("pause-destage", "ostx")          # the log holds writes
    write_some(dm.path("ostx"), seed=7)
    csum = region_sum(dm.path("ostx"))
    env.nxdctl("stop", "ostx")
    assert not dm.exists("ostx")

    want = dict(name="ostx", write_threshold=32768, mode=0, low_watermark=10,
                high_watermark=75, destage_rate=0, ssd_discard=1,
                drain_on_suspend=0)
    sb = ondisk.newest_sb(ssd)[1]
    assert sb["tun_flags"] == 3, sb
    assert {k: sb[k] for k in want} == want, sb
    sup = json.loads(env.nxdctl("show-super", ssd, "--json").stdout)
    assert sup["superblock"]["name"] == "ostx", sup["superblock"]
    assert sup["superblock"]["tunables"] == {
        "write_threshold": 32768, "mode": "auto", "low_watermark": 10,
        "high_watermark": 75, "destage_rate": 0, "ssd_discard": 1,
        "drain_on_suspend": 0, "auto_min_threshold": 4096,
        "auto_max_threshold": 1048576, "stream_min": 4194304,
        "stripe_size": 0}, sup["superblock"]
    text = env.nxdctl("show-super", ssd).stdout
    assert "  name          ostx\n" in text, text
    assert "write_threshold 32768 mode auto low_watermark 10" in text, text

    # "Boot" without a config file: back under its name, with its tunables.
    p = env.run(start)
    assert dm.exists("ostx"), p.stdout
    assert dm.info("ostx")["uuid"] == dmu
    assert vol_uuid(env, "ostx") == uuid
    assert threshold(env, "ostx") == 32 * KiB
    sysfs = f"/sys/block/{blkdev.blk_name(dm.path('ostx'))}/nxd"
    with open(f"{sysfs}/low_watermark") as f:
        assert f.read().strip() == "10"
    opts = nxdvol.table_opts(dm.table("ostx"))
    assert opts["write_threshold"] == "32768" and opts["low_watermark"] == "10", opts
    assert region_sum(dm.path("ostx")) == csum
    assert ctl.get_stats("ostx")["counters"]["recovered_blocks"] > 0

    # A superblock without them: the name from the UUID, the defaults;
    # the next superblock write stores them again.
    env.nxdctl("stop", "ostx")
    reseal_without_meta(ssd)
    sup = json.loads(env.nxdctl("show-super", ssd, "--json").stdout)
    assert sup["superblock"]["name"] == "" and sup["superblock"]["tunables"] is None, sup
    p = env.run(start)
    old = f"nxd-{uuid[:8]}"
    assert dm.exists(old) and not dm.exists("ostx"), p.stdout
    dm.created.append(old)
    assert threshold(env, old) == 64 * KiB
    assert region_sum(dm.path(old)) == csum
    sb = ondisk.newest_sb(ssd)[1]
    assert sb["name"] == old and sb["write_threshold"] == 64 * KiB, sb
    env.nxdctl("stop", old)
    assert not dm.exists(old)
