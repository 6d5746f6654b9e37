# SPDX-License-Identifier: GPL-2.0
"""Raw device I/O: page-aligned buffers, O_DIRECT reads and writes,
discard and zero-out ioctls, hugepage buffers and Linux AIO (the one way
to send a write with REQ_FUA and no flush).
"""
import ctypes
import errno
import fcntl
import mmap
import os
import struct
from nxdt.facts import BLOCK, MiB


BLKDISCARD = 0x1277


BLKFLSBUF = 0x1261


BLKZEROOUT = 0x127F          # _IO(0x12, 127)


EIO = errno.EIO


def aligned_buf(n):
    return mmap.mmap(-1, max(n, mmap.PAGESIZE))


def pread_direct(fd, off, n):
    buf = aligned_buf(n)
    got = os.preadv(fd, [memoryview(buf)[:n]], off)
    assert got == n, (got, n)
    return bytes(buf[:n])


def pwrite_direct(fd, off, data):
    buf = aligned_buf(len(data))
    buf[:len(data)] = data
    got = os.pwritev(fd, [memoryview(buf)[:len(data)]], off)
    assert got == len(data), (got, len(data))


def discard(fd, off, n):
    fcntl.ioctl(fd, BLKDISCARD, struct.pack("QQ", off, n))


def zeroout(fd, off, n):
    fcntl.ioctl(fd, BLKZEROOUT, struct.pack("QQ", off, n))


def read_all(dev, n, chunk=4 << 20, start=0):
    """Read n bytes of a device from byte @start with O_DIRECT."""
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        out = bytearray()
        off = 0
        while off < n:
            k = min(chunk, n - off)
            out += pread_direct(fd, start + off, k)
            off += k
        return bytes(out)
    finally:
        os.close(fd)


def pread_dev(dev, off, n):
    """O_DIRECT read of a raw device (never the page cache)."""
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        b = aligned_buf(n)
        got = os.preadv(fd, [memoryview(b)[:n]], off)
        assert got == n, (dev, off, n, got)
        return bytes(b[:n])
    finally:
        os.close(fd)


def pwrite_dev(dev, off, data):
    """O_DIRECT write + fsync to a raw device."""
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    try:
        b = aligned_buf(len(data))
        b[:len(data)] = data
        got = os.pwritev(fd, [memoryview(b)[:len(data)]], off)
        assert got == len(data)
        os.fsync(fd)
    finally:
        os.close(fd)


def flip_byte(dev, off, xor=0xFF):
    """Corrupt one byte of a raw device (read-modify-write of its block)."""
    base = off - off % BLOCK
    blk = bytearray(pread_dev(dev, base, BLOCK))
    blk[off - base] ^= xor
    pwrite_dev(dev, base, bytes(blk))


class Fd:
    """An O_DIRECT fd on a device with aligned helpers; returns errno
    instead of raising for the I/O calls marked *_try."""

    def __init__(self, dev, write=True):
        self.dev = dev
        self.fd = os.open(dev, (os.O_RDWR if write else os.O_RDONLY) | os.O_DIRECT)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def pread(self, off, n):
        b = aligned_buf(n)
        got = os.preadv(self.fd, [memoryview(b)[:n]], off)
        assert got == n, (self.dev, off, n, got)
        return bytes(b[:n])

    def pwrite(self, off, data):
        b = aligned_buf(len(data))
        b[:len(data)] = data
        got = os.pwritev(self.fd, [memoryview(b)[:len(data)]], off)
        assert got == len(data), (self.dev, off, len(data), got)

    def pread_try(self, off, n):
        """(data, 0) or (None, errno)."""
        try:
            return self.pread(off, n), 0
        except OSError as e:
            return None, e.errno

    def pwrite_try(self, off, data):
        """0 or errno."""
        try:
            self.pwrite(off, data)
            return 0
        except OSError as e:
            return e.errno

    def fsync(self):
        os.fsync(self.fd)


class DirectIO:
    """Aligned buffers for O_DIRECT."""

    def __init__(self, maxlen=1 << 20):
        self.buf = mmap.mmap(-1, maxlen)
        self.maxlen = maxlen

    def pwrite(self, fd, off, data):
        n = len(data)
        self.buf[:n] = data
        got = os.pwritev(fd, [memoryview(self.buf)[:n]], off)
        if got != n:
            raise OSError(errno.EIO, f"short write {got}/{n} at {off}")

    def pread(self, fd, off, n):
        got = os.preadv(fd, [memoryview(self.buf)[:n]], off)
        if got != n:
            raise OSError(errno.EIO, f"short read {got}/{n} at {off}")
        return bytes(self.buf[:n])

    def read_all(self, path, size):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            out = bytearray(size)
            off = 0
            while off < size:
                k = min(self.maxlen, size - off)
                got = os.preadv(fd, [memoryview(self.buf)[:k]], off)
                if got != k:
                    raise OSError(errno.EIO, f"short read {got}/{k} at {off}")
                out[off:off + k] = self.buf[:k]
                off += k
            return out
        finally:
            os.close(fd)

# ----------------------------------------------------------- user memory ---


MAP_HUGETLB = 0x40000


MAP_POPULATE = 0x8000


def huge_buffer(nbytes):
    """An anonymous MAP_HUGETLB mapping of @nbytes (2 MiB pages), reserving
    hugepages if needed; None if the kernel cannot give them."""
    need = (nbytes + 2 * MiB - 1) // (2 * MiB)
    try:
        with open("/proc/sys/vm/nr_hugepages") as f:
            have = int(f.read())
        if have < need + 2:
            with open("/proc/sys/vm/nr_hugepages", "w") as f:
                f.write(str(have + need + 2))
        return mmap.mmap(-1, need * 2 * MiB,
                         flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE)
    except OSError:
        return None


def release_hugepages():
    try:
        with open("/proc/sys/vm/nr_hugepages", "w") as f:
            f.write("0")
    except OSError:
        pass

# ------------------------------------------------------------- Linux AIO ---


_libc = ctypes.CDLL(None, use_errno=True)


_SYS_IO_SETUP, _SYS_IO_DESTROY, _SYS_IO_GETEVENTS, _SYS_IO_SUBMIT = 206, 207, 208, 209


IOCB_CMD_PREAD, IOCB_CMD_PWRITE = 0, 1


RWF_DSYNC = 2


class _IOCB(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("key", ctypes.c_uint32),
                ("rw_flags", ctypes.c_int32), ("opcode", ctypes.c_uint16),
                ("reqprio", ctypes.c_int16), ("fildes", ctypes.c_uint32),
                ("buf", ctypes.c_uint64), ("nbytes", ctypes.c_uint64),
                ("offset", ctypes.c_int64), ("reserved2", ctypes.c_uint64),
                ("flags", ctypes.c_uint32), ("resfd", ctypes.c_uint32)]


class _IOEvent(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64), ("obj", ctypes.c_uint64),
                ("res", ctypes.c_int64), ("res2", ctypes.c_int64)]


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


def _sys(nr, *args):
    r = _libc.syscall(ctypes.c_long(nr), *args)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"aio syscall {nr}: {os.strerror(e)}")
    return r


class AIO:
    """@depth slots of @slot_bytes page-aligned buffers on one aio context.
    submit_write(slot, fd, off, data, fua, tag) / reap(min_nr, timeout)
    -> [(tag, res)]; res is the byte count or -errno."""

    def __init__(self, depth, slot_bytes=1 << 20):
        self.depth, self.slot_bytes = depth, slot_bytes
        self.ctx = ctypes.c_ulong(0)
        _sys(_SYS_IO_SETUP, ctypes.c_uint(depth), ctypes.byref(self.ctx))
        self.mem = mmap.mmap(-1, depth * slot_bytes)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mem))
        self.iocbs = [_IOCB() for _ in range(depth)]
        self.tags = [None] * depth
        self.free = list(range(depth))
        self.inflight = 0

    def submit_write(self, fd, off, data, fua, tag):
        slot = self.free.pop()
        n = len(data)
        assert n <= self.slot_bytes
        self.mem[slot * self.slot_bytes:slot * self.slot_bytes + n] = data
        cb = self.iocbs[slot]
        ctypes.memset(ctypes.addressof(cb), 0, ctypes.sizeof(cb))
        cb.data = slot
        cb.opcode = IOCB_CMD_PWRITE
        cb.rw_flags = RWF_DSYNC if fua else 0
        cb.fildes = fd
        cb.buf = self.base + slot * self.slot_bytes
        cb.nbytes = n
        cb.offset = off
        arr = (ctypes.POINTER(_IOCB) * 1)(ctypes.pointer(cb))
        try:
            _sys(_SYS_IO_SUBMIT, ctypes.c_ulong(self.ctx.value), ctypes.c_long(1), arr)
        except OSError:
            self.free.append(slot)
            raise
        self.tags[slot] = tag
        self.inflight += 1

    def reap(self, min_nr=1, timeout=None):
        evs = (_IOEvent * self.depth)()
        ts = None
        if timeout is not None:
            ts = ctypes.byref(_Timespec(int(timeout), int((timeout % 1) * 1e9)))
        n = _sys(_SYS_IO_GETEVENTS, ctypes.c_ulong(self.ctx.value), ctypes.c_long(min_nr),
                 ctypes.c_long(self.depth), evs, ts)
        out = []
        for e in evs[:n]:
            slot = e.data
            out.append((self.tags[slot], e.res))
            self.tags[slot] = None
            self.free.append(slot)
            self.inflight -= 1
        return out

    def close(self):
        """Only once nothing is in flight: io_destroy waits for every I/O."""
        _sys(_SYS_IO_DESTROY, ctypes.c_ulong(self.ctx.value))
        self.mem.close()


def fua_write(fd, off, data):
    """One write with REQ_FUA and no flush (see AIO); raises on error."""
    a = AIO(1, max(len(data), 4096))
    try:
        a.submit_write(fd, off, data, True, 0)
        (_, res), = a.reap(1)
        if res != len(data):
            raise OSError(-res if res < 0 else 5, f"fua write at {off}: {res}")
    finally:
        a.close()
