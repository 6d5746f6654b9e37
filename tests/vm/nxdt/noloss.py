# SPDX-License-Identifier: GPL-2.0
"""No-loss rigs for test_noloss.py: power on a cached pair and read it
back, pin a thread, log writes acknowledged but lost."""
import os

from nxdt import pcut, rawio
from nxdt.facts import BLOCK
from nxdt.nxdvol import Volume, module_param
from nxdt.workloads import pattern


def power_on_and_read(v, hdd, ssd, block):
    """Remove the volume after a cut, power both devices on, reassemble it
    and read @block."""
    v.remove()
    hdd.power_on()
    ssd.power_on()
    v.recreate()
    with rawio.Fd(v.dev, write=False) as f:
        return f.pread(block * BLOCK, BLOCK)


def pin(pid, cpu):
    os.sched_setaffinity(pid, {cpu})


def thread_pid(name):
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/comm") as f:
                    if f.read().strip() == name:
                        return int(p)
            except OSError:
                pass
    raise AssertionError(f"no thread {name}")


def cached_pair(dm, nullb, name, group, seed):
    """dm-pcut HDD and SSD (one group) whose caches hold every write until
    a flush, and a volume over them, destage paused, no TRIM."""
    hdd, ssd = pcut.pair(dm, nullb, name, group, seed, volatile=True)
    v = Volume(dm, name, hdd.path, ssd.path, opts=["ssd_discard", "0"])
    v.pause()
    return hdd, ssd, v


def lose_acked_log_writes(v, ssd, f, first, n, trigger):
    """@n partial writes from block @first, acknowledged while only in the
    SSD's cache; the SSD loses power and comes back with its writes and
    flushes failing; a write at block @trigger degrades the volume and the
    destager, resumed, finds the logged copies gone.  Returns the list of
    (written, read back) pairs."""
    # 7 sectors from sector 1 of each block: partial blocks, logged by the
    # writer with a checksum per block, acknowledged without a flush.
    new = [pattern("lost", i, 7 * 512) for i in range(n)]
    with module_param("direct_partial", "N"):
        for i in range(n):
            f.pwrite((first + i) * BLOCK + 512, new[i])
    st = v.status()
    assert st["index_entries"] >= n and st["state"] != "degraded", st
    # The SSD loses power with those writes in its cache and comes back
    # (same device); its writes and flushes then fail.
    ssd.cut()
    ssd.power_on()
    ssd.message("fail_writes", 1)
    ssd.message("fail_flush", 1)
    f.pwrite(trigger * BLOCK, pattern("trigger", 0, 512))
    assert v.status()["state"] == "degraded", v.status()
    v.message("resume_destage")
    return new
