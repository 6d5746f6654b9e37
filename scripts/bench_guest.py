#!/usr/bin/env python3
"""dm-nxd benchmark harness, guest side (python3 standard library only).

Runs INSIDE the benchmark guest as root, started by scripts/bench.sh
(`run`) or scripts/bench_calibrate.sh (`calibrate`):

  bench_guest.py calibrate --out DIR       one hddsim drive over brd
  bench_guest.py run --out DIR [--smoke]   the system x job matrix

`run` builds the emulated RAID6 (scripts/mkraid.sh) and a memory-backed SSD
(brd), then for each system sets it up, runs the fio jobs of fio-jobs/
against it, writes one fio JSON per run into DIR, and tears it down:

  md        the md RAID6 alone
  ssd       the raw SSD (ceiling)
  bcache    bcache writeback over the array, sequential_cutoff 64K
  writecache  dm-writecache over the array with the SSD
  dmcache   dm-cache writeback smq (metadata on an 8 MiB slice of the SSD)
  nxd       dm-nxd: nxd <array> <ssd>; skipped with a note when
            build/<kver>/dm-nxd.ko is missing or does not load

DIR/summary.json collects every result.  A system that fails to set up is
recorded with its error and the run goes on; everything is torn down at the
end so that the guest powers off.
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = os.path.join(REPO, "fio-jobs")
KVER = os.uname().release
HDDSIM_KO = os.path.join(REPO, "build", KVER, "hddsim", "dm-hddsim.ko")
NXD_KO = os.environ.get("NXD_KO", os.path.join(REPO, "build", KVER, "dm-nxd.ko"))
MKRAID = os.path.join(REPO, "scripts", "mkraid.sh")

# NytroXD transfer sizes -> nearest multiple of 512 (O_DIRECT).  160000 is
# exactly between 159744 and 160256; the lower one is used.
SIZES = [(5000, 5120), (10000, 10240), (20000, 19968), (40000, 39936),
         (80000, 79872), (160000, 159744)]
SYSTEMS = ["md", "ssd", "bcache", "writecache", "dmcache", "nxd"]

SSD_MB = int(os.environ.get("SSD_MB", "256"))
SSD = "/dev/ram0"
UDEV_RULE = "/etc/udev/rules.d/99-nxd-bench-nowatch.rules"


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
    for m in ("dm-writecache", "dm-cache", "dm-cache-smq", "raid456"):
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


# ------------------------------------------------------------------ systems

class System:
    name = "?"
    desc = ""

    def __init__(self, md, ssd):
        self.md, self.ssd = md, ssd
        self.note = ""

    def up(self):
        raise NotImplementedError

    def down(self):
        pass

    def state(self):
        return ""


class MdOnly(System):
    name, desc = "md", "md RAID6 of 6 emulated HDDs, no cache"

    def up(self):
        return self.md


class RawSsd(System):
    name, desc = "ssd", "the raw SSD (brd): ceiling"

    def up(self):
        return self.ssd


class Bcache(System):
    name, desc = "bcache", "bcache writeback, 512 B blocks, sequential_cutoff 64K, congestion thresholds off"

    def up(self):
        zero(self.ssd, 16)
        zero(self.md, 1)
        sh("make-bcache --wipe-bcache --writeback --block 512 -B %s -C %s" % (self.md, self.ssd))
        settle()
        for d in (self.ssd, self.md):  # udev usually did it already
            sh("echo %s > /sys/fs/bcache/register" % d, check=False, quiet=True)
        dev = None
        for _ in range(100):
            for b in sorted(os.listdir("/sys/block")):
                if b.startswith("bcache"):
                    dev = "/dev/" + b
            if dev and os.path.exists(dev):
                break
            time.sleep(0.2)
        if not dev:
            raise RuntimeError("no /dev/bcache* appeared")
        self.dev = dev
        sysd = "/sys/block/%s/bcache" % os.path.basename(dev)
        for _ in range(50):
            if os.path.exists(sysd + "/cache"):
                break
            time.sleep(0.2)
        # Registration may complete asynchronously (BCACHE_ASYNC_REGISTRATION).
        csets = []
        for i in range(150):
            csets = [c for c in os.listdir("/sys/fs/bcache") if "-" in c]
            if csets:
                break
            if i % 25 == 24:
                sh("echo %s > /sys/fs/bcache/register" % self.ssd, check=False)
            time.sleep(0.2)
        if not csets:
            raise RuntimeError("no bcache cache set registered (%s)"
                               % sh("dmesg | grep -i bcache | tail -3", check=False, quiet=True))
        # make-bcache -B -C does not always leave the backing device attached
        # (registration order under udev): attach it explicitly.
        if "no cache" in sh("cat %s/state" % sysd, check=False, quiet=True):
            sh("echo %s > %s/attach" % (csets[0], sysd), check=False)
        state = sh("cat %s/state" % sysd, check=False, quiet=True)
        if "no cache" in state:
            raise RuntimeError("bcache backing device not attached to the cache set (%s)" % state)
        sh("echo writeback > %s/cache_mode" % sysd)
        sh("echo 65536 > %s/sequential_cutoff" % sysd)
        for cset in os.listdir("/sys/fs/bcache"):
            p = "/sys/fs/bcache/" + cset
            if os.path.isdir(p) and "-" in cset:
                sh("echo 0 > %s/congested_read_threshold_us" % p, check=False)
                sh("echo 0 > %s/congested_write_threshold_us" % p, check=False)
        settle()
        return dev

    def state(self):
        d = "/sys/block/%s/bcache/" % os.path.basename(self.dev)
        return sh("cd %s && grep -H . state cache_mode dirty_data sequential_cutoff "
                  "stats_total/cache_hits stats_total/cache_misses stats_total/bypassed" % d,
                  check=False, quiet=True)

    def down(self):
        for b in os.listdir("/sys/block"):
            if b.startswith("bcache"):
                sh("echo 1 > /sys/block/%s/bcache/stop" % b, check=False)
        for cset in os.listdir("/sys/fs/bcache"):
            p = "/sys/fs/bcache/" + cset
            if os.path.isdir(p) and "-" in cset:
                sh("echo 1 > %s/stop" % p, check=False)
        for _ in range(150):
            busy = [b for b in os.listdir("/sys/block") if b.startswith("bcache")]
            csets = [c for c in os.listdir("/sys/fs/bcache") if "-" in c]
            if not busy and not csets:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("bcache did not stop")
        settle()
        zero(self.ssd, 16)
        zero(self.md, 1)


class WriteCache(System):
    name, desc = "writecache", "dm-writecache (ssd mode, 512 B blocks: the NytroXD sizes are not 4 KiB multiples) over the array"

    def up(self):
        zero(self.ssd, 16)
        sh("dmsetup create bench_wc --table '0 %d writecache s %s %s 512 0'"
           % (sectors(self.md), self.md, self.ssd))
        settle()
        return "/dev/mapper/bench_wc"

    def state(self):
        return sh("dmsetup status bench_wc", check=False, quiet=True)

    def down(self):
        sh("dmsetup remove --retry bench_wc", check=False, timeout=900)
        settle()


class DmCache(System):
    name, desc = "dmcache", "dm-cache writeback smq, 64 KiB blocks, 8 MiB metadata on the SSD"
    META_SECTORS = 8 * 2048

    def up(self):
        zero(self.ssd, 16)
        ssz = sectors(self.ssd)
        sh("dmsetup create bench_cmeta --table '0 %d linear %s 0'" % (self.META_SECTORS, self.ssd))
        sh("dmsetup create bench_cdata --table '0 %d linear %s %d'"
           % (ssz - self.META_SECTORS, self.ssd, self.META_SECTORS))
        settle()
        sh("dmsetup create bench_cache --table '0 %d cache /dev/mapper/bench_cmeta "
           "/dev/mapper/bench_cdata %s 128 1 writeback smq 0'" % (sectors(self.md), self.md))
        settle()
        return "/dev/mapper/bench_cache"

    def state(self):
        return sh("dmsetup status bench_cache", check=False, quiet=True)

    def down(self):
        for d in ("bench_cache", "bench_cdata", "bench_cmeta"):
            sh("dmsetup remove --retry %s" % d, check=False, timeout=900)
        settle()


class Nxd(System):
    name, desc = "nxd", "dm-nxd: nxd <array> <ssd> (format)"

    def up(self):
        if not os.path.exists(NXD_KO):
            raise SkipSystem("%s is not built (make the module first)" % NXD_KO)
        if "nxd" not in sh("dmsetup targets"):
            for m in ("libcrc32c", "crc32c"):
                sh("modprobe %s" % m, check=False, quiet=True)
            try:
                sh("insmod %s" % NXD_KO)
            except RuntimeError as e:
                raise SkipSystem("dm-nxd.ko does not load: %s" % e)
        zero(self.ssd, 16)
        # The volume is the array less nxd's 1 MiB label area.
        vol = (sectors(self.md) - 2048) // 8 * 8
        sh("dmsetup create bench_nxd --table '0 %d nxd %s %s 1 format'" % (vol, self.md, self.ssd))
        settle()
        return "/dev/mapper/bench_nxd"

    def state(self):
        return sh("dmsetup status bench_nxd", check=False, quiet=True)

    def down(self):
        sh("dmsetup remove --retry bench_nxd", check=False, timeout=900)
        settle()


class SkipSystem(Exception):
    pass


SYSTEM_CLASSES = {c.name: c for c in (MdOnly, RawSsd, Bcache, WriteCache, DmCache, Nxd)}


# --------------------------------------------------------------------- jobs

def job_matrix(smoke):
    """List of (job id, fio file, env overrides, description)."""
    jobs = []
    if smoke:
        # Reduced: one size, both alignments and all three patterns once.
        jobs.append(dict(job="randwrite", nominal=5000, bs=5120, misalign=0))
        jobs.append(dict(job="randrewrite", nominal=5000, bs=5120, misalign=512))
        jobs.append(dict(job="randread", nominal=5000, bs=5120, misalign=0))
        jobs.append(dict(job="interference"))
        jobs.append(dict(job="drain"))
    else:
        for nominal, bs in SIZES:
            for pat in ("randwrite", "randrewrite", "randread"):
                for mis in (0, 512):
                    jobs.append(dict(job=pat, nominal=nominal, bs=bs, misalign=mis))
        jobs.append(dict(job="interference"))
        jobs.append(dict(job="streaming"))
        jobs.append(dict(job="drain"))
    only = [x for x in os.environ.get("BENCH_JOBS", "").split(",") if x]
    if only:
        jobs = [j for j in jobs if any(job_id(j).startswith(x) for x in only)]
    return jobs


def job_id(j):
    if "bs" in j:
        return "%s-%d-%s" % (j["job"], j["nominal"], "unaligned" if j["misalign"] else "aligned")
    return j["job"]


def fio_env(target, j, args):
    env = dict(os.environ)
    env.update(TARGET=target, RUNTIME=str(args.runtime), RAMP=str(args.ramp),
               SIZE="100%", IODEPTH=str(args.iodepth), BS=str(j.get("bs", 4096)),
               MISALIGN=str(j.get("misalign", 0)), REWRITE_SIZE=args.rewrite_size,
               DRAIN_SIZE=args.drain_size)
    if j["job"] == "drain":
        env["RUNTIME"] = str(args.drain_runtime)
    return env


def parse_fio(data, j):
    """Per-group results of one fio JSON output."""
    groups = {}
    for job in data.get("jobs", []):
        g = groups.setdefault(job["groupid"], dict(name=job["jobname"], r_iops=0.0, w_iops=0.0,
                                                    r_bw=0, w_bw=0, lat=[], p99=[]))
        for d in ("read", "write"):
            s = job[d]
            if s.get("total_ios", 0) == 0 and s.get("io_bytes", 0) == 0:
                continue
            g[d[0] + "_iops"] += s["iops"]
            g[d[0] + "_bw"] += s["bw_bytes"]
            g["lat"].append(s["clat_ns"]["mean"] / 1000.0 if "clat_ns" in s else 0)
            pct = s.get("clat_ns", {}).get("percentile", {})
            if "99.000000" in pct:
                g["p99"].append(pct["99.000000"] / 1000.0)
    out = []
    for gid, g in sorted(groups.items()):
        if j["job"] == "randrewrite" and g["name"] == "firstpass":
            continue
        out.append(dict(group=g["name"], iops=round(g["r_iops"] + g["w_iops"], 1),
                        mbps=round((g["r_bw"] + g["w_bw"]) / 1e6, 2),
                        lat_us=round(max(g["lat"]) if g["lat"] else 0, 1),
                        p99_us=round(max(g["p99"]) if g["p99"] else 0, 1)))
    return out


def run_job(system, target, j, args):
    jid = job_id(j)
    out = os.path.join(args.out, "%s__%s.json" % (system, jid))
    env = fio_env(target, j, args)
    limit = int(env["RUNTIME"]) * 3 + args.ramp * 2 + 180
    cmd = ["fio", "--output-format=json", "--output=" + out, os.path.join(JOBS, j["job"] + ".fio")]
    t0 = time.time()
    rec = dict(system=system, id=jid, job=j["job"], nominal=j.get("nominal"), bs=j.get("bs"),
               misalign=j.get("misalign"))
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=limit)
        if p.returncode != 0:
            raise RuntimeError("fio exit %d: %s" % (p.returncode, p.stderr.strip()[-500:]))
        with open(out) as f:
            text = f.read()
        # fio may print warnings before the JSON document.
        data = json.loads(text[text.index("{"):])
        rec["groups"] = parse_fio(data, j)
        rec["ok"] = True
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        rec["ok"] = False
        rec["error"] = str(e)[-800:]
    rec["seconds"] = round(time.time() - t0, 1)
    brief = ", ".join("%s %.0f IOPS %.1f MB/s" % (g["group"], g["iops"], g["mbps"])
                      for g in rec.get("groups", []))
    log("%-10s %-32s %s" % (system, jid, brief if rec["ok"] else "FAILED: " + rec["error"][:300]))
    return rec


def time_drain(name):
    """Destage the whole log with the drain message: seconds and bytes
    (from destaged_bytes, counter 15 of the status line, docs/status.md)."""
    def destaged():
        f = sh("dmsetup status %s" % name, quiet=True).split()
        return int(f[4 + 14])              # start len nxd state, then counters
    b0, t0 = destaged(), time.time()
    sh("dmsetup message %s 0 drain" % name, timeout=1800)
    secs = time.time() - t0
    nbytes = destaged() - b0
    return dict(seconds=round(secs, 1), bytes=nbytes,
                mbps=round(nbytes / secs / 1e6, 2) if secs > 0 else 0)


# ---------------------------------------------------------------------- run

def cmd_run(args):
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    summary = dict(started=datetime.datetime.utcnow().isoformat() + "Z", kernel=KVER,
                   smoke=args.smoke, runtime=args.runtime, ramp=args.ramp,
                   iodepth=args.iodepth, ssd_mb=SSD_MB,
                   hdd=dict(count=int(os.environ.get("HDD_COUNT", "6")),
                            size_mb=int(os.environ.get("HDD_SIZE_MB", "128")),
                            chunk_kb=int(os.environ.get("RAID_CHUNK_KB", "64")),
                            hddsim_opts=os.environ.get("HDDSIM_OPTS", "")),
                   systems={}, results=[])
    wanted = [s for s in args.systems.split(",") if s] if args.systems else SYSTEMS
    jobs = job_matrix(args.smoke)
    md = None

    def save():
        summary["seconds"] = round(time.time() - t_start, 1)
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)

    try:
        base_setup()
        log("modules loaded")
        # Writing every backing page once (brd/null_blk allocate on first
        # write) costs minutes under a loaded TCG host: full runs only.
        prefill = os.environ.get("BENCH_PREFILL", "0" if args.smoke else "1") == "1"
        ssd = ssd_up(prefill)
        md = raid_up(prefill)
        summary["md"] = md
        summary["md_sectors"] = sectors(md)
        summary["md_detail"] = sh("mdadm --detail %s" % md, check=False)
        log("array %s (%d MiB), SSD %s (%d MiB)" % (md, sectors(md) // 2048, ssd, SSD_MB))
        for name in wanted:
            cls = SYSTEM_CLASSES[name]
            st = dict(desc=cls.desc, status="ran", note="")
            summary["systems"][name] = st
            sysobj = cls(md, ssd)
            t0 = time.time()
            try:
                target = sysobj.up()
                st["target"] = target
                log("== %s: %s on %s" % (name, cls.desc, target))
            except SkipSystem as e:
                st.update(status="skipped", note=str(e))
                log("== %s SKIPPED: %s" % (name, e))
                save()
                continue
            except Exception as e:  # noqa: BLE001
                st.update(status="setup-failed", note=str(e)[-800:])
                log("== %s SETUP FAILED: %s" % (name, e))
                traceback.print_exc()
                try:
                    sysobj.down()
                except Exception:  # noqa: BLE001
                    pass
                save()
                continue
            try:
                for j in jobs:
                    rec = run_job(name, target, j, args)
                    if name == "nxd" and j["job"] == "drain" and rec["ok"]:
                        rec["destage"] = time_drain("bench_nxd")
                        log("nxd        destage of the drain job's log: %s" % rec["destage"])
                    summary["results"].append(rec)
                    save()
                st["state_after"] = sysobj.state()
                # Per-drive counters (cumulative over the run): bios batches seeks busy_us
                st["hddsim_after"] = sh("dmsetup status | grep '^nxdhdd'", check=False, quiet=True)
            finally:
                try:
                    sysobj.down()
                except Exception as e:  # noqa: BLE001
                    st["note"] += " teardown: %s" % e
                    log("teardown of %s failed: %s" % (name, e))
            failed = [r["id"] for r in summary["results"] if r["system"] == name and not r["ok"]]
            if failed:
                st["status"] = "partial"
                st["note"] += " failed jobs: " + ", ".join(failed)
            st["seconds"] = round(time.time() - t0, 1)
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    smoke = os.environ.get("BENCH_SMOKE", "") not in ("", "0")
    r = sub.add_parser("run")
    r.add_argument("--out", required=True)
    r.add_argument("--smoke", action="store_true", default=smoke)
    r.add_argument("--systems", default=os.environ.get("BENCH_SYSTEMS", ""),
                   help="comma separated subset of " + ",".join(SYSTEMS))
    r.add_argument("--runtime", type=int, default=int(os.environ.get("BENCH_RUNTIME", "0")))
    r.add_argument("--ramp", type=int, default=int(os.environ.get("BENCH_RAMP", "-1")))
    r.add_argument("--iodepth", type=int, default=int(os.environ.get("BENCH_IODEPTH", "8")))
    r.add_argument("--rewrite-size", default=os.environ.get("BENCH_REWRITE_SIZE", "16M"))
    r.add_argument("--drain-size", default=os.environ.get("BENCH_DRAIN_SIZE", ""))
    r.add_argument("--drain-runtime", type=int, default=0)
    c = sub.add_parser("calibrate")
    c.add_argument("--out", required=True)
    c.add_argument("--runtime", type=int, default=int(os.environ.get("CAL_RUNTIME", "10")))
    args = ap.parse_args()
    if args.cmd == "calibrate":
        return cmd_calibrate(args)
    if args.runtime <= 0:
        args.runtime = 3 if args.smoke else 10
    if args.ramp < 0:
        args.ramp = 0 if args.smoke else 2
    if not args.drain_size:
        args.drain_size = "16M" if args.smoke else "128M"
    if not args.drain_runtime:
        args.drain_runtime = args.runtime if args.smoke else args.runtime * 3
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
