# SPDX-License-Identifier: GPL-2.0
"""Guest side of scripts/reboot.sh: an nxd volume that comes back by itself
after a reboot of the guest (issue 19, "Done when").

boot 1 (python3 scripts/reboot_guest.py boot1 DIR), the admin guide's path
from bare disks: four image files on loop devices, an md RAID6 over them
(mdadm --create), a blank SSD image, `nxdctl create` with a threshold, an
ext4 on the volume, /etc/nxd/nxdtab naming it (in DIR: the guest's /etc
does not outlive the boot, so NXD_CONFIG points there), files written
through /dev/disk/by-uuid with destage paused (the log holds them), then
the shutdown: umount, nxd-stop.service's ExecStop= line, md stopped.

boot 2 (... boot2 DIR), a new guest: the disks appear (loop devices on the
same files; md assembles the array from its members, by udev's incremental
rule or mdadm --assemble), the SSD last; udev's SYSTEMD_WANTS on the SSD
(69-nxd-activate.rules) must name nxd-activate@<volume UUID>.service, whose
ExecStart= line then runs exactly as systemd/nxd-activate@.service has it,
then what an fstab UUID= mount waits for: /dev/disk/by-uuid/<fs uuid> must be the nxd volume, under its name,
DM UUID and threshold, the log replayed, every file's sha256 as written,
e2fsck clean.

systemd is not init in these guests (virtme-ng), so the units' command
lines run here in its place (scripts/test-boot.sh boots a real systemd).
nxdctl, nxd-probe and the udev rules are installed into the guest's
/usr and /etc overlays at each boot, as the nxdctl package installs them.
Prints "reboot: PASS ..." or "reboot: FAIL ..." as its last line.
"""
import glob
import json
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "vm"))
from nxdt import blkdev, ctl, host  # noqa: E402
from nxdt.blkdev import disk_link, settle  # noqa: E402
from nxdt.dmlib import DMSetup  # noqa: E402
from nxdt.facts import unit_cmd  # noqa: E402
from nxdt.fstack import sha_file  # noqa: E402
from nxdt.host import run  # noqa: E402

REPO = host.REPO
NAME, LABEL = "rbost0", "rbfs0"
DISKS, DISK_MIB, SSD_MIB = 4, 64, 16
THRESHOLD = 128 * 1024
MNT = "/tmp/nxd-reboot-mnt"


def say(msg):
    print(f"reboot: {msg}", flush=True)


def nxdctl(d, *args, check=True):
    return run(["env", f"NXD_CONFIG={d}/nxdtab", "/usr/sbin/nxdctl", *map(str, args)],
               check=check)


def run_unit(d, unit, key, instance=None):
    """@unit's @key= line as systemd would run it; nxdtab from @d."""
    p = run(["env", f"NXD_CONFIG={d}/nxdtab", *unit_cmd(unit, key, instance)],
            check=False)
    say(f"{key}: exit {p.returncode}: {(p.stdout + p.stderr).strip()!r}")
    assert p.returncode == 0, (key, p.stdout, p.stderr)
    return p


def udev_wants(dev):
    """The units udev's SYSTEMD_WANTS names for @dev."""
    out = run(["udevadm", "info", "--query=property", dev]).stdout
    return next((ln.split("=", 1)[1].split() for ln in out.splitlines()
                 if ln.startswith("SYSTEMD_WANTS=")), [])


def install():
    """The module, nxdctl, nxd-probe and the udev rules, as the packages put
    them (the guest's /usr and /etc are overlays of this boot)."""
    MARK.append(host.kmsg_mark("rebootlib"))
    for m in ("dm-mod", "loop", "raid456", "libcrc32c"):
        host.modprobe(m, check=False)
    assert not host.module_loaded("dm_nxd"), "dm_nxd loaded before this boot loaded it"
    run(["insmod", host.MODULE_KO])
    shutil.copy2(os.path.join(REPO, "tools", "nxdctl"), "/usr/sbin/nxdctl")
    os.makedirs("/usr/lib/udev", exist_ok=True)
    shutil.copy2(os.path.join(REPO, "tools", "nxd-probe"), "/usr/lib/udev/nxd-probe")
    for r in ("60-nxd.rules", "64-nxd-members.rules", "69-nxd-activate.rules"):
        shutil.copy2(os.path.join(REPO, "udev", r), f"/etc/udev/rules.d/{r}")
    run(["udevadm", "control", "--reload"])


def attach(path):
    dev = run(["losetup", "--find", "--show", path]).stdout.strip()
    run(["udevadm", "trigger", "--action=add", "--settle", dev], check=False)
    return dev


def holder_md(member):
    h = glob.glob(f"/sys/block/{os.path.basename(member)}/holders/md*")
    return f"/dev/{os.path.basename(h[0])}" if h else None


def md_active(md):
    try:
        with open(f"/sys/block/{os.path.basename(md)}/md/array_state") as f:
            return f.read().strip() in ("clean", "active", "active-idle",
                                        "read-auto", "write-pending")
    except OSError:
        return False


def lsblk_fstype(dev):
    out = json.loads(run(["lsblk", "-J", "-d", "-o", "FSTYPE", dev]).stdout)
    return out["blockdevices"][0]["fstype"]


MARK = []


def kernel_ok(what):
    """No oops, BUG, WARNING or hung task since install() (the boot's own
    messages before it are not ours: "loops_per_jiffy" reads as an oops)."""
    bad = host.find_kernel_problems(host.dmesg_since(MARK[0]))
    assert not bad, f"kernel problems in {what}:\n" + "\n".join(bad[:20])


def shutdown(d, md, loops):
    """What a shutdown does: file systems unmounted, ExecStop=, md stopped."""
    run_unit(d, "nxd-stop.service", "ExecStop")
    assert not os.path.exists(f"/dev/mapper/{NAME}"), "ExecStop left the volume"
    blkdev.md_stop(md)
    for lp in loops:
        run(["losetup", "-d", lp], check=False)


def boot1(d):
    install()
    imgs = [f"{d}/disk{i}.img" for i in range(DISKS)]
    for p, mib in [(p, DISK_MIB) for p in imgs] + [(f"{d}/ssd.img", SSD_MIB)]:
        with open(p, "wb") as f:
            f.truncate(mib << 20)
    members = [attach(p) for p in imgs]
    run(["mdadm", "--create", f"/dev/md/{NAME}", "--run", "--quiet", "--metadata=1.2",
         "--level=6", f"--raid-devices={DISKS}", "--chunk=64", "--bitmap=internal",
         "--assume-clean", *members])
    md = holder_md(members[0])
    host.wait_for(lambda: md and md_active(md), timeout=30, what="the new array")
    ssd = attach(f"{d}/ssd.img")
    settle(md, ssd, check=False)

    nxdctl(d, "create", NAME, f"/dev/md/{NAME}", ssd, "--write-threshold", "128K")
    vols = json.loads(nxdctl(d, "list", "--json").stdout)["volumes"]
    vuuid = next(v["uuid"] for v in vols if v["name"] == NAME)
    with open(f"{d}/nxdtab", "w") as f:
        f.write(f"# scripts/reboot.sh\n{NAME} UUID={vuuid} write-threshold=128K\n")
    vol = os.path.realpath(f"/dev/mapper/{NAME}")
    run(["mkfs.ext4", "-q", "-L", LABEL, f"/dev/mapper/{NAME}"])
    fs = run(["blkid", "-p", "-s", "UUID", "-o", "value", vol]).stdout.strip()
    settle(md, ssd, vol, check=False)
    assert disk_link("uuid", fs) == vol, (disk_link("uuid", fs), vol)
    assert lsblk_fstype(md) == "nxd_hdd" and lsblk_fstype(ssd) == "nxd_log"

    # Files, the last of them with the destager paused: in the log at shutdown.
    os.makedirs(MNT, exist_ok=True)
    run(["mount", f"/dev/disk/by-uuid/{fs}", MNT])
    rnd = random.Random(19)
    sums = {}
    try:
        for i in range(120):
            if i == 60:
                nxdctl(d, "pause-destage", NAME)
            name = f"f{i:03d}" if i != 100 else "big"
            size = 2 << 20 if name == "big" else rnd.randrange(1, 40) * 512
            with open(f"{MNT}/{name}", "wb") as f:
                f.write(rnd.randbytes(size))
                f.flush()
                os.fsync(f.fileno())
            sums[name] = sha_file(f"{MNT}/{name}")
    finally:
        run(["umount", MNT])
    st = json.loads(nxdctl(d, "status", NAME, "--json", "--interval", "0").stdout)["volumes"][0]
    assert st["dirty_blocks"] > 0, st
    with open(f"{d}/state.json", "w") as f:
        json.dump({"vol_uuid": vuuid, "fs_uuid": fs, "dm_uuid": DMSetup().info(NAME)["uuid"],
                   "sums": sums, "dirty_at_shutdown": st["dirty_blocks"]}, f)
    shutdown(d, md, members + [ssd])
    kernel_ok("boot 1")
    say(f"boot 1 done: volume {vuuid}, ext4 {fs}, {len(sums)} files, "
        f"{st['dirty_blocks']} blocks in the log at shutdown")
    return 0


def boot2(d):
    with open(f"{d}/state.json") as f:
        s = json.load(f)
    install()
    assert not os.path.exists(f"/dev/mapper/{NAME}")
    members = [attach(f"{d}/disk{i}.img") for i in range(DISKS)]
    host.udev_settle()
    md = holder_md(members[0])
    how = "udev (mdadm --incremental)"
    if not (md and md_active(md)):
        run(["mdadm", "--assemble", f"/dev/md/{NAME}", *members])
        how = "mdadm --assemble"
        md = holder_md(members[0])
    host.wait_for(lambda: md and md_active(md), timeout=30, what="the array")
    ssd = attach(f"{d}/ssd.img")
    settle(md, ssd, check=False)
    assert lsblk_fstype(md) == "nxd_hdd" and lsblk_fstype(ssd) == "nxd_log"
    assert disk_link("uuid", s["fs_uuid"]) is None, "the bare array owns the fs UUID link"

    # The SSD completed the volume: udev asks systemd for its unit.
    wants = udev_wants(ssd)
    assert f"nxd-activate@{s['vol_uuid']}.service" in wants, wants
    run_unit(d, "nxd-activate@.service", "ExecStart", s["vol_uuid"])
    vol = os.path.realpath(f"/dev/mapper/{NAME}")
    settle(vol, check=False)
    dmu = DMSetup().info(NAME)["uuid"]
    assert dmu == s["dm_uuid"] == f"NXD-{s['vol_uuid']}", (dmu, s)
    thr = nxdctl(d, "threshold", NAME).stdout.split()
    assert int(thr[1]) == THRESHOLD, thr
    c = ctl.get_stats(NAME)["counters"]
    assert c["recovered_blocks"] > 0, c         # the log was replayed
    assert disk_link("uuid", s["fs_uuid"]) == vol, (disk_link("uuid", s["fs_uuid"]), vol)
    assert disk_link("label", LABEL) == vol, disk_link("label", LABEL)

    os.makedirs(MNT, exist_ok=True)
    run(["mount", f"/dev/disk/by-uuid/{s['fs_uuid']}", MNT])
    try:
        bad = [n for n, h in s["sums"].items() if sha_file(f"{MNT}/{n}") != h]
    finally:
        run(["umount", MNT])
    assert not bad, f"files differ after the reboot: {bad}"
    run(["e2fsck", "-fn", vol])
    shutdown(d, md, members + [ssd])
    kernel_ok("boot 2")
    say(f"PASS: {NAME} came back after a reboot: md by {how}, ExecStart, "
        f"{c['recovered_blocks']} log blocks replayed, DM UUID {s['dm_uuid']}, "
        f"threshold {THRESHOLD}, /dev/disk/by-uuid/{s['fs_uuid']} -> {vol}, "
        f"{len(s['sums'])} files verified, e2fsck clean")
    return 0


if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    try:
        sys.exit({"boot1": boot1, "boot2": boot2}[cmd](d))
    except Exception as e:  # noqa: BLE001 - one verdict line, whatever failed
        import traceback
        traceback.print_exc()
        say(f"FAIL: {cmd}: {type(e).__name__}: {str(e)[:600]}")
        sys.exit(1)
