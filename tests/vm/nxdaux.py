# SPDX-License-Identifier: GPL-2.0
"""Helpers of the fault, bad-input and management tests (tests/vm/test_faults.py,
test_badinput.py, test_mgmt.py): nxd volumes on the conftest device fixtures,
dm-flakey/linear fault injectors, the /dev/nxd-control ABI in Python, an
independent reader of the on-disk format (docs/on-disk-format.md), raw
device I/O and kernel-log checks.

Nothing here uses the code under test to compute what data should be: the
models are built from what the tests wrote.
"""
import ctypes
import errno
import mmap
import os
import re
import struct
import subprocess
import time

import nxdvm
from nxdfacts import STATUS_FIELDS, TUNABLES, data_sectors  # noqa: F401 (re-exported)
from nxdfacts import parse_status as nxd_status
from nxdvm import run

SECTOR = 512
BLOCK = 4096
KiB = 1 << 10
MiB = 1 << 20

# ------------------------------------------------------------ geometry ---


def label_offset(hdd_sectors):
    return data_sectors(hdd_sectors) * SECTOR


# ------------------------------------------------------------ raw I/O ----


def abuf(n):
    return mmap.mmap(-1, max(n, mmap.PAGESIZE))


def pread_dev(dev, off, n):
    """O_DIRECT read of a raw device (never the page cache)."""
    fd = os.open(dev, os.O_RDONLY | os.O_DIRECT)
    try:
        b = abuf(n)
        got = os.preadv(fd, [memoryview(b)[:n]], off)
        assert got == n, (dev, off, n, got)
        return bytes(b[:n])
    finally:
        os.close(fd)


def pwrite_dev(dev, off, data):
    """O_DIRECT write + fsync to a raw device."""
    fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
    try:
        b = abuf(len(data))
        b[:len(data)] = data
        got = os.pwritev(fd, [memoryview(b)[:len(data)]], off)
        assert got == len(data)
        os.fsync(fd)
    finally:
        os.close(fd)


def flip_byte(dev, off, xor=0xFF):
    """Corrupt one byte of a raw device (read-modify-write of its block)."""
    base = off - off % BLOCK
    blk = bytearray(pread_dev(dev, base, BLOCK))
    blk[off - base] ^= xor
    pwrite_dev(dev, base, bytes(blk))


def copy_dev(src, dst, nbytes):
    run(["dd", f"if={src}", f"of={dst}", "bs=1M", f"count={nbytes // MiB}",
         "iflag=direct", "oflag=direct", "conv=fsync", "status=none"])


class Fd:
    """An O_DIRECT fd on a device with aligned helpers; returns errno
    instead of raising for the I/O calls marked *_try."""

    def __init__(self, dev, write=True):
        self.dev = dev
        self.fd = os.open(dev, (os.O_RDWR if write else os.O_RDONLY) | os.O_DIRECT)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def pread(self, off, n):
        b = abuf(n)
        got = os.preadv(self.fd, [memoryview(b)[:n]], off)
        assert got == n, (self.dev, off, n, got)
        return bytes(b[:n])

    def pwrite(self, off, data):
        b = abuf(len(data))
        b[:len(data)] = data
        got = os.pwritev(self.fd, [memoryview(b)[:len(data)]], off)
        assert got == len(data), (self.dev, off, len(data), got)

    def pread_try(self, off, n):
        """(data, 0) or (None, errno)."""
        try:
            return self.pread(off, n), 0
        except OSError as e:
            return None, e.errno

    def pwrite_try(self, off, data):
        """0 or errno."""
        try:
            self.pwrite(off, data)
            return 0
        except OSError as e:
            return e.errno

    def fsync(self):
        os.fsync(self.fd)


# ----------------------------------------------------------- dm / nxd ----

def nxd_line(hdd, ssd, length=None, opts=None):
    """Table line of an nxd volume; @opts a list of words (count added)."""
    if length is None:
        length = data_sectors(nxdvm.dev_sectors(hdd))
    words = [str(w) for w in (opts or [])]
    extra = f" {len(words)} {' '.join(words)}" if words else ""
    return f"0 {length} nxd {hdd} {ssd}{extra}"


class Vol:
    """An nxd volume made through a conftest nxdvm.DMSetup (removed by the
    dm fixture if the test does not)."""

    def __init__(self, dm, name, hdd, ssd, opts=None, length=None):
        self.dm, self.name, self.hdd, self.ssd = dm, name, hdd, ssd
        self.length = data_sectors(nxdvm.dev_sectors(hdd)) if length is None else length
        self.opts = list(opts or [])
        self.dev = dm.create(name, nxd_line(hdd, ssd, self.length, self.opts))
        nxdvm.udev_settle()

    @property
    def size(self):
        return self.length * SECTOR

    def line(self, opts=None):
        return nxd_line(self.hdd, self.ssd, self.length, self.opts if opts is None else opts)

    def remove(self):
        self.dm.remove(self.name)

    def recreate(self, opts=None):
        if self.dm.exists(self.name):
            self.dm.remove(self.name)
        if opts is not None:
            self.opts = list(opts)
        self.dev = self.dm.create(self.name, self.line())
        nxdvm.udev_settle()

    def message(self, *msg):
        return self.dm.message(self.name, *msg)

    def pause(self):
        self.message("pause_destage")

    def drain(self):
        self.message("drain")

    def status(self):
        return nxd_status(self.dm.status(self.name))

    def table(self):
        return self.dm.table(self.name)

    def kname(self):
        return nxdvm.blk_name(self.dev)

    def sysfs(self, key=None):
        d = f"/sys/block/{self.kname()}/nxd"
        return d if key is None else f"{d}/{key}"

    def sget(self, key):
        with open(self.sysfs(key)) as f:
            return f.read().strip()

    def sset(self, key, value):
        """Write a sysfs tunable; returns 0 or the errno."""
        try:
            fd = os.open(self.sysfs(key), os.O_WRONLY)
        except OSError as e:
            return e.errno
        try:
            os.write(fd, value if isinstance(value, bytes) else str(value).encode())
            return 0
        except OSError as e:
            return e.errno
        finally:
            os.close(fd)

    def tunables(self):
        return {k: self.sget(k) for k in TUNABLES}

    def devnum(self):
        st = os.stat(self.dev)
        return os.major(st.st_rdev), os.minor(st.st_rdev)





def table_opts(table_line):
    """The key/value options of a `dmsetup table` line of nxd as a dict."""
    w = table_line.split()
    assert w[2] == "nxd", w
    n = int(w[5])
    kv = w[6:6 + n]
    return dict(zip(kv[0::2], kv[1::2]))


def table_with(table_line, **changes):
    """@table_line with some option values replaced."""
    w = table_line.split()
    n = int(w[5])
    for i in range(6, 6 + n, 2):
        if w[i] in changes:
            w[i + 1] = str(changes[w[i]])
    return " ".join(w)


class Injector:
    """A dm device over @base whose behaviour can be switched live:
    'ok' (linear), 'error' (every bio fails: flakey, always down, no
    feature), 'error_writes' (flakey error_writes: reads pass) and
    'error_reads' (flakey error_reads: kernels >= 6.6 only)."""

    def __init__(self, dm, name, base, mode="ok"):
        self.dm, self.name, self.base = dm, name, base
        self.sectors = nxdvm.dev_sectors(base)
        self.mode = mode
        self.dev = dm.create(name, self._line(mode))
        nxdvm.udev_settle()
        self.switches = 0

    def _line(self, mode):
        if mode == "ok":
            return f"0 {self.sectors} linear {self.base} 0"
        if mode == "error":
            return f"0 {self.sectors} flakey {self.base} 0 0 1"
        if mode in ("error_writes", "error_reads"):
            return f"0 {self.sectors} flakey {self.base} 0 0 1 1 {mode}"
        raise ValueError(mode)

    def set(self, mode):
        self.dm.reload(self.name, self._line(mode))
        self.mode = mode
        self.switches += 1


def flakey_supports(feature):
    """Whether this kernel's dm-flakey knows @feature (error_reads: 6.6+)."""
    nxdvm.modprobe("dm-flakey", check=False)
    base = None
    try:
        dev, path = nxdvm.loop_create(1)
        base = (dev, path)
        p = run(["dmsetup", "create", "nxdprobe-flakey", "--table",
                 f"0 2048 flakey {dev} 0 0 1 1 {feature}"], check=False)
        if p.returncode == 0:
            run(["dmsetup", "remove", "--retry", "nxdprobe-flakey"], check=False)
        return p.returncode == 0
    finally:
        if base:
            nxdvm.loop_destroy(*base)


def loop_bytes(nbytes, made):
    """A loop device of exactly @nbytes (any multiple of 512) over /tmp;
    appended to @made as (dev, path) for nxdvm.loop_destroy."""
    nxdvm.modprobe("loop", check=False)
    path = f"/tmp/nxd-aux-{os.getpid()}-{len(made)}-{time.monotonic_ns()}.img"
    with open(path, "wb") as f:
        f.truncate(nbytes)
    dev = run(["losetup", "--find", "--show", path]).stdout.strip()
    made.append((dev, path))
    nxdvm.wait_for(lambda: os.path.exists(dev), what=dev)
    return dev


# ------------------------------------------------------------- kmsg ------

def table_error_re(msg_re):
    """How dm core logs a constructor's ti->error."""
    return re.compile(r"device-mapper: table: \S+: nxd: " + msg_re)


def wait_kmsg(marker, regex, timeout=5.0):
    """Kernel log lines after @marker matching @regex (waits a little)."""
    rx = re.compile(regex) if isinstance(regex, str) else regex
    end = time.monotonic() + timeout
    while True:
        hits = [ln for ln in nxdvm.dmesg_since(marker) if rx.search(ln)]
        if hits or time.monotonic() > end:
            return hits
        time.sleep(0.1)


RECOVERED_RE = re.compile(r"recovered (\d+) segments, (\d+) blocks in \d+ us \([^)]*\), (\d+) entries")


def recovered_entries(marker):
    """Index entries the last recovery after @marker reported (its kernel
    message): the count at load, before the destager, which may run at
    once (idle HDD), could change it."""
    hits = wait_kmsg(marker, RECOVERED_RE)
    assert hits, "no recovery message"
    return int(RECOVERED_RE.search(hits[-1]).group(3))


# ---------------------------------------------------------- on-disk ------

SB_MAGIC = 0x3142535F44584E00
SEG_MAGIC = 0x3147455344584E00
LABEL_MAGIC = 0x314C4448445F584E
RING_START = 8
SEG_MAX_BLOCKS = 128


def parse_sb(blk):
    magic, crc, ver, sb_seq = struct.unpack_from("<QIIQ", blk, 0)
    if magic != SB_MAGIC:
        return None
    vol_uuid, hdd_uuid = blk[24:40], blk[40:56]
    (hdd_sectors, label_sector, data_sec, bsize, segmax, ring_start, ring_blocks,
     tail_pos, tail_seq, gen, gen_start, head_pos, head_seq, flags) = \
        struct.unpack_from("<QQQIIQQQQQQQQI", blk, 56)
    # The stored name and tunables (docs/on-disk-format.md, bytes 160-311).
    (tun_flags, mode, wthr, rate, low, high, discard, drain) = \
        struct.unpack_from("<IIQIBBBB", blk, 288)
    return dict(sb_seq=sb_seq, vol_uuid=vol_uuid, hdd_uuid=hdd_uuid,
                hdd_sectors=hdd_sectors, label_sector=label_sector,
                data_sectors=data_sec, ring_start=ring_start,
                ring_blocks=ring_blocks, tail_pos=tail_pos, tail_seq=tail_seq,
                gen=gen, gen_start_seq=gen_start, head_pos=head_pos,
                head_seq=head_seq, flags=flags,
                name=blk[160:288].split(b"\0", 1)[0].decode(),
                tun_flags=tun_flags, mode=mode, write_threshold=wthr,
                destage_rate=rate, low_watermark=low, high_watermark=high,
                ssd_discard=discard, drain_on_suspend=drain)


_CRC32C_TAB = []


def crc32c_raw(data, crc=0xFFFFFFFF):
    """The kernel's crc32c(seed, p, len): reflected Castagnoli, no
    inversion before or after (kernel/nxd_codec.c seeds it with ~0)."""
    if not _CRC32C_TAB:
        for i in range(256):
            c = i
            for _ in range(8):
                c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
            _CRC32C_TAB.append(c)
    for b in data:
        crc = (crc >> 8) ^ _CRC32C_TAB[(crc ^ b) & 0xFF]
    return crc


def clear_sb_clean(ssd):
    """Clear CLEAN (flags bit 0, offset 152) in both superblock copies and
    reseal them: the next activation replays the log as after a crash."""
    for i in range(2):
        blk = bytearray(pread_dev(ssd, i * BLOCK, BLOCK))
        if parse_sb(bytes(blk)) is None:
            continue
        flags, = struct.unpack_from("<I", blk, 152)
        struct.pack_into("<I", blk, 152, flags & ~1)
        struct.pack_into("<I", blk, 8, 0)
        struct.pack_into("<I", blk, 8, crc32c_raw(blk))
        pwrite_dev(ssd, i * BLOCK, bytes(blk))


def read_sbs(ssd):
    """Both superblock copies as parsed dicts (None: no magic)."""
    raw = pread_dev(ssd, 0, 2 * BLOCK)
    return [parse_sb(raw[:BLOCK]), parse_sb(raw[BLOCK:])]


def newest_sb(ssd):
    """(index, sb) of the copy with the highest sb_seq (both assumed valid)."""
    sbs = read_sbs(ssd)
    assert sbs[0] and sbs[1], sbs
    i = 1 if sbs[1]["sb_seq"] > sbs[0]["sb_seq"] else 0
    return i, sbs[i]


def uuid_str(b):
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_seg(blk):
    magic, crc, flags, seq, gen, pos, nr_data, nr_recs = struct.unpack_from("<QIIQQQII", blk, 0)
    if magic != SEG_MAGIC:
        return None
    recs = []
    for i in range(nr_recs):
        block, val, typ, mask, _ = struct.unpack_from("<QIBBH", blk, 64 + 16 * i)
        recs.append((typ, block, val, mask))
    return dict(seq=seq, gen=gen, pos=pos, nr_data=nr_data, nr_recs=nr_recs,
                flags=flags, vol_uuid=blk[48:64], recs=recs)


def next_seg_pos(ring_blocks, end):
    return 0 if end > ring_blocks or ring_blocks - end < SEG_MAX_BLOCKS else end


def walk_log(ssd, sb, max_segs=100000):
    """Segments from the superblock's tail while magic, volume, seq and pos
    chain (header checksums are not verified: the tests corrupt on purpose
    only where they know).  Each: dict + 'ssd_off' of its header."""
    segs = []
    pos, seq = sb["tail_pos"], sb["tail_seq"]
    rb = sb["ring_blocks"]
    while len(segs) < max_segs:
        if sb["flags"] & 1 and seq == sb["head_seq"]:
            break
        off = (sb["ring_start"] + pos) * BLOCK
        s = parse_seg(pread_dev(ssd, off, BLOCK))
        if not s or s["seq"] != seq or s["pos"] != pos or s["vol_uuid"] != sb["vol_uuid"]:
            break
        s["ssd_off"] = off
        segs.append(s)
        pos = next_seg_pos(rb, pos + 1 + s["nr_data"])
        seq += 1
    return segs


def data_recs(seg):
    return [(b, m) for t, b, v, m in seg["recs"] if t == 1]


# -------------------------------------------------- /dev/nxd-control -----

CONTROL = "/dev/nxd-control"
IOC_VERSION = 1
NAME_LEN = 128
HDR_FMT = "<IIIIQ128s"
HDR_SIZE = struct.calcsize(HDR_FMT)            # 152
NCTR_SLOTS = 64                                # 32 counters + 32 reserved
NBUCKETS = 16
HIST_CELLS = 2 * NBUCKETS * 2 * 2
STATS_SIZE = HDR_SIZE + 8 * NCTR_SLOTS + 8 * 3 * HIST_CELLS   # 3736
VOL_FMT = "<Q128s16sQIII5I"
VOL_SIZE = struct.calcsize(VOL_FMT)             # 192
MAX_VOLS = 64
LIST_VOLS_OFF = HDR_SIZE + 8                    # 160
LIST_SIZE = LIST_VOLS_OFF + MAX_VOLS * VOL_SIZE  # 12448
F_RESET = 1
ROUTES = ("ssd", "hdd")
ALIGNS = ("aligned", "unaligned")
DIRS = ("read", "write")


def IOC(d, typ, nr, size):
    return (d << 30) | (size << 16) | (typ << 8) | nr


IOC_RW = 3
GET_STATS = IOC(IOC_RW, 0xDB, 1, STATS_SIZE)
LIST = IOC(IOC_RW, 0xDB, 2, LIST_SIZE)
assert GET_STATS == 0xCE98DB01 and LIST == 0xF0A0DB02


def hdr(size, name=b"", dev=0, flags=0, version=IOC_VERSION, reserved=0):
    if isinstance(name, str):
        name = name.encode()
    return struct.pack(HDR_FMT, size, version, flags, reserved, dev,
                       name.ljust(NAME_LEN, b"\0")[:NAME_LEN])


def encode_dev(major, minor):
    """new_encode_dev()"""
    return (minor & 0xff) | (major << 8) | ((minor & ~0xff) << 12)


class RawBuf:
    """@n bytes of page-aligned user memory at a known address, optionally
    followed by an inaccessible (PROT_NONE) guard page: the kernel gets the
    address itself, so whatever size the request claims, it can only touch
    this mapping (fcntl.ioctl's own buffer copy is never involved)."""

    def __init__(self, n, guard=False, at_end=False):
        self.n = n
        pg = mmap.PAGESIZE
        span = (n + pg - 1) // pg * pg
        self.mm = mmap.mmap(-1, span + (pg if guard else 0))
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        # at_end: the buffer ends right at the guard page
        self.off = span - n if at_end else 0
        if guard:
            lc = libc()
            lc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            if lc.mprotect(ctypes.c_void_p(self.base + span), pg, 0):
                raise OSError(ctypes.get_errno(), "mprotect")

    @property
    def addr(self):
        return self.base + self.off

    def put(self, data, at=0):
        self.mm[self.off + at:self.off + at + len(data)] = data

    def get(self, n=None, at=0):
        n = self.n - at if n is None else n
        return bytes(self.mm[self.off + at:self.off + at + n])


_LIBC = None


def ioctl(fd, cmd, buf):
    """ioctl(2) through libc with @buf (RawBuf, or an address as int: the
    kernel gets exactly that pointer); returns 0 or the errno."""
    global _LIBC
    if _LIBC is None:
        _LIBC = libc()
        _LIBC.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]
        _LIBC.ioctl.restype = ctypes.c_int
    addr = buf if isinstance(buf, int) else buf.addr
    ctypes.set_errno(0)
    r = _LIBC.ioctl(fd, cmd, ctypes.c_void_p(addr))
    return ctypes.get_errno() if r < 0 else 0


def parse_stats(buf):
    size, ver, flags, res, dev, name = struct.unpack_from(HDR_FMT, buf, 0)
    c = struct.unpack_from(f"<{NCTR_SLOTS}Q", buf, HDR_SIZE)
    counters = dict(zip(STATUS_FIELDS, c))
    cells = struct.unpack_from(f"<{3 * HIST_CELLS}Q", buf, HDR_SIZE + 8 * NCTR_SLOTS)
    hist = {}
    i = 0
    for d in DIRS:
        for b in range(NBUCKETS):
            for r in ROUTES:
                for a in ALIGNS:
                    hist[(d, b, r, a)] = cells[i:i + 3]   # count, bytes, time_ns
                    i += 3
    return dict(size=size, dev=dev, name=name.rstrip(b"\0").decode(),
                counters=counters, reserved=c[len(STATUS_FIELDS):], hist=hist)


def get_stats(name=None, dev=0, reset=False, fd=None):
    """GET_STATS of a volume as a dict; raises OSError on failure."""
    own = fd is None
    if own:
        fd = os.open(CONTROL, os.O_RDONLY)
    try:
        buf = RawBuf(STATS_SIZE)
        buf.put(hdr(STATS_SIZE, name or "", dev, F_RESET if reset else 0))
        e = ioctl(fd, GET_STATS, buf)
        if e:
            raise OSError(e, os.strerror(e))
        return parse_stats(buf.get())
    finally:
        if own:
            os.close(fd)


def list_vols(fd=None):
    own = fd is None
    if own:
        fd = os.open(CONTROL, os.O_RDONLY)
    try:
        raw = RawBuf(LIST_SIZE)
        raw.put(hdr(LIST_SIZE))
        e = ioctl(fd, LIST, raw)
        if e:
            raise OSError(e, os.strerror(e))
        buf = raw.get()
        count, total = struct.unpack_from("<II", buf, HDR_SIZE)
        vols = []
        for i in range(min(count, MAX_VOLS)):
            # reserved0 was read_threshold: the kernel writes 0 there.
            dev, name, vu, sectors, wt, rsv0, mode, *rsv = struct.unpack_from(
                VOL_FMT, buf, LIST_VOLS_OFF + i * VOL_SIZE)
            vols.append(dict(dev=dev, name=name.rstrip(b"\0").decode(), uuid=vu,
                             sectors=sectors, write_threshold=wt,
                             reserved0=rsv0, mode=mode, reserved=rsv))
        return count, total, vols
    finally:
        if own:
            os.close(fd)


def hist_sum(hist, d=None, b=None, r=None, a=None, field=0):
    return sum(v[field] for (hd, hb, hr, ha), v in hist.items()
               if (d is None or hd == d) and (b is None or hb == b)
               and (r is None or hr == r) and (a is None or ha == a))


def hist_nonzero(hist, d=None):
    """{(dir, bucket, route, align): (count, bytes)} of the non-empty cells."""
    return {k: (v[0], v[1]) for k, v in hist.items()
            if v[0] and (d is None or k[0] == d)}


def bucket_of(nbytes):
    """Histogram bucket of a request size (nxd_ioctl.h: <4K, 4K, 4K+1-8K,
    ..., 16M+1-32M, >32M), computed here from the definition."""
    if nbytes < 4096:
        return 0
    if nbytes == 4096:
        return 1
    if nbytes > 32 * MiB:
        return 15
    b, hi = 2, 8192
    while nbytes > hi:
        b += 1
        hi *= 2
    return b


# -------------------------------------------------------- user memory ----

MAP_HUGETLB = 0x40000
MAP_POPULATE = 0x8000


def huge_buffer(nbytes):
    """An anonymous MAP_HUGETLB mapping of @nbytes (2 MiB pages), reserving
    hugepages if needed; None if the kernel cannot give them."""
    need = (nbytes + 2 * MiB - 1) // (2 * MiB)
    try:
        with open("/proc/sys/vm/nr_hugepages") as f:
            have = int(f.read())
        if have < need + 2:
            with open("/proc/sys/vm/nr_hugepages", "w") as f:
                f.write(str(have + need + 2))
        return mmap.mmap(-1, need * 2 * MiB,
                         flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE)
    except OSError:
        return None


def release_hugepages():
    try:
        with open("/proc/sys/vm/nr_hugepages", "w") as f:
            f.write("0")
    except OSError:
        pass


# ---------------------------------------------------------- processes ----

def as_nobody(script, timeout=120):
    """Run python3 -c @script as uid/gid 65534 with no supplementary groups
    and no capabilities; returns CompletedProcess."""
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         "python3", "-c", script],
        capture_output=True, text=True, timeout=timeout, cwd="/")


def libc():
    return ctypes.CDLL(None, use_errno=True)


EIO = errno.EIO
