# SPDX-License-Identifier: GPL-2.0
"""The admin lifecycle for test_lifecycle.py: nxdctl and udev from a test,
the files a volume leaves on the host (Files), a writer kept running
across reloads (Writer)."""
import hashlib
import os
import random
import re
import threading
import time

from nxdt import facts, host
from nxdt.ctl import nxdctl
from nxdt.facts import MiB
from nxdt.host import run


MNT = "/tmp/nxd-lc-mnt"
NAME = "lc0"


def table(dm, name=NAME):
    w = dm.table(name).split()
    return {"len": int(w[1]), "type": w[2], "args": w[3:]}


def status(dm, name=NAME):
    return facts.parse_status(dm.status(name))


def majmin(dev):
    st = os.stat(dev)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def udev_role(dev):
    """NXD_ROLE of @dev as nxdctl udev-info sees it ("" if none)."""
    out = nxdctl("udev-info", os.path.basename(dev)).stdout
    m = re.search(r"^NXD_ROLE=(\w+)", out, re.M)
    return m.group(1) if m else ""


def phase(what):
    print(f"[{time.strftime('%H:%M:%S')}] {what}", flush=True)
    host.kmsg_write(f"{host.MARK_PREFIX} lifecycle: {what}")


class Files:
    """Files written under MNT with their sha256, verified on demand."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.sums = {}
        self.lock = threading.Lock()

    def write(self, rel, data, sync=True):
        p = os.path.join(MNT, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        with self.lock:
            self.sums[rel] = hashlib.sha256(data).hexdigest()

    def small(self, n, into):
        for i in range(n):
            size = self.rng.choice((512, 3000, 4096, 4096, 8192, 20000))
            self.write(f"{into}/f{i:04d}", os.urandom(size), sync=False)
        run(["sync", "-f", MNT])

    def big(self, rel, mb):
        self.write(rel, os.urandom(mb * MiB))

    def verify(self):
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        with self.lock:
            items = list(self.sums.items())
        bad = []
        for rel, want in items:
            with open(os.path.join(MNT, rel), "rb") as f:
                if hashlib.sha256(f.read()).hexdigest() != want:
                    bad.append(rel)
        assert not bad, f"{len(bad)} of {len(items)} files differ: {bad[:10]}"
        return len(items)


class Writer:
    """A thread creating small files, each fsynced before it is recorded."""

    def __init__(self, files, into):
        self.files, self.into = files, into
        self.stop_ev = threading.Event()
        self.n = 0
        self.errors = []
        self.t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            while not self.stop_ev.is_set():
                size = random.choice((1000, 4096, 8192, 30000))
                self.files.write(f"{self.into}/w{self.n:05d}", os.urandom(size))
                self.n += 1
        except Exception as e:  # noqa: BLE001 - checked by the test
            self.errors.append(repr(e))

    def __enter__(self):
        self.t.start()
        return self

    def wait(self, n, timeout=120):
        start = self.n
        host.wait_for(lambda: self.n >= start + n or self.errors, timeout=timeout,
                       what=f"{n} files from the writer")

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.t.join(timeout=300)
        assert not self.t.is_alive(), "writer hung"
