"""dm-nxd benchmark, guest side: measurement.  Guest CPU use
(/proc/stat), the hddsim drives' counters, blktrace summaries of the
array and its members, dm-nxd's routing trace, and a system's cache
occupancy over time."""

import glob
import gzip
import os
import re
import shutil
import signal
import subprocess
import threading
import time

from bench_common import sh, wait_for

TRACE_DIR = "/run/nxd-bench-trace"
TRACEFS = "/sys/kernel/tracing"
NXD_EVENT = "events/nxd/nxd_io_done/enable"


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


class CpuSampler:
    """/proc/stat's busy ticks of all CPUs, read every PERIOD
    seconds in a thread while in the block; busy_seconds(t0, t1) is the
    busy CPU time between two wall-clock instants, interpolated between
    readings (USER_HZ ticks, 10 ms; a window of a second or more)."""

    PERIOD = 0.02

    def __enter__(self):
        self.samples, self.stop_ev = [], threading.Event()
        self.vcpus = max(len(cpu_ticks()) - 1, 1)
        self.hz = os.sysconf("SC_CLK_TCK")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._sample()
        self.thread.start()
        return self

    def _sample(self):
        self.samples.append((time.time(), cpu_ticks()[0][0]))

    def _run(self):
        while not self.stop_ev.wait(self.PERIOD):
            self._sample()

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.thread.join()
        self._sample()
        return False

    def _busy_at(self, t):
        s = self.samples
        if t <= s[0][0]:
            return float(s[0][1])
        for (ta, ba), (tb, bb) in zip(s, s[1:]):
            if ta <= t <= tb:
                return ba + (bb - ba) * ((t - ta) / (tb - ta) if tb > ta else 1.0)
        return float(s[-1][1])

    def busy_seconds(self, t0, t1):
        """(busy CPU seconds of all vCPUs in [t0, t1], vCPUs), or (None, n)
        if the window is not inside the readings."""
        if len(self.samples) < 2 or t0 < self.samples[0][0] or t1 > self.samples[-1][0]:
            return None, self.vcpus
        return (self._busy_at(t1) - self._busy_at(t0)) / self.hz, self.vcpus


class RouteTrace:
    """dm-nxd's nxd_io_done trace event (dm-target/nxd_trace.h) while in
    the block: every completed write of the volume with its route and
    service time, saved as gzipped CSV for bench/route_oracle.py:
    t_us (submitted, trace clock), sector, bytes, route (ssd|hdd), align
    (4k|no), lat_us.  summary() says how many writes and how many events
    the ring buffer lost (then the trace is incomplete)."""

    LINE = re.compile(r"\s(\d+\.\d+): nxd_io_done: \S+ W sector=(\d+) bytes=(\d+) "
                      r"route=(\w+) align=(\w+) ns=(\d+)")

    def __init__(self, path, buf_kb=65536):
        self.path, self.buf_kb, self.error, self.res = path, buf_kb, "", None

    @staticmethod
    def _w(rel, v):
        with open(os.path.join(TRACEFS, rel), "w") as f:
            f.write(v)

    def __enter__(self):
        try:
            if not os.path.isdir(os.path.join(TRACEFS, "events")):
                sh("mount -t tracefs nodev %s" % TRACEFS)
            self._w("tracing_on", "0")
            self._w("trace", "")
            self._w("buffer_size_kb", str(self.buf_kb))
            self._w(NXD_EVENT, "1")
            self._w("tracing_on", "1")
        except Exception as e:  # noqa: BLE001 - recorded, the job goes on
            self.error = "trace: %s" % e
        return self

    def __exit__(self, *exc):
        if self.error:
            return False
        try:
            self._w("tracing_on", "0")
            lost = 0
            for st in glob.glob(os.path.join(TRACEFS, "per_cpu", "cpu*", "stats")):
                with open(st) as f:
                    lost += sum(int(ln.split()[1]) for ln in f if ln.startswith("overrun:"))
            n = 0
            with open(os.path.join(TRACEFS, "trace")) as f, gzip.open(self.path, "wt") as out:
                out.write("t_us,sector,bytes,route,align,lat_us\n")
                for ln in f:
                    m = self.LINE.search(ln)
                    if not m:
                        continue
                    lat = int(m.group(6)) / 1000.0
                    out.write("%.1f,%s,%s,%s,%s,%.1f\n" % (float(m.group(1)) * 1e6 - lat, m.group(2),
                                                           m.group(3), m.group(4), m.group(5), lat))
                    n += 1
            self.res = dict(file=os.path.basename(self.path), writes=n, lost=lost)
        except Exception as e:  # noqa: BLE001
            self.error = "trace: %s" % e
        finally:
            try:
                self._w(NXD_EVENT, "0")
                self._w("trace", "")
                self._w("buffer_size_kb", "1408")
            except OSError:
                pass
        return False

    def summary(self):
        return self.res or dict(error=self.error)


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
