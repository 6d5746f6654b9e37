# SPDX-License-Identifier: GPL-2.0
"""Host commands in the test guest: running a command, modules, waiting,
the kernel log (markers, problem lines) and the logs kept for a test.
"""
import contextlib
import ctypes
import os
import re
import subprocess
import time
import uuid


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


BUILD = os.path.join(REPO, "build")


LOGS = os.environ.get("NXD_LOGS") or os.path.join(BUILD, "logs")


KVER = os.uname().release


MODULE_KO = os.environ.get("NXD_MODULE_KO", os.path.join(BUILD, KVER, "dm-nxd.ko"))


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


def udev_settle(timeout=10):
    """True once udev's queue is empty, False after timeout seconds."""
    return run(["udevadm", "settle", f"--timeout={timeout}"], check=False).returncode == 0


UDEVD = "/lib/systemd/systemd-udevd"


@contextlib.contextmanager
def udev_stopped():
    """systemd-udevd stopped while the block runs, started again after it.

    For tests that make and drop hundreds of dm devices by ioctl, whose
    nodes they make themselves (dmlib.DMIoctl): udevd handles one uevent in
    about 0.3-0.45 s under TCG whatever its rules say (a rule that ends
    their processing at once saved nothing), so a crash replay left minutes
    of work that the next udev-synced create waited for.  With udevd gone
    the kernel's uevents reach no one.  Nothing in the block may wait for
    udev (dmsetup or libdevmapper with udev sync, /dev/disk links)."""
    run(["udevadm", "settle", "--timeout=60"], check=False)
    run(["udevadm", "control", "--exit"], check=False)
    try:
        yield
    finally:
        subprocess.run([UDEVD, "--daemon"], check=False)
        wait_for(lambda: os.path.exists("/run/udev/control"), timeout=30,
                 what="systemd-udevd started again")
        udev_settle()


def sh(cmd, check=True, input=None):
    """Run a shell command, return stdout (text)."""
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True,
                       input=input)
    if check and p.returncode != 0:
        raise RuntimeError(f"{cmd!r} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout

# ----------------------------------------------------------------- dmesg ---


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


_KMSG_ESC = re.compile(rb"\\x([0-9a-f]{2})")


def _kmsg_unescape(m):
    """As dmesg(1) in the C locale: tab, newline and printable ASCII are
    printed, any other byte stays \\xNN."""
    c = int(m.group(1), 16)
    return bytes([c]) if c in (9, 10) or 32 <= c < 127 else m.group(0)


def dmesg_lines():
    """The kernel log as `dmesg` prints it ("[  secs.usecs] text", escapes
    undone, a record's further lines indented), read from /dev/kmsg here:
    dmesg(1) reads the same records, and a process spawn costs about 0.3 s
    in the guest, several times a test."""
    lines = []
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:     # overwritten while read: go on
                continue
            head, _, text = rec.partition(b";")
            fields = head.split(b",")
            usec = int(fields[2]) if len(fields) > 2 and fields[2].isdigit() else 0
            text = _KMSG_ESC.sub(_kmsg_unescape, text.split(b"\n", 1)[0])
            stamp = f"[{usec // 1000000:5d}.{usec % 1000000:06d}] "
            for i, ln in enumerate(text.decode("utf-8", "replace").split("\n")):
                lines.append((stamp if i == 0 else " " * len(stamp)) + ln)
    finally:
        os.close(fd)
    return lines


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


def wait_kmsg(marker, regex, timeout=5.0):
    """Kernel log lines after @marker matching @regex (waits a little)."""
    rx = re.compile(regex) if isinstance(regex, str) else regex
    end = time.monotonic() + timeout
    while True:
        hits = [ln for ln in dmesg_since(marker) if rx.search(ln)]
        if hits or time.monotonic() > end:
            return hits
        time.sleep(0.1)

# ------------------------------------------------------------- processes ---


def as_nobody(script, timeout=120):
    """Run python3 -c @script as uid/gid 65534 with no supplementary groups
    and no capabilities; returns CompletedProcess."""
    return subprocess.run(
        ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
         "python3", "-c", script],
        capture_output=True, text=True, timeout=timeout, cwd="/")


def libc():
    return ctypes.CDLL(None, use_errno=True)


class Kmsg:
    """Kernel log lines written after construction."""

    def __init__(self, what):
        self.marker = kmsg_mark(what)

    def lines(self):
        return dmesg_since(self.marker)

    def grep(self, regex):
        r = re.compile(regex)
        return [ln for ln in self.lines() if r.search(ln)]


# ------------------------------------------- logs of the crash tests ---


def summary(fname, line):
    print(line, flush=True)
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(LOGS, f"{KVER}-{fname}"), "a") as f:
        f.write(f"{time.strftime('%F %T')} {line}\n")


def dmesg_tail(n=15):
    return "\n".join(dmesg_lines()[-n:])


def progress(line):
    os.makedirs(LOGS, exist_ok=True)
    with open(os.path.join(LOGS, f"{KVER}-crash-progress.txt"), "a") as f:
        f.write(f"{time.strftime('%T')} {line}\n")
