# SPDX-License-Identifier: GPL-2.0
"""Block devices of the tests: null_blk, loop and md (brd is a conftest
fixture), their sizes and I/O statistics.
"""
import contextlib
import os
import stat
import time
import uuid
from nxdt import host
from nxdt.facts import BLOCK, KiB, MiB, SECTOR
from nxdt.host import CmdError, modprobe, module_loaded, run, sh, wait_for
from nxdt.rawio import pread_dev


# -------------------------------------------------------------- blk stat ---


STAT_FIELDS = ["read_ios", "read_merges", "read_sectors", "read_ticks",
               "write_ios", "write_merges", "write_sectors", "write_ticks",
               "in_flight", "io_ticks", "time_in_queue",
               "discard_ios", "discard_merges", "discard_sectors", "discard_ticks",
               "flush_ios", "flush_ticks"]


def blk_name(dev):
    """Kernel name of a block device: /dev/mapper/x -> dm-3, /dev/md100 ->
    md100, a node made by mknod anywhere (dmlib.DMIoctl) -> dm-N."""
    try:
        st = os.stat(dev)
    except OSError:
        return os.path.basename(os.path.realpath(dev))
    if not stat.S_ISBLK(st.st_mode):
        return os.path.basename(os.path.realpath(dev))
    return os.path.basename(os.path.realpath(
        f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"))


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


def disk_stat(dev):
    """(read_sectors, write_sectors, read_ios, write_ios) of a block device."""
    name = os.path.basename(os.path.realpath(dev))
    with open(f"/sys/block/{name}/stat") as f:
        v = [int(x) for x in f.read().split()]
    return v[2], v[6], v[0], v[4]


def discard_zeroes(dev):
    """Whether a discard of @dev (e.g. /dev/loop0) leaves zeros: only if it
    takes discards at all (a loop file on 9p does not; then a discard is a
    no-op that the block layer allows, and the model's zeros would not hold)."""
    name = os.path.basename(os.path.realpath(dev))
    try:
        with open(f"/sys/block/{name}/queue/discard_max_bytes") as f:
            return int(f.read()) > 0
    except OSError:
        return False

# ---------------------------------------------------- null_blk, loop, md ---


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


def md_no_auto_assembly():
    """AUTO -all in the guest's mdadm.conf (its /etc is a private overlay):
    udev's incremental assembly (64-md-raid-assembly.rules) would grab the
    members of a stopped array and start it as md127 behind our back."""
    os.makedirs("/etc/mdadm", exist_ok=True)
    conf = "/etc/mdadm/mdadm.conf"
    text = open(conf).read() if os.path.exists(conf) else ""
    if "AUTO -all" not in text:
        with open(conf, "a") as f:
            f.write("\n# tests/vm: no udev auto-assembly\nAUTO -all\n")


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


def copy_dev(src, dst, nbytes):
    run(["dd", f"if={src}", f"of={dst}", "bs=1M", f"count={nbytes // MiB}",
         "iflag=direct", "oflag=direct", "conv=fsync", "status=none"])


def loop_bytes(nbytes, made):
    """A loop device of exactly @nbytes (any multiple of 512) over /tmp;
    appended to @made as (dev, path) for loop_destroy."""
    host.modprobe("loop", check=False)
    path = f"/tmp/nxd-aux-{os.getpid()}-{len(made)}-{time.monotonic_ns()}.img"
    with open(path, "wb") as f:
        f.truncate(nbytes)
    dev = run(["losetup", "--find", "--show", path]).stdout.strip()
    made.append((dev, path))
    host.wait_for(lambda: os.path.exists(dev), what=dev)
    return dev

# --------- device objects (test_datapath, test_destage, the crash tests) ---


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


def queue_attr(dev, attr):
    with open(f"/sys/block/{blk_name(dev)}/queue/{attr}") as f:
        return int(f.read())


def md_grow_members(md, members, new_mb):
    """Enlarge every loop member of @md to @new_mb and let md use it all."""
    for m in members:
        with open(f"/sys/block/{os.path.basename(m)}/loop/backing_file") as f:
            path = f.read().strip()
        os.truncate(path, new_mb * MiB)
        run(["losetup", "-c", m])
    before = dev_sectors(md)
    p = run(["mdadm", "--grow", md, "--size=max", "--assume-clean"], check=False)
    if p.returncode != 0:       # older mdadm: grow, then wait for the resync
        run(["mdadm", "--grow", md, "--size=max"])
        run(["mdadm", "--wait", md], check=False)
    host.wait_for(lambda: dev_sectors(md) > before, timeout=30,
                   what=f"{md} to grow")
    return dev_sectors(md)


def grow_loop(dev, new_mb):
    """The loop device @dev's backing file made @new_mb MiB, the device
    told (losetup -c), waited for until it is larger."""
    with open(f"/sys/block/{os.path.basename(dev)}/loop/backing_file") as f:
        path = f.read().strip()
    before = dev_sectors(dev)
    os.truncate(path, new_mb * MiB)
    run(["losetup", "-c", dev])
    host.wait_for(lambda: dev_sectors(dev) > before, what=f"{dev} to grow")


def settle(*devs, check=True):
    """A change event for @devs and a settled udev queue."""
    for d in devs:
        run(["udevadm", "trigger", "--action=change", "--settle", d], check=check)
    host.udev_settle()


def disk_link(kind, value):
    """Where /dev/disk/by-KIND/VALUE points, or None."""
    p = f"/dev/disk/by-{kind}/{value}"
    return os.path.realpath(p) if os.path.lexists(p) else None


def dev_snapshot(dev):
    """The parts of a device nxd could write at table load: the first 64 KiB
    (SSD superblocks, start of the ring) and the last 2 MiB (HDD label
    area).  Kept as bytes: hashing 2 MiB took 0.06 s in the guest."""
    size = dev_size_bytes(dev)
    head = pread_dev(dev, 0, min(64 * KiB, size))
    tail = min(2 * MiB, size)
    off = (size - tail) // BLOCK * BLOCK
    return head + pread_dev(dev, off, size - off)
