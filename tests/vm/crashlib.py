# SPDX-License-Identifier: GPL-2.0
"""Crash-consistency helpers for dm-nxd (stdlib only; runs in the test guest).

 - DM: a minimal device-mapper ioctl client (create/load/resume/suspend/
   remove/message/status) so that the hundreds of table loads of a replay
   run do not pay for a dmsetup process and a udev round trip each.
 - gen_ops/Workload: a seeded workload (O_DIRECT writes 512 B .. 1 MiB,
   aligned and not, O_DSYNC writes, discards, fsyncs, verified reads,
   destage pause/resume) with an in-memory model.  The op sequence depends
   on the seed only, so it can be regenerated later (powercut boot 2).
 - parse_log/DevReplayer: a dm-log-writes log reader and an incremental
   replayer of one device's log (the HDD and the SSD are recorded on two
   log-writes devices) into an image file, with prefix cut points and
   "volatile cache" variants (unflushed writes dropped or torn).  A plain
   write logged after an overlapping FUA write is kept under it only when
   the workload's own op order explains it (else MaskFailure).
 - Checker: the crash contract.  At a cut after durability mark k, every
   sector equals the model at mark k, unless it was written after mark k
   (then it may hold any value written to it since, or the one at mark k).

Everything is in bytes of the nxd volume unless a name says sectors.
"""
import errno
import fcntl
import hashlib
import mmap
import os
import random
import struct
import time

from nxdfacts import data_sectors  # noqa: F401 (re-exported)
from nxdfacts import parse_params as parse_nxd_status

SECTOR = 512
BLOCK = 4096

# ------------------------------------------------------------------ dm ---

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




def nxd_table(vol_sectors, hdd, ssd, opts=""):
    args = opts.split()
    extra = f" {len(args)} {opts}" if args else ""
    return f"0 {vol_sectors} nxd {hdd} {ssd}{extra}"


# ------------------------------------------------------------- O_DIRECT ---

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


BLKDISCARD = 0x1277
BLKZEROOUT = 0x127F          # _IO(0x12, 127)


def discard(fd, off, n):
    fcntl.ioctl(fd, BLKDISCARD, struct.pack("QQ", off, n))


def zeroout(fd, off, n):
    fcntl.ioctl(fd, BLKZEROOUT, struct.pack("QQ", off, n))


def discard_zeroes(dev):
    """Whether a discard of @dev (e.g. /dev/loop0) leaves zeros: only if it
    takes discards at all (a loop file on 9p does not; then a discard is a
    no-op that the block layer allows, and the model's zeros would not hold)."""
    name = os.path.basename(os.path.realpath(dev))
    try:
        with open(f"/sys/block/{name}/queue/discard_max_bytes") as f:
            return int(f.read()) > 0
    except OSError:
        return False


# ------------------------------------------------------------- workload ---

def gen_ops(seed, size, hot=2 << 20, dm_msgs=True):
    """Endless seeded op stream (depends on the arguments only):
    ("w", off, data) ("s", off, data) [O_DSYNC] ("d", off, n) ("f",)
    ("r", off, n) ("m", message) [dm message to nxd]."""
    r = random.Random(seed)
    sizes_small = [512, 1024, 1536, 3584, 4096, 4096, 4096, 4608, 8192, 12288,
                   16384, 32768, 65536, 65536 + 512]
    sizes_big = [69632, 131072, 262144, 524288, 1 << 20, None]

    def extent(small_bias):
        if r.random() < small_bias:
            n = r.choice(sizes_small)
        else:
            n = r.choice(sizes_big) or r.randrange(1, 2048) * SECTOR
        n = min(n, size)
        span = hot if r.random() < 0.8 else size
        span = max(min(span, size), n)
        if r.random() < 0.6:
            off = r.randrange(0, (span - n) // BLOCK + 1) * BLOCK
        else:
            off = r.randrange(0, (span - n) // SECTOR + 1) * SECTOR
        return off, n

    while True:
        x = r.random()
        if x < 0.42:
            off, n = extent(0.65)
            yield ("w", off, r.randbytes(n))
        elif x < 0.48:
            off, n = extent(0.6)
            yield ("s", off, r.randbytes(n))
        elif x < 0.56:
            off, n = extent(0.4)
            yield ("d", off, n)
        elif x < 0.64:
            yield ("f",)
        elif x < 0.98 or not dm_msgs:
            off, n = extent(0.5)
            yield ("r", off, n)
        else:
            yield ("m", r.choice(["pause_destage", "resume_destage",
                                  "resume_destage"]))


class Model:
    """Latest contents and history of durability points."""

    def __init__(self, size):
        self.size = size
        self.latest = bytearray(size)

    def apply(self, op):
        if op[0] in ("w", "s"):
            self.latest[op[1]:op[1] + len(op[2])] = op[2]
        elif op[0] == "d":
            self.latest[op[1]:op[1] + op[2]] = bytes(op[2])


def op_is_write(op):
    return op[0] in ("w", "s", "d")


class Workload:
    """Runs gen_ops against an nxd device, verifying reads against the model.

    on_durable(k) is called after every completed fsync and O_DSYNC write
    (durability point k, counting from 1); `events` records every op that
    changes data, `durable` the index in `events` at each durability point.
    Set `stop_verify` (a threading.Event) to stop verifying reads and
    sending dm messages."""

    def __init__(self, dev, size, seed, dm=None, nxd_name=None, hot=2 << 20,
                 on_durable=None, stop_verify=None, model=None, zero_discards=False):
        self.dev, self.size, self.seed = dev, size, seed
        self.zero_discards = zero_discards   # "d" ops as BLKZEROOUT
        self.ops = gen_ops(seed, size, hot, dm_msgs=dm is not None)
        self.dm, self.nxd_name = dm, nxd_name
        self.on_durable = on_durable
        self.stop_verify = stop_verify
        self.model = model or Model(size)
        self.fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
        self.fds = os.open(dev, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
        self.dio = DirectIO()
        self.events = []        # data-changing ops, in completion order
        self.durable = []       # (len(events) at point k, monotonic time)
        self.counts = {"w": 0, "s": 0, "d": 0, "f": 0, "r": 0, "m": 0}
        self.bytes_verified = 0
        self.nop = 0
        self.recent = []        # last ops, for hang reports
        self.tolerate_eio = False   # EIO from writes and fsyncs is counted, not raised

    def close(self):
        os.close(self.fd)
        os.close(self.fds)

    def _durable(self):
        self.durable.append((len(self.events), time.monotonic()))
        if self.on_durable:
            self.on_durable(len(self.durable))

    def step(self):
        op = next(self.ops)
        k = op[0]
        self.nop += 1
        self.recent = self.recent[-15:] + [
            (self.nop, k) + tuple(len(x) if isinstance(x, bytes) else x for x in op[1:])]
        self.counts[k] += 1
        try:
            if k == "w":
                self.dio.pwrite(self.fd, op[1], op[2])
            elif k == "s":
                self.dio.pwrite(self.fds, op[1], op[2])
            elif k == "d":
                (zeroout if self.zero_discards else discard)(self.fd, op[1], op[2])
            elif k == "f":
                os.fsync(self.fd)
        except OSError as e:
            if e.errno != errno.EIO or not self.tolerate_eio:
                raise
            # Failed, so not durable; it may still have landed in part.
            self.counts["eio"] = self.counts.get("eio", 0) + 1
            if op_is_write(op):
                self.model.apply(op)
                self.events.append(op)
            return op
        if k == "r":
            if self.stop_verify is not None and self.stop_verify.is_set():
                return op
            got = self.dio.pread(self.fd, op[1], op[2])
            want = bytes(self.model.latest[op[1]:op[1] + op[2]])
            if got != want:
                bad = next(i for i in range(op[2]) if got[i] != want[i])
                raise AssertionError(
                    f"seed {self.seed} op {self.nop}: live read {op[1]}+{op[2]} "
                    f"differs at byte {op[1] + bad} (sector {(op[1] + bad) // 512})")
            self.bytes_verified += op[2]
        elif k == "m":
            if self.dm and self.nxd_name and not (self.stop_verify and self.stop_verify.is_set()):
                self.dm.message(self.nxd_name, op[1])
        if op_is_write(op):
            self.model.apply(op)
            self.events.append(op)
        if k in ("f", "s"):
            self._durable()
        return op

    def run(self, nops):
        for _ in range(nops):
            self.step()

    def final_sync(self):
        os.fsync(self.fd)
        self._durable()

    def verify_all(self):
        got = self.dio.read_all(self.dev, self.size)
        if got != self.model.latest:
            bad = first_diff(got, self.model.latest)
            raise AssertionError(f"seed {self.seed}: full verify differs at byte {bad} "
                                 f"(sector {bad // 512})")
        self.bytes_verified += self.size


def first_diff(a, b, chunk=1 << 16):
    for i in range(0, min(len(a), len(b)), chunk):
        if a[i:i + chunk] != b[i:i + chunk]:
            return next(j for j in range(i, i + chunk) if a[j] != b[j])
    return min(len(a), len(b))


# -------------------------------------------------------------- checker ---

def short_hash(b):
    return hashlib.blake2b(bytes(b), digest_size=6).hexdigest()


class CrashFailure(AssertionError):
    pass


class Checker:
    """Stable model at durability point k plus the values written between
    points k and k+1.  Points advance monotonically: advance_to(k).

    discard_undefined: between points (relaxed checks only), a sector that a
    discard after point k covered may also hold any value written to it
    before that discard.  nxd does not flush the HDD after a discard over
    logged blocks before its INVAL record is durable (docs/design.md, 5 and
    Limitations: "Discards are not flushed on the HDD"), so a crash can show
    the HDD's older content there; such sectors are counted in
    `discard_older`.  At a durability point the discard is flushed and the
    strict check allows nothing of the kind."""

    def __init__(self, size, events, durable, discard_undefined=False):
        self.size = size
        self.discard_undefined = discard_undefined
        self.discard_older = 0
        self.events = events
        self.durable = [0] + [d[0] if isinstance(d, tuple) else d for d in durable]
        self.k = 0
        self.stable = bytearray(size)   # model at point k
        self._interval = None
        self._next = None               # model at point k+1 (lazily)
        self._hi = None

    def advance_to(self, k):
        assert k >= self.k, (k, self.k)
        if k == self.k:
            return
        for op in self.events[self.durable[self.k]:self.durable[k]]:
            if op[0] in ("w", "s"):
                self.stable[op[1]:op[1] + len(op[2])] = op[2]
            else:
                self.stable[op[1]:op[1] + op[2]] = bytes(op[2])
        self.k = k
        self._interval = None

    def interval_ops(self, lo=None, hi=None):
        """Data-changing ops after point k (up to point k+1 unless @hi)."""
        lo = self.durable[self.k] if lo is None else lo
        if hi is None:
            hi = self.durable[self.k + 1] if self.k + 1 < len(self.durable) else len(self.events)
        return self.events[lo:hi]

    def interval(self, hi=None):
        if self._interval is not None and hi is None:
            return self._interval
        m = {}
        zero = bytes(SECTOR)
        for op in self.interval_ops(hi=hi):
            s0 = op[1] // SECTOR
            if op[0] == "d":
                for j in range(op[2] // SECTOR):
                    m.setdefault(s0 + j, set()).add(zero)
            else:
                d = op[2]
                for j in range(len(d) // SECTOR):
                    m.setdefault(s0 + j, set()).add(bytes(d[j * SECTOR:(j + 1) * SECTOR]))
        if hi is None:
            self._interval = m
        return m

    def next_image(self, hi=None):
        """The model after the interval's ops (at point k+1 unless @hi)."""
        if self._next is not None and hi is None:
            return self._next
        img = bytearray(self.stable)
        for op in self.interval_ops(hi=hi):
            if op[0] == "d":
                img[op[1]:op[1] + op[2]] = bytes(op[2])
            else:
                img[op[1]:op[1] + len(op[2])] = op[2]
        if hi is None:
            self._next = img
        return img

    def check(self, got, strict, what, hi=None):
        """Raise CrashFailure unless @got obeys the contract at point k.
        strict: nothing after point k may show (a cut right at the mark).
        Returns how many sectors differ from the model at point k."""
        if got == self.stable:
            return 0
        self._hi = hi
        if strict:
            allowed, nxt = {}, self.stable
        else:
            allowed, nxt = self.interval(hi), self.next_image(hi)
        chunk = 1 << 16
        nbad = 0
        first = None
        relaxed = 0
        for i in range(0, self.size, chunk):
            gc = got[i:i + chunk]
            if gc == self.stable[i:i + chunk]:
                continue
            if not strict and gc == nxt[i:i + chunk]:
                relaxed += sum(1 for s in range(i, min(i + chunk, self.size), SECTOR)
                               if got[s:s + SECTOR] != self.stable[s:s + SECTOR])
                continue
            for s in range(i, min(i + chunk, self.size), SECTOR):
                g = bytes(got[s:s + SECTOR])
                if g == self.stable[s:s + SECTOR]:
                    continue
                if g == nxt[s:s + SECTOR] or g in allowed.get(s // SECTOR, ()):
                    relaxed += 1
                    continue
                if not strict and self.discard_undefined and self._older_under_discard(s, g, hi):
                    relaxed += 1
                    self.discard_older += 1
                    continue
                nbad += 1
                if first is None:
                    first = s
        if nbad:
            raise CrashFailure(self.explain(got, first, nbad, what, strict))
        return relaxed

    def _older_under_discard(self, s, g, hi):
        """Sector at byte @s holds @g: did a discard after point k (up to
        @hi) cover it, and did an op write @g there before that discard?"""
        lo = self.durable[self.k]
        if hi is None:
            hi = self.durable[self.k + 1] if self.k + 1 < len(self.durable) else len(self.events)
        last = next((i for i in range(hi - 1, lo - 1, -1)
                     if self.events[i][0] == "d" and
                     self.events[i][1] <= s < self.events[i][1] + self.events[i][2]), None)
        if last is None:
            return False
        if g == bytes(SECTOR):
            return True
        for op in self.events[last - 1::-1]:
            if op[0] in ("w", "s") and op[1] <= s < op[1] + len(op[2]) and \
                    op[2][s - op[1]:s - op[1] + SECTOR] == g:
                return True
        return False

    def whence(self, sector_bytes, s, limit=None):
        """Which event (of the first @limit) wrote @sector_bytes at byte
        offset @s (the last one that did)."""
        if sector_bytes == bytes(SECTOR):
            src = "zeros (never written, or discarded)"
        else:
            src = "unknown data (no op wrote it here)"
        for i in range((len(self.events) if limit is None else limit) - 1, -1, -1):
            op = self.events[i]
            n = op[2] if op[0] == "d" else len(op[2])
            if not op[1] <= s < op[1] + n:
                continue
            v = bytes(SECTOR) if op[0] == "d" else op[2][s - op[1]:s - op[1] + SECTOR]
            if v == sector_bytes:
                pt = sum(1 for d in self.durable[1:] if d <= i)
                return f"event #{i} {op[0]} {op[1]}+{n} (after durability point {pt})"
        return src

    def explain(self, got, s, nbad, what, strict):
        g = bytes(got[s:s + SECTOR])
        e = bytes(self.stable[s:s + SECTOR])
        allowed = [] if strict else sorted(
            short_hash(v) for v in self.interval(self._hi).get(s // SECTOR, ()))
        return (f"{what}: {nbad} sector(s) wrong; first: volume sector {s // SECTOR} "
                f"(byte {s}, 4K block {s // BLOCK}) at durability point {self.k}\n"
                f"  expected {short_hash(e)} = {self.whence(e, s, self.durable[self.k])}\n"
                f"  got      {short_hash(g)} = {self.whence(g, s)}\n"
                f"  also allowed (written after the point): {allowed or 'nothing'}")


# ------------------------------------------------------------ log-writes ---

LW_MAGIC = 0x6a736677736872
F_FLUSH, F_FUA, F_DISCARD, F_MARK, F_META = 1, 2, 4, 8, 16


class LogEntry:
    __slots__ = ("idx", "sector", "nr", "flags", "data_off", "mark")

    def __init__(self, idx, sector, nr, flags, data_off, mark):
        self.idx, self.sector, self.nr, self.flags = idx, sector, nr, flags
        self.data_off, self.mark = data_off, mark

    def __repr__(self):
        fl = "".join(c for c, b in (("F", F_FLUSH), ("U", F_FUA), ("D", F_DISCARD),
                                    ("M", F_MARK)) if self.flags & b)
        return f"<#{self.idx} {fl or 'W'} {self.sector}+{self.nr}{' ' + self.mark if self.mark else ''}>"

    @property
    def is_data(self):
        return self.nr > 0 and not self.flags & F_MARK


def parse_log(path):
    """Entries of a dm-log-writes log (Documentation/admin-guide/
    device-mapper/log-writes.rst): a super block in sector 0, then per entry
    one sector {sector, nr_sectors, flags, data_len} (+ mark text) followed
    by nr_sectors of data (none for discards)."""
    with open(path, "rb") as f:
        sup = f.read(4096)
        magic, version, nr, ss = struct.unpack_from("<QQQI", sup)
        if magic != LW_MAGIC:
            raise ValueError(f"{path}: not a dm-log-writes log (magic {magic:#x})")
        entries = []
        pos = ss
        for i in range(nr):
            f.seek(pos)
            h = f.read(ss)
            sector, nsec, flags, dlen = struct.unpack_from("<QQQQ", h)
            mark = None
            if flags & F_MARK:
                mark = h[32:32 + dlen].decode(errors="replace")
                nsec = 0
            pos += ss
            entries.append(LogEntry(i, sector, nsec, flags, pos, mark))  # data_off in bytes
            if not flags & F_DISCARD:
                pos += nsec * ss
    assert ss == SECTOR, f"log sector size {ss} unsupported"
    return entries


class MaskFailure(CrashFailure):
    pass


class DevReplayer:
    """Applies the entries of ONE dm-log-writes log (one device: the HDD or
    the SSD, each recorded on its own log-writes device) to an in-memory
    image of that device and keeps an image file equal to it.  Entries since
    the last FLUSH are remembered with the contents they replaced, so that
    crash variants can drop or tear them.

    Plain entries logged after a FUA entry that overlaps them (since the
    last flush).  dm-log-writes logs a FUA write when it completes, a plain
    write or discard only when a later flush that covers it completes, so
    the log does not say which of the two landed last:
      - the plain write was issued after the FUA write completed (a write
        the workload made later, with no flush between): log order is
        right;
      - the plain write completed before the FUA write was issued (a
        discard, then an O_DSYNC write of the same range): log order would
        bring the older data back;
      - the two were in flight together, or the plain one is a stale copy
        (a destager writing a logged block after an HDD FUA write): a bug
        the replay must show, not repair.
    So every such sector whose plain data differs from what it holds is
    decided by @legit(sector, plain, current, entry, k) (k: the last mark
    "m<k>" before the entry in this log, -1 if none), which returns
    ("keep", reason) (log order), ("mask", reason) (the FUA data stays), or
    None: unexplained, and the replay raises MaskFailure.  @legit None
    means "keep" for every sector (the SSD: nxd issues its SSD writes one at
    a time, so log order is issue order there; if that is wrong the stale
    data shows and the check fails)."""

    def __init__(self, name, logpath, entries, img_file, nbytes, legit=None):
        self.name = name
        self.log = os.open(logpath, os.O_RDONLY)
        self.entries = entries
        self.N = nbytes
        self.img = bytearray(nbytes)
        self.fd = os.open(img_file, os.O_RDWR)
        os.ftruncate(self.fd, 0)
        os.ftruncate(self.fd, nbytes)
        self.legit = legit
        self.pos = -1               # last applied entry
        self.mark_k = -1            # last mark "m<k>" applied
        self.unflushed = []         # [(entry, replaced bytes, data)] since the last flush
        self.fua = []               # [(start, end) sectors, entry] of FUA entries since then
        self.overlap = 0            # plain-entry sectors logged after an overlapping FUA entry
        self.overlap_equal = 0      # ... of which the plain data was the same
        self.kept = {}              # reason -> sectors replayed in log order
        self.masked = {}            # reason -> sectors where the FUA data stayed
        self.bytes_written = 0

    def close(self):
        for fd in (self.log, self.fd):
            os.close(fd)

    def data(self, e):
        if e.flags & F_DISCARD:
            return bytes(e.nr * SECTOR)
        return os.pread(self.log, e.nr * SECTOR, e.data_off)

    def _sync_range(self, off, n):
        os.pwrite(self.fd, self.img[off:off + n], off)
        self.bytes_written += n

    def _mask(self, e, d, lo, hi, fe):
        """Plain entry @e (data @d) overlaps FUA entry @fe in sectors [lo, hi)."""
        for s in range(lo, hi):
            a = (s - e.sector) * SECTOR
            pv = bytes(d[a:a + SECTOR])
            cur = bytes(self.img[s * SECTOR:(s + 1) * SECTOR])
            self.overlap += 1
            if pv == cur:
                self.overlap_equal += 1
                continue
            r = self.legit(s, pv, cur, e, self.mark_k) if self.legit else ("keep", "log order")
            if not r:
                raise MaskFailure(
                    f"{self.name} log: plain entry {e} logged after FUA entry {fe} writes "
                    f"other data into sector {s} ({short_hash(pv)} over {short_hash(cur)}), "
                    f"and the workload's op order does not explain it: a stale copy, or "
                    f"a write in flight with the FUA write; the replay cannot tell which "
                    f"landed last")
            what, why = r
            if what == "mask":
                self.masked[why] = self.masked.get(why, 0) + 1
                d[a:a + SECTOR] = cur
            else:
                self.kept[why] = self.kept.get(why, 0) + 1

    def advance(self, c):
        """Apply entries up to and including index @c."""
        while self.pos < c:
            self.pos += 1
            e = self.entries[self.pos]
            if e.flags & F_FLUSH:
                self.unflushed = []
                self.fua = []
            if e.mark and e.mark.startswith("m") and e.mark[1:].isdigit():
                self.mark_k = int(e.mark[1:])
            if not e.is_data:
                continue
            off, n = e.sector * SECTOR, e.nr * SECTOR
            if off + n > self.N:
                raise ValueError(f"{self.name} log entry {e} beyond the device")
            d = self.data(e)
            if e.flags & F_FUA:
                self.fua.append((e.sector, e.sector + e.nr, e))
            else:
                for a, b, fe in self.fua:
                    lo, hi = max(a, e.sector), min(b, e.sector + e.nr)
                    if lo < hi:
                        if not isinstance(d, bytearray):
                            d = bytearray(d)
                        self._mask(e, d, lo, hi, fe)
            self.unflushed.append((e, bytes(self.img[off:off + n]), bytes(d)))
            self.img[off:off + n] = d
            self._sync_range(off, n)

    def variant(self, rng):
        """Turn the image into another legal crash state when the current
        position is the entry before a FLUSH (or the end): each write since
        the previous flush kept, dropped or torn (512 B granularity) unless
        it is FUA.  Returns (undo token for restore(), description)."""
        saved = {}
        for e in [u[0] for u in self.unflushed]:
            off = e.sector * SECTOR
            saved[off, e.nr] = bytes(self.img[off:off + e.nr * SECTOR])
        for e, old, _ in reversed(self.unflushed):
            off = e.sector * SECTOR
            self.img[off:off + len(old)] = old
        desc = []
        for e, _, d in self.unflushed:
            off = e.sector * SECTOR
            x = rng.random()
            if e.flags & F_FUA or x < 0.4:
                self.img[off:off + len(d)] = d
                desc.append("K" if e.flags & F_FUA else "k")
            elif x < 0.7:
                desc.append("-")
            else:
                self._tear(rng, off, d)
                desc.append("t")
        for (off, n) in saved:
            self._sync_range(off, n * SECTOR)
        return saved, "".join(desc)

    @staticmethod
    def _tear_set(rng, n):
        mode = rng.randrange(3)
        if mode == 0:
            return range(rng.randrange(n + 1))
        if mode == 1:
            return range(rng.randrange(n + 1), n)
        return [j for j in range(n) if rng.random() < 0.5]

    def _tear(self, rng, off, d):
        for j in self._tear_set(rng, len(d) // SECTOR):
            self.img[off + j * SECTOR:off + (j + 1) * SECTOR] = d[j * SECTOR:(j + 1) * SECTOR]

    def restore(self, saved):
        for (off, n), b in saved.items():
            self.img[off:off + n * SECTOR] = b
        for (off, n) in saved:
            self._sync_range(off, n * SECTOR)


def log_sector_set(logpath, entries):
    """Hashes of every 512 B sector of data in a dm-log-writes log."""
    out = set()
    with open(logpath, "rb") as f:
        for e in entries:
            if not e.is_data or e.flags & F_DISCARD:
                continue
            f.seek(e.data_off)
            b = f.read(e.nr * SECTOR)
            for j in range(0, len(b), SECTOR):
                out.add(hashlib.blake2b(b[j:j + SECTOR], digest_size=8).digest())
    return out


# ---------------------------------------------------- whole-guest power cut ---
#
# scripts/powercut.sh boots the guest twice:
#   python3 tests/vm/crashlib.py powercut1 DIR SEED   workload, then sysrq-b
#   python3 tests/vm/crashlib.py powercut2 DIR SEED   recover and check
# DIR (under build/, shared with the host) holds the HDD and SSD images, the
# parameters and durable.log: one fsynced line "k events ops" after every
# completed fsync/O_DSYNC write.  The op stream is a function of the seed, so
# boot 2 regenerates the model instead of reading it from disk.

PC_HDD_MIB, PC_SSD_MIB, PC_HOT = 32, 8, 4 << 20
PC_OPTS = ["", "write_threshold 131072", "low_watermark 50 high_watermark 90",
           "mode log_all", "destage_rate 4"]


def _sh(cmd, check=True):
    import subprocess
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and p.returncode:
        raise RuntimeError(f"{cmd}: {p.stderr.strip()}")
    return p.stdout.strip()


def _pc_setup(d):
    _sh("modprobe dm-mod; modprobe loop; modprobe libcrc32c", check=False)
    if not os.path.isdir("/sys/module/dm_nxd"):
        _sh(f"insmod build/{os.uname().release}/dm-nxd.ko")
    hdd = _sh(f"losetup --find --show --direct-io=off {d}/hdd.img")
    ssd = _sh(f"losetup --find --show --direct-io=off {d}/ssd.img")
    return hdd, ssd


def _pc_params(seed):
    r = random.Random(seed)
    return {"seed": seed, "opts": r.choice(PC_OPTS), "delay": round(r.uniform(4, 25), 2),
            "hdd_mib": PC_HDD_MIB, "ssd_mib": PC_SSD_MIB, "hot": PC_HOT}


def _fsync_write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def powercut1(d, seed):
    import json
    import subprocess
    p = _pc_params(seed)
    for name, mib in (("hdd", p["hdd_mib"]), ("ssd", p["ssd_mib"])):
        with open(f"{d}/{name}.img", "wb") as f:
            f.truncate(mib << 20)
    hdd, ssd = _pc_setup(d)
    dm = DM()
    vol = data_sectors(p["hdd_mib"] * 2048)
    dm.create("pcnxd", nxd_table(vol, hdd, ssd, p["opts"]))
    _fsync_write(f"{d}/params.json", json.dumps(p))
    _fsync_write(f"{d}/durable.log", "")
    jf = open(f"{d}/durable.log", "a")
    wl = None

    def durable(k):
        jf.write(f"{k} {len(wl.events)} {wl.nop}\n")
        jf.flush()
        os.fsync(jf.fileno())
    zd = not discard_zeroes(hdd)
    wl = Workload(dm.node("pcnxd"), vol * 512, seed, dm=dm, nxd_name="pcnxd",
                  hot=p["hot"], on_durable=durable, zero_discards=zd)
    print(f"powercut1: seed {seed} opts '{p['opts']}': sysrq-b in {p['delay']}s"
          + (" (HDD takes no discards: discards sent as BLKZEROOUT)" if zd else ""), flush=True)
    _fsync_write(f"{d}/armed", f"{time.time()}\n")
    subprocess.Popen(["sh", "-c", f"sleep {p['delay']}; echo b > /proc/sysrq-trigger"])
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < p["delay"] + 120:
            wl.step()
            if wl.nop % 50 == 0:
                print(f"powercut1: {wl.nop} ops, {len(wl.durable)} durability points",
                      flush=True)
    except BaseException as e:  # noqa: BLE001 - a live check failed: say so, on disk too
        msg = f"op {wl.nop}: {type(e).__name__}: {e}"
        _fsync_write(f"{d}/boot1-failed", msg + "\n")
        print(f"powercut1: FAIL: {msg}", flush=True)
        return 1
    _fsync_write(f"{d}/no-crash", "the guest did not crash\n")
    return 1


def powercut2(d, seed):
    import json
    with open(f"{d}/params.json") as f:
        p = json.load(f)
    assert p["seed"] == seed, (p, seed)
    lines = [ln.split() for ln in open(f"{d}/durable.log").read().splitlines()]
    lines = [tuple(map(int, ln)) for ln in lines if len(ln) == 3]
    k = lines[-1][0] if lines else 0
    assert all(lines[i][0] == i + 1 for i in range(len(lines))), "durable.log out of order"
    hdd, ssd = _pc_setup(d)
    dm = DM()
    vol = data_sectors(p["hdd_mib"] * 2048)
    size = vol * 512
    tag = f"powercut {os.uname().release} seed {seed} opts '{p['opts']}'"
    try:
        dm.create("pcnxd", nxd_table(vol, hdd, ssd, p["opts"]))
    except DMError as e:
        print(_sh("dmesg | tail -n 20", check=False))
        print(f"{tag}: FAIL: nxd did not come back by itself: {e}")
        return 1
    st = parse_nxd_status(dm.status("pcnxd"))
    if st["state"] != "ok":
        print(_sh("dmesg | grep -i nxd | tail -n 20", check=False))
        print(f"{tag}: FAIL: nxd state after recovery is {st['state']!r}, not 'ok': {st}")
        dm.remove("pcnxd")
        _sh(f"losetup -d {hdd} {ssd}", check=False)
        return 1
    got = DirectIO().read_all(dm.node("pcnxd"), size)
    # Regenerate the op stream: events up to the last durable point exactly,
    # and generously past it (whatever may have been in flight).
    ops = gen_ops(seed, size, p["hot"], dm_msgs=True)
    events, durable = [], []
    last_nop = lines[-1][2] if lines else 0
    for nop in range(1, last_nop + 3000):
        op = next(ops)
        if op_is_write(op):
            events.append(op)
        if op[0] in ("f", "s") and len(durable) < len(lines):
            durable.append(len(events))
    for i, (kk, ev, _) in enumerate(lines):
        assert durable[i] == ev, f"durable point {kk}: {durable[i]} events regenerated, log says {ev}"
    chk = Checker(size, events, durable)
    chk.advance_to(k)
    rc = 0
    try:
        relaxed = chk.check(got, strict=False, hi=len(events),
                            what=f"{tag} after recovery")
        blocks = size // BLOCK
        changed = sum(1 for b in range(blocks)
                      if got[b * BLOCK:(b + 1) * BLOCK] != chk.stable[b * BLOCK:(b + 1) * BLOCK])
        print(f"{tag}: PASS: {blocks} 4K blocks ({size} B) checked against durability point "
              f"{k} ({lines[-1][2] if lines else 0} ops); {changed} blocks held newer data "
              f"written after it ({relaxed} sectors); state {st['state']}, recovered "
              f"{st['recovered_segments']} segments / {st['recovered_blocks']} blocks in "
              f"{st['recovery_us']} us")
    except CrashFailure as e:
        print(_sh("dmesg | grep -i nxd | tail -n 20", check=False))
        print(f"{tag}: FAIL: {e}")
        rc = 1
    dm.remove("pcnxd")
    _sh(f"losetup -d {hdd} {ssd}", check=False)
    return rc


if __name__ == "__main__":
    import sys
    cmd, d, s = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.exit({"powercut1": powercut1, "powercut2": powercut2}[cmd](d, s))
