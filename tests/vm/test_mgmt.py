# SPDX-License-Identifier: GPL-2.0
"""dm-nxd management interfaces (issue 6): the request histogram through
/dev/nxd-control and nxdctl, read-and-clear under load, nxdctl's outputs,
thresholds with size suffixes, sysfs tunables across table reloads, udev
links.

Expected histogram cells are computed here from the request sizes, the
routing rules (dm-nxd(4)) and the bucket definition in nxd_ioctl.h.
"""
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import struct
import time

import pytest

from nxdt import blkdev, ctl, facts, host, nxdvol, ondisk, rawio
from nxdt.blkdev import grow_loop
from nxdt.ctl import NXDCTL, nxdctl
from nxdt.facts import BLOCK, KiB, MiB
from nxdt.host import run
from nxdt.nxdvol import Volume
from nxdt.mgmt import LABELS, UdevPaused, cells, delta, hist_json, io_pattern, writer

REPO = host.REPO
FIG6 = os.path.join(REPO, "tools", "tests", "figure6.txt")


@pytest.mark.guarantee("G13", "G2")
def test_histogram_buckets_routes_alignment(dm, loopdev, nullb):
    """Each request from 512 B to 40 MiB lands in exactly the histogram cell
    (direction, size bucket, route, alignment) the routing rules predict;
    the control device and nxdctl histogram --json agree."""
    hdd, ssd = loopdev(160), nullb(16)
    v = Volume(dm, "nxdhist", hdd, ssd)
    v.pause()                                  # reads of logged data stay on the SSD
    big = 40 * MiB
    huge = rawio.huge_buffer(big)
    try:
        with UdevPaused():
            ctl.get_stats(v.name, reset=True)
            prev = hist_json(v.name)
            assert not any(c for c, _ in prev.values())
            f = rawio.Fd(v.dev)

            def step(what, fn, want, exact=True):
                nonlocal prev
                fn()
                now = hist_json(v.name)
                got = delta(now, prev)
                prev = now
                if exact:
                    assert got == want, f"{what}: histogram delta {got}, want {want}"
                return got

            W, R = "write", "read"
            step("512 B write", lambda: f.pwrite(0, os.urandom(512)),
                 cells((W, 512, "ssd", "unaligned")))
            step("4 KiB write", lambda: f.pwrite(64 * KiB, os.urandom(4096)),
                 cells((W, 4096, "ssd", "aligned")))
            step("4 KiB write at +512", lambda: f.pwrite(80 * KiB + 512, os.urandom(4096)),
                 cells((W, 4096, "ssd", "unaligned")))
            step("8 KiB write", lambda: f.pwrite(128 * KiB, os.urandom(8192)),
                 cells((W, 8192, "ssd", "aligned")))
            step("64 KiB write", lambda: f.pwrite(256 * KiB, os.urandom(65536)),
                 cells((W, 65536, "ssd", "aligned")))
            step("1 MiB write", lambda: f.pwrite(MiB, os.urandom(MiB)),
                 cells((W, MiB, "hdd", "aligned")))
            step("512 B read (logged)", lambda: f.pread(0, 512),
                 cells((R, 512, "ssd", "unaligned")))
            step("4 KiB read (logged)", lambda: f.pread(64 * KiB, 4096),
                 cells((R, 4096, "ssd", "aligned")))
            step("8 KiB read (logged)", lambda: f.pread(128 * KiB, 8192),
                 cells((R, 8192, "ssd", "aligned")))
            step("64 KiB read (logged)", lambda: f.pread(256 * KiB, 65536),
                 cells((R, 65536, "ssd", "aligned")))
            step("1 MiB read (HDD)", lambda: f.pread(MiB, MiB),
                 cells((R, MiB, "hdd", "aligned")))
            step("1 MiB read over logged blocks", lambda: f.pread(0, MiB),
                 cells((R, MiB, "ssd", "aligned")))
            step("4 KiB read, nothing logged", lambda: f.pread(8 * MiB, 4096),
                 cells((R, 4096, "hdd", "aligned")))

            # 40 MiB in one request.  From 2 MiB hugepages the block layer
            # builds a single bio of 40 MiB (multi-page bvecs) and dm core
            # does not split it for a target without max_io_len: it must
            # land in "> 32M".  Without hugepages, direct I/O builds bios of
            # at most 256 pages (1 MiB), so what arrives is 40 x 1 MiB.
            off = 96 * MiB
            host.kmsg_write(f"{host.MARK_PREFIX} 40 MiB request from "
                             f"{'hugepages' if huge is not None else '4 KiB pages'}")
            if huge is not None:
                data = os.urandom(big)
                huge[:big] = data
                mv = memoryview(huge)[:big]
                step("40 MiB write (hugepages)",
                     lambda: os.pwritev(f.fd, [mv], off),
                     cells((W, big, "hdd", "aligned")))
                huge[:big] = bytes(big)
                step("40 MiB read (hugepages)",
                     lambda: os.preadv(f.fd, [mv], off),
                     cells((R, big, "hdd", "aligned")))
                mv.release()
                assert huge[:big] == data
            else:
                b = rawio.aligned_buf(big)
                got = step("40 MiB write (4 KiB pages)",
                           lambda: os.pwritev(f.fd, [memoryview(b)[:big]], off), None, exact=False)
                assert sum(n for _, n in got.values()) == big, got
                assert all(k[0] == W and k[2] == "hdd" and k[3] == "aligned" for k in got), got
                got = step("40 MiB read (4 KiB pages)",
                           lambda: os.preadv(f.fd, [memoryview(b)[:big]], off), None, exact=False)
                assert sum(n for _, n in got.values()) == big, got
                assert all(k[0] == R and k[2] == "hdd" and k[3] == "aligned" for k in got), got

            # 5000 bytes through the page cache: the block device's page
            # cache (4 KiB buffers for a device whose size is a multiple of
            # 4 KiB) writes back whole pages, so the volume sees 8192 bytes
            # in 4 KiB-aligned page writes (one 8 KiB bio, or two of 4 KiB
            # with one bio per buffer_head), small enough for the log.
            # Before that, the partial second page is read in (from the HDD:
            # nothing is logged there).
            def buffered():
                fd = os.open(v.dev, os.O_RDWR)
                try:
                    os.pwrite(fd, os.urandom(5000), 32 * MiB)
                    os.fsync(fd)
                finally:
                    os.close(fd)
            got = step("5000 B buffered write", buffered, None, exact=False)
            wr = {k: c for k, c in got.items() if k[0] == W}
            rd = {k: c for k, c in got.items() if k[0] == R}
            assert sum(n for _, n in wr.values()) == 8192, got
            assert set(wr) <= {(W, 1, "ssd", "aligned"), (W, 2, "ssd", "aligned")}, got
            for (_, bk, _, _), (c, n) in wr.items():
                assert n == c * (4096 if bk == 1 else 8192), got
            assert all(k[2] == "hdd" and k[3] == "aligned" for k in rd), got
            assert sum(n for _, n in rd.values()) <= 8192, got
            f.close()
            # The control device agrees with nxdctl (before udev runs the
            # probes it queued meanwhile).
            st = ctl.get_stats(v.name)
            assert {k: (c, n) for k, (c, n, t) in st["hist"].items()} == prev
    finally:
        if huge is not None:
            huge.close()
        rawio.release_hugepages()


@pytest.mark.guarantee("G13")
def test_reset_is_atomic_under_io(dm, loopdev, nullb):
    """Writers issue an exact number of requests while the histogram is
    read-and-cleared over and over: the sum of the snapshots plus the last
    plain read equals what was written, for counts, bytes and counters."""
    v = Volume(dm, "nxdreset", loopdev(128), nullb(16))
    nproc, per = 2, 1200
    ctl.get_stats(v.name, reset=True)
    q = mp.Queue()
    ps = [mp.Process(target=writer, args=(v.dev, i * 32 * MiB, per, q)) for i in range(nproc)]
    tot = {"count": 0, "bytes": 0, "ctr": 0}
    resets = nonempty = 0

    def take(reset):
        st = ctl.get_stats(v.name, reset=reset, fd=fd)
        h = st["hist"]
        c = ctl.hist_sum(h, d="write")
        tot["count"] += c
        tot["bytes"] += ctl.hist_sum(h, d="write", field=1)
        k = st["counters"]
        tot["ctr"] += k["writes_logged"] + k["writes_direct"] + k["writes_around_full"]
        return c

    fd = os.open(ctl.CONTROL, os.O_RDONLY)
    try:
        for p in ps:
            p.start()
        while any(p.is_alive() for p in ps):
            if take(True):
                nonempty += 1
            resets += 1
            time.sleep(0.005)
        for p in ps:
            p.join()
        errs = [q.get(timeout=10) for _ in ps]
        assert all(e is None for e in errs), errs
        take(False)
    finally:
        os.close(fd)
    n = nproc * per
    assert tot["count"] == n, (tot, n, resets)
    assert tot["bytes"] == nproc * (per // 2) * (4096 + 128 * KiB), tot
    assert tot["ctr"] == n, tot
    assert resets >= 20 and nonempty >= 5, (resets, nonempty)


@pytest.mark.guarantee("G13")
def test_nxdctl_histogram_stats_list(dm, loopdev, nullb):
    """nxdctl histogram against the NytroXD Figure 6 layout, --routes, stats
    (every counter equal to the ioctl and the status line), list with the
    UUID read from the SSD, --json and --reset."""
    hdd, ssd = loopdev(128), nullb(16)
    v = Volume(dm, "nxdctl0", hdd, ssd)
    v.pause()
    with UdevPaused():
        nxdctl("histogram", v.name, "--reset")
        io_pattern(v)
        text = nxdctl("histogram", v.name).stdout
        routes = nxdctl("histogram", v.name, "--routes").stdout
        stats = nxdctl("stats", v.name).stdout
        stats_json = json.loads(nxdctl("stats", v.name, "--json").stdout)
        ioc = ctl.get_stats(v.name)
        status = v.status()

    # Figure 6 of the NytroXD paper, line by line, numbers aside.
    with open(FIG6) as fh:
        ref = fh.read().splitlines()
    lines = text.splitlines()
    assert len(lines) == len(ref) == 34, text
    num = re.compile(r"= \d+$")
    for a, b in zip(lines, ref):
        assert num.sub("= N", a) == num.sub("= N", b), (a, b)
    vals = {}
    for ln in lines[2:]:
        m = re.match(r"^Num (Reads|Writes) (.+?)\s+= (\d+)$", ln)
        assert m, ln
        vals[(m.group(1), m.group(2))] = int(m.group(3))
    assert [k[1] for k in vals if k[0] == "Writes"] == LABELS
    want_w = {"4K": 100, "4K+1 - 8K": 50, "512K+1 - 1M": 4}
    for lab in LABELS:
        assert vals[("Writes", lab)] == want_w.get(lab, 0), (lab, text)
    assert vals[("Reads", "4K")] == 20, text
    for (dr, lab), n in vals.items():
        d = "read" if dr == "Reads" else "write"
        assert n == ctl.hist_sum(ioc["hist"], d=d, b=LABELS.index(lab)), (dr, lab)

    # --routes: a table with per-route and per-alignment counts.
    rows = [r.split() for r in routes.splitlines()]
    head = rows[0]
    assert head[:7] == ["OP", "SIZE", "REQS", "SSD", "HDD", "ALIGNED", "UNALIGNED"], head
    by = {}
    for r in rows[1:]:
        # SIZE may contain spaces ("4K+1 - 8K"): numbers follow it.
        op, rest = r[0], r[1:]
        k = next(i for i, w in enumerate(rest) if w.isdigit())
        by[(op, " ".join(rest[:k]))] = [int(x) for x in rest[k:k + 5]]
    assert by[("write", "4K")] == [100, 100, 0, 100, 0], by[("write", "4K")]
    assert by[("write", "4K+1 - 8K")] == [50, 50, 0, 50, 0]
    assert by[("write", "512K+1 - 1M")] == [4, 0, 4, 4, 0]
    assert by[("read", "4K")] == [20, 20, 0, 20, 0]

    # stats: every counter, by name, as the ioctl and the status line say.
    kv = dict(ln.split() for ln in stats.splitlines())
    # The counters, then the values derived from them.
    derived = ["destage_mean_bio_bytes", "destage_stripe_full_pct", "destage_busy_bytes_per_s"]
    assert list(kv) == facts.STATUS_FIELDS + derived, list(kv)
    cc = ioc["counters"]
    bios, us = cc["destage_bios"], cc["destage_busy_us"]
    want = [cc["destage_hdd_bytes"] // bios if bios else 0,
            cc["destage_stripe_bios"] * 100 // bios if bios else 0,
            int(cc["destaged_bytes"] * 1e6 / us) if us else 0]
    assert [int(kv[k]) for k in derived] == want == \
        [stats_json["derived"][k] for k in derived], (kv, cc)
    for k in facts.STATUS_FIELDS:
        if k in ("recovery_us",):
            continue
        assert int(kv[k]) == ioc["counters"][k] == status[k], (k, kv[k], ioc["counters"][k], status[k])
        assert stats_json["counters"][k] == int(kv[k])
    assert int(kv["writes_logged"]) == 150 and int(kv["writes_direct"]) == 4

    # list: name, device number, size, thresholds, mode and the volume
    # UUID, which is read here from the SSD superblock.
    uuid = ondisk.uuid_str(ondisk.newest_sb(ssd)[1]["vol_uuid"])
    ma, mi = v.devnum()
    # With health: state, log use and errors as the counters say (destage
    # is paused and nothing runs, so they have not moved since).
    c = ioc["counters"]
    out = nxdctl("list").stdout.splitlines()
    assert out[0].split() == ["NAME", "MAJ:MIN", "SIZE", "STATE", "LOG_USED", "DIRTY",
                              "ERRORS", "WRITE_THR", "MODE", "OWNER", "UUID"]
    row = next(r.split() for r in out[1:] if r.split()[0] == v.name)
    assert row[1] == f"{ma}:{mi}" and row[3] == "ok" and row[6] == "0", row
    assert row[4] == f"{100 * c['log_used_blocks'] / c['log_blocks']:.1f}%", (row, c)
    # A volume made by a table line has no owner in its label: "-".
    assert row[7] == "64K" and row[8] == "auto" and row[9] == "-", row
    assert row[10] == uuid, (row, uuid)
    j = json.loads(nxdctl("list", "--json").stdout)
    jv = next(x for x in j["volumes"] if x["name"] == v.name)
    assert (jv["major"], jv["minor"], jv["sectors"]) == (ma, mi, v.length), jv
    assert jv["write_threshold"] == 65536 and jv["mode"] == "auto" and jv["uuid"] == uuid
    assert jv["state"] == "ok" and jv["dirty_blocks"] == c["index_entries"] > 0, (jv, c)
    assert jv["log_used_bytes"] == c["log_used_blocks"] * 4096, (jv, c)
    assert j["total"] == ctl.list_vols()[1]
    # read_threshold was removed: shown nowhere, its list slot reads 0.
    sj = json.loads(nxdctl("status", v.name, "--json", "--interval", "0").stdout)
    st_text = nxdctl("status", v.name, "--interval", "0").stdout
    assert "read_threshold" not in jv and "read_threshold" not in sj["volumes"][0], (jv, sj)
    assert "read threshold" not in st_text.lower(), st_text
    assert "write threshold 64K, mode auto" in st_text, st_text
    lv = next(x for x in ctl.list_vols()[2] if x["name"] == v.name)
    assert lv["reserved0"] == 0 and lv["reserved"] == [0] * 5, lv

    # --reset clears (root), and a second read shows zeros.
    nxdctl("histogram", v.name, "--reset")
    assert ctl.hist_sum(ctl.get_stats(v.name)["hist"]) == 0


@pytest.mark.guarantee("G2")
def test_threshold_suffixes_move_routing(dm, loopdev):
    """`nxdctl threshold --write 64K / 1M`: the sysfs value and where a
    128 KiB aligned write goes, counted by the loop devices' own stats."""
    hdd, ssd = loopdev(128), loopdev(16)
    v = Volume(dm, "nxdthr", hdd, ssd)
    v.pause()

    def write_and_count(off, n):
        h0, s0 = blkdev.io_sectors(hdd)[1], blkdev.io_sectors(ssd)[1]
        with rawio.Fd(v.dev) as f:
            f.pwrite(off, os.urandom(n))
        return blkdev.io_sectors(hdd)[1] - h0, blkdev.io_sectors(ssd)[1] - s0

    out = nxdctl("threshold", v.name, "--write", "64K").stdout
    assert out == "write_threshold 65536 (64K)\n", out
    # --read went with read_threshold: refused, nothing set.
    p = nxdctl("threshold", v.name, "--write", "8K", "--read", "8K", check=False)
    assert p.returncode == 1 and "'--read'" in p.stderr, (p.returncode, p.stderr)
    assert v.sget("write_threshold") == "65536"
    assert not os.path.exists(v.sysfs("read_threshold"))
    assert v.sget("write_threshold") == "65536"
    dh, ds = write_and_count(16 * MiB, 128 * KiB)
    assert dh == 256 and ds == 0, (dh, ds)
    dh, ds = write_and_count(17 * MiB, 64 * KiB)
    assert dh == 0 and ds >= 128, (dh, ds)

    out = nxdctl("threshold", v.name, "--write", "1M").stdout
    assert "write_threshold 1048576 (1M)" in out, out
    assert v.sget("write_threshold") == "1048576"
    assert nxdvol.table_opts(v.table())["write_threshold"] == "1048576"
    dh, ds = write_and_count(20 * MiB, 128 * KiB)
    assert dh == 0 and ds >= 256, (dh, ds)
    # 1 MiB is the largest bio direct I/O builds from 4 KiB pages, and a
    # write of exactly the threshold is logged.
    dh, ds = write_and_count(24 * MiB, MiB)
    assert dh == 0 and ds >= 2048, (dh, ds)
    out = nxdctl("threshold", v.name, "--write", "512K").stdout
    assert "write_threshold 524288 (512K)" in out, out
    dh, ds = write_and_count(26 * MiB, MiB)
    assert dh == 2048 and ds == 0, (dh, ds)

    p = nxdctl("threshold", v.name, "--write", "2G", check=False)
    assert p.returncode != 0
    assert v.sget("write_threshold") == "524288"


@pytest.mark.guarantee("G4")
def test_sysfs_values_survive_reload(dm, loopdev, nullb):
    """Tunables set through sysfs appear in dmsetup table, survive dmsetup
    table | dmsetup load; a reload without options keeps them, one with an
    option changes only that one."""
    v = Volume(dm, "nxdtun", loopdev(64), nullb(8))
    want = {"write_threshold": "12288", "mode": "log_all",
            "low_watermark": "10", "high_watermark": "90", "destage_rate": "50",
            "ssd_discard": "0", "drain_on_suspend": "1",
            "auto_min_threshold": "8192", "auto_max_threshold": "262144",
            "stream_min": "1048576", "stripe_size": "131072",
            "stream_share": "40"}
    for k in ("high_watermark", "low_watermark", "write_threshold",
              "mode", "destage_rate", "ssd_discard", "drain_on_suspend",
              "auto_min_threshold", "auto_max_threshold", "stream_min",
              "stripe_size", "stream_share"):
        assert v.sset(k, want[k]) == 0, k
    assert v.tunables() == want
    assert nxdvol.table_opts(v.table()) == want
    before = v.table()
    assert before.split()[5] == "24" and "read_threshold" not in before, before
    # The documented round trip, literally.
    p = run(f"dmsetup table {v.name} | dmsetup load {v.name}", check=False)
    assert p.returncode == 0, p.stderr
    v.dm.suspend(v.name)
    v.dm.resume(v.name)
    assert v.table() == before
    assert v.tunables() == want
    assert v.status()["state"] == "ok"
    with rawio.Fd(v.dev) as f:
        f.pwrite(MiB, os.urandom(MiB))          # log_all: logged
    assert v.status()["writes_logged"] >= 1
    # A table line without options keeps them; one option changes one.
    v.dm.reload(v.name, v.line([]))
    assert v.tunables() == want
    v.dm.reload(v.name, v.line(["mode", "auto"]))
    assert v.tunables() == {**want, "mode": "auto"}


@pytest.mark.guarantee("G13")
def test_udev_links(dm, loopdev, nullb):
    """/dev/nxd/<name> and /dev/disk/by-nxd-uuid/<uuid> are created, follow a
    rename, stay over a reload and go with the volume; the control node is
    0640 group disk."""
    hdd, ssd = loopdev(64), nullb(8)
    udevd = run(["udevadm", "control", "--ping"], check=False).returncode == 0
    rules = "/etc/udev/rules.d/60-nxd.rules"
    installed = []
    ctl0 = os.stat(ctl.CONTROL)
    try:
        if not os.path.exists("/usr/sbin/nxdctl"):
            shutil.copy2(NXDCTL, "/usr/sbin/nxdctl")
            installed.append("/usr/sbin/nxdctl")
        if not os.path.exists(rules):
            shutil.copy(os.path.join(REPO, "udev", "60-nxd.rules"), rules)
            installed.append(rules)
        if udevd:
            run(["udevadm", "control", "--reload"])
        v = Volume(dm, "nxdudev", hdd, ssd)
        uuid = ondisk.uuid_str(ondisk.newest_sb(ssd)[1]["vol_uuid"])
        real = os.path.realpath(v.dev)
        if not udevd:
            p = run(["udevadm", "test", "--action=change", f"/sys/block/{v.kname()}"],
                    check=False)
            out = p.stdout + p.stderr
            assert re.search(rf"\bnxd/{v.name}\b", out), out[-3000:]
            assert uuid in out
            return
        run(["udevadm", "trigger", "--action=change", "--settle", f"/sys/block/{v.kname()}"])
        host.udev_settle()
        assert os.path.realpath(f"/dev/nxd/{v.name}") == real
        assert os.path.realpath(f"/dev/disk/by-nxd-uuid/{uuid}") == real
        # Rename: the link follows the name.
        run(["dmsetup", "rename", v.name, "nxdudev2"])
        v.dm.created[v.dm.created.index(v.name)] = "nxdudev2"
        v.name = "nxdudev2"
        host.udev_settle()
        assert os.path.realpath("/dev/nxd/nxdudev2") == real
        assert not os.path.lexists("/dev/nxd/nxdudev")
        # A reload keeps them (10-dm.rules' suspend/resume events).
        v.dm.reload(v.name, v.table())
        host.udev_settle()
        assert os.path.realpath("/dev/nxd/nxdudev2") == real
        assert os.path.realpath(f"/dev/disk/by-nxd-uuid/{uuid}") == real
        # The control node's permissions.
        run(["udevadm", "trigger", "--action=add", "--settle", "/sys/class/misc/nxd-control"])
        st = os.stat(ctl.CONTROL)
        assert oct(st.st_mode & 0o777) == oct(0o640) and st.st_gid == 6, st   # group disk
        v.remove()
        host.udev_settle()
        assert not os.path.lexists("/dev/nxd/nxdudev2")
        assert not os.path.lexists(f"/dev/disk/by-nxd-uuid/{uuid}")
    finally:
        for pth in installed:
            os.unlink(pth)
        if udevd:
            run(["udevadm", "control", "--reload"], check=False)
        os.chown(ctl.CONTROL, ctl0.st_uid, ctl0.st_gid)
        os.chmod(ctl.CONTROL, ctl0.st_mode & 0o7777)


@pytest.mark.guarantee("G12", "G4")
def test_grow_online(dm, loopdev, nullb):
    """The HDD grows under a live volume: nxdctl assemble still finds the
    pair (label not at the HDD's end yet) at the volume's length; a longer
    table moves the label to the new end at resume; logged and HDD data
    survive, the new area works, and a fresh load replays at the new size.
    Checked against a model of every byte written."""
    rng = random.Random(7)
    hdd, ssd = loopdev(64), nullb(16)
    v = Volume(dm, "nxdgrow", hdd, ssd)
    old_len = v.length
    model = bytearray(old_len * 512)

    def write(off, n):
        data = rng.randbytes(n)
        rawio.pwrite_dev(v.dev, off, data)
        model[off:off + n] = data

    def verify(nbytes):
        got = rawio.pread_dev(v.dev, 0, nbytes)
        bad = next((i for i in range(0, nbytes, BLOCK)
                    if got[i:i + BLOCK] != model[i:i + BLOCK]), None)
        assert bad is None, f"data differs at byte {bad}"

    def assemble(sectors):
        v.remove()
        p = nxdctl("assemble", ssd, "--name", v.name, check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        dm.created.append(v.name)
        assert blkdev.dev_sectors(v.dev) == sectors
        verify(sectors * 512)

    for i in range(0, old_len * 512, 4 * MiB):       # large: to the HDD
        write(i, MiB)
    v.drain()
    v.pause()                                       # small: stay logged
    for _ in range(300):
        write(rng.randrange(old_len * 512 // BLOCK) * BLOCK, BLOCK)
    write(old_len * 512 - BLOCK, BLOCK)             # the last block, too
    assert v.status()["log_used_blocks"] > 0

    grow_loop(hdd, 96)
    new_len = facts.data_sectors(blkdev.dev_sectors(hdd))
    assert new_len > old_len
    _, sb = ondisk.newest_sb(ssd)
    assert (sb["data_sectors"], sb["label_sector"]) == (old_len, 0)
    doff = nxdvol.hdd_data_offset(hdd)            # version 2: label in block 0
    assert doff >= MiB and doff % BLOCK == 0, doff

    # Assembly after the HDD grew: the label is found where the SSD says.
    assemble(old_len)

    # Longer than the HDD can hold: refused, the volume carries on.
    k = host.kmsg_mark("grow: too long")
    with pytest.raises(host.CmdError):
        dm.load(v.name, nxdvol.nxd_line(hdd, ssd, new_len + 2048))
    assert host.wait_kmsg(k, r"Volume larger than the HDD less its 1 MiB label area")
    run(["dmsetup", "clear", v.name])

    # Grow: the label stays in block 0 and records the new size.
    k = host.kmsg_mark("grow: longer table")
    dm.reload(v.name, nxdvol.nxd_line(hdd, ssd, new_len))
    assert host.wait_kmsg(k, rf"grew volume .* from {old_len} to {new_len} data sectors")
    v.length = new_len
    assert blkdev.dev_sectors(v.dev) == new_len
    _, sb = ondisk.newest_sb(ssd)
    assert (sb["data_sectors"], sb["label_sector"]) == (new_len, 0)
    assert sb["hdd_sectors"] == blkdev.dev_sectors(hdd)
    label = rawio.pread_dev(hdd, 0, BLOCK)
    assert struct.unpack_from("<Q", label)[0] == ondisk.LABEL_MAGIC
    assert sb["vol_uuid"] in label
    assert struct.unpack_from("<Q", label, 48)[0] == blkdev.dev_sectors(hdd)
    assert nxdvol.hdd_data_offset(hdd) == doff
    model += bytes(rawio.pread_dev(hdd, doff + old_len * 512, (new_len - old_len) * 512))
    verify(new_len * 512)

    # The new area, the old label's block included, small and large.
    write(old_len * 512, BLOCK)
    write(old_len * 512 + 8 * MiB, 2 * MiB)
    for _ in range(100):
        write(rng.randrange(old_len * 512 // BLOCK, new_len * 512 // BLOCK) * BLOCK,
              BLOCK)
    v.message("resume_destage")
    verify(new_len * 512)

    # A fresh load replays the log at the new size; so does assemble.
    v.pause()
    write(new_len * 512 - BLOCK, BLOCK)
    assemble(new_len)
    v.drain()
    verify(new_len * 512)
    assert v.status()["state"] == "ok"
