# SPDX-License-Identifier: GPL-2.0
"""dm-nxd's events (issue 19): dm_table_event() and a sysfs notification
when the volume degrades, when its log fills, and when a drain completes,
seen the way an admin's alerting sees them: `nxdctl monitor --json` (every
volume, DM_DEVICE_WAITEVENT per volume) and `nxdctl monitor VOL --exec`,
`dmsetup wait`, the device's event number, poll(2) on nxd/events; the
error counters surviving `nxdctl histogram --reset`; and a volume degraded
before any monitor ran paging all the same (status and list exit codes,
monitor at start and --oneshot, syslog, Prometheus).

The HDD and the SSD are test_faults.py's fault injectors (dm-flakey
switched live), the volume is made and degraded with its helpers.
"""
import json
import os
import select
import shutil
import socket
import subprocess
import time

import pytest

from nxdt import ctl, host, rawio
from nxdt.ctl import nxdctl
from nxdt.facts import BLOCK, MiB
from nxdt.faultrig import degrade, rig_setup, setup_vol
from nxdt.events import Monitor, event_nr


@pytest.fixture
def big_rig(dm, loopdev, nullb):
    """The rig (conftest.py) with a log four destage rounds long (a round
    copies at most 16 MiB): refilled under a steady write load, it never
    empties below the re-arm level of the log_full event in between."""
    yield from rig_setup(dm, loopdev, nullb, hdd_mb=128, ssd_mb=64)


@pytest.mark.guarantee("G13")
def test_events_degrade_log_full_drain(big_rig, tmp_path):
    """Each event reaches every listener once per occurrence: the log
    filling under 64 KiB writes with destage paused (one log_full for a
    whole burst going round it, though the full log makes the destager
    run and the flag flap), a drain (drain_done), an SSD write failure
    (degraded), and the degraded destager emptying the frozen log
    (drain_done again)."""
    rig = big_rig
    # log_full is re-armed below high_watermark: 30 % is three rounds away
    v, m = setup_vol(rig, "nxdev", size=4 * MiB, seed=19, nfull=16, npart=4,
                  opts=["low_watermark", "10", "high_watermark", "30"])
    assert nxdctl("monitor", "--help").returncode == 0
    st0 = v.status()
    assert st0["events"] == 0 and st0["last_event"] == 0 and st0["log_full"] == 0, st0
    assert v.sget("events") == "0" and v.sget("last_event") == "none"
    nr0 = event_nr(v)
    execlog = tmp_path / "exec.log"
    mon = Monitor("--json")                     # every volume: a child each
    mon_exec = Monitor(v.name, "--exec",
                       f'echo "$NXD_VOLUME $NXD_EVENTS $NXD_STATE $NXD_LOG_FULL" >>{execlog}')
    try:
        mon.waiting()
        mon_exec.waiting()

        # -- log full: 96 MiB of 64 KiB writes into a 64 MiB log, paused
        # (a full log is destaged all the same, so it fills more than once);
        # each pass to a region of its own: a write over blocks the log
        # holds waits for room instead of going round it
        buf = bytes(range(256)) * 256
        with rawio.Fd(v.dev) as f:
            for rnd in range(3):
                base = 8 * MiB + rnd * 32 * MiB
                for off in range(base, base + 32 * MiB, 64 * 1024):
                    f.pwrite(off, buf)
        st = v.status()
        assert st["writes_around_full"] > 0 and st["segments_reclaimed"] > 0, st
        assert st["events_log_full"] == 1 and st["last_event"] == 2, st
        mon.wait_event(v.name, "log_full")
        d = mon.last(v.name, "log_full")
        assert d["new"]["log_full"] == 1, d
        assert d["state"] == "ok" and d["device"] == "%s:%s" % v.devnum(), d

        # -- drain: nxdctl drain returns, then the event
        v.message("resume_destage")
        nxdctl("drain", v.name)
        mon.wait_event(v.name, "drain_done")
        st = v.status()
        assert st["index_entries"] == 0 and st["events_drain_done"] == 1, st
        assert v.sget("last_event") == "drain_done"

        # -- degraded: dmsetup wait and poll(2) on nxd/events see it too
        v.pause()
        m.log_blocks(m.free_blocks(16))         # something for the frozen log
        nr1 = event_nr(v)
        assert nr1 >= nr0 + 2, (nr0, nr1)
        waiter = subprocess.Popen(["dmsetup", "wait", v.name, str(nr1)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        fd = os.open(v.sysfs("events"), os.O_RDONLY)
        try:
            os.read(fd, 64)                     # poll waits for the next change
            pl = select.poll()
            pl.register(fd, select.POLLPRI | select.POLLERR)
            time.sleep(0.5)
            assert waiter.poll() is None, "dmsetup wait returned before the event"
            st_deg = degrade(v, m, rig)
            assert pl.poll(20000), "no sysfs_notify on nxd/events"
            os.lseek(fd, 0, os.SEEK_SET)
            assert int(os.read(fd, 64)) == 3
        finally:
            os.close(fd)
        assert waiter.wait(timeout=30) == 0, waiter.stderr.read()
        assert event_nr(v) > nr1
        mon.wait_event(v.name, "degraded")
        d = mon.last(v.name, "degraded")
        assert d["state"] == "degraded" and d["counters"]["degraded"] == 1, d
        assert d["counters"]["ssd_errors"] >= 1, d
        assert st_deg["events_degraded"] == 1, st_deg

        # -- the degraded destager empties the frozen log: drain_done
        v.message("resume_destage")
        mon.wait_event(v.name, "drain_done", n=2, timeout=120)
        st = v.status()
        assert st["index_entries"] == 0 and st["state"] == "degraded", st
        assert (st["events_degraded"], st["events_log_full"],
                st["events_drain_done"], st["events"]) == (1, 1, 2, 4), st
        assert st["last_event"] == 3 and v.sget("events") == "4"
        m.verify()
    finally:
        err = mon.stop()
        err_exec = mon_exec.stop()
    assert mon.events(v.name) == ["log_full", "drain_done", "degraded",
                                  "drain_done"], (mon.lines, err)
    assert not any(json.loads(x)["volume"] != v.name for x in mon.lines), mon.lines
    got = execlog.read_text().splitlines()
    assert got[0].split()[:3] == [v.name, "log_full", "ok"], (got, err_exec)
    assert [x.split()[1] for x in got] == ["log_full", "drain_done", "degraded",
                                           "drain_done"], (got, err_exec)
    assert got[2].split()[2] == "degraded", got
    rig.ssdi.set("ok")
    m.close()


@pytest.mark.guarantee("G13")
def test_error_counters_survive_histogram_reset(rig):
    """`nxdctl histogram --reset` (and the ioctl's reset) clears the
    histogram and the request counters, never ssd_errors, hdd_errors or
    the event counters; the status line keeps its first 27 words."""
    v, m = setup_vol(rig, "nxdrst", size=4 * MiB, seed=20, nfull=8, npart=2)
    rig.ssdi.set("error")
    for b in sorted(m.logged)[:4]:
        m.read_eio(b * BLOCK, BLOCK)            # failed SSD reads: ssd_errors
    rig.ssdi.set("ok")
    rig.hddi.set("error")
    with rawio.Fd(v.dev) as f:
        for b in m.free_blocks(3):              # HDD reads fail: hdd_errors
            assert f.pread_try(b * BLOCK, BLOCK)[1] == rawio.EIO
    rig.hddi.set("ok")
    v.drain()
    before = ctl.get_stats(v.name)["counters"]
    assert before["ssd_errors"] >= 4 and before["hdd_errors"] >= 3, before
    assert before["writes_logged"] > 0 and before["events_drain_done"] == 1, before
    nxdctl("histogram", v.name, "--reset")
    after = ctl.get_stats(v.name)
    c = after["counters"]
    assert ctl.hist_sum(after["hist"]) == 0
    assert c["writes_logged"] == 0 and c["reads_ssd"] == 0, c
    for k in ("ssd_errors", "hdd_errors", "events", "events_drain_done",
              "last_event"):
        assert c[k] == before[k], (k, before, c)
    st = v.status()
    assert st["ssd_errors"] == before["ssd_errors"], st
    assert st["hdd_errors"] == before["hdd_errors"], st
    # stats --reset is the same reset
    s = json.loads(nxdctl("stats", v.name, "--reset", "--json").stdout)["counters"]
    assert s["ssd_errors"] == before["ssd_errors"], s
    c = ctl.get_stats(v.name)["counters"]
    assert c["ssd_errors"] == before["ssd_errors"], c
    assert c["hdd_errors"] == before["hdd_errors"], c
    m.close()


@pytest.mark.guarantee("G13")
def test_degraded_before_the_monitor_pages(rig, tmp_path):
    """A volume degraded while nothing watched is still reported, as
    mdadm --monitor reports a DegradedArray at start: `nxdctl status`
    exits 5 with an action line naming replace-ssd, `list` exits 5, a
    configured volume that is not active makes status exit 2,
    `monitor --oneshot` reports it to stdout and to syslog(3) (a socket
    bound at /dev/log, facility daemon, level crit) and exits 5, a
    monitor started afterwards reports it once ("initial") and then only
    new events, and stats --prometheus says degraded (promtool check
    metrics passes, where promtool is installed)."""
    v, m = setup_vol(rig, "nxdpage", size=4 * MiB, seed=21, nfull=8, npart=2)
    p = nxdctl("status", v.name, "--interval", "0", check=False)
    assert p.returncode == 0 and "action" not in p.stdout, p
    v.pause()
    m.log_blocks(m.free_blocks(16))             # something for the frozen log
    degrade(v, m, rig)

    p = nxdctl("status", v.name, "--interval", "0", check=False)
    assert p.returncode == 5, (p.returncode, p.stdout, p.stderr)
    assert p.stdout.startswith(f"{v.name}: degraded\n"), p.stdout
    act = next(x for x in p.stdout.splitlines() if x.startswith("  action"))
    assert "blocks not yet on the HDD" in act, act
    assert f"nxdctl replace-ssd {v.name} NEW_SSD" in act, act
    p = nxdctl("list", check=False)
    assert p.returncode == 5, (p.returncode, p.stdout, p.stderr)
    tab = tmp_path / "nxdtab"
    tab.write_text("ghost UUID=9a8b7c6d-0000-4000-8000-00000000abcd\n")
    p = nxdctl("status", "--interval", "0", "--config", tab, check=False)
    assert p.returncode == 2 and "ghost: inactive\n" in p.stdout, p

    # syslog(3) writes datagrams to /dev/log: be the syslog daemon.
    log = None
    if not os.path.exists("/dev/log"):
        log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        log.bind("/dev/log")
        log.settimeout(10)
    try:
        p = nxdctl("monitor", v.name, "--oneshot", check=False)
        assert p.returncode == 5, (p.returncode, p.stdout, p.stderr)
        assert f" {v.name} degraded state degraded, " in p.stdout, p.stdout
        assert "(at start, event " in p.stdout, p.stdout
        if log:
            msg = log.recv(4096).decode()
            assert msg.startswith("<26>") and "nxdctl[" in msg, msg
            assert f": {v.name} degraded state degraded, " in msg, msg
    finally:
        if log:
            log.close()
            os.unlink("/dev/log")

    mon = Monitor(v.name, "--json", "--no-syslog")
    try:
        mon.waiting()
        host.wait_for(lambda: len(mon.lines) >= 1, timeout=30,
                      what="the report at start")
        d = json.loads(mon.lines[0])
        assert d["events"] == ["degraded"] and d["initial"] is True, d
        assert d["state"] == "degraded" and d["counters"]["degraded"] == 1, d
        # The frozen log empties: one new event, not the degrade again.
        v.message("resume_destage")
        mon.wait_event(v.name, "drain_done", timeout=120)
    finally:
        err = mon.stop()
    assert mon.events(v.name) == ["degraded", "drain_done"], (mon.lines, err)
    assert [json.loads(x)["initial"] for x in mon.lines] == [True, False]

    prom = nxdctl("stats", "--prometheus").stdout
    assert f'nxd_state{{volume="{v.name}",state="degraded"}} 1\n' in prom, prom
    assert "nxd_up 1\n" in prom, prom
    if shutil.which("promtool"):
        host.run(["promtool", "check", "metrics"], input=prom)
    m.verify()
    rig.ssdi.set("ok")
    m.close()
