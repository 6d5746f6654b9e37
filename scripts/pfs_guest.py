#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Guest side of `make demo-pfs` and of the Gluster power cut
(scripts/demo-pfs.sh, scripts/pfs-powercut.sh); runs as root in the test
guest (scripts/vm-run.sh), on the stack of tests/vm/nxdt/gluster.py.

  pfs_guest.py demo OUTDIR
      Bricks over emulated HDD arrays (dm-hddsim drives over memory-backed
      null_blk, md RAID6), the same Gluster volumes and workload twice in
      one boot: bricks on the bare arrays, then on dm-nxd over fresh arrays
      of the same kind with a null_blk SSD each.  Prints time and
      throughput of both and their ratios, and ends with each brick's
      `nxdctl histogram --routes`.
  pfs_guest.py cut1 DIR SEED
      Boot 1 of the power cut: the stack on loop devices over image files
      in DIR (build/, kept across boots), glusterd's working directory on
      an ext4 image there too; a verified workload, then writers that
      record every fsync'd file in DIR/durable.log, and sysrq-b at a
      seeded moment.
  pfs_guest.py cut2 DIR SEED
      Boot 2: the arrays assembled, the nxd volumes recovered, the bricks'
      XFS and glusterd's ext4 mounted (log replay), glusterd started (it
      starts the bricks of the started volumes), both volumes mounted;
      every file of the verified workload and every fsync'd file of the
      writers checked, the dispersed volume healed, xfs_repair -n and
      e2fsck -fn clean, no kernel problem in dmesg.  Prints one line
      "pfs-powercut KVER seed N: PASS|FAIL ...".

Environment (demo): PFS_DEMO_SMALL (default 40 small files on the
distributed volume, half as many on the dispersed one), PFS_DEMO_BIG_MB (4),
PFS_DEMO_IOR_COUNT (4 transfers per job and size), HDD_SIZE_MB (170: XFS
needs 300 MB), HDDSIM_OPTS (dm-hddsim arguments, default its calibration).
"""
import json
import os
import random
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "vm"))
from nxdt import blkdev, ctl, dmlib, facts, fstack, gluster, host, twoboot
from nxdt.gluster import Brick, Files, Gluster, IorJob, fill_volume, phase, start_volumes
from nxdt.fstack import write_fsynced
from nxdt.host import run

NBRICKS, MEMBERS = 3, 4
DIST, DISP = "gdist", "gdisp"
KVER = os.uname().release


# ------------------------------------------------------------ workload ---

def workload(g, nsmall, big_mb, ior_count, seed0=1):
    """The mixed workload on both volumes; returns (files, iors, seconds,
    bytes written through the mounts)."""
    files, iors = {}, {}
    t = time.monotonic()
    nbytes = 0
    for seed, vol, n, nbig in ((seed0, DIST, nsmall, 2), (seed0 + 1, DISP, nsmall // 2, 1)):
        f, iors[vol] = fill_volume(g.mounts[vol], vol, seed, n, nbig, big_mb, ior_count)
        files[vol] = f
        nbytes += f.bytes + iors[vol].total_bytes()
    return files, iors, time.monotonic() - t, nbytes


def verify(g, files, iors, skip=()):
    for vol in (DIST, DISP):
        g.remount(vol)
    fstack.drop_caches()
    n = 0
    for vol in (DIST, DISP):
        n += files[vol].verify(g.mounts[vol], skip=("ior/",) + tuple(skip))
        iors[vol].verify()
    return n


# ---------------------------------------------------------------- demo ---

class DemoStack:
    """Bricks over dm-hddsim RAID6 arrays (fresh null_blk memory under
    them), with or without nxd."""

    def __init__(self, tag, nxd, hdd_mb, hddsim_opts):
        self.tag, self.nxd = tag, nxd
        self.hdd_mb, self.opts = hdd_mb, hddsim_opts
        self.nullbs, self.bricks = [], []
        self.dm = dmlib.DMSetup()

    def build(self):
        for i in range(NBRICKS):
            members = []
            for j in range(MEMBERS):
                base, folder = blkdev.nullb_create(self.hdd_mb, irqmode=0, queue_mode=2)
                self.nullbs.append(folder)
                name = f"pfshdd{i}{j}"
                sz = blkdev.dev_sectors(base)
                members.append(self.dm.create(name, f"0 {sz} hddsim {base} {self.opts}".rstrip()))
            ssd = None
            if self.nxd:
                ssd, folder = blkdev.nullb_create(64, discard=1, irqmode=0)
                self.nullbs.append(folder)
            b = Brick(i, members, ssd, nxd=self.nxd)
            self.bricks.append(b)
            b.create_md()
            b.create_volume()
            b.mkfs()
            b.mount()

    def teardown(self):
        for b in self.bricks:
            b.umount()
            b.remove_volume()
            b.stop_md()
        for err in self.dm.cleanup():      # reported, not raised: the demo's result stands
            print(f"teardown: {err}", file=sys.stderr)
        for folder in self.nullbs:
            blkdev.nullb_destroy(folder)


def demo(out):
    os.makedirs(out, exist_ok=True)
    gluster.prepare_guest()
    gluster.load_nxd()
    ko = os.path.join(host.BUILD, KVER, "hddsim", "dm-hddsim.ko")
    if "hddsim" not in dmlib.DMSetup().targets():
        run(["insmod", ko])
    # No udev re-probe of every device each time something closes it.
    os.makedirs("/run/udev/rules.d", exist_ok=True)
    with open("/run/udev/rules.d/90-nxd-pfs-nowatch.rules", "w") as f:
        f.write('ACTION=="add|change", SUBSYSTEM=="block", OPTIONS+="nowatch"\n')
    run(["udevadm", "control", "--reload"], check=False)
    nsmall = int(os.environ.get("PFS_DEMO_SMALL", "40"))
    big_mb = int(os.environ.get("PFS_DEMO_BIG_MB", "4"))
    ior_count = int(os.environ.get("PFS_DEMO_IOR_COUNT", "4"))
    hdd_mb = int(os.environ.get("HDD_SIZE_MB", "170"))
    opts = os.environ.get("HDDSIM_OPTS", "")
    results = {}
    hists = []
    for tag, nxd in (("bare arrays", False), ("dm-nxd", True)):
        phase(f"=== bricks on {tag}: {NBRICKS} x RAID6 of {MEMBERS} dm-hddsim drives "
              f"({hdd_mb} MiB, chunk 64K)" + (", 64 MiB null_blk SSD each" if nxd else ""))
        st = DemoStack(tag, nxd, hdd_mb, opts)
        g = None
        try:
            st.build()
            g = start_volumes(st.bricks, DIST, DISP,
                              workdir=f"{gluster.ROOT}/glusterd-{'nxd' if nxd else 'md'}")
            if nxd:
                for b in st.bricks:
                    b.stats(reset=True)
            files, iors, secs, nbytes = workload(g, nsmall, big_mb, ior_count)
            phase(f"{tag}: workload {secs:.1f} s, {nbytes / 1e6:.1f} MB, "
                  f"{nbytes / 1e6 / secs:.2f} MB/s")
            nfiles = verify(g, files, iors)
            phase(f"{tag}: {nfiles} files and the IOR files verified")
            results[tag] = (secs, nbytes)
            if nxd:
                for b in st.bricks:
                    n, nb, ns, nbs = gluster.ssd_share(b.stats())
                    hists.append(f"brick {b.i} ({b.name} over {b.md}): {n} writes, {ns} "
                                 f"({100 * ns / max(n, 1):.0f} %) to the SSD, "
                                 f"{100 * nbs / max(nb, 1):.0f} % of the bytes\n"
                                 + ctl.nxdctl("histogram", b.name, "--routes").stdout)
        finally:
            if g:
                g.stop()
            st.teardown()
    (s0, b0), (s1, b1) = results["bare arrays"], results["dm-nxd"]
    lines = [
        "",
        "GlusterFS workload (distributed + dispersed volume, 3 bricks), one boot:",
        f"{'bricks on':<14} | {'time s':>8} | {'MB written':>10} | {'MB/s':>7}",
        "-" * 50,
        f"{'bare arrays':<14} | {s0:8.1f} | {b0 / 1e6:10.1f} | {b0 / 1e6 / s0:7.2f}",
        f"{'dm-nxd':<14} | {s1:8.1f} | {b1 / 1e6:10.1f} | {b1 / 1e6 / s1:7.2f}",
        f"{'nxd / bare':<14} | {s1 / s0:8.2f} | {'':>10} | {(b1 / s1) / (b0 / s0):7.2f}",
        "",
        "nxdctl histogram --routes of each brick's nxd volume (the workload on dm-nxd):",
    ]
    text = "\n".join(lines) + "\n" + "\n".join(hists)
    print(text, flush=True)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"bare": {"s": s0, "bytes": b0}, "nxd": {"s": s1, "bytes": b1},
                   "kernel": KVER}, f)
    return 0


# ----------------------------------------------------------- power cut ---

MEMBER_MB, SSD_MB, STATE_MB = 170, 64, 64


class CutStack:
    """Bricks on loop devices over the image files in @d."""

    def __init__(self, d, create):
        self.d = d
        self.loops = []
        self.bricks = []
        imgs = []
        for i in range(NBRICKS):
            imgs.append(([f"{d}/m{i}{j}.img" for j in range(MEMBERS)], f"{d}/ssd{i}.img"))
        if create:
            for members, ssd in imgs:
                for m in members:
                    with open(m, "wb") as f:
                        f.truncate(MEMBER_MB * facts.MiB)
                with open(ssd, "wb") as f:
                    f.truncate(SSD_MB * facts.MiB)
            with open(f"{d}/state.img", "wb") as f:
                f.truncate(STATE_MB * facts.MiB)
        for i, (members, ssd) in enumerate(imgs):
            mdevs = [self._loop(m) for m in members]
            self.bricks.append(Brick(i, mdevs, self._loop(ssd)))
        self.state = self._loop(f"{d}/state.img")
        self.state_mnt = f"{gluster.ROOT}/state"

    def _loop(self, path):
        # As scripts/powercut.sh: the image sits on 9p without a cache, so
        # a completed write is on the host at the reset (a missing flush is
        # not caught here; docs/reliability.md, section 11).
        dev = run(["losetup", "--find", "--show", "--direct-io=off", path]).stdout.strip()
        self.loops.append(dev)
        return dev

    def mount_state(self):
        os.makedirs(self.state_mnt, exist_ok=True)
        run(["mount", "-t", "ext4", self.state, self.state_mnt])


class CutWriters:
    """Writers through both mounts; every completed fsync is recorded in
    @log (fsync'd) before the writer goes on.  small: a file written,
    fsync'd, its directory fsync'd ("f VOL REL SHA").  seq: 256 KiB
    appends to a file, fsync every 1 MiB ("s VOL REL LEN SHA")."""

    def __init__(self, g, log, seed):
        self.g, self.rng = g, random.Random(seed)
        self.log = open(log, "a")
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.errors = []
        self.n = 0
        self.threads = [threading.Thread(target=self._wrap, args=(fn, vol), daemon=True)
                        for fn, vol in ((self._small, DIST), (self._small, DISP),
                                        (self._seq, DIST))]

    def _record(self, line):
        with self.lock:
            self.log.write(line + "\n")
            self.log.flush()
            os.fsync(self.log.fileno())
            self.n += 1

    def _wrap(self, fn, vol):
        try:
            fn(vol)
        except Exception as e:  # noqa: BLE001 - reported by boot 1
            self.errors.append(repr(e))

    def _small(self, vol):
        root = self.g.mounts[vol]
        d = os.path.join(root, "cut")
        os.makedirs(d, exist_ok=True)
        i = 0
        while not self.stop_ev.is_set():
            rel = f"cut/f{i:05d}"
            data = os.urandom((512, 3000, 4096, 9000, 65536)[i % 5])
            digest = fstack.write_fsynced(os.path.join(root, rel), data)
            fstack.fsync_path(d)
            self._record(f"f {vol} {rel} {digest}")
            i += 1

    def _seq(self, vol):
        root = self.g.mounts[vol]
        d = os.path.join(root, "seq")
        os.makedirs(d, exist_ok=True)
        n = 0
        while not self.stop_ev.is_set():
            rel = f"seq/s{n:03d}"

            def durable(nbytes, digest, rel=rel):
                self._record(f"s {vol} {rel} {nbytes} {digest}")
            fstack.stream_checksummed(os.path.join(root, rel), 32, self.stop_ev,
                                      durable, d)
            n += 1

    def start(self):
        for t in self.threads:
            t.start()


def cut1(d, seed):
    r = random.Random(seed)
    delay = round(r.uniform(8, 25), 1)
    gluster.prepare_guest()
    gluster.load_nxd()
    st = CutStack(d, create=True)
    for b in st.bricks:
        b.create_md(bitmap=True)
        b.create_volume()
        b.mkfs()
        b.mount()
    run(["mkfs.ext4", "-q", "-F", st.state])
    st.mount_state()
    g = start_volumes(st.bricks, DIST, DISP, workdir=f"{st.state_mnt}/glusterd")
    files, iors, secs, nbytes = workload(g, 40, 4, 4, seed0=seed)
    verify(g, files, iors)
    for vol in (DIST, DISP):
        files[vol].save(f"{d}/manifest-{vol}.json")
    run(["sync"])
    twoboot.save_params(d, {"seed": seed, "delay": delay, "ior_count": 4})
    w = CutWriters(g, f"{d}/durable.log", seed)
    print(f"pfs-cut1: workload verified ({secs:.0f} s); writers on, sysrq-b in {delay} s",
          flush=True)
    write_fsynced(f"{d}/armed", f"{time.time()}\n", mode="w")
    w.start()
    subprocess.Popen(["sh", "-c", f"sleep {delay}; echo b > /proc/sysrq-trigger"])
    t0 = time.monotonic()
    while time.monotonic() - t0 < delay + 120:
        time.sleep(1)
        if w.errors:
            return twoboot.boot1_failed(d, "pfs-cut1", f"writer: {w.errors}")
        print(f"pfs-cut1: {w.n} durability points", flush=True)
    return twoboot.no_crash(d)


def cut2(d, seed):
    p = twoboot.load_params(d, seed)
    tag = f"pfs-powercut {KVER} seed {seed}"
    problems = []
    notes = []
    marker = host.kmsg_mark("pfs-powercut boot 2")
    gluster.prepare_guest()
    gluster.load_nxd()
    st = CutStack(d, create=False)
    g = None
    try:
        for b in st.bricks:
            b.assemble_md()
            k = host.kmsg_mark(f"assemble {b.name}")
            b.create_volume()
            rec = [ln for ln in host.dmesg_since(k) if "recovered" in ln]
            s = b.status()
            notes.append(f"{b.name}: {rec[-1].split('] ', 1)[-1] if rec else 'no recovery line'}")
            if s["state"] != "ok":
                problems.append(f"{b.name} state {s['state']} after recovery")
            b.mount()
        st.mount_state()
        g = Gluster(workdir=f"{st.state_mnt}/glusterd")
        g.start()
        g.volumes = [DIST, DISP]
        for vol in (DIST, DISP):
            g.wait_online(vol)
            g.mount(vol)
        fstack.drop_caches()
        # The workload verified before the writers started.
        for vol in (DIST, DISP):
            f = Files(g.mounts[vol], seed=0)
            with open(f"{d}/manifest-{vol}.json") as fh:
                f.sums = json.load(fh)["sums"]
            try:
                f.verify(g.mounts[vol], skip=("ior/", "cut/", "seq/"))
                IorJob(g.mounts[vol], f"{gluster.ROOT}/fio-{vol}", count=p["ior_count"]).verify()
            except AssertionError as e:
                problems.append(f"{vol} before the writers: {str(e)[:400]}")
        # Every fsync'd file of the writers.
        small, seq = {}, {}
        for line in open(f"{d}/durable.log").read().splitlines():
            w = line.split()
            if len(w) == 4 and w[0] == "f":
                small[(w[1], w[2])] = w[3]
            elif len(w) == 5 and w[0] == "s":
                seq[(w[1], w[2])] = (int(w[3]), w[4])
        bad = []
        for (vol, rel), want in small.items():
            path = os.path.join(g.mounts[vol], rel)
            got = fstack.sha_file(path) if os.path.exists(path) else None
            if got != want:
                bad.append((vol, rel, "missing" if got is None else "wrong"))
        for (vol, rel), (n, want) in seq.items():
            path = os.path.join(g.mounts[vol], rel)
            if not os.path.exists(path) or os.path.getsize(path) < n:
                bad.append((vol, rel, "short"))
                continue
            with open(path, "rb") as fh:
                if fstack.sha(fh.read(n)) != want:
                    bad.append((vol, rel, "prefix"))
        if bad:
            problems.append(f"{len(bad)} fsync'd files lost or wrong: {bad[:10]}")
        if not small:
            problems.append("no fsync'd file recorded before the cut")
        try:
            pending = g.heal(DISP)
            notes.append(f"heal {DISP}: {sum(pending.values())} entries pending")
        except AssertionError as e:
            # The whole heal info and glustershd.log go to the console log.
            print(f"pfs-powercut: {e}", file=sys.stderr, flush=True)
            problems.append(str(e)[:300])
        g.stop()
        g = None
        for b in st.bricks:
            b.umount()
            try:
                b.fsck()
            except AssertionError as e:
                problems.append(str(e)[:400])
            s = b.status()
            if s["state"] != "ok" or s["ssd_errors"] or s["hdd_errors"]:
                problems.append(f"{b.name} at the end: {s}")
        run(["umount", st.state_mnt])
        p2 = run(["e2fsck", "-fn", st.state], check=False)
        if p2.returncode:
            problems.append(f"e2fsck -fn of glusterd's ext4: exit {p2.returncode}")
    except Exception as e:  # noqa: BLE001 - reported as FAIL
        problems.append(f"{type(e).__name__}: {str(e)[:600]}")
    finally:
        if g:
            g.stop()
        for b in st.bricks:
            try:
                b.umount()
                b.remove_volume()
                b.stop_md()
            except Exception as e:  # noqa: BLE001
                problems.append(f"teardown {b.name}: {e}")
        for dev in st.loops:
            blkdev.loop_destroy(dev, None)
    kbad = host.find_kernel_problems(host.dmesg_since(marker))
    if kbad:
        problems.append("kernel problems: " + " | ".join(kbad[:5]))
    nsmall = len(small) if "small" in locals() else 0
    nseq = len(seq) if "seq" in locals() else 0
    summary = (f"{nsmall} small + {nseq} sequential fsync'd files checked; "
               + "; ".join(notes))
    if problems:
        print(f"{tag}: FAIL: {'; '.join(problems)} ({summary})", flush=True)
        return 1
    print(f"{tag}: PASS: {summary}", flush=True)
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "demo":
        sys.exit(demo(sys.argv[2]))
    elif cmd in ("cut1", "cut2"):
        sys.exit({"cut1": cut1, "cut2": cut2}[cmd](sys.argv[2], int(sys.argv[3])))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
