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
  nxdfill     the same with destage_fill_min set to BENCH_NXD_FILL_MIN
              (default 2, as the module's own default since 2026-11-28:
              BENCH_NXD_FILL_MIN=0 makes it the no-fill system); not in
              the default matrix, name it in BENCH_SYSTEMS to compare fill
              and no fill in one boot
  nxdalt      the same with the module parameters of BENCH_NXDALT_PARAMS
              ("destage_pressure_ahead=Y ..."), for its jobs only; not in
              the default matrix
  nxd-pass, nxd-t16k, nxd-t256k, nxd-adaptive
              dm-nxd with mode passthrough, write_threshold 16 KiB or
              256 KiB, or mode adaptive: the routing chunk runs these, md,
              ssd and nxd (ROUTE_SYSTEMS), not the peers, and records
              dm-nxd's routing trace (bench/route_oracle.py)
  linear      dm-linear over the raw SSD: the cpu chunk runs it, the raw
              SSD and nxd (CPU_SYSTEMS), for the CPU per logged write

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
import sys
import time
import traceback

from bench_common import KVER, KiB, MiB, MKRAID, T0, log, modules_loaded, sectors, settle, sh, zero
from bench_jobs import brief, chunks, parse_fio, run_fio, run_job
from bench_measure import Meter
from bench_systems import (ROUTE_SYSTEMS, SSD_MB, SYSTEM_CLASSES, base_setup, raid_down, raid_up,
                           ssd_up, teardown_all)

SYSTEMS = ["md", "ssd", "bcache", "writecache", "dmcache", "nxd"]
# The CPU chunk: dm-nxd against one remap (dm-linear) on the same SSD.
CPU_SYSTEMS = ["ssd", "linear", "nxd"]


# ---------------------------------------------------------------------- run

def cmd_run(args):
    os.makedirs(args.out, exist_ok=True)
    t_start = time.time()
    jobs = chunks(args.smoke)[args.chunk]
    only = [x for x in os.environ.get("BENCH_JOBS", "").split(",") if x]
    if only:
        jobs = [j for j in jobs if any(j["id"].startswith(x) for x in only)]
    default = {"routing": ROUTE_SYSTEMS, "cpu": CPU_SYSTEMS}.get(args.chunk, SYSTEMS)
    wanted = [s for s in args.systems.split(",") if s] if args.systems else default
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
