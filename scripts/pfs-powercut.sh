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

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 2
[ $# -ge 1 ] || { echo "usage: $0 KVER [SEED]" >&2; exit 2; }
kver=$1
seed=${2:-$((RANDOM % 1000))}
dir=build/pfs-powercut/$kver-$seed
logs=${NXD_LOGS:-build/logs}
mkdir -p "$logs"
rm -rf "$dir"
mkdir -p "$dir"
say() { echo "pfs-powercut[$kver seed $seed]: $*" >&2; }
export VM_TIMEOUT=${VM_TIMEOUT:-1800}
[ -f "build/$kver/dm-nxd.ko" ] || { say "build/$kver/dm-nxd.ko missing: make modules-all"; exit 2; }
[ -x tools/nxdctl ] || { say "tools/nxdctl missing: make tools"; exit 2; }

console1=$logs/$kver-pfs-powercut-$seed-boot1-console.log
say "boot 1: Gluster on three nxd bricks, workload, writers, then sysrq-b"
VM_CONSOLE=$console1 scripts/vm-run.sh "$kver" "python3 scripts/pfs_guest.py cut1 $dir $seed" \
	>"$dir/boot1.out" 2>&1
rc1=$?
grep '^pfs-cut1' "$dir/boot1.out" | tail -n 3 >&2
if [ ! -e "$dir/armed" ]; then
	tail -n 30 "$dir/boot1.out" >&2
	echo "pfs-powercut $kver seed $seed: FAIL: setup (boot 1 exit $rc1, never armed; see $console1)"
	exit 2
fi
if [ -e "$dir/boot1-failed" ]; then
	echo "pfs-powercut $kver seed $seed: FAIL: boot 1 (before the cut): $(head -c 300 "$dir/boot1-failed")"
	exit 1
fi
if [ -e "$dir/no-crash" ] || ! grep -aq "sysrq: Resetting" "$console1" || [ "$rc1" != 255 ]; then
	echo "pfs-powercut $kver seed $seed: FAIL: boot 1 did not end in the reset (exit $rc1; see $console1)"
	exit 1
fi
# A kernel problem before the reset is a failure too.
bad=$(sed -n '1,/sysrq: Resetting/p' "$console1" | grep -aE 'BUG:|WARNING:|Oops|blocked for more than|Call Trace' | head -n 5)
if [ -n "$bad" ]; then
	echo "$bad" >&2
	echo "pfs-powercut $kver seed $seed: FAIL: kernel problems in boot 1 (see $console1)"
	exit 1
fi
say "boot 1 cut after $(wc -l <"$dir/durable.log") durability points"

say "boot 2: recover, start Gluster, check"
out=$(VM_CONSOLE=$logs/$kver-pfs-powercut-$seed-boot2-console.log \
	scripts/vm-run.sh "$kver" "python3 scripts/pfs_guest.py cut2 $dir $seed" 2>&1)
rc2=$?
echo "$out" >"$dir/boot2.out"
line=$(grep -E "^pfs-powercut .*: (PASS|FAIL)" <<<"$out" | tail -n 1)
if [ -z "$line" ]; then
	echo "$out" | tail -n 30 >&2
	echo "pfs-powercut $kver seed $seed: FAIL: no verdict from boot 2 (exit $rc2)"
	exit 1
fi
if [ "$rc2" != 0 ] || ! grep -q ": PASS" <<<"$line"; then
	grep -v "^pfs-powercut " <<<"$out" | tail -n 40 >&2
	echo "$line"
	say "kept $dir and the consoles in $logs"
	exit 1
fi
echo "$line"
[ "${PFS_POWERCUT_KEEP:-0}" = 1 ] || rm -f "$dir"/*.img
exit 0
