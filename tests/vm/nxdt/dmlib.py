# SPDX-License-Identifier: GPL-2.0
"""Generic device-mapper client; nothing here knows nxd's table line (that
is nxdt.nxdvol).

One API, two transports (the same methods, arguments and exception):
 - DMSetup: changes through dmsetup processes, udev-synced, nodes under /dev/mapper
   (waited for after create).  The conftest ``dm`` fixture.
 - DMIoctl: ioctls on /dev/mapper/control with udev's rules skipped and
   nodes made by mknod in a private directory: nothing of udev runs
   between two loads (the crash tests load tables hundreds of times
   between power cuts and must see exactly their own I/O).
Both send queries (table, status, exists, is_suspended) and target messages
as ioctls on /dev/mapper/control: no uevent comes of them, and a dmsetup
process costs about 0.3 s in the guest.
Both remember what they created (``created``, oldest first) and remove it
in cleanup(), newest first, force-removing what will not go; every
failure raises DMError (a host.CmdError) with the errno when known.
table() and status() return whole `dmsetup table|status` lines ("start
length type params", one a target); params() takes the part after the
target type.

Injector: a linear/flakey device over another, switched live.
"""
import errno
import fcntl
import os
import struct
import time
from nxdt import blkdev, host
from nxdt.host import CmdError, run, wait_for


class DMError(CmdError):
    """A device-mapper operation failed; .errno is the kernel's errno
    where it is known (always with DMIoctl; with DMSetup when dmsetup's
    message names it), else None."""

    def __init__(self, msg, err=None):
        super().__init__(msg)
        self.errno = err


def params(line):
    """The target's parameters of a one-target table or status line."""
    f = line.split(None, 3)
    return f[3] if len(f) > 3 else ""


def _errno_in(text):
    """The errno whose strerror dmsetup printed, if any."""
    for e in (errno.EBUSY, errno.ENXIO, errno.EINVAL, errno.ENODEV, errno.EEXIST,
              errno.ENOENT, errno.EIO, errno.ENOMEM, errno.EPERM, errno.EACCES,
              errno.ENOSPC, errno.EROFS, errno.ENOTTY):
        if os.strerror(e) in text:
            return e
    return None


def _dmsetup(*args, input=None):
    """Run dmsetup; its stdout, or DMError."""
    p = run(["dmsetup", *map(str, args)], input=input, check=False)
    if p.returncode != 0:
        raise DMError(f"`dmsetup {' '.join(map(str, args))}` exited {p.returncode}\n"
                      f"stdout: {p.stdout.strip()}\nstderr: {p.stderr.strip()}",
                      _errno_in(p.stderr))
    return p.stdout


def _lines(table):
    if isinstance(table, (list, tuple)):
        table = "\n".join(table)
    return [ln for ln in table.splitlines() if ln.strip()]


_DM_HDR = struct.Struct("<3IIIIiIIIQ128s129s7s")


assert _DM_HDR.size == 312


_DM_SPEC = struct.Struct("<QQiI16s")


(_DM_READONLY, _DM_SUSPEND, _DM_STATUS_TABLE, _DM_SKIP_LOCKFS, _DM_NOFLUSH,
 _DM_DATA_OUT, _DM_DEFERRED_REMOVE) = (1 << 0, 1 << 1, 1 << 4, 1 << 10, 1 << 11,
                                       1 << 16, 1 << 17)


# udev cookie flags (libdm): skip the dm, subsystem, disk and other rules.
_DM_UDEV_FLAGS = (0x0001 | 0x0002 | 0x0004 | 0x0008) << 16


(_CMD_CREATE, _CMD_REMOVE, _CMD_SUSPEND, _CMD_DEV_STATUS, _CMD_LOAD, _CMD_CLEAR,
 _CMD_STATUS_TBL, _CMD_MSG) = (3, 4, 6, 7, 9, 10, 12, 14)


def _dm_cmd(nr):
    return (3 << 30) | (_DM_HDR.size << 16) | (0xfd << 8) | nr


class DMClient:
    """What both transports share: bookkeeping, reload, cleanup, the
    queries and target messages (ioctls), info and targets (dmsetup).
    The subclasses implement the rest with these very signatures."""

    def __init__(self):
        self.created = []       # names, oldest first
        self._ctl = None

    def _ioctl(self, nr, name, flags=0, payload=b"", target_count=0,
               event_nr=0, bufsize=16384, uuid=""):
        buf = bytearray(max(bufsize, _DM_HDR.size + len(payload) + 8))
        _DM_HDR.pack_into(buf, 0, 4, 0, 0, len(buf), _DM_HDR.size, target_count,
                          0, flags, event_nr, 0, 0, name.encode(), uuid.encode(), b"")
        buf[_DM_HDR.size:_DM_HDR.size + len(payload)] = payload
        try:
            if self._ctl is None:
                self._ctl = os.open("/dev/mapper/control", os.O_RDWR)
            fcntl.ioctl(self._ctl, _dm_cmd(nr), buf, True)
        except OSError as e:
            raise DMError(f"dm ioctl {nr} on {name}: {os.strerror(e.errno)}", e.errno) from None
        return buf

    def path(self, name):
        raise NotImplementedError

    def devno(self, name):
        """"major:minor" of @name's node."""
        d = os.stat(self.path(name)).st_rdev
        return f"{os.major(d)}:{os.minor(d)}"

    def create(self, name, table, readonly=False, uuid=None, notable=False):
        """Create @name from @table (a string of lines or a list of
        lines; with @notable, none) and resume it; return its node."""
        raise NotImplementedError

    def load(self, name, table, readonly=False):
        raise NotImplementedError

    def suspend(self, name, noflush=False, nolockfs=False):
        raise NotImplementedError

    def resume(self, name, nosync=False):
        """@nosync: do not wait for udev's probe (slow on a device that
        delays reads); DMIoctl never waits for udev."""
        raise NotImplementedError

    def reload(self, name, table, noflush=False, nosync=False):
        """load + suspend + resume: swap in a new table."""
        self.load(name, table)
        self.suspend(name, noflush=noflush)
        self.resume(name, nosync=nosync)

    def clear(self, name):
        """Drop @name's inactive table."""
        raise NotImplementedError

    def remove(self, name, retry=True, force=False, deferred=False, missing_ok=False):
        """Remove @name: @retry while busy; @force: first replace the table
        by one failing all I/O; @deferred: when last closed; @missing_ok:
        a device that does not exist is not an error."""
        raise NotImplementedError

    def _lines_of(self, name, flags):
        buf = self._ioctl(_CMD_STATUS_TBL, name, flags)
        hdr = _DM_HDR.unpack_from(buf)
        out = []
        for _ in range(hdr[5]):
            s = hdr[4] + (out[-1][0] if out else 0)
            start, length, _st, nxt, ttype = _DM_SPEC.unpack_from(buf, s)
            p = s + _DM_SPEC.size
            prm = bytes(buf[p:buf.index(b"\0", p)]).decode()
            ttype = ttype.rstrip(b"\0").decode()
            out.append((nxt, f"{start} {length} {ttype} {prm}".rstrip()))
        return "\n".join(ln for _, ln in out).strip()

    def status(self, name):
        return self._lines_of(name, 0)

    def table(self, name):
        return self._lines_of(name, _DM_STATUS_TABLE)

    def message(self, name, *words, sector=0):
        """Send the words (joined by spaces) to @name's target at
        @sector; return the target's answer ("" if none)."""
        msg = " ".join(map(str, words))
        payload = struct.pack("<Q", sector) + msg.encode() + b"\0"
        buf = self._ioctl(_CMD_MSG, name, payload=payload)
        hdr = _DM_HDR.unpack_from(buf)
        if not hdr[7] & _DM_DATA_OUT:
            return ""
        return bytes(buf[hdr[4]:buf.index(b"\0", hdr[4])]).decode().strip()

    def exists(self, name):
        try:
            self._ioctl(_CMD_DEV_STATUS, name)
            return True
        except DMError as e:
            if e.errno == errno.ENXIO:
                return False
            raise

    def is_suspended(self, name):
        return bool(_DM_HDR.unpack_from(self._ioctl(_CMD_DEV_STATUS, name))[7] & _DM_SUSPEND)

    def info(self, name):
        """`dmsetup info -c` as a dict (name, major, minor, attr, open,
        segments, events, uuid).  A query: no uevent, no udev."""
        keys = ["name", "major", "minor", "attr", "open", "segments", "events", "uuid"]
        out = _dmsetup("info", "-c", "--noheadings", "--separator", "|",
                       "-o", ",".join(keys), name)
        return dict(zip(keys, out.strip().split("|")))

    def targets(self):
        return _dmsetup("targets")

    def _forget(self, name):
        if name in self.created:
            self.created.remove(name)

    def cleanup(self):
        """Remove everything created here, newest first (force-removing
        what will not go); returns the errors."""
        errors = []
        for name in reversed(list(self.created)):
            if not self.exists(name):
                self._forget(name)
                continue
            try:
                self.remove(name)
            except DMError as e:
                errors.append(f"{name}: {e}")
                try:
                    self.remove(name, force=True)
                except DMError as e2:
                    errors.append(f"{name}: {e2}")
        return errors

    def close(self):
        if self._ctl is not None:
            os.close(self._ctl)
            self._ctl = None

# --------------------------------------------------------------- dmsetup ---


class DMSetup(DMClient):
    """Changes through dmsetup processes (udev-synced, nodes in
    /dev/mapper)."""

    def path(self, name):
        return f"/dev/mapper/{name}"

    def create(self, name, table, readonly=False, uuid=None, notable=False):
        args = ["create", name] + (["--readonly"] if readonly else []) + \
            (["--uuid", uuid] if uuid else [])
        if notable:
            _dmsetup(*args, "--notable")
        else:
            _dmsetup(*args, input="\n".join(_lines(table)) + "\n")
        self.created.append(name)
        wait_for(lambda: os.path.exists(self.path(name)), what=self.path(name))
        return self.path(name)

    def load(self, name, table, readonly=False):
        _dmsetup("load", name, *(["--readonly"] if readonly else []),
                      input="\n".join(_lines(table)) + "\n")

    def suspend(self, name, noflush=False, nolockfs=False):
        _dmsetup("suspend", *(["--noflush"] if noflush else []),
                      *(["--nolockfs"] if nolockfs else []), name)

    def resume(self, name, nosync=False):
        _dmsetup("resume", name, *(["--noudevsync"] if nosync else []))

    def clear(self, name):
        _dmsetup("clear", name)

    def remove(self, name, retry=True, force=False, deferred=False, missing_ok=False):
        if missing_ok and not self.exists(name):
            self._forget(name)
            return
        _dmsetup("remove", *(["--retry"] if retry else []),
                      *(["--force"] if force else []),
                      *(["--deferred"] if deferred else []), name)
        self._forget(name)

# -------------------------------------------------------------- dm ioctl ---


class DMIoctl(DMClient):
    """Through ioctls on /dev/mapper/control: udev's rules skipped, nodes
    made by mknod in @nodedir (no /dev/mapper link), a busy device's
    removal retried 200 times 50 ms apart."""

    def __init__(self, nodedir="/tmp/nxd-crash/dev"):
        super().__init__()
        self.nodedir = nodedir
        os.makedirs(nodedir, exist_ok=True)

    def path(self, name):
        return os.path.join(self.nodedir, name)

    def create(self, name, table, readonly=False, uuid=None, notable=False):
        buf = self._ioctl(_CMD_CREATE, name, uuid=uuid or "")
        dev = _DM_HDR.unpack_from(buf)[10]
        self.created.append(name)
        if not notable:
            try:
                self.load(name, table, readonly)
                self.resume(name)
            except DMError:
                self.remove(name)
                raise
        p = self.path(name)
        if os.path.exists(p):
            os.unlink(p)
        os.mknod(p, 0o600 | 0o060000, dev)
        return p

    def load(self, name, table, readonly=False):
        payload = b""
        lines = _lines(table)
        for i, line in enumerate(lines):
            start, length, ttype, prm = (line.split(None, 3) + [""])[:4]
            prm = prm.encode() + b"\0"
            prm += b"\0" * (-(_DM_SPEC.size + len(prm)) % 8)
            nxt = _DM_SPEC.size + len(prm) if i < len(lines) - 1 else 0
            payload += _DM_SPEC.pack(int(start), int(length), 0, nxt, ttype.encode()) + prm
        self._ioctl(_CMD_LOAD, name, _DM_READONLY if readonly else 0, payload,
                    target_count=len(lines))

    def suspend(self, name, noflush=False, nolockfs=False):
        self._ioctl(_CMD_SUSPEND, name, _DM_SUSPEND | (_DM_NOFLUSH if noflush else 0) |
                    (_DM_SKIP_LOCKFS if nolockfs else 0), event_nr=_DM_UDEV_FLAGS)

    def resume(self, name, nosync=False):
        self._ioctl(_CMD_SUSPEND, name, 0, event_nr=_DM_UDEV_FLAGS)

    def clear(self, name):
        self._ioctl(_CMD_CLEAR, name)

    def remove(self, name, retry=True, force=False, deferred=False, missing_ok=False):
        if force and self.exists(name):
            # As dmsetup --force: a table failing all I/O first.
            n = sum(int(ln.split()[1]) for ln in _lines(self.table(name)))
            self.load(name, f"0 {n} error")
            self._ioctl(_CMD_SUSPEND, name, _DM_NOFLUSH, event_nr=_DM_UDEV_FLAGS)
        tries = 200 if retry else 1
        for i in range(tries):
            try:
                self._ioctl(_CMD_REMOVE, name, _DM_DEFERRED_REMOVE if deferred else 0,
                            event_nr=_DM_UDEV_FLAGS)
                break
            except DMError as e:
                if e.errno == errno.ENXIO and missing_ok:
                    break
                if e.errno != errno.EBUSY or i == tries - 1:
                    raise
                time.sleep(0.05)
        self._forget(name)
        try:
            os.unlink(self.path(name))
        except FileNotFoundError:
            pass

# ------------------------------------------------------- fault injection ---


class Injector:
    """A dm device over @base whose behaviour can be switched live:
    'ok' (linear), 'error' (every bio fails: flakey, always down, no
    feature), 'error_writes' (flakey error_writes: reads pass) and
    'error_reads' (flakey error_reads: kernels >= 6.6 only)."""

    def __init__(self, dm, name, base, mode="ok"):
        self.dm, self.name, self.base = dm, name, base
        self.sectors = blkdev.dev_sectors(base)
        self.mode = mode
        self.dev = dm.create(name, self._line(mode))
        host.udev_settle()
        self.switches = 0

    def _line(self, mode):
        if mode == "ok":
            return f"0 {self.sectors} linear {self.base} 0"
        if mode == "error":
            return f"0 {self.sectors} flakey {self.base} 0 0 1"
        if mode in ("error_writes", "error_reads"):
            return f"0 {self.sectors} flakey {self.base} 0 0 1 1 {mode}"
        raise ValueError(mode)

    def set(self, mode):
        self.dm.reload(self.name, self._line(mode))
        self.mode = mode
        self.switches += 1


def flakey_supports(feature):
    """Whether this kernel's dm-flakey knows @feature (error_reads: 6.6+)."""
    host.modprobe("dm-flakey", check=False)
    base = None
    try:
        dev, path = blkdev.loop_create(1)
        base = (dev, path)
        dm = DMSetup()
        try:
            try:
                dm.create("nxdprobe-flakey", f"0 2048 flakey {dev} 0 0 1 1 {feature}")
            except DMError:
                return False
            dm.remove("nxdprobe-flakey")
            return True
        finally:
            dm.close()
    finally:
        if base:
            blkdev.loop_destroy(*base)


def delay_line(base, read_ms, write_ms):
    """A dm-delay table over all of @base: reads delayed @read_ms, writes
    @write_ms."""
    n = blkdev.dev_sectors(base)
    return f"0 {n} delay {base} 0 {read_ms} {base} 0 {write_ms}"
