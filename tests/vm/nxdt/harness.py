# SPDX-License-Identifier: GPL-2.0
"""The harness's own checks for test_harness.py: a dm client by name."""
import errno
import os
import uuid
import pytest

from nxdt import blkdev, dmlib, host


MiB = 1 << 20


def dm_client(dm, dev):
    sectors = blkdev.dev_sectors(dev)
    name = f"nxdh-{uuid.uuid4().hex[:6]}"
    path = dm.create(name, f"0 {sectors} linear {dev} 0")
    assert path == dm.path(name) and name in dm.created
    assert os.path.exists(path)
    assert blkdev.dev_sectors(path) == sectors
    assert "linear" in dm.table(name)
    assert dm.status(name).startswith(f"0 {sectors} linear")
    half = sectors // 2
    dm.reload(name, [f"0 {half} linear {dev} 0",
                     f"{half} {sectors - half} linear {dev} {half}"])
    assert len(dm.table(name).splitlines()) == 2
    dm.suspend(name)
    assert dm.is_suspended(name)
    dm.resume(name)
    assert not dm.is_suspended(name)
    with pytest.raises(host.CmdError):
        dm.message(name, "no-such-message")
    # I/O through dm is accounted on both layers
    w_dm, w_dev = blkdev.io_sectors(path)[1], blkdev.io_sectors(dev)[1]
    blkdev.wipe(path, MiB)
    assert blkdev.io_sectors(path)[1] - w_dm == MiB // 512
    assert blkdev.io_sectors(dev)[1] - w_dev == MiB // 512
    with pytest.raises(dmlib.DMError) as e:
        dm.create(name, f"0 {sectors} linear {dev} 0")     # exists
    assert e.value.errno in (None, errno.EBUSY), e.value
    dm.remove(name)
    assert not dm.exists(name) and name not in dm.created
    with pytest.raises(dmlib.DMError):
        dm.remove(name)
    dm.remove(name, missing_ok=True)
