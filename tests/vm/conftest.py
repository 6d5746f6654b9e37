# SPDX-License-Identifier: GPL-2.0
"""Fixtures of the in-guest suite.  Run by `make test` inside the guest as

    python3 -m pytest -q tests/vm -p no:cacheprovider --junitxml=...

Fixtures:
  guest_setup (session, autouse) loop max_loop=16, null_blk nr_devices=0,
                                 configfs, no md auto-assembly by udev
  nxd_module (session, autouse)  dm-mod + libcrc32c + insmod
                                 build/<uname -r>/dm-nxd.ko; rmmod must work
  dmesg_check (autouse)          fails a test whose kernel log shows a
                                 problem (host.DMESG_BAD_RE); lines matching
                                 @pytest.mark.dmesg_allow(regex, ...) pass
  brd (session)                  list of /dev/ramN (NXD_BRD_NR x
                                 NXD_BRD_SIZE_MB; shared by the session)
  nullb                          factory: nullb(size_mb=256, blocksize=512,
                                 **configfs_attrs) -> /dev/nullbN
  loopdev                        factory: loopdev(size_mb=256,
                                 sector_size=None, direct_io=False) -> /dev/loopN
  md_raid6                       factory: md_raid6(ndisks=4, disk_mb=64,
                                 chunk_kb=64, assume_clean=True) -> /dev/mdN
  dm                             dmlib.DMSetup; its devices are removed first
Every device is torn down after its test, also when the test fails; dm
devices before the devices under them.
"""

import os
import subprocess
import sys
import threading
import time

import pytest

from nxdt import blkdev, dmlib, faultrig, host, shard
from nxdt.host import run


def pytest_configure(config):
    config.addinivalue_line("markers", "guarantee(*ids, what=None): the guarantees of docs/reliability.md this test checks (scripts/gen-reliability.py)")
    config.addinivalue_line(
        "markers", "watchdog(seconds): this test's watchdog instead of "
        "NXD_TEST_WATCHDOG (for a test known to take longer)")
    config.addinivalue_line(
        "markers", "dmesg_allow(*regex): kernel log lines matching any of "
        "these regexes do not fail the test")
    config.addinivalue_line(
        "markers", "needs_kernel(version, reason=...): the test skips on a kernel "
        "older than version; `make test` runs it on a kernel at least that new "
        "(nxdt/shard.py)")


def pytest_report_collectionfinish(config, start_path, items):
    """The shares of `make test` (NXD_SHARD): printed on the host's
    collection and in the guest's log."""
    line = getattr(config, "nxd_shard_line", None)
    return [line] if line else []


# `make test` runs each guest test on one kernel only (NXD_SHARD=i/n for
# the i-th of n kernels, NXD_SHARD_KVERS their releases, set by
# scripts/test.sh), but for those in EVERY_KERNEL; those in FULL_ONLY run
# in `make test-full` (NXD_FULL=1) only.  The tables (EVERY_KERNEL, HEAVY
# with each heavy test's seconds and kernel, FULL_ONLY, SHARD_BASE) and
# the rule are in nxdt/shard.py: a test's kernel depends on its own id and
# @pytest.mark.needs_kernel only, not on which other tests exist.
EVERY_KERNEL, HEAVY, FULL_ONLY = shard.EVERY_KERNEL, shard.HEAVY, shard.FULL_ONLY
SHARED_SECS, SHARD_BASE = shard.SHARED_SECS, shard.SHARD_BASE


def short_id(item):
    """file::name[params] of @item, whatever the directory pytest ran from."""
    return item.nodeid.rsplit("/", 1)[-1]


def _deselect(config, items, keep):
    """Drop the items whose test id (file::name[params]) @keep refuses."""
    drop = [it for it in items if not keep(short_id(it))]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = [it for it in items if it not in drop]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("NXD_FULL") == "0":
        _deselect(config, items, lambda name: name not in FULL_ONLY)
    env = os.environ.get("NXD_SHARD", "")
    if env:
        try:
            i, n, kvers = shard.parse_env(env, os.environ.get("NXD_SHARD_KVERS", ""))
        except ValueError as e:
            raise pytest.UsageError(str(e)) from None
        if kvers and host.in_vm() and kvers[i] != host.KVER:
            raise pytest.UsageError(f"NXD_SHARD={env} is {kvers[i]} in NXD_SHARD_KVERS, "
                                    f"but this guest runs {host.KVER}")
        needs = {}
        for it in items:
            m = it.get_closest_marker("needs_kernel")
            if m:
                needs[short_id(it)] = m.args[0]
        owner = shard.plan([short_id(it) for it in items], n, kvers, needs)
        loads = shard.shard_loads(owner, n)
        config.nxd_shard_line = (
            f"shard {i} of {n} ({kvers[i] if kvers else 'kernel list unknown'}); "
            "estimated seconds a shard: " + ", ".join(
                f"{j}: {s}" + (f" ({kvers[j]})" if kvers else "") for j, s in enumerate(loads)))
        _deselect(config, items, lambda name: i in owner[name])
    if host.in_vm():
        return
    skip = pytest.mark.skip(reason="tests/vm run inside the test guest: "
                            "use `make test` or scripts/vm-run.sh")
    for item in items:
        item.add_marker(skip)


def pytest_collection_finish(session):
    """Test accounting for scripts/test.sh: the number of tests this guest
    selected goes to $NXD_COLLECTED_FILE, so that a run that stops early (or
    collects fewer tests than the host) is a failure, not a smaller total."""
    path = os.environ.get("NXD_COLLECTED_FILE")
    if path and host.in_vm():
        with open(path, "w") as f:
            f.write(f"{len(session.items)}\n")


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def _teardown_all(funcs):
    """Run every teardown even if some fail; re-raise the first failure."""
    first = None
    for f in funcs:
        try:
            f()
        except Exception as e:  # noqa: BLE001 - keep tearing down
            if first is None:
                first = e
    if first is not None:
        raise first


# ----------------------------------------------------------------- guest ---

@pytest.fixture(scope="session", autouse=True)
def guest_setup():
    """Guest-wide preparation (the guest's /etc is a private overlay)."""
    blkdev.md_no_auto_assembly()
    host.modprobe("loop", "max_loop=16", check=False)
    host.modprobe("null_blk", "nr_devices=0", check=False)
    blkdev.ensure_configfs()
    # Report tasks blocked in D state within a minute, not two.
    try:
        with open("/proc/sys/kernel/hung_task_timeout_secs", "w") as f:
            f.write("60")
    except OSError:
        pass
    # Soft lockups after 120 s, not 20: under TCG a vCPU thread starved by
    # the host (other guests on the 2 cores) is "stuck" for tens of
    # seconds in whatever it ran (seen: clear_page_erms in an XFS read).
    try:
        with open("/proc/sys/kernel/watchdog_thresh", "w") as f:
            f.write("60")
    except OSError:
        pass
    yield


# ---------------------------------------------------------------- module ---

@pytest.fixture(scope="session", autouse=True)
def nxd_module(guest_setup):
    ko = host.MODULE_KO
    if not os.path.exists(ko):
        pytest.fail(f"{ko} not built: run `make modules-all`", pytrace=False)
    marker = host.kmsg_mark("loading dm-nxd")
    host.modprobe("dm-mod")
    host.modprobe("libcrc32c", check=False)
    if host.module_loaded("dm_nxd"):
        run(["rmmod", "dm_nxd"])
    run(["insmod", ko] + _module_params())
    yield ko
    p = _rmmod_nxd()
    lines = host.dmesg_since(marker)
    bad = host.find_kernel_problems(lines)
    if bad:
        host.save_log("dmesg-session.txt", "\n".join(lines) + "\n")
    assert p.returncode == 0, f"rmmod dm_nxd failed: {p.stderr.strip()}; {_module_users()}"
    assert not bad, "kernel problems around module load/unload:\n" + "\n".join(bad[:40])


def _module_users():
    """What may hold dm_nxd: its reference count, the dm devices, and the
    processes with /dev/nxd-control or a dm device open."""
    try:
        with open("/sys/module/dm_nxd/refcnt") as f:
            ref = f.read().strip()
    except OSError as e:
        ref = str(e)
    devs = run(["dmsetup", "table"], check=False).stdout.strip().replace("\n", "; ")
    users = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                t = os.readlink(f"/proc/{pid}/fd/{fd}")
                if t == "/dev/nxd-control" or t.startswith("/dev/dm-"):
                    with open(f"/proc/{pid}/cmdline") as f:
                        users.append(f"{pid} {f.read().replace(chr(0), ' ').strip()} -> {t}")
        except OSError:
            continue
    return f"refcnt {ref}; dm tables: {devs or 'none'}; open by: {users or 'nobody'}"


def _module_params():
    # NXD_MODULE_PARAMS="a=1,b=Y": module parameters for the whole run
    # (make crash-campaign PARAMS=...), as insmod arguments.
    return os.environ.get("NXD_MODULE_PARAMS", "").replace(",", " ").split()


def _rmmod_nxd():
    p = None
    for _ in range(40):
        p = run(["rmmod", "dm_nxd"], check=False)
        if p.returncode == 0:
            break
        time.sleep(0.25)
    return p


FAULT_KO = os.path.join(os.path.dirname(host.MODULE_KO), "fault", "dm-nxd.ko")
FAULT_PARAM = "/sys/module/dm_nxd/parameters/fault_skip"


@pytest.fixture
def fault_module(nxd_module):
    """The fault-injection build (build/<kver>/fault/dm-nxd.ko, NXD_FAULT_INJECT,
    never installed) loaded in place of the module under test for one test,
    then the module under test again.  Yields the path of its fault_skip
    parameter."""
    if not os.path.exists(FAULT_KO):
        pytest.fail(f"{FAULT_KO} not built: run `make modules-all NXD_FAULT_CONTROL=1`",
                    pytrace=False)
    assert not os.path.exists(FAULT_PARAM), \
        f"the module under test ({host.MODULE_KO}) has the fault-injection knob fault_skip"
    p = _rmmod_nxd()
    assert p.returncode == 0, f"rmmod dm_nxd failed: {p.stderr.strip()}; {_module_users()}"
    try:
        run(["insmod", FAULT_KO, "fault_skip=0"])
        assert os.path.exists(FAULT_PARAM), f"{FAULT_KO} has no fault_skip parameter"
        yield FAULT_PARAM
    finally:
        p = _rmmod_nxd()
        assert p.returncode == 0, f"rmmod of the fault build failed: {p.stderr.strip()}"
        run(["insmod", host.MODULE_KO] + _module_params())


# ----------------------------------------------------------------- dmesg ---

WATCHDOG_S = int(os.environ.get("NXD_TEST_WATCHDOG", "900"))


def _watchdog_fire(nodeid):
    """A test ran for WATCHDOG_S: dump every task's stack to the kernel log
    (it goes to the console the host keeps) and end the guest's pytest, so
    that one hang costs minutes of CI, not the whole time limit."""
    sys.stderr.write(f"\nWATCHDOG: {nodeid} still running after {WATCHDOG_S}s: "
                     "task stacks go to the console log; exiting\n")
    sys.stderr.flush()
    # A thread stuck in the kernel (D state) keeps the process from
    # exiting, and then the guest from powering off until the host's
    # timeout.  A detached helper powers the guest off if we are not gone
    # in time; a normal exit shuts the guest down before it fires.
    try:
        subprocess.Popen(["sh", "-c", "sleep 90; echo 'nxd watchdog: forcing power-off'"
                          " > /dev/kmsg; echo o > /proc/sysrq-trigger"],
                         start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        pass
    try:
        with open("/dev/kmsg", "w") as f:
            f.write(f"nxd watchdog: {nodeid} hung for {WATCHDOG_S}s\n")
    except OSError:
        pass
    for c in "wt":
        try:
            with open("/proc/sysrq-trigger", "w") as f:
                f.write(c)
        except OSError:
            pass
        time.sleep(2)
    try:
        host.save_log(f"dmesg-{nodeid}-watchdog.txt",
                       run(["dmesg"], check=False).stdout)
    finally:
        sys.stderr.flush()
        os._exit(3)


@pytest.fixture(autouse=True)
def dmesg_check(request):
    marker = host.kmsg_mark(f"begin {request.node.nodeid}")
    wd = request.node.get_closest_marker("watchdog")
    dog = threading.Timer(wd.args[0] if wd else WATCHDOG_S, _watchdog_fire,
                          (request.node.nodeid,))
    dog.daemon = True
    dog.start()
    try:
        yield
    finally:
        dog.cancel()
    lines = host.dmesg_since(marker)
    allow = [a for m in request.node.iter_markers("dmesg_allow") for a in m.args]
    bad = host.find_kernel_problems(lines, allow)
    failed = any(getattr(getattr(request.node, f"rep_{w}", None), "failed", False)
                 for w in ("setup", "call"))
    path = None
    if bad or failed:
        path = host.save_log(f"dmesg-{request.node.nodeid}.txt", "\n".join(lines) + "\n")
    if bad:
        pytest.fail(f"kernel problems in dmesg during {request.node.nodeid} "
                    f"(log: {path}):\n" + "\n".join(bad[:40]), pytrace=False)


# --------------------------------------------------------------- devices ---

@pytest.fixture(scope="session")
def brd():
    nr = int(os.environ.get("NXD_BRD_NR", "4"))
    size_mb = int(os.environ.get("NXD_BRD_SIZE_MB", "256"))
    if host.module_loaded("brd"):
        run(["rmmod", "brd"])
    host.modprobe("brd", f"rd_nr={nr}", f"rd_size={size_mb * 1024}", "max_part=0")
    devs = [f"/dev/ram{i}" for i in range(nr)]
    for d in devs:
        host.wait_for(lambda d=d: os.path.exists(d), what=d)
    yield devs
    for _ in range(40):
        if run(["rmmod", "brd"], check=False).returncode == 0:
            break
        time.sleep(0.25)
    else:
        raise host.CmdError("rmmod brd failed: a ram disk is still in use")


@pytest.fixture
def loopdev():
    made = []

    def make(size_mb=256, sector_size=None, direct_io=False):
        dev, path = blkdev.loop_create(size_mb, sector_size, direct_io)
        made.append((dev, path))
        return dev
    yield make
    _teardown_all([lambda d=d, p=p: blkdev.loop_destroy(d, p) for d, p in reversed(made)])


@pytest.fixture
def md_raid6(loopdev):
    arrays = []

    def make(ndisks=4, disk_mb=64, chunk_kb=64, assume_clean=True):
        members = [loopdev(disk_mb) for _ in range(ndisks)]
        dev = blkdev.md_create(members, level=6, chunk_kb=chunk_kb, assume_clean=assume_clean)
        arrays.append(dev)
        make.members[dev] = members
        return dev
    make.members = {}
    yield make
    _teardown_all([lambda d=d: blkdev.md_stop(d) for d in reversed(arrays)])


@pytest.fixture
def nullb():
    made = []

    def make(size_mb=256, blocksize=512, **attrs):
        dev, folder = blkdev.nullb_create(size_mb, blocksize, **attrs)
        made.append(folder)
        return dev
    yield make
    _teardown_all([lambda f=f: blkdev.nullb_destroy(f) for f in reversed(made)])


@pytest.fixture
def dm(nullb, loopdev, md_raid6):
    # Requesting the device factories makes pytest set them up first, so
    # dm devices (stacked on them) are torn down before them.
    d = dmlib.DMSetup()
    yield d
    errors = d.cleanup()
    d.close()
    assert not errors, "dm cleanup failed:\n" + "\n".join(errors)


@pytest.fixture
def rig(dm, loopdev, nullb):
    """HDD and SSD behind fault injectors.  Torn down before the dm devices
    (it depends on `dm`): closes the models' fds and heals the injectors,
    so that a failed test does not leave the volume busy or failing."""
    yield from faultrig.rig_setup(dm, loopdev, nullb)
