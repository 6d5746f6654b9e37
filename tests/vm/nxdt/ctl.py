# SPDX-License-Identifier: GPL-2.0
"""/dev/nxd-control in Python (kernel/nxd_ioctl.h): request headers,
GET_STATS and LIST, raw ioctl(2) on user memory of a known address, and
the histogram's buckets computed from their definition; the tree's nxdctl,
the control's command-line client.
"""
import ctypes
import mmap
import os
import struct
from nxdt.facts import MiB, STATUS_FIELDS
from nxdt.host import libc, REPO, run


CONTROL = "/dev/nxd-control"


IOC_VERSION = 1


NAME_LEN = 128


HDR_FMT = "<IIIIQ128s"


HDR_SIZE = struct.calcsize(HDR_FMT)            # 152


NCTR_SLOTS = 64                                # 34 counters + 30 reserved


NBUCKETS = 16


HIST_CELLS = 2 * NBUCKETS * 2 * 2


STATS_SIZE = HDR_SIZE + 8 * NCTR_SLOTS + 8 * 3 * HIST_CELLS   # 3736


VOL_FMT = "<Q128s16sQIII5I"


VOL_SIZE = struct.calcsize(VOL_FMT)             # 192


MAX_VOLS = 64


LIST_VOLS_OFF = HDR_SIZE + 8                    # 160


LIST_SIZE = LIST_VOLS_OFF + MAX_VOLS * VOL_SIZE  # 12448


F_RESET = 1


ROUTES = ("ssd", "hdd")


ALIGNS = ("aligned", "unaligned")


DIRS = ("read", "write")


def IOC(d, typ, nr, size):
    return (d << 30) | (size << 16) | (typ << 8) | nr


IOC_RW = 3


GET_STATS = IOC(IOC_RW, 0xDB, 1, STATS_SIZE)


LIST = IOC(IOC_RW, 0xDB, 2, LIST_SIZE)


assert GET_STATS == 0xCE98DB01 and LIST == 0xF0A0DB02


def hdr(size, name=b"", dev=0, flags=0, version=IOC_VERSION, reserved=0):
    if isinstance(name, str):
        name = name.encode()
    return struct.pack(HDR_FMT, size, version, flags, reserved, dev,
                       name.ljust(NAME_LEN, b"\0")[:NAME_LEN])


def encode_dev(major, minor):
    """new_encode_dev()"""
    return (minor & 0xff) | (major << 8) | ((minor & ~0xff) << 12)


class RawBuf:
    """@n bytes of page-aligned user memory at a known address, optionally
    followed by an inaccessible (PROT_NONE) guard page: the kernel gets the
    address itself, so whatever size the request claims, it can only touch
    this mapping (fcntl.ioctl's own buffer copy is never involved)."""

    def __init__(self, n, guard=False, at_end=False):
        self.n = n
        pg = mmap.PAGESIZE
        span = (n + pg - 1) // pg * pg
        self.mm = mmap.mmap(-1, span + (pg if guard else 0))
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        # at_end: the buffer ends right at the guard page
        self.off = span - n if at_end else 0
        if guard:
            lc = libc()
            lc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            if lc.mprotect(ctypes.c_void_p(self.base + span), pg, 0):
                raise OSError(ctypes.get_errno(), "mprotect")

    @property
    def addr(self):
        return self.base + self.off

    def put(self, data, at=0):
        self.mm[self.off + at:self.off + at + len(data)] = data

    def get(self, n=None, at=0):
        n = self.n - at if n is None else n
        return bytes(self.mm[self.off + at:self.off + at + n])


_LIBC = None


def ioctl(fd, cmd, buf):
    """ioctl(2) through libc with @buf (RawBuf, or an address as int: the
    kernel gets exactly that pointer); returns 0 or the errno."""
    global _LIBC
    if _LIBC is None:
        _LIBC = libc()
        _LIBC.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
        _LIBC.ioctl.restype = ctypes.c_int
    addr = buf if isinstance(buf, int) else buf.addr
    ctypes.set_errno(0)
    r = _LIBC.ioctl(fd, cmd, ctypes.c_void_p(addr))
    return ctypes.get_errno() if r < 0 else 0


def parse_stats(buf):
    size, ver, flags, res, dev, name = struct.unpack_from(HDR_FMT, buf, 0)
    c = struct.unpack_from(f"<{NCTR_SLOTS}Q", buf, HDR_SIZE)
    counters = dict(zip(STATUS_FIELDS, c))
    cells = struct.unpack_from(f"<{3 * HIST_CELLS}Q", buf, HDR_SIZE + 8 * NCTR_SLOTS)
    hist = {}
    i = 0
    for d in DIRS:
        for b in range(NBUCKETS):
            for r in ROUTES:
                for a in ALIGNS:
                    hist[(d, b, r, a)] = cells[i:i + 3]   # count, bytes, time_ns
                    i += 3
    return dict(size=size, dev=dev, name=name.rstrip(b"\0").decode(),
                counters=counters, reserved=c[len(STATUS_FIELDS):], hist=hist)


def get_stats(name=None, dev=0, reset=False, fd=None):
    """GET_STATS of a volume as a dict; raises OSError on failure."""
    own = fd is None
    if own:
        fd = os.open(CONTROL, os.O_RDONLY)
    try:
        buf = RawBuf(STATS_SIZE)
        buf.put(hdr(STATS_SIZE, name or "", dev, F_RESET if reset else 0))
        e = ioctl(fd, GET_STATS, buf)
        if e:
            raise OSError(e, os.strerror(e))
        return parse_stats(buf.get())
    finally:
        if own:
            os.close(fd)


def list_vols(fd=None):
    own = fd is None
    if own:
        fd = os.open(CONTROL, os.O_RDONLY)
    try:
        raw = RawBuf(LIST_SIZE)
        raw.put(hdr(LIST_SIZE))
        e = ioctl(fd, LIST, raw)
        if e:
            raise OSError(e, os.strerror(e))
        buf = raw.get()
        count, total = struct.unpack_from("<II", buf, HDR_SIZE)
        vols = []
        for i in range(min(count, MAX_VOLS)):
            # reserved0 was read_threshold: the kernel writes 0 there.
            dev, name, vu, sectors, wt, rsv0, mode, *rsv = struct.unpack_from(
                VOL_FMT, buf, LIST_VOLS_OFF + i * VOL_SIZE)
            vols.append(dict(dev=dev, name=name.rstrip(b"\0").decode(), uuid=vu,
                             sectors=sectors, write_threshold=wt,
                             reserved0=rsv0, mode=mode, reserved=rsv))
        return count, total, vols
    finally:
        if own:
            os.close(fd)


def hist_sum(hist, d=None, b=None, r=None, a=None, field=0):
    return sum(v[field] for (hd, hb, hr, ha), v in hist.items()
               if (d is None or hd == d) and (b is None or hb == b)
               and (r is None or hr == r) and (a is None or ha == a))


def hist_nonzero(hist, d=None):
    """{(dir, bucket, route, align): (count, bytes)} of the non-empty cells."""
    return {k: (v[0], v[1]) for k, v in hist.items()
            if v[0] and (d is None or k[0] == d)}


def bucket_of(nbytes):
    """Histogram bucket of a request size (nxd_ioctl.h: <4K, 4K, 4K+1-8K,
    ..., 16M+1-32M, >32M), computed here from the definition."""
    if nbytes < 4096:
        return 0
    if nbytes == 4096:
        return 1
    if nbytes > 32 * MiB:
        return 15
    b, hi = 2, 8192
    while nbytes > hi:
        b += 1
        hi *= 2
    return b


NXDCTL = os.path.join(REPO, "tools", "nxdctl")


def nxdctl(*args, check=True):
    """The tree's nxdctl with @args (str() of each); the calling test fails
    at once when it is not built."""
    if not os.access(NXDCTL, os.X_OK):
        import pytest       # tests only: the guest programs have no pytest
        pytest.fail(f"{NXDCTL} not built: make -C tools", pytrace=False)
    return run([NXDCTL, *map(str, args)], check=check)
