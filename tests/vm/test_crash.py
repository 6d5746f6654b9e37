# SPDX-License-Identifier: GPL-2.0
"""dm-nxd crash consistency.

Contract (the issue): after a crash at any instant, every write acknowledged
before the last completed flush (fsync) or FUA (O_DSYNC) write reads back
exactly, and the volume comes back by itself (plain table load, no format).

 - test_logwrites_replay: the HDD and the SSD are each recorded on their
   own dm-log-writes device (own backing device, own log), with a mark sent
   to both logs (SSD first, then HDD) after every fsync/O_DSYNC write, so a
   flush on one device never makes the other's writes durable in the
   replay.  The two logs are replayed into image files and nxd is loaded
   over (transient dm-snapshots of) them at hundreds of cut points: every
   mark (both logs at mark k), each device's log cut alone at random entries
   between its marks, and "volatile cache" variants of each device (its
   writes since its last flush kept, dropped or torn at 512 B); see
   choose_cuts() for which pairs of cuts a power cut can produce.  A plain
   HDD write logged after an overlapping FUA write is ordered by the
   workload's own op order (logwrites.DevReplayer, hdd_mask_legit), and
   fails the test when that order does not explain it.  An older value
   that is in the SSD's log (a destager copy, which dm-log-writes logs
   only at the next flush) is taken to have landed before the FUA write,
   as the per-copy fence makes it: a stale copy landing last is invisible
   here and is left to the dm-pcut campaign and test_writepath.
 - test_flakey_drop: dm-flakey drop_writes switched on at a random moment
   under a verified workload (SSD alone; HDD and SSD together, both devices
   suspended before either resumes on its drop table), then nxd is
   recreated over the pass-through devices and checked against the model
   at the last fsync that completed before the drop.  If nxd noticed the
   SSD loss and gave the log up (reload refused), the HDD alone is checked:
   every block no write could have logged holds the final model.

Counts go to stdout (pytest -s) and to build/logs/<kver>-crash-summary.txt.
NXD_CRASH_LONG=1: more seeds, ops and cut points.  NXD_CRASH_SEEDS=1,2: seeds.
NXD_FLAKEY_SEEDS=21-60: the drop_writes test's seeds.
"""
import os
import random
import threading

import pytest

from nxdt import facts, rawio
from nxdt.blkdev import Loop, NullBlk
from nxdt.host import summary
from nxdt.nxdvol import nxd_line
from nxdt.rawio import DirectIO
from nxdt.crashreplay import (assert_small_log_paths, HDD_MIB, KVER, flakey_once, ioctl_dm, made_devs,
                              record_workload, replay_and_check)

LONG = os.environ.get("NXD_CRASH_LONG") == "1"

# (seed, nxd options, SSD MiB).  Small logs: the log wraps and the
# destager copies and reclaims within the default 200 ops (asserted:
# assert_small_log_paths); the log-full path is not reached at 200 ops
# (seed 11: writes_around_full 0), the summary prints its counter.
CASES = [
    (11, "", 6),
    (12, "write_threshold 131072 low_watermark 50 high_watermark 90", 4),
]
LONG_CASES = [
    (13, "mode log_all", 6),
    (14, "write_threshold 4096 ssd_discard 0", 4),
    (15, "destage_rate 2 low_watermark 0", 8),
    (16, "", 4),
    (17, "write_threshold 1048576", 8),
    (18, "low_watermark 100 high_watermark 100", 6),
]
if os.environ.get("NXD_CRASH_SEEDS"):
    _seeds = [int(s) for s in os.environ["NXD_CRASH_SEEDS"].split(",")]
    _all = {c[0]: c for c in CASES + LONG_CASES}
    CASES = [_all.get(s, (s, "", 6)) for s in _seeds]
elif LONG:
    CASES = CASES + LONG_CASES

NOPS = int(os.environ.get("NXD_CRASH_OPS", "900" if LONG else "200"))
# Cut points per interval between marks: prefix cuts and crash variants.
PREFIX_CUTS = 6 if LONG else 1
VARIANT_CUTS = 3 if LONG else 1


@pytest.fixture
def dm():
    """dm devices by ioctl, udevd stopped (crashreplay.ioctl_dm)."""
    yield from ioctl_dm(("dm-log-writes", "dm-snapshot", "dm-flakey", "loop"))


@pytest.fixture
def devs():
    """Devices made by the test, closed in reverse order."""
    yield from made_devs()


# ------------------------------------------------------ log-writes run ---


@pytest.mark.guarantee("G5", "G3", "G7", what="The HDD and the SSD each recorded on their own dm-log-writes device under a seeded workload, replayed at every durability mark, at cuts of each device between marks and with volatile-cache variants: nxd loads by itself (no format), reports ok, and every sector equals the model at the mark or a value written after it.")
@pytest.mark.parametrize("seed,opts,ssd_mib", CASES, ids=[f"seed{c[0]}" for c in CASES])
def test_logwrites_replay(devs, dm, seed, opts, ssd_mib):
    logpaths, wl, layout = record_workload(dm, devs, seed, opts, ssd_mib, NOPS)
    rng = random.Random(seed * 7919)
    res = replay_and_check(dm, devs, logpaths, wl, layout, rng, PREFIX_CUTS, VARIANT_CUTS)
    st = layout["nxd_status"]
    summary("crash-summary.txt",
            f"crash-replay {KVER} seed {seed} opts '{opts}' ssd {ssd_mib}MiB: "
            f"{NOPS} ops {dict(wl.counts)} in {layout['workload_s']}s, live-verified "
            f"{wl.bytes_verified + layout['vol_sectors'] * 512} B; logs HDD {res['entries_hdd']} "
            f"+ SSD {res['entries_ssd']} entries, {res['marks']} marks each; plain-after-FUA "
            f"sectors {res['overlap']} ({res['overlap_equal']} same data, "
            f"{res['overlap_kept']} replayed in log order, {res['overlap_masked']} kept "
            f"the FUA data {res['masked_why']}, 0 unexplained); "
            f"cut points checked {res['cuts']} (mark {res['mark']}, "
            f"prefix {res['prefix']}, variant {res['variant']}, end {res['end']}; "
            f"HDD cut alone {res['hdd']}, SSD cut alone {res['ssd']}), "
            f"bytes verified {res['bytes_verified']}, sectors matched a post-mark value "
            f"{res['relaxed_sectors']} (of which {res['discard_older']} held data older than a "
            f"discard not yet flushed on the HDD); recovered segments {res['recovered_segments']}, "
            f"max recovery {res['recovery_us_max']} us; replay {res['replay_s']}s "
            f"{res['times']}; "
            f"nxd counters: logged {st['writes_logged']} direct {st['writes_direct']} "
            f"around_full {st['writes_around_full']} inval {st['invalidations']} "
            f"rmw {st['rmw_reads']} destaged_blocks {st['destaged_blocks']} "
            f"reclaimed {st['segments_reclaimed']} log blocks written "
            f"{st['log_blocks_written']} of a {st['log_blocks']}-block ring "
            f"log_full events {st['events_log_full']}")
    assert res["mark"] == len(wl.durable) + 1, res
    assert res["hdd"] > 0 and res["ssd"] > 0, res
    assert_small_log_paths(st)


@pytest.mark.guarantee("G5")
@pytest.mark.dmesg_allow(r"nxd.*(destage failed|unreadable|clean log ends early|fails its checksum|no header to vouch)")
@pytest.mark.parametrize("where", ["ssd", "hdd+ssd"])
def test_flakey_drop(devs, dm, where):
    """drop_writes at a random moment; then everything acknowledged before
    the last fsync that completed before the drop reads back exactly."""
    seeds = [21, 22, 23] if LONG else [21]
    if os.environ.get("NXD_FLAKEY_SEEDS"):      # "21-60" or "21,25"
        a, _, b = os.environ["NXD_FLAKEY_SEEDS"].partition("-")
        seeds = list(range(int(a), int(b) + 1)) if b else \
            [int(x) for x in a.split(",")]
    for seed in seeds:
        flakey_once(dm, devs, seed + (100 if where != "ssd" else 0), where)


@pytest.mark.guarantee("G3")
def test_discard_of_logged_partial_blocks_completes(devs, dm):
    """Found by test_logwrites_replay (seed 11, op 55): a discard that covers
    no whole block, only the logged parts of two blocks (4608 B at sector
    2739 over logged blocks 342 and 343), must complete by itself.  If it
    does not, a write elsewhere (which commits a segment) is used to unstick
    it so that the failure is reported instead of hanging the suite."""
    hdd = devs(Loop(HDD_MIB, "crash-dh"))
    ssd = devs(NullBlk(6, discard=True))
    vol = facts.data_sectors(HDD_MIB * 2048)
    dm.create("crdnx", nxd_line(hdd.dev, ssd.dev, vol))
    dm.message("crdnx", "pause_destage")
    dev = dm.path("crdnx")
    dio = DirectIO()
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    try:
        dio.pwrite(fd, 342 * 4096, os.urandom(8192))         # blocks 342, 343 logged
        os.fsync(fd)
        done = threading.Event()
        err = []

        def do_discard():
            try:
                rawio.discard(fd, 2739 * 512, 4608)
            except OSError as e:
                err.append(e)
            done.set()
        th = threading.Thread(target=do_discard, daemon=True)
        th.start()
        hung = not done.wait(20)
        if hung:
            dio2 = DirectIO()
            dio2.pwrite(fd, 1000 * 4096, os.urandom(4096))   # commits a segment
            unstuck = done.wait(20)
        th.join(30)
        assert not err, err
        assert not hung, ("discard of 4608 B at sector 2739 (partial blocks 342/343, both "
                          "logged) did not complete within 20 s; "
                          + ("it completed after an unrelated write committed a segment: "
                             "the inval op (no whole block, recs 0) waits in batch.invals "
                             "until the next non-empty nxd_batch_commit()"
                             if unstuck else "still stuck after another write"))
        got = dio.pread(fd, 342 * 4096, 8192)
        assert got[3 * 512:12 * 512] == bytes(9 * 512)
    finally:
        os.close(fd)
