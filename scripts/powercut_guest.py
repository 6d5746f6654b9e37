# SPDX-License-Identifier: GPL-2.0
"""Guest side of scripts/powercut.sh: a whole-guest power cut of an nxd
volume (stdlib only; runs in the test guest).

scripts/powercut.sh boots the guest twice:
  python3 scripts/powercut_guest.py powercut1 DIR SEED   workload, then sysrq-b
  python3 scripts/powercut_guest.py powercut2 DIR SEED   recover and check
DIR (under build/, shared with the host) holds the HDD and SSD images, the
parameters and durable.log: one fsynced line "k events ops" after every
completed fsync/O_DSYNC write.  The op stream is a function of the seed, so
boot 2 regenerates the model instead of reading it from disk.
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests", "vm"))
from nxdt.blkdev import discard_zeroes  # noqa: E402
from nxdt.dmlib import DMError, DMIoctl  # noqa: E402
from nxdt.facts import BLOCK, data_sectors, parse_status  # noqa: E402
from nxdt.fstack import write_fsynced  # noqa: E402
from nxdt.models import Checker, CrashFailure, op_is_write  # noqa: E402
from nxdt import twoboot  # noqa: E402
from nxdt.nxdvol import nxd_line  # noqa: E402
from nxdt.rawio import DirectIO  # noqa: E402
from nxdt.workloads import Workload, gen_ops  # noqa: E402


PC_HDD_MIB, PC_SSD_MIB, PC_HOT = 32, 8, 4 << 20


PC_OPTS = ["", "write_threshold 131072", "low_watermark 50 high_watermark 90",
           "mode log_all", "destage_rate 4"]


def _sh(cmd, check=True):
    import subprocess
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and p.returncode:
        raise RuntimeError(f"{cmd}: {p.stderr.strip()}")
    return p.stdout.strip()


def _pc_setup(d):
    _sh("modprobe dm-mod; modprobe loop; modprobe libcrc32c", check=False)
    if not os.path.isdir("/sys/module/dm_nxd"):
        _sh(f"insmod build/{os.uname().release}/dm-nxd.ko")
    hdd = _sh(f"losetup --find --show --direct-io=off {d}/hdd.img")
    ssd = _sh(f"losetup --find --show --direct-io=off {d}/ssd.img")
    return hdd, ssd


def _pc_params(seed):
    r = random.Random(seed)
    return {"seed": seed, "opts": r.choice(PC_OPTS), "delay": round(r.uniform(4, 25), 2),
            "hdd_mib": PC_HDD_MIB, "ssd_mib": PC_SSD_MIB, "hot": PC_HOT}


def powercut1(d, seed):
    import subprocess
    p = _pc_params(seed)
    for name, mib in (("hdd", p["hdd_mib"]), ("ssd", p["ssd_mib"])):
        with open(f"{d}/{name}.img", "wb") as f:
            f.truncate(mib << 20)
    hdd, ssd = _pc_setup(d)
    dm = DMIoctl()
    vol = data_sectors(p["hdd_mib"] * 2048)
    dm.create("pcnxd", nxd_line(hdd, ssd, vol, p["opts"]))
    twoboot.save_params(d, p)
    jf = open(f"{d}/durable.log", "a")
    wl = None

    def durable(k):
        jf.write(f"{k} {len(wl.events)} {wl.nop}\n")
        jf.flush()
        os.fsync(jf.fileno())
    zd = not discard_zeroes(hdd)
    wl = Workload(dm.path("pcnxd"), vol * 512, seed, dm=dm, nxd_name="pcnxd",
                  hot=p["hot"], on_durable=durable, zero_discards=zd)
    print(f"powercut1: seed {seed} opts '{p['opts']}': sysrq-b in {p['delay']}s"
          + (" (HDD takes no discards: discards sent as BLKZEROOUT)" if zd else ""), flush=True)
    write_fsynced(f"{d}/armed", f"{time.time()}\n", mode="w")
    subprocess.Popen(["sh", "-c", f"sleep {p['delay']}; echo b > /proc/sysrq-trigger"])
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < p["delay"] + 120:
            wl.step()
            if wl.nop % 50 == 0:
                print(f"powercut1: {wl.nop} ops, {len(wl.durable)} durability points",
                      flush=True)
    except BaseException as e:  # noqa: BLE001 - a live check failed: say so, on disk too
        return twoboot.boot1_failed(d, "powercut1", f"op {wl.nop}: {type(e).__name__}: {e}")
    return twoboot.no_crash(d)


def powercut2(d, seed):
    p = twoboot.load_params(d, seed)
    lines = [ln.split() for ln in open(f"{d}/durable.log").read().splitlines()]
    lines = [tuple(map(int, ln)) for ln in lines if len(ln) == 3]
    k = lines[-1][0] if lines else 0
    assert all(lines[i][0] == i + 1 for i in range(len(lines))), "durable.log out of order"
    hdd, ssd = _pc_setup(d)
    dm = DMIoctl()
    vol = data_sectors(p["hdd_mib"] * 2048)
    size = vol * 512
    tag = f"powercut {os.uname().release} seed {seed} opts '{p['opts']}'"
    try:
        dm.create("pcnxd", nxd_line(hdd, ssd, vol, p["opts"]))
    except DMError as e:
        print(_sh("dmesg | tail -n 20", check=False))
        print(f"{tag}: FAIL: nxd did not come back by itself: {e}")
        return 1
    st = parse_status(dm.status("pcnxd"))
    if st["state"] != "ok":
        print(_sh("dmesg | grep -i nxd | tail -n 20", check=False))
        print(f"{tag}: FAIL: nxd state after recovery is {st['state']!r}, not 'ok': {st}")
        dm.remove("pcnxd")
        _sh(f"losetup -d {hdd} {ssd}", check=False)
        return 1
    got = DirectIO().read_all(dm.path("pcnxd"), size)
    # Regenerate the op stream: events up to the last durable point exactly,
    # and generously past it (whatever may have been in flight).
    ops = gen_ops(seed, size, p["hot"], dm_msgs=True)
    events, durable = [], []
    last_nop = lines[-1][2] if lines else 0
    for nop in range(1, last_nop + 3000):
        op = next(ops)
        if op_is_write(op):
            events.append(op)
        if op[0] in ("f", "s") and len(durable) < len(lines):
            durable.append(len(events))
    for i, (kk, ev, _) in enumerate(lines):
        assert durable[i] == ev, f"durable point {kk}: {durable[i]} events regenerated, log says {ev}"
    chk = Checker(size, events, durable)
    chk.advance_to(k)
    rc = 0
    try:
        relaxed = chk.check(got, strict=False, hi=len(events),
                            what=f"{tag} after recovery")
        blocks = size // BLOCK
        changed = sum(1 for b in range(blocks)
                      if got[b * BLOCK:(b + 1) * BLOCK] != chk.stable[b * BLOCK:(b + 1) * BLOCK])
        print(f"{tag}: PASS: {blocks} 4K blocks ({size} B) checked against durability point "
              f"{k} ({lines[-1][2] if lines else 0} ops); {changed} blocks held newer data "
              f"written after it ({relaxed} sectors); state {st['state']}, recovered "
              f"{st['recovered_segments']} segments / {st['recovered_blocks']} blocks in "
              f"{st['recovery_us']} us")
    except CrashFailure as e:
        print(_sh("dmesg | grep -i nxd | tail -n 20", check=False))
        print(f"{tag}: FAIL: {e}")
        rc = 1
    dm.remove("pcnxd")
    _sh(f"losetup -d {hdd} {ssd}", check=False)
    return rc


if __name__ == "__main__":
    import sys
    cmd, d, s = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sys.exit({"powercut1": powercut1, "powercut2": powercut2}[cmd](d, s))
