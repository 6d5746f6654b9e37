# SPDX-License-Identifier: GPL-2.0
"""dm-log-writes: a log reader and an incremental replayer of one device's
log into an image file, with prefix cut points and "volatile cache"
variants (unflushed writes dropped or torn).
"""
import hashlib
import os
import struct
from nxdt.facts import SECTOR
from nxdt.models import CrashFailure, short_hash


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
