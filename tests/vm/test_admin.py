# SPDX-License-Identifier: GPL-2.0
"""The admin's lifecycle in userspace (issue 19), on real block devices:

* identity: nxd-probe and 64-nxd-members.rules under the guest's udevd
  make the HDD (an md RAID6) an "nxd_hdd" and the SSD an "nxd_log" in
  lsblk -f, and move /dev/disk/by-uuid and by-label of the file system
  from the raw array to the nxd volume; nxdctl wipe gives them back;
* create's safety checks, wipe's refusals, on an md array and null_blk;
* status, show-super, list and stats --prometheus against the kernel's
  own counters and the on-disk format read independently (nxdt.ondisk);
* the Debian packages of `make deb`, installed in the guest's overlay.

The links and types expected here are those udev's own rules
(60-persistent-storage, 63-md-raid-arrays, 60-persistent-storage-dm)
give; what the nxd rules change is read back from udev's database through
lsblk and the links under /dev/disk.
"""
import json
import os
import re
import shutil
import tempfile
import time

import pytest

from nxdt import blkdev, ctl, facts, host, nxdvol, ondisk, rawio
from nxdt.blkdev import disk_link, settle
from nxdt.ctl import NXDCTL, nxdctl
from nxdt.host import run
from nxdt.admin import Saved, ext4_on_data_area, lsblk, real, remove_vol, udev_env

REPO = host.REPO
TOOLS = os.path.join(REPO, "tools")
PROBE = os.path.join(TOOLS, "nxd-probe")
RULES = ["60-nxd.rules", "64-nxd-members.rules"]


@pytest.fixture
def udev_nxd():
    """nxdctl, nxd-probe and the rules installed in the guest's overlay (as
    `make install` puts them), udevd reloaded; undone afterwards."""
    if run(["udevadm", "control", "--ping"], check=False).returncode:
        pytest.fail("no udevd in the guest", pytrace=False)
    placed = []     # (path, saved copy of what was there, or None)

    def place(src, dst):
        saved = None
        if os.path.exists(dst):
            saved = f"{dst}.nxd-test-saved"
            os.rename(dst, saved)
        placed.append((dst, saved))
        shutil.copy2(src, dst)
    try:
        place(NXDCTL, "/usr/sbin/nxdctl")
        os.makedirs("/usr/lib/udev", exist_ok=True)
        place(PROBE, "/usr/lib/udev/nxd-probe")
        for r in RULES:
            place(os.path.join(REPO, "udev", r), f"/etc/udev/rules.d/{r}")
        run(["udevadm", "control", "--reload"])
        yield
    finally:
        for p, saved in reversed(placed):
            os.unlink(p)
            if saved:
                os.rename(saved, p)
        run(["udevadm", "control", "--reload"], check=False)


@pytest.mark.guarantee("G13", "G15")
def test_identity_links_and_wipe(dm, md_raid6, nullb, udev_nxd, tmp_path):
    """lsblk -f and /dev/disk/by-uuid, by-label before, during and after an
    nxd volume over an md RAID6 that held an ext4: the links follow the
    file system on the volume, never the raw array's (format 2: data past
    the label in block 0)."""
    md = md_raid6(ndisks=4, disk_mb=64)
    ssd = nullb(16)
    old = ext4_on_data_area(md, "oldfs")
    settle(md, ssd)

    # Before: the raw array owns the file system's links.
    assert lsblk(md)["fstype"] == "ext4"
    assert disk_link("uuid", old) == real(md)
    assert lsblk(ssd)["fstype"] is None

    # create refuses the file system on the HDD, and goes ahead with --force.
    p = nxdctl("create", "adm0", md, ssd, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"HDD {md} holds ext4 UUID {old} LABEL 'oldfs'" in p.stderr, p.stderr
    assert not dm.exists("adm0")
    nxdctl("create", "adm0", md, ssd, "--force")
    dm.created.append("adm0")
    vol = dm.path("adm0")
    run(["mkfs.ext4", "-q", "-F", "-L", "nxdost0", vol])
    fs = run(["blkid", "-p", "-s", "UUID", "-o", "value", vol]).stdout.strip()
    settle(md, ssd, vol)
    vuuid = ondisk.uuid_str(ondisk.newest_sb(ssd)[1]["vol_uuid"])
    huuid = ondisk.uuid_str(ondisk.newest_sb(ssd)[1]["hdd_uuid"])
    doff = nxdvol.hdd_data_offset(md)
    assert doff >= facts.MiB, doff

    # During: both halves are nxd members, the volume owns the links.
    m, s, v = lsblk(md), lsblk(ssd), lsblk(vol)
    assert (m["fstype"], m["uuid"], m["label"]) == ("nxd_hdd", vuuid, None), m
    assert (s["fstype"], s["uuid"]) == ("nxd_log", vuuid), s
    assert (v["fstype"], v["uuid"], v["label"]) == ("ext4", fs, "nxdost0"), v
    assert disk_link("uuid", fs) == real(vol)
    assert disk_link("label", "nxdost0") == real(vol)
    assert disk_link("uuid", old) is None
    env = udev_env(md)
    assert env["ID_FS_UUID_SUB"] == huuid and env["ID_FS_USAGE"] == "raid", env
    assert env["NXD_FORMAT_VERSION"] == "2", env
    # md's own links stay.
    assert disk_link("id", f"md-uuid-{env['MD_UUID']}") == real(md), env
    # libblkid finds no file system on the raw array: the volume's starts
    # past the label.
    assert env.get("NXD_DATA_FS_TYPE", "") == "", env
    assert run(["blkid", "-p", md], check=False).returncode == 2
    assert udev_env(ssd)["ID_FS_USAGE"] == "other"
    run(["e2fsck", "-fn", vol])

    # Writes in the log, volume removed: nobody owns the links, and wipe
    # refuses to lose the writes.
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    nxdctl("pause-destage", "adm0")
    data = os.urandom(8192)
    run(["mount", vol, str(mnt)])
    try:
        with open(mnt / "f", "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    finally:
        run(["umount", str(mnt)])
    p = nxdctl("remove", "adm0")
    assert "still holds" in p.stderr, p.stderr
    dm.created.remove("adm0")
    settle(md, ssd)
    assert lsblk(md)["fstype"] == "nxd_hdd"
    assert disk_link("uuid", fs) is None
    assert disk_link("label", "nxdost0") is None
    for d in (md, ssd):
        p = nxdctl("wipe", d, check=False)
        assert p.returncode == 1, (d, p.stdout + p.stderr)
        assert "holds writes not yet on the HDD" in p.stderr, p.stderr

    # The pair comes back without --force; drained and removed, it wipes.
    nxdctl("create", "adm0", md, ssd)
    dm.created.append("adm0")
    nxdctl("drain", "adm0")
    p = nxdctl("remove", "adm0")
    assert "still holds" not in p.stderr, p.stderr
    dm.created.remove("adm0")
    nxdctl("wipe", md, ssd)
    settle(md, ssd)

    # After: the raw array shows nothing, and owns no link; the file
    # system, with the file written through the log, is in the data area.
    m = lsblk(md)
    assert m["fstype"] is None, m
    assert lsblk(ssd)["fstype"] is None
    assert disk_link("uuid", fs) is None
    assert disk_link("label", "nxdost0") is None
    assert run(["wipefs", "--no-act", md]).stdout.strip() == ""
    n = facts.data_sectors(blkdev.dev_sectors(md))
    view = dm.create("adm0view", f"0 {n} linear {md} {doff // 512}")
    try:
        run(["e2fsck", "-fn", view])
        run(["mount", "-o", "ro", view, str(mnt)])
        try:
            assert (mnt / "f").read_bytes() == data
        finally:
            run(["umount", str(mnt)])
    finally:
        dm.remove("adm0view")
    remove_vol(dm, "adm0")


# --------------------------------------------- status, show-super, why ---

PROM_PY = """
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
out = {}
for f in parse(sys.stdin.read()):
    for s in f.samples:
        if s.labels.get("volume") == sys.argv[1]:
            key = s.name + "".join(f",{k}={v}" for k, v in sorted(s.labels.items())
                                   if k != "volume")
            out[key] = s.value
print(repr(out))
"""


@pytest.mark.guarantee("G13")
def test_status_routes_show_super(dm, md_raid6, nullb):
    """status, list, --prometheus and histogram --routes against the
    kernel's counters; show-super against the superblock read here and the
    next activation's recovery counts; suggest-threshold reads the array's
    geometry.  The HDD is a 4-disk RAID6 with 64 KiB chunks: stripe 128 KiB."""
    md = md_raid6(ndisks=4, disk_mb=64, chunk_kb=64)
    ssd = nullb(16)
    nxdctl("create", "adm1", md, ssd)
    dm.created.append("adm1")
    vol = dm.path("adm1")
    nxdctl("pause-destage", "adm1")
    nxdctl("histogram", "adm1", "--reset")
    with rawio.Fd(vol) as f:
        for i in range(10):                     # logged: size
            f.pwrite(i * facts.BLOCK, os.urandom(facts.BLOCK))
        for i in range(2):                      # logged: not chunk aligned
            f.pwrite(facts.MiB + i * 256 * 1024 + facts.BLOCK, os.urandom(128 * 1024))
        for i in range(2):                      # HDD: two whole stripes
            f.pwrite(4 * facts.MiB + i * 256 * 1024, os.urandom(256 * 1024))
    ioc = ctl.get_stats("adm1")
    c = ioc["counters"]
    assert c["writes_logged"] == 12 and c["writes_direct"] == 2, c

    st = json.loads(nxdctl("status", "adm1", "--json", "--interval", "0").stdout)
    v = st["volumes"][0]
    assert (v["name"], v["state"]) == ("adm1", "ok"), v
    assert (v["hdd"], v["ssd"]) == (real(md), real(ssd)), v
    assert v["log_used_bytes"] == c["log_used_blocks"] * 4096
    assert v["log_bytes"] == c["log_blocks"] * 4096
    assert v["dirty_blocks"] == c["index_entries"] == 10 + 2 * 32, (v, c)
    assert v["writes_logged"] == 12 and v["ssd_errors"] == v["hdd_errors"] == 0
    assert v["index_bytes"] == c["index_bytes"] > 0, (v, c)      # memory
    text = nxdctl("status", "adm1", "--interval", "0.5").stdout
    assert text.startswith("adm1: ok\n") and f"HDD        {real(md)}" in text, text
    assert "0.0 MiB/s over the last 0.5 s" in text, text     # destage paused
    assert any(ln.split()[0] == "memory" and ln.endswith(" (index)")
               for ln in text.splitlines()[1:]), text

    rows = {}
    for r in nxdctl("histogram", "adm1", "--routes").stdout.splitlines()[1:]:
        w = r.split()
        if w[0] == "write":             # SIZE may hold spaces: numbers follow
            k = next(i for i, x in enumerate(w) if i and x.isdigit())
            rows[" ".join(w[1:k])] = w
    assert rows["4K"][-3:] == ["size", "10", "-"], rows["4K"]
    assert rows["64K+1 - 128K"][-3:] == ["chunk", "2", "-"], rows["64K+1 - 128K"]
    assert rows["128K+1 - 256K"][-3:] == ["-", "size", "2"], rows["128K+1 - 256K"]

    prom = run(["/usr/bin/python3", "-c", PROM_PY, "adm1"],
               input=nxdctl("stats", "--prometheus").stdout).stdout
    p = eval(prom)      # noqa: S307 - our own repr of floats and strings
    assert p["nxd_writes_logged_total"] == c["writes_logged"]
    assert p["nxd_index_entries"] == c["index_entries"]
    assert p["nxd_state,state=ok"] == 1 and p["nxd_state,state=degraded"] == 0
    assert p["nxd_request_size_bytes_count,op=write"] == 14
    assert p["nxd_request_size_bytes_bucket,le=131072,op=write"] == 12

    row = next(r.split() for r in nxdctl("list").stdout.splitlines()[1:]
               if r.split()[0] == "adm1")
    assert row[3] == "ok" and row[6] == "0", row

    sug = nxdctl("suggest-threshold", "adm1", "--ssd-iops", "20000", "--ssd-mbps",
                 "500", "--hdd-iops", "150", "--hdd-mbps", "200").stdout
    assert "Array: full stripe 128K, chunk 64K" in sug, sug
    assert "Suggested write threshold: 128K" in sug, sug

    # Offline: the superblock as read here, the log as recovery walks it.
    nxdctl("remove", "adm1")
    dm.created.remove("adm1")
    sup = json.loads(nxdctl("show-super", ssd, "--json").stdout)
    i, sb = ondisk.newest_sb(ssd)
    s = sup["superblock"]
    assert sup["in_use"] == i and s["sb_seq"] == sb["sb_seq"], (sup, sb)
    for k in ("tail_seq", "head_seq", "tail_pos", "head_pos", "gen",
              "ring_blocks", "data_sectors"):
        assert s[k] == sb[k], k
    assert s["hdd_label_sector"] == sb["label_sector"] == 0      # version 2: block 0
    assert s["vol_uuid"] == ondisk.uuid_str(sb["vol_uuid"]) and s["clean"], s
    assert sup["log"]["hdd"] == real(md), sup["log"]
    hs = json.loads(nxdctl("show-super", md, "--json").stdout)["label"]
    assert hs["sector"] == sb["label_sector"] and hs["vol_uuid"] == s["vol_uuid"]
    assert not hs["log_frozen"] and not hs["log_abandoned"]
    nxdctl("create", "adm1", md, ssd)
    dm.created.append("adm1")
    c = ctl.get_stats("adm1")["counters"]
    assert (sup["log"]["live_segments"], sup["log"]["data_blocks"]) == \
        (c["recovered_segments"], c["recovered_blocks"]), (sup["log"], c)
    assert c["recovered_blocks"] >= 10 + 2 * 32
    nxdctl("drain", "adm1")
    remove_vol(dm, "adm1")
    sup = json.loads(nxdctl("show-super", ssd, "--json").stdout)
    assert sup["log"]["data_blocks"] == 0, sup["log"]


@pytest.mark.guarantee("G15")
def test_install_uninstall_and_runtime_deps(tmp_path):
    """make install-module and install-tools into a staging root, then make
    uninstall: every file goes, nothing else is left; deps.sh --runtime on
    this system (which has them all) installs nothing and says so."""
    kver = os.uname().release
    stage = tmp_path / "stage"
    run(["make", "-s", "-C", REPO, "install-module", "install-tools",
         f"DESTDIR={stage}", f"KVER={kver}"])
    files = sorted(str(p.relative_to(stage)) for p in stage.rglob("*")
                   if p.is_file() and "/modules." not in str(p))
    assert files == sorted([f"lib/modules/{kver}/extra/dm-nxd.ko", "usr/sbin/nxdctl",
                            "usr/lib/udev/nxd-probe", "usr/lib/udev/rules.d/60-nxd.rules",
                            "usr/lib/udev/rules.d/64-nxd-members.rules",
                            "usr/lib/udev/rules.d/69-nxd-activate.rules",
                            "usr/lib/systemd/system/nxd-activate@.service",
                            "usr/lib/systemd/system/nxd-activate@.timer",
                            "usr/lib/systemd/system/nxd-stop.service",
                            "usr/lib/systemd/system/nxd-monitor.service",
                            "usr/lib/systemd/system-preset/80-nxd.preset",
                            "usr/lib/ocf/resource.d/nxd/nxd",
                            "usr/share/man/man8/nxdctl.8", "usr/share/man/man4/dm-nxd.4",
                            "usr/share/man/man5/nxdtab.5", "usr/share/man/man8/nxd-probe.8"]), files
    run(["make", "-s", "-C", REPO, "uninstall", f"DESTDIR={stage}", f"KVER={kver}"])
    left = [p for p in stage.rglob("*") if p.is_file() and "/modules." not in str(p)]
    assert not left, left

    p = run([os.path.join(REPO, "scripts", "deps.sh"), "--runtime"])
    assert "runtime dependencies present" in p.stdout and "installing" not in p.stdout, p.stdout


def _built(where):
    """{"dkms": path, "nxdctl": path} of the two .debs in @where, checked
    to be two."""
    out = [os.path.join(where, f) for f in sorted(os.listdir(where)) if f.endswith(".deb")]
    assert len(out) == 2, out
    return {("dkms" if "dkms" in os.path.basename(d) else "nxdctl"): d for d in out}


def _deb_version(deb):
    return run(["dpkg-deb", "-f", deb, "Version"]).stdout.strip()


def _status(pkg):
    """dpkg's Status and Version of @pkg; ("", "") when dpkg has no record."""
    p = run(["dpkg-query", "-W", "-f=${Status}|${Version}", pkg], check=False)
    return tuple(p.stdout.split("|")) if p.returncode == 0 else ("", "")


@pytest.fixture(scope="module")
def debs():
    """The packages of `make deb` (scripts/mkdeb.sh), built from this tree,
    and again as a higher version (DEB_VERSION=<version>+next) for the
    upgrade ("next").  man-db's trigger (a whole mandb run after dpkg
    installs a man page, minutes under TCG) is off meanwhile, as debconf's
    man-db/auto-update false does it."""
    # make test builds them on the host (NXD_DEBS, NXD_DEBS_NEXT); else
    # here, in folders of our own (another guest may be building in
    # build/deb).
    where = None
    if os.environ.get("NXD_DEBS") and os.environ.get("NXD_DEBS_NEXT"):
        got = _built(os.environ["NXD_DEBS"])
        got["next"] = _built(os.environ["NXD_DEBS_NEXT"])
    else:
        where = tempfile.mkdtemp(prefix="nxd-deb-")
        mkdeb = os.path.join(REPO, "scripts", "mkdeb.sh")
        ver = run([mkdeb, "--print-version"]).stdout.strip()
        run(["env", f"DEB_OUT={where}/n", f"DEB_VERSION={ver}", mkdeb], timeout=3000)
        run(["env", f"DEB_OUT={where}/next", f"DEB_VERSION={ver}+next", mkdeb], timeout=3000)
        got = _built(f"{where}/n")
        got["next"] = _built(f"{where}/next")
    flag = "/var/lib/man-db/auto-update"
    had = os.path.exists(flag)
    if had:
        os.rename(flag, flag + ".nxd-test")
    yield got
    if had:
        os.rename(flag + ".nxd-test", flag)
    if where:
        shutil.rmtree(where, ignore_errors=True)


NXD_STOP_WANTS = "/etc/systemd/system/local-fs-pre.target.wants/nxd-stop.service"
NXD_STOP_DSH = "/var/lib/systemd/deb-systemd-helper-enabled/nxd-stop.service.dsh-also"


@pytest.mark.guarantee("G15")
def test_package_nxdctl(dm, loopdev, nullb, debs):
    """The nxdctl package installed, upgraded and purged with dpkg: its
    nxdctl makes a volume, its nxd-probe and udev rules name the two halves
    in lsblk, nxd-stop.service is enabled; upgraded to a higher version of
    the same tree, dpkg -s and nxdctl --version say it, every file is there
    and the admin's disable of nxd-stop.service stays; purged, every file it
    brought, its conffiles, its unit's links and dpkg's record of it go.

    The files are those make deb's nxdctl package lists, its man pages and
    units included."""
    keep = Saved("/usr/sbin/nxdctl", "/usr/lib/udev/rules.d/60-nxd.rules")
    ver, nver = _deb_version(debs["nxdctl"]), _deb_version(debs["next"]["nxdctl"])
    assert run(["dpkg", "--compare-versions", nver, "gt", ver], check=False).returncode == 0, \
        (ver, nver)
    files = ("/usr/sbin/nxdctl", "/usr/lib/udev/nxd-probe",
             "/usr/lib/udev/rules.d/64-nxd-members.rules",
             "/usr/lib/udev/rules.d/69-nxd-activate.rules",
             "/usr/lib/systemd/system/nxd-activate@.service",
             "/usr/lib/systemd/system/nxd-activate@.timer",
             "/usr/lib/systemd/system/nxd-stop.service",
             "/usr/lib/systemd/system/nxd-monitor.service",
             "/usr/lib/systemd/system-preset/80-nxd.preset",
             "/usr/lib/ocf/resource.d/nxd/nxd",
             "/usr/share/man/man8/nxdctl.8.gz", "/usr/share/man/man5/nxdtab.5.gz",
             "/usr/share/man/man8/nxd-probe.8.gz", "/usr/share/doc/nxdctl/copyright")
    try:
        run(["dpkg", "-i", debs["nxdctl"]])
        assert _status("nxdctl") == ("install ok installed", ver)
        listed = run(["dpkg", "-L", "nxdctl"]).stdout.split()
        for f in files:
            assert f in listed and os.path.exists(f), f
        # Enabled on the first installation (deb-systemd-helper works offline).
        assert os.readlink(NXD_STOP_WANTS).endswith("/systemd/system/nxd-stop.service")
        hdd, ssd = loopdev(64), nullb(16)
        run(["/usr/sbin/nxdctl", "create", "pkg0", hdd, ssd])
        dm.created.append("pkg0")
        settle(hdd, ssd)
        assert lsblk(ssd)["fstype"] == "nxd_log"
        assert lsblk(hdd)["fstype"] == "nxd_hdd"
        data = os.urandom(64 * 1024)
        rawio.pwrite_dev(dm.path("pkg0"), 8192, data)
        run(["/usr/sbin/nxdctl", "drain", "pkg0"])
        remove_vol(dm, "pkg0")
        doff = nxdvol.hdd_data_offset(hdd)
        run(["/usr/sbin/nxdctl", "wipe", hdd, ssd])
        assert rawio.pread_dev(hdd, doff + 8192, len(data)) == data

        # The admin turns nxd-stop.service off; the upgrade leaves it off.
        run(["systemctl", "disable", "nxd-stop.service"])
        assert not os.path.lexists(NXD_STOP_WANTS)
        run(["dpkg", "-i", debs["next"]["nxdctl"]])
        assert _status("nxdctl") == ("install ok installed", nver)
        assert run(["/usr/sbin/nxdctl", "--version"]).stdout.split()[1] == nver
        nlisted = run(["dpkg", "-L", "nxdctl"]).stdout.split()
        assert sorted(nlisted) == sorted(listed), set(nlisted) ^ set(listed)
        for f in files:
            assert os.path.exists(f), f
        assert not os.path.lexists(NXD_STOP_WANTS)
        run(["systemctl", "enable", "nxd-stop.service"])
        assert os.path.lexists(NXD_STOP_WANTS)

        conffiles = [ln.split()[0] for ln in run(
            ["dpkg-query", "-W", "-f=${Conffiles}\n", "nxdctl"]).stdout.splitlines() if ln.strip()]
        run(["dpkg", "--purge", "nxdctl"])
        st = _status("nxdctl")
        assert st == ("", "") or st[0].endswith(" not-installed"), st
        left = [f for f in listed + conffiles
                if f.startswith(("/usr/", "/etc/")) and os.path.lexists(f) and not os.path.isdir(f)]
        assert not left, left
        assert not [f for f in os.listdir("/var/lib/dpkg/info") if f.startswith("nxdctl.")]
        assert not os.path.lexists(NXD_STOP_WANTS)
        assert not os.path.exists(NXD_STOP_DSH)
    finally:
        run(["dpkg", "--purge", "nxdctl"], check=False)
        keep.restore()
        run(["udevadm", "control", "--reload"], check=False)


def _dkms_kernels():
    """The kernels dm-nxd-dkms's postinst builds for: every /lib/modules/<kver>
    with headers that dkms.conf's BUILD_EXCLUSIVE_KERNEL admits."""
    with open(os.path.join(REPO, "dkms.conf")) as f:
        excl = re.search(r'^BUILD_EXCLUSIVE_KERNEL="(.*)"', f.read(), re.M).group(1)
    return sorted(k for k in os.listdir("/lib/modules")
                  if os.path.isdir(f"/lib/modules/{k}/build/include") and re.match(excl, k))


def _dkms_ko(kver):
    """DKMS's dm-nxd.ko for @kver (compressed as the kernel's own modules,
    dm-nxd.ko.xz on Debian's 6.12), or None."""
    for ext in ("", ".xz", ".zst", ".gz"):
        p = f"/lib/modules/{kver}/updates/dkms/dm-nxd.ko{ext}"
        if os.path.exists(p):
            return p
    return None


def _dkms_installed(kvers, modver):
    st = run(["dkms", "status", "-m", "dm-nxd", "-v", modver]).stdout
    for k in kvers:
        assert any(k in ln and "installed" in ln for ln in st.splitlines()), (k, st)
        assert _dkms_ko(k), k


# Measured in a 6.1 guest (TCG, one vCPU, a loaded 2-core host), before
# the postinst built for every kernel with headers and before the upgrade:
# 556 s, of which dpkg -i 376 s (DKMS compiles the module, then depmod runs
# over every module of the kernel) and dpkg -r 145 s.  Now two
# installations, each building for both kernels of the guest (on the host,
# outside a guest: 142 s for the two kernels, 138 s for the upgrade).
@pytest.mark.guarantee("G15")
@pytest.mark.watchdog(7200)
@pytest.mark.skipif(os.environ.get("NXD_DKMS_TEST") != "1",
                    reason="the DKMS package test runs from make test-packages (NXD_DKMS_TEST=1): "
                           "DKMS builds and depmod for every kernel, twice, beyond make test's hour")
def test_package_dkms(dm, loopdev, nullb, debs):
    """The dm-nxd-dkms package installed, upgraded and purged with dpkg: its
    postinst builds and installs the module with DKMS for every kernel with
    headers, not only the running one, whose module then runs a volume
    (data checked); upgraded to a higher version of the same tree, dpkg -s
    says it and the module is built and installed again for every kernel;
    purged, DKMS, /usr/src, every kernel's module directory and dpkg no
    longer have it.

    The suite's own module is loaded again afterwards."""
    kver = os.uname().release
    kvers = _dkms_kernels()
    assert kver in kvers, kvers
    with open(os.path.join(REPO, "dkms.conf")) as f:
        modver = [ln.split("=", 1)[1].strip().strip('"') for ln in f
                  if ln.startswith("PACKAGE_VERSION=")][0]
    ver, nver = _deb_version(debs["dkms"]), _deb_version(debs["next"]["dkms"])
    t0 = time.monotonic()
    timing = []
    listed = []
    try:
        run(["dpkg", "-i", debs["dkms"]], timeout=3000)
        timing.append(f"dpkg -i dm-nxd-dkms ({len(kvers)} kernels): {time.monotonic() - t0:.0f} s")
        assert _status("dm-nxd-dkms") == ("install ok installed", ver)
        listed = run(["dpkg", "-L", "dm-nxd-dkms"]).stdout.split()
        assert f"/usr/src/dm-nxd-{modver}/dkms.conf" in listed
        _dkms_installed(kvers, modver)
        ko = _dkms_ko(kver)
        run(["rmmod", "dm_nxd"])
        run(["modprobe", "dm-nxd"])
        with open("/sys/module/dm_nxd/srcversion") as f:
            assert f.read().strip() == run(["modinfo", "-F", "srcversion", ko]).stdout.strip()
        hdd, ssd = loopdev(64), nullb(16)
        v = nxdvol.Volume(dm, "pkgdkms", hdd, ssd)
        data = os.urandom(256 * 1024)
        rawio.pwrite_dev(v.dev, 4096, data)
        v.remove()
        v = nxdvol.Volume(dm, "pkgdkms", hdd, ssd)          # loaded again, read back
        assert rawio.pread_dev(v.dev, 4096, len(data)) == data
        v.remove()
        run(["rmmod", "dm_nxd"])

        before = {k: os.stat(_dkms_ko(k)).st_ctime_ns for k in kvers}
        t1 = time.monotonic()
        run(["dpkg", "-i", debs["next"]["dkms"]], timeout=3000)
        timing.append(f"dpkg -i (upgrade): {time.monotonic() - t1:.0f} s")
        assert _status("dm-nxd-dkms") == ("install ok installed", nver)
        _dkms_installed(kvers, modver)
        for k in kvers:           # removed by the old prerm, built again
            assert os.stat(_dkms_ko(k)).st_ctime_ns > before[k], k
    finally:
        if host.module_loaded("dm_nxd"):
            run(["rmmod", "dm_nxd"], check=False)
        t2 = time.monotonic()
        run(["dpkg", "--purge", "dm-nxd-dkms"], check=False, timeout=1800)
        timing.append(f"dpkg --purge dm-nxd-dkms: {time.monotonic() - t2:.0f} s")
        host.save_log("package-dkms-timing.txt", "\n".join(timing) + "\n")
        if not host.module_loaded("dm_nxd"):
            run(["insmod", host.MODULE_KO])
    for k in kvers:
        assert not _dkms_ko(k), k
    assert "dm-nxd" not in run(["dkms", "status"]).stdout
    assert not os.path.exists(f"/usr/src/dm-nxd-{modver}")
    left = [f for f in listed if os.path.lexists(f) and not os.path.isdir(f)]
    assert not left, left
    assert not [f for f in os.listdir("/var/lib/dpkg/info") if f.startswith("dm-nxd-dkms.")]
