# SPDX-License-Identifier: GPL-2.0
"""dm events for test_events.py: a monitor thread that waits on a volume's
event number (Monitor)."""
import json
import subprocess
import threading

from nxdt import host
from nxdt.ctl import NXDCTL


class Monitor:
    """`nxdctl monitor ARGS` in the background, its stdout lines kept."""

    def __init__(self, *args):
        self.p = subprocess.Popen([NXDCTL, "monitor", *args], text=True,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line)

    def waiting(self, n=1):
        """Block until @n of its processes sleep in DM_DEVICE_WAITEVENT (the
        monitor itself, or its children without a VOL): an event before that
        would only move its baseline."""
        def asleep():
            assert self.p.poll() is None, self.p.stderr.read()
            pids = [self.p.pid]
            try:
                with open(f"/proc/{self.p.pid}/task/{self.p.pid}/children") as f:
                    pids += [int(x) for x in f.read().split()]
            except OSError:
                pass
            k = 0
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/wchan") as f:
                        w = f.read()
                except OSError:
                    continue
                k += w in ("dm_wait_event", "dev_wait")
            return k >= n
        host.wait_for(asleep, timeout=60, interval=0.1,
                       what="nxdctl monitor waiting in DM_DEVICE_WAITEVENT")

    def events(self, vol):
        """The event kinds of @vol's lines, in order (a line may list several)."""
        out = []
        for line in list(self.lines):
            d = json.loads(line)
            if d["volume"] == vol:
                out += d["events"]
        return out

    def wait_event(self, vol, kind, n=1, timeout=60):
        host.wait_for(lambda: self.events(vol).count(kind) >= n,
                       timeout=timeout, interval=0.1,
                       what=f"{n} '{kind}' line(s) of {vol} from nxdctl "
                            f"monitor (so far: {self.lines})")

    def last(self, vol, kind):
        for line in reversed(list(self.lines)):
            d = json.loads(line)
            if d["volume"] == vol and kind in d["events"]:
                return d
        return None

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.t.join(timeout=10)
        return self.p.stderr.read()


def event_nr(v):
    return int(v.dm.info(v.name)["events"])
