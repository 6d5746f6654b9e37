#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# powercut.sh KVER [SEED]
#
# Whole-guest power cut test of dm-nxd, two guest boots (scripts/vm-run.sh):
#  boot 1: HDD and SSD image files under build/powercut/KVER-SEED/ on loop
#          devices, nxd over them, a verified seeded workload that records
#          (fsynced) every completed fsync/O_DSYNC write, and at a random
#          moment `echo b > /proc/sysrq-trigger` (reboot, no sync).
#  boot 2: the same loop devices and table (recovery runs at load), then
#          nxd must report state `ok`, then every 4 KiB block (per 512 B
#          sector) is checked against the model at the last recorded
#          durability point; data written after that point may be old or new.
# Boot 1 must end in the reset ("sysrq: Resetting" on its console, and
# vm-run.sh's exit status 255, which is what a reset guest gives) with no
# failed live check; anything else is a FAIL.
# Prints one line "powercut KVER seed N ...: PASS|FAIL ..." and exits 0/1
# (2: setup problem, e.g. the guest did not crash).
#
# Environment: POWERCUT_SEED (default random), POWERCUT_KEEP=1 keeps the
# images after a PASS; NXD_LOGS (default build/logs); VM_* as for
# scripts/vm-run.sh; POWERCUT_BOOT1=RC:CONSOLE:OUTPUT when boot 1 already
# ran as the end of another guest (scripts/test.sh: after the test suite,
# in build/powercut/KVER-SEED made by nxd_cut_prepare).
set -uo pipefail

# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$nxd_here" || exit 2
[ $# -ge 1 ] || { echo "usage: $0 KVER [SEED]" >&2; exit 2; }
kver=$1
seed=${2:-${POWERCUT_SEED:-$((RANDOM * 32768 + RANDOM))}}
logs=${NXD_LOGS:-build/logs}
say() { echo "powercut[$kver seed $seed]: $*" >&2; }
export VM_TIMEOUT=${VM_TIMEOUT:-600}

if [ -n "${POWERCUT_BOOT1:-}" ]; then
	# Boot 1 was the end of another guest's command (make test folds it
	# into the test guest, after pytest): POWERCUT_BOOT1=RC:CONSOLE:OUTPUT,
	# that guest's exit status, console log and output; its part of the
	# console starts at the line "nxd-ci: powercut boot 1".
	IFS=: read -r rc1 console1 out1 <<<"$POWERCUT_BOOT1"
	dir=build/powercut/$kver-$seed
	[ -d "$dir" ] || { echo "powercut $kver seed $seed: FAIL: setup (no $dir)"; exit 2; }
	sed -n '/^powercut1/,$p' "$out1" >"$dir/boot1.out"
	marker="nxd-ci: powercut boot 1"
else
	dir=$(nxd_cut_prepare powercut "$kver" "$seed") || exit 2
	say "boot 1: workload, then sysrq-b"
	console1=$logs/$kver-powercut-$seed-boot1-console.log
	VM_CONSOLE=$console1 \
		scripts/vm-run.sh "$kver" "python3 scripts/powercut_guest.py powercut1 $dir $seed" \
		>"$dir/boot1.out" 2>&1
	rc1=$?
	marker=
fi
grep '^powercut1' "$dir/boot1.out" | tail -n 3 >&2
nxd_cut_boot1 powercut "$kver" "$seed" "$dir" "$console1" "$rc1" "$marker" ||
	exit $?
say "boot 1 cut after $(wc -l <"$dir/durable.log") durability points"

say "boot 2: recover and check"
nxd_cut_boot2 powercut "$kver" "$seed" "$dir" "$logs/$kver-powercut-$seed-boot2-console.log" \
	"${POWERCUT_KEEP:-0}" "python3 scripts/powercut_guest.py powercut2 $dir $seed"
