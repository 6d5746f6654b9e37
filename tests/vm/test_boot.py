# SPDX-License-Identifier: GPL-2.0
"""Boot-time assembly: /etc/nxd/nxdtab, the command lines of
nxd-activate@.service and nxd-stop.service, 69-nxd-activate.rules under the
guest's udevd, the device-mapper UUID create gives, a removed volume
staying removed, drain-on-stop.

The units are not started through systemd (the guest's init is not; make
test-boot boots a real one): their ExecStart= and ExecStop= lines are read
from systemd/ and run as they are, with the tree's nxdctl for
/usr/sbin/nxdctl, so that a change of a unit changes what is tested.  The
config file and the folder of removal marks are the test's own
(NXD_CONFIG, NXD_REMOVED_DIR); emptying that folder stands for a reboot
(it is on tmpfs).
"""
import json
import os
import shutil

import pytest

from nxdt import blkdev, ctl, host, nxdvol, ondisk
from nxdt.admin import udev_env
from nxdt.blkdev import settle
from nxdt.ctl import NXDCTL
from nxdt.facts import KiB, unit_cmd
from nxdt.host import REPO, run
from nxdt.bootenv import (Env, region_sum, reseal_without_meta, status, threshold, vol_uuid,
                          write_some)


@pytest.mark.guarantee("G15", "G4")
def test_boot_assembly(dm, loopdev, tmp_path):
    """The units' own command lines (nxd-activate@UUID.service for each
    volume, nxd-stop.service at shutdown): a configured volume comes back at
    boot under its name, DM UUID, options and data, a noauto or removed one
    does not, and drain-on-stop leaves the log empty."""
    env = Env(tmp_path)
    stop = unit_cmd("nxd-stop.service", "ExecStop")
    assert stop[1:] == ["stop", "--all"], stop
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

    def start():
        """Boot: each volume's unit, as udev would start them."""
        ps = [env.run(unit_cmd("nxd-activate@.service", "ExecStart", uuid[n]))
              for n in ("boota", "bootb")]
        return "".join(p.stdout for p in ps)

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
    out = start()
    assert "bootb: noauto" in out, out
    assert dm.exists("boota") and not dm.exists("bootb"), out
    assert dm.info("boota")["uuid"] == dmu["boota"]
    assert threshold(env, "boota") == thr["boota"]
    assert region_sum(dm.path("boota")) == csum["boota"]
    c = ctl.get_stats("boota")["counters"]
    assert c["recovered_blocks"] > 0, c          # the log was replayed

    # Removed on purpose: automatic assembly leaves it alone.
    env.nxdctl("remove", "boota")
    out = start()
    assert not dm.exists("boota") and not dm.exists("bootb"), out
    assert f"volume {uuid['boota']} was removed with nxdctl remove" in out, out

    # By hand: back, with the config's name, options and the same DM UUID;
    # the noauto one too.
    for n in ("boota", "bootb"):
        env.nxdctl("assemble", ssd[n] if n == "boota" else hdd[n])
        assert dm.exists(n)
        assert dm.info(n)["uuid"] == dmu[n]
        assert threshold(env, n) == thr[n]
        assert region_sum(dm.path(n)) == csum[n]
    assert not (env.removed / uuid["boota"]).exists()
    out = start()                               # nothing left to do
    assert "already active as boota" in out and "already active as bootb" in out, out

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
    start()
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
    assert not env.tab.exists()                 # no config file at all
    hdd, ssd = loopdev(128), loopdev(32)
    env.nxdctl("create", "ostx", hdd, ssd)
    dm.created.append("ostx")
    uuid, dmu = vol_uuid(env, "ostx"), dm.info("ostx")["uuid"]
    start = unit_cmd("nxd-activate@.service", "ExecStart", uuid)
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
    assert sb["tun_flags"] == 7, sb     # VALID, AUTO, SHARE
    assert {k: sb[k] for k in want} == want, sb
    sup = json.loads(env.nxdctl("show-super", ssd, "--json").stdout)
    assert sup["superblock"]["name"] == "ostx", sup["superblock"]
    assert sup["superblock"]["tunables"] == {
        "write_threshold": 32768, "mode": "auto", "low_watermark": 10,
        "high_watermark": 75, "destage_rate": 0, "ssd_discard": 1,
        "drain_on_suspend": 0, "auto_min_threshold": 4096,
        "auto_max_threshold": 1048576, "stream_min": 4194304,
        "stripe_size": 0, "stream_share": 0}, sup["superblock"]
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


@pytest.mark.guarantee("G4")
def test_tunables_persist_in_superblock(dm, loopdev, tmp_path):
    """The superblock is where tunables persist: nxdctl config stores a change
    at once, an nxdtab line without options keeps every stored value, a line
    with options overrides only the keys it names; out-of-range values are
    refused by nxdctl and by the kernel (sysfs and table), which names the
    range, and change nothing; status of the stopped, configured volume says
    inactive (exit 2)."""
    env = Env(tmp_path)
    hdd, ssd = loopdev(64), loopdev(16)
    env.nxdctl("create", "tunp", hdd, ssd)
    dm.created.append("tunp")
    uuid = vol_uuid(env, "tunp")
    start = unit_cmd("nxd-activate@.service", "ExecStart", uuid)
    sysfs = f"/sys/block/{blkdev.blk_name(dm.path('tunp'))}/nxd"

    # Refused before anything is written: a good key then a bad one.
    p = env.nxdctl("config", "tunp", "destage_rate=5", "write_threshold=2G",
                   check=False)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "write_threshold: expected 0 to 1G, got '2G'" in p.stderr, p.stderr
    with open(f"{sysfs}/destage_rate") as f:
        assert f.read().strip() == "0"

    # Both watermarks above the current high: accepted, in a valid order.
    env.nxdctl("config", "tunp", "write_threshold=32K", "low_watermark=80",
               "high_watermark=90", "ssd_discard=0")
    # On disk at once, while the volume runs (save_tunables).
    sb = ondisk.newest_sb(ssd)[1]
    got = {k: sb[k] for k in ("write_threshold", "low_watermark",
                              "high_watermark", "ssd_discard")}
    assert got == dict(write_threshold=32 * KiB, low_watermark=80,
                       high_watermark=90, ssd_discard=0), sb

    # The kernel names the range when it refuses a sysfs write.
    mark = host.kmsg_mark("tunp sysfs range")
    try:
        with open(f"{sysfs}/write_threshold", "w") as f:
            f.write("2147483648")
        raise AssertionError("the kernel took write_threshold 2G")
    except OSError as e:
        assert e.errno == 22, e
    assert host.wait_kmsg(mark, r"write_threshold must be 0 to 1G"), \
        host.dmesg_since(mark)
    assert threshold(env, "tunp") == 32 * KiB

    # An nxdtab line without options: every stored value comes back.
    env.tab.write_text(f"tunp UUID={uuid}\n")
    env.nxdctl("stop", "tunp")
    p = env.nxdctl("status", "tunp", "--interval", "0", check=False)
    assert p.returncode == 2 and "tunp: inactive" in p.stdout, (p.stdout, p.stderr)
    env.run(start)
    assert dm.exists("tunp")
    sysfs = f"/sys/block/{blkdev.blk_name(dm.path('tunp'))}/nxd"
    vals = {k: open(f"{sysfs}/{k}").read().strip()
            for k in ("write_threshold", "low_watermark", "high_watermark",
                      "ssd_discard", "mode")}
    assert vals == {"write_threshold": "32768", "low_watermark": "80",
                    "high_watermark": "90", "ssd_discard": "0",
                    "mode": "auto"}, vals

    # A line with an option: that key is overridden (and stored), the
    # others stay as stored.
    env.tab.write_text(f"tunp UUID={uuid} write-threshold=128K\n")
    env.nxdctl("stop", "tunp")
    env.run(start)
    opts = nxdvol.table_opts(dm.table("tunp"))
    assert opts["write_threshold"] == "131072" and opts["low_watermark"] == "80", opts
    assert opts["high_watermark"] == "90" and opts["ssd_discard"] == "0", opts

    # A table option out of range: refused with the range, nothing changed.
    mark = host.kmsg_mark("tunp table range")
    line = dm.table("tunp").split()
    line = " ".join(line[:5] + ["2", "high_watermark", "101"])
    p = host.run(["dmsetup", "load", "tunp", "--table", line], check=False)
    assert p.returncode != 0, p.stdout
    assert host.wait_kmsg(mark, r"high_watermark must be 0 to 100"), \
        host.dmesg_since(mark)
    assert nxdvol.table_opts(dm.table("tunp")) == opts


@pytest.fixture
def udev_activate():
    """nxdctl, nxd-probe, 64-nxd-members.rules and 69-nxd-activate.rules
    where the nxdctl package puts them (the guest's /usr and /etc are
    overlays), udevd reloaded; undone afterwards."""
    if run(["udevadm", "control", "--ping"], check=False).returncode:
        pytest.fail("no udevd in the guest", pytrace=False)
    placed = []     # (path, saved copy of what was there, or None)
    try:
        os.makedirs("/usr/lib/udev/rules.d", exist_ok=True)
        for src, dst in ((NXDCTL, "/usr/sbin/nxdctl"),
                         (os.path.join(REPO, "tools", "nxd-probe"), "/usr/lib/udev/nxd-probe"),
                         *((os.path.join(REPO, "udev", r), f"/usr/lib/udev/rules.d/{r}")
                           for r in ("64-nxd-members.rules", "69-nxd-activate.rules"))):
            saved = None
            if os.path.exists(dst):
                saved = f"{dst}.nxd-test-saved"
                os.rename(dst, saved)
            placed.append((dst, saved))
            shutil.copy2(src, dst)
        run(["udevadm", "control", "--reload"])
        yield
    finally:
        for dst, saved in reversed(placed):
            os.unlink(dst)
            if saved:
                os.rename(saved, dst)
        run(["udevadm", "control", "--reload"])


def udev_wants(dev):
    """What 69-nxd-activate.rules asks of systemd for @dev (SYSTEMD_WANTS)
    after a change event."""
    settle(dev)
    return udev_env(dev).get("SYSTEMD_WANTS", "").split()


@pytest.mark.guarantee("G15")
def test_udev_activation(dm, loopdev, udev_activate, tmp_path):
    """69-nxd-activate.rules under the guest's udevd, then the command line
    of the unit it names: a half whose peer is missing (the HDD held by
    another device) asks for nxd-activate@UUID.timer and the service says
    which half is missing and assembles nothing; the half that completes
    the volume asks for nxd-activate@UUID.service, which assembles it under
    its config name and DM UUID; a held device (an active volume's) asks
    for nothing; /etc/nxd/noauto turns the rule off."""
    env = Env(tmp_path)
    hdd, ssd = loopdev(128), loopdev(32)
    env.nxdctl("create", "udv0", hdd, ssd)
    dm.created.append("udv0")
    uuid = vol_uuid(env, "udv0")
    env.nxdctl("stop", "udv0")
    assert not dm.exists("udv0")
    env.tab.write_text(f"udv1 UUID={uuid}\n")
    svc, timer = f"nxd-activate@{uuid}.service", f"nxd-activate@{uuid}.timer"
    act = unit_cmd("nxd-activate@.service", "ExecStart", uuid)
    assert act[1:] == ["activate", uuid], act

    # The HDD held by a linear device over half of it from block 1 (no
    # label at its start or end; the label is in HDD block 0): the SSD is
    # alone.
    dm.create("udvhold", f"0 {blkdev.dev_sectors(hdd) // 2} linear {hdd} 8")
    w = udev_wants(ssd)
    assert timer in w and svc not in w, w
    w = udev_wants(hdd)                         # held: asks for nothing
    assert not [u for u in w if u.startswith("nxd-activate@")], w
    p = env.run(act, check=False)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"volume {uuid}: its SSD" in p.stderr, p.stderr
    assert "is present but its HDD is missing: not assembled" in p.stderr, p.stderr
    assert not dm.exists("udv1") and not dm.exists("udv0")
    dm.remove("udvhold")

    # Both present: either half's event completes the volume.
    for dev in (hdd, ssd):
        w = udev_wants(dev)
        assert svc in w and timer not in w, (dev, w)
    os.makedirs("/etc/nxd", exist_ok=True)
    knob = "/etc/nxd/noauto"
    assert not os.path.exists(knob)
    try:
        open(knob, "w").close()
        w = udev_wants(ssd)
        assert not [u for u in w if u.startswith("nxd-activate@")], w
    finally:
        os.unlink(knob)

    p = env.run(act)
    dm.created.append("udv1")
    assert dm.exists("udv1") and not dm.exists("udv0"), p.stdout
    assert dm.info("udv1")["uuid"] == f"NXD-{uuid}"
    p = env.run(act)                            # a second start: nothing
    assert f"volume {uuid} is already active as udv1" in p.stdout, p.stdout
    for dev in (hdd, ssd):                      # held by the volume
        w = udev_wants(dev)
        assert not [u for u in w if u.startswith("nxd-activate@")], (dev, w)
    env.nxdctl("stop", "udv1")
    assert not dm.exists("udv1")
