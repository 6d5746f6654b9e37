# SPDX-License-Identifier: GPL-2.0
"""Reference models the tests check data against, built from what the
tests wrote, never from the code under test: the crash model (latest
contents), the crash contract's checker, and a volume's contents with the
blocks that have a logged copy (the fault tests' model).
"""
import hashlib
import random
from nxdt import nxdvol, rawio
from nxdt.facts import BLOCK, MiB, SECTOR
from nxdt.rawio import EIO


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


def first_diff(a, b, chunk=1 << 16):
    for i in range(0, min(len(a), len(b)), chunk):
        if a[i:i + chunk] != b[i:i + chunk]:
            return next(j for j in range(i, i + chunk) if a[j] != b[j])
    return min(len(a), len(b))


def short_hash(b):
    return hashlib.blake2b(bytes(b), digest_size=6).hexdigest()


class CrashFailure(AssertionError):
    pass


class Checker:
    """Stable model at durability point k plus the values written between
    points k and k+1.  Points advance monotonically: advance_to(k).

    discard_undefined: between points (relaxed checks only), a sector that a
    discard after point k covered may also hold any value written to it
    before that discard: until the discard is acknowledged its INVAL record
    (logged after the HDD discard and an HDD flush, docs/design.md section 5,
    the inval op) may be missing, so a crash can show older content there;
    such sectors are counted in `discard_older`.  At a durability point the discard is flushed and the
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


class LoggedModel:
    """The first @size bytes of the volume as the test wrote them, and the
    4 KiB blocks that have a logged copy (from the routing rules: writes of
    at most write_threshold bytes, or not 4 KiB aligned, are logged)."""

    def __init__(self, vol, size, seed):
        self.vol, self.size = vol, size
        self.rng = random.Random(seed)
        self.data = bytearray(size)
        self.logged = set()          # blocks with a logged copy
        self.partial = set()         # ... of which only some sectors
        self.f = rawio.Fd(vol.dev)
        self.fds = [self.f]

    def close(self):
        for f in self.fds:
            f.close()

    def reopen(self):
        self.f = rawio.Fd(self.vol.dev)
        self.fds.append(self.f)

    def base(self):
        """Random content written straight to the HDD (1 MiB aligned)."""
        for off in range(0, self.size, MiB):
            d = self.rng.randbytes(MiB)
            self.f.pwrite(off, d)
            self.data[off:off + MiB] = d
        self.f.fsync()

    def write(self, off, n, logged):
        d = self.rng.randbytes(n)
        self.f.pwrite(off, d)
        self.data[off:off + n] = d
        if logged:
            s, e = off // SECTOR, (off + n) // SECTOR
            for b in range(s // 8, (e - 1) // 8 + 1):
                if min(e, b * 8 + 8) - max(s, b * 8) == 8:
                    self.partial.discard(b)
                elif b not in self.logged:
                    self.partial.add(b)
                self.logged.add(b)

    def unlog(self, blocks):
        """Whole blocks written to the HDD: their logged copies are gone."""
        self.logged.difference_update(blocks)
        self.partial.difference_update(blocks)

    def log_blocks(self, blocks):
        for b in blocks:
            self.write(b * BLOCK, BLOCK, True)

    def log_sectors(self, blocks):
        """One 512 B write into each block: partially logged blocks."""
        for b in blocks:
            self.write(b * BLOCK + SECTOR * self.rng.randrange(8), SECTOR, True)

    def read_ok(self, off, n):
        got, e = self.f.pread_try(off, n)
        assert e == 0, f"read {off}+{n}: errno {e}"
        self.same(off, got)

    def same(self, off, got):
        want = bytes(self.data[off:off + len(got)])
        if got != want:
            bad = next(i for i in range(len(got)) if got[i] != want[i])
            raise AssertionError(f"wrong data at byte {off + bad} (block {(off + bad) // BLOCK})")

    def read_eio(self, off, n):
        got, e = self.f.pread_try(off, n)
        if e == 0:
            self.same(off, got)          # never wrong data
        assert e == EIO, f"read {off}+{n}: errno {e}, want EIO"

    def verify(self, hdd=None):
        """The volume, or with @hdd its raw HDD alone (from the data
        offset that the HDD's own label gives), holds the model's bytes."""
        if hdd is None:
            got = rawio.pread_dev(self.vol.dev, 0, self.size)
        else:
            got = rawio.pread_dev(hdd, nxdvol.hdd_data_offset(hdd), self.size)
        self.same(0, got)

    def free_blocks(self, n, exclude=()):
        out = set()
        while len(out) < n:
            b = self.rng.randrange(self.size // BLOCK)
            if b not in self.logged and b not in exclude:
                out.add(b)
        return sorted(out)
