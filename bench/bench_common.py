"""dm-nxd benchmark, guest side: paths, constants and the shell helpers
shared by bench_guest.py and its modules (python3 standard library only)."""

import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = os.path.join(REPO, "fio-jobs")
KVER = os.uname().release
HDDSIM_KO = os.path.join(REPO, "build", KVER, "hddsim", "dm-hddsim.ko")
NXD_KO = os.environ.get("NXD_KO", os.path.join(REPO, "build", KVER, "dm-nxd.ko"))
MKRAID = os.path.join(REPO, "bench", "mkraid.sh")
# The shared test helpers (nxdt): bench_systems imports nxdt.facts.
sys.path.insert(0, os.path.join(REPO, "tests", "vm"))

KiB, MiB = 1024, 1 << 20


def stall_seconds(tl, start, end):
    """Whole seconds of (start, end] in which nothing completed, from fio's
    IOPS log at log_avg_msec=1000 ([t, iops] pairs): an entry of 0, or a
    gap between entries (or the run's ends) of 2 s or more, each second
    beyond the first.  fio's entries drift by 0.1 s now and then (1.1 s
    steps), which is no stall."""
    n, prev = 0, start
    for t, v in tl:
        if t <= start or t > end:
            continue
        n += max(0, int(t - prev + 0.5) - 1) + (v == 0)
        prev = t
    return n + max(0, int(end - prev + 0.5) - 1)

T0 = time.time()


def log(msg):
    print("bench: [%5.0fs] %s" % (time.time() - T0, msg), flush=True)


def sh(cmd, check=True, timeout=300, env=None, quiet=False):
    """Run a shell command, return its stdout (stripped)."""
    p = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=timeout,
                       env=env)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (cmd, p.returncode,
                                                (p.stderr or p.stdout).strip()[-800:]))
    if not quiet and p.returncode != 0:
        log("(ignored) %s: exit %d %s" % (cmd, p.returncode, p.stderr.strip()[-300:]))
    return p.stdout.strip()


def settle():
    sh("udevadm settle --timeout=60", check=False, quiet=True)


def sectors(dev):
    return int(sh("blockdev --getsz %s" % dev))


def zero(dev, mib, seek_mib=0):
    sh("dd if=/dev/zero of=%s bs=1M count=%d seek=%d oflag=direct status=none"
       % (dev, mib, seek_mib), timeout=600)


def modules_loaded():
    return open("/proc/modules").read()


def wait_for(pred, timeout, step=0.5):
    """Poll pred() until it is true or timeout seconds passed: its last value."""
    end = time.time() + timeout
    while True:
        v = pred()
        if v or time.time() >= end:
            return v
        time.sleep(step)


def base_id(jid):
    """A round's job id without its -r<round>, else @jid."""
    head, sep, tail = jid.rpartition("-r")
    return head if sep and tail.isdigit() else jid
