#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo-pfs`: GlusterFS on dm-nxd in one guest, in under 10 minutes.
#
# On the host: builds dm-nxd.ko, nxdctl and the dm-hddsim HDD emulator for
# the newest kernel that has headers, then boots ONE guest of that kernel
# (scripts/vm-run.sh) that runs scripts/pfs_guest.py demo:
#   1. three bricks, each XFS on its own md RAID6 of 4 emulated HDDs
#      (dm-hddsim over memory-backed null_blk, chunk 64K), one glusterd, a
#      distributed and a dispersed (2+1) volume over them, FUSE mounts; the
#      mixed workload (small files written, fsync'd, renamed, rewritten;
#      large sequential files; an IOR-like fio pattern of the NytroXD
#      transfer sizes), every file verified;
#   2. the same on fresh arrays of the same kind with dm-nxd between each
#      array and its XFS (a 64 MiB null_blk SSD each);
#   3. the time and throughput of both and their ratios, and the
#      `nxdctl histogram --routes` of each brick's nxd volume.
#
# Environment: DEMO_KVER (guest kernel), PFS_DEMO_SMALL, PFS_DEMO_BIG_MB,
# PFS_DEMO_IOR_COUNT, HDD_SIZE_MB, HDDSIM_OPTS (see scripts/pfs_guest.py),
# VM_TIMEOUT (default 1800: a loaded host), VM_CPUS, VM_MEMORY.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
t0=$(date +%s)
say() { echo "demo-pfs: $*" >&2; }
. scripts/lib.sh
nxd_demo_host demo-pfs glusterd || exit 1
logs=${NXD_LOGS:-$here/build/logs}
mkdir -p "$logs"
export VM_TIMEOUT=${VM_TIMEOUT:-1800}
export VM_CONSOLE=${VM_CONSOLE:-$logs/demo-pfs-console.log}
envs=
for v in PFS_DEMO_SMALL PFS_DEMO_BIG_MB PFS_DEMO_IOR_COUNT HDD_SIZE_MB HDDSIM_OPTS; do
	[ -n "${!v:-}" ] && envs+=" $v='${!v}'"
done
rc=0
nxd_vm "$kver" "env$envs python3 scripts/pfs_guest.py demo build/demo-pfs" || rc=$?
say "finished in $(($(date +%s) - t0)) s (exit $rc); guest console: ${VM_CONSOLE#"$here"/}; results in build/demo-pfs/"
exit $rc
