# SPDX-License-Identifier: GPL-2.0
"""Cut chains over two dm-pcut devices for test_crash_pcut.py: the totals,
one chain of power cuts on one volume (run_chain), the live soak
(run_soak), the workload on one bare pcut device (run_bare)."""
import json
import os
import random
import time

from nxdt import facts, ondisk, pcut, rawio
from nxdt.blkdev import NullBlk
from nxdt.dmlib import DMError
from nxdt.facts import parse_status
from nxdt import host
from nxdt.host import REPO, dmesg_tail, summary
from nxdt.nxdvol import nxd_line
from nxdt.pcut import oracle, Workload, ZERO
from nxdt.rawio import DirectIO


KVER = os.uname().release
LOGS = os.environ.get("NXD_LOGS") or os.path.join(REPO, "build", "logs")
SECTOR = 512
HDD_MIB = int(os.environ.get("NXD_PCUT_HDD_MIB", "64"))
SSD_MIB = int(os.environ.get("NXD_PCUT_SSD_MIB", "8"))
GROW_MIB = 8
# make crash-campaign FILL=n: the HDD advertises a 128 KiB stripe (io_opt)
# and destage rounds fill stripes with at least n copies (destage_fill_min).
FILL = int(os.environ.get("NXD_PCUT_FILL", "0"))
FILL_IO_OPT = 128 << 10 if FILL else 0


class Totals:
    def __init__(self):
        self.cuts = self.sectors = self.lost = self.unexplained = 0
        self.forced = self.stuck = self.no_comeback = self.not_removed = 0
        self.durable = self.new_values = 0
        self.format_cuts = self.format_lost = 0
        self.recovery_cuts = 0
        self.fmt_cuts = self.grows = self.grow_cuts = 0
        self.kernel = 0     # chains whose kernel log shows a problem
        # Over the checked cuts: cuts at which a device lost acknowledged
        # writes not yet flushed (cached records dropped or torn; writes in
        # flight, never acknowledged, do not count), such cuts per device,
        # and the records of each kind per device.
        self.lossy_cuts = 0
        self.lossy = {"hdd": 0, "ssd": 0}
        self.dropped = {"hdd": 0, "ssd": 0}
        self.torn = {"hdd": 0, "ssd": 0}
        self.inflight = {"hdd": 0, "ssd": 0}
        self.failures = []

    def count_cut(self, dev, st):
        """@st: the dm-pcut status of device @dev ("hdd" or "ssd") at a cut."""
        self.dropped[dev] += st["dropped"]
        self.torn[dev] += st["torn"]
        self.inflight[dev] += st["lost_inflight"]
        lossy = bool(st["dropped"] or st["torn"])
        self.lossy[dev] += lossy
        return lossy

    def line(self):
        return (f"cut points {self.cuts}, sectors checked {self.sectors}, lost {self.lost}, "
                f"stale/unexplained {self.unexplained}, durable writes {self.durable}, "
                f"sectors with post-flush values {self.new_values}, forced cuts {self.forced}, "
                f"stuck I/O {self.stuck}, remove refused {self.not_removed}, "
                f"did not come back {self.no_comeback} (then formatted: {self.format_cuts} cuts, "
                f"{self.format_lost} sectors lost), recoveries cut {self.recovery_cuts}, "
                f"formats cut {self.fmt_cuts}, grows {self.grows} ({self.grow_cuts} cut), "
                f"chains with kernel reports {self.kernel}, cuts that lost acknowledged unflushed "
                f"writes {self.lossy_cuts}: " +
                ", ".join(f"{d} {self.lossy[d]} (records dropped {self.dropped[d]}, torn "
                          f"{self.torn[d]}, in flight {self.inflight[d]})" for d in ("hdd", "ssd")))

    def bad(self):
        return (self.lost or self.unexplained or self.stuck or self.no_comeback or
                self.not_removed or self.kernel)


def chain_kernel_check(request, tot, seed, marker, detail):
    """The kernel log of one chain, checked as dmesg_check checks a test's:
    a campaign stopped by hand still says which of its chains had a kernel
    problem (the fixture's check runs only when the whole test ends)."""
    lines = host.dmesg_since(marker)
    allow = [a for m in request.node.iter_markers("dmesg_allow") for a in m.args]
    bad = host.find_kernel_problems(lines, allow)
    if bad:
        tot.kernel += 1
        path = host.save_log(f"dmesg-campaign-seed{seed}.txt", "\n".join(lines) + "\n")
        tot.failures.append(f"seed {seed}: kernel problems in dmesg (log: {path}):\n" +
                            "\n".join(bad[:40]))
        summary(detail, f"seed {seed}: kernel problems: {bad[0][:300]}")


def cut_params(seed, i, max_n=6000):
    rng = random.Random(seed * 7919 + i)
    keep = [0, 50, 100][(seed + i) % 3]
    first = ["ssd", "hdd"][(seed // 3 + i) % 2]
    gap = rng.choice([0, 0, rng.randint(1, 16), rng.randint(50, 400)])
    n = rng.randint(150, max_n)
    p_fsync = rng.choice([0.01, 0.03, 0.08])
    # One cut in three also cuts the recovery that follows (after 1-40
    # group ops: superblock, label, replay, the first destage round).
    rcut = rng.randint(1, 40) if rng.random() < 1 / 3 else 0
    rfirst = rng.choice(["ssd", "hdd"])
    rgap = rng.choice([0, rng.randint(1, 20)])
    admin = rng.random() < 0.5
    # About one cut in four comes after an idle gap (idle_then_cut): the
    # writers stop, a destage round moves the log tail, then both devices
    # lose their caches at once.  Always the second of a chain, so that
    # every slice of make test has one.
    idle = rng.random() < 0.2 or i % 4 == 1
    return {"keep": keep, "torn": 30 if keep == 50 else 0, "first": first, "gap": gap, "n": n,
            "p_fsync": p_fsync, "rcut": rcut, "rfirst": rfirst, "rgap": rgap,
            "admin": admin, "idle": idle}


def inflight(devno):
    try:
        with open(f"/sys/dev/block/{devno}/inflight") as f:
            return f.read().split()
    except OSError as e:
        return str(e)


def removed(dm, nx, tot, what):
    """Remove nxd; False (and a failure counted) if dm refused."""
    try:
        dm.remove(nx)
        return True
    except DMError as e:
        tot.not_removed += 1
        tot.failures.append(f"{what} refused: {e}")
        return False


def cut_load(dm, nx, table, victim, n, gap, devs, tot, tag):
    """Load nxd with @victim set to cut @n group ops into the load (the
    other device @gap ops later); power both on again if either was cut.
    Returns (created, cut, group ops the load took when not cut), or None
    when nxd could not be removed."""
    ops0 = victim.status()["group_ops"]
    victim.cut_after(n, gap)
    try:
        dm.create(nx, table)
        created = True
    except DMError:
        created = False
    time.sleep(0.5)                 # the first destage round, if any
    if all(d.status()["state"] == "live" for d in devs):
        # Not reached: disarm both (a gap arms the other device too); a
        # reload of a live pcut is a clean stop.
        ops = victim.status()["group_ops"] - ops0
        for d in devs:
            d.power_on()
        return created, False, ops
    if created and not removed(dm, nx, tot, f"{tag}: remove after a cut load"):
        return None
    for d in devs:
        d.power_on()
    return False, True, None


def idle_then_cut(dm, nx, first, other, wl, n):
    """The idle gap before a cut: the workload runs until the cut group
    has done @n ops (measured progress, not a time), stops, and once the
    destager's next round has moved the log tail (segments_reclaimed
    grows) both devices are cut at the same moment.  What that round
    gave up must be durable on the HDD: its copies, and the HDD writes
    that superseded logged blocks.  Returns a note for the summary."""
    ops0 = first.status()["group_ops"]
    deadline = time.monotonic() + 180
    while first.status()["group_ops"] - ops0 < n and time.monotonic() < deadline:
        time.sleep(0.05)
    wl.stop()
    st0 = parse_status(dm.status(nx))
    note = f"idle: stopped at {first.status()['group_ops'] - ops0} group ops, log " \
           f"{st0['log_used_blocks']} blocks"
    if st0["log_used_blocks"]:
        try:
            host.wait_for(lambda: parse_status(dm.status(nx))["segments_reclaimed"] >
                          st0["segments_reclaimed"], timeout=60, interval=0.05,
                          what="a destage round after the writers stopped")
            st1 = parse_status(dm.status(nx))
            note += (f", a round reclaimed {st1['segments_reclaimed'] - st0['segments_reclaimed']}"
                     f" segments, copied {st1['destaged_blocks'] - st0['destaged_blocks']} blocks")
        except AssertionError:
            note += ", no round within 60 s"
    first.cut()
    other.cut()
    return note


def chain_plan(seed, ncuts):
    """Which chains also cut their first load (a format on blank devices),
    and before which cut a chain grows its HDD (None: never)."""
    rng = random.Random(seed * 104729)
    fmt = (rng.randint(1, 4), rng.choice(["ssd", "hdd"]), rng.choice([0, rng.randint(1, 8)])) \
        if seed % 2 else None
    grow = (ncuts // 2, rng.randint(1, 8), rng.choice(["ssd", "hdd"]),
            rng.choice([0, rng.randint(1, 8)])) if seed % 3 == 0 and ncuts >= 2 else None
    return fmt, grow


def remove_devices(dm, names, *nbs):
    """Remove the dm devices @names (last first), then close the null_blks."""
    for n in reversed(names):
        if n in dm.created:
            try:
                dm.remove(n)
            except DMError:
                pass
    for nb in nbs:
        nb.close()


def recs_near(wl, res):
    """Every write or discard touching a 4 KiB block of a reported problem:
    the evidence needed to tell a stale merge (RMW) from a stale destage."""
    blocks = {pr["sector"] >> 3 for pr in res["problems"]}
    return [r.asdict() for r in wl.recs
            if any(r.s0 >> 3 <= b <= (r.s0 + r.n - 1) >> 3 for b in blocks)]


def nonzero_sectors(img, start, end):
    """Sectors [start, end) of @img that are not zeros."""
    return [s for s in range(start, end) if img[s * SECTOR:(s + 1) * SECTOR] != ZERO]


def run_chain(dm, seed, opts, ncuts, tot, fname, max_n=6000, force=None, lie=()):
    """One volume, @ncuts cuts.  Updates @tot.  For the negative controls
    (test_controls.py): @force overrides cut_params(), and the devices
    named in @lie ("ssd", "hdd") ignore flushes and FUA from the start of
    each round's workload to its cut (the fresh table at power-on is
    honest again)."""
    hdd_nb = NullBlk(HDD_MIB, discard=True)
    ssd_nb = NullBlk(SSD_MIB, discard=True)
    names = (f"pch{seed}", f"pcs{seed}", f"pnx{seed}")
    group = f"nx{seed}"
    fmt, grow = chain_plan(seed, ncuts)
    try:
        # A chain that grows starts on the first HDD_MIB - GROW_MIB.
        hdd_sec = (HDD_MIB - (GROW_MIB if grow else 0)) * 2048
        ph = pcut.Pcut(dm, names[0], hdd_nb.dev, group, seed * 2 + 1, sectors=hdd_sec,
                       io_opt=FILL_IO_OPT)
        ps = pcut.Pcut(dm, names[1], ssd_nb.dev, group, seed * 2 + 2)
        vol = facts.data_sectors(ph.sectors)
        table = nxd_line(ph.devno, ps.devno, vol, opts)
        nx = names[2]
        created = False
        if fmt:
            # Cut the format of blank devices: nothing was acknowledged, so
            # the next load comes up clean, or refuses with a reason and
            # 'format' starts again; either way the volume reads zeros.
            tag = f"seed {seed} format cut {fmt}"
            for d in (ph, ps):
                d.set(keep=0, torn=0)
            r = cut_load(dm, nx, table, ps if fmt[1] == "ssd" else ph, fmt[0], fmt[2],
                         (ph, ps), tot, tag)
            if r is None:
                return
            created, was_cut, ops = r
            tot.fmt_cuts += was_cut
            refused = ""
            if not created:
                try:
                    dm.create(nx, table)
                    created = True
                except DMError as e:
                    # The constructor must say why (dm logs "table: <dev>:
                    # nxd: <ti->error>").
                    why = [ln.split(" nxd: ", 1)[1] for ln in dmesg_tail(10).splitlines()
                           if "table: " in ln and " nxd: " in ln]
                    if not why:
                        tot.failures.append(f"{tag}: reload refused ({e}) with no reason "
                                            f"in the kernel log:\n{dmesg_tail(6)}")
                        return
                    refused = f"; reload refused ({e}: {why[-1]}), then 'format'"
                    try:
                        dm.create(nx, nxd_line(ph.devno, ps.devno, vol, (opts + " format").strip()))
                        created = True
                    except DMError as e2:
                        tot.failures.append(f"{tag}: and with format: {e2}\n{dmesg_tail(6)}")
                        return
            st = parse_status(dm.status(nx))
            img = bytes(DirectIO(1 << 20).read_all(dm.path(nx), vol * SECTOR))
            bad = nonzero_sectors(img, 0, vol)
            summary(fname, f"{tag}: cut {was_cut} (uncut load: {ops} ops){refused}; "
                    f"state {st['state']}, "
                    f"non-zero sectors {len(bad)}")
            if st["state"] != "ok" or bad:
                tot.unexplained += len(bad)
                tot.failures.append(f"{tag}: state {st['state']}, {len(bad)} non-zero sectors "
                                    f"after a cut format (first {bad[:4]})")
                return
        if not created:
            try:
                dm.create(nx, table)
            except DMError as e:
                raise AssertionError(f"seed {seed}: nxd create on blank devices failed: {e}")
        init = bytes(vol * SECTOR)
        wid_base = 0
        for i in range(ncuts):
            if grow and i == grow[0]:
                # The HDD grows by GROW_MIB; the longer table's load writes
                # the new label and superblock, and is cut 1-8 ops in.  No
                # writes meanwhile: the old range must read exactly as
                # before, the new one as zeros (but for the old label area).
                tag = f"seed {seed} grow before cut {i} {grow}"
                if not removed(dm, nx, tot, f"{tag}: remove before the grow"):
                    return
                ph.sectors = HDD_MIB * 2048
                ph.power_on()
                old_vol, vol = vol, facts.data_sectors(ph.sectors)
                table = nxd_line(ph.devno, ps.devno, vol, opts)
                r = cut_load(dm, nx, table, ps if grow[2] == "ssd" else ph, grow[1], grow[3],
                             (ph, ps), tot, tag)
                if r is None:
                    return
                tot.grows += 1
                tot.grow_cuts += r[1]
                if not r[0]:
                    try:
                        dm.create(nx, table)
                    except DMError as e:
                        tot.no_comeback += 1
                        tot.failures.append(f"{tag}: the longer table did not load: {e}\n"
                                            f"{dmesg_tail(6)}")
                        return
                st = parse_status(dm.status(nx))
                img = bytes(DirectIO(1 << 20).read_all(dm.path(nx), vol * SECTOR))
                old = old_vol * SECTOR
                lost = 0 if img[:old] == init[:old] else \
                    sum(1 for s in range(old_vol)
                        if img[s * SECTOR:(s + 1) * SECTOR] != init[s * SECTOR:(s + 1) * SECTOR])
                bad = nonzero_sectors(img, old_vol + 2048, vol)
                summary(fname, f"{tag}: cut {r[1]} (uncut load: {r[2]} ops); state "
                        f"{st['state']}, {old_vol} -> {vol} "
                        f"sectors, changed in the old range {lost}, non-zero in the new {len(bad)}")
                tot.lost += lost
                tot.unexplained += len(bad)
                if st["state"] != "ok" or lost or bad:
                    tot.failures.append(f"{tag}: state {st['state']}, {lost} sectors of the old "
                                        f"range changed, {len(bad)} non-zero in the new range")
                    return
                init = img
            p = cut_params(seed, i, max_n)
            p.update(force or {})
            tag = f"seed {seed} cut {i} opts '{opts}' {p}{' lying ' + '+'.join(lie) if lie else ''}"
            for d in (ph, ps):
                d.set(keep=p["keep"], torn=p["torn"])
            for d in lie:
                {"ssd": ps, "hdd": ph}[d].message("ignore_flush", 1)
            first, other = (ps, ph) if p["first"] == "ssd" else (ph, ps)
            if not p["idle"]:
                first.cut_after(p["n"], p["gap"])
            wl = Workload(dm.path(nx), vol, seed, i, wid_base, p_fsync=p["p_fsync"],
                          admin=nx if p["admin"] else None)
            t0 = time.monotonic()
            wl.start()
            idle_note = ""
            if p["idle"]:
                idle_note = "; " + idle_then_cut(dm, nx, first, other, wl, p["n"])
            forced = []
            deadline = t0 + 180
            t_first = None
            while True:
                time.sleep(0.05)
                sf, so = first.status()["state"], other.status()["state"]
                if sf != "live" and t_first is None:
                    t_first = time.monotonic()
                if sf != "live" and so != "live":
                    break
                now = time.monotonic()
                if sf == "live" and now > deadline:
                    first.cut()
                    forced.append(first.name)
                elif sf != "live" and so == "live" and now > t_first + 30:
                    other.cut()
                    forced.append(other.name)
            alive = wl.stop()
            t_work = time.monotonic() - t0
            st_first, st_other = first.status(), other.status()
            nst = parse_status(dm.status(nx))
            tot.forced += len(forced)
            if alive or wl.stuck:
                tot.stuck += 1
                msg = (f"{tag}: writer I/O stuck after the cut (threads alive {len(alive)}, "
                       f"AIO writes in flight per thread {wl.stuck}) for 60 s after both "
                       f"devices were cut; in flight (read write) nxd {inflight(dm.devno(nx))} "
                       f"hdd pcut {inflight(ph.devno)} ssd pcut {inflight(ps.devno)}; "
                       f"nxd status: {dm.status(nx)}; pcut {first.name}: {first.status()}; "
                       f"{other.name}: {other.status()}")
                summary(fname, "STUCK: " + msg)
                # Evidence: the blocked tasks' stacks (sysrq-w) into a log file.
                try:
                    with open("/proc/sysrq-trigger", "w") as f:
                        f.write("w")
                    time.sleep(2)
                    path = os.path.join(LOGS, f"{KVER}-pcut-seed{seed}-cut{i}-stuck-dmesg.txt")
                    with open(path, "w") as f:
                        f.write(dmesg_tail(400) + "\n")
                    msg += f" (blocked tasks: {path})"
                except OSError:
                    pass
                tot.failures.append(msg)
                return
            if not removed(dm, nx, tot, f"{tag}: dmsetup remove of nxd"):
                return
            ph.power_on()
            ps.power_on()
            formatted = False
            if p["rcut"]:
                # Cut again while nxd recovers; then power on and recover.
                r = cut_load(dm, nx, table, ps if p["rfirst"] == "ssd" else ph, p["rcut"],
                             p["rgap"], (ph, ps), tot, tag)
                if r is None:
                    return
                created, was_cut, _ = r
                tot.recovery_cuts += was_cut
                if created:
                    st_r = parse_status(dm.status(nx))
                    dm.remove(nx)           # and load it the normal way below
                    if st_r["state"] != "ok":
                        tot.failures.append(f"{tag}: state {st_r['state']} after an uncut recovery")
            try:
                dm.create(nx, table)
            except DMError as e:
                tot.no_comeback += 1
                msg = f"{tag}: nxd did not come back: {e}\n{dmesg_tail(6)}"
                summary(fname, "NO COMEBACK: " + msg)
                tot.failures.append(msg)
                # What would an administrator lose by starting a new log?
                try:
                    dm.create(nx, nxd_line(ph.devno, ps.devno, vol, (opts + " format").strip()))
                except DMError as e2:
                    tot.failures.append(f"{tag}: and with format: {e2}")
                    return
                formatted = True
            st = parse_status(dm.status(nx))
            if st["state"] != "ok":
                tot.no_comeback += 1
                tot.failures.append(f"{tag}: nxd state after recovery {st['state']}")
            img = bytes(DirectIO(1 << 20).read_all(dm.path(nx), vol * SECTOR))
            t1 = time.monotonic()
            res = oracle(img, init, wl, vol, seed, wid_base)
            t_check = time.monotonic() - t1
            if formatted:
                tot.format_cuts += 1
                tot.format_lost += res["lost"] + res["unexplained"]
                summary(fname, f"{tag}: after 'format': lost {res['lost']} unexplained "
                        f"{res['unexplained']} of {res['sectors']} sectors "
                        f"(durable writes {res['durable_writes']})")
                if res["lost"] or res["unexplained"]:
                    tot.failures.append(f"{tag}: after the refused reload and 'format', "
                                        f"{res['lost']} sectors lost, first: {res['problems'][:2]}")
                init = img
                wid_base = wl._wid
                continue
            tot.cuts += 1
            lossy = tot.count_cut(p["first"], st_first)
            lossy |= tot.count_cut("ssd" if p["first"] == "hdd" else "hdd", st_other)
            tot.lossy_cuts += lossy
            tot.sectors += res["sectors"]
            tot.lost += res["lost"]
            tot.unexplained += res["unexplained"]
            tot.durable += res["durable_writes"]
            tot.new_values += res["new_values"]
            line = (f"{tag}: {len(wl.recs)} writes/discards {wl.counts}, {len(wl.flushes)} fsyncs "
                    f"({sum(1 for f in wl.flushes if f[2])} ok), workload {t_work:.1f}s, "
                    f"cut at group op {st_first['cut_op']}/{st_other['cut_op']} "
                    f"(forced {forced}), {p['first']}: kept {st_first['kept']} dropped "
                    f"{st_first['dropped']} torn {st_first['torn']} lost_inflight "
                    f"{st_first['lost_inflight']} ooo {st_first['ooo']}; other: kept "
                    f"{st_other['kept']} dropped {st_other['dropped']} torn {st_other['torn']}; "
                    f"nxd at the cut: {nst['state']} logged {nst['writes_logged']} direct "
                    f"{nst['writes_direct']} around_full {nst['writes_around_full']} inval "
                    f"{nst['invalidations']} destaged_blocks {nst['destaged_blocks']} reclaimed "
                    f"{nst['segments_reclaimed']} ssd_errors {nst['ssd_errors']} hdd_errors "
                    f"{nst['hdd_errors']}; recovered {st['recovered_segments']} segments; "
                    f"durable writes {res['durable_writes']}, lost {res['lost']}, "
                    f"unexplained {res['unexplained']}, check {t_check:.1f}s{idle_note}")
            summary(fname, line)
            if res["lost"] or res["unexplained"]:
                path = os.path.join(LOGS, f"{KVER}-pcut-seed{seed}-cut{i}.json")
                with open(path, "w") as f:
                    json.dump({"seed": seed, "cut": i, "opts": opts, "params": p,
                               "result": res, "flushes": wl.flushes,
                               "recs_at_first": recs_near(wl, res),
                               "nxd_at_cut": nst, "dmesg": dmesg_tail(80),
                               "status_first": st_first, "status_other": st_other}, f,
                              indent=1, default=str)
                tot.failures.append(f"{tag}: lost {res['lost']} unexplained "
                                    f"{res['unexplained']} (details: {path}); first: "
                                    f"{res['problems'][:3]}")
            init = img
            wid_base = wl._wid
    finally:
        remove_devices(dm, names, ssd_nb, hdd_nb)


def log_summary(ssd):
    """The newest superblock and the segments a replay would walk from
    its tail, for the loss record (best effort)."""
    try:
        _, sb = ondisk.newest_sb(ssd)
        segs = ondisk.walk_log(ssd, sb, max_segs=4096)
        nxt = None
        if segs:
            last = segs[-1]
            pos = ondisk.next_seg_pos(sb["ring_blocks"], last["pos"] + 1 + last["nr_data"])
        else:
            pos = sb["tail_pos"]
        raw = rawio.pread_dev(ssd, (sb["ring_start"] + pos) * 4096, 4096)
        nxt = ondisk.parse_seg(raw)
        return {"sb": {k: (v.hex() if isinstance(v, bytes) else v) for k, v in sb.items()},
                "segments": [(g["seq"], g["pos"], g["nr_data"], g["flags"]) for g in segs],
                "after_end": None if not nxt else
                {k: nxt[k] for k in ("seq", "gen", "pos", "nr_data", "flags")},
                "after_end_pos": pos}
    except Exception as e:  # noqa: BLE001 - diagnostics only
        return {"error": repr(e)}


def run_soak(dm, seed, opts, rounds, tot, fname, secs=(2.0, 6.0)):
    """The campaign's workload without power cuts: after each round of
    writers (and the admin thread in half the rounds) an fsync makes every
    completed write durable, so the oracle checks the live volume exactly;
    then both devices lose power with everything flushed (keep 100), nxd
    is recovered from the log and checked again.  A loss here is a bug of
    the live data path or of replay, not of what a cut happened to keep."""
    hdd_nb = NullBlk(HDD_MIB, discard=True)
    ssd_nb = NullBlk(SSD_MIB, discard=True)
    names = (f"psh{seed}", f"pss{seed}", f"psn{seed}")
    try:
        ph = pcut.Pcut(dm, names[0], hdd_nb.dev, f"so{seed}", seed * 2 + 1)
        ps = pcut.Pcut(dm, names[1], ssd_nb.dev, f"so{seed}", seed * 2 + 2)
        vol = facts.data_sectors(ph.sectors)
        table = nxd_line(ph.devno, ps.devno, vol, opts)
        nx = names[2]
        dm.create(nx, table)
        init = bytes(vol * SECTOR)
        wid_base = 0
        rng = random.Random(seed * 31337)
        for i in range(rounds):
            p = cut_params(seed, i)
            tag = f"soak seed {seed} round {i} opts '{opts}' admin {p['admin']}"
            for d in (ph, ps):
                d.set(keep=100, torn=0)
            wl = Workload(dm.path(nx), vol, seed, i, wid_base, p_fsync=p["p_fsync"],
                          admin=nx if p["admin"] else None)
            wl.start()
            time.sleep(rng.uniform(*secs))
            alive = wl.stop()
            if alive or wl.stuck:
                tot.stuck += 1
                tot.failures.append(f"{tag}: writers stuck without any cut: {dm.status(nx)}")
                return
            fd = os.open(dm.path(nx), os.O_RDWR)
            try:
                f = [time.monotonic_ns(), None, False]
                os.fsync(fd)
                f[1], f[2] = time.monotonic_ns(), True
                wl.flushes.append(f)
            finally:
                os.close(fd)
            results = []
            log_before = None
            for phase in ("live", "replayed"):
                if phase == "replayed":
                    ph.cut()
                    ps.cut()
                    if not removed(dm, nx, tot, f"{tag}: remove after the cut"):
                        return
                    ph.power_on()
                    ps.power_on()
                    log_before = log_summary(ps.path)
                    dm.create(nx, table)
                nst = parse_status(dm.status(nx))
                img = bytes(DirectIO(1 << 20).read_all(dm.path(nx), vol * SECTOR))
                res = oracle(img, init, wl, vol, seed, wid_base)
                results.append(f"{phase}: lost {res['lost']} unexplained {res['unexplained']}")
                tot.cuts += phase == "replayed"
                tot.sectors += res["sectors"]
                tot.lost += res["lost"]
                tot.unexplained += res["unexplained"]
                tot.durable += res["durable_writes"]
                if res["lost"] or res["unexplained"]:
                    path = os.path.join(LOGS, f"{KVER}-soak-seed{seed}-round{i}-{phase}.json")
                    with open(path, "w") as fo:
                        json.dump({"seed": seed, "round": i, "opts": opts, "phase": phase,
                                   "result": res, "flushes": wl.flushes,
                                   "recs_at_first": recs_near(wl, res), "nxd": nst,
                                   "log_before_replay": log_before if phase == "replayed" else None,
                                   "dmesg": dmesg_tail(80)}, fo, indent=1, default=str)
                    tot.failures.append(f"{tag}: {phase}: lost {res['lost']} unexplained "
                                        f"{res['unexplained']} (details: {path}); first: "
                                        f"{res['problems'][:3]}")
                    summary(fname, f"{tag}: FAILED {results}")
                    return
            # Both phases judge against the image before this round: the
            # replay must give what the live volume gave, from the same start.
            init = img
            summary(fname, f"{tag}: {len(wl.recs)} writes/discards {wl.counts}; nxd "
                    f"logged {nst['writes_logged']} direct {nst['writes_direct']} around_full "
                    f"{nst['writes_around_full']} inval {nst['invalidations']} rmw "
                    f"{nst.get('rmw_reads')} destaged_blocks {nst['destaged_blocks']}; {results}")
            wid_base = wl._wid
    finally:
        remove_devices(dm, names, ssd_nb, hdd_nb)


def run_bare(dm, seed, lying):
    """The same workload and oracle on one bare pcut device (no nxd): a
    correct disk must pass, a lying one (flushes and FUA not persisted) must
    be caught.  Returns the oracle's result."""
    nb = NullBlk(32, discard=True)
    name = f"pbare{seed}"
    try:
        pc = pcut.Pcut(dm, name, nb.dev, f"bare{seed}", seed)
        pc.set(keep=0, torn=0)
        if lying:
            pc.message("ignore_flush", 1)
        pc.cut_after(800)
        wl = Workload(pc.path, pc.sectors, seed, 0, 0, p_fsync=0.03)
        wl.start()
        end = time.monotonic() + 120
        while pc.status()["state"] == "live" and time.monotonic() < end:
            time.sleep(0.05)
        alive = wl.stop()
        assert not alive and not wl.stuck, "writers stuck on a cut pcut device"
        pc.power_on()
        img = bytes(DirectIO(1 << 20).read_all(nb.dev, pc.sectors * SECTOR))
        res = oracle(img, bytes(len(img)), wl, pc.sectors, seed, 0)
        summary("crash-pcut-slice.txt", f"oracle self-test {KVER} seed {seed} lying {lying}: "
                f"{len(wl.recs)} writes/discards {wl.counts}, durable {res['durable_writes']}, "
                f"lost {res['lost']}, unexplained {res['unexplained']}")
        return res
    finally:
        if name in dm.created:
            dm.remove(name)
        nb.close()


def seed_list():
    spec = os.environ.get("NXD_PCUT_SEEDS", "1-8")
    a, _, b = spec.partition("-")
    return list(range(int(a), int(b) + 1)) if b else [int(x) for x in a.split(",")]
