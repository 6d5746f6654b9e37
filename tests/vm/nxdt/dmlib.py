# SPDX-License-Identifier: GPL-2.0
"""Generic device-mapper clients; nothing here knows nxd's table line
(that is nxdt.nxdvol).

Three clients, from two generations of the suite, not merged (their APIs
and error handling differ; see each):
 - DMSetup: dmsetup processes, udev-synced; remembers what it created and
   removes it in cleanup() (the conftest ``dm`` fixture); raises
   host.CmdError.
 - DM: ioctls on /dev/mapper/control, nodes in a private directory, no
   udev (hundreds of table loads per crash replay); raises DMError.
 - dm_create()/dm_remove()/...: module-level dmsetup calls through
   host.sh() (raises RuntimeError), no bookkeeping: test_datapath,
   test_destage.
Injector: a linear/flakey device over another, switched live.
"""
import errno
import fcntl
import os
import struct
import time
from nxdt import blkdev, host
from nxdt.host import CmdError, run, sh, wait_for


# --------------------------------------------------------------- dmsetup ---


class DMSetup:
    """Thin dmsetup wrapper.  Devices created through it are remembered and
    removed by cleanup() (the ``dm`` fixture calls it after every test)."""

    def __init__(self):
        self.created = []

    @staticmethod
    def _table(table):
        if isinstance(table, (list, tuple)):
            table = "\n".join(table)
        return table.rstrip("\n") + "\n"

    @staticmethod
    def path(name):
        return f"/dev/mapper/{name}"

    def create(self, name, table, readonly=False, uuid=None, notable=False):
        """Create @name from @table (a string or list of lines); return its path."""
        cmd = ["dmsetup", "create", name]
        if readonly:
            cmd.append("--readonly")
        if uuid:
            cmd += ["--uuid", uuid]
        if notable:
            cmd.append("--notable")
            run(cmd)
        else:
            run(cmd, input=self._table(table))
        self.created.append(name)
        wait_for(lambda: os.path.exists(self.path(name)), what=f"{self.path(name)}")
        return self.path(name)

    def remove(self, name, retry=True, force=False, deferred=False):
        cmd = ["dmsetup", "remove"]
        if retry:
            cmd.append("--retry")
        if force:
            cmd.append("--force")
        if deferred:
            cmd.append("--deferred")
        run(cmd + [name])
        if name in self.created:
            self.created.remove(name)

    def load(self, name, table):
        run(["dmsetup", "load", name], input=self._table(table))

    def suspend(self, name, noflush=False, nolockfs=False):
        cmd = ["dmsetup", "suspend"]
        if noflush:
            cmd.append("--noflush")
        if nolockfs:
            cmd.append("--nolockfs")
        run(cmd + [name])

    def resume(self, name, nosync=False):
        # nosync: do not wait for udev's probe of the device (slow on a
        # device that delays reads).
        run(["dmsetup", "resume", name] + (["--noudevsync"] if nosync else []))

    def reload(self, name, table, noflush=False, nosync=False):
        """load + suspend + resume: swap in a new table."""
        self.load(name, table)
        self.suspend(name, noflush=noflush)
        self.resume(name, nosync=nosync)

    def table(self, name):
        return run(["dmsetup", "table", name]).stdout.strip()

    def status(self, name):
        return run(["dmsetup", "status", name]).stdout.strip()

    def message(self, name, *msg, sector=0):
        return run(["dmsetup", "message", name, str(sector), *map(str, msg)]).stdout.strip()

    def info(self, name):
        """dmsetup info -c as a dict (name, major, minor, open count...)."""
        out = run(["dmsetup", "info", "-c", "--noheadings", "--separator", "|",
                   "-o", "name,major,minor,attr,open,segments,events,uuid", name]).stdout
        keys = ["name", "major", "minor", "attr", "open", "segments", "events", "uuid"]
        return dict(zip(keys, out.strip().split("|")))

    def is_suspended(self, name):
        return "SUSPENDED" in run(["dmsetup", "info", name]).stdout

    def exists(self, name):
        return run(["dmsetup", "info", name], check=False).returncode == 0

    def targets(self):
        return run(["dmsetup", "targets"]).stdout

    def cleanup(self):
        """Remove everything created here, newest first; returns errors."""
        errors = []
        for name in reversed(list(self.created)):
            if not self.exists(name):
                self.created.remove(name)
                continue
            try:
                self.remove(name)
            except CmdError as e:
                errors.append(str(e))
                try:
                    self.remove(name, force=True)
                except CmdError as e2:
                    errors.append(str(e2))
        return errors

# -------------------------------------------------------------- dm ioctl ---


_DM_HDR = struct.Struct("<3IIIIiIIIQ128s129s7s")


assert _DM_HDR.size == 312


_DM_SPEC = struct.Struct("<QQiI16s")


_DM_READONLY = 1 << 0


_DM_SUSPEND = 1 << 1


_DM_STATUS_TABLE = 1 << 4


_DM_NOFLUSH = 1 << 11


# udev cookie flags (libdm): skip the dm, subsystem, disk and other rules.
_DM_UDEV_FLAGS = (0x0001 | 0x0002 | 0x0004 | 0x0008) << 16


(_CMD_CREATE, _CMD_REMOVE, _CMD_SUSPEND, _CMD_LOAD, _CMD_STATUS_TBL,
 _CMD_MSG) = (3, 4, 6, 9, 12, 14)


def _dm_cmd(nr):
    return (3 << 30) | (_DM_HDR.size << 16) | (0xfd << 8) | nr


class DMError(OSError):
    pass


class DM:
    """device-mapper through /dev/mapper/control.  Devices get nodes in a
    private directory (no udev involved); all are removed by cleanup()."""

    def __init__(self, nodedir="/tmp/nxd-crash/dev"):
        self.nodedir = nodedir
        os.makedirs(nodedir, exist_ok=True)
        self.ctl = os.open("/dev/mapper/control", os.O_RDWR)
        self.devs = {}          # name -> dev_t, creation order

    def _ioctl(self, nr, name, flags=0, payload=b"", target_count=0,
               event_nr=0, bufsize=16384):
        buf = bytearray(max(bufsize, _DM_HDR.size + len(payload) + 8))
        _DM_HDR.pack_into(buf, 0, 4, 0, 0, len(buf), _DM_HDR.size, target_count,
                          0, flags, event_nr, 0, 0, name.encode(), b"", b"")
        buf[_DM_HDR.size:_DM_HDR.size + len(payload)] = payload
        try:
            fcntl.ioctl(self.ctl, _dm_cmd(nr), buf, True)
        except OSError as e:
            raise DMError(e.errno, f"dm ioctl {nr} on {name}: {os.strerror(e.errno)}") from None
        return buf

    def node(self, name):
        return os.path.join(self.nodedir, name)

    def devno(self, name):
        d = self.devs[name]
        return f"{os.major(d)}:{os.minor(d)}"

    def create(self, name, table, readonly=False):
        """Create @name with a one-line @table "start len type args"."""
        buf = self._ioctl(_CMD_CREATE, name)
        dev = _DM_HDR.unpack_from(buf)[10]
        self.devs[name] = dev
        try:
            self.load(name, table, readonly)
            self.resume(name)
        except DMError:
            self.remove(name)
            raise
        p = self.node(name)
        if os.path.exists(p):
            os.unlink(p)
        os.mknod(p, 0o600 | 0o060000, dev)
        return p

    def load(self, name, table, readonly=False):
        start, length, ttype, params = table.split(None, 3) + [""] * (4 - len(table.split(None, 3)))
        spec = _DM_SPEC.pack(int(start), int(length), 0, 0, ttype.encode())
        payload = spec + params.encode() + b"\0"
        self._ioctl(_CMD_LOAD, name, _DM_READONLY if readonly else 0, payload,
                    target_count=1)

    def suspend(self, name, noflush=False):
        self._ioctl(_CMD_SUSPEND, name, _DM_SUSPEND | (_DM_NOFLUSH if noflush else 0),
                    event_nr=_DM_UDEV_FLAGS)

    def resume(self, name):
        self._ioctl(_CMD_SUSPEND, name, 0, event_nr=_DM_UDEV_FLAGS)

    def reload(self, name, table):
        self.load(name, table)
        self.suspend(name)
        self.resume(name)

    def remove(self, name, tries=200):
        for i in range(tries):
            try:
                self._ioctl(_CMD_REMOVE, name, event_nr=_DM_UDEV_FLAGS)
                break
            except DMError as e:
                if e.errno == errno.ENXIO:
                    break
                if e.errno != errno.EBUSY or i == tries - 1:
                    raise
                time.sleep(0.05)
        self.devs.pop(name, None)
        try:
            os.unlink(self.node(name))
        except FileNotFoundError:
            pass

    def _status(self, name, flags):
        buf = self._ioctl(_CMD_STATUS_TBL, name, flags)
        hdr = _DM_HDR.unpack_from(buf)
        start = hdr[4]
        if hdr[5] < 1:
            return ""
        s = start + _DM_SPEC.size
        return bytes(buf[s:buf.index(b"\0", s)]).decode()

    def status(self, name):
        return self._status(name, 0)

    def table(self, name):
        return self._status(name, _DM_STATUS_TABLE)

    def message(self, name, msg, sector=0):
        payload = struct.pack("<Q", sector) + msg.encode() + b"\0"
        self._ioctl(_CMD_MSG, name, payload=payload)

    def cleanup(self):
        errs = []
        for name in reversed(list(self.devs)):
            try:
                self.remove(name)
            except OSError as e:
                errs.append(f"{name}: {e}")
        return errs

    def close(self):
        os.close(self.ctl)

# ----------------------------------------------------- dmsetup functions ---


def dm_create(name, table):
    sh(f"dmsetup create {name}", input=table + "\n")
    # dmsetup waits for its own node; a bounded settle keeps one stuck
    # udev worker from costing the default 120 s.
    sh("udevadm settle --timeout=10", check=False)
    return f"/dev/mapper/{name}"


def dm_remove(name):
    sh(f"dmsetup remove --retry {name}", check=False)


def dm_table(name):
    return sh(f"dmsetup table {name}").strip()


def dm_status(name):
    return sh(f"dmsetup status {name}").strip()


def dm_message(name, msg):
    return sh(f"dmsetup message {name} 0 {msg}")


def dm_uuid(name):
    return run(["dmsetup", "info", "-c", "--noheadings", "-o", "uuid", name]).stdout.strip()


def dm_reload(name, table):
    sh(f"dmsetup reload {name}", input=table + "\n")
    sh(f"dmsetup suspend {name}")
    sh(f"dmsetup resume {name}")

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
        p = run(["dmsetup", "create", "nxdprobe-flakey", "--table",
                 f"0 2048 flakey {dev} 0 0 1 1 {feature}"], check=False)
        if p.returncode == 0:
            run(["dmsetup", "remove", "--retry", "nxdprobe-flakey"], check=False)
        return p.returncode == 0
    finally:
        if base:
            blkdev.loop_destroy(*base)


def delay_line(base, read_ms, write_ms):
    """A dm-delay table over all of @base: reads delayed @read_ms, writes
    @write_ms."""
    n = blkdev.dev_sectors(base)
    return f"0 {n} delay {base} 0 {read_ms} {base} 0 {write_ms}"
