#!/usr/bin/env python3
"""dm-nxd benchmark harness, guest side (python3 standard library only).

Runs INSIDE the benchmark guest as root, started by bench/bench.sh
(`run`, one boot per chunk) or bench/bench_calibrate.sh (`calibrate`):

  bench_guest.py calibrate --out DIR            one hddsim drive over brd
  bench_guest.py run --chunk NAME --out DIR     one chunk of the matrix

`run` builds the emulated RAID6 (bench/mkraid.sh) and a memory-backed SSD
(brd), then runs every job of the chunk on every system, job by job (all
systems one after the other for one job, then the next job), so that host
load drifts across systems alike.  Every job starts from a stated state:

  clean  the system is set up from scratch for the job (empty cache,
         fresh superblocks, formatted log) and torn down after it
  filled the same, then a not-measured fill step (the job says what)

Systems:

  md          the md RAID6 alone
  ssd         the raw SSD (ceiling)
  bcache      bcache writeback, buckets sized for the SSD
  writecache  dm-writecache over the array with the SSD
  dmcache     dm-cache as lvmcache lays it out: smq, writeback, metadata2
  nxd         dm-nxd: nxd <array> <ssd> format

A system that cannot be set up, or a job that fails, is recorded with the
reason; the run goes on, and the host report (bench_report.py) exits 1.

For every job: fio's JSON, the guest CPU use over the job (/proc/stat),
every hddsim drive's busy time over the job (the bottleneck is one or the
other), the cache occupancy before and after, and for dm-nxd the counter
deltas.  Some jobs also record a blktrace of the member drives.

DIR/summary.json collects everything.  Everything is torn down at the end
so that the guest powers off.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = os.path.join(REPO, "fio-jobs")
KVER = os.uname().release
HDDSIM_KO = os.path.join(REPO, "build", KVER, "hddsim", "dm-hddsim.ko")
NXD_KO = os.environ.get("NXD_KO", os.path.join(REPO, "build", KVER, "dm-nxd.ko"))
MKRAID = os.path.join(REPO, "bench", "mkraid.sh")
sys.path.insert(0, os.path.join(REPO, "tests", "vm"))
from nxdt.facts import data_sectors

KiB, MiB = 1024, 1 << 20
# NytroXD transfer sizes -> nearest multiple of 512 (O_DIRECT).  160000 is
# exactly between 159744 and 160256; the lower one is used.
NYTRO = [(5000, 5120), (10000, 10240), (20000, 19968), (40000, 39936),
         (80000, 79872), (160000, 159744)]
SYSTEMS = ["md", "ssd", "bcache", "writecache", "dmcache", "nxd"]

SSD_MB = int(os.environ.get("SSD_MB", "128"))
SSD = "/dev/ram0"
UDEV_RULE = "/etc/udev/rules.d/99-nxd-bench-nowatch.rules"
TRACE_DIR = "/run/nxd-bench-trace"
# Status counters of dm-nxd, in order (docs/status.md).
NXD_COUNTERS = ["log_blocks", "log_used_blocks", "index_entries", "index_bytes",
                "writes_logged", "writes_direct", "writes_around_full", "reads_hdd",
                "reads_ssd", "segments_written", "log_blocks_written", "invalidations",
                "rmw_reads", "destaged_blocks", "destaged_bytes", "destage_bios",
                "destage_throttled_ms", "segments_reclaimed", "ssd_errors", "hdd_errors",
                "flushes", "discards", "recovered_segments", "recovered_blocks",
                "recovery_us", "degraded"]

T0 = time.time()


def log(msg):
    print("bench: [%5.0fs] %s" % (time.time() - T0, msg), flush=True)


def sh(cmd, check=True, timeout=300, env=None, quiet=False):
    """Run a shell command, return its stdout (stripped)."""
    p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=env)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (cmd, p.returncode,
                                                (p.stderr or p.stdout).strip()[-800:]))
    if not quiet and p.returncode != 0:
        log("(ignored) %s: exit %d %s" % (cmd, p.returncode, p.stderr.strip()[-300:]))
    return p.stdout.strip()


def settle():
    sh("udevadm settle --timeout=60", check=False, quiet=True)


def sectors(dev):
    return int(sh("blockdev --getsz %s" % dev))


def zero(dev, mib, seek_mib=0):
    sh("dd if=/dev/zero of=%s bs=1M count=%d seek=%d oflag=direct status=none"
       % (dev, mib, seek_mib), timeout=600)


def modules_loaded():
    return open("/proc/modules").read()


def wait_for(pred, timeout, step=0.5):
    """Poll pred() until it is true or timeout seconds passed: its last value."""
    end = time.time() + timeout
    while True:
        v = pred()
        if v or time.time() >= end:
            return v
        time.sleep(step)


# ------------------------------------------------------------- measurement

def cpu_ticks():
    """[(busy, total)] jiffies from /proc/stat: all CPUs, then each CPU."""
    out = []
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            v = [int(x) for x in line.split()[1:]]
            total = sum(v[:8])    # user nice system idle iowait irq softirq steal
            out.append((total - v[3] - v[4], total))
    return out


def hddsim_counters():
    """{drive: {bios, batches, seeks, busy_us}} of every hddsim drive."""
    out = {}
    for line in sh("dmsetup status --target hddsim", check=False, quiet=True).splitlines():
        m = re.match(r"(\S+): \d+ \d+ hddsim (.*)", line)
        if not m:
            continue
        w = m.group(2).split()
        out[m.group(1)] = {w[i]: int(w[i + 1]) for i in range(0, len(w) - 1, 2)}
    return out


class Meter:
    """Guest CPU use and hddsim busy time between start() and stop()."""

    def start(self):
        self.t, self.cpu, self.drv = time.time(), cpu_ticks(), hddsim_counters()

    def stop(self):
        dt = max(time.time() - self.t, 1e-3)
        pct = [100.0 * (b1 - b0) / max(t1 - t0, 1)
               for (b0, t0), (b1, t1) in zip(self.cpu, cpu_ticks())]
        # All vCPUs, and the busiest one: a single-threaded bottleneck
        # (md's raid6d, a dm target's one worker) fills one vCPU only.
        cpu, cpu_max = pct[0], max(pct[1:] or pct)
        drv, busy = hddsim_counters(), []
        bios = batches = 0
        for d, c in drv.items():
            c0 = self.drv.get(d, {})
            busy.append(100.0 * (c.get("busy_us", 0) - c0.get("busy_us", 0)) / 1e6 / dt)
            bios += c.get("bios", 0) - c0.get("bios", 0)
            batches += c.get("batches", 0) - c0.get("batches", 0)
        # wall: the interval in epoch seconds, for the host's samples of
        # the CPU it gave this guest (bench.sh, host-samples.txt).
        return dict(seconds=round(dt, 1), wall=[round(self.t, 1), round(self.t + dt, 1)],
                    vcpus=len(pct) - 1 if len(pct) > 1 else 1,
                    cpu_busy_pct=round(cpu, 1), cpu_max_pct=round(cpu_max, 1),
                    drive_busy_pct_mean=round(sum(busy) / len(busy), 1) if busy else None,
                    drive_busy_pct_max=round(max(busy), 1) if busy else None,
                    drive_bios=bios, drive_batches=batches)


class Blktrace:
    """blktrace (bio queue events) of the array and its member drives while
    in the block: the sizes of the requests the system sends the array and
    those md sends each drive.  md raid456 sends its members one 4 KiB bio
    per stripe unit, whatever it was given; dm-hddsim's merging (the
    drives' bios per batch, in the job's meter) stands for the elevator."""

    def __init__(self, md, members):
        self.md, self.devs, self.proc, self.error = md, [md] + members, None, ""
        try:    # the array's full stripe (md: chunk x data drives)
            with open("/sys/block/%s/queue/optimal_io_size"
                      % os.path.basename(os.path.realpath(md))) as f:
                self.stripe = int(f.read())
        except (OSError, ValueError):
            self.stripe = 0

    def _names(self):
        return sorted({f.split(".blktrace.")[0] for f in os.listdir(TRACE_DIR) if ".blktrace." in f})

    def __enter__(self):
        try:
            if not os.path.ismount("/sys/kernel/debug"):
                sh("mount -t debugfs none /sys/kernel/debug")
            shutil.rmtree(TRACE_DIR, ignore_errors=True)
            os.makedirs(TRACE_DIR)
            cmd = ["blktrace", "-a", "queue", "-D", TRACE_DIR, "-b", "1024", "-n", "8"]
            for d in self.devs:
                cmd += ["-d", d]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                         text=True)
            # Tracing has started once every device has its output file;
            # a SIGINT before that can leave blktrace hanging.
            wait_for(lambda: self.proc.poll() is not None or len(self._names()) >= len(self.devs), 60)
            if self.proc.poll() is not None:
                self.error = "blktrace exited: %s" % self.proc.stderr.read().strip()[-300:]
                self.proc = None
        except Exception as e:  # noqa: BLE001 - recorded, the job goes on
            self.error = "blktrace: %s" % e
            self.proc = None
        return self

    def __exit__(self, *exc):
        if not self.proc:
            return False
        for sig, secs in ((signal.SIGINT, 60), (signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=secs)
                break
            except subprocess.TimeoutExpired:
                self.error = "blktrace did not stop on %s" % signal.Signals(sig).name
        if self.error:
            # A killed blktrace leaves the devices traced: the next one
            # would get EBUSY.
            for d in self.devs:
                sh("blktrace -k -d %s" % d, check=False, quiet=True, timeout=30)
        return False

    def summary(self):
        """{array: {...}, members: {...}}: per side the number and mean size
        of read and write bios and a histogram of the write sizes."""
        if self.error:
            return dict(error=self.error)
        names = self._names()
        if not names:
            return dict(error="blktrace wrote nothing")
        mdname = os.path.basename(os.path.realpath(self.md))
        out = {}
        for side, sel in (("array", [n for n in names if n == mdname]),
                          ("members", [n for n in names if n != mdname])):
            hist = {"write": {}, "read": {}}
            full = full_bytes = 0
            args = ["blkparse", "-q", "-D", TRACE_DIR, "-f", "%a %d %S %n\n"]
            for n in sel:
                args += ["-i", n]
            p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=600) if sel else None
            for line in (p.stdout.splitlines() if p else []):
                w = line.split()
                if len(w) != 4 or w[0] != "Q" or not w[3].isdigit() or w[3] == "0":
                    continue
                kind = "write" if "W" in w[1] else "read" if "R" in w[1] else None
                if kind:
                    b = int(w[3]) * 512
                    hist[kind][b] = hist[kind].get(b, 0) + 1
                    # A write of whole stripes, stripe-aligned: RAID6 writes
                    # it without reading anything back.
                    if kind == "write" and self.stripe and w[2].isdigit() and \
                            (int(w[2]) * 512) % self.stripe == 0 and b % self.stripe == 0:
                        full += 1
                        full_bytes += b
            o = dict(devices=len(sel))
            for kind, h in hist.items():
                n = sum(h.values())
                o[kind + "_count"] = n
                o[kind + "_mean_bytes"] = round(sum(k * v for k, v in h.items()) / n) if n else 0
            o["write_hist"] = {str(k): v for k, v in sorted(hist["write"].items())}
            if side == "array":
                wbytes = sum(k * v for k, v in hist["write"].items())
                o.update(stripe_bytes=self.stripe, full_stripe_writes=full,
                         full_stripe_bytes_pct=round(100.0 * full_bytes / wbytes, 1) if wbytes else None)
            out[side] = o
        shutil.rmtree(TRACE_DIR, ignore_errors=True)
        return out


class Occupancy(threading.Thread):
    """Samples a system's cache occupancy every `step` seconds."""

    def __init__(self, system, step=2.0):
        super().__init__(daemon=True)
        self.system, self.step, self.samples = system, step, []
        self.stop_ev = threading.Event()

    def run(self):
        t0 = time.time()
        while not self.stop_ev.is_set():
            o = self.system.occupancy()
            if o is not None:
                self.samples.append([round(time.time() - t0, 1), o.get("used_pct"), o.get("dirty_pct")])
            self.stop_ev.wait(self.step)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)
        return self.samples


# ---------------------------------------------------------------- base setup

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

    def up(self):
        self.dev = self.ssd
        return self.dev


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
        vol = data_sectors(sectors(self.md))
        return "0 %d nxd %s %s%s" % (vol, self.md, self.ssd, " 1 format" if fmt else "")

    def up(self):
        if not os.path.exists(NXD_KO):
            raise SetupError("%s is not built (make module)" % NXD_KO)
        if "nxd" not in sh("dmsetup targets"):
            for m in ("libcrc32c", "crc32c"):
                sh("modprobe %s" % m, check=False, quiet=True)
            try:
                sh("insmod %s" % NXD_KO)
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


SYSTEM_CLASSES = {c.name: c for c in (MdOnly, RawSsd, Bcache, WriteCache, DmCache, Nxd)}


# --------------------------------------------------------------------- jobs

def chunks(smoke):
    """{chunk: [job spec]}.  A job spec: id, kind (fio|steady|drain), phase,
    state (the stated starting state), fio file and variables, an optional
    not-measured fill step before it, trace (blktrace the members)."""
    burst = "clean: set up from scratch, writes capped at the burst budget"

    def rand(jid, rw, bs, qd, mis=0, **kw):
        j = dict(id=jid, kind="fio", phase="burst", state=burst, fio="rand.fio",
                 var=dict(RW=rw, BS=bs, IODEPTH=qd, MISALIGN=mis, RWMIXREAD=50,
                          TIME_BASED=0, BUDGET=1))
        j.update(kw)
        return j

    small, nytro, mixed, steady, drain = [], [], [], [], []
    for kib in (4, 8, 16):
        for qd in (1, 8, 32):
            small.append(rand("randwrite-%dk-qd%d" % (kib, qd), "randwrite", kib * KiB, qd,
                              trace=(kib == 16 and qd == 8)))
    for nominal, bs in NYTRO:
        for mis in (0, 512):
            nytro.append(rand("nytro-%d-%s" % (nominal, "unaligned" if mis else "aligned"),
                              "randwrite", bs, 8, mis, nominal=nominal))
    mixed.append(dict(id="streaming", kind="fio", phase="burst", fio="streaming.fio",
                      state="clean", var=dict(IODEPTH=4), trace=True))
    mixed.append(dict(id="streaming-after-small", kind="fio", phase="burst", fio="streaming.fio",
                      var=dict(IODEPTH=4),
                      state="filled: the burst budget of random 4 KiB writes over the whole volume "
                            "first, so that logged blocks lie in the streamed region",
                      fill=dict(BS=4 * KiB, REGION="all", FILL="budget")))
    mixed.append(dict(id="interference", kind="fio", phase="burst", fio="interference.fio",
                      state="clean", var=dict(IODEPTH=8)))
    mixed.append(dict(id="interference-solo", kind="fio", phase="burst", fio="interference.fio",
                      section="stream", state="clean: the 1 MiB writer of the interference job alone",
                      var=dict(IODEPTH=8)))
    mixed.append(dict(id="read-after-write-cache", kind="fio", phase="read", fio="rand.fio",
                      state="filled: every 4 KiB block of a region of 1/8 of the SSD written "
                            "once; the job reads that region (served by the cache)",
                      fill=dict(BS=4 * KiB, REGION="readback", FILL="region"),
                      var=dict(RW="randread", BS=4 * KiB, IODEPTH=8, MISALIGN=0, RWMIXREAD=100,
                               TIME_BASED=1, REGION="readback")))
    # dm-nxd's destager also runs whenever the HDD is idle, so by the time
    # the job above reads, the log may already be empty (its counters say
    # where the reads went).  This one keeps the data in the log.
    mixed.append(dict(id="read-log", kind="fio", phase="read", fio="rand.fio", systems=["nxd"],
                      pause_destage=True,
                      state="filled as read-after-write-cache, with dm-nxd's destage paused "
                            "(pause_destage) from before the fill: every read is served by the log",
                      fill=dict(BS=4 * KiB, REGION="readback", FILL="region"),
                      var=dict(RW="randread", BS=4 * KiB, IODEPTH=8, MISALIGN=0, RWMIXREAD=100,
                               TIME_BASED=1, REGION="readback")))
    # Each block read once (fio's random map): a read cache (bcache,
    # dm-cache) promotes what it reads, and re-reads of a small region
    # would then be served by the SSD.
    mixed.append(dict(id="read-hdd", kind="fio", phase="read", fio="rand-once.fio",
                      state="clean: reads, each block at most once, of the second half of the "
                            "volume, never written through the cache (served by the HDDs)",
                      var=dict(RW="randread", BS=4 * KiB, IODEPTH=8, MISALIGN=0, RWMIXREAD=100,
                               TIME_BASED=1, REGION="coldhalf")))
    mixed.append(dict(id="mix70-4k", kind="fio", phase="burst", fio="rand.fio", state="clean",
                      var=dict(RW="randrw", BS=4 * KiB, IODEPTH=8, MISALIGN=0, RWMIXREAD=70,
                               TIME_BASED=1, REGION="all")))
    steady.append(dict(id="steady-4k", kind="steady", phase="steady",
                       state="clean, then random 4 KiB writes at QD 8 over a working set of "
                             "4x the SSD until past the settle window; then cold start "
                             "(stop, activate with the full cache) and drain (write back all)",
                       var=dict(RW="randwrite", BS=4 * KiB, IODEPTH=8, MISALIGN=0, RWMIXREAD=50,
                                TIME_BASED=1, REGION="steady"), trace=True))
    drain.append(dict(id="drain-4k", kind="drain", phase="drain", fio="rand.fio",
                      state="filled: random 4 KiB writes, each block once, over a region 8x the "
                            "SSD, totalling 60 % of the SSD; the job writes all back (md: the "
                            "same writes straight to the array)",
                      fill=dict(BS=4 * KiB, REGION="drain", FILL="drain"),
                      var=dict(RW="randwrite", BS=4 * KiB, IODEPTH=8, MISALIGN=0, RWMIXREAD=50,
                               TIME_BASED=1, REGION="drain"), trace=True))
    if smoke:
        return dict(smoke=[small[1], nytro[1], mixed[0], mixed[2], mixed[4], mixed[5], steady[0],
                           drain[0]])
    return dict(small=small, nytro=nytro, mixed=mixed, steady=steady, drain=drain)


def region(name, vol_bytes, ssd_bytes):
    """(offset, size) in bytes of a named region of the volume."""
    al = 1 * MiB
    if name == "all":
        return 0, vol_bytes // al * al - al
    if name == "readback":
        return 0, max(ssd_bytes // 8 // al * al, al)
    if name == "coldhalf":
        return vol_bytes // 2 // al * al, (vol_bytes // 2 - al) // al * al
    if name == "cold":      # the far end: never written by a clean job
        size = max(ssd_bytes // 8 // al * al, al)
        return (vol_bytes - 2 * size) // al * al, size
    if name == "steady":
        return 0, min(4 * ssd_bytes, vol_bytes // al * al - al)
    if name == "drain":
        return 0, min(8 * ssd_bytes, vol_bytes // al * al - al)
    raise ValueError(name)


def fio_env(target, var, vol_bytes, ssd_bytes, args, cache=True):
    """fio's environment for a job.  cache False (md, the raw SSD): no
    cache state to keep below a watermark, so a burst job runs its whole
    RUNTIME (after RAMP) instead of stopping at the budget, which a fast
    device spends in a fraction of a second: a steadier reference."""
    env = dict(os.environ)
    if var.get("BUDGET") and not cache:
        var = dict(var, BUDGET=0, TIME_BASED=1)
    reg = var.get("REGION", "all")
    off, size = region(reg, vol_bytes, ssd_bytes)
    mis = int(var.get("MISALIGN", 0))
    budget = args.burst_pct * ssd_bytes // 100 // 4096 * 4096
    env.update(TARGET=target, RUNTIME=str(args.runtime), RAMP=str(args.ramp), SIZE=str(size - mis),
               OFFSET=str(off + mis), IO_SIZE=str(budget if var.get("BUDGET") else size - mis))
    for k, v in var.items():
        if k not in ("REGION", "BUDGET", "MISALIGN"):
            env[k] = str(v)
    if var.get("TIME_BASED") == 0:
        env["RAMP"] = "0"  # a budgeted burst is measured from its first I/O
    return env


def parse_fio(data):
    """Per-group results of one fio JSON output."""
    groups = {}
    for job in data.get("jobs", []):
        g = groups.setdefault(job["groupid"], dict(name=job["jobname"], r_iops=0.0, w_iops=0.0,
                                                    r_bw=0, w_bw=0, lat=[], pct={}, ios=0))
        for d in ("read", "write"):
            s = job[d]
            if s.get("total_ios", 0) == 0 and s.get("io_bytes", 0) == 0:
                continue
            g[d[0] + "_iops"] += s["iops"]
            g[d[0] + "_bw"] += s["bw_bytes"]
            g["ios"] += s.get("total_ios", 0)
            g["lat"].append(s["clat_ns"]["mean"] / 1000.0 if "clat_ns" in s else 0)
            for p, v in s.get("clat_ns", {}).get("percentile", {}).items():
                k = "p%g" % float(p)
                g["pct"][k] = max(g["pct"].get(k, 0), v / 1000.0)
    out = []
    for gid, g in sorted(groups.items()):
        out.append(dict(group=g["name"], iops=round(g["r_iops"] + g["w_iops"], 1),
                        read_iops=round(g["r_iops"], 1), write_iops=round(g["w_iops"], 1),
                        mbps=round((g["r_bw"] + g["w_bw"]) / 1e6, 2), ios=g["ios"],
                        lat_us=round(max(g["lat"]) if g["lat"] else 0, 1),
                        p50_us=round(g["pct"].get("p50", 0), 1),
                        p99_us=round(g["pct"].get("p99", 0), 1),
                        p99_9_us=round(g["pct"].get("p99.9", 0), 1)))
    return out


def run_fio(fio, env, out, section=None, extra=(), limit=None):
    cmd = ["fio", "--output-format=json", "--output=" + out]
    if section:
        cmd.append("--section=" + section)
    cmd += list(extra) + [os.path.join(JOBS, fio)]
    limit = limit or int(env["RUNTIME"]) * 3 + int(env["RAMP"]) * 2 + 180
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=limit)
    if p.returncode != 0:
        raise RuntimeError("fio %s exit %d: %s" % (fio, p.returncode, p.stderr.strip()[-500:]))
    with open(out) as f:
        text = f.read()
    # fio may print warnings before the JSON document.
    return json.loads(text[text.index("{"):])


def do_fill(sysobj, fill, vol_bytes, ssd_bytes, args, outbase):
    """The not-measured preparation step of a job."""
    off, size = region(fill["REGION"], vol_bytes, ssd_bytes)
    if fill["FILL"] == "budget":
        amount = args.burst_pct * ssd_bytes // 100
    elif fill["FILL"] == "drain":
        amount = args.drain_fill_pct * ssd_bytes // 100
    else:
        amount = size
    env = dict(os.environ, TARGET=sysobj.dev, RUNTIME=str(args.fill_limit), RAMP="0",
               IODEPTH="8", BS=str(fill["BS"]), OFFSET=str(off), SIZE=str(size),
               FILL_SIZE=str(amount // 4096 * 4096))
    t0 = time.time()
    data = run_fio("fill.fio", env, outbase + ".fill.json", limit=args.fill_limit + 300)
    g = parse_fio(data)
    return dict(bytes=amount, seconds=round(time.time() - t0, 1),
                iops=g[0]["iops"] if g else 0, occupancy=sysobj.occupancy())


def delta(a, b):
    if not a or not b:
        return None
    return {k: b[k] - a[k] for k in a if b[k] != a[k]}


def steady_stats(tl, secs, window):
    """Steady IOPS over the last `window` of `secs` seconds from fio's IOPS
    log, one entry per second (the mean over that second).  fio logs
    nothing for a second in which no I/O completed, so the sum of the
    entries is divided by the window's length, not by their number (the
    mean of the logged seconds would hide stalls).  Also the change between
    the window's halves and the seconds with nothing completed."""
    w0 = secs - window
    mid = w0 + window / 2.0
    win = [(t, v) for t, v in tl if t > w0]
    a = [v for t, v in win if t <= mid]
    b = [v for t, v in win if t > mid]
    out = dict(steady_iops=round(sum(v for _, v in win) / float(window), 1) if window else None,
               stall_seconds=max(0, int(secs) - len(tl)),
               stall_seconds_window=max(0, int(window) - len(win)))
    ma, mb = sum(a) / (window / 2.0), sum(b) / (window / 2.0)
    out["settle_change_pct"] = round(100.0 * (mb - ma) / ma, 1) if ma else None
    return out


def iops_timeline(prefix):
    """fio's per-second IOPS log -> [[t_s, iops], ...]."""
    path = prefix + "_iops.1.log"
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            w = [x.strip() for x in line.split(",")]
            if len(w) >= 2 and w[0].isdigit():
                out.append([round(int(w[0]) / 1000.0, 1), int(w[1])])
    os.unlink(path)
    return out


def clean_limit(args):
    """Seconds a drain may take: BENCH_CLEAN_LIMIT, less if the chunk's
    time is running out (the drain is then recorded as not complete)."""
    if not args.deadline:
        return args.clean_limit
    return max(30, min(args.clean_limit, int(args.deadline + 300 - time.time())))


def run_job(sysobj, j, args, rec):
    """Run one job on a system that is up: fills rec."""
    name = sysobj.name
    outbase = os.path.join(args.out, "%s__%s" % (name, j["id"]))
    vol = sectors(sysobj.dev) * 512
    ssd = sectors(sysobj.ssd) * 512
    rec["occupancy_before"] = sysobj.occupancy()
    if j.get("pause_destage"):
        sysobj.message("pause_destage")
    if j.get("fill") and not (j["kind"] == "drain" and not sysobj.cache):
        rec["fill"] = do_fill(sysobj, j["fill"], vol, ssd, args, outbase)
        rec["occupancy_before"] = rec["fill"]["occupancy"]
    env = fio_env(sysobj.dev, j["var"], vol, ssd, args, sysobj.cache)
    c0 = sysobj.counters()
    meter = Meter()

    if j["kind"] == "fio" or (j["kind"] == "drain" and not sysobj.cache):
        # (md and ssd have nothing to drain: they get the same random 4 KiB
        # writes of the region, straight, for the drain rate to compare.)
        meter.start()
        tr = Blktrace(sysobj.md, member_drives()) if j.get("trace") and name != "ssd" else None
        if tr:
            with tr:
                data = run_fio(j["fio"], env, outbase + ".json", j.get("section"))
            rec["blktrace"] = tr.summary()
        else:
            data = run_fio(j["fio"], env, outbase + ".json", j.get("section"))
        rec["meter"] = meter.stop()
        rec["groups"] = parse_fio(data)
    elif j["kind"] == "steady":
        secs = args.steady_s if sysobj.cache else args.steady_nocache_s
        env.update(RUNTIME=str(secs), RAMP="0")
        occ = Occupancy(sysobj)
        occ.start()
        meter.start()
        data = run_fio("rand.fio", env, outbase + ".json", limit=secs + 600,
                       extra=["--write_iops_log=" + outbase, "--log_avg_msec=1000"])
        rec["meter"] = meter.stop()
        rec["occupancy_timeline"] = occ.stop()
        rec["groups"] = parse_fio(data)
        tl = iops_timeline(outbase)
        rec["iops_timeline"] = tl
        rec.update(steady_stats(tl, secs, args.steady_window_s))
        rec["occupancy_after"] = sysobj.occupancy()
        if sysobj.cache:
            # The cache writes back from the moment it is active again
            # (during udev's probe too), so the drain is timed from the
            # resume, and traced and metered from before the stop.
            c1 = sysobj.counters()
            m2 = Meter()
            m2.start()
            with Blktrace(sysobj.md, member_drives()) as tr:
                rec["cold"] = sysobj.restart()
                rec["occupancy_after_cold"] = sysobj.occupancy()
                log("%-10s cold start with a full cache: %s" % (name, rec["cold"]))
                rec["drain"] = sysobj.clean(clean_limit(args))
                rec["drain"]["from_resume_s"] = round(time.time() - rec["cold"]["resumed_at"], 1)
            rec["drain"]["meter"] = m2.stop()
            rec["drain"]["blktrace"] = tr.summary()
            # dm-nxd's counters restart with the table (gauges) but the
            # event counts are the volume's: a delta across the reload.
            rec["drain"]["counters"] = delta(c1, sysobj.counters())
            log("%-10s drain after steady state: %s s from the resume (%s s after udev)"
                % (name, rec["drain"]["from_resume_s"], rec["drain"]["seconds"]))
    elif j["kind"] == "drain":
        occ0 = sysobj.occupancy() or {}
        meter.start()
        with Blktrace(sysobj.md, member_drives()) as tr:
            rec["drain"] = sysobj.clean(clean_limit(args))
        rec["meter"] = meter.stop()
        rec["drain"]["blktrace"] = tr.summary()
        # Bytes written back: dm-nxd counts them; for the others, what
        # was dirty when the drain began (part of the fill may have been
        # written back during it).
        c = delta(c0, sysobj.counters()) or {}
        if "destaged_bytes" in c:
            nbytes = c["destaged_bytes"]
        else:
            nbytes = int((occ0.get("dirty_pct") or 0) / 100.0 * ssd)
        secs = rec["drain"]["seconds"]
        rec["drain"]["bytes"] = nbytes
        rec["drain"]["mbps"] = round(nbytes / secs / 1e6, 2) if secs else None
    rec["counters"] = delta(c0, sysobj.counters())
    if "occupancy_after" not in rec:
        rec["occupancy_after"] = sysobj.occupancy()


def brief(rec):
    if not rec.get("ok"):
        return "FAILED: " + rec.get("error", "")[:300]
    parts = ["%s %.0f IOPS %.1f MB/s p99 %.0f us" % (g["group"], g["iops"], g["mbps"], g["p99_us"])
             for g in rec.get("groups", [])]
    if "steady_iops" in rec:
        parts.append("steady %.0f IOPS (settle %s %%)" % (rec["steady_iops"], rec.get("settle_change_pct")))
    if "drain" in rec:
        parts.append("drain %s s" % rec["drain"].get("seconds"))
    m = rec.get("meter", {})
    parts.append("cpu %s%% (busiest %s%%) drives %s%%" % (m.get("cpu_busy_pct"), m.get("cpu_max_pct"),
                                                        m.get("drive_busy_pct_max")))
    return ", ".join(parts)


# ---------------------------------------------------------------------- run

def cmd_run(args):
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    jobs = chunks(args.smoke)[args.chunk]
    only = [x for x in os.environ.get("BENCH_JOBS", "").split(",") if x]
    if only:
        jobs = [j for j in jobs if any(j["id"].startswith(x) for x in only)]
    wanted = [s for s in args.systems.split(",") if s] if args.systems else SYSTEMS
    with open("/proc/cmdline") as f:
        cmdline = f.read().strip()
    with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
        clocksource = f.read().strip()
    summary = dict(started=datetime.datetime.utcnow().isoformat() + "Z", kernel=KVER,
                   cmdline=cmdline, clocksource=clocksource, chunk=args.chunk, smoke=args.smoke, runtime=args.runtime, ramp=args.ramp,
                   ssd_mb=SSD_MB, burst_pct=args.burst_pct, steady_s=args.steady_s,
                   steady_nocache_s=args.steady_nocache_s,
                   steady_window_s=args.steady_window_s, drain_fill_pct=args.drain_fill_pct,
                   hdd=dict(count=int(os.environ.get("HDD_COUNT", "6")),
                            size_mb=int(os.environ.get("HDD_SIZE_MB", "256")),
                            chunk_kb=int(os.environ.get("RAID_CHUNK_KB", "64")),
                            group_threads=os.environ.get("RAID_GROUP_THREADS", ""),
                            stripe_cache=os.environ.get("RAID_STRIPE_CACHE", "1024"),
                            hddsim_opts=os.environ.get("HDDSIM_OPTS", "")),
                   jobs=[dict(id=j["id"], phase=j["phase"], state=j["state"],
                              systems=j.get("systems")) for j in jobs],
                   systems={}, results=[])

    def save():
        summary["seconds"] = round(time.time() - t_start, 1)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)

    try:
        base_setup()
        log("modules loaded")
        # brd/null_blk allocate on first write, which costs minutes under
        # TCG: every page is written once first (not in the smoke run).
        prefill = os.environ.get("BENCH_PREFILL", "0" if args.smoke else "1") == "1"
        ssd = ssd_up(prefill)
        md = raid_up(prefill)
        summary["md"] = md
        summary["md_sectors"] = sectors(md)
        summary["md_detail"] = sh("mdadm --detail %s" % md, check=False)
        summary["md_settings"] = sh("cd /sys/block/%s/md && grep -H . stripe_cache_size "
                                    "group_thread_cnt" % os.path.basename(os.path.realpath(md)),
                                    check=False, quiet=True)
        log("array %s (%d MiB), SSD %s (%d MiB), chunk %s: %s" % (
            md, sectors(md) // 2048, ssd, SSD_MB, args.chunk, ", ".join(j["id"] for j in jobs)))
        for name in wanted:
            summary["systems"][name] = dict(desc=SYSTEM_CLASSES[name](md, ssd).desc, status="ran",
                                            note="")
        for j in jobs:
            for name in wanted:
                if j.get("systems") and name not in j["systems"]:
                    continue
                st = summary["systems"][name]
                sysobj = SYSTEM_CLASSES[name](md, ssd)
                rec = dict(system=name, id=j["id"], chunk=args.chunk, phase=j["phase"],
                           state=j["state"], nominal=j.get("nominal"),
                           bs=j.get("var", {}).get("BS"), iodepth=j.get("var", {}).get("IODEPTH"),
                           misalign=j.get("var", {}).get("MISALIGN"), ok=False)
                if args.deadline and time.time() > args.deadline:
                    # Past the chunk's time: say what was cut, then power
                    # off cleanly rather than be killed mid-job.
                    rec["error"] = "not run: the chunk reached its time limit (BENCH_TIMEOUT)"
                    st["status"] = "partial"
                    log("%-10s %-24s %s" % (name, j["id"], rec["error"]))
                    summary["results"].append(rec)
                    save()
                    continue
                t0 = time.time()
                try:
                    try:
                        sysobj.up()
                    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                        st["status"] = "setup-failed"
                        st["note"] = ("%s: %s" % (j["id"], e))[-800:]
                        raise
                    run_job(sysobj, j, args, rec)
                    rec["ok"] = True
                except Exception as e:  # noqa: BLE001
                    rec["error"] = str(e)[-800:]
                    traceback.print_exc()
                finally:
                    try:
                        sysobj.down()
                    except Exception as e:  # noqa: BLE001
                        rec["ok"] = False
                        rec["error"] = rec.get("error", "") + " teardown: %s" % e
                rec["seconds"] = round(time.time() - t0, 1)
                if not rec["ok"] and st["status"] == "ran":
                    st["status"] = "partial"
                log("%-10s %-24s %s" % (name, j["id"], brief(rec)))
                summary["results"].append(rec)
                save()
    finally:
        teardown_all()
        save()
    log("done in %.0f s; summary in %s" % (time.time() - t_start, os.path.join(args.out, "summary.json")))
    return 0


def teardown_all():
    """Leave nothing behind that would hang the guest's power-off."""
    for b in os.listdir("/sys/block"):
        if b.startswith("bcache"):
            sh("echo 1 > /sys/block/%s/bcache/stop" % b, check=False, quiet=True)
    if os.path.isdir("/sys/fs/bcache"):
        for c in os.listdir("/sys/fs/bcache"):
            if "-" in c:
                sh("echo 1 > /sys/fs/bcache/%s/stop" % c, check=False, quiet=True)
    for d in ("bench_nxd", "bench_wc", "bench_cache", "bench_cdata", "bench_cmeta", "cal_hdd"):
        if os.path.exists("/dev/mapper/" + d):
            sh("dmsetup remove --retry %s" % d, check=False, timeout=900)
    time.sleep(1)
    raid_down()
    sh("mdadm --stop --scan", check=False, quiet=True)


# ---------------------------------------------------------------- calibrate

CAL_JOBS = [
    ("randwrite 4k QD1", "randwrite", "4k", 1),
    ("randwrite 4k QD8", "randwrite", "4k", 8),
    ("randread 4k QD1", "randread", "4k", 1),
    ("randread 4k QD8", "randread", "4k", 8),
    ("seqwrite 1M QD1", "write", "1M", 1),
    ("seqwrite 1M QD4", "write", "1M", 4),
    ("seqread 1M QD4", "read", "1M", 4),
]


def cmd_calibrate(args):
    os.makedirs(args.out, exist_ok=True)
    base_setup()
    mb = int(os.environ.get("CAL_SIZE_MB", "256"))
    if "brd " not in modules_loaded():
        sh("modprobe brd rd_nr=1 rd_size=%d" % (mb * 1024))
    opts = os.environ.get("HDDSIM_OPTS", "")
    settle()
    # Touch every page first: brd allocates on first write, which under TCG
    # costs more than the emulated transfer.
    zero("/dev/ram0", mb)
    sh("dmsetup create cal_hdd --table '0 %d hddsim /dev/ram0 %s'" % (sectors("/dev/ram0"), opts))
    settle()
    table = sh("dmsetup table cal_hdd")
    log("drive: %s" % table)
    rows = []
    try:
        # Reference: the bare ramdisk.
        refs = [("ramdisk randwrite 4k QD1", "randwrite", "4k", 1, "/dev/ram0"),
                ("ramdisk seqwrite 1M QD4", "write", "1M", 4, "/dev/ram0")]
        for label, rw, bs, qd, dev in refs + \
                [(a, b, c, d, "/dev/mapper/cal_hdd") for a, b, c, d in CAL_JOBS]:
            out = os.path.join(args.out, "cal_%s.json" % re.sub(r"\W+", "_", label))
            st0 = sh("dmsetup status cal_hdd")
            sh("fio --name=cal --filename=%s --direct=1 --ioengine=libaio --rw=%s --bs=%s "
               "--iodepth=%d --runtime=%d --ramp_time=1 --time_based --randrepeat=1 "
               "--norandommap --output-format=json --output=%s" % (dev, rw, bs, qd, args.runtime, out),
               timeout=args.runtime * 4 + 120)
            st1 = sh("dmsetup status cal_hdd")
            with open(out) as f:
                d = json.load(f)["jobs"][0]
            s = d["write"] if "write" in rw else d["read"]
            row = dict(test=label, iops=round(s["iops"], 1), mbps=round(s["bw_bytes"] / 1e6, 1),
                       lat_us=round(s["clat_ns"]["mean"] / 1000.0, 0),
                       status_before=st0, status_after=st1)
            rows.append(row)
            log("%-26s %8.1f IOPS %8.1f MB/s  mean lat %8.0f us" % (label, row["iops"], row["mbps"], row["lat_us"]))
    finally:
        sh("dmsetup remove --retry cal_hdd", check=False)
    with open(os.path.join(args.out, "calibration.json"), "w") as f:
        json.dump(dict(kernel=KVER, table=table, runtime=args.runtime, size_mb=mb, rows=rows), f, indent=1)
    print()
    print("| test | IOPS | MB/s | mean latency (us) |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print("| %s | %.0f | %.1f | %.0f |" % (r["test"], r["iops"], r["mbps"], r["lat_us"]))
    return 0


# The array alone, to tell md's CPU cost from the drives' time: md over the
# hddsim drives and over "instant" hddsim drives (no seek, no rotation,
# 1 TB/s: only md, the guest and the memory copy set the pace), each with
# md's worker threads and stripe cache as given in ARRAY_SETTINGS.
INSTANT = "8 settle_us 0 seek_us 0 rot_us 0 rate_mbs 1000000"
ARRAY_JOBS = [
    ("1 MiB sequential write QD 4", "streaming.fio", {}),
    ("4 KiB random write QD 8", "rand.fio",
     dict(RW="randwrite", BS=4 * KiB, IODEPTH=8, RWMIXREAD=50, TIME_BASED=1)),
    ("64 KiB random write QD 8", "rand.fio",
     dict(RW="randwrite", BS=64 * KiB, IODEPTH=8, RWMIXREAD=50, TIME_BASED=1)),
]


def cmd_array(args):
    os.makedirs(args.out, exist_ok=True)
    base_setup()
    settings = [x.split(":") for x in os.environ.get("ARRAY_SETTINGS", "0:1024 1:1024 2:4096").split()]
    rows = []
    opts0 = os.environ.get("HDDSIM_OPTS", "")
    with open("/proc/cmdline") as f:
        cmdline = f.read().strip()
    try:
        for drives, opts in (("hddsim", opts0), ("instant", INSTANT)):
            env = dict(os.environ, HDDSIM_OPTS=opts, PREFILL="1")
            md = sh("%s up" % MKRAID, timeout=1200, env=env).splitlines()[-1]
            settle()
            mdsys = "/sys/block/%s/md" % os.path.basename(os.path.realpath(md))
            vol = sectors(md) * 512
            for gt, scs in settings:
                sh("echo %s > %s/group_thread_cnt" % (gt, mdsys))
                sh("echo %s > %s/stripe_cache_size" % (scs, mdsys))
                for label, fio, var in ARRAY_JOBS:
                    env = dict(os.environ, TARGET=md, RUNTIME=str(args.runtime), RAMP="1",
                               IODEPTH=str(var.get("IODEPTH", 4)), OFFSET="0",
                               SIZE=str(vol // MiB * MiB - MiB), IO_SIZE=str(vol // MiB * MiB - MiB))
                    env.update({k: str(v) for k, v in var.items()})
                    m = Meter()
                    m.start()
                    out = os.path.join(args.out, "array_%s_%s_%s_%s.json"
                                       % (drives, gt, scs, re.sub(r"\W+", "_", label)))
                    g = parse_fio(run_fio(fio, env, out))[-1]
                    row = dict(drives=drives, group_thread_cnt=int(gt), stripe_cache_size=int(scs),
                               test=label, iops=g["iops"], mbps=g["mbps"], p99_us=g["p99_us"],
                               **m.stop())
                    rows.append(row)
                    log("%-7s gt %s scs %-5s %-28s %8.1f IOPS %7.1f MB/s cpu %5.1f%% busiest %5.1f%% "
                        "drive max %s%%" % (drives, gt, scs, label, row["iops"], row["mbps"],
                                            row["cpu_busy_pct"], row["cpu_max_pct"],
                                            row["drive_busy_pct_max"]))
            raid_down()
    finally:
        raid_down()
    with open(os.path.join(args.out, "array.json"), "w") as f:
        json.dump(dict(kernel=KVER, cmdline=cmdline, runtime=args.runtime,
                       hdd=dict(count=int(os.environ.get("HDD_COUNT", "6")),
                                size_mb=int(os.environ.get("HDD_SIZE_MB", "128")),
                                chunk_kb=int(os.environ.get("RAID_CHUNK_KB", "64")),
                                hddsim_opts=opts0),
                       cpus=os.cpu_count(), rows=rows), f, indent=1)
    return 0


def env_int(name, default):
    return int(os.environ.get(name, default))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    smoke = os.environ.get("BENCH_SMOKE", "") not in ("", "0")
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--chunk", required=True)
    r.add_argument("--smoke", action="store_true", default=smoke)
    r.add_argument("--systems", default=os.environ.get("BENCH_SYSTEMS", ""),
                   help="comma separated subset of " + ",".join(SYSTEMS))
    c = sub.add_parser("calibrate")
    c.add_argument("--out", required=True)
    c.add_argument("--runtime", type=int, default=env_int("CAL_RUNTIME", 10))
    a = sub.add_parser("array", help="md alone over hddsim and instant drives, per md setting")
    a.add_argument("--out", required=True)
    a.add_argument("--runtime", type=int, default=env_int("CAL_RUNTIME", 15))
    sub.add_parser("chunks", help="print the chunk names of the full matrix")
    args = ap.parse_args()
    if args.cmd == "chunks":
        print(" ".join(chunks(False)))
        return 0
    if args.cmd == "calibrate":
        return cmd_calibrate(args)
    if args.cmd == "array":
        return cmd_array(args)
    sm = args.smoke
    args.runtime = env_int("BENCH_RUNTIME", 2 if sm else 10)
    args.ramp = env_int("BENCH_RAMP", 0 if sm else 2)
    args.burst_pct = env_int("BENCH_BURST_PCT", 20)
    args.drain_fill_pct = env_int("BENCH_DRAIN_FILL_PCT", 30 if sm else 60)
    args.steady_s = env_int("BENCH_STEADY_S", 8 if sm else 240)
    args.steady_nocache_s = env_int("BENCH_STEADY_NOCACHE_S", 4 if sm else 120)
    args.steady_window_s = env_int("BENCH_STEADY_WINDOW_S", 4 if sm else 120)
    args.fill_limit = env_int("BENCH_FILL_LIMIT", 60 if sm else 300)
    args.clean_limit = env_int("BENCH_CLEAN_LIMIT", 300 if sm else 900)
    # BENCH_DEADLINE_S (bench.sh: the boot's limit less a margin): no job
    # starts after that many seconds.
    dl = env_int("BENCH_DEADLINE_S", 0)
    args.deadline = T0 + dl if dl else 0
    if args.chunk not in chunks(sm):
        ap.error("chunk %s: not one of %s" % (args.chunk, " ".join(chunks(sm))))
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
