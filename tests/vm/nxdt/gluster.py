# SPDX-License-Identifier: GPL-2.0
"""GlusterFS over dm-nxd in the test guest: the stack and the workload of
tests/vm/test_pfs.py, scripts/demo-pfs.sh and scripts/pfs-powercut.sh.

The stack, one per brick: an md RAID6 of emulated drives (loop, null_blk or
dm-hddsim members), an SSD (null_blk or loop), an nxd volume over both, and
XFS on it (-i size=512, su/sw from the exported hints) mounted at
ROOT/b<i>.  With nxd=False the XFS goes on the array itself (the bare
arrays of the performance comparison).  One glusterd (a private working
directory, a dummy interface at 10.77.0.1: glusterd refuses loopback
addresses for bricks) serves a distributed volume over every brick and,
with three bricks or more, a dispersed one (2+1) over the same file
systems; both are mounted with the FUSE client.

Guest quirk: glusterd's init configures geo-replication by running the
Python gsyncd about 25 times, 10-15 minutes under TCG.  prepare_guest()
removes gsyncd from the guest's /usr overlay (never from the host), and
glusterd then logs "geo-replication module not installed" and skips it.

The workload (Files) writes through the mount and keeps the sha256 of what
it wrote, computed from the bytes it wrote, never read back: small files
created, written and fsync'd, renamed, rewritten and appended; large
sequential files; and an IOR-like fio pattern (IorJob: one shared file per
transfer size, each of NJOBS jobs writing its own contiguous block, the
NytroXD transfer sizes) whose blocks carry fio's crc32c verify headers,
checked by fio right after the writes and again later with --verify_only.
"""

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

from nxdt import blkdev, ctl, dmlib, facts, host, nxdvol, workloads
from nxdt.facts import MiB
from nxdt.fstack import fsync_path, sha, sha_file
from nxdt.host import run

IP = os.environ.get("NXD_PFS_IP", "10.77.0.1")
IFACE = "nxdpfs0"
ROOT = "/tmp/nxd-pfs"
GSYNCD = "/usr/lib/x86_64-linux-gnu/glusterfs/gsyncd"
# The NytroXD transfer sizes of the product card (bytes).
NYTRO = (5000, 10000, 20000, 40000, 80000, 160000)
SMALL_SIZES = (100, 700, 4096, 5000, 12000, 40000)
XFS_MOUNT_OPTS = "noatime,inode64"

T0 = [time.monotonic()]


def phase(what):
    msg = f"[{time.monotonic() - T0[0]:7.1f}s] pfs: {what}"
    print(msg, flush=True)
    try:
        host.kmsg_write(f"{host.MARK_PREFIX} pfs: {what}")
    except OSError:
        pass


def _mounted_fstype(path):
    with open("/proc/mounts") as f:
        for line in f:
            w = line.split()
            if len(w) > 2 and w[1] == path:
                return w[2]
    return None


# ----------------------------------------------------------------- guest ---

def prepare_guest():
    """Network, FUSE, md and glusterd prerequisites of the test guest."""
    if not host.in_vm():
        raise RuntimeError("nxdt.gluster runs in the test guest only")
    for prog in ("glusterd", "gluster", "glusterfsd", "mount.glusterfs"):
        if not shutil.which(prog):
            raise RuntimeError(f"{prog} not installed: run `make deps`")
    blkdev.md_no_auto_assembly()
    host.modprobe("fuse", check=False)
    host.modprobe("dm-mod")
    host.modprobe("raid456")
    host.modprobe("loop", "max_loop=16", check=False)
    run(["ip", "link", "set", "lo", "up"])
    if not os.path.exists(f"/sys/class/net/{IFACE}"):
        run(["ip", "link", "add", IFACE, "type", "dummy"])
        run(["ip", "addr", "add", f"{IP}/24", "dev", IFACE])
        run(["ip", "link", "set", IFACE, "up"])
    if os.path.exists(GSYNCD) and _mounted_fstype("/usr") == "overlay":
        os.unlink(GSYNCD)       # the guest's /usr overlay only
    for d in ("/var/log/glusterfs", "/run/gluster", ROOT):
        os.makedirs(d, exist_ok=True)


def load_nxd():
    """dm-nxd.ko of this kernel (the pytest session loads it itself)."""
    if not host.module_loaded("dm_nxd"):
        host.modprobe("libcrc32c", check=False)
        run(["insmod", host.MODULE_KO])


# ----------------------------------------------------------------- brick ---

class Brick:
    """md RAID6 over @members, optionally an nxd volume over it and @ssd,
    XFS at ROOT/b<i>."""

    def __init__(self, i, members, ssd=None, nxd=True, chunk_kb=64):
        self.i = i
        self.members = list(members)
        self.ssd = ssd
        self.nxd = nxd
        self.chunk_kb = chunk_kb
        self.name = f"pfs{i}"
        self.mnt = f"{ROOT}/b{i}"
        self.md = None
        self.dev = None
        self.length = None
        self.linear = False
        self.dm = dmlib.DMSetup()

    # -- devices --

    def create_md(self, bitmap=False):
        self.md = blkdev.md_create(self.members, level=6, chunk_kb=self.chunk_kb)
        if bitmap:      # a crash then resyncs only what was being written
            run(["mdadm", "--grow", self.md, "--bitmap=internal"])
        return self.md

    def assemble_md(self):
        dev = f"/dev/md{blkdev.md_free_minor()}"
        run(["mdadm", "--assemble", dev, "--run", *self.members])
        self.md = dev
        host.wait_for(lambda: os.path.exists(dev), what=dev)
        return dev

    def stop_md(self):
        if self.md and os.path.exists(f"/sys/block/{os.path.basename(self.md)}/md"):
            blkdev.md_stop(self.md)

    def table(self, fmt=False):
        return nxdvol.nxd_line(self.md, self.ssd, self.length, ["format"] if fmt else None)

    def create_volume(self):
        """The nxd volume (a blank SSD is formatted on first use; an old
        log is recovered), or the array itself when nxd is off."""
        if not self.nxd:
            self.dev = self.md
            return self.dev
        v = nxdvol.Volume(self.dm, self.name, self.md, self.ssd)
        self.dev, self.length = v.dev, v.length
        return self.dev

    def remove_volume(self):
        if self.nxd:
            self.dm.remove(self.name, missing_ok=True)

    def status(self):
        return facts.parse_status(self.dm.status(self.name))

    def stats(self, reset=False):
        return ctl.get_stats(self.name, reset=reset)

    def hints(self):
        blk = blkdev.blk_name(self.dev)
        with open(f"/sys/block/{blk}/queue/minimum_io_size") as f:
            io_min = int(f.read())
        with open(f"/sys/block/{blk}/queue/optimal_io_size") as f:
            io_opt = int(f.read())
        return io_min, io_opt

    # -- file system --

    def mkfs(self):
        """XFS as Gluster wants it (512-byte inodes for its xattrs), stripe
        unit and width from the volume's exported hints: given explicitly,
        as mkfs.xfs ignores the hints below 1 GiB (and then wants the 64 MiB
        log given too, as scripts/demo.sh does)."""
        io_min, io_opt = self.hints()
        run(["mkfs.xfs", "-f", "-q", "-K", "-i", "size=512",
             "-d", f"agcount=2,su={io_min},sw={io_opt // io_min}", "-l", "size=64m", self.dev])

    def mount(self):
        os.makedirs(self.mnt, exist_ok=True)
        run(["mount", "-o", XFS_MOUNT_OPTS, self.dev, self.mnt])

    def umount(self):
        # Not os.path.ismount(): it stats the mount point, and on an XFS
        # that shut down after I/O errors that fails, so it says "not
        # mounted" (seen after the dm-pcut cut).
        if _mounted_fstype(self.mnt):
            for _ in range(40):
                if run(["umount", self.mnt], check=False).returncode == 0:
                    return
                time.sleep(0.5)
            run(["umount", self.mnt])

    def fsck(self):
        p = run(["xfs_repair", "-n", self.dev], check=False)
        if p.returncode:
            raise AssertionError(f"xfs_repair -n {self.dev} (brick {self.i}) exit "
                                 f"{p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-1500:]}")
        return p

    def brick_dir(self, vol):
        return f"{self.mnt}/{vol}"

    # -- SSD out and back in, file system mounted --

    def to_linear(self):
        """Freeze the brick's XFS, drain the log, switch the table to
        linear over the array, thaw (docs/admin-guide.md, section 7)."""
        run(["fsfreeze", "-f", self.mnt])
        try:
            self.dm.message(self.name, "drain")
            st = self.status()
            if st["log_used_blocks"] or st["index_entries"]:
                raise AssertionError(f"log not empty after drain: {st}")
            off = nxdvol.hdd_data_offset(self.md) // 512     # the data area
            self.dm.load(self.name, f"0 {self.length} linear {self.md} {off}")
            self.dm.suspend(self.name, nolockfs=True)
            self.dm.resume(self.name)
        finally:
            run(["fsfreeze", "-u", self.mnt])
        self.linear = True
        return st

    def to_nxd(self):
        """Attach the SSD again: a new log (format) under the live XFS."""
        self.dm.reload(self.name, self.table(fmt=True))
        self.linear = False

    def table_kind(self):
        return self.dm.table(self.name).split()[2]


# --------------------------------------------------------------- gluster ---

class Gluster:
    """One glusterd with its working directory in @workdir."""

    def __init__(self, workdir=f"{ROOT}/glusterd"):
        self.workdir = workdir
        self.volfile = f"{ROOT}/glusterd.vol"
        self.pidfile = "/run/nxd-pfs-glusterd.pid"
        self.mounts = {}            # volume -> FUSE mount point
        self.volumes = []

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        with open(self.volfile, "w") as f:
            f.write("volume management\n"
                    "    type mgmt/glusterd\n"
                    f"    option working-directory {self.workdir}\n"
                    "    option transport-type socket\n"
                    "    option transport.socket.listen-port 24007\n"
                    "    option ping-timeout 0\n"
                    "    option event-threads 1\n"
                    "    option max-port 60999\n"
                    "end-volume\n")
        run(["glusterd", "-f", self.volfile, "-p", self.pidfile], timeout=900)
        host.wait_for(lambda: self.cli("volume", "list", check=False).returncode == 0,
                       timeout=300, interval=1, what="glusterd to answer")

    def pid(self):
        try:
            with open(self.pidfile) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def cli(self, *args, check=True, timeout=600):
        return run(["gluster", "--mode=script", *map(str, args)], check=check, timeout=timeout)

    def create(self, vol, bricks, disperse=False):
        """A volume over brick directories (Brick objects)."""
        paths = []
        for b in bricks:
            d = b.brick_dir(vol)
            os.makedirs(d, exist_ok=True)
            paths.append(f"{IP}:{d}")
        args = ["volume", "create", vol]
        if disperse:
            args += ["disperse", len(bricks), "redundancy", 1]
        # force: all bricks on one server (a dispersed volume asks for it)
        self.cli(*args, *paths, "force")
        self.cli("volume", "start", vol)
        self.volumes.append(vol)
        self.wait_online(vol)

    def status(self, vol):
        """[(path, online, pid)] of the volume's bricks."""
        out = self.cli("volume", "status", vol, "--xml", check=False).stdout
        try:
            root = ET.fromstring(out)
        except ET.ParseError:
            return []
        res = []
        for node in root.iter("node"):
            path = node.findtext("path") or ""
            if not path.startswith("/"):
                continue            # self-heal daemon
            res.append((path, node.findtext("status") == "1", int(node.findtext("pid") or -1)))
        return res

    def wait_online(self, vol, timeout=300):
        def ok():
            st = self.status(vol)
            return st and all(on and pid > 0 for _, on, pid in st)
        host.wait_for(ok, timeout=timeout, interval=1, what=f"every brick of {vol} online")

    def brick_pid(self, vol, path):
        for p, on, pid in self.status(vol):
            if p == path:
                return pid if on else None
        raise KeyError(path)

    def kill_brick(self, vol, path):
        """SIGKILL the brick process (a crash of the server process)."""
        pid = self.brick_pid(vol, path)
        assert pid, f"brick {path} of {vol} not running"
        os.kill(pid, signal.SIGKILL)
        host.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), timeout=30,
                       what=f"brick process {pid} to die")
        host.wait_for(lambda: self.brick_pid(vol, path) is None, timeout=60, interval=1,
                       what=f"glusterd to see brick {path} down")
        return pid

    def restart_bricks(self, vol):
        self.cli("volume", "start", vol, "force")
        self.wait_online(vol)

    def heal_entries(self, vol):
        """{brick: pending heal entries} from `volume heal VOL info`; a
        brick that is not connected counts as -1."""
        out = self.cli("volume", "heal", vol, "info", check=False).stdout
        res = {}
        cur = None
        for line in out.splitlines():
            if line.startswith("Brick "):
                cur = line[6:].strip()
                res[cur] = 0
            elif cur and line.startswith("Status:") and "Connected" not in line:
                res[cur] = -1
            elif cur and line.startswith("Number of entries:"):
                n = line.split(":", 1)[1].strip()
                if res[cur] >= 0:
                    res[cur] = int(n) if n.isdigit() else -1
        return res

    def heal(self, vol, timeout=600):
        """Trigger an index heal and wait until no entry is pending (the
        heal is triggered again every minute)."""
        last = {}
        kicked = [0.0]

        def done():
            nonlocal last
            if time.monotonic() - kicked[0] > 60:
                self.cli("volume", "heal", vol, check=False)
                kicked[0] = time.monotonic()
            last = self.heal_entries(vol)
            return last and all(v == 0 for v in last.values())
        try:
            host.wait_for(done, timeout=timeout, interval=10, what=f"heal of {vol}")
        except TimeoutError as e:
            info = self.cli("volume", "heal", vol, "info", check=False).stdout
            shd = run("tail -n 30 /var/log/glusterfs/glustershd.log", check=False).stdout
            raise AssertionError(f"{vol}: heal entries still pending after {timeout} s: "
                                 f"{last}\n{info}\nglustershd.log:\n{shd}") from e
        return last

    def mount(self, vol):
        mnt = f"{ROOT}/mnt-{vol}"
        os.makedirs(mnt, exist_ok=True)
        run(["mount", "-t", "glusterfs", f"{IP}:/{vol}", mnt], timeout=300)
        host.wait_for(lambda: os.path.ismount(mnt), timeout=60, what=f"{mnt} mounted")
        self.mounts[vol] = mnt
        return mnt

    def umount(self, vol):
        mnt = self.mounts.pop(vol, f"{ROOT}/mnt-{vol}")
        if _mounted_fstype(mnt):        # as Brick.umount (a dead client: ENOTCONN)
            for _ in range(40):
                if run(["umount", mnt], check=False).returncode == 0:
                    break
                time.sleep(0.5)
            else:
                run(["umount", "-l", mnt], check=False)

    def remount(self, vol):
        """A new client process: nothing left in its caches."""
        self.umount(vol)
        return self.mount(vol)

    def stop(self):
        """Unmount, stop the volumes (their brick and self-heal processes)
        and glusterd; kill whatever of ours is left."""
        for vol in list(self.mounts):
            self.umount(vol)
        if self.pid() and os.path.exists(f"/proc/{self.pid()}"):
            for vol in self.volumes:
                self.cli("volume", "stop", vol, check=False, timeout=300)
        self.volumes = []
        pid = self.pid()
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
                host.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), timeout=60,
                               what="glusterd to exit")
            except (ProcessLookupError, TimeoutError):
                pass
        for name in ("glusterfsd", "glusterfs", "glusterd"):
            for p in run(["pgrep", "-x", name], check=False).stdout.split():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def save_logs(self, tag="pfs"):
        """Copy glusterd's, the bricks' and the clients' logs to the test
        logs (build/, kept on the host)."""
        dst = os.path.join(host.LOGS, f"{host.KVER}-{tag}-glusterfs")
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree("/var/log/glusterfs", dst, ignore_dangling_symlinks=True)
        return dst

    def kill_all(self):
        """Everything gluster, at once (no unmount, no flush)."""
        for name in ("glusterfs", "glusterfsd", "glusterd"):
            for p in run(["pgrep", "-x", name], check=False).stdout.split():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass


# ------------------------------------------------------------- workload ---

class Files:
    """Files written through a Gluster mount at @root and the sha256 each
    must have, from the bytes written."""

    def __init__(self, root, seed):
        self.root = root
        self.rng = random.Random(seed)
        self.sums = {}          # rel -> sha256
        self.data = {}          # rel -> bytes (small files only)
        self.counts = {}
        self.bytes = 0

    def p(self, rel):
        return os.path.join(self.root, rel)

    def _count(self, what, n=1):
        self.counts[what] = self.counts.get(what, 0) + n

    def small(self, k, into="small", fsync=True):
        """@k files of 100 B to 40 KB, each written and fsync'd."""
        phase(f"{self.root}: {k} small files in {into}/")
        for i in range(k):
            rel = os.path.join(into, f"d{i % 8}", f"f{i:05d}")
            os.makedirs(os.path.dirname(self.p(rel)), exist_ok=True)
            d = self.rng.randbytes(self.rng.choice(SMALL_SIZES))
            with open(self.p(rel), "wb") as f:
                f.write(d)
                if fsync:
                    f.flush()
                    os.fsync(f.fileno())
            self.data[rel] = d
            self.sums[rel] = sha(d)
            self.bytes += len(d)
        for j in range(min(k, 8)):
            fsync_path(self.p(os.path.join(into, f"d{j}")))
        self._count("created", k)

    def _pick(self, k):
        cands = sorted(self.data)
        return self.rng.sample(cands, min(k, len(cands)))

    def renames(self, k, into="renamed"):
        phase(f"{self.root}: rename {k} files into {into}/")
        os.makedirs(self.p(into), exist_ok=True)
        for i, rel in enumerate(self._pick(k)):
            new = os.path.join(into, f"{i:05d}-{os.path.basename(rel)}")
            os.rename(self.p(rel), self.p(new))
            self.sums[new] = self.sums.pop(rel)
            self.data[new] = self.data.pop(rel)
        fsync_path(self.p(into))
        self._count("renamed", k)

    def rewrites(self, k):
        """Overwrite a piece in the middle of @k files, or append to them,
        fsync each."""
        phase(f"{self.root}: rewrite/append {k} files")
        for rel in self._pick(k):
            old = self.data[rel]
            chunk = self.rng.randbytes(self.rng.randint(1, 9000))
            if self.rng.random() < 0.5 and len(old) > 1:
                off = self.rng.randrange(len(old))
                new = old[:off] + chunk + old[off + len(chunk):]
                with open(self.p(rel), "r+b") as f:
                    f.seek(off)
                    f.write(chunk)
                    f.flush()
                    os.fsync(f.fileno())
            else:
                new = old + chunk
                with open(self.p(rel), "ab") as f:
                    f.write(chunk)
                    f.flush()
                    os.fsync(f.fileno())
            self.data[rel] = new
            self.sums[rel] = sha(new)
            self.bytes += len(chunk)
        self._count("rewritten", k)

    def big(self, rel, mb):
        """A large file written sequentially in 1 MiB writes, fsync'd."""
        phase(f"{self.root}: big file {rel}, {mb} MiB")
        os.makedirs(os.path.dirname(self.p(rel)) or self.root, exist_ok=True)
        h = hashlib.sha256()
        with open(self.p(rel), "wb") as f:
            for _ in range(mb):
                b = self.rng.randbytes(MiB)
                h.update(b)
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        self.sums[rel] = h.hexdigest()
        self.bytes += mb * MiB
        self._count("big_mib", mb)

    def verify(self, root=None, skip=()):
        """Every file has its sha256 and nothing else is there (but in the
        directories of @skip)."""
        root = root or self.root
        phase(f"{root}: verify {len(self.sums)} files")
        found = set()
        for d, dirs, names in os.walk(root):
            for nm in names:
                rel = os.path.relpath(os.path.join(d, nm), root)
                if not rel.startswith(tuple(skip)):
                    found.add(rel)
        missing = sorted(set(self.sums) - found)
        extra = sorted(found - set(self.sums))
        present = [r for r in sorted(self.sums) if r in found]
        with ThreadPoolExecutor(4) as ex:
            got = list(ex.map(sha_file, [os.path.join(root, r) for r in present]))
        bad = [r for r, g in zip(present, got) if g != self.sums[r]]
        assert not (missing or extra or bad), (
            f"{root}: {len(missing)} missing {missing[:8]}, {len(extra)} unexpected "
            f"{extra[:8]}, {len(bad)} wrong {bad[:8]}")
        return len(present)

    def save(self, path):
        with open(path, "w") as f:
            json.dump({"sums": self.sums, "counts": self.counts, "bytes": self.bytes}, f)
            f.flush()
            os.fsync(f.fileno())


class IorJob:
    """IOR-like fio pattern: for each transfer size T, one shared file that
    NJOBS jobs write at once, each its own contiguous block of T x COUNT
    bytes in T-byte transfers (IOR's N-1 segmented layout), fsync'd at the
    end; every block carries fio's crc32c verify header, checked after the
    writes and again by verify()."""

    def __init__(self, mnt, workdir, sizes=NYTRO, njobs=2, count=8, subdir="ior"):
        self.mnt, self.workdir = mnt, workdir
        self.dir = os.path.join(mnt, subdir)
        self.subdir = subdir
        self.sizes, self.njobs, self.count = sizes, njobs, count
        os.makedirs(workdir, exist_ok=True)
        self.jobfile = os.path.join(workdir, f"ior-{os.path.basename(mnt)}.fio")
        lines = ["[global]", f"directory={self.dir}", "ioengine=psync", "rw=write",
                 "fallocate=none", "verify=crc32c", "verify_fatal=1", "end_fsync=1",
                 f"numjobs={njobs}", "group_reporting=0"]
        for t in sizes:
            blk = t * count
            lines += ["", f"[t{t}]", f"bs={t}", f"size={blk}", f"offset_increment={blk}",
                      f"filename=ior-{t}.dat"]
        with open(self.jobfile, "w") as f:
            f.write("\n".join(lines) + "\n")

    def total_bytes(self):
        return sum(self.sizes) * self.count * self.njobs

    def files(self):
        return [os.path.join(self.subdir, f"ior-{t}.dat") for t in self.sizes]

    def _fio(self, *extra):
        p = subprocess.run(["fio", "--output-format=json", *extra, self.jobfile],
                           cwd=self.workdir, capture_output=True, text=True, timeout=1800)
        if p.returncode:
            raise AssertionError(f"fio {' '.join(extra)} {self.jobfile} exit {p.returncode}: "
                                 f"{p.stderr[-1500:]}{p.stdout[-500:]}")
        res = workloads.parse_fio_json(p.stdout)
        errs = [(j["jobname"], j["error"]) for j in res["jobs"] if j.get("error")]
        assert not errs, f"fio errors: {errs}"
        return res

    def write(self):
        phase(f"{self.mnt}: IOR-like fio, transfer sizes {list(self.sizes)}, "
              f"{self.njobs} jobs x {self.count} transfers a file")
        os.makedirs(self.dir, exist_ok=True)
        t = time.monotonic()
        res = self._fio()
        secs = time.monotonic() - t
        wrote = sum(j["write"]["io_bytes"] for j in res["jobs"])
        read = sum(j["read"]["io_bytes"] for j in res["jobs"])
        assert wrote == self.total_bytes(), (wrote, self.total_bytes())
        assert read == wrote, f"fio verified {read} of {wrote} bytes"
        return secs

    def verify(self):
        phase(f"{self.mnt}: fio --verify_only of the IOR files")
        res = self._fio("--verify_only")
        read = sum(j["read"]["io_bytes"] for j in res["jobs"])
        assert read == self.total_bytes(), f"fio verified {read} of {self.total_bytes()} bytes"
        return read


# ---------------------------------------------------------- histograms ---

def ssd_share(stats):
    """(writes, bytes, writes to the SSD, bytes to the SSD) of a GET_STATS
    dict (ctl.get_stats)."""
    n = b = ns = bs = 0
    for (d, _bucket, route, _align), (count, nbytes, _t) in stats["hist"].items():
        if d != "write":
            continue
        n += count
        b += nbytes
        if route == "ssd":
            ns += count
            bs += nbytes
    return n, b, ns, bs


def start_volumes(bricks, dist, disp, workdir=f"{ROOT}/glusterd"):
    """glusterd in @workdir, a distributed volume @dist and a dispersed one
    @disp over @bricks, both mounted through FUSE: the Gluster."""
    g = Gluster(workdir=workdir)
    g.start()
    g.create(dist, bricks)
    g.create(disp, bricks, disperse=True)
    for vol in (dist, disp):
        g.mount(vol)
    return g


def fill_volume(mnt, vol, seed, nsmall, nbig, big_mb, ior_count=8):
    """The mixed workload on one mounted volume @vol (@mnt): @nsmall small
    files, renames and rewrites of a quarter of them, @nbig files of
    @big_mb MiB, a quarter more small files not fsync'd, sync, then the
    IOR-like pattern.  Returns (Files, IorJob)."""
    f = Files(mnt, seed=seed)
    f.small(nsmall)
    f.renames(nsmall // 4)
    f.rewrites(nsmall // 4)
    for k in range(nbig):
        f.big(f"big/seq{k}.bin", big_mb)
    f.small(nsmall // 4, into="small2", fsync=False)
    run(["sync"])
    ior = IorJob(mnt, f"{ROOT}/fio-{vol}", count=ior_count)
    ior.write()
    return f, ior
