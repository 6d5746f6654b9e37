"""dm-nxd benchmark, guest side: the job matrix and how one job runs.
The chunks and their jobs, the volume's regions, fio's environment and
its JSON output, the fill step, and run_job (fio, steady state, drain)."""

import contextlib
import glob
import json
import os
import subprocess
import time

from bench_common import JOBS, KiB, MiB, log, sectors, stall_seconds
from bench_measure import Blktrace, CpuSampler, Meter, Occupancy, RouteTrace
from bench_systems import member_drives

# NytroXD transfer sizes -> nearest multiple of 512 (O_DIRECT).  160000 is
# exactly between 159744 and 160256; the lower one is used.
NYTRO = [(5000, 5120), (10000, 10240), (20000, 19968), (40000, 39936),
         (80000, 79872), (160000, 159744)]


TARGET_SMALL = ["randwrite-%dk-qd%d" % (k, q) for k in (4, 8, 16) for q in (8, 32)]

# Systems the small-write targets compare (issue 44): the jobs they use
# run BENCH_ROUNDS times on these, and the report takes the medians.
ROUND_SYSTEMS = ["ssd", "writecache", "nxd"]


def rounds_of(jobs, n, wanted):
    """@jobs in @n rounds, round-major so that a drift of the host spreads
    over every job: round 1 as given (every system), the later ones only
    the @wanted jobs on ROUND_SYSTEMS, each id with -r<round>."""
    if n <= 1:
        return jobs
    out = []
    for r in range(1, n + 1):
        for j in jobs:
            if r > 1 and not wanted(j):
                continue
            extra = dict(round=r, base=j["id"], trace=j.get("trace") and r == 1)
            if r > 1:
                extra["systems"] = ROUND_SYSTEMS
            out.append(dict(j, id="%s-r%d" % (j["id"], r), **extra))
    return out


def chunks(smoke, rounds=None):
    """{chunk: [job spec]}.  A job spec: id, kind (fio|steady|drain), phase,
    state (the stated starting state), fio file and variables, an optional
    not-measured fill step before it, trace (blktrace the members).  The
    small and nytro chunks run their target jobs in @rounds rounds
    (BENCH_ROUNDS, default 3; 1 in the smoke run)."""
    burst = "clean: set up from scratch, writes capped at the burst budget"
    if rounds is None:
        rounds = 1 if smoke else int(os.environ.get("BENCH_ROUNDS", "3"))

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
    # Sustained: the small writers outrun any log within the ramp, so what
    # they get is what the array absorbs beside the stream.
    mixed.append(dict(id="interference", kind="fio", phase="burst", fio="interference.fio",
                      state="clean; the small writers run the whole job",
                      var=dict(IODEPTH=8, TIME_BASED=1, SMALL_DELAY=0)))
    # Burst: the small writers together write the burst budget (a cache
    # holds it), from 1 s into the stream; the stream is also measured
    # over the small writers' time alone (latlog), which is when they meet.
    mixed.append(dict(id="interference-burst", kind="fio", phase="burst", fio="interference.fio",
                      state=burst + " (4 small writers, a quarter each, from 1 s on); the "
                            "streamer runs the whole job", latlog=True,
                      var=dict(IODEPTH=8, TIME_BASED=0, BUDGET=4, SMALL_DELAY=1)))
    mixed.append(dict(id="interference-solo", kind="fio", phase="burst", fio="interference.fio",
                      section="stream", state="clean: the 1 MiB writer of the interference job alone",
                      var=dict(IODEPTH=8, TIME_BASED=1, SMALL_DELAY=0)))
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
    # Routing (issue 46): seed 004's sizes and a phase change, on dm-nxd
    # with fixed thresholds and with mode adaptive (ROUTE_SYSTEMS).
    # dm-nxd's writes are traced (rtrace) for the offline oracle.
    routing = [dict(j, id="route-" + j["id"], rtrace=True) for j in nytro]
    routing.append(dict(id="route-phases", kind="fio", phase="burst", fio="phases.fio",
                        state="clean; small random writers, then a 1 MiB stream, then both, "
                              "each for the runtime", rtrace=True,
                        var=dict(IODEPTH=8, TIME_BASED=1)))
    if smoke:
        # Every kind of job for md and dm-nxd; each peer (and the bare SSD)
        # set up and through a burst job.  The peers' steady state and
        # drain are left to make bench: in make test they took half of the
        # smoke boot's 1,200 s of CPU, beside the test guests.
        def core(j):
            return dict(j, systems=j.get("systems") or ["md", "nxd"])
        return dict(smoke=[small[1], core(nytro[1]), core(mixed[0]), core(mixed[3]),
                           core(mixed[5]), mixed[6], core(steady[0]), core(drain[0])])
    # CPU per logged write (issue 44): the same number of 4 KiB writes on
    # every system (BUDGET_PCT of the SSD, also for the raw SSD and
    # dm-linear), dm-nxd's destage paused, and the guest's CPU counted only
    # from the first write's submission to the last one's completion
    # (cpu_window): fio's start and exit, and a destage after the job, are
    # not the write path's.  Three rounds, the systems interleaved.
    cpu = [dict(id="cpu-4k-qd8-r%d" % r, kind="fio", phase="burst", fio="rand.fio",
                state="clean; dm-nxd's destage paused; the same writes on every system",
                pause_destage=True, same_ios=True, cpu_window=True,
                var=dict(RW="randwrite", BS=4 * KiB, IODEPTH=8, MISALIGN=0, RWMIXREAD=50,
                         TIME_BASED=0, BUDGET=1, BUDGET_PCT=60))
           for r in (1, 2, 3)]
    target = lambda j: j["id"] in TARGET_SMALL or j["id"].startswith("nytro-")  # noqa: E731
    return dict(small=rounds_of(small, rounds, target), nytro=rounds_of(nytro, rounds, target),
                mixed=mixed, steady=steady, drain=drain, routing=routing, cpu=cpu)


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


def fio_env(target, var, vol_bytes, ssd_bytes, args, cache=True, same_ios=False):
    """fio's environment for a job.  cache False (md, the raw SSD): no
    cache state to keep below a watermark, so a burst job runs its whole
    RUNTIME (after RAMP) instead of stopping at the budget.
    same_ios (the job's, or the raw SSD's): the budget all the same, so
    that the caches are compared with it over the same writes."""
    env = dict(os.environ)
    if var.get("BUDGET") and not cache and not same_ios:
        var = dict(var, BUDGET=0, TIME_BASED=1)
    reg = var.get("REGION", "all")
    off, size = region(reg, vol_bytes, ssd_bytes)
    mis = int(var.get("MISALIGN", 0))
    # BUDGET n: n jobs share the burst budget.
    n = max(int(var.get("BUDGET") or 1), 1)
    al = 4096 if n == 1 else 65536
    budget = int(var.get("BUDGET_PCT", args.burst_pct)) * ssd_bytes // 100 // n // al * al
    env.update(TARGET=target, RUNTIME=str(args.runtime), RAMP=str(args.ramp), SIZE=str(size - mis),
               OFFSET=str(off + mis), IO_SIZE=str(budget if var.get("BUDGET") else size - mis))
    for k, v in var.items():
        if k not in ("REGION", "BUDGET", "BUDGET_PCT", "MISALIGN"):
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
    the window's halves and the seconds with nothing completed
    (bench_common.stall_seconds)."""
    w0 = secs - window
    mid = w0 + window / 2.0
    win = [(t, v) for t, v in tl if t > w0]
    a = [v for t, v in win if t <= mid]
    b = [v for t, v in win if t > mid]
    out = dict(steady_iops=round(sum(v for _, v in win) / float(window), 1) if window else None,
               steady_seconds=secs, stall_seconds=stall_seconds(tl, 0, secs),
               stall_seconds_window=stall_seconds(tl, w0, secs))
    ma, mb = sum(a) / (window / 2.0), sum(b) / (window / 2.0)
    out["settle_change_pct"] = round(100.0 * (mb - ma) / ma, 1) if ma else None
    return out


def lat_log_ios(prefix):
    """Every I/O of fio's per-I/O latency logs <prefix>_lat.<n>.log
    (completion time in Unix ms, latency in ns, direction, size) as
    (submission, completion, bytes), seconds; the logs are removed."""
    ios = []
    for path in sorted(glob.glob(prefix + "_*lat.*.log")):
        if os.path.basename(path).startswith(os.path.basename(prefix) + "_lat."):
            with open(path) as f:
                for line in f:
                    w = line.split(",")
                    if len(w) >= 4:
                        end = int(w[0]) / 1000.0
                        ios.append((end - int(w[1]) / 1e9, end, int(w[3])))
        os.unlink(path)
    return ios


def stream_window(rec, prefix):
    """The interference streamer's MB/s while the small writers ran (its
    group gets window_mbps and the window's seconds), from fio's per-I/O
    latency logs (lat_log_ios): the window runs from the first small
    write's submission to the last one's completion, and each 1 MiB write
    counts with the part of its time in flight that lies in the window."""
    small, stream = [], []
    for io in lat_log_ios(prefix):
        (stream if io[2] == MiB else small).append(io)
    g = next((g for g in rec["groups"] if g["group"] == "stream"), None)
    if not g or not small or not stream:
        return
    w0, w1 = min(io[0] for io in small), max(io[1] for io in small)
    if w1 <= w0:
        return
    nbytes = sum(n * (min(e, w1) - max(b, w0)) / (e - b)
                 for b, e, n in stream if e > b and e > w0 and b < w1)
    g["window_s"] = round(w1 - w0, 2)
    g["window_mbps"] = round(nbytes / (w1 - w0) / 1e6, 2)


def cpu_window(sampler, prefix):
    """Guest CPU over the I/O of a job (cpu_window): from the first
    write's submission to the last one's completion, as fio's per-I/O
    latency logs give them, out of the sampler's /proc/stat readings."""
    lat = lat_log_ios(prefix)
    if not lat:
        return None
    t0, t1, ios = min(io[0] for io in lat), max(io[1] for io in lat), len(lat)
    if t1 <= t0:
        return None
    busy_s, vcpus = sampler.busy_seconds(t0, t1)
    if busy_s is None:
        return None
    return dict(seconds=round(t1 - t0, 3), ios=ios, vcpus=vcpus, busy_cpu_s=round(busy_s, 4),
                us_per_io=round(busy_s * 1e6 / ios, 1),
                busy_pct=round(100.0 * busy_s / vcpus / (t1 - t0), 1))


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
    if j.get("pause_destage") and name.startswith("nxd"):
        sysobj.message("pause_destage")
    if j.get("fill") and not (j["kind"] == "drain" and not sysobj.cache):
        rec["fill"] = do_fill(sysobj, j["fill"], vol, ssd, args, outbase)
        rec["occupancy_before"] = rec["fill"]["occupancy"]
    fill_end = time.time()
    env = fio_env(sysobj.dev, j["var"], vol, ssd, args, sysobj.cache,
                  j.get("same_ios", False) or sysobj.same_ios)
    c0 = sysobj.counters()
    meter = Meter()

    if j["kind"] == "fio" or (j["kind"] == "drain" and not sysobj.cache):
        # (md and ssd have nothing to drain: they get the same random 4 KiB
        # writes of the region, straight, for the drain rate to compare.)
        meter.start()
        tr = Blktrace(sysobj.md, member_drives()) if j.get("trace") and name != "ssd" else None
        cs = CpuSampler() if j.get("cpu_window") else None
        rt = RouteTrace(outbase + ".rtrace.csv.gz") if j.get("rtrace") and name.startswith("nxd") \
            else None
        extra = ["--write_lat_log=" + outbase, "--log_avg_msec=0",
                 "--log_unix_epoch=1"] if j.get("latlog") or cs else []
        with contextlib.ExitStack() as stack:
            for t in (tr, rt, cs):
                if t:
                    stack.enter_context(t)
            data = run_fio(j["fio"], env, outbase + ".json", j.get("section"), extra)
        if tr:
            rec["blktrace"] = tr.summary()
        if rt:
            rec["rtrace"] = rt.summary()
        rec["meter"] = meter.stop()
        rec["groups"] = parse_fio(data)
        if j.get("latlog"):
            stream_window(rec, outbase)
        if cs:
            rec["cpu_window"] = cpu_window(cs, outbase)
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
            # Timed from the fill's last write: a cache may write back
            # before it is told to drain (dm-nxd's rounds at low_watermark
            # and once idle), and that is part of its drain.
            rec["drain"]["after_command_s"] = rec["drain"]["seconds"]
            rec["drain"]["seconds"] = round(time.time() - fill_end, 1)
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
