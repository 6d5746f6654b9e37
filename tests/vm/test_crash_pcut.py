# SPDX-License-Identifier: GPL-2.0
"""dm-nxd crash consistency over devices with volatile write caches.

dm-nxd runs over two dm-pcut devices (tests/fixtures/pcut) in one cut
group: the HDD (pcut over a 64 MiB null_blk) and the SSD (pcut over an
8 MiB null_blk: the log wraps and the destager runs).  Each keeps what was
not flushed in a volatile cache.  A seeded cut point (group op number,
which device first, gap, keep probability) cuts the power of both while
4 writer threads (Linux AIO, queue depth 2-4 each) write, FUA-write,
discard and fsync overlapping ranges.  Then: writers stopped, nxd removed,
both pcut tables reloaded (power on), nxd created again with the same
table (no format), state `ok`, every sector read and checked by the oracle.
A chain runs several cuts on one volume: the image read after a recovery
is the initial content of the next round.

Payload: every 512 B sector written is (magic, seed, write id, sector,
check) repeated 16 times, so each sector read back names the write that
produced it.

Oracle (independent of nxd; times are CLOCK_MONOTONIC taken by the
workload: submission before io_submit(), completion after the event was
reaped, flush start before fsync(), so every "before" is certain):
  * a write W is durable if it succeeded and either it was a FUA write
    (RWF_DSYNC through AIO: REQ_FUA, no flush), or it completed before the
    start of an fsync that succeeded;
  * for each sector s, M(s) = latest submission time of a durable write to
    s; a write W to s is allowed after the cut iff it was not definitely
    overwritten by a durable write, i.e. completion(W) >= M(s) (writes never
    reaped, or failed, count as not completed: they may or may not have
    landed);
  * the initial content of s is allowed iff no durable write covers s;
  * a discard is a write of zeros that never counts as durable: zeros are
    allowed where a discard covering s was not definitely overwritten by a
    durable write, and the values allowed before the discard stay allowed;
  * anything else is counted: LOST (an older value than allowed: a value of
    a write to s, or the initial content, superseded by a durable write) or
    UNEXPLAINED (not a value any write put at s: foreign, torn within a
    sector, misplaced, zeros where no discard was).

Tests:
  test_pcut_crash_slice[opts]: the CI slice, one chain of NXD_PCUT_SLICE_CUTS
      (default 3) cuts per nxd option set.  The second cut of a chain,
      and about one in five of the others, comes after an idle gap
      (pcutchain.idle_then_cut: the writers stop, a destage round moves
      the log tail, both devices are cut at once).  One cut in three also
      cuts the recovery after it (1-40 group ops into it, either device
      first);
      in half the rounds an admin thread drains, suspends and resumes, and
      pauses and resumes the destager while the writers run.  Odd seeds
      also cut the first load 1-4 group ops in (the format of blank
      devices, a handful of writes and flushes): the volume must then
      load, or refuse and take 'format', and read zeros.  Seeds divisible
      by 3 grow the HDD by GROW_MIB half way through the chain and cut the
      longer table's load 1-8 group ops in (the label and superblock
      move): the old range must read exactly as before.  In each slice at
      least one cut lost acknowledged, unflushed writes (dm-pcut's dropped
      or torn records) on a device: the cuts had something to lose.
  test_pcut_crash_campaign: only with NXD_PCUT_CAMPAIGN=1 (make
      crash-campaign): chains NXD_PCUT_SEEDS (e.g. "1-20") of
      NXD_PCUT_CUTS cuts each; option set, keep and order vary with the
      seed.  Summary: build/logs/<kver>-crash-campaign.txt.
"""
import os
import time

import pytest

from nxdt import pcut
from nxdt.dmlib import DMIoctl
from nxdt import host
from nxdt.host import summary
from nxdt.nxdvol import module_param
from nxdt.pcutchain import (FILL, KVER, Totals, chain_kernel_check, run_bare, run_chain, run_soak,
                            seed_list)

OPTSETS = ["", "write_threshold 131072 low_watermark 0", "mode log_all", "ssd_discard 0",
           "mode adaptive stream_min 65536 stripe_size 65536"]
OPTSET_IDS = ["defaults", "thr128k-lw0", "log_all", "ssd_discard0", "adaptive"]
# make crash-campaign OPTSET=adaptive: every chain with that option set
# (default: seed % 5).
OPTSET = os.environ.get("NXD_PCUT_OPTSET", "")
# make crash-campaign PARAMS=...: module parameters (conftest's insmod).
PARAMS = os.environ.get("NXD_MODULE_PARAMS", "")


@pytest.fixture(scope="module", autouse=True)
def pcut_module():
    pcut.load_module()
    yield


@pytest.fixture
def pdm():
    d = DMIoctl(nodedir="/tmp/pcut-crash/dev")
    yield d
    errs = d.cleanup()
    d.close()
    assert not errs, errs


@pytest.mark.guarantee("G16")
def test_oracle_on_bare_pcut(pdm):
    """The oracle passes a correct disk and catches a lying one."""
    good = run_bare(pdm, 31, lying=False)
    assert good["lost"] == 0 and good["unexplained"] == 0, good["problems"][:3]
    assert good["durable_writes"] > 100
    bad = run_bare(pdm, 32, lying=True)
    assert bad["lost"] > 0, "a disk that ignores flushes and FUA must lose durable writes"
    assert bad["unexplained"] == 0, bad["problems"][:3]


SLICE_CUTS = int(os.environ.get("NXD_PCUT_SLICE_CUTS", "3"))


@pytest.mark.guarantee("G5", "G6", what="A chain of NXD_PCUT_SLICE_CUTS power cuts of both dm-pcut devices (volatile caches, either first, one in three also cutting the recovery) under 4 AIO writers, for one nxd option set: nxd loads the same table by itself, reports ok, and every sector passes the oracle.")
@pytest.mark.parametrize("opts", OPTSETS, ids=OPTSET_IDS)
def test_pcut_crash_slice(pdm, opts):
    seed = 100 + OPTSETS.index(opts) + (0 if KVER.startswith("6.1.") else 10)
    tot = Totals()
    run_chain(pdm, seed, opts, SLICE_CUTS, tot, "crash-pcut-slice.txt", max_n=2000)
    # A cut that found both caches clean tests little: in each slice at
    # least one cut dropped (or tore) acknowledged, unflushed writes.  Not
    # on each device: with 'write_threshold 131072 low_watermark 0' the
    # destager keeps flushing the HDD, and no cut of seed 111 found an
    # acknowledged write in its cache (the summary line counts both).
    # Where and when a cut falls depends on timing, and idle cuts find
    # clean caches by design: a slice with none that lost anything runs
    # one-cut chains of further seeds, 3 at most, until one does.
    extra = 0
    while tot.lossy_cuts == 0 and extra < 3 and not tot.bad():
        extra += 1
        run_chain(pdm, seed + 1000 * extra, opts, 1, tot, "crash-pcut-slice.txt", max_n=2000)
    summary("crash-pcut-slice.txt", f"crash-pcut slice {KVER} seed {seed} opts '{opts}' "
            f"(+{extra} one-cut chains): {tot.line()}")
    assert not tot.bad(), "\n".join(tot.failures)
    assert tot.cuts == SLICE_CUTS + extra
    assert tot.lossy_cuts >= 1, tot.line()


@pytest.mark.guarantee("G5", "G6", what="The slice's chains over the seeds NXD_PCUT_SEEDS, NXD_PCUT_CUTS cuts each, option set, keep and order varying with the seed; odd seeds also cut a format, seeds divisible by 3 a grow.")
@pytest.mark.skipif(os.environ.get("NXD_PCUT_CAMPAIGN") != "1",
                    reason="the campaign runs from make crash-campaign (NXD_PCUT_CAMPAIGN=1)")
def test_pcut_crash_campaign(pdm, request):
    ncuts = int(os.environ.get("NXD_PCUT_CUTS", "4"))
    if OPTSET and OPTSET not in OPTSET_IDS:
        pytest.fail(f"OPTSET={OPTSET}: not one of {', '.join(OPTSET_IDS)}")
    tot = Totals()
    seeds = seed_list()
    t0 = time.monotonic()
    with module_param("destage_fill_min", FILL):
        for seed in seeds:
            opts = OPTSETS[OPTSET_IDS.index(OPTSET)] if OPTSET else OPTSETS[seed % len(OPTSETS)]
            before = (tot.lost, tot.unexplained, len(tot.failures))
            marker = host.kmsg_mark(f"campaign chain {seed}")
            run_chain(pdm, seed, opts, ncuts, tot, "crash-campaign-detail.txt",
                      max_n=int(os.environ.get("NXD_PCUT_MAX_N", "6000")))
            chain_kernel_check(request, tot, seed, marker, "crash-campaign-detail.txt")
            if (tot.lost, tot.unexplained, len(tot.failures)) != before:
                summary("crash-campaign-detail.txt",
                        f"seed {seed}: FAILED: {tot.failures[-1][:2000]}")
    line = (f"crash-campaign {KVER}: seeds {seeds[0]}-{seeds[-1]} x {ncuts} cuts: {tot.line()} "
            f"{'fill ' + str(FILL) + ' ' if FILL else ''}"
            f"{'params ' + PARAMS + ' ' if PARAMS else ''}"
            f"{'options ' + OPTSET + ' ' if OPTSET else ''}in {time.monotonic() - t0:.0f}s")
    summary("crash-campaign.txt", line)
    assert not tot.bad(), "\n".join(f[:3000] for f in tot.failures)


@pytest.mark.guarantee("G1", "G5", what="The campaign's workloads without cuts: after each round an fsync, then the oracle checks the live volume exactly, both devices lose power with everything flushed, nxd replays its log and the oracle checks again.")
@pytest.mark.skipif(os.environ.get("NXD_PCUT_SOAK") != "1",
                    reason="the soak runs from make crash-soak (NXD_PCUT_SOAK=1)")
def test_pcut_live_soak(pdm):
    rounds = int(os.environ.get("NXD_PCUT_CUTS", "8"))
    tot = Totals()
    seeds = seed_list()
    t0 = time.monotonic()
    for seed in seeds:
        opts = OPTSETS[seed % len(OPTSETS)]
        run_soak(pdm, seed, opts, rounds, tot, "crash-soak-detail.txt")
    summary("crash-soak.txt", f"crash-soak {KVER}: seeds {seeds[0]}-{seeds[-1]} x {rounds} "
            f"rounds: {tot.line()} in {time.monotonic() - t0:.0f}s")
    assert not tot.bad(), "\n".join(f[:3000] for f in tot.failures)
