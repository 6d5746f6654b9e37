# SPDX-License-Identifier: GPL-2.0
"""Parallel-file-system stacks for test_pfs.py: GlusterFS bricks on dm-nxd
volumes (Stack), writers in processes of their own (Writer), a brick
whose devices take power cuts (PcutStack), the mke2fs arguments of a
Lustre OST."""
import multiprocessing
import os
import re
import time

from nxdt import blkdev, dmlib, fstack, gluster, host, pcut
from nxdt.gluster import Brick, phase, start_volumes
from nxdt.host import run


NBRICKS = 3
MEMBERS, MEMBER_MB, SSD_MB = 4, 170, 64
DIST, DISP = "gdist", "gdisp"
PC_DIST, PC_DISP = "pcdist", "pcdisp"
PC_MEMBER_MB, PC_SSD_MB = 170, 64


class Stack:
    def __init__(self):
        self.loops = []
        self.nullbs = []
        self.bricks = []
        self.gluster = None
        self.files = {}
        self.ior = {}

    def build(self):
        gluster.prepare_guest()
        phase(f"{NBRICKS} bricks: RAID6 of {MEMBERS} x {MEMBER_MB} MiB loop members, "
              f"{SSD_MB} MiB null_blk SSD, nxd, XFS")
        for i in range(NBRICKS):
            members = []
            for _ in range(MEMBERS):
                dev, path = blkdev.loop_create(MEMBER_MB)
                self.loops.append((dev, path))
                members.append(dev)
            ssd, folder = blkdev.nullb_create(SSD_MB, discard=1, irqmode=0)
            self.nullbs.append(folder)
            b = Brick(i, members, ssd)
            self.bricks.append(b)
            b.create_md()
            b.create_volume()
            md_hints = (attr(b.md, "minimum_io_size"), attr(b.md, "optimal_io_size"))
            assert b.hints() == md_hints == (65536, 131072), (b.hints(), md_hints)
            b.mkfs()
            b.mount()
        phase("glusterd, volumes, FUSE mounts")
        self.gluster = start_volumes(self.bricks, DIST, DISP)
        return self

    def mnt(self, vol):
        return self.gluster.mounts[vol]

    def verify_all(self, cold=True):
        if cold:
            for vol in (DIST, DISP):
                self.gluster.remount(vol)
            fstack.drop_caches()
        for vol in (DIST, DISP):
            self.files[vol].verify(self.mnt(vol), skip=("ior/",))
            self.ior[vol].verify()

    def teardown(self):
        attempt = Attempts()
        teardown_bricks(attempt, self.gluster, self.bricks)
        for folder in self.nullbs:
            attempt(blkdev.nullb_destroy, folder)
        for dev, path in reversed(self.loops):
            attempt(blkdev.loop_destroy, dev, path)
        return list(attempt)


class Attempts(list):
    """Call each teardown step whatever the others did; keep the errors."""

    def __call__(self, fn, *a):
        try:
            fn(*a)
        except Exception as e:  # noqa: BLE001 - tear everything down
            self.append(f"{getattr(fn, '__name__', fn)}: {e}")


def teardown_bricks(attempt, gluster, bricks, *log_name):
    """GlusterFS first (its logs kept), then each brick's stack."""
    if gluster:
        attempt(gluster.save_logs, *log_name)
        attempt(gluster.stop)
    for b in bricks:
        attempt(b.umount)
        attempt(b.remove_volume)
        attempt(b.stop_md)


def attr(dev, name):
    with open(f"/sys/block/{blkdev.blk_name(dev)}/queue/{name}") as f:
        return int(f.read())


def writer_main(root, into, log, stop_ev):
    """Body of a Writer process: fsync'd files through the mount, each
    recorded in @log (a local file) once its fsync returned."""
    with open(log, "a") as lf:
        try:
            d = os.path.join(root, into)
            os.makedirs(d, exist_ok=True)
            n = 0
            while not stop_ev.is_set():
                rel = os.path.join(into, f"w{n:05d}")
                data = os.urandom((4096, 5000, 12000, 65536)[n % 4])
                digest = fstack.write_fsynced(os.path.join(root, rel), data)
                lf.write(f"{rel} {digest}\n")
                lf.flush()
                n += 1
            fstack.fsync_path(d)
        except Exception as e:  # noqa: BLE001 - checked by the test
            lf.write(f"ERR {e!r}\n")


class Writer:
    """Creates fsync'd files through a mount in the background until
    stopped; what it wrote joins @files' manifest.  A separate process, not
    a thread: a process that holds files of a FUSE mount open and forks
    (every subprocess call) has the child close them, and closing a FUSE
    file waits for Gluster, which waits for the brick; with the brick's
    XFS frozen that child never gets to exec fsfreeze -u (seen)."""

    def __init__(self, files, into):
        self.files, self.into = files, into
        self.log = f"{gluster.ROOT}/writer-{into}-{os.path.basename(files.root)}.log"
        if os.path.exists(self.log):
            os.unlink(self.log)
        self.stop_ev = multiprocessing.Event()
        self.p = multiprocessing.Process(
            target=writer_main, args=(files.root, into, self.log, self.stop_ev), daemon=True)

    def _lines(self):
        try:
            with open(self.log) as f:
                return [ln.split() for ln in f.read().splitlines() if ln]
        except FileNotFoundError:
            return []

    @property
    def n(self):
        return sum(1 for w in self._lines() if w[0] != "ERR")

    @property
    def errors(self):
        return [" ".join(w[1:]) for w in self._lines() if w[0] == "ERR"]

    def wait(self, k):
        """Until @k more files are written (or the writer failed)."""
        n0 = self.n
        while self.n < n0 + k and not self.errors and self.p.is_alive():
            time.sleep(0.5)

    def __enter__(self):
        self.p.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.p.join(timeout=600)
        assert not self.p.is_alive(), "writer never stopped"
        for w in self._lines():
            if w[0] != "ERR":
                self.files.sums[w[0]] = w[1]


def histograms(st):
    out = []
    for b in st.bricks:
        out.append(f"--- brick {b.i} ({b.name} over {b.md}): nxdctl histogram --routes")
        out.append(gluster.nxdctl("histogram", b.name, "--routes"))
    return "\n".join(out)


def pc_writer_main(root, into, log, kind, stop_ev):
    """Body of a writer process of the dm-pcut test.  small: a file
    written, fsync'd, its directory fsync'd, then recorded ("f REL SHA");
    seq: 256 KiB appends, fsync every 1 MiB, recorded ("s REL LEN SHA").
    A record is written (and flushed to the local log) only after the
    fsync returned; the first error (the cut) ends the writer."""
    with open(log, "a") as lf:
        try:
            d = os.path.join(root, into)
            os.makedirs(d, exist_ok=True)
            fstack.fsync_path(root)
            n = 0
            while not stop_ev.is_set():
                if kind == "small":
                    rel = os.path.join(into, f"f{n:05d}")
                    data = os.urandom((512, 3000, 4096, 9000, 65536)[n % 5])
                    digest = fstack.write_fsynced(os.path.join(root, rel), data)
                    fstack.fsync_path(d)
                    lf.write(f"f {rel} {digest}\n")
                    lf.flush()
                else:
                    rel = os.path.join(into, f"s{n:03d}")

                    def durable(nbytes, digest, rel=rel):
                        lf.write(f"s {rel} {nbytes} {digest}\n")
                        lf.flush()
                    fstack.stream_checksummed(os.path.join(root, rel), 32, stop_ev,
                                              durable, d)
                n += 1
        except Exception as e:  # noqa: BLE001 - expected at the cut
            lf.write(f"ERR {e!r}\n")


class PcutStack:
    """Three bricks whose every device is a dm-pcut device (one cut group):
    four 170 MiB null_blk members of the md RAID6 (internal bitmap) and a
    64 MiB null_blk SSD each; nxd, XFS, one glusterd (its working directory
    in the guest's /tmp, which the cut does not touch: the cut is of the
    bricks' disks, not of the server) and a distributed and a dispersed
    volume."""

    def __init__(self, seed):
        self.seed = seed
        self.dm = dmlib.DMSetup()
        self.nullbs = []
        self.pcuts = []
        self.bricks = []
        self.gluster = None
        self.group = f"gpfs{seed}"

    def _pcut(self, name, mb):
        dev, folder = blkdev.nullb_create(mb, discard=1, irqmode=0)
        self.nullbs.append(folder)
        p = pcut.Pcut(self.dm, name, dev, self.group, self.seed * 100 + len(self.pcuts))
        self.pcuts.append(p)
        return p.path

    def build(self):
        gluster.prepare_guest()
        pcut.load_module()
        phase(f"dm-pcut stack: {NBRICKS} bricks, RAID6 of {MEMBERS} x {PC_MEMBER_MB} MiB "
              f"and a {PC_SSD_MB} MiB SSD, every device behind dm-pcut (group {self.group})")
        for i in range(NBRICKS):
            members = [self._pcut(f"pfspc{i}m{j}", PC_MEMBER_MB) for j in range(MEMBERS)]
            ssd = self._pcut(f"pfspc{i}s", PC_SSD_MB)
            b = Brick(i, members, ssd)
            b.name, b.mnt = f"pfspc{i}", f"{gluster.ROOT}/pc{i}"
            self.bricks.append(b)
            b.create_md(bitmap=True)
            b.create_volume()
            b.mkfs()
            b.mount()
        self.gluster = start_volumes(self.bricks, PC_DIST, PC_DISP,
                                     workdir=f"{gluster.ROOT}/glusterd-pcut")

    def start_gluster(self):
        """glusterd again on its working directory: it starts the bricks of
        the started volumes; both volumes mounted again."""
        g = self.gluster
        g.start()
        g.volumes = [PC_DIST, PC_DISP]
        for vol in (PC_DIST, PC_DISP):
            g.wait_online(vol)
            g.mount(vol)

    def after_cut_down(self):
        """What the cut leaves: clients and servers gone (SIGKILL), the
        bricks' XFS unmounted, nxd removed, the arrays stopped."""
        g = self.gluster
        phase("after the cut: clients unmounted, Gluster killed")
        for vol in list(g.mounts):
            run(["umount", "-l", g.mounts.pop(vol)], check=False)
        g.kill_all()
        for name in ("glusterfs", "glusterfsd", "glusterd"):
            host.wait_for(lambda: not run(["pgrep", "-x", "-r", "RSDT", name],
                                           check=False).stdout.strip(),
                           timeout=120, interval=0.5, what=f"{name} to exit")
        # As a reboot would: no pid file of the killed processes is left.
        for d, _dirs, names in os.walk("/run/gluster"):
            for nm in names:
                if nm.endswith(".pid"):
                    os.unlink(os.path.join(d, nm))
        for b in self.bricks:
            phase(f"after the cut: umount {b.mnt}")
            b.umount()
            phase(f"after the cut: remove {b.name}, stop {b.md}")
            b.remove_volume()
            b.stop_md()

    def power_on(self):
        for p in self.pcuts:
            p.power_on()

    def recover(self):
        """Arrays assembled, nxd volumes created over the old logs
        (recovery), XFS mounted (log replay).  Returns the recovery lines."""
        notes = []
        for b in self.bricks:
            dev = f"/dev/md{blkdev.md_free_minor()}"
            p = run(["mdadm", "--assemble", dev, "--run", *b.members], check=False)
            if p.returncode:
                # Members whose superblock writes the cut left apart by an
                # event: mdadm's documented recovery after a power loss.
                notes.append(f"{dev}: assembled with --force ({p.stderr.strip()[-200:]})")
                run(["mdadm", "--stop", dev], check=False)
                run(["mdadm", "--assemble", dev, "--run", "--force", *b.members])
            b.md = dev
            host.wait_for(lambda: os.path.exists(dev), what=dev)
            k = host.kmsg_mark(f"recover {b.name}")
            b.create_volume()
            rec = [ln.split("] ", 1)[-1] for ln in host.dmesg_since(k) if "recovered" in ln]
            notes.append(f"{b.name}: {rec[-1] if rec else 'no recovery line'}")
            b.mount()
        return notes

    def teardown(self):
        attempt = Attempts()
        teardown_bricks(attempt, self.gluster, self.bricks, "pfs-pcut")
        for p in self.pcuts:
            if self.dm.exists(p.name):
                attempt(p.remove)
        for folder in self.nullbs:
            attempt(blkdev.nullb_destroy, folder)
        return list(attempt)


def pc_durable(log):
    small, seq, errs = {}, {}, []
    with open(log) as f:
        for line in f.read().splitlines():
            w = line.split()
            if len(w) == 3 and w[0] == "f":
                small[w[1]] = w[2]
            elif len(w) == 4 and w[0] == "s":
                seq[w[1]] = (int(w[2]), w[3])
            elif w and w[0] == "ERR":
                errs.append(" ".join(w[1:]))
    return small, seq, errs


def ost_mke2fs_args(dev, fsname="lfs01", index=0, failover=True):
    """The mke2fs command line mkfs.lustre --ost --backfstype=ldiskfs
    composes (lustre/utils/libmount_utils_ldiskfs.c) for @dev, with the
    stripe options derived from the volume's exported geometry as
    docs/admin-guide.md derives them: stride = minimum_io_size / 4096,
    stripe_width = optimal_io_size / 4096.  Journal: 4 % of the device, at
    most 400 MB (only above 1 GiB); 512-byte inodes; bytes per inode by
    size; mmp when a failover node is given."""
    blk = blkdev.blk_name(dev)
    stride = attr(dev, "minimum_io_size") // 4096
    width = attr(dev, "optimal_io_size") // 4096
    kb = blkdev.dev_size_bytes(dev) // 1024
    args = ["mke2fs", "-j", "-b", "4096", "-L", f"{fsname}-OST{index:04x}"]
    if kb > 1024 * 1024:
        args += ["-J", f"size={min(kb * 4 // (1024 * 100), 400)}"]
    args += ["-I", "512"]
    for lim, ratio in ((16 << 30, 1 << 20), (4 << 30, 512 << 10), (1 << 30, 256 << 10),
                       (10 << 20, 69905)):
        if kb > lim:
            args += ["-i", str(ratio)]
            break
    feats = "extents,uninit_bg" + (",mmp" if failover else "") + \
        ",dir_nlink,quota,huge_file,flex_bg"
    args += ["-q", "-O", feats, "-G", "256",
             "-E", f"stride={stride},stripe_width={width},resize=4290772992,lazy_journal_init",
             "-F", dev]
    return args, stride, width, blk


def mmp_seq(dev):
    out = host.run(["debugfs", "-c", "-R", "dump_mmp", dev], check=False).stdout
    m = re.search(r"^seq\w*:\s*(?:0x)?([0-9a-fA-F]+)", out, re.M)
    return int(m.group(1), 16) if m else None
