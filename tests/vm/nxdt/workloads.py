# SPDX-License-Identifier: GPL-2.0
"""Workloads with their own model: the differential tester (test_datapath,
test_destage), the crash tests' seeded op stream (its sequence depends on
the seed only), and fio.
"""
import errno
import json
import os
import random
import threading
import time
from nxdt import nxdvol, rawio
from nxdt.facts import BLOCK, MiB, SECTOR
from nxdt.host import run
from nxdt.models import first_diff, Model, op_is_write
from nxdt.nxdvol import Volume, module_param
from nxdt.rawio import DirectIO, discard, pread_direct, pwrite_direct, read_all, zeroout


# --------------------------------------------------- differential tester ---


def seed_hdd(hdd, size, seed):
    """Write @size bytes of a seeded pattern at the start of the data area
    a volume created over the raw HDD @hdd afterwards will have, and return
    them: that volume's independent initial content (a blank SSD holds
    nothing over it)."""
    data = random.Random(seed).randbytes(size)
    base = nxdvol.new_data_offset(hdd)
    with rawio.Fd(hdd) as f:
        for off in range(0, size, 4 * MiB):
            f.pwrite(base + off, data[off:off + 4 * MiB])
        f.fsync()
    return data


def assert_healthy(vol):
    """@vol is not degraded and counted no error: a differential run that
    verified its data but made nxd fail an I/O (or give its log up) is a
    failure too."""
    st = vol.status()
    bad = {k: st[k] for k in ("degraded", "ssd_errors", "hdd_errors", "acked_lost") if st[k]}
    assert st["state"] == "ok" and not bad, f"{vol.name}: state {st['state']}, {bad}: {st}"
    return st


class DiffTester:
    """Seeded random reads, writes, overwrites, discards and flushes through a
    device, checked byte for byte against an in-memory model.

    `size` bytes of the device are used.  @initial is what they hold before
    the first op, as the caller knows it from what it wrote (seed_hdd()
    before the volume was created), never read from the device under test.
    Discards are expected to read back as zeros (the HDD must zero on
    discard: loop over a file does).
    """

    def __init__(self, dev, size, seed, initial, max_io=4 << 20, hot=None):
        assert len(initial) == size, (len(initial), size)
        self.dev, self.size, self.seed = dev, size, seed
        self.rng = random.Random(seed)
        self.max_io = max_io
        self.hot = hot or size  # region most writes land in, to force overwrites
        self.fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
        self.model = bytearray(initial)
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

# -------------------------------------------------------- crash workload ---


def gen_ops(seed, size, hot=2 << 20, dm_msgs=True):
    """Endless seeded op stream (depends on the arguments only):
    ("w", off, data) ("s", off, data) [O_DSYNC] ("d", off, n) ("f",)
    ("r", off, n) ("m", message) [dm message to nxd]."""
    r = random.Random(seed)
    sizes_small = [512, 1024, 1536, 3584, 4096, 4096, 4096, 4608, 8192, 12288,
                   16384, 32768, 65536, 65536 + 512]
    sizes_big = [69632, 131072, 262144, 524288, 1 << 20, None]

    def extent(small_bias):
        if r.random() < small_bias:
            n = r.choice(sizes_small)
        else:
            n = r.choice(sizes_big) or r.randrange(1, 2048) * SECTOR
        n = min(n, size)
        span = hot if r.random() < 0.8 else size
        span = max(min(span, size), n)
        if r.random() < 0.6:
            off = r.randrange(0, (span - n) // BLOCK + 1) * BLOCK
        else:
            off = r.randrange(0, (span - n) // SECTOR + 1) * SECTOR
        return off, n

    while True:
        x = r.random()
        if x < 0.42:
            off, n = extent(0.65)
            yield ("w", off, r.randbytes(n))
        elif x < 0.48:
            off, n = extent(0.6)
            yield ("s", off, r.randbytes(n))
        elif x < 0.56:
            off, n = extent(0.4)
            yield ("d", off, n)
        elif x < 0.64:
            yield ("f",)
        elif x < 0.98 or not dm_msgs:
            off, n = extent(0.5)
            yield ("r", off, n)
        else:
            yield ("m", r.choice(["pause_destage", "resume_destage",
                                  "resume_destage"]))


class Workload:
    """Runs gen_ops against an nxd device, verifying reads against the model.

    on_durable(k) is called after every completed fsync and O_DSYNC write
    (durability point k, counting from 1); `events` records every op that
    changes data, `durable` the index in `events` at each durability point.
    Set `stop_verify` (a threading.Event) to stop verifying reads and
    sending dm messages."""

    def __init__(self, dev, size, seed, dm=None, nxd_name=None, hot=2 << 20,
                 on_durable=None, stop_verify=None, model=None, zero_discards=False):
        self.dev, self.size, self.seed = dev, size, seed
        self.zero_discards = zero_discards   # "d" ops as BLKZEROOUT
        self.ops = gen_ops(seed, size, hot, dm_msgs=dm is not None)
        self.dm, self.nxd_name = dm, nxd_name
        self.on_durable = on_durable
        self.stop_verify = stop_verify
        self.model = model or Model(size)
        self.fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
        self.fds = os.open(dev, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
        self.dio = DirectIO()
        self.events = []        # data-changing ops, in completion order
        self.durable = []       # (len(events) at point k, monotonic time)
        self.counts = {"w": 0, "s": 0, "d": 0, "f": 0, "r": 0, "m": 0}
        self.bytes_verified = 0
        self.nop = 0
        self.recent = []        # last ops, for hang reports
        self.tolerate_eio = False   # EIO from writes and fsyncs is counted, not raised

    def close(self):
        os.close(self.fd)
        os.close(self.fds)

    def _durable(self):
        self.durable.append((len(self.events), time.monotonic()))
        if self.on_durable:
            self.on_durable(len(self.durable))

    def step(self):
        op = next(self.ops)
        k = op[0]
        self.nop += 1
        self.recent = self.recent[-15:] + [
            (self.nop, k) + tuple(len(x) if isinstance(x, bytes) else x for x in op[1:])]
        self.counts[k] += 1
        try:
            if k == "w":
                self.dio.pwrite(self.fd, op[1], op[2])
            elif k == "s":
                self.dio.pwrite(self.fds, op[1], op[2])
            elif k == "d":
                (zeroout if self.zero_discards else discard)(self.fd, op[1], op[2])
            elif k == "f":
                os.fsync(self.fd)
        except OSError as e:
            if e.errno != errno.EIO or not self.tolerate_eio:
                raise
            # Failed, so not durable; it may still have landed in part.
            self.counts["eio"] = self.counts.get("eio", 0) + 1
            if op_is_write(op):
                self.model.apply(op)
                self.events.append(op)
            return op
        if k == "r":
            if self.stop_verify is not None and self.stop_verify.is_set():
                return op
            got = self.dio.pread(self.fd, op[1], op[2])
            want = bytes(self.model.latest[op[1]:op[1] + op[2]])
            if got != want:
                bad = next(i for i in range(op[2]) if got[i] != want[i])
                raise AssertionError(
                    f"seed {self.seed} op {self.nop}: live read {op[1]}+{op[2]} "
                    f"differs at byte {op[1] + bad} (sector {(op[1] + bad) // 512})")
            self.bytes_verified += op[2]
        elif k == "m":
            if self.dm and self.nxd_name and not (self.stop_verify and self.stop_verify.is_set()):
                self.dm.message(self.nxd_name, op[1])
        if op_is_write(op):
            self.model.apply(op)
            self.events.append(op)
        if k in ("f", "s"):
            self._durable()
        return op

    def run(self, nops):
        for _ in range(nops):
            self.step()

    def final_sync(self):
        try:
            os.fsync(self.fd)
        except OSError as e:
            # Same rule as step(): a tolerated EIO is counted, not durable.
            if e.errno != errno.EIO or not self.tolerate_eio:
                raise
            self.counts["eio"] = self.counts.get("eio", 0) + 1
            return
        self._durable()

    def verify_all(self):
        got = self.dio.read_all(self.dev, self.size)
        if got != self.model.latest:
            bad = first_diff(got, self.model.latest)
            raise AssertionError(f"seed {self.seed}: full verify differs at byte {bad} "
                                 f"(sector {bad // 512})")
        self.bytes_verified += self.size

# ------------------------------------------------------------------- fio ---


def run_fio(filename=None, name="job", jobfile=None, timeout=900, **opts):
    """Run fio with --output-format=json and return the parsed result.

    Either @jobfile (path; @filename, if given, overrides its filename=) or
    keyword options turned into --key=value (True -> --key; use fio's own
    option names: rw, bs, size, iodepth, ioengine, direct, runtime,
    time_based, numjobs, verify, ...).  Defaults: ioengine=libaio, direct=1.
    """
    cmd = ["fio", "--output-format=json"]
    if jobfile:
        cmd.append(jobfile)
        if filename:
            cmd.append(f"--filename={filename}")
    else:
        base = {"name": name, "ioengine": "libaio", "direct": 1}
        base.update(opts)
        if filename:
            base["filename"] = filename
        for k, v in base.items():
            if v is True:
                cmd.append(f"--{k}")
            elif v is not None and v is not False:
                cmd.append(f"--{k}={v}")
    p = run(cmd, timeout=timeout)
    return parse_fio_json(p.stdout)


def parse_fio_json(text):
    """fio may print notes before the JSON document: skip to the first '{'."""
    start = text.find("{")
    if start < 0:
        raise ValueError(f"no JSON in fio output: {text[:500]!r}")
    return json.loads(text[start:])


def fio_summary(result):
    """Totals over all jobs: iops, bandwidth (KiB/s), bytes, mean latency (us)."""
    out = {}
    for d in ("read", "write", "trim"):
        iops = sum(j[d]["iops"] for j in result["jobs"])
        bw = sum(j[d]["bw"] for j in result["jobs"])
        io = sum(j[d]["io_bytes"] for j in result["jobs"])
        lat = [j[d].get("clat_ns", {}).get("mean", 0) for j in result["jobs"] if j[d]["total_ios"]]
        out[d] = {"iops": iops, "bw_kib": bw, "io_bytes": io,
                  "clat_mean_us": (sum(lat) / len(lat) / 1000.0) if lat else 0.0}
    out["errors"] = sum(j.get("error", 0) for j in result["jobs"])
    return out


def pattern(tag, i, n):
    """@n bytes of "TAG:IIIIII:" repeated: data that names where it belongs."""
    unit = f"{tag}:{i:06d}:".encode()
    return (unit * (n // len(unit) + 1))[:n]


def fill(vol, seed, nbytes=4 * MiB):
    """Write a model through @vol: a direct (HDD) base pattern, then logged
    4 KiB and 512 B writes over it.  Returns the model (first @nbytes)."""
    rng = random.Random(seed)
    model = bytearray(rng.randbytes(nbytes))
    with rawio.Fd(vol.dev) as f:
        for off in range(0, nbytes, MiB):
            f.pwrite(off, bytes(model[off:off + MiB]))
        for _ in range(48):
            off = rng.randrange(nbytes // BLOCK) * BLOCK
            d = rng.randbytes(BLOCK)
            f.pwrite(off, d)
            model[off:off + BLOCK] = d
        for _ in range(16):
            off = rng.randrange(nbytes // SECTOR) * SECTOR
            d = rng.randbytes(SECTOR)
            f.pwrite(off, d)
            model[off:off + SECTOR] = d
        f.fsync()
    return model


def check(vol, model):
    """The first len(@model) bytes of @vol are @model."""
    with rawio.Fd(vol.dev, write=False) as f:
        got = f.pread(0, len(model))
    if got != bytes(model):
        bad = next(i for i in range(len(model)) if got[i] != model[i])
        raise AssertionError(f"{vol.name}: data differs at byte {bad} (block {bad // BLOCK})")


# Segment-level corruption.  Twelve 8 KiB writes, each its own segment
# (sequential O_DIRECT writes: the writer commits each before the next
# arrives), over blocks chosen so that later ones overwrite earlier ones.
SEG_WRITES = [0, 2, 4, 0, 6, 2, 8, 4, 10, 0, 12, 6]   # first block of each


def seg_setup(dm, hdd, ssd, name, seed):
    """Volume with a 1 MiB HDD base pattern and the twelve logged writes.
    Returns (vol, base, writes) with writes[i] = (off, data).  Each write
    ends 512 bytes short of its second block, and direct_partial is off:
    it goes through the writer's checksummed batches, one segment each (on
    the direct path: ORDERED segments, no data checksum, several writes a
    segment)."""
    rng = random.Random(seed)
    v = Volume(dm, name, hdd, ssd)
    v.pause()
    base = rng.randbytes(MiB)
    writes = []
    with rawio.Fd(v.dev) as f, module_param("direct_partial", "N"):
        f.pwrite(0, base)                       # 1 MiB aligned: HDD, not logged
        f.fsync()
        assert v.status()["index_entries"] == 0
        for blk in SEG_WRITES:
            d = rng.randbytes(2 * BLOCK - 512)
            f.pwrite(blk * BLOCK, d)
            writes.append((blk * BLOCK, d))
        f.fsync()
    return v, base, writes


def seg_expect(base, writes):
    m = bytearray(base)
    for off, d in writes:
        m[off:off + len(d)] = d
    return m


class BgWrites:
    """A test's writes in threads of their own, each on its own O_DIRECT fd
    of @dev, so that one can be in flight while the next is sent.  Errors
    are kept for the test to assert on; done[tag] is what @after() (if
    given) returned when that write completed, else True."""

    def __init__(self, dev, after=None):
        self.dev, self.after = dev, after
        self.errors, self.done = [], {}

    def start(self, off, data, tag=None):
        t = threading.Thread(target=self._run, args=(tag, off, data), daemon=True)
        t.start()
        return t

    def join(self, *threads, timeout=60):
        """Wait for the writes of @threads; none may have failed."""
        for t in threads:
            t.join(timeout)
        assert not self.errors, self.errors

    def _run(self, tag, off, data):
        try:
            with rawio.Fd(self.dev) as f:
                f.pwrite(off, data)
            self.done[tag] = self.after() if self.after else True
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)


class BlockWriter:
    """A thread that writes fresh random data, @nblk 4 KiB blocks a write,
    to blocks [@first, @first + @span) of @dev in turn until stop(): a
    foreground load that keeps a write in flight.  model holds what each
    block it wrote was last written."""

    def __init__(self, dev, first, span, nblk=1):
        self.dev, self.first, self.span, self.nblk = dev, first, span, nblk
        self.model, self.writes = {}, 0
        self._stop = threading.Event()
        self._th = None

    def _run(self):
        b = self.first
        with rawio.Fd(self.dev) as f:
            while not self._stop.is_set():
                d = os.urandom(self.nblk * BLOCK)
                f.pwrite(b * BLOCK, d)
                for j in range(self.nblk):
                    self.model[b + j] = d[j * BLOCK:(j + 1) * BLOCK]
                self.writes += 1
                b = self.first + (b - self.first + self.nblk) % self.span

    def start(self):
        self._th = threading.Thread(target=self._run, daemon=True)
        self._th.start()
        return self

    def stop(self):
        self._stop.set()
        if self._th is not None:
            self._th.join()
            self._th = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()


def check_blocks_then_hdd(vol, hdd_dev, model):
    """Every 4 KiB block of @model ({block: data}) reads back from @vol, and
    once @vol is removed, from the HDD @hdd_dev alone."""
    with rawio.Fd(vol.dev, write=False) as f:
        for b, d in model.items():
            assert f.pread(b * BLOCK, BLOCK) == d, f"block {b}"
    vol.remove()
    off = nxdvol.hdd_data_offset(hdd_dev)
    for b, d in model.items():
        assert rawio.pread_dev(hdd_dev, off + b * BLOCK, BLOCK) == d, f"HDD block {b}"
