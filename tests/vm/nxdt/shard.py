# SPDX-License-Identifier: GPL-2.0
"""Which kernel's guest runs each test of `make test`.

scripts/test.sh boots one guest per kernel and runs tests/vm in each with
NXD_SHARD=i/n (the i-th of n kernels) and NXD_SHARD_KVERS (the n kernel
releases, comma-separated, in the same order).  Each test runs on one
kernel only, but for those in EVERY_KERNEL; `make test-full` (NXD_FULL=1)
runs every test on every kernel and sets no shard.

The kernel of a test depends on its own id (file::name[params]) and this
module's tables only, never on the other tests collected, so that adding
or renaming a test moves no other test to another kernel (a test's skip
that is allowed on one kernel must not decide, by the names of unrelated
tests, whether it runs at all):
  - a test marked @pytest.mark.needs_kernel("X.Y") runs on a kernel at
    least X.Y (the first such shard by its hash; on the hash's shard when
    none of the run's kernels is new enough, where it skips, and
    scripts/skipcheck.py fails the run);
  - a test in HEAVY runs on the shard the table names (hand-balanced for
    two kernels; for another number of kernels the table is dealt out
    longest first to the least loaded shard, the table alone deciding);
  - any other test runs on shard sha1(id) mod n.
Standard library only: scripts/skipcheck.py imports it on the host.
"""

import hashlib
import re

# The module's code is the same for both kernels (dm-target/nxd-compat.h
# sets the discard limits and nothing else), so what differs is the block
# layer, dm core, md and null_blk under it: the data path's differential
# test and fio verify, the crash replay (its seed differs by kernel),
# dm-pcut's own flush/FUA test and the whole-guest power cut
# (scripts/powercut.sh) meet those on both.  The default dm-pcut crash
# slice runs on one (2026-11-29: 123 s a kernel in CI's run, and make test
# was over the hour on this host).
# Why one kernel a test: CI stopped a guest of 0b570da at 75 min
# (2026-11-29), and on this host a clean-clone make test of 5df4c27, with
# the data path, write path, no-loss and crash tests still on both kernels,
# had done 26 and 31 of its 104 tests a guest after 37 min, on its way past
# CI's 90 min.
EVERY_KERNEL = ("test_crash.py::test_logwrites_replay[",
                "test_datapath.py::test_differential_default",
                "test_datapath.py::test_fio_verify_raw",
                "test_pcut.py::test_flush_and_fua_writes_survive")

# test: (seconds, shard of two).  The seconds are measured in the guests
# of the clean-clone runs of 0b570da and 5df4c27 on this host (2026-11-29,
# both guests and the bench smoke at once), or in its targeted run of
# test_destage.py (NXD_FULL=1); those marked x2 are twice what a faster
# host measured on 2026-11-25.  Any other test counts SHARED_SECS.  The
# shards make the two kernels' estimates (shard_loads, printed by
# `scripts/skipcheck.py --self-test`) about equal with the other tests
# where their hash puts them; those in FULL_ONLY balance among themselves.
HEAVY = {
    # the negative controls (tests/vm/test_controls.py), one 6.12 run each
    "test_controls.py::test_logwrites_replay_catches_planted_stale_copy": (68, 0),
    "test_controls.py::test_pcut_chain_catches_lying_device[ssd]": (32, 1),
    "test_controls.py::test_pcut_chain_catches_lying_device[hdd]": (28, 1),
    "test_controls.py::test_pcut_chain_catches_skipped_round_hdd_flush": (30, 0),
    "test_fs.py::test_fs_workload_on_raid6[xfs]": (566, 0),          # x2
    "test_fs.py::test_fs_workload_on_raid6[ext4]": (560, 1),         # x2
    "test_fs.py::test_fs_detach_ssd_then_new_ssd": (290, 1),         # x2
    # 2 s alone; up to 467 s when it is the first udev-synced create after
    # the crash tests: udev works off the uevents of their ioctl-made dm
    # devices first (about 0.34 s each, 2026-11-29).
    "test_datapath.py::test_table_roundtrips": (30, 1),
    "test_destage.py::test_pacing_gives_the_destager_its_share[10]": (270, 0),
    "test_destage.py::test_pacing_gives_the_destager_its_share[100]": (255, 0),
    "test_destage.py::test_pacing_gives_the_destager_its_share[100-share50]": (270, 1),
    "test_badinput.py::test_table_lines_refused": (250, 1),
    "test_fs.py::test_fs_power_cut[ext4]": (224, 1),                 # x2
    "test_fs.py::test_fs_power_cut[xfs]": (220, 1),                  # x2
    "test_fs.py::test_fs_grow_hdd": (206, 0),                        # x2
    "test_lifecycle.py::test_lifecycle_xfs": (170, 0),
    "test_writepath.py::test_direct_write_after_partial_in_open_batch": (154, 1),  # x2
    "test_destage.py::test_drain_sweeps_by_address[no-sweep]": (148, 1),
    "test_destage.py::test_drain_sweeps_by_address[idle-sweep]": (145, 0),
    "test_fs.py::test_fs_drain_on_suspend_then_linear": (144, 0),    # x2
    "test_crash_pcut.py::test_pcut_crash_slice[ssd_discard0]": (143, 1),
    "test_crash_pcut.py::test_pcut_crash_slice[defaults]": (125, 0),
    "test_faults.py::test_live_operations_under_fio": (124, 1),      # x2
    "test_crash_pcut.py::test_pcut_crash_slice[thr128k-lw0]": (122, 1),
    "test_boot.py::test_boot_assembly": (120, 0),
    "test_destage.py::test_drain_sweeps_by_address[sweep]": (120, 1),
    "test_crash_pcut.py::test_pcut_crash_slice[log_all]": (118, 0),
    "test_destage.py::test_round_leaves_room_for_neighbours[oldest128]": (118, 0),
    "test_datapath.py::test_drain_then_hdd_alone_matches": (107, 1),
    "test_admin.py::test_identity_links_and_wipe": (105, 0),
    "test_noloss.py::test_tail_passes_superseded_copy_only_when_newer_is_durable": (100, 1),  # x2
    "test_datapath.py::test_differential_threshold_changes": (94, 0),  # x2
    "test_admin.py::test_install_uninstall_and_runtime_deps": (93, 1),
    "test_destage.py::test_round_leaves_room_for_neighbours[half-buffer]": (87, 0),
    "test_admin.py::test_package_nxdctl": (78, 0),
    "test_datapath.py::test_recovery_after_remove_and_reload": (77, 1),
    "test_datapath.py::test_log_full_small_log": (74, 0),
    "test_destage.py::test_clean_ahead_copies_stripe_neighbours[ahead]": (69, 0),
    "test_badinput.py::test_ssd_log_of_another_volume": (69, 1),
    "test_crash_pcut.py::test_oracle_on_bare_pcut": (65, 1),
    "test_destage.py::test_clean_ahead_copies_stripe_neighbours[oldest-only]": (61, 1),
    "test_admin.py::test_status_routes_show_super": (56, 1),
    "test_destage.py::test_many_log_capacities_of_small_writes": (52, 0),
    "test_badinput.py::test_segment_corrupt_after_crash[header]": (52, 0),
    "test_destage.py::test_overwrite_and_discard_while_destaging": (50, 1),
    "test_badinput.py::test_ssd_minimum_size": (50, 1),
    "test_boot.py::test_stored_name_tunables": (48, 0),
    "test_badinput.py::test_second_volume_over_active_devices": (45, 0),
    "test_badinput.py::test_hdd_too_small_for_length": (40, 1),
    "test_owner.py::test_owner_ocf_agent": (235, 1),
}
SHARED_SECS = 25

# Run by `make test-full` (NXD_FULL=1) only: the controls of the
# destager's policies (the same test with the policy off, which shows the
# test can tell), the pacing test, the dm-pcut crash slices beyond the
# default options (make crash-campaign runs many more) and the tests of a
# file system on md RAID6 (test_lifecycle_xfs and fio verify on XFS stay).
# With only the controls and the ext4, grow, detach and drain-on-suspend
# tests left out, the clean-clone run of a6ce6ec had its 6.12 guest on
# course for 80 min on this host and CI stopped it at 75 min.
FULL_ONLY = (
    # the destager's policies with the policy on, beside their controls
    # (below): performance policies, not data safety; with them here
    # make test fits in 40 minutes on this 2-core host
    "test_destage.py::test_clean_ahead_copies_stripe_neighbours[ahead]",
    "test_destage.py::test_round_leaves_room_for_neighbours[oldest128]",
    "test_destage.py::test_drain_sweeps_by_address[sweep]",
    "test_destage.py::test_pacing_gives_the_destager_its_share[10]",
    "test_destage.py::test_pacing_gives_the_destager_its_share[100]",
    "test_destage.py::test_pacing_gives_the_destager_its_share[100-share50]",
    "test_crash_pcut.py::test_pcut_crash_slice[thr128k-lw0]",
    "test_crash_pcut.py::test_pcut_crash_slice[log_all]",
    "test_crash_pcut.py::test_pcut_crash_slice[ssd_discard0]",
    "test_crash_pcut.py::test_pcut_crash_slice[adaptive]",
    "test_fs.py::test_fs_workload_on_raid6[xfs]",
    "test_fs.py::test_fs_power_cut[xfs]",
    "test_destage.py::test_drain_sweeps_by_address[no-sweep]",
    "test_destage.py::test_drain_sweeps_by_address[idle-sweep]",
    "test_destage.py::test_round_leaves_room_for_neighbours[half-buffer]",
    "test_destage.py::test_clean_ahead_copies_stripe_neighbours[oldest-only]",
    "test_fs.py::test_fs_workload_on_raid6[ext4]",
    "test_fs.py::test_fs_power_cut[ext4]",
    "test_fs.py::test_fs_detach_ssd_then_new_ssd",
    "test_fs.py::test_fs_grow_hdd",
    "test_fs.py::test_fs_drain_on_suspend_then_linear",
    # zeroes the largest log's 1 GiB of index memory under TCG (40-60 s)
    "test_lifecycle.py::test_ssd_larger_than_the_largest_log",
    # ocf-tester runs the resource agent some 25 times (98 to 235 s under
    # TCG); test_owner_assemble_takeover_grow covers the ownership itself
    "test_owner.py::test_owner_ocf_agent",
    # waits out 3 s SSD writes for 8 segment headers (about 56 s on 6.1)
    "test_writepath.py::test_ready_direct_segments_share_one_ssd_flush",
)

# Seconds each kernel's share of `make test` takes beyond its tests, from
# the clean-clone run of a6ce6ec: the first kernel's power cut (248 s) and
# reboot check (267 s, on that kernel only) after its suite; the second's
# power cut (146 s) and its crash replay seed, 160 s longer than the
# first's.  (Before 2026-11-29 these were 200 and 300.)
SHARD_BASE = [515, 305]


def on_every_kernel(name):
    return any(name == e or (e.endswith("[") and name.startswith(e)) for e in EVERY_KERNEL)


def secs(name):
    return HEAVY[name][0] if name in HEAVY else SHARED_SECS


def kver_tuple(kver):
    """(6, 12, 95) of "6.12.95+deb12-amd64"; (6, 6) of "6.6"."""
    m = re.match(r"(\d+(?:\.\d+)*)", kver)
    if not m:
        raise ValueError(f"not a kernel release: {kver!r}")
    return tuple(int(x) for x in m.group(1).split("."))


def kernel_ok(kver, need):
    """Whether kernel release @kver is at least version @need."""
    return kver_tuple(kver) >= kver_tuple(need)


def hash_shard(name, n):
    """sha1 of the test id, mod n: the same on every host and run."""
    return int.from_bytes(hashlib.sha1(name.encode()).digest()[:8], "big") % n


def _heavy_deal(n):
    """{test: shard} of HEAVY for n shards: the table's own for two; for
    another n, longest first to the least loaded shard (FULL_ONLY ones
    apart), from the table alone."""
    if n == 2:
        return {name: s for name, (_, s) in HEAVY.items()}
    owner = {}
    for group in (False, True):
        load = [SHARD_BASE[i] if i < len(SHARD_BASE) and not group else 0
                for i in range(n)]
        rows = [(name, v[0]) for name, v in HEAVY.items()
                if (name in FULL_ONLY) == group]
        for name, s in sorted(rows, key=lambda kv: (-kv[1], kv[0])):
            i = load.index(min(load))
            owner[name] = i
            load[i] += s
    return owner


def shard_of(name, n, kvers=None, need=None):
    """The shards (a tuple) that run test @name of n.  @kvers: the n
    kernel releases in shard order (None: unknown, when a test that needs
    a kernel goes to the last shard, test.sh's newest); @need: the
    version of its needs_kernel marker or None."""
    if on_every_kernel(name):
        return tuple(range(n))
    if need is not None:
        if kvers is None:
            return (n - 1,)
        fit = [i for i, kv in enumerate(kvers) if kernel_ok(kv, need)]
        if fit:
            return (fit[hash_shard(name, len(fit))],)
        return (hash_shard(name, n),)
    if name in HEAVY:
        return (_heavy_deal(n)[name],)
    return (hash_shard(name, n),)


def plan(names, n, kvers=None, needs=None):
    """{test: shards} for the test ids @names; @needs: {test: version}."""
    needs = needs or {}
    if kvers is not None and len(kvers) != n:
        raise ValueError(f"{len(kvers)} kernels for {n} shards: {kvers}")
    return {name: shard_of(name, n, kvers, needs.get(name)) for name in names}


def shard_loads(the_plan, n):
    """Estimated seconds of each shard: SHARD_BASE and its tests' secs."""
    load = [SHARD_BASE[i] if i < len(SHARD_BASE) else 0 for i in range(n)]
    for name, shards in the_plan.items():
        for i in shards:
            load[i] += secs(name)
    return load


def parse_env(shard, kvers):
    """(i, n, kvers or None) of NXD_SHARD "i/n" and NXD_SHARD_KVERS
    (releases separated by commas or blanks)."""
    i, n = (int(x) for x in shard.split("/"))
    if not 0 <= i < n:
        raise ValueError(f"NXD_SHARD={shard}: no shard {i} of {n}")
    kv = kvers.replace(",", " ").split() if kvers else None
    if kv is not None and len(kv) != n:
        raise ValueError(f"NXD_SHARD={shard} but NXD_SHARD_KVERS has {len(kv)} kernels: {kvers}")
    for k in kv or ():
        kver_tuple(k)
    return i, n, kv
