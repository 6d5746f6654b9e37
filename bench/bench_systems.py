"""dm-nxd benchmark, guest side: the systems under test.  The base
set-up (modules, the brd SSD, the md RAID6 of mkraid.sh), one class per
system (set up, tear down, occupancy, drain, cold start) and the final
teardown of everything."""

import os
import re
import subprocess
import time

from bench_common import (HDDSIM_KO, KiB, MKRAID, NXD_KO, log, modules_loaded,
                          sectors, settle, sh, wait_for, zero)
from nxdt.facts import STATUS_FIELDS, data_sectors  # on the path that bench_common sets
from nxdt.nxdvol import nxd_line

SSD_MB = int(os.environ.get("SSD_MB", "128"))
SSD = "/dev/ram0"
UDEV_RULE = "/etc/udev/rules.d/99-nxd-bench-nowatch.rules"
NXD_PARAMS = "/sys/module/dm_nxd/parameters"
# The system nxdfill: dm-nxd with stripe fill (destage_fill_min) on.
NXD_FILL_MIN = int(os.environ.get("BENCH_NXD_FILL_MIN", "2"))
# The system nxdalt: dm-nxd with these module parameters ("a=1 b=N").
NXD_ALT_PARAMS = os.environ.get("BENCH_NXDALT_PARAMS", "")
# Status counters of dm-nxd, in order (docs/status.md).
NXD_COUNTERS = STATUS_FIELDS


def base_setup():
    # Stop udev from re-probing devices each time fio closes them after
    # writing (the "watch" option): those probes are extra I/O mid-benchmark.
    os.makedirs(os.path.dirname(UDEV_RULE), exist_ok=True)
    with open(UDEV_RULE, "w") as f:
        f.write('ACTION=="add|change", SUBSYSTEM=="block", OPTIONS+="nowatch"\n')
    sh("udevadm control --reload", check=False, quiet=True)
    sh("modprobe dm-mod")
    if not os.path.exists("/sys/fs/bcache"):
        sh("modprobe bcache", check=False)
    for m in ("dm-writecache", "dm-cache", "dm-cache-smq", "dm-cache-cleaner", "raid456"):
        sh("modprobe %s" % m, check=False)
    if "hddsim" not in sh("dmsetup targets"):
        sh("insmod %s" % HDDSIM_KO)


def ssd_up(prefill):
    if "brd " not in modules_loaded():
        sh("modprobe brd rd_nr=1 rd_size=%d" % (SSD_MB * 1024))
    settle()
    if prefill:
        zero(SSD, SSD_MB)  # allocate every brd page now, not mid-benchmark
    log("SSD %s ready" % SSD)
    return SSD


def raid_up(prefill):
    env = dict(os.environ, PREFILL="1" if prefill else "0")
    md = sh("%s up" % MKRAID, timeout=1200, env=env)
    log("array ready")
    settle()
    return md.splitlines()[-1]


def raid_down():
    sh("%s down" % MKRAID, check=False, timeout=600)


def member_drives():
    return sorted("/dev/mapper/" + d for d in os.listdir("/dev/mapper") if d.startswith("nxdhdd"))


# ------------------------------------------------------------------ systems

class SetupError(Exception):
    pass


class System:
    """One system under test.  up() builds it from scratch (clean),
    down() removes it.  Caches also implement occupancy(), clean() (write
    every dirty block back: the drain phase) and restart() (stop and
    activate again with whatever the cache holds: the cold start)."""
    name, desc, cache = "?", "", False
    same_ios = False        # budgeted bursts: stop at the budget, as a cache

    def __init__(self, md, ssd):
        self.md, self.ssd = md, ssd
        self.dev = None

    def up(self):
        raise NotImplementedError

    def down(self):
        pass

    def occupancy(self):
        return None

    def clean(self, timeout):
        return None

    def restart(self):
        return None

    def counters(self):
        return None

    def message(self, msg):
        raise SetupError("%s takes no message %s" % (self.name, msg))


class MdOnly(System):
    name, desc = "md", "md RAID6 of emulated HDDs, no cache"

    def up(self):
        self.dev = self.md
        return self.dev


class RawSsd(System):
    name, desc = "ssd", "the raw SSD (brd): ceiling"
    # A budgeted burst writes the caches' budget here too: the ceiling
    # they are held to is measured over the same writes, start-up included.
    same_ios = True

    def up(self):
        self.dev = self.ssd
        return self.dev


class DmLinear(System):
    name = "linear"
    desc = ("dm-linear over the raw SSD: what one device-mapper remap per bio costs, "
            "the ceiling of any dm target (opt-in: name it in BENCH_SYSTEMS)")

    def up(self):
        sh("dmsetup create bench_lin --table '0 %d linear %s 0'" % (sectors(self.ssd), self.ssd))
        settle()
        self.dev = "/dev/mapper/bench_lin"
        return self.dev

    def down(self):
        sh("dmsetup remove --retry bench_lin", check=False, timeout=900)
        settle()


def bcache_bucket(ssd_bytes):
    """bcache needs more than 512 buckets (register_cache_set fails with
    "ca->sb.nbuckets is too small" otherwise); aim at 2048, 512 KiB at most."""
    b = 512 * KiB
    while b > 8 * KiB and ssd_bytes // b < 2048:
        b //= 2
    return b


class Bcache(System):
    name, cache = "bcache", True

    @property
    def desc(self):
        return ("bcache writeback, 512 B blocks, %d KiB buckets (%d), sequential_cutoff 64K, "
                "congestion thresholds off" % (self.bucket // KiB, self.nbuckets))

    def __init__(self, md, ssd):
        super().__init__(md, ssd)
        self.bucket = bcache_bucket(sectors(ssd) * 512)
        self.nbuckets = sectors(ssd) * 512 // self.bucket

    def _csets(self):
        return [c for c in os.listdir("/sys/fs/bcache") if "-" in c]

    def _bdev(self):
        for b in sorted(os.listdir("/sys/block")):
            if b.startswith("bcache") and os.path.exists("/dev/" + b):
                return "/dev/" + b
        return None

    def _register(self):
        """Register both devices and wait for an attached /dev/bcacheN."""
        for d in (self.ssd, self.md):  # udev may have done it already
            sh("echo %s > /sys/fs/bcache/register" % d, check=False, quiet=True)
        dev = wait_for(self._bdev, 60, 0.2)
        if not dev:
            raise SetupError("no /dev/bcache* appeared")
        csets = wait_for(self._csets, 60, 0.2)
        if not csets:
            raise SetupError("no bcache cache set registered (%s)"
                             % sh("dmesg | grep -i bcache | tail -3", check=False, quiet=True))
        self.sysd = "/sys/block/%s/bcache" % os.path.basename(dev)
        if "no cache" in sh("cat %s/state" % self.sysd, check=False, quiet=True):
            sh("echo %s > %s/attach" % (csets[0], self.sysd), check=False)
        state = sh("cat %s/state" % self.sysd, check=False, quiet=True)
        if "no cache" in state:
            raise SetupError("bcache backing device not attached to the cache set (%s)" % state)
        self.cset = "/sys/fs/bcache/" + csets[0]
        self.dev = dev
        return dev

    def up(self):
        zero(self.ssd, 16)
        zero(self.md, 1)
        sh("make-bcache --wipe-bcache --writeback --block 512 --bucket %dk -B %s -C %s"
           % (self.bucket // KiB, self.md, self.ssd))
        settle()
        dev = self._register()
        sh("echo writeback > %s/cache_mode" % self.sysd)
        sh("echo 65536 > %s/sequential_cutoff" % self.sysd)
        # bcache bypasses a cache whose latency it finds "congested"; the
        # TCG ramdisk would trip it.
        sh("echo 0 > %s/congested_read_threshold_us" % self.cset, check=False)
        sh("echo 0 > %s/congested_write_threshold_us" % self.cset, check=False)
        settle()
        return dev

    def _stop(self):
        for b in os.listdir("/sys/block"):
            if b.startswith("bcache"):
                sh("echo 1 > /sys/block/%s/bcache/stop" % b, check=False)
        for c in self._csets():
            sh("echo 1 > /sys/fs/bcache/%s/stop" % c, check=False)
        gone = wait_for(lambda: not self._bdev() and not self._csets(), 60, 0.2)
        if not gone:
            raise RuntimeError("bcache did not stop")
        settle()

    def down(self):
        self._stop()
        zero(self.ssd, 16)
        zero(self.md, 1)

    def occupancy(self):
        try:
            dirty = parse_human(open(self.sysd + "/dirty_data").read())
            avail = int(open(self.cset + "/cache_available_percent").read())
        except (OSError, ValueError, AttributeError):
            return None
        return dict(used_pct=100 - avail, dirty_pct=round(100.0 * dirty / (sectors(self.ssd) * 512), 1))

    def clean(self, timeout):
        # writeback_percent 0: no PD-controller throttling, write back all.
        sh("echo 0 > %s/writeback_percent" % self.sysd)
        t0 = time.time()
        ok = wait_for(lambda: parse_human(open(self.sysd + "/dirty_data").read()) == 0, timeout, 1)
        return dict(seconds=round(time.time() - t0, 1), complete=bool(ok))

    def restart(self):
        t0 = time.time()
        self._stop()
        t1 = time.time()
        self._register()
        t2 = time.time()
        at_resume = self.occupancy()
        state = sh("cat %s/state" % self.sysd, check=False, quiet=True)
        return dict(stop_s=round(t1 - t0, 1), start_s=round(t2 - t1, 1), occupancy_at_resume=at_resume,
                    resumed_at=t2, state=state)


def dm_activate(name, table, probe=None, timeout=1800):
    """Create a dm device in three timed steps: load the table (the
    target's constructor: for a cache, reading its metadata or replaying
    its log), resume it, then let udev probe it.  Seconds of each, and
    probe() (the occupancy) right after the resume."""
    t0 = time.time()
    sh("dmsetup create %s --notable" % name, timeout=timeout)
    sh("dmsetup load %s --table '%s'" % (name, table), timeout=timeout)
    t1 = time.time()
    sh("dmsetup resume --noudevsync %s" % name, timeout=timeout)
    t2 = time.time()
    at_resume = probe() if probe else None
    settle()
    t3 = time.time()
    return dict(load_s=round(t1 - t0, 1), resume_s=round(t2 - t1, 1), udev_s=round(t3 - t2, 1),
                start_s=round(t2 - t0, 1), occupancy_at_resume=at_resume, resumed_at=t2)


def parse_human(s):
    """bcache's bch_hprint: "12.3M" -> bytes."""
    s = s.strip()
    m = re.match(r"([0-9.]+)([kMGTPEZY]?)", s)
    if not m:
        raise ValueError(s)
    return int(float(m.group(1)) * 1024 ** " kMGTPEZY".index(m.group(2) or " "))


class WriteCache(System):
    name, cache = "writecache", True
    desc = "dm-writecache, ssd mode, 512 B blocks (the NytroXD sizes are not 4 KiB multiples)"

    def table(self):
        return "0 %d writecache s %s %s 512 0" % (sectors(self.md), self.md, self.ssd)

    def up(self):
        zero(self.ssd, 16)
        sh("dmsetup create bench_wc --table '%s'" % self.table())
        settle()
        self.dev = "/dev/mapper/bench_wc"
        return self.dev

    def down(self):
        sh("dmsetup remove --retry bench_wc", check=False, timeout=900)
        settle()

    def _status(self):
        return [int(x) for x in sh("dmsetup status bench_wc").split()[3:7]]

    def occupancy(self):
        try:
            _, n, free, _ = self._status()
        except (RuntimeError, ValueError):
            return None
        pct = round(100.0 * (n - free) / n, 1)
        return dict(used_pct=pct, dirty_pct=pct)  # it caches dirty blocks only

    def clean(self, timeout):
        t0 = time.time()
        sh("dmsetup message bench_wc 0 cleaner")
        ok = wait_for(lambda: (lambda s: s[2] == s[1] and s[3] == 0)(self._status()), timeout, 1)
        return dict(seconds=round(time.time() - t0, 1), complete=bool(ok))

    def restart(self):
        t0 = time.time()
        sh("dmsetup remove --retry bench_wc", timeout=900)
        t1 = time.time()
        r = dm_activate("bench_wc", self.table(), self.occupancy)
        return dict(stop_s=round(t1 - t0, 1), **r, state=sh("dmsetup status bench_wc"))


class DmCache(System):
    name, cache = "dmcache", True
    desc = ("dm-cache as lvmcache sets it up: 64 KiB blocks, metadata2, writeback, smq, "
            "migration_threshold 2048; 8 MiB metadata on the SSD")
    META_SECTORS = 8 * 2048

    def table(self, policy="smq 2 migration_threshold 2048"):
        return ("0 %d cache /dev/mapper/bench_cmeta /dev/mapper/bench_cdata %s 128 2 metadata2 "
                "writeback %s" % (sectors(self.md), self.md, policy))

    def _parts(self):
        ssz = sectors(self.ssd)
        sh("dmsetup create bench_cmeta --table '0 %d linear %s 0'" % (self.META_SECTORS, self.ssd))
        sh("dmsetup create bench_cdata --table '0 %d linear %s %d'"
           % (ssz - self.META_SECTORS, self.ssd, self.META_SECTORS))
        settle()

    def up(self):
        zero(self.ssd, 16)
        self._parts()
        sh("dmsetup create bench_cache --table '%s'" % self.table())
        settle()
        self.dev = "/dev/mapper/bench_cache"
        return self.dev

    def down(self):
        for d in ("bench_cache", "bench_cdata", "bench_cmeta"):
            sh("dmsetup remove --retry %s" % d, check=False, timeout=900)
        settle()

    def _status(self):
        w = sh("dmsetup status bench_cache").split()
        used, total = (int(x) for x in w[6].split("/"))
        return used, total, int(w[13])

    def occupancy(self):
        try:
            used, total, dirty = self._status()
        except (RuntimeError, ValueError, IndexError):
            return None
        return dict(used_pct=round(100.0 * used / total, 1), dirty_pct=round(100.0 * dirty / total, 1))

    def clean(self, timeout):
        # lvconvert --uncache's way: the cleaner policy writes back every
        # dirty block.
        t0 = time.time()
        sh("dmsetup suspend bench_cache")
        sh("dmsetup reload bench_cache --table '%s'" % self.table("cleaner 0"))
        sh("dmsetup resume bench_cache")
        ok = wait_for(lambda: self._status()[2] == 0, timeout, 1)
        return dict(seconds=round(time.time() - t0, 1), complete=bool(ok))

    def restart(self):
        t0 = time.time()
        for d in ("bench_cache", "bench_cdata", "bench_cmeta"):
            sh("dmsetup remove --retry %s" % d, timeout=900)
        t1 = time.time()
        self._parts()
        r = dm_activate("bench_cache", self.table(), self.occupancy)
        return dict(stop_s=round(t1 - t0, 1), **r, state=sh("dmsetup status bench_cache"))


class Nxd(System):
    name, cache = "nxd", True
    desc = "dm-nxd: nxd <array> <ssd> 1 format (default tunables)"

    def table(self, fmt):
        # The array's whole MiBs less nxd's 1 MiB label area.
        return nxd_line(self.md, self.ssd, data_sectors(sectors(self.md)),
                        ["format"] if fmt else None)

    def up(self):
        if not os.path.exists(NXD_KO):
            raise SetupError("%s is not built (make module)" % NXD_KO)
        if "nxd" not in sh("dmsetup targets"):
            for m in ("libcrc32c", "crc32c"):
                sh("modprobe %s" % m, check=False, quiet=True)
            try:
                sh("insmod %s %s" % (NXD_KO, os.environ.get("BENCH_NXD_MODPARAMS", "")))
            except RuntimeError as e:
                raise SetupError("dm-nxd.ko does not load: %s" % e)
        zero(self.ssd, 16)
        sh("dmsetup create bench_nxd --table '%s'" % self.table(True))
        settle()
        self.dev = "/dev/mapper/bench_nxd"
        return self.dev

    def down(self):
        sh("dmsetup remove --retry bench_nxd", check=False, timeout=900)
        settle()

    def message(self, msg):
        sh("dmsetup message bench_nxd 0 %s" % msg)

    def counters(self):
        w = sh("dmsetup status bench_nxd", check=False, quiet=True).split()
        if len(w) < 4 + len(NXD_COUNTERS):
            return None
        return dict(zip(NXD_COUNTERS, (int(x) for x in w[4:4 + len(NXD_COUNTERS)])))

    def occupancy(self):
        c = self.counters()
        if not c or not c["log_blocks"]:
            return None
        return dict(used_pct=round(100.0 * c["log_used_blocks"] / c["log_blocks"], 1),
                    dirty_pct=round(100.0 * c["index_entries"] / c["log_blocks"], 1))

    def clean(self, timeout):
        t0 = time.time()
        try:    # the drain message waits interruptibly: a kill ends it
            sh("dmsetup message bench_nxd 0 drain", timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        c = self.counters() or {}
        return dict(seconds=round(time.time() - t0, 1), complete=c.get("index_entries") == 0)

    def restart(self):
        t0 = time.time()
        sh("dmsetup remove --retry bench_nxd", timeout=900)
        t1 = time.time()
        r = dm_activate("bench_nxd", self.table(False), self.occupancy)
        c = self.counters() or {}
        return dict(stop_s=round(t1 - t0, 1), **r,
                    recovery_us=c.get("recovery_us"), recovered_blocks=c.get("recovered_blocks"),
                    state=sh("dmsetup status bench_nxd").split()[3])


class NxdParams(Nxd):
    """dm-nxd with some module parameters set for its jobs only, beside
    plain nxd in the same boot (not in the default matrix)."""
    params = {}
    saved = None

    def up(self):
        dev = super().up()     # loads the module
        self.saved = {}
        for k, v in self.params.items():
            with open(os.path.join(NXD_PARAMS, k)) as f:
                self.saved[k] = f.read().strip()
            with open(os.path.join(NXD_PARAMS, k), "w") as f:
                f.write("%s\n" % v)
        return dev

    def down(self):
        super().down()
        # Back to what they were (BENCH_NXD_MODPARAMS may have set them).
        for k, v in (self.saved or {}).items():
            with open(os.path.join(NXD_PARAMS, k), "w") as f:
                f.write(v + "\n")
        self.saved = None


class NxdFill(NxdParams):
    """dm-nxd with stripe fill set by BENCH_NXD_FILL_MIN
    (BENCH_SYSTEMS=...,nxd,nxdfill)."""
    name = "nxdfill"
    desc = "dm-nxd as nxd, with the module parameter destage_fill_min=%d" % NXD_FILL_MIN
    params = {"destage_fill_min": NXD_FILL_MIN}


class NxdAlt(NxdParams):
    """dm-nxd with the module parameters of BENCH_NXDALT_PARAMS
    (BENCH_SYSTEMS=...,nxd,nxdalt)."""
    name = "nxdalt"
    desc = "dm-nxd as nxd, with the module parameters %s" % (NXD_ALT_PARAMS or "(none)")
    params = dict(kv.split("=", 1) for kv in NXD_ALT_PARAMS.split())


class NxdRoute(Nxd):
    """dm-nxd with routing table options (the routing chunk: fixed
    thresholds against mode adaptive, issue 46)."""
    opts = []

    def table(self, fmt):
        return nxd_line(self.md, self.ssd, data_sectors(sectors(self.md)),
                        (["format"] if fmt else []) + self.opts)


def _route(name, opts, desc):
    return type("NxdRoute_" + name.replace("-", "_"), (NxdRoute,),
                dict(name=name, opts=opts, desc="dm-nxd as nxd, with " + desc))


# nxd itself is the fixed 64 KiB threshold (the default).
ROUTE_CLASSES = [_route("nxd-pass", ["mode", "passthrough"],
                        "mode passthrough (every write to the array: its service times)"),
                 _route("nxd-t16k", ["write_threshold", "16384"], "write_threshold 16 KiB"),
                 _route("nxd-t256k", ["write_threshold", "262144"],
                        "write_threshold 256 KiB (every size of seed 004 logged)"),
                 _route("nxd-adaptive", ["mode", "adaptive"],
                        "mode adaptive (threshold from 64 KiB, bounds 4 KiB to 1 MiB)")]
ROUTE_SYSTEMS = ["md", "ssd", "nxd-pass", "nxd-t16k", "nxd", "nxd-t256k", "nxd-adaptive"]

SYSTEM_CLASSES = {c.name: c for c in [MdOnly, RawSsd, DmLinear, Bcache, WriteCache, DmCache, Nxd, NxdFill,
                                      NxdAlt] + ROUTE_CLASSES}


def teardown_all():
    """Leave nothing behind that would hang the guest's power-off."""
    for b in os.listdir("/sys/block"):
        if b.startswith("bcache"):
            sh("echo 1 > /sys/block/%s/bcache/stop" % b, check=False, quiet=True)
    if os.path.isdir("/sys/fs/bcache"):
        for c in os.listdir("/sys/fs/bcache"):
            if "-" in c:
                sh("echo 1 > /sys/fs/bcache/%s/stop" % c, check=False, quiet=True)
    for d in ("bench_nxd", "bench_wc", "bench_lin", "bench_cache", "bench_cdata", "bench_cmeta",
              "cal_hdd"):
        if os.path.exists("/dev/mapper/" + d):
            sh("dmsetup remove --retry %s" % d, check=False, timeout=900)
    time.sleep(1)
    raid_down()
    sh("mdadm --stop --scan", check=False, quiet=True)
