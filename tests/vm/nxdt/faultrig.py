# SPDX-License-Identifier: GPL-2.0
"""The fault tests' rig (test_faults.py, test_events.py): an HDD and an
SSD behind dm-flakey fault injectors, a paused volume on them with logged
and partly logged blocks and a model of its contents, and the step that
degrades it (SSD writes fail); an md array reassembled after a fault, a
drain that fails, a volume repaired and drained.
"""
import subprocess
import time

from nxdt import dmlib, host, nxdvol
from nxdt.facts import BLOCK, MiB
from nxdt.host import run
from nxdt.models import LoggedModel
from nxdt.nxdvol import Volume, module_param

HDD_MB = 64
SSD_MB = 16


class Rig:
    def __init__(self, dm, loopdev, nullb, hdd_mb=HDD_MB, ssd_mb=SSD_MB):
        host.modprobe("dm-flakey", check=False)
        self.dm = dm
        self.hdd_base = loopdev(hdd_mb)
        self.ssd_base = nullb(ssd_mb)
        self.hddi = dmlib.Injector(dm, "nxdf-hdd", self.hdd_base)
        self.ssdi = dmlib.Injector(dm, "nxdf-ssd", self.ssd_base)
        self.hdd, self.ssd = self.hddi.dev, self.ssdi.dev
        self.models = []


def rig_setup(dm, loopdev, nullb, **sizes):
    """The body of the fixture `rig` (conftest.py; a generator, for fixtures
    of other sizes: test_events.py)."""
    r = Rig(dm, loopdev, nullb, **sizes)
    yield r
    for m in r.models:
        m.close()
    for inj in (r.hddi, r.ssdi):
        if inj.mode != "ok" and dm.exists(inj.name):
            inj.set("ok")


def setup_vol(rig, name, size=4 * MiB, seed=1, nfull=32, npart=8, opts=None):
    v = Volume(rig.dm, name, rig.hdd, rig.ssd, opts)
    v.pause()
    m = LoggedModel(v, size, seed)
    rig.models.append(m)
    m.base()
    m.log_blocks(m.free_blocks(nfull))
    # Partial writes in the writer's checksummed batches, as the fault
    # tests assume (on the direct path they would join ORDERED segments).
    with module_param("direct_partial", "N"):
        m.log_sectors(m.free_blocks(npart))
    m.f.fsync()
    st = v.status()
    assert st["index_entries"] == len(m.logged), (st, len(m.logged))
    return v, m


def degrade(v, m, rig):
    """Make SSD writes fail and send a small write over unlogged blocks:
    it must succeed (failed over to the HDD), degrade the volume and
    freeze the log (HDD label) instead of giving it up."""
    rig.ssdi.set("error_writes")
    marker = host.kmsg_mark("degrade")
    b = m.free_blocks(1)[0]
    m.write(b * BLOCK, BLOCK, False)
    st = v.status()
    assert st["state"] == "degraded" and st["degraded"] == 1, st
    assert st["ssd_errors"] >= 1, st
    assert v.sget("state") == "degraded"
    assert host.wait_kmsg(marker, r"SSD .*failed.*degraded"), "no kernel message about the SSD"
    assert host.wait_kmsg(marker, r"SSD log frozen at segment \d+"), "log not frozen"
    return st


def reassemble_ok(v, m, rig, logged_left=None):
    """Take the volume down, heal the SSD and load the same table again:
    no 'format', the frozen log is replayed, the label unfrozen, the
    volume healthy, and every byte as the model says."""
    m.verify()
    # No fsync: degraded with destage paused, a flush waits for the log to
    # empty (the SSD takes no flush); the O_DIRECT writes are acknowledged.
    m.close()
    v.remove()
    rig.ssdi.set("ok")
    marker = host.kmsg_mark("reassemble after degraded")
    v.recreate()
    m.reopen()
    assert host.wait_kmsg(marker, r"SSD log unfrozen after an SSD failure"), "label not unfrozen"
    st = v.status()
    assert st["state"] == "ok" and st["degraded"] == 0, st
    if logged_left is not None:
        # At load: the destager may start at once (idle HDD, not paused).
        n = nxdvol.recovered_entries(marker)
        assert n == logged_left, (n, logged_left, st)
    m.verify()
    # Logging works again: a small write goes to the log.
    b = m.free_blocks(1)[0]
    m.write(b * BLOCK, BLOCK, True)
    m.f.fsync()     # its segment counts once committed, which a flush does first
    st2 = v.status()
    assert st2["writes_logged"] == st["writes_logged"] + 1, (st, st2)
    assert st2["segments_written"] > st["segments_written"], (st, st2)
    m.verify()
    return st


def failing_drain(v, rig, marker):
    rig.hddi.set("error_writes")
    p = subprocess.Popen(["dmsetup", "message", v.name, "0", "drain"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert host.wait_kmsg(marker, r"destage failed", timeout=60), "no destage error logged"
    return p


def repaired_and_drained(rig, v, m):
    """The HDD repaired and the volume assembled again: the model reads
    back live, and from the bare HDD once the log is drained."""
    rig.hddi.set("ok")
    v.recreate()
    m.reopen()
    m.verify()
    v.drain()
    m.close()
    v.remove()
    m.verify(rig.hdd)


def timed(cmd, timeout=180, **kw):
    t0 = time.monotonic()
    p = run(cmd, check=False, timeout=timeout, **kw)
    return p, time.monotonic() - t0
