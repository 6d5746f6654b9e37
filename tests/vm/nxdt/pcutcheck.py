# SPDX-License-Identifier: GPL-2.0
"""dm-pcut itself, for test_pcut.py: a pcut device under test (Dev), the
sectors it holds, reads that must fail."""
import errno
import os
import struct
import pytest

from nxdt import pcut, rawio
from nxdt.rawio import DirectIO


MiB = 1 << 20
SZ = 16 * MiB


def sect(tag, s):
    """The 512 B payload of sector @s written by write @tag."""
    head = struct.pack("<8sQQ", b"PCUTTEST", tag, s)
    return head + bytes((tag * 7 + s + i) & 0xFF for i in range(512 - len(head)))


def payload(tag, off, n):
    return b"".join(sect(tag, off // 512 + i) for i in range(n // 512))


class Dev:
    """O_DIRECT access to a device, with a model of its newest contents.
    FUA writes go through Linux AIO with RWF_DSYNC (REQ_FUA, no flush)."""
    opened = []

    def __init__(self, path, size=SZ):
        self.path, self.size = path, size
        self.fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        self.fds = os.open(path, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
        self.dio = DirectIO(1 << 20)
        self.closed = False
        Dev.opened.append(self)

    def write(self, tag, off, n, model=None, fua=False):
        data = payload(tag, off, n)
        if fua:
            rawio.fua_write(self.fd, off, data)
        else:
            self.dio.pwrite(self.fd, off, data)
        if model is not None:
            model[off:off + n] = data

    def read(self, off, n):
        return self.dio.pread(self.fd, off, n)

    def read_all(self):
        return bytes(self.dio.read_all(self.path, self.size))

    def close(self):
        if not self.closed:
            self.closed = True
            os.close(self.fd)
            os.close(self.fds)


def read_backing(dev, size=SZ):
    return bytes(DirectIO(1 << 20).read_all(dev, size))


def diff_sectors(a, b):
    return [i // 512 for i in range(0, min(len(a), len(b)), 512) if a[i:i + 512] != b[i:i + 512]]


def expect_eio(fn):
    with pytest.raises(OSError) as e:
        fn()
    assert e.value.errno == errno.EIO, e.value


def half_run(dm, bdev, name, seed, nwrites=200):
    """nwrites 4 KiB writes to distinct extents, keep 50 torn 50, cut.
    Returns (image after power-on, status)."""
    pc = pcut.Pcut(dm, name, bdev, f"g{name}", seed)
    pc.set(keep=50, torn=50)
    d = Dev(pc.path)
    for t in range(nwrites):
        d.write(t + 1, t * 8192, 4096)
    pc.cut()
    d.close()
    st = pc.status()
    pc.power_on()
    img = read_backing(bdev)
    pc.remove()
    return img, st


def fresh_dev(env, name, group, seed, **settings):
    """A pcut device @name (cut group @group, seed @seed, then pc.set(**@settings))
    over a fresh backing device of the fixture @env: (dm, the backing
    device, the Pcut, a Dev on it, a zeroed model of its contents)."""
    dm, backing = env
    bdev = backing()
    pc = pcut.Pcut(dm, name, bdev, group, seed)
    if settings:
        pc.set(**settings)
    return dm, bdev, pc, Dev(pc.path), bytearray(SZ)
