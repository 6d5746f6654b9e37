#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# pfs-powercut.sh KVER [SEED]
#
# Whole-guest power cut under GlusterFS, two guest boots (scripts/vm-run.sh,
# the fixture of scripts/powercut.sh with Gluster on top):
#  boot 1: three bricks (XFS on nxd over md RAID6 of 4 loop members, a loop
#          SSD each) and glusterd's working directory (ext4) on image files
#          under build/pfs-powercut/KVER-SEED/ on loop devices (as in
#          powercut.sh: the files sit on 9p without a cache, so every
#          completed write is on the host at the reset and a missing flush
#          is NOT tested here; docs/reliability.md, section 11); a
#          distributed and a dispersed volume, FUSE mounts, a verified
#          workload, then writers through both mounts that record every
#          fsync'd file, and `echo b > /proc/sysrq-trigger` at a seeded
#          moment.
#  boot 2: arrays assembled, nxd volumes recovered, XFS and ext4 mounted,
#          glusterd started (it starts the bricks), both volumes mounted;
#          every file verified before the writers and every fsync'd file
#          checked, the dispersed volume healed, xfs_repair -n and e2fsck -fn
#          clean, no kernel problem (scripts/pfs_guest.py cut2).
# Prints one line "pfs-powercut KVER seed N: PASS|FAIL ..." last and exits
# 0 on PASS, 1 on FAIL, 2 when boot 1 did not get as far as the cut.
#
# Environment: PFS_POWERCUT_KEEP=1 keeps the images after a PASS; NXD_LOGS
# (default build/logs); VM_* as for scripts/vm-run.sh.
set -uo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$nxd_here" || exit 2
[ $# -ge 1 ] || { echo "usage: $0 KVER [SEED]" >&2; exit 2; }
kver=$1
seed=${2:-$((RANDOM % 1000))}
dir=$(nxd_cut_prepare pfs-powercut "$kver" "$seed") || exit 2
logs=${NXD_LOGS:-build/logs}
say() { echo "pfs-powercut[$kver seed $seed]: $*" >&2; }
export VM_TIMEOUT=${VM_TIMEOUT:-1800}
[ -x tools/nxdctl ] || { say "tools/nxdctl missing: make tools"; exit 2; }

console1=$logs/$kver-pfs-powercut-$seed-boot1-console.log
say "boot 1: Gluster on three nxd bricks, workload, writers, then sysrq-b"
VM_CONSOLE=$console1 scripts/vm-run.sh "$kver" "python3 scripts/pfs_guest.py cut1 $dir $seed" \
	>"$dir/boot1.out" 2>&1
rc1=$?
grep '^pfs-cut1' "$dir/boot1.out" | tail -n 3 >&2
nxd_cut_boot1 pfs-powercut "$kver" "$seed" "$dir" "$console1" "$rc1" || exit $?
say "boot 1 cut after $(wc -l <"$dir/durable.log") durability points"

say "boot 2: recover, start Gluster, check"
nxd_cut_boot2 pfs-powercut "$kver" "$seed" "$dir" "$logs/$kver-pfs-powercut-$seed-boot2-console.log" \
	"${PFS_POWERCUT_KEEP:-0}" "python3 scripts/pfs_guest.py cut2 $dir $seed"
