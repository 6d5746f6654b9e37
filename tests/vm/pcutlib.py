# SPDX-License-Identifier: GPL-2.0
"""Helpers for the dm-pcut fixture (tests/fixtures/pcut): a volatile write
cache with a seeded power cut, per device.  Runs in the test guest (stdlib
only); the module is built on the host:

    make -C tests/fixtures/pcut KDIR=/usr/src/linux-headers-$KVER KVER=$KVER

 - build_cmd(kver) / module_path(): where the module is, how it is built;
 - load_module(): dm-mod + insmod build/<kver>/pcut/dm-pcut.ko;
 - Pcut: one pcut device over a backing device (create, message, status,
   cut, power_on = a fresh table over the same backing device, remove);
 - parse_status(): the status line as a dict.
"""
import os
import subprocess

import crashlib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KVER = os.uname().release


def module_path(kver=KVER):
    return os.path.join(REPO, "build", kver, "pcut", "dm-pcut.ko")


def build_cmd(kver):
    return ["make", "-s", "-C", os.path.join(REPO, "tests/fixtures/pcut"),
            f"KDIR=/usr/src/linux-headers-{kver}", f"KVER={kver}"]


def module_loaded():
    return os.path.isdir("/sys/module/dm_pcut")


def load_module():
    """insmod dm-pcut (once); raises if it was not built for this kernel."""
    ko = module_path()
    if not os.path.exists(ko):
        raise FileNotFoundError(f"{ko} not built: run `{' '.join(build_cmd(KVER))}` on the host")
    subprocess.run(["modprobe", "dm-mod"], check=False)
    if not module_loaded():
        subprocess.run(["insmod", ko], check=True, capture_output=True)
    return ko


def unload_module():
    return subprocess.run(["rmmod", "dm_pcut"], capture_output=True, text=True)


def parse_status(line):
    """"live group_ops=3 writes=1 ..." -> {"state": "live", "group_ops": 3, ...}"""
    f = line.split()
    if len(f) > 3 and f[0].isdigit() and f[2] == "pcut":
        f = f[3:]           # a whole `dmsetup status` line: start length type
    d = {"state": f[0]}
    for kv in f[1:]:
        k, _, v = kv.partition("=")
        d[k] = int(v)
    return d


class Pcut:
    """One pcut device named @name over @backing (a /dev path or major:minor)
    in cut group @group, through a crashlib.DM (ioctl) client."""

    def __init__(self, dm, name, backing, group, seed, sectors=None):
        self.dm, self.name, self.backing = dm, name, backing
        self.group, self.seed = group, seed
        if sectors is None:
            with open(f"/sys/class/block/{os.path.basename(os.path.realpath(backing))}/size") as f:
                sectors = int(f.read())
        self.sectors = sectors
        self.path = dm.create(name, self.table())

    def table(self):
        return f"0 {self.sectors} pcut {self.backing} {self.group} {self.seed}"

    @property
    def devno(self):
        return self.dm.devno(self.name)

    def message(self, *words):
        self.dm.message(self.name, " ".join(map(str, words)))

    def status(self):
        return parse_status(self.dm.status(self.name))

    def set(self, keep=None, torn=None, delay_us=None, max_cached=None):
        for k, v in (("keep", keep), ("torn", torn), ("delay_us", delay_us),
                     ("max_cached", max_cached)):
            if v is not None:
                self.message(k, v)

    def cut(self):
        self.message("cut")

    def cut_after(self, n, gap=None):
        """Cut this device when the group's op counter has advanced by @n
        from now; with @gap, cut every other member of the group @gap group
        ops later (gap 0: at the same op)."""
        if gap is None:
            self.message("cut_after", n)
        else:
            self.message("cut_after", n, gap)

    def power_on(self):
        """A fresh table over the same backing device (power on).  The old
        instance's postsuspend waits until the cut is written out."""
        self.dm.reload(self.name, self.table())

    def remove(self):
        self.dm.remove(self.name)


# ------------------------------------------------------------ Linux AIO ---
# Raw io_submit() through ctypes (x86_64 syscall numbers).  Asynchronous
# O_DIRECT writes on a block device are the one way from user space to send
# a write with REQ_FUA and nothing else: RWF_DSYNC sets FUA on the bio, and
# since io_submit() returns before the write completes, the block layer's
# generic_write_sync() (an extra PREFLUSH, which a synchronous O_DSYNC
# write gets) is not called.

import ctypes
import mmap

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
