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
# images after a PASS; VM_* as for scripts/vm-run.sh.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 2
[ $# -ge 1 ] || { echo "usage: $0 KVER [SEED]" >&2; exit 2; }
kver=$1
seed=${2:-${POWERCUT_SEED:-$((RANDOM * 32768 + RANDOM))}}
dir=build/powercut/$kver-$seed
logs=build/logs
mkdir -p "$logs"
rm -rf "$dir"
mkdir -p "$dir"
say() { echo "powercut[$kver seed $seed]: $*" >&2; }
export VM_TIMEOUT=${VM_TIMEOUT:-600}

[ -f "build/$kver/dm-nxd.ko" ] || { say "build/$kver/dm-nxd.ko missing: make modules-all"; exit 2; }

say "boot 1: workload, then sysrq-b"
VM_CONSOLE=$logs/$kver-powercut-$seed-boot1-console.log \
	scripts/vm-run.sh "$kver" "python3 scripts/powercut_guest.py powercut1 $dir $seed" \
	>"$dir/boot1.out" 2>&1
rc1=$?
grep '^powercut1' "$dir/boot1.out" | tail -n 3 >&2
console1=$logs/$kver-powercut-$seed-boot1-console.log
if [ ! -e "$dir/armed" ]; then
	say "boot 1 never started the workload (exit $rc1); see $console1"
	echo "powercut $kver seed $seed: FAIL: setup (boot 1 exit $rc1)"
	exit 2
fi
# The workload checks every read against its model while it runs: a
# mismatch or an I/O error before the cut is a failure, not a setup problem.
if [ -e "$dir/boot1-failed" ]; then
	echo "powercut $kver seed $seed: FAIL: boot 1 (before the cut): $(head -c 300 "$dir/boot1-failed")"
	exit 1
fi
if [ -e "$dir/no-crash" ]; then
	echo "powercut $kver seed $seed: FAIL: setup (sysrq-b did not reboot the guest)"
	exit 2
fi
if ! grep -aq "sysrq: Resetting" "$console1"; then
	echo "powercut $kver seed $seed: FAIL: boot 1 ended without 'sysrq: Resetting' on the console (exit $rc1; see $console1)"
	exit 1
fi
# A guest reset by sysrq-b ends vng with 255 (the command never returns);
# 0 or any other status means the command ended by itself or the guest
# failed otherwise (124: vm-run.sh's timeout).
if [ "$rc1" != 255 ]; then
	echo "powercut $kver seed $seed: FAIL: boot 1 exited $rc1, not 255 (guest reset); see $dir/boot1.out, $console1"
	exit 1
fi
say "boot 1 cut after $(wc -l <"$dir/durable.log") durability points"

say "boot 2: recover and check"
out=$(VM_CONSOLE=$logs/$kver-powercut-$seed-boot2-console.log \
	scripts/vm-run.sh "$kver" "python3 scripts/powercut_guest.py powercut2 $dir $seed" 2>&1)
rc2=$?
echo "$out" >"$dir/boot2.out"
line=$(grep -E "^powercut .*: (PASS|FAIL)" <<<"$out" | tail -n 1)
if [ -z "$line" ]; then
	echo "$out" | tail -n 30 >&2
	echo "powercut $kver seed $seed: FAIL: no verdict from boot 2 (exit $rc2)"
	exit 1
fi
if [ "$rc2" != 0 ] || ! grep -q ": PASS" <<<"$line"; then
	grep -v "^powercut " <<<"$out" | tail -n 40 >&2
	echo "$line"
	say "kept $dir (images, durable.log) and $logs/$kver-powercut-$seed-boot*-console.log"
	exit 1
fi
echo "$line"
[ "${POWERCUT_KEEP:-0}" = 1 ] || rm -f "$dir"/*.img
exit 0
