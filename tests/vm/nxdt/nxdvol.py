# SPDX-License-Identifier: GPL-2.0
"""The one place that knows nxd's table line, its sysfs directory, its
kernel messages and the volume class.

 - nxd_line(hdd, ssd, length=None, opts=None): the table line (the only
   builder); @opts a list of words or a string of them;
 - Volume: an nxd volume through any dmlib client (DMSetup, DMIoctl);
 - table_opts(), table_with(): read and edit a table line's options;
 - sysfs_path(), nxd_sysfs(): the volume's sysfs directory by its node.
"""
import contextlib
import os
import re
from nxdt import blkdev, ctl, host, rawio
from nxdt.dmlib import DMError
from nxdt.facts import data_sectors, parse_status, SECTOR, TUNABLES
from nxdt.host import run, wait_kmsg


# -------------------------------------------------------------- geometry ---


LABEL_MAGIC = (0x314c4448445f584e).to_bytes(8, "little")  # the HDD label's
DATA_OFFSET_MIN = 2048          # sectors: version 2's data area starts
DATA_OFFSET_MAX = 1 << 19       # at least 1 MiB in, at most 256 MiB


def label_offset(hdd_sectors):
    """Byte offset of a version 1 label (the last MiB of the HDD)."""
    return data_sectors(hdd_sectors) * SECTOR


def data_offset_for(io_opt):
    """Sectors a new (version 2) volume's data area starts at on an HDD of
    optimal I/O size @io_opt bytes: the smallest multiple of the stripe
    (in whole 4 KiB blocks) from 1 MiB, as docs/on-disk-format.md says."""
    a = io_opt // SECTOR
    if not a or a > DATA_OFFSET_MAX:
        return DATA_OFFSET_MIN
    if a % 8:
        a *= 8
    off = -(-DATA_OFFSET_MIN // a) * a
    return off if off <= DATA_OFFSET_MAX else DATA_OFFSET_MIN


def new_data_offset(hdd):
    """Byte offset the data area of a volume formatted now on the
    unlabelled HDD @hdd will have."""
    return data_offset_for(blkdev.queue_attr(hdd, "optimal_io_size")) * SECTOR


def _v2_label(hdd):
    blk = rawio.pread_dev(hdd, 0, 4096)
    if blk[:8] != LABEL_MAGIC:
        return None
    if int.from_bytes(blk[12:16], "little") != 2:
        return None
    return blk


def hdd_data_offset(hdd):
    """Byte offset of the data area on the HDD of a volume: the version 2
    label's data_offset (label bytes 4016-4023), 0 for version 1."""
    blk = _v2_label(hdd)
    return int.from_bytes(blk[4016:4024], "little") * SECTOR if blk else 0


def hdd_label_offset(hdd):
    """Byte offset of the volume's HDD label: block 0 (version 2) or the
    last MiB (version 1)."""
    return 0 if _v2_label(hdd) else label_offset(blkdev.dev_sectors(hdd))

# --------------------------------------------------- table line, volumes ---


def _words(opts):
    if isinstance(opts, str):
        return opts.split()
    return [str(w) for w in (opts or [])]


def nxd_line(hdd, ssd, length=None, opts=None):
    """Table line of an nxd volume over @hdd and @ssd (paths or
    major:minor), @length sectors long (default: the longest @hdd holds,
    which needs a path); @opts a list of words or a string (the count is
    added)."""
    if length is None:
        length = data_sectors(blkdev.dev_sectors(hdd))
    words = _words(opts)
    extra = f" {len(words)} {' '.join(words)}" if words else ""
    return f"0 {length} nxd {hdd} {ssd}{extra}"


def sysfs_path(dev, key=None):
    """nxd's sysfs directory of the volume whose node is @dev (or @key's
    file in it)."""
    d = f"/sys/block/{blkdev.blk_name(dev)}/nxd"
    return d if key is None else f"{d}/{key}"


class Volume:
    """An nxd volume made through the dmlib client @dm (a DMSetup: the
    conftest dm fixture removes it if the test does not).  Its length
    defaults to the longest @hdd holds (size read from sysfs); @opts a
    list of words or a string.  After create, udev is settled (as both
    old classes did)."""

    def __init__(self, dm, name, hdd, ssd, opts=None, length=None):
        self.dm, self.name, self.hdd, self.ssd = dm, name, hdd, ssd
        self.length = data_sectors(blkdev.dev_sectors(hdd)) if length is None else length
        self.opts = _words(opts)
        self.dev = None
        self.create()

    def create(self):
        self.dev = self.dm.create(self.name, self.line())
        host.udev_settle()
        return self.dev

    @property
    def size(self):
        return self.length * SECTOR

    def line(self, opts=None):
        return nxd_line(self.hdd, self.ssd, self.length, self.opts if opts is None else opts)

    def remove(self):
        self.dm.remove(self.name)

    def recreate(self, opts=None):
        """Remove (if it exists) and create again, with @opts if given."""
        self.dm.remove(self.name, missing_ok=True)
        if opts is not None:
            self.opts = _words(opts)
        return self.create()

    def message(self, *msg):
        return self.dm.message(self.name, *msg)

    def pause(self):
        self.message("pause_destage")

    def drain(self):
        self.message("drain")

    def status(self):
        return parse_status(self.dm.status(self.name))

    def table(self):
        return self.dm.table(self.name)

    def kname(self):
        return blkdev.blk_name(self.dev)

    def sysfs(self, key=None):
        return sysfs_path(self.dev, key)

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

# ------------------------------------------------------- kernel messages ---


def table_error_re(msg_re):
    """How dm core logs a constructor's ti->error."""
    return re.compile(r"device-mapper: table: \S+: nxd: " + msg_re)


RECOVERED_RE = re.compile(r"recovered (\d+) segments, (\d+) blocks in \d+ us \([^)]*\), (\d+) entries")


def recovered_entries(marker):
    """Index entries the last recovery after @marker reported (its kernel
    message): the count at load, before the destager, which may run at
    once (idle HDD), could change it."""
    hits = wait_kmsg(marker, RECOVERED_RE)
    assert hits, "no recovery message"
    return int(RECOVERED_RE.search(hits[-1]).group(3))


def nxd_sysfs(dev, key, value=None):
    path = sysfs_path(dev, key)
    if value is not None:
        with open(path, "w") as f:
            f.write(f"{value}\n")
    with open(path) as f:
        return f.read().strip()


@contextlib.contextmanager
def module_param(name, value):
    """dm-nxd's module parameter @name set to @value for the block, then
    put back as it was."""
    path = f"/sys/module/dm_nxd/parameters/{name}"
    with open(path) as f:
        old = f.read().strip()
    with open(path, "w") as f:
        f.write(str(value))
    try:
        yield
    finally:
        with open(path, "w") as f:
            f.write(old)


def nxd_sysfs_dirs():
    return sorted(d for d in os.listdir("/sys/block")
                  if d.startswith("dm-") and os.path.isdir(f"/sys/block/{d}/nxd"))


def refuse(dm, line, msg_re, devs=(), name="nxdbad", load=None):
    """dm.create() (or, with @load, dm.load() into the existing device
    @load) of @line must fail with @msg_re logged by dm core for the
    nxd constructor, and change nothing.  Returns the matching log lines."""
    before = {d: blkdev.dev_snapshot(d) for d in devs}
    nvols = ctl.list_vols()[1]
    sysdirs = nxd_sysfs_dirs()
    marker = host.kmsg_mark(f"refuse {line}")
    try:
        if load:
            dm.load(load, line)
        else:
            dm.create(name, line)       # if accepted, the dm fixture removes it
        accepted = True
    except DMError:
        accepted = False
    host.udev_settle()
    hits = host.wait_kmsg(marker, table_error_re(msg_re))
    log = "\n".join(host.dmesg_since(marker))
    assert not accepted, f"table accepted: {line}"
    assert hits, f"no 'nxd: {msg_re}' in the kernel log for {line!r}:\n{log}"
    if load:
        info = run(["dmsetup", "info", load]).stdout
        assert "Tables present:" in info and "INACTIVE" not in info, info
    else:
        assert not dm.exists(name), f"{name} left behind by a refused table"
        assert not os.path.exists(f"/dev/mapper/{name}")
    assert ctl.list_vols()[1] == nvols, "an nxd volume was left behind"
    assert nxd_sysfs_dirs() == sysdirs
    for d in devs:
        same = blkdev.dev_snapshot(d) == before[d]    # pytest would diff 2 MiB
        assert same, f"refused table {line!r} modified {d}"
    return host.dmesg_since(marker)
