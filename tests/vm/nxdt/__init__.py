# SPDX-License-Identifier: GPL-2.0
"""Helpers of the in-guest test suite (tests/vm), one module per concept.

Test files import what they use (``from nxdt import host``, ``from
nxdt.dmlib import DMIoctl``); pytest puts tests/vm on sys.path, and the guest
programs under scripts/ (pfs_guest.py, powercut_guest.py, reboot_guest.py)
and bench/bench_guest.py insert it themselves.  Standard library only.

  facts      what the tests know of nxd's interfaces: status fields,
             tunables, the volume-length rule, units
  host       running commands, modules, waiting, the kernel log
  blkdev     block devices: null_blk, loop, md; sizes and I/O statistics
  rawio      O_DIRECT I/O, aligned buffers, discard/zero-out, Linux AIO
  dmlib      the generic device-mapper client (transports: dmsetup, ioctl),
             fault injector
  nxdvol     the one place that knows nxd's table line, sysfs, kernel
             messages, and the volume class
  ondisk     an independent reader of the on-disk format
  ctl        /dev/nxd-control (GET_STATS, LIST, the histogram), nxdctl
  models     reference models (the crash contract's checker, the fault
             tests' volume model)
  faultrig   HDD and SSD behind fault injectors, a volume on them, degrade
  workloads  the differential tester, the crash workload, fio
  logwrites  dm-log-writes reader and replayer
  pcut       the dm-pcut fixture
  fstack     file-system stack helpers (checksums, fsync, caches)
  gluster    GlusterFS over dm-nxd
  twoboot    a power cut across two boots: what boot 1 leaves for boot 2
             (scripts/powercut_guest.py, scripts/pfs_guest.py)

The rigs of one test file each (the test files hold tests and fixtures
only):

  pcutchain    chains of power cuts over dm-pcut (test_crash_pcut.py)
  crashreplay  dm-log-writes records replayed and checked (test_crash.py)
  pfsstack     GlusterFS bricks, their writers, power cuts (test_pfs.py)
  lifecycle    nxdctl and udev across the lifecycle (test_lifecycle.py)
  bootenv      a volume across boots (test_boot.py)
  destagerig   striped HDDs, destage layouts, a volume over dm-log-writes
               (test_destage.py)
  pcutcheck    dm-pcut itself (test_pcut.py)
  admin, mgmt, noloss, writepath, datapath, badinput, events, harness:
               those of test_<name>.py
"""
