# SPDX-License-Identifier: GPL-2.0
"""dm-log-writes: a log reader and an incremental replayer of one device's
log into an image file, with prefix cut points and "volatile cache"
variants (unflushed writes dropped or torn).
"""
import faulthandler
import hashlib
import json
import os
import struct
import sys
import threading
import time
from nxdt.dmlib import DMError
from nxdt.facts import parse_status, SECTOR
from nxdt.host import dmesg_tail, KVER, LOGS, progress
from nxdt.models import CrashFailure, short_hash
from nxdt.nxdvol import nxd_line
from nxdt.rawio import DirectIO


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


# --------------------------------------- replay harness (test_crash) ---


# dm-snapshot splits I/O at its chunk size: 64 KiB keeps reads fast.
SNAP_CHUNK = 128


class Watchdog:
    """If a step takes longer than @secs: dump the Python stacks and the
    kernel's blocked tasks (sysrq-w) so that a hang leaves evidence."""

    def __init__(self, secs=float(os.environ.get("NXD_CRASH_WATCHDOG", "240")), info=None,
                 unstick=None):
        self.secs = secs
        self.timer = None
        self.info = info
        self.unstick = unstick
        self.fired = None

    def _fire(self):
        print(f"WATCHDOG: step still running after {self.secs}s", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr)
        if self.info:
            try:
                msg = self.info()
            except Exception as e:  # noqa: BLE001 - best effort
                msg = repr(e)
            print(f"WATCHDOG: {msg}", file=sys.stderr, flush=True)
            progress(f"WATCHDOG: {msg}")
            self.fired = msg
        if self.unstick:
            threading.Thread(target=self.unstick, daemon=True).start()
        try:
            with open("/proc/sysrq-trigger", "w") as f:
                f.write("w")
        except OSError:
            pass

    def arm(self):
        self.disarm()
        if self.fired:
            raise AssertionError(f"hang: an I/O did not complete within {self.secs}s "
                                 f"(unstuck by another write): {self.fired}")
        self.timer = threading.Timer(self.secs, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def disarm(self):
        if self.timer:
            self.timer.cancel()
            self.timer = None


def unstick(wl):
    """Rewrite the last 4 KiB of the volume with its current model contents:
    a logged write that commits a segment (and so acknowledges whatever
    waited for one) without changing the data."""
    off = wl.size - 4096
    fd = os.open(wl.dev, os.O_RDWR | os.O_DIRECT)
    try:
        DirectIO().pwrite(fd, off, bytes(wl.model.latest[off:off + 4096]))
    finally:
        os.close(fd)


class Loader:
    """Loads nxd over transient snapshots of the two image loop devices and
    reads the whole volume, once per cut point, on three dm devices made
    once and reloaded for every cut: nxd's table is replaced by an error
    table (its destructor runs as at a remove), each snapshot by one over
    the image as it now is, then nxd's table again (its constructor runs
    recovery as at a create).  A reload sends one uevent where a create and
    a remove send three, and udev's work on them was most of the replay's
    time under TCG (and a backlog the next udev-synced create waited for).

    @cows_h and @cows_s are each two COW devices, used in turn: dm-snapshot
    hands the exceptions of a snapshot over to a new table on the same COW
    device, and every cut must start from the image alone."""

    def __init__(self, dm, hdd_img, ssd_img, cows_h, cows_s, layout, tag):
        self.dm, self.layout = dm, layout
        self.hdd_img, self.ssd_img, self.cows_h, self.cows_s = hdd_img, ssd_img, cows_h, cows_s
        self.names = (f"crsh{tag}", f"crss{tag}", f"crnxr{tag}")
        self.dio = DirectIO()
        self.stats = {"loads": 0, "recovered_segments": 0, "recovered_blocks": 0,
                      "recovery_us_max": 0, "bytes_read": 0}
        self.times = {}
        self.made = False

    def _t(self, what, t0):
        t = time.monotonic()
        self.times[what] = self.times.get(what, 0.0) + t - t0
        return t

    def _reload(self, name, table):
        self.dm.load(name, table)
        self.dm.suspend(name)
        self.dm.resume(name)

    def load_and_read(self):
        dm, L = self.dm, self.layout
        sh, ss, nx = self.names
        vol = L["vol_sectors"]
        t = time.monotonic()
        if not self.made:
            dm.create(sh, f"0 {L['hdd_bytes'] // 512} error")
            dm.create(ss, f"0 {L['ssd_bytes'] // 512} error")
            dm.create(nx, f"0 {vol} error")
            self.made = True
        else:
            self._reload(nx, f"0 {vol} error")      # nxd's destructor
            t = self._t("nxd_remove", t)
        cow = self.stats["loads"] % 2
        self._reload(sh, f"0 {L['hdd_bytes'] // 512} snapshot {self.hdd_img} "
                         f"{self.cows_h[cow]} N {SNAP_CHUNK}")
        self._reload(ss, f"0 {L['ssd_bytes'] // 512} snapshot {self.ssd_img} "
                         f"{self.cows_s[cow]} N {SNAP_CHUNK}")
        t = self._t("snap_create", t)
        try:
            self._reload(nx, nxd_line(dm.devno(sh), dm.devno(ss), vol, L["opts"]))
        except DMError as e:
            raise CrashFailure(f"nxd did not come back by itself: {e}\n"
                               f"{dmesg_tail()}") from None
        t = self._t("nxd_create", t)
        st = parse_status(dm.status(nx))
        if st["state"] != "ok":
            raise CrashFailure(f"nxd state after recovery: {st}")
        got = self.dio.read_all(dm.path(nx), vol * 512)
        t = self._t("read", t)
        s = self.stats
        s["loads"] += 1
        s["recovered_segments"] += st["recovered_segments"]
        s["recovered_blocks"] += st["recovered_blocks"]
        s["recovery_us_max"] = max(s["recovery_us_max"], st["recovery_us"])
        s["bytes_read"] += len(got)
        return got

    def close(self):
        """Removes the three devices (nxd first: its clean shutdown)."""
        if self.made:
            for name in reversed(self.names):
                self.dm.remove(name)
            self.made = False


def choose_cuts(eh, mh, es, ms, rng, nprefix, nvariant):
    """[(HDD entry, SSD entry, point k, kind, device varied)] with both entry
    indexes non-decreasing (the replayers only move forward).

    A pair of cuts is a state a power cut can leave only if no write kept on
    one device was issued after a write the other device lost had completed
    (nxd writes the SSD's INVAL after the HDD's FUA write completed, the
    superblock after the HDD flush of a destage round).  The logs share a
    clock only at the marks (m<k> at durability points, o<n> after every
    op), each sent to the SSD first, then to the HDD; so the HDD at or
    after its copy of a mark is later than the SSD at that mark, and such
    pairs are sound (the HDD losing power after the SSD):
      "mark":  both logs at mark m<k> (strict check);
      "prefix" hdd: the HDD's log cut at a random entry c between its marks
               m<k> and m<k+1>, the SSD at the last shared mark whose HDD
               copy is at or before c;
      "prefix" ssd: the SSD's log cut at a random entry c between its marks
               m<k> and m<k+1>, the HDD at the first shared mark whose SSD
               copy is at or after c (or the end of the HDD's log);
      "variant" hdd/ssd: as prefix, at the entry before one of that
               device's FLUSH entries F_b, and its image then made into
               another legal state for "just before F_b completed": FUA
               writes since its previous flush kept, the other writes of
               the batch kept, dropped or torn (DevReplayer.variant).
    So each device is cut on its own inside the interval, at its own
    instant.  Both logs inside an interval with the SSD later than the HDD
    is not made: without a shared clock there it may pair an INVAL with an
    HDD write that had not completed, a state no power cut produces.  (The
    pairs made do test the HDD write's FUA: an SSD cut after an INVAL pairs
    with the HDD at the next op mark, before the next HDD flush.)"""
    import bisect
    ks = sorted(mh)
    assert ks == sorted(ms), (ks[:5], sorted(ms)[:5])
    hpos = {e.mark: e.idx for e in eh if e.mark}
    spos = {e.mark: e.idx for e in es if e.mark}
    sync = sorted((hpos[m], spos[m]) for m in hpos if m in spos)
    assert all(a[1] < b[1] for a, b in zip(sync, sync[1:])), "marks out of order"
    sync_h = [x[0] for x in sync]
    sync_s = [x[1] for x in sync]
    fl_h = [e.idx for e in eh if e.flags & F_FLUSH]
    fl_s = [e.idx for e in es if e.flags & F_FLUSH]
    end_h, end_s = len(eh) - 1, len(es) - 1

    def ssd_for(c):             # the SSD at the last shared mark with HDD copy <= c
        return sync_s[bisect.bisect_right(sync_h, c) - 1]

    def hdd_for(c):             # the HDD at the first shared mark with SSD copy >= c
        i = bisect.bisect_left(sync_s, c)
        return sync_h[i] if i < len(sync_h) else end_h

    def inside(lo, hi, flushes, last, end):
        inner = list(range(lo + 1, hi))
        pre = rng.sample(inner, min(nprefix, len(inner)))
        cand = [b - 1 for b in flushes if lo < b <= hi]
        if last:
            cand.append(end)
        var = rng.sample(cand, min(nvariant, len(cand)))
        return [(c, "prefix") for c in pre] + [(c, "variant") for c in var]

    order = {"mark": 0, "prefix": 1, "variant": 2, "end": 3}
    cuts = []
    for j, k in enumerate(ks):
        last = j + 1 == len(ks)
        h_lo, s_lo = mh[k], ms[k]
        h_hi = mh[ks[j + 1]] if not last else len(eh)
        s_hi = ms[ks[j + 1]] if not last else len(es)
        cuts.append((h_lo, s_lo, k, "mark", None))
        for c, kind in inside(h_lo, h_hi, fl_h, last, end_h):
            cuts.append((c, ssd_for(c), k, kind, "hdd"))
        for c, kind in inside(s_lo, s_hi, fl_s, last, end_s):
            cuts.append((hdd_for(c), c, k, kind, "ssd"))
    cuts.append((end_h, end_s, ks[-1], "end", None))
    cuts.sort(key=lambda x: (x[0], x[1], order[x[3]]))
    for a, b in zip(cuts, cuts[1:]):
        assert a[0] <= b[0] and a[1] <= b[1] and a[2] <= b[2], (a, b)
    return cuts


def save_failure(seed, logpaths, layout, reps, cut, msg):
    d = os.path.join(LOGS, f"{KVER}-crash-seed{seed}")
    os.makedirs(d, exist_ok=True)
    meta = dict(layout, cut_hdd_entry=cut[0], cut_ssd_entry=cut[1], cut_point=cut[2],
                cut_kind=cut[3], cut_device=cut[4], message=msg)
    with open(os.path.join(d, "failure.json"), "w") as f:
        json.dump(meta, f, indent=1, default=str)
    for dev, rep in reps.items():
        with open(os.path.join(d, f"{dev}.img"), "wb") as f:
            f.write(rep.img)
        # Only the used part of the (sparse) log: up to the end of the last entry.
        end = max(e.data_off + (0 if e.flags & F_DISCARD else e.nr * 512)
                  for e in rep.entries)
        with open(logpaths[dev], "rb") as src, \
                open(os.path.join(d, f"log-writes-{dev}.log"), "wb") as dst:
            while end > 0:
                b = src.read(min(end, 4 << 20))
                if not b:
                    break
                dst.write(b)
                end -= len(b)
    return d


def hdd_mask_legit(wl, vol_bytes, ssd_sectors, data_off=0):
    """For DevReplayer(legit=): a plain HDD write logged after an
    overlapping HDD FUA write (sector @s: plain data @pv, FUA data @fv),
    both between the log's marks k and k+1.  The workload runs one op at a
    time (an op completes before the next is issued) and marks k after the
    flush of its durability point k, so a plain write of the workload logged
    between marks k and k+1 is one of its ops between points k and k+1
    (events [D_k, D_k+1)); so is the FUA write.  In that window find op j,
    the last to write @fv at @s, and op i that wrote @pv there (a discard:
    zeros, and the entry is a discard; zeros are not unique, which is why
    the window matters):
      i after j: the plain write was issued after the FUA write completed,
        so log order is right: ("keep", ...);
      i a discard before j (nxd never discards the HDD on its own, so the
        entry is that op's, which completed before op j was issued):
        ("mask", ...);
      a write whose @pv an op before j wrote at @s and which is in the
        SSD's log: possibly the destager's copy of a logged block, which
        the per-copy fence completes before op j is issued; the log cannot
        tell that from a stale copy landing after j (the bug), so that bug
        is left to the tests that see completion order (dm-pcut's
        campaign, test_writepath's fence test): ("mask", ...);
      i before j and the newest write to @s before j (no flush between:
        both in the window), or newer only than writes to @s that went to
        the HDD too (their data is in no slot of the SSD's log: pieces of
        writes that map cut at the edges of logged blocks; each completed
        before the next op was issued, and dm-log-writes logs all of them
        at the next flush): op i completed before op j was issued, the
        FUA data stays: ("mask", ...);
      anything else: None (the test fails).
    HDD sector @s is volume sector s - @data_off (the data area's start)."""
    events = wl.events
    D = [0] + [d[0] for d in wl.durable]
    zero = bytes(SECTOR)

    def at(op, off):
        if op[0] == "d":
            return zero if op[1] <= off < op[1] + op[2] else None
        if op[1] <= off < op[1] + len(op[2]):
            return bytes(op[2][off - op[1]:off - op[1] + SECTOR])
        return None

    def legit(s, pv, fv, entry, k):
        off = (s - data_off) * SECTOR
        if off < 0 or off >= vol_bytes or k < 0:
            return None
        lo = D[k] if k < len(D) else len(events)
        hi = D[k + 1] if k + 1 < len(D) else len(events)
        discard = bool(entry.flags & F_DISCARD)
        j = next((x for x in range(hi - 1, lo - 1, -1)
                  if events[x][0] != "d" and at(events[x], off) == fv), None)
        if j is None:
            return None

        def is_plain(x):
            return (events[x][0] == "d") == discard and at(events[x], off) == pv
        if any(is_plain(x) for x in range(j + 1, hi)):
            return ("keep", "plain op after the FUA op")
        if discard and any(is_plain(x) for x in range(lo, j)):
            # nxd sends no discard of its own to the HDD: this is a user
            # discard, which completed before op j was issued.  Writes
            # between them may have gone to the log (dm-log-writes logs a
            # plain entry only at the next flush, so it lands after j's).
            return ("mask", "discard op before the FUA op, no flush between")
        if not discard and any(at(events[x], off) == pv for x in range(j)) and \
                hashlib.blake2b(pv, digest_size=8).digest() in ssd_sectors():
            # An older value of s that is in the SSD's log: possibly the
            # destager's copy of a logged block.  The per-copy fence issues
            # op j only after that copy has completed, but dm-log-writes
            # logs the copy at the next flush, after j's FUA entry; a stale
            # copy landing after j looks the same here.  That bug is for
            # the dm-pcut tests (records kept in completion order) and
            # test_writepath's fence test; here the FUA data stays.
            return ("mask", "older value in the SSD log: a destager copy fenced before the FUA op")
        for i in range(j - 1, lo - 1, -1):
            v = at(events[i], off)
            if v is None:
                continue
            if is_plain(i):
                return ("mask", "plain op before the FUA op, no flush between")
            if events[i][0] != "d" and \
                    hashlib.blake2b(v, digest_size=8).digest() not in ssd_sectors():
                continue        # an HDD write too, before op j: masked in its turn
            return None         # a newer write to s went to the log
        return None
    return legit
