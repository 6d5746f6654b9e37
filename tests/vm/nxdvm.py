# SPDX-License-Identifier: GPL-2.0
"""Helpers for the in-guest test suite (tests/vm).

Everything here runs as root inside the virtme-ng guest started by
scripts/vm-run.sh: the repository is read-only there except build/.
Test files import it as ``import nxdvm``; conftest.py builds the fixtures
on top of it.
"""

import json
import os
import re
import subprocess
import time
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, "build")
LOGS = os.environ.get("NXD_LOGS") or os.path.join(BUILD, "logs")
KVER = os.uname().release
MODULE_KO = os.environ.get("NXD_MODULE_KO", os.path.join(BUILD, KVER, "dm-nxd.ko"))
SECTOR = 512


def in_vm():
    """True inside the test guest (set by scripts/vm-run.sh)."""
    if os.environ.get("NXD_IN_VM") == "1":
        return True
    try:
        with open("/proc/cmdline") as f:
            return "virtme" in f.read()
    except OSError:
        return False


class CmdError(Exception):
    pass


def run(cmd, check=True, input=None, timeout=600, quiet=False):
    """Run @cmd (list, or str for the shell); return CompletedProcess (text).

    On failure (check=True) raises CmdError carrying the output.
    """
    shell = isinstance(cmd, str)
    p = subprocess.run(cmd, shell=shell, input=input, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    if check and p.returncode != 0:
        shown = cmd if shell else " ".join(map(str, cmd))
        raise CmdError(f"`{shown}` exited {p.returncode}\n"
                       f"stdout: {p.stdout.strip()}\nstderr: {p.stderr.strip()}")
    return p


def modprobe(name, *params, check=True):
    return run(["modprobe", name, *params], check=check)


def module_loaded(name):
    return os.path.isdir(f"/sys/module/{name.replace('-', '_')}")


def wait_for(pred, timeout=10.0, interval=0.05, what="condition"):
    """Poll @pred until true; raise TimeoutError naming @what."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def udev_settle():
    run(["udevadm", "settle", "--timeout=10"], check=False)


# ---------------------------------------------------------------- dmesg ---

# What must never show up in the kernel log during a test.
DMESG_BAD_RE = re.compile(
    r"(?i:oops)|BUG:|WARNING:|lockdep|possible circular locking|hung_task|"
    r"blocked for more than|Call Trace|general protection|KASAN|UBSAN")
MARK_PREFIX = "nxd-test:"


def find_kernel_problems(lines, allow=()):
    """Return the lines of @lines that look like a kernel problem.

    Our own marker lines are ignored (test names may contain "oops"), and
    so is any line matching one of the regexes in @allow.
    """
    allow_re = [re.compile(a) for a in allow]
    bad = []
    for line in lines:
        if MARK_PREFIX in line:
            continue
        if DMESG_BAD_RE.search(line) and not any(a.search(line) for a in allow_re):
            bad.append(line)
    return bad


def kmsg_write(text):
    """Write one line to the kernel log."""
    with open("/dev/kmsg", "w") as f:
        f.write(text.replace("\n", " ") + "\n")


def kmsg_mark(what):
    """Write a unique marker line to the kernel log; return the marker."""
    marker = f"{MARK_PREFIX} {what} [{uuid.uuid4().hex[:12]}]"
    kmsg_write(marker)
    return marker


def dmesg_lines():
    return run(["dmesg"]).stdout.splitlines()


def dmesg_since(marker):
    """Kernel log lines after the last line containing @marker.

    If the marker has scrolled out of the ring buffer, everything that is
    left is returned (and checked): better a false alarm than a miss.
    """
    lines = dmesg_lines()
    for i in range(len(lines) - 1, -1, -1):
        if marker in lines[i]:
            return lines[i + 1:]
    return lines


def safe_name(s):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s)[:150]


def save_log(name, text):
    os.makedirs(LOGS, exist_ok=True)
    path = os.path.join(LOGS, f"{KVER}-{safe_name(name)}")
    with open(path, "w") as f:
        f.write(text)
    return path


# -------------------------------------------------------------- dmsetup ---

class DMSetup:
    """Thin dmsetup wrapper.  Devices created through it are remembered and
    removed by cleanup() (the ``dm`` fixture calls it after every test)."""

    def __init__(self):
        self.created = []

    @staticmethod
    def _table(table):
        if isinstance(table, (list, tuple)):
            table = "\n".join(table)
        return table.rstrip("\n") + "\n"

    @staticmethod
    def path(name):
        return f"/dev/mapper/{name}"

    def create(self, name, table, readonly=False, uuid=None, notable=False):
        """Create @name from @table (a string or list of lines); return its path."""
        cmd = ["dmsetup", "create", name]
        if readonly:
            cmd.append("--readonly")
        if uuid:
            cmd += ["--uuid", uuid]
        if notable:
            cmd.append("--notable")
            run(cmd)
        else:
            run(cmd, input=self._table(table))
        self.created.append(name)
        wait_for(lambda: os.path.exists(self.path(name)), what=f"{self.path(name)}")
        return self.path(name)

    def remove(self, name, retry=True, force=False, deferred=False):
        cmd = ["dmsetup", "remove"]
        if retry:
            cmd.append("--retry")
        if force:
            cmd.append("--force")
        if deferred:
            cmd.append("--deferred")
        run(cmd + [name])
        if name in self.created:
            self.created.remove(name)

    def load(self, name, table):
        run(["dmsetup", "load", name], input=self._table(table))

    def suspend(self, name, noflush=False, nolockfs=False):
        cmd = ["dmsetup", "suspend"]
        if noflush:
            cmd.append("--noflush")
        if nolockfs:
            cmd.append("--nolockfs")
        run(cmd + [name])

    def resume(self, name, nosync=False):
        # nosync: do not wait for udev's probe of the device (slow on a
        # device that delays reads).
        run(["dmsetup", "resume", name] + (["--noudevsync"] if nosync else []))

    def reload(self, name, table, noflush=False, nosync=False):
        """load + suspend + resume: swap in a new table."""
        self.load(name, table)
        self.suspend(name, noflush=noflush)
        self.resume(name, nosync=nosync)

    def table(self, name):
        return run(["dmsetup", "table", name]).stdout.strip()

    def status(self, name):
        return run(["dmsetup", "status", name]).stdout.strip()

    def message(self, name, *msg, sector=0):
        return run(["dmsetup", "message", name, str(sector), *map(str, msg)]).stdout.strip()

    def info(self, name):
        """dmsetup info -c as a dict (name, major, minor, open count...)."""
        out = run(["dmsetup", "info", "-c", "--noheadings", "--separator", "|",
                   "-o", "name,major,minor,attr,open,segments,events,uuid", name]).stdout
        keys = ["name", "major", "minor", "attr", "open", "segments", "events", "uuid"]
        return dict(zip(keys, out.strip().split("|")))

    def is_suspended(self, name):
        return "SUSPENDED" in run(["dmsetup", "info", name]).stdout

    def exists(self, name):
        return run(["dmsetup", "info", name], check=False).returncode == 0

    def targets(self):
        return run(["dmsetup", "targets"]).stdout

    def cleanup(self):
        """Remove everything created here, newest first; returns errors."""
        errors = []
        for name in reversed(list(self.created)):
            if not self.exists(name):
                self.created.remove(name)
                continue
            try:
                self.remove(name)
            except CmdError as e:
                errors.append(str(e))
                try:
                    self.remove(name, force=True)
                except CmdError as e2:
                    errors.append(str(e2))
        return errors


# ------------------------------------------------------------- blk stat ---

STAT_FIELDS = ["read_ios", "read_merges", "read_sectors", "read_ticks",
               "write_ios", "write_merges", "write_sectors", "write_ticks",
               "in_flight", "io_ticks", "time_in_queue",
               "discard_ios", "discard_merges", "discard_sectors", "discard_ticks",
               "flush_ios", "flush_ticks"]


def blk_name(dev):
    """Kernel name of a block device: /dev/mapper/x -> dm-3, /dev/md100 -> md100."""
    return os.path.basename(os.path.realpath(dev))


def blk_stat(dev):
    """/sys/class/block/<dev>/stat as a dict (sectors are 512-byte units)."""
    with open(f"/sys/class/block/{blk_name(dev)}/stat") as f:
        vals = [int(v) for v in f.read().split()]
    return dict(zip(STAT_FIELDS, vals))


def io_sectors(dev):
    """(read_sectors, written_sectors) of @dev so far."""
    s = blk_stat(dev)
    return s["read_sectors"], s["write_sectors"]


def dev_size_bytes(dev):
    with open(f"/sys/class/block/{blk_name(dev)}/size") as f:
        return int(f.read()) * SECTOR


def dev_sectors(dev):
    return dev_size_bytes(dev) // SECTOR


def logical_block_size(dev):
    with open(f"/sys/class/block/{blk_name(dev)}/queue/logical_block_size") as f:
        return int(f.read())


def wipe(dev, nbytes=1 << 20, offset=0):
    """Zero @nbytes of @dev at @offset (direct I/O)."""
    bs = 1 << 20 if nbytes % (1 << 20) == 0 and offset % (1 << 20) == 0 else 4096
    run(["dd", "if=/dev/zero", f"of={dev}", f"bs={bs}", f"count={nbytes // bs}",
         f"seek={offset // bs}", "oflag=direct", "conv=fsync", "status=none"])


# ------------------------------------------------------------------ fio ---

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


# -------------------------------------------------------- block devices ---

def ensure_configfs():
    if not os.path.isdir("/sys/kernel/config/nullb"):
        modprobe("configfs", check=False)
        if not os.path.ismount("/sys/kernel/config"):
            run(["mount", "-t", "configfs", "none", "/sys/kernel/config"])


def nullb_create(size_mb=256, blocksize=512, memory_backed=1, **attrs):
    """Create a null_blk device through configfs; return (dev, folder).

    The folder is named nullbN with N unused, which newer kernels take as the
    disk name; older ones number the disk by 'index', so both are looked at.
    Extra @attrs are written before power-on (e.g. irqmode=0,
    completion_nsec=0, discard=1, submit_queues=2).
    """
    if not module_loaded("null_blk"):
        modprobe("null_blk", "nr_devices=0")
    ensure_configfs()
    root = "/sys/kernel/config/nullb"
    n = 0
    while os.path.exists(f"{root}/nullb{n}") or os.path.exists(f"/sys/block/nullb{n}"):
        n += 1
    folder = f"{root}/nullb{n}"
    os.mkdir(folder)
    try:
        settings = {"size": size_mb, "blocksize": blocksize, "memory_backed": memory_backed}
        settings.update(attrs)
        for k, v in settings.items():
            with open(f"{folder}/{k}", "w") as f:
                f.write(f"{int(v) if isinstance(v, bool) else v}\n")
        with open(f"{folder}/power", "w") as f:
            f.write("1\n")
        with open(f"{folder}/index") as f:
            index = int(f.read())
        cands = [f"/dev/nullb{n}", f"/dev/nullb{index}"]
        dev = wait_for(lambda: next((c for c in cands if os.path.exists(f"/sys/class/block/{os.path.basename(c)}")), None),
                       what=f"null_blk device for {folder}")
        wait_for(lambda: os.path.exists(dev), what=dev)
        return dev, folder
    except BaseException:
        nullb_destroy(folder)
        raise


def nullb_destroy(folder):
    if not os.path.isdir(folder):
        return
    try:
        with open(f"{folder}/power", "w") as f:
            f.write("0\n")
    except OSError:
        pass
    os.rmdir(folder)


def loop_create(size_mb=256, sector_size=None, direct_io=False, path=None):
    """A loop device over a sparse file in /tmp; return (dev, file)."""
    if not module_loaded("loop"):
        modprobe("loop", "max_loop=16")
    if path is None:
        path = f"/tmp/nxd-loop-{uuid.uuid4().hex[:8]}.img"
    with open(path, "wb") as f:
        f.truncate(size_mb << 20)
    cmd = ["losetup", "--find", "--show"]
    if sector_size:
        cmd.append(f"--sector-size={sector_size}")
    if direct_io:
        cmd.append("--direct-io=on")
    try:
        dev = run(cmd + [path]).stdout.strip()
    except BaseException:
        os.unlink(path)
        raise
    wait_for(lambda: os.path.exists(dev), what=dev)
    return dev, path


def loop_destroy(dev, path):
    for i in range(50):
        if run(["losetup", "-d", dev], check=False).returncode == 0:
            break
        time.sleep(0.1)
    if path and os.path.exists(path):
        os.unlink(path)


def md_free_minor(start=100):
    n = start
    while os.path.exists(f"/sys/block/md{n}") or os.path.exists(f"/dev/md{n}"):
        n += 1
    return n


def md_create(members, level=6, chunk_kb=64, assume_clean=True):
    """Create an md array over @members; return /dev/mdN (clean, active)."""
    modprobe("raid456" if level in (4, 5, 6) else f"raid{level}", check=False)
    dev = f"/dev/md{md_free_minor()}"
    cmd = ["mdadm", "--create", dev, "--run", "--quiet", "--metadata=1.2",
           f"--level={level}", f"--raid-devices={len(members)}", "--homehost=nxdtest"]
    if level not in (1,):
        cmd.append(f"--chunk={chunk_kb}")
    if assume_clean:
        cmd.append("--assume-clean")
    run(cmd + list(members))
    name = os.path.basename(dev)
    wait_for(lambda: os.path.exists(f"/sys/block/{name}/md/array_state"), what=f"{dev} sysfs")

    def active():
        with open(f"/sys/block/{name}/md/array_state") as f:
            return f.read().strip() in ("clean", "active", "active-idle", "write-pending")
    wait_for(active, timeout=30, what=f"{dev} to become active")
    wait_for(lambda: os.path.exists(dev), what=dev)
    return dev


def md_stop(dev):
    """Stop an md array, retrying while something (udev) still holds it."""
    last = None
    for i in range(50):
        p = run(["mdadm", "--stop", dev], check=False)
        if p.returncode == 0 or not os.path.exists(f"/sys/block/{os.path.basename(dev)}/md"):
            return
        last = p
        time.sleep(0.2)
    raise CmdError(f"mdadm --stop {dev} failed: {last.stderr.strip() if last else ''}")
