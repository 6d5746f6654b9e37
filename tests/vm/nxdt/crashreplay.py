# SPDX-License-Identifier: GPL-2.0
"""Crash tests over dm-log-writes (test_crash.py): record a workload on a
logged volume (record_workload), replay the log to each flush and FUA
mark and check every durable write (replay_and_check), and dm-flakey
runs that fail one device once."""
import os
import random
import subprocess
import threading
import time

from nxdt import facts, host, logwrites, nxdvol
from nxdt.blkdev import Loop, NullBlk
from nxdt.dmlib import DMError, DMIoctl, params
from nxdt.facts import BLOCK, parse_status, SECTOR
from nxdt.host import dmesg_tail, progress, summary, udev_stopped
from nxdt.logwrites import (choose_cuts, DevReplayer, hdd_mask_legit, Loader, parse_log,
                            save_failure, unstick, Watchdog)
from nxdt.models import Checker, CrashFailure
from nxdt.nxdvol import nxd_line
from nxdt.rawio import DirectIO
from nxdt.workloads import Workload


KVER = os.uname().release
MiB = 1 << 20
HDD_MIB = 16


def record_workload(dm, devs, seed, opts, ssd_mib, nops):
    """Run the seeded workload on nxd over two dm-log-writes devices, one
    per nxd device (HDD: log-writes over its own null_blk with its own log;
    SSD: the same), so that a flush sent to one device never makes the
    other's writes durable in the replay.  At every durability point a mark
    "m<k>", and after every op a mark "o<n>", goes to the SSD's log first,
    then to the HDD's: each such pair is a point the two logs share, the
    HDD's copy later in time than the SSD's, which choose_cuts() relies on.
    Returns (log paths {hdd, ssd}, workload, layout dict)."""
    H, S = HDD_MIB * MiB, ssd_mib * MiB
    back_h = devs(NullBlk(HDD_MIB, discard=True))
    back_s = devs(NullBlk(ssd_mib, discard=True))
    log_h = devs(Loop(512, f"crash-logh-{seed}"))
    log_s = devs(Loop(512, f"crash-logs-{seed}"))
    lwh, lws, nx = (f"crlwh{seed}", f"crlws{seed}", f"crnx{seed}")
    dm.create(lwh, f"0 {H // 512} log-writes {back_h.dev} {log_h.dev}")
    dm.create(lws, f"0 {S // 512} log-writes {back_s.dev} {log_s.dev}")
    vol = facts.data_sectors(H // 512)
    try:
        dm.create(nx, nxd_line(dm.devno(lwh), dm.devno(lws), vol, opts))
    except DMError as e:
        raise AssertionError(f"nxd create failed: {e}\n{dmesg_tail()}") from None

    def mark(k):
        dm.message(lws, f"mark m{k}")
        dm.message(lwh, f"mark m{k}")
    wl = Workload(dm.path(nx), vol * 512, seed, dm=dm, nxd_name=nx, on_durable=mark)
    wd = Watchdog(info=lambda: f"seed {seed} op {wl.nop} recent {wl.recent} "
                               f"nxd: {dm.status(nx)}", unstick=lambda: unstick(wl))
    try:
        os.fsync(wl.fd)
        mark(0)
        t0 = time.monotonic()
        for _ in range(nops):
            wd.arm()
            wl.step()
            dm.message(lws, f"mark o{wl.nop}")
            dm.message(lwh, f"mark o{wl.nop}")
        wd.arm()
        wl.final_sync()
        wd.arm()
        wd.disarm()
        st = parse_status(dm.status(nx))
        wl.verify_all()
        wtime = time.monotonic() - t0
    finally:
        wd.disarm()
        wl.close()
    dm.remove(nx)       # clean shutdown: the end of the logs tests it too
    lwstat = {"hdd": params(dm.status(lwh)), "ssd": params(dm.status(lws))}
    dm.remove(lws)
    dm.remove(lwh)
    layout = {"seed": seed, "opts": opts, "hdd_bytes": H, "ssd_bytes": S,
              "vol_sectors": vol, "nops": nops, "workload_s": round(wtime, 1),
              "log_status": lwstat, "nxd_status": st,
              # HDD sector of volume sector 0 (the label's data_offset)
              "data_off": nxdvol.hdd_data_offset(back_h.dev) // 512}
    return {"hdd": log_h.path, "ssd": log_s.path}, wl, layout


def assert_small_log_paths(st):
    """The paths test_logwrites_replay's small logs are there for, in the
    nxd status @st at the end of the recorded run: the destager copied
    blocks and freed segments, and the head wrapped round the ring (more
    blocks written than it holds).  Writes round a full log are printed,
    not asserted: the default 200 ops do not reach them (seed 11:
    writes_around_full 0)."""
    assert st["destaged_blocks"] > 0 and st["segments_reclaimed"] > 0, st
    assert st["log_blocks_written"] > st["log_blocks"], st


def replay_and_check(dm, devs, logpaths, wl, layout, rng, nprefix, nvariant,
                     only_cuts=None, plant=None):
    """Replay the two logs to the cut points and check each.  @plant, for
    the negative control (test_controls.py): called as plant(replayers,
    cut) before each load, it may change the replayed images and returns
    what it did (no failure artifacts are saved then)."""
    seed = layout["seed"]
    H, S = layout["hdd_bytes"], layout["ssd_bytes"]
    vol_bytes = layout["vol_sectors"] * 512
    t0 = time.monotonic()
    ent = {dev: parse_log(logpaths[dev]) for dev in ("hdd", "ssd")}
    marks = {}
    for dev, entries in ent.items():
        m = marks[dev] = {}
        for e in entries:
            if e.mark and e.mark.startswith("m") and e.mark[1:].isdigit():
                m[int(e.mark[1:])] = e.idx
        assert sorted(m) == list(range(len(wl.durable) + 1)), \
            f"{dev} log marks: {sorted(m)[:10]}..., durability points {len(wl.durable)}"
    hdd = devs(Loop(H // MiB, f"crash-img-h{seed}"))
    ssd = devs(Loop(S // MiB, f"crash-img-s{seed}"))
    cows_h = [devs(NullBlk(H // MiB, discard=False)).dev for _ in range(2)]
    cows_s = [devs(NullBlk(S // MiB, discard=False)).dev for _ in range(2)]
    ssd_set = []

    def ssd_sectors():
        if not ssd_set:
            ssd_set.append(logwrites.log_sector_set(logpaths["ssd"], ent["ssd"]))
        return ssd_set[0]
    reps = {"hdd": DevReplayer("HDD", logpaths["hdd"], ent["hdd"], hdd.path, H,
                               legit=hdd_mask_legit(wl, vol_bytes, ssd_sectors,
                                                    layout.get("data_off", 0))),
            "ssd": DevReplayer("SSD", logpaths["ssd"], ent["ssd"], ssd.path, S)}
    loader = Loader(dm, hdd.dev, ssd.dev, cows_h, cows_s, layout, seed)
    chk = Checker(vol_bytes, wl.events, wl.durable, discard_undefined=True)
    cuts = choose_cuts(ent["hdd"], marks["hdd"], ent["ssd"], marks["ssd"], rng,
                       nprefix, nvariant)
    if only_cuts is not None:
        cuts = [c for c in cuts if (c[0], c[1]) in only_cuts]
    n = {"mark": 0, "prefix": 0, "variant": 0, "end": 0, "hdd": 0, "ssd": 0}
    relaxed = 0
    wd = Watchdog()
    nh, ns = len(ent["hdd"]), len(ent["ssd"])
    progress(f"seed {seed}: {nh}+{ns} entries, {len(wl.durable) + 1} marks, {len(cuts)} cuts")
    try:
        for i, cut in enumerate(cuts):
            wd.arm()
            ch, cs, k, kind, which = cut
            progress(f"seed {seed} cut {i}/{len(cuts)}: hdd {ch} ssd {cs} point {k} {kind} "
                     f"{which or ''} { {x: round(v, 1) for x, v in loader.times.items()} }")
            t1 = time.monotonic()
            what = (f"seed {seed} cut after HDD log entry {ch}/{nh} {ent['hdd'][ch]} and SSD "
                    f"log entry {cs}/{ns} {ent['ssd'][cs]} ({kind}{' of the ' + which if which else ''}")
            saved = None
            try:
                reps["hdd"].advance(ch)
                reps["ssd"].advance(cs)
                chk.advance_to(k)
                loader.times["advance"] = loader.times.get("advance", 0) + time.monotonic() - t1
                if kind == "variant":
                    saved, desc = reps[which].variant(rng)
                    what += f" [{desc}]"
                what += f", point {k})"
                if plant:
                    what += f" [planted: {plant(reps, cut)}]"
                got = loader.load_and_read()
                t1 = time.monotonic()
                relaxed += chk.check(got, strict=kind in ("mark", "end"), what=what)
                loader.times["check"] = loader.times.get("check", 0) + time.monotonic() - t1
            except CrashFailure as f:
                d = save_failure(seed, logpaths, layout, reps, cut, str(f)) if not plant else None
                raise CrashFailure(f"{what}: {f}\n  artifacts: {d}") from None
            if saved is not None:
                reps[which].restore(saved)
            n[kind] += 1
            if which:
                n[which] += 1
    finally:
        wd.disarm()
        for r in reps.values():
            r.close()
    loader.close()      # on a failure, the dm fixture removes what is left
    secs = time.monotonic() - t0
    rh, rs = reps["hdd"], reps["ssd"]
    return {"cuts": len(cuts), **n, "entries_hdd": nh, "entries_ssd": ns,
            "marks": len(wl.durable) + 1,
            "overlap": rh.overlap + rs.overlap,
            "overlap_equal": rh.overlap_equal + rs.overlap_equal,
            "overlap_kept": sum(rh.kept.values()) + sum(rs.kept.values()),
            "overlap_masked": sum(rh.masked.values()) + sum(rs.masked.values()),
            "masked_why": {w: rh.masked.get(w, 0) + rs.masked.get(w, 0)
                           for w in {**rh.masked, **rs.masked}},
            "bytes_verified": loader.stats["bytes_read"], "relaxed_sectors": relaxed,
            "discard_older": chk.discard_older,
            "replay_s": round(secs, 1),
            "times": {x: round(v, 1) for x, v in loader.times.items()},
            **{x: v for x, v in loader.stats.items() if x != "bytes_read"}}


def linear(dev_size_sectors, dev):
    return f"0 {dev_size_sectors} linear {dev} 0"


def drop(dev_size_sectors, dev):
    return f"0 {dev_size_sectors} flakey {dev} 0 0 100000 1 drop_writes"


def routed_direct(op, threshold):
    """Whether nxd's routing rule (nxd_route_write_to_log, mode auto, HDD
    io_min 512) sends write @op to the HDD whatever is logged under it."""
    off, n = op[1], len(op[2])
    return threshold == 0 or (n > threshold and not off % BLOCK and not n % BLOCK)


def never_logged_blocks(events, nblocks, threshold):
    """4 KiB blocks that no op ever could have put in the log: every write
    touching them was routed to the HDD by the rule, and no discard touched
    them (the edges of a discard over logged blocks are zeroed in the log).
    Blocks no op touched are in the set."""
    logged = bytearray(nblocks)
    for op in events:
        n = op[2] if op[0] == "d" else len(op[2])
        if op[0] == "d" or not routed_direct(op, threshold):
            for b in range(op[1] // BLOCK, (op[1] + n - 1) // BLOCK + 1):
                logged[b] = 1
    return [b for b in range(nblocks) if not logged[b]]


def flakey_once(dm, devs, seed, where):
    rng = random.Random(seed)
    hdd = devs(Loop(HDD_MIB, f"crash-fh{seed}"))
    ssd = devs(NullBlk(6, discard=True))
    Hs, Ss = HDD_MIB * 2048, 6 * 2048
    fl_h, fl_s, nx = f"crflh{seed}", f"crfls{seed}", f"crflnx{seed}"
    dm.create(fl_h, linear(Hs, hdd.dev))
    dm.create(fl_s, linear(Ss, ssd.dev))
    vol = facts.data_sectors(Hs)
    opts = rng.choice(["", "write_threshold 131072", "low_watermark 0"])
    threshold = 131072 if "write_threshold" in opts else 65536
    dm.create(nx, nxd_line(dm.devno(fl_h), dm.devno(fl_s), vol, opts))
    stop = threading.Event()
    wl = Workload(dm.path(nx), vol * 512, seed, dm=dm, nxd_name=nx, stop_verify=stop)
    targets = [(fl_s, Ss, ssd.dev)] + ([(fl_h, Hs, hdd.dev)] if where != "ssd" else [])
    rng.shuffle(targets)
    drop_at = {}
    errors = []

    def dropper():
        try:
            time.sleep(rng.uniform(2.0, 12.0))
            # A crash stops everything: no destage round may start after the
            # drop and read back what the SSD dropped (unless the log fills).
            stop.set()
            dm.message(nx, "pause_destage")
            wl.tolerate_eio = True      # checked against the volume's state below
            drop_at["t"] = time.monotonic()
            # One instant for both devices: the drop tables are loaded
            # inactive, then BOTH devices are suspended (each holds the bios
            # that arrive from then on, unacknowledged) before EITHER is
            # resumed on its drop table (held bios then go to the drop table).
            # So no device acknowledges a write it will not keep while the
            # other still keeps writes: no "lying disk" window, which a
            # switch one device at a time (load/suspend/resume each) has.
            for name, n, dev in targets:
                dm.load(name, drop(n, dev))
            for name, n, dev in targets:
                dm.suspend(name)
            drop_at["suspended"] = time.monotonic()
            for name, n, dev in targets:
                dm.resume(name)
            drop_at["done"] = time.monotonic()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
            stop.set()

    th = threading.Thread(target=dropper)
    t_start = time.monotonic()
    wd = Watchdog(info=lambda: f"flakey seed {seed} op {wl.nop} dropped {bool(drop_at)} "
                               f"recent {wl.recent} nxd: {dm.status(nx)}",
                  unstick=lambda: unstick(wl))
    th.start()
    ev_after = None
    try:
        while th.is_alive() or wl.nop < 40:
            wd.arm()
            wl.step()
            if wl.nop > 20000:
                break
        th.join()
        ev_after = len(wl.events)       # data-changing ops issued after the drop
        for _ in range(30):             # more I/O into the dropping device(s)
            wd.arm()
            wl.step()
        wd.arm()
        wl.final_sync()
        wd.arm()
    finally:
        wd.disarm()
        th.join()
        wl.close()
    assert not errors, f"seed {seed}: the dropper failed, nothing may have been dropped: " \
                       f"{errors[0]!r}"
    assert "done" in drop_at, f"seed {seed}: the drop never happened ({wl.nop} ops)"
    for name, n, dev in targets:
        tbl = params(dm.table(name)).split()  # the target's parameters
        assert tbl[1:] == ["0", "0", "100000", "1", "drop_writes"], \
            f"{name}: live table is not the drop table: {tbl}"
    post = len(wl.events) - ev_after
    assert post > 0, f"seed {seed}: no write after the drop ({wl.counts})"
    before = [i for i, (_, t) in enumerate(wl.durable) if t < drop_at["t"]]
    k = before[-1] + 1 if before else 0          # durability point number
    # Reading back a segment the SSD dropped, the destager finds the loss
    # and the volume goes degraded (writes bypass the log, no waiting for
    # room that never comes).  If it then had to write the HDD over logged
    # blocks, the HDD label says "log abandoned" and the reload is refused.
    # Or, not degraded, it found the loss (acked_lost): from then on every
    # flush and FUA write fails (target 2.3.0), the final fsync included.
    st_drop = parse_status(dm.status(nx))
    noticed = st_drop["state"] == "degraded"
    found = noticed or st_drop["acked_lost"] == 1
    # Degraded, a partial write over a logged block fails (section 13 of
    # docs/design.md); with acked_lost, flushes and FUA writes fail; nothing
    # else may.
    assert found or not wl.counts.get("eio"), \
        f"seed {seed}: EIO while neither degraded nor acked_lost: {wl.counts} {st_drop}"
    dm.remove(nx)                                # clean shutdown goes nowhere
    for name, n, dev in targets:
        dm.reload(name, linear(n, dev))
    mark = host.kmsg_mark(f"flakey {seed} reload")
    tag = (f"flakey {where} seed {seed} opts '{opts}' (drop after {wl.nop} ops; last good "
           f"fsync = point {k}/{len(wl.durable)})")
    chk = Checker(vol * 512, wl.events, wl.durable)
    try:
        dm.create(nx, nxd_line(dm.devno(fl_h), dm.devno(fl_s), vol, opts))
    except DMError as e:
        refused = [ln for ln in host.dmesg_since(mark) if "log abandoned" in ln]
        if not (noticed and where == "ssd" and refused):
            raise AssertionError(f"seed {seed}: nxd did not come back after the drop "
                                 f"(degraded before: {noticed}): {e}\n{dmesg_tail()}") from None
        # The SSD lost writes, nxd noticed and gave the log up (by design:
        # what was only in the log is lost).  The HDD kept every write: each
        # block no op could have logged must hold exactly the final model.
        size = vol * 512
        doff = nxdvol.hdd_data_offset(dm.path(fl_h))      # the data area
        hddimg = DirectIO().read_all(dm.path(fl_h), doff + size)[doff:]
        blocks = never_logged_blocks(wl.events, size // BLOCK, threshold)
        bad = [b for b in blocks if hddimg[b * BLOCK:(b + 1) * BLOCK]
               != wl.model.latest[b * BLOCK:(b + 1) * BLOCK]]
        assert blocks, f"{tag}: no never-logged block to check on the HDD"
        assert not bad, (f"{tag}: log refused ({refused[0].strip()}); {len(bad)} of "
                         f"{len(blocks)} never-logged blocks on the HDD differ from the "
                         f"model, first: block {bad[0]}")
        summary("crash-summary.txt",
                f"crash-flakey {KVER} {where} seed {seed} opts '{opts}': {wl.nop} ops "
                f"{dict(wl.counts)}, drop after {round(drop_at['t'] - t_start, 1)}s, "
                f"{post} writes after it; SSD loss detected (degraded), reload refused "
                f"({refused[0].strip()}); HDD alone: {len(blocks)} never-logged 4K blocks "
                f"equal the final model")
        return
    st = parse_status(dm.status(nx))
    assert st["state"] == "ok", st
    got = DirectIO().read_all(dm.path(nx), vol * 512)
    chk.advance_to(k)
    # Anything written after point k may show, up to the end of the run.
    relaxed = chk.check(got, strict=False, hi=len(wl.events), what=tag)
    # The drop took effect: writes after it are not all there.
    lost = sum(1 for s in range(0, vol * 512, SECTOR)
               if got[s:s + SECTOR] != wl.model.latest[s:s + SECTOR])
    assert found or lost, (f"{tag}: every write made after the drop ({post}) reads back: "
                             f"dm-flakey dropped nothing")
    dm.remove(nx)
    summary("crash-summary.txt",
            f"crash-flakey {KVER} {where} seed {seed} opts '{opts}': {wl.nop} ops "
            f"{dict(wl.counts)}, drop after {round(drop_at['t'] - t_start, 1)}s "
            f"(both suspended within {round(drop_at['suspended'] - drop_at['t'], 2)}s), "
            f"{post} writes after it, {lost} sectors lost them; "
            f"last good point {k} of {len(wl.durable)}; verified {vol * 512} B "
            f"(+{wl.bytes_verified} B live), {relaxed} sectors held post-point values; "
            f"recovered {st['recovered_segments']} segments"
            f"{'; SSD loss detected (degraded)' if noticed else ''}"
            f"{'; SSD loss detected (acked_lost)' if found and not noticed else ''}")


def ioctl_dm(modules):
    """The body of a crash test's `dm` fixture: dm devices by ioctl
    (DMIoctl), with udevd stopped (host.udev_stopped: a replay makes and
    reloads devices hundreds of times); everything made is removed after."""
    for m in modules:
        subprocess.run(["modprobe", m], check=False)
    with udev_stopped():
        d = DMIoctl()
        yield d
        errs = d.cleanup()
        d.close()
    assert not errs, errs


def made_devs():
    """The body of a crash test's `devs` fixture: add(x) returns x and
    closes it after the test, in reverse order."""
    made = []

    def add(x):
        made.append(x)
        return x
    yield add
    for x in reversed(made):
        x.close()
