#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# reboot.sh KVER
#
# An nxd volume comes back by itself after a reboot of the guest: two guest
# boots (scripts/vm-run.sh) sharing image files under build/reboot/KVER/.
#  boot 1: an md RAID6 over four images, an SSD image, nxdctl create, an
#          ext4, the nxdtab line, files written with part of them in the
#          log, then umount and nxd-stop.service's ExecStop= line.
#  boot 2: the images appear again, md assembles the array, the udev rule
#          names nxd-activate@UUID.service and its ExecStart= line runs;
#          /dev/disk/by-uuid of the ext4 must be the nxd
#          volume (name, DM UUID, threshold from nxdtab, log replayed) and
#          every file must verify.
# The guest's init is not systemd (virtme-ng), so the unit's command lines
# run in its place (scripts/reboot_guest.py has the details).
# Prints one line "reboot KVER: PASS|FAIL ..." and exits 0/1 (2: setup).
# Environment: REBOOT_KEEP=1 keeps the images after a PASS; VM_* as for
# scripts/vm-run.sh; REBOOT_BOOT1=OUTPUT when boot 1 already ran as the end
# of another guest (scripts/test.sh: after the test suite, in a fresh
# build/reboot/KVER), whose OUTPUT holds its lines.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$here/scripts/lib.sh"
cd "$here" || exit 2
[ $# -ge 1 ] || { echo "usage: $0 KVER" >&2; exit 2; }
kver=$1
dir=build/reboot/$kver
logs=${NXD_LOGS:-build/logs}
mkdir -p "$logs"
export VM_TIMEOUT=${VM_TIMEOUT:-600}
[ -f "build/$kver/dm-nxd.ko" ] || { echo "reboot $kver: FAIL: setup (build/$kver/dm-nxd.ko missing: make modules-all)"; exit 2; }
if [ ! -x tools/nxdctl ] || [ ! -x tools/nxd-probe ]; then echo "reboot $kver: FAIL: setup (make tools)"; exit 2; fi

# verdict B RC OUT: boot B's last "reboot: " line in OUT and its exit status
# RC; exits with the FAIL line unless both say it passed.
verdict() {
	last=$(grep '^reboot: ' "$3" | tail -n 1)
	if [ "$2" != 0 ] || [ -z "$last" ] || grep -q '^reboot: FAIL' <<<"$last"; then
		tail -n 40 "$3" >&2
		echo "reboot $kver: FAIL: boot $1 (exit $2): ${last#reboot: }; see $3, $logs/$kver-reboot-boot$1-console.log"
		exit 1
	fi
	echo "reboot[$kver]: ${last#reboot: }" >&2
}

boots="1 2"
if [ -n "${REBOOT_BOOT1:-}" ]; then
	# Boot 1 was the end of another guest's command (make test folds it
	# into the test guest, after pytest): REBOOT_BOOT1=OUTPUT, that guest's
	# output, where boot 1's lines end with "reboot-boot1-exit: RC".
	[ -d "$dir" ] || { echo "reboot $kver: FAIL: setup (no $dir)"; exit 2; }
	sed -n '/^reboot: /,/^reboot-boot1-exit: /p' "$REBOOT_BOOT1" >"$dir/boot1.out"
	rc=$(sed -n 's/^reboot-boot1-exit: \([0-9]*\).*/\1/p' "$dir/boot1.out" | tail -n 1)
	verdict 1 "${rc:-none}" "$dir/boot1.out"
	boots=2
else
	rm -rf "$dir"
	mkdir -p "$dir"
fi
for b in $boots; do
	echo "reboot[$kver]: boot $b" >&2
	for try in 1 2; do
		VM_CONSOLE=$logs/$kver-reboot-boot$b-console.log \
			scripts/vm-run.sh "$kver" "python3 scripts/reboot_guest.py boot$b $dir" \
			>"$dir/boot$b.out" 2>&1
		rc=$?
		# A guest that died before its command ran (a TCG "Oops: int3" at
		# boot) touched nothing: boot once more.
		if [ "$try" = 2 ] || ! nxd_never_started "$logs/$kver-reboot-boot$b-console.log"; then
			break
		fi
		echo "reboot[$kver]: boot $b died before its command ran (exit $rc); booting again" >&2
	done
	verdict "$b" "$rc" "$dir/boot$b.out"
done
echo "reboot $kver: ${last#reboot: }"
[ "${REBOOT_KEEP:-0}" = 1 ] || rm -f "$dir"/*.img
exit 0
