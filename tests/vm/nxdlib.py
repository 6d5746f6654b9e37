# SPDX-License-Identifier: GPL-2.0
"""Helpers for the in-guest dm-nxd tests: devices, dmsetup, and the
differential tester that checks every byte read against an in-memory model.

Runs inside the virtme-ng guest as root with Debian's python3 (stdlib only).
"""
import contextlib
import fcntl
import mmap
import os
import random
import struct
import subprocess
import time

from nxdfacts import data_sectors, parse_status

SECTOR = 512
BLOCK = 4096
BLKDISCARD = 0x1277
BLKFLSBUF = 0x1261


def sh(cmd, check=True, input=None):
    """Run a shell command, return stdout (text)."""
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                       input=input)
    if check and p.returncode != 0:
        raise RuntimeError(f"{cmd!r} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def getsz(dev):
    return int(sh(f"blockdev --getsz {dev}").strip())


def disk_stat(dev):
    """(read_sectors, write_sectors, read_ios, write_ios) of a block device."""
    name = os.path.basename(os.path.realpath(dev))
    with open(f"/sys/block/{name}/stat") as f:
        v = [int(x) for x in f.read().split()]
    return v[2], v[6], v[0], v[4]


# ---- devices ----

class Loop:
    """A loop device over a sparse file in the guest's /tmp (tmpfs overlay);
    discards punch holes, so discarded ranges read back as zeros."""

    def __init__(self, mib, name):
        os.makedirs("/tmp/nxd-dev", exist_ok=True)
        self.path = f"/tmp/nxd-dev/{name}.img"
        with open(self.path, "wb") as f:
            f.truncate(mib << 20)
        self.dev = sh(f"losetup --find --show --direct-io=off {self.path}").strip()

    def close(self):
        sh(f"losetup -d {self.dev}", check=False)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


class NullBlk:
    """A memory-backed null_blk device through configfs (name nullbN)."""
    _next = 0

    def __init__(self, mib, discard=True, bs=512):
        sh("modprobe null_blk nr_devices=0", check=False)
        sh("mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config",
           check=False)
        while True:
            idx = NullBlk._next
            NullBlk._next += 1
            self.cfg = f"/sys/kernel/config/nullb/nullb{idx}"
            if not os.path.exists(self.cfg):
                break
        os.mkdir(self.cfg)
        for k, v in (("size", mib), ("memory_backed", 1), ("blocksize", bs),
                     ("discard", 1 if discard else 0), ("irqmode", 0)):
            with open(f"{self.cfg}/{k}", "w") as f:
                f.write(str(v))
        with open(f"{self.cfg}/power", "w") as f:
            f.write("1")
        self.dev = f"/dev/nullb{idx}"
        for _ in range(100):
            if os.path.exists(self.dev):
                break
            time.sleep(0.05)

    def close(self):
        with contextlib.suppress(OSError):
            with open(f"{self.cfg}/power", "w") as f:
                f.write("0")
            os.rmdir(self.cfg)


# ---- dmsetup ----

def dm_create(name, table):
    sh(f"dmsetup create {name}", input=table + "\n")
    # dmsetup waits for its own node; a bounded settle keeps one stuck
    # udev worker from costing the default 120 s.
    sh("udevadm settle --timeout=10", check=False)
    return f"/dev/mapper/{name}"


def dm_remove(name):
    sh(f"dmsetup remove --retry {name}", check=False)


def dm_table(name):
    return sh(f"dmsetup table {name}").strip()


def dm_status(name):
    return sh(f"dmsetup status {name}").strip()


def dm_message(name, msg):
    return sh(f"dmsetup message {name} 0 {msg}")


def dm_reload(name, table):
    sh(f"dmsetup reload {name}", input=table + "\n")
    sh(f"dmsetup suspend {name}")
    sh(f"dmsetup resume {name}")




def nxd_status(name):
    """Parse `dmsetup status` of an nxd volume into a dict."""
    return parse_status(dm_status(name))


def dm_sysfs(name):
    dm = os.path.basename(os.path.realpath(f"/dev/mapper/{name}"))
    return f"/sys/block/{dm}/nxd"


def sysfs_write(name, key, value):
    with open(f"{dm_sysfs(name)}/{key}", "w") as f:
        f.write(str(value))


def sysfs_read(name, key):
    with open(f"{dm_sysfs(name)}/{key}") as f:
        return f.read().strip()


class Volume:
    """An nxd volume over an HDD and an SSD device."""

    def __init__(self, name, hdd, ssd, opts=""):
        self.name, self.hdd, self.ssd = name, hdd, ssd
        self.sectors = data_sectors(getsz(hdd))
        self.opts = opts
        self.dev = dm_create(name, self.table_line())

    def table_line(self, opts=None):
        opts = self.opts if opts is None else opts
        args = opts.split()
        extra = f" {len(args)} {opts}" if args else ""
        return f"0 {self.sectors} nxd {self.hdd} {self.ssd}{extra}"

    def status(self):
        return nxd_status(self.name)

    def remove(self):
        dm_remove(self.name)

    def recreate(self, opts=None):
        dm_remove(self.name)
        self.dev = dm_create(self.name, self.table_line(opts))


# ---- aligned I/O ----

def aligned_buf(n):
    return mmap.mmap(-1, max(n, mmap.PAGESIZE))


def pread_direct(fd, off, n):
    buf = aligned_buf(n)
    got = os.preadv(fd, [memoryview(buf)[:n]], off)
    assert got == n, (got, n)
    return bytes(buf[:n])


def pwrite_direct(fd, off, data):
    buf = aligned_buf(len(data))
    buf[:len(data)] = data
    got = os.pwritev(fd, [memoryview(buf)[:len(data)]], off)
    assert got == len(data), (got, len(data))


def discard(fd, off, n):
    fcntl.ioctl(fd, BLKDISCARD, struct.pack("QQ", off, n))


def read_all(dev, n, chunk=4 << 20):
    """Read the first n bytes of a device with O_DIRECT."""
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        out = bytearray()
        off = 0
        while off < n:
            k = min(chunk, n - off)
            out += pread_direct(fd, off, k)
            off += k
        return bytes(out)
    finally:
        os.close(fd)


# ---- differential tester ----

class DiffTester:
    """Seeded random reads, writes, overwrites, discards and flushes through a
    device, checked byte for byte against an in-memory model.

    `size` bytes of the device are used.  Discards are expected to read back
    as zeros (the HDD must zero on discard: loop over a file does).
    """

    def __init__(self, dev, size, seed, max_io=4 << 20, hot=None):
        self.dev, self.size, self.seed = dev, size, seed
        self.rng = random.Random(seed)
        self.max_io = max_io
        self.hot = hot or size  # region most writes land in, to force overwrites
        self.fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
        self.model = bytearray(read_all(dev, size))
        self.ops = {"write": 0, "read": 0, "discard": 0, "flush": 0}
        self.bytes_verified = 0
        self.log = []

    def close(self):
        os.close(self.fd)

    def _extent(self, small_bias=0.7):
        r = self.rng
        if r.random() < small_bias:
            n = r.choice([512, 1024, 3584, 4096, 4096, 5120, 8192, 12288,
                          16384, 32768, 65536, 65536 + 512])
        else:
            n = r.choice([131072, 262144, 1 << 20, 2 << 20, self.max_io,
                          r.randrange(1, self.max_io // 512) * 512])
        n = min(n, self.size)
        aligned = r.random() < 0.6
        span = self.hot if r.random() < 0.8 else self.size
        span = max(min(span, self.size), n)
        if aligned:
            off = r.randrange(0, (span - n) // BLOCK + 1) * BLOCK
        else:
            off = r.randrange(0, (span - n) // SECTOR + 1) * SECTOR
        return off, n

    def write(self, off, n):
        data = self.rng.randbytes(n)
        pwrite_direct(self.fd, off, data)
        self.model[off:off + n] = data
        self.ops["write"] += 1

    def read(self, off, n):
        got = pread_direct(self.fd, off, n)
        want = bytes(self.model[off:off + n])
        if got != want:
            bad = next(i for i in range(n) if got[i] != want[i])
            raise AssertionError(
                f"seed {self.seed}: read {off}+{n} differs at byte {off + bad} "
                f"(sector {(off + bad) // 512}); last ops {self.log[-8:]}")
        self.ops["read"] += 1
        self.bytes_verified += n

    def trim(self, off, n):
        discard(self.fd, off, n)
        self.model[off:off + n] = bytes(n)
        self.ops["discard"] += 1

    def flush(self):
        os.fsync(self.fd)
        self.ops["flush"] += 1

    def step(self):
        x = self.rng.random()
        if x < 0.50:
            off, n = self._extent()
            self.log.append(("w", off, n))
            self.write(off, n)
        elif x < 0.85:
            off, n = self._extent(0.5)
            self.log.append(("r", off, n))
            self.read(off, n)
        elif x < 0.93:
            off, n = self._extent(0.3)
            self.log.append(("d", off, n))
            self.trim(off, n)
        else:
            self.log.append(("f",))
            self.flush()

    def run(self, nops, on_step=None):
        for i in range(nops):
            self.step()
            if on_step:
                on_step(i)

    def verify_all(self, dev=None):
        got = read_all(dev or self.dev, self.size)
        if got != bytes(self.model):
            bad = next(i for i in range(self.size) if got[i] != self.model[i])
            raise AssertionError(
                f"seed {self.seed}: full verify differs at byte {bad} "
                f"(sector {bad // 512}, block {bad // 4096})")
        self.bytes_verified += self.size
