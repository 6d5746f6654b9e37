# SPDX-License-Identifier: GPL-2.0
"""The fault tests' rig (test_faults.py, test_events.py): an HDD and an
SSD behind dm-flakey fault injectors, a paused volume on them with logged
and partly logged blocks and a model of its contents, and the step that
degrades it (SSD writes fail).
"""
from nxdt import dmlib, host
from nxdt.facts import BLOCK, MiB
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
