# SPDX-License-Identifier: GPL-2.0
"""The dm-pcut fixture (tests/fixtures/pcut): a volatile write cache with a
seeded power cut, per device.  The module is built on the host:

    make -C tests/fixtures/pcut KDIR=/usr/src/linux-headers-$KVER KVER=$KVER

 - build_cmd(kver) / module_path(): where the module is, how it is built;
 - load_module(): dm-mod + insmod build/<kver>/pcut/dm-pcut.ko;
 - Pcut: one pcut device over a backing device (create, message, status,
   cut, power_on = a fresh table over the same backing device, remove);
 - parse_status(): the status line as a dict.
"""
import os
import random
import struct
import subprocess
import threading
import time

from nxdt import host, rawio
from nxdt.facts import SECTOR
from nxdt.host import KVER, REPO


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
    in cut group @group, through a dmlib client (DMIoctl in the crash tests,
    DMSetup in test_pfs)."""

    def __init__(self, dm, name, backing, group, seed, sectors=None, io_opt=0):
        self.dm, self.name, self.backing = dm, name, backing
        self.group, self.seed, self.io_opt = group, seed, io_opt
        if sectors is None:
            with open(f"/sys/class/block/{os.path.basename(os.path.realpath(backing))}/size") as f:
                sectors = int(f.read())
        self.sectors = sectors
        self.path = dm.create(name, self.table())

    def table(self):
        return (f"0 {self.sectors} pcut {self.backing} {self.group} {self.seed}" +
                (f" {self.io_opt}" if self.io_opt else ""))

    @property
    def devno(self):
        return self.dm.devno(self.name)

    def message(self, *words):
        self.dm.message(self.name, *words)

    def status(self):
        return parse_status(self.dm.status(self.name))

    def set(self, keep=None, torn=None, delay_us=None, max_cached=None):
        for k, v in (("keep", keep), ("torn", torn), ("delay_us", delay_us),
                     ("max_cached", max_cached)):
            if v is not None:
                self.message(k, v)

    def cut(self):
        self.message("cut")

    def wait_cut(self, timeout=60):
        """Wait until the worker has written the kept records out: the cut
        decides every record at once, the state turns "cut" after that."""
        return host.wait_for(lambda: self.status()["state"] == "cut",
                             timeout=timeout, interval=0.05, what=f"{self.name} cut")

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


# ----------------------- crash workload and oracle (test_crash_pcut) ---


THREADS = 4


QD = 4


INF = 1 << 62


NEG = -1


_HDR = struct.Struct("<4sIQQQ")


MAGIC = b"NXPC"


ZERO = bytes(SECTOR)
_M64 = (1 << 64) - 1


def pair(dm, nullb, name, group, seed, volatile=False):
    """An HDD and an SSD pcut device, @name-h and @name-s, in cut group
    @group over 64 MiB null_blk devices (seeds @seed and @seed + 1).
    volatile: caches that hold every write until a flush or FUA (keep 0,
    never torn, no write-back when full)."""
    load_module()
    devs = tuple(Pcut(dm, f"{name}-{r}", nullb(64), group, seed + i)
                 for i, r in enumerate("hs"))
    if volatile:
        for p in devs:
            p.set(keep=0, torn=0, max_cached=1 << 20)
    return devs


def _check(seed, wid, s):
    return ((wid * 0x9E3779B97F4A7C15) ^ (s * 0xC2B2AE3D27D4EB4F) ^ seed) & _M64


def sector_payload(seed, wid, s):
    return _HDR.pack(MAGIC, seed & 0xFFFFFFFF, wid, s, _check(seed, wid, s)) * 16


def write_payload(seed, wid, s0, n):
    return b"".join(sector_payload(seed, wid, s0 + i) for i in range(n))


def decode(b, seed, s):
    """Write id of sector @s's 512 bytes @b, or None if it is no payload
    for sector @s of this seed."""
    head = b[:32]
    if head * 16 != b:
        return None
    magic, sd, wid, sec, chk = _HDR.unpack(head)
    if magic != MAGIC or sd != seed & 0xFFFFFFFF or sec != s or chk != _check(seed, wid, s):
        return None
    return wid


class Rec:
    __slots__ = ("wid", "kind", "s0", "n", "sub", "comp", "ok", "fua", "tid")

    def __init__(self, wid, kind, s0, n, fua, tid):
        self.wid, self.kind, self.s0, self.n, self.fua, self.tid = wid, kind, s0, n, fua, tid
        self.sub = time.monotonic_ns()
        self.comp = None        # None: never completed (in flight at the end)
        self.ok = False

    def done(self, ok):
        self.comp = time.monotonic_ns()
        self.ok = ok

    def asdict(self):
        return {k: getattr(self, k) for k in self.__slots__}


class Workload:
    """THREADS writer threads on @dev until stop(); records every write,
    discard and fsync with its times and outcome."""

    def __init__(self, dev, vol_sectors, seed, round_no, wid_base, hot_sectors=8192,
                 p_fsync=0.08, admin=None):
        self.dev, self.nsec, self.seed = dev, vol_sectors, seed
        self.admin = admin              # nxd's dm name: drains, suspends, pauses
        self.rseed = seed * 1000 + round_no
        self.p_fsync = p_fsync
        self.hot = min(hot_sectors, vol_sectors)
        self.recs = []
        self.flushes = []               # [fs, fc, ok]
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self._wid = wid_base
        self.counts = {"w": 0, "fua": 0, "d": 0, "f": 0, "eio": 0, "small": 0, "mid": 0, "big": 0}
        self.stuck = []
        self.threads = [threading.Thread(target=self._run, args=(t,), daemon=True)
                        for t in range(THREADS)]
        self.admin_thread = None
        if admin:
            self.counts.update({"drain": 0, "suspend": 0, "pause": 0})
            self.admin_thread = threading.Thread(target=self._admin, daemon=True)

    def next_wid(self):
        with self.lock:
            self._wid += 1
            return self._wid

    def _extent(self, rng, kind):
        c = rng.random()
        if kind == "d":
            n = rng.choice([8, 16, 64, 128, 512])
            if rng.random() < 0.3:
                n += rng.randint(1, 7)
        elif c < 0.35:
            n = rng.randint(1, 7)                                   # < 4 KiB
            self.counts["small"] += 1
        elif c < 0.8:
            n = rng.choice([8, 16, 24, 32, 64, 128])                # 4-64 KiB
            self.counts["mid"] += 1
        else:
            n = rng.choice([136, 256, 512, 1024])                   # > 64 KiB
            self.counts["big"] += 1
        span = self.hot if rng.random() < 0.7 else self.nsec
        span = max(span, n)
        if n % 8 == 0 and rng.random() < 0.85:
            s0 = rng.randrange(0, (span - n) // 8 + 1) * 8
        else:
            s0 = rng.randrange(0, span - n + 1)
        return s0, n

    def _run(self, tid):
        rng = random.Random(self.rseed * 16 + tid)
        qd = rng.randint(2, QD)
        fd = os.open(self.dev, os.O_RDWR | os.O_DIRECT)
        aio = rawio.AIO(qd, 512 * 1024)
        fails = 0
        try:
            while not self.stop_ev.is_set():
                while aio.inflight < qd and not self.stop_ev.is_set():
                    x = rng.random()
                    if x < 0.07:
                        s0, n = self._extent(rng, "d")
                        r = Rec(self.next_wid(), "d", s0, n, False, tid)
                        with self.lock:
                            self.recs.append(r)
                            self.counts["d"] += 1
                        try:
                            rawio.discard(fd, s0 * SECTOR, n * SECTOR)
                            r.done(True)
                        except OSError:
                            r.done(False)
                            fails += 1
                    elif x < 0.07 + self.p_fsync:
                        f = [time.monotonic_ns(), None, False]
                        with self.lock:
                            self.flushes.append(f)
                            self.counts["f"] += 1
                        try:
                            os.fsync(fd)
                            f[2] = True
                        except OSError:
                            fails += 1
                        f[1] = time.monotonic_ns()
                    else:
                        fua = rng.random() < 0.12
                        s0, n = self._extent(rng, "w")
                        wid = self.next_wid()
                        data = write_payload(self.seed, wid, s0, n)
                        r = Rec(wid, "w", s0, n, fua, tid)
                        with self.lock:
                            self.recs.append(r)
                            self.counts["fua" if fua else "w"] += 1
                        try:
                            r.sub = time.monotonic_ns()
                            aio.submit_write(fd, s0 * SECTOR, data, fua, r)
                        except OSError:
                            r.done(False)
                            fails += 1
                if aio.inflight:
                    for r, res in aio.reap(1, 0.2):
                        r.done(res == r.n * SECTOR)
                        if res != r.n * SECTOR:
                            fails += 1
                if fails > 20:          # the devices are gone: do not spin
                    time.sleep(0.01)
            deadline = time.monotonic() + 60
            while aio.inflight and time.monotonic() < deadline:
                for r, res in aio.reap(1, 0.5):
                    r.done(res == r.n * SECTOR)
        finally:
            with self.lock:
                self.counts["eio"] += fails
            if aio.inflight:
                self.stuck.append((tid, aio.inflight))
            else:
                aio.close()
                os.close(fd)

    def _admin(self):
        """What an admin does to a live volume, so that cuts also land in a
        drain, a suspend or resume, and a paused or resumed destager.  After
        a cut these fail or are killed; only the writers' data is checked."""
        import subprocess
        rng = random.Random(self.rseed * 16 + 99)

        def dm(*args, timeout=20):
            try:
                subprocess.run(["dmsetup", *args], capture_output=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                pass        # a drain waiting on a cut device: killed

        while not self.stop_ev.wait(rng.uniform(0.2, 1.0)):
            x = rng.random()
            if x < 0.4:
                self.counts["drain"] += 1
                dm("message", self.admin, "0", "drain", timeout=rng.uniform(0.5, 5))
            elif x < 0.7:
                self.counts["suspend"] += 1
                dm("suspend", self.admin)
                time.sleep(rng.uniform(0, 0.2))
                dm("resume", self.admin)
            else:
                self.counts["pause"] += 1
                dm("message", self.admin, "0", "pause_destage")
                self.stop_ev.wait(rng.uniform(0.1, 1.0))
                dm("message", self.admin, "0", "resume_destage")

    def start(self):
        for t in self.threads:
            t.start()
        if self.admin_thread:
            self.admin_thread.start()

    def stop(self, timeout=90):
        self.stop_ev.set()
        if self.admin_thread:
            import subprocess
            self.admin_thread.join(60)
            # Never leave the volume suspended: its queued I/O would hang.
            subprocess.run(["dmsetup", "resume", self.admin], capture_output=True)
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.1, end - time.monotonic()))
        alive = [t for t in self.threads if t.is_alive()]
        return alive


def oracle(img, init, wl, nsec, seed, wid_base, detail=20):
    """Check @img against the rules above; returns a dict of counts and the
    first @detail problems."""
    last_fs = max((f[0] for f in wl.flushes if f[2]), default=NEG)
    M = [NEG] * nsec
    Z = [None] * nsec
    byid = {}
    durable = 0
    for r in wl.recs:
        comp = r.comp if r.comp is not None else INF
        hi = min(r.s0 + r.n, nsec)
        if r.kind == "w":
            byid[r.wid] = r
            if r.ok and (r.fua or comp < last_fs):
                durable += 1
                for s in range(r.s0, hi):
                    if r.sub > M[s]:
                        M[s] = r.sub
        else:
            for s in range(r.s0, hi):
                if Z[s] is None or comp > Z[s]:
                    Z[s] = comp
    res = {"sectors": nsec, "lost": 0, "unexplained": 0, "durable_writes": durable,
           "new_values": 0, "problems": []}

    def problem(kind, s, b, why):
        res[kind] += 1
        if len(res["problems"]) < detail:
            sup = [r.asdict() for r in wl.recs if r.kind == "w" and r.s0 <= s < r.s0 + r.n
                   and r.ok and (r.fua or (r.comp or INF) < last_fs) and r.sub == M[s]]
            res["problems"].append({"kind": kind, "sector": s, "why": why,
                                    "got_head": b[:32].hex(), "superseded_by": sup[:1]})

    for s in range(nsec):
        b = img[s * SECTOR:(s + 1) * SECTOR]
        ib = init[s * SECTOR:(s + 1) * SECTOR]
        if b == ib:
            if M[s] == NEG:
                continue
            if b == ZERO and Z[s] is not None and Z[s] >= M[s]:
                continue
            problem("lost", s, b, "initial content, but a durable write covers the sector")
            continue
        if b == ZERO:
            if Z[s] is not None and Z[s] >= M[s]:
                continue
            if Z[s] is not None:
                problem("lost", s, b, "zeros of a discard superseded by a durable write")
            else:
                problem("unexplained", s, b, "zeros, no discard and not the initial content")
            continue
        wid = decode(b, seed, s)
        if wid is None:
            problem("unexplained", s, b, "not a payload of this sector")
            continue
        r = byid.get(wid)
        if r is None:
            if wid <= wid_base:
                problem("lost", s, b, f"value of write {wid} of an earlier round, not the initial content")
            else:
                problem("unexplained", s, b, f"write id {wid} never issued")
            continue
        if not r.s0 <= s < r.s0 + r.n:
            problem("unexplained", s, b, f"write {wid} did not cover this sector")
            continue
        comp = r.comp if r.comp is not None else INF
        if comp >= M[s]:
            res["new_values"] += 1
            continue
        problem("lost", s, b, f"write {wid} superseded by a durable write")
    return res
