# SPDX-License-Identifier: GPL-2.0
"""File-system stack helpers shared by the file-system tests and the
GlusterFS stack: checksums of what was written, fsync, dropping caches;
test_fs.py's mixed workload and its crash set-up.
"""
import hashlib
import os
import random
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from nxdt import blkdev, host, nxdvol
from nxdt.blkdev import queue_attr
from nxdt.facts import MiB, parse_status
from nxdt.host import CmdError, run
from nxdt.nxdvol import Volume, nxd_sysfs


def sha(data):
    return hashlib.sha256(data).hexdigest()


def sha_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(4 * MiB)
            if not b:
                return h.hexdigest()
            h.update(b)


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_fsynced(path, data, mode="wb"):
    """Write @data to file @path (@mode: "wb", "w" for text, "a" to append)
    and fsync it; returns its sha."""
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return sha(data if isinstance(data, bytes) else data.encode())


def drop_caches():
    run("sync")
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


# -------------------------------------------------- file systems (test_fs) ---

SRC_ROOT = os.environ.get("NXD_FS_SRC", "/usr/include")
MNT = "/tmp/nxd-fs-mnt"
CHUNK_KB = 64
SSD_MB = 64


def sha_files(paths, workers=8):
    """sha256 of many files, several at a time (overlaps the I/O waits)."""
    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(sha_file, paths))


def fsync_file(f):
    """fsync a Python file object: its user-space buffer first."""
    f.flush()
    os.fsync(f.fileno())


def stream_checksummed(path, chunks, stop_ev, durable, dirpath, dir_every=False,
                       chunk=256 << 10):
    """Write up to @chunks random @chunk-byte pieces to the new file @path
    until @stop_ev is set, fsyncing every fourth, and @dirpath after the
    first fsync (after each with @dir_every).  After each fsync returned,
    durable(nbytes, sha256 hex of those bytes): a prefix a crash must keep."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        for k in range(chunks):
            if stop_ev.is_set():
                break
            b = os.urandom(chunk)
            f.write(b)
            h.update(b)
            if k % 4 == 3:
                fsync_file(f)
                if k == 3 or dir_every:
                    fsync_path(dirpath)
                durable((k + 1) * chunk, h.hexdigest())


T0 = [time.monotonic()]


def phase(what):
    """Print a timestamped progress line (shown by pytest -rA / -s) and put
    it in the kernel log."""
    msg = f"[{time.monotonic() - T0[0]:7.1f}s] {what}"
    print(msg, flush=True)
    host.kmsg_write(f"{host.MARK_PREFIX} fs: {what}")


class Fs:
    """mkfs/mount/check for one file system type on @dev at MNT."""

    def __init__(self, kind, dev):
        self.kind, self.dev = kind, dev
        self.mounted = False
        self.frozen = False
        self.opts = "errors=remount-ro" if kind == "ext4" else ""

    def mkfs(self, ext4_ratio=None, discard=True):
        phase(f"mkfs {self.kind}")
        if self.kind == "xfs":
            nodiscard = [] if discard else ["-K"]
            return run(["mkfs.xfs", "-f", *nodiscard, self.dev]).stdout
        # ldiskfs OST-like: RAID geometry from the exported hints, large
        # inode ratio, flex_bg, an explicit journal, no reserved blocks,
        # no lazy init (no ext4lazyinit writes during the test).
        stride = queue_attr(self.dev, "minimum_io_size") // 4096
        width = queue_attr(self.dev, "optimal_io_size") // 4096
        return run(["mkfs.ext4", "-F", "-q", "-b", "4096", "-I", "512", "-m", "0",
                    "-i", str(ext4_ratio or MiB), "-O", "flex_bg", "-G", "256",
                    "-J", "size=64",
                    "-E", f"stride={stride},stripe_width={width},"
                    "lazy_itable_init=0,lazy_journal_init=0" + ("" if discard else ",nodiscard"),
                    self.dev]).stdout

    def mount(self):
        phase(f"mount {self.kind}")
        os.makedirs(MNT, exist_ok=True)
        cmd = ["mount", "-t", self.kind]
        if self.opts:
            cmd += ["-o", self.opts]
        run(cmd + [self.dev, MNT])
        self.mounted = True

    def umount(self):
        phase("umount")
        run(["umount", MNT])
        self.mounted = False

    def freeze(self):
        run(["fsfreeze", "-f", MNT])
        self.frozen = True

    def thaw(self):
        run(["fsfreeze", "-u", MNT])
        self.frozen = False

    def shutdown(self):
        """Stop all further I/O of the file system, without flushing its log
        (xfs_io's shutdown: XFS_IOC_GOINGDOWN / EXT4_IOC_SHUTDOWN).  A file
        system that already shut itself down fails xfs_io's stat with EIO."""
        p = run(["xfs_io", "-x", "-c", "shutdown", MNT], check=False)
        if p.returncode and "Input/output error" not in p.stderr:
            raise CmdError(f"xfs_io shutdown exited {p.returncode}: {p.stderr.strip()}")

    def check(self):
        """Read-only fsck of the unmounted file system; asserts it is clean."""
        assert not self.mounted
        phase(f"fsck {self.kind}")
        if self.kind == "xfs":
            p = run(["xfs_repair", "-n", self.dev], check=False)
        else:
            p = run(["e2fsck", "-fn", self.dev], check=False)
        assert p.returncode == 0, f"{self.kind} fsck not clean (rc {p.returncode}):\n" \
            f"{p.stdout[-3000:]}\n{p.stderr[-2000:]}"
        return p.stdout

    def grow(self):
        if self.kind == "xfs":
            run(["xfs_growfs", MNT])
        else:
            run(["resize2fs", self.dev])

    def geometry(self):
        """(stripe unit, stripe width) in bytes as the file system recorded them."""
        if self.kind == "xfs":
            out = run(["xfs_info", MNT if self.mounted else self.dev]).stdout
            m = re.search(r"^data\s*=.*bsize=(\d+).*\n\s*=\s*sunit=(\d+)\s+swidth=(\d+) blks",
                          out, re.M)
            assert m, out
            bs = int(m.group(1))
            return int(m.group(2)) * bs, int(m.group(3)) * bs
        out = run(["dumpe2fs", "-h", self.dev]).stdout
        st = re.search(r"^RAID stride:\s+(\d+)", out, re.M)
        sw = re.search(r"^RAID stripe width:\s+(\d+)", out, re.M)
        bs = re.search(r"^Block size:\s+(\d+)", out, re.M)
        assert st and sw and bs, out
        return int(st.group(1)) * int(bs.group(1)), int(sw.group(1)) * int(bs.group(1))


class Tree:
    """Files written under @root and the sha256 each must have.

    Expected contents come from the sources (host files, generated bytes),
    never from reading the device under test.
    """

    def __init__(self, root, seed):
        self.root = root
        self.rng = random.Random(seed)
        self.sums = {}      # relative path -> sha256 hex
        self.src = {}       # relative path -> host file with the same content
        self.data = {}      # relative path -> bytes, for files changed here
        self.counts = {}

    def _count(self, what, n=1):
        self.counts[what] = self.counts.get(what, 0) + n

    def p(self, rel):
        return os.path.join(self.root, rel)

    def content(self, rel):
        if rel in self.data:
            return self.data[rel]
        with open(self.src[rel], "rb") as f:
            return f.read()

    # -- operations --

    def extract(self, n, src_root=SRC_ROOT, into="src"):
        """tar up to @n regular files of @src_root (host, read-only) into
        @into; the manifest is hashed from the host copies."""
        phase(f"extract {n} files")
        files = []
        for d, dirs, names in os.walk(src_root):
            dirs.sort()
            for nm in sorted(names):
                hp = os.path.join(d, nm)
                if os.path.isfile(hp) and not os.path.islink(hp) and \
                        os.path.getsize(hp) <= 1 * MiB and os.access(hp, os.R_OK):
                    files.append(hp)
                if len(files) >= n:
                    break
            if len(files) >= n:
                break
        dst = self.p(into)
        os.makedirs(dst, exist_ok=True)
        listing = "\n".join(os.path.relpath(h, "/") for h in files) + "\n"
        tar = subprocess.run(
            f"tar -C / --no-recursion -cf - -T - | tar -C {dst} -xf -",
            shell=True, input=listing, text=True, capture_output=True)
        assert tar.returncode == 0, tar.stderr[-2000:]
        for h, digest in zip(files, sha_files(files)):
            rel = os.path.join(into, os.path.relpath(h, "/"))
            self.src[rel] = h
            self.sums[rel] = digest
        run(["sync", "-f", dst])
        self._count("extracted", len(files))
        return len(files)

    def size(self, rel):
        return len(self.data[rel]) if rel in self.data else os.path.getsize(self.src[rel])

    def _pick(self, k, min_size=0):
        # Not the big generated files: their content is not kept.
        cands = sorted(r for r in self.sums
                       if (r in self.data or r in self.src) and self.size(r) >= min_size)
        return self.rng.sample(cands, min(k, len(cands)))

    def appends(self, k):
        phase(f"append to {k} files")
        for rel in self._pick(k):
            extra = os.urandom(self.rng.randint(1, 20000))
            new = self.content(rel) + extra
            with open(self.p(rel), "ab") as f:
                f.write(extra)
                if self.rng.random() < 0.5:
                    fsync_file(f)
            self.data[rel] = new
            self.sums[rel] = sha(new)
        self._count("appended", k)

    def overwrites(self, k):
        phase(f"overwrite in {k} files")
        for rel in self._pick(k, min_size=2):
            old = bytearray(self.content(rel))
            off = self.rng.randrange(len(old))
            chunk = os.urandom(self.rng.randint(1, 9000))
            new = old[:off] + chunk + old[off + len(chunk):]
            with open(self.p(rel), "r+b") as f:
                f.seek(off)
                f.write(chunk)
                fsync_file(f)
            self.data[rel] = bytes(new)
            self.sums[rel] = sha(new)
        self._count("overwritten", k)

    def renames(self, k):
        phase(f"rename {k} files")
        os.makedirs(self.p("renamed"), exist_ok=True)
        for i, rel in enumerate(self._pick(k)):
            new = os.path.join("renamed", f"{i:05d}-{os.path.basename(rel)}")
            os.rename(self.p(rel), self.p(new))
            self.sums[new] = self.sums.pop(rel)
            if rel in self.data:
                self.data[new] = self.data.pop(rel)
            if rel in self.src:
                self.src[new] = self.src.pop(rel)
        fsync_path(self.p("renamed"))
        self._count("renamed", k)

    def deletes(self, k):
        phase(f"delete {k} files")
        for rel in self._pick(k):
            os.unlink(self.p(rel))
            del self.sums[rel]
            self.data.pop(rel, None)
            self.src.pop(rel, None)
        self._count("deleted", k)

    def new_small(self, k, into="new"):
        phase(f"create {k} files in {into}")
        for i in range(k):
            rel = os.path.join(into, f"d{i % 16:02d}", f"f{i:05d}")
            os.makedirs(os.path.dirname(self.p(rel)), exist_ok=True)
            d = os.urandom(self.rng.choice((100, 700, 4096, 5000, 12000, 40000)))
            with open(self.p(rel), "wb") as f:
                f.write(d)
                if i % 4 == 0:
                    fsync_file(f)
            self.data[rel] = d
            self.sums[rel] = sha(d)
        self._count("created", k)

    def db_file(self, rel="db/table.dat", size=16 * MiB, writes=1500, fsync_every=50):
        """A file written whole, then rewritten by random 4 KiB pwrites
        with periodic fsync (what a database or an OST object update does)."""
        phase(f"db file {rel}: {size >> 20} MiB, {writes} random 4 KiB writes")
        os.makedirs(os.path.dirname(self.p(rel)), exist_ok=True)
        model = bytearray(os.urandom(size))
        fd = os.open(self.p(rel), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, model)
            os.fsync(fd)
            for i in range(writes):
                off = self.rng.randrange(size // 4096) * 4096
                blk = os.urandom(4096)
                os.pwrite(fd, blk, off)
                model[off:off + 4096] = blk
                if i % fsync_every == fsync_every - 1:
                    os.fsync(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.data[rel] = bytes(model)
        self.sums[rel] = sha(model)
        self._count("db_writes", writes)

    def big_file(self, rel, mb):
        """A large file written sequentially in 1 MiB writes; hashed as
        generated (its content is not kept in memory)."""
        phase(f"big file {rel}: {mb} MiB")
        os.makedirs(os.path.dirname(self.p(rel)) or self.root, exist_ok=True)
        h = hashlib.sha256()
        with open(self.p(rel), "wb") as f:
            for _ in range(mb):
                b = os.urandom(MiB)
                h.update(b)
                f.write(b)
            fsync_file(f)
        self.sums[rel] = h.hexdigest()
        self.data.pop(rel, None)
        self._count("big_mib", mb)

    # -- checks --

    def verify(self, cold=True, skip=()):
        """Every file in the manifest has its sha256, and nothing else is
        there (but in lost+found and the directories in @skip)."""
        phase(f"verify {len(self.sums)} files")
        if cold:
            drop_caches()
        found = set()
        skip = ("lost+found/",) + tuple(skip)
        for d, _, names in os.walk(self.root):
            for nm in names:
                rel = os.path.relpath(os.path.join(d, nm), self.root)
                if not rel.startswith(skip):
                    found.add(rel)
        missing = sorted(set(self.sums) - found)
        extra = sorted(found - set(self.sums))
        present = [r for r in sorted(self.sums) if r in found]
        got = sha_files([self.p(r) for r in present])
        bad = [r for r, g in zip(present, got) if g != self.sums[r]]
        assert not (missing or extra or bad), (
            f"manifest mismatch: {len(missing)} missing {missing[:10]}, "
            f"{len(extra)} unexpected {extra[:10]}, {len(bad)} bad {bad[:10]}")
        return len(self.sums)


class Drainer:
    """`dmsetup message NAME 0 drain` over and over in the background,
    sampling the log fill before each."""

    def __init__(self, dm, name, pause=0.5):
        self.dm, self.name, self.pause = dm, name, pause
        self.stop_ev = threading.Event()
        self.drains = 0
        self.max_used = 0
        self.errors = []
        self.proc = None
        self.aborted = False
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop_ev.is_set():
            try:
                st = parse_status(self.dm.status(self.name))
                self.max_used = max(self.max_used, st["log_used_blocks"])
                if st["log_used_blocks"]:
                    self.proc = subprocess.Popen(
                        ["dmsetup", "message", self.name, "0", "drain"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    if self.aborted:        # abort() ran before self.proc was set
                        self.proc.kill()
                    _, err = self.proc.communicate()
                    if self.proc.returncode == 0:
                        self.drains += 1
                    elif not self.aborted:
                        self.errors.append(f"drain exit {self.proc.returncode}: {err.strip()}")
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.errors.append(repr(e))
            self.stop_ev.wait(self.pause)

    def abort(self):
        """Stop, killing a drain in progress (one that cannot finish: after
        a simulated power cut the log's new segments are not on the SSD)."""
        self.aborted = True
        self.stop_ev.set()
        p = self.proc
        if p and p.poll() is None:
            p.kill()

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.t.join(timeout=600)
        assert not self.t.is_alive(), "drain message never returned"


class Stack:
    """md RAID6 (loop members) + null_blk SSD + the nxd volume 'fsvol'."""
    NAME = "fsvol"

    def __init__(self, dm, md_raid6, nullb, ndisks, disk_mb, ssd_mb=SSD_MB, views=False):
        self.dm = dm
        self.md = md_raid6(ndisks=ndisks, disk_mb=disk_mb, chunk_kb=CHUNK_KB)
        self.members = md_raid6.members[self.md]
        self.ndisks = ndisks
        self.ssd_base = nullb(ssd_mb, discard=1, irqmode=0)
        self.md_sectors = blkdev.dev_sectors(self.md)
        self.views = views
        if views:
            # dm-linear views we can switch to flakey drop_writes at one instant.
            self.hdd = dm.create("fshddv", self._view_line(self.md, "linear"))
            self.ssd = dm.create("fsssdv", self._view_line(self.ssd_base, "linear"))
        else:
            self.hdd, self.ssd = self.md, self.ssd_base
        self.vol = Volume(dm, self.NAME, self.hdd, self.ssd)
        self.dev, self.length = self.vol.dev, self.vol.length

    @staticmethod
    def _view_line(dev, kind):
        n = blkdev.dev_sectors(dev)
        if kind == "linear":
            return f"0 {n} linear {dev} 0"
        # up 0 s, down 3600 s: always down; down means writes are dropped.
        return f"0 {n} flakey {dev} 0 0 3600 1 drop_writes"

    def status(self):
        return self.vol.status()

    def check_geometry(self):
        """The volume exports the array's hints (not the SSD's)."""
        md_min = queue_attr(self.md, "minimum_io_size")
        md_opt = queue_attr(self.md, "optimal_io_size")
        assert md_min == CHUNK_KB * 1024
        assert md_opt == CHUNK_KB * 1024 * (self.ndisks - 2)
        assert queue_attr(self.dev, "minimum_io_size") == md_min
        assert queue_attr(self.dev, "optimal_io_size") == md_opt
        return md_min, md_opt


def to_linear(dm, st, fs, length):
    """Take the SSD out of a live volume: freeze the file system (nothing
    new reaches the log), drain, switch the table to linear over the HDD,
    thaw.  The dm suspend is --nolockfs: the file system is already frozen,
    and on 6.12 a dm lockfs nested in an fsfreeze leaves the block device's
    freeze count raised after both are undone ("Can't mount, blockdev is
    frozen" at the next mount)."""
    fs.freeze()
    dm.message(st.NAME, "drain")
    s = st.status()
    assert s["log_used_blocks"] == 0 and s["index_entries"] == 0, s
    off = nxdvol.hdd_data_offset(st.md) // 512      # the data area's start
    dm.load(st.NAME, f"0 {length} linear {st.md} {off}")
    dm.suspend(st.NAME, nolockfs=True)
    dm.resume(st.NAME)
    fs.thaw()


class CrashWriters:
    """Background writers whose every fsync is recorded when it returns.

    small: creates files (write + fsync), and now and then replaces an
    earlier one (write a temp file, fsync, rename over, fsync the dir).
    seq:   appends 256 KiB to a file, fsync every 1 MiB, a new file every 16 MiB.
    """

    def __init__(self, root, seed):
        self.root = root
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.hist = {}          # rel -> [sha of every version written, in order]
        self.committed = {}     # rel -> index into hist[rel] known durable
        self.seq = {}           # rel -> (durable length, sha of that prefix)
        self.stop_ev = threading.Event()
        self.errors = []        # (time.monotonic(), repr of the exception)
        self.created = []
        self.threads = [threading.Thread(target=self._wrap, args=(f,), daemon=True)
                        for f in (self._small, self._seq)]

    def _wrap(self, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - checked by the test
            self.errors.append((time.monotonic(), repr(e)))

    def errors_before(self, t):
        return [e for when, e in self.errors if when < t]

    def _small(self):
        d = os.path.join(self.root, "crash")
        os.makedirs(d, exist_ok=True)
        i = 0
        while not self.stop_ev.is_set():
            if len(self.created) > 10 and self.rng.random() < 0.25:
                rel = self.rng.choice(self.created)
                data = os.urandom(self.rng.randint(1, 30000))
                tmp = os.path.join(d, f".tmp{i}")
                with open(tmp, "wb") as f:
                    f.write(data)
                    fsync_file(f)
                with self.lock:
                    self.hist[rel].append(sha(data))
                os.rename(tmp, os.path.join(self.root, rel))
                fsync_path(d)
                with self.lock:
                    self.committed[rel] = len(self.hist[rel]) - 1
            else:
                rel = f"crash/f{i:05d}"
                data = os.urandom(self.rng.choice((512, 3000, 4096, 9000, 65536)))
                with self.lock:
                    self.hist[rel] = [sha(data)]
                with open(os.path.join(self.root, rel), "wb") as f:
                    f.write(data)
                    fsync_file(f)
                fsync_path(d)
                with self.lock:
                    self.committed[rel] = 0
                self.created.append(rel)
            i += 1

    def _seq(self):
        d = os.path.join(self.root, "seq")
        os.makedirs(d, exist_ok=True)
        n = 0
        while not self.stop_ev.is_set():
            rel = f"seq/s{n:03d}"

            def durable(nbytes, digest, rel=rel):
                with self.lock:
                    self.seq[rel] = (nbytes, digest)
            stream_checksummed(os.path.join(self.root, rel), 64, self.stop_ev,
                               durable, d, dir_every=True)
            n += 1

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=300)

    def snapshot(self):
        with self.lock:
            return dict(self.committed), dict(self.seq)


BIG_MB = int(os.environ.get("NXD_FS_BIG_MB", "100"))
NFILES = int(os.environ.get("NXD_FS_FILES", "2000"))


def workload(stack, fs, tree):
    """The mixed workload; returns what it did."""
    dev = stack.dev
    settings = []

    def threshold(v):
        nxd_sysfs(dev, "write_threshold", v)
        assert nxd_sysfs(dev, "write_threshold") == str(v)
        assert f"write_threshold {v} " in stack.dm.table(stack.NAME)
        settings.append(v)

    with Drainer(stack.dm, stack.NAME) as dr:
        tree.extract(NFILES)
        threshold(4096)                 # only 4 KiB and unaligned writes logged
        tree.appends(300)
        tree.overwrites(300)
        threshold(0)                    # everything aligned to the HDD
        tree.renames(300)
        tree.new_small(400)
        threshold(1 * MiB)              # up to 1 MiB logged: fills the log
        tree.db_file()
        tree.big_file("big/seq.bin", BIG_MB)
        tree.deletes(300)
        threshold(65536)
        tree.new_small(200, into="new2")
        run(["sync", "-f", MNT])
    assert not dr.errors, dr.errors
    return dr, settings


def crash_setup_fs(kind, st, fsmount):
    fs = fsmount(kind, st.dev)
    fs.mkfs(ext4_ratio=65536, discard=False)
    fs.mount()
    return fs
