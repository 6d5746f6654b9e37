#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The helpers are called through check, need and wait_for:
# shellcheck disable=SC2317
#
# The guest half of scripts/test-boot.sh: run by nxd-boottest.service in a
# Debian root booted by systemd, once per boot.  The scenario comes from
# the kernel command line (nxdtest=...); the results go to
# /var/lib/nxd-boottest/<scenario>.result (the root is the host's folder,
# virtiofs), one "ok ..." or "FAIL ..." line per check, then "done".
# Every wait is a poll with a deadline.  The last step powers off (or,
# for a dirty log, resets the machine through sysrq).
set -u

scen=$(sed -n 's/.*nxdtest=\([a-z-]*\).*/\1/p' /proc/cmdline)
dir=/var/lib/nxd-boottest
res=$dir/$scen.result
mkdir -p "$dir"
: >"$res"
ssd=/dev/disk/by-id/virtio-nxdssd
mnt=/srv/ost0
fails=0

say() { echo "nxd-boottest: $*" >/dev/console; echo "$*" >>"$res"; }
ok() { say "ok $*"; }
bad() { say "FAIL $*"; fails=$((fails + 1)); }
check() {			# check DESCRIPTION COMMAND...
	local d=$1
	shift
	if "$@" >>"$dir/$scen.log" 2>&1; then ok "$d"; else bad "$d"; fi
}
# need: as check, but stop here (power off) if it fails.
need() {
	local f=$fails
	check "$@"
	[ "$fails" = "$f" ] || finish
}
# wait_for SECONDS COMMAND...: poll until COMMAND succeeds.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || return 1
		sleep 1
	done
}
finish() {
	say "elapsed_since_boot $(cut -d' ' -f1 /proc/uptime)"
	journalctl -b --no-pager -o short-monotonic >"$dir/$scen.journal" 2>&1
	say "done fails=$fails"
	sync
	case ${1:-off} in
	reset) echo b >/proc/sysrq-trigger ;;
	*) systemctl poweroff ;;
	esac
	exit 0
}
uuid() { cat "$dir/uuid"; }
mounted() { findmnt -n -o SOURCE "$mnt" | grep -q '^/dev/mapper/ost0$\|^/dev/dm-'; }
vol_active() { dmsetup info ost0 >/dev/null; }
journal_has() { journalctl -b --no-pager -o cat | grep -qF -- "$1"; }
unit_result() {		# unit_result UNIT: its Result= once it ran
	systemctl show -p Result --value "$1"
}
ran() { [ "$(systemctl show -p ExecMainStartTimestampMonotonic --value "$1")" != 0 ]; }
no_raw_mount() { ! findmnt -n -o SOURCE | grep -q '^/dev/md'; }
sums_ok() { (cd "$mnt" && sha256sum --quiet -c "$dir/sums"); }

say "scenario $scen"
case $scen in
setup)
	need "SSD and 4 HDD disks present" wait_for 400 test -b "$ssd" -a \
		-b /dev/disk/by-id/virtio-nxdhdd4
	hdds=(/dev/disk/by-id/virtio-nxdhdd[1-4])
	# Zeroed members: their parity is already consistent.
	need "RAID6 created" mdadm --create /dev/md/nxdhdd --run \
		--level=6 --raid-devices=4 --assume-clean --metadata=1.2 "${hdds[@]}"
	need "md array ready" wait_for 30 test -b /dev/md/nxdhdd
	need "nxd volume created" nxdctl create ost0 /dev/md/nxdhdd "$ssd"
	nxdctl show-super "$ssd" --json |
		sed -n 's/.*"vol_uuid": *"\([^"]*\)".*/\1/p' | head -1 >"$dir/uuid"
	need "volume UUID known" test -s "$dir/uuid"
	mkdir -p /etc/nxd
	echo "ost0 UUID=$(uuid)" >/etc/nxd/nxdtab
	need "mkfs on the volume" mkfs.ext4 -q -L ost0 /dev/mapper/ost0
	fsuuid=$(blkid -o value -s UUID /dev/mapper/ost0)
	mkdir -p "$mnt"
	echo "UUID=$fsuuid $mnt ext4 nofail,x-systemd.device-timeout=20min 0 0" >>/etc/fstab
	cp /etc/fstab "$dir/fstab"
	finish
	;;
dirty)
	check "nxd-activate@$(uuid).service ran" wait_for 300 ran "nxd-activate@$(uuid).service"
	check "fstab mount of the volume (nofail, UUID=)" wait_for 300 mounted
	check "previous shutdown ran nxd-stop.service's stop" \
		sh -c "journalctl -b -1 --no-pager -o cat -u nxd-stop.service | grep -q 'dmsetup remove .*ost0\$'"
	check "nxd-stop.service enabled by the preset" systemctl is-enabled nxd-stop.service
	check "no udev-settle in this boot" sh -c "! systemctl is-active -q systemd-udev-settle.service && ! journalctl -b -o cat | grep -q 'udev-settle.service is deprecated'"
	nxdctl pause-destage ost0 >>"$dir/$scen.log" 2>&1
	# Small files: their writes go to the log and stay there.
	mkdir -p "$mnt/d"
	for i in $(seq 1 150); do
		head -c $(((i % 15 + 1) * 4096)) /dev/urandom >"$mnt/d/f$i"
	done
	sync
	(cd "$mnt" && sha256sum d/*) >"$dir/sums"
	nxdctl status ost0 --json >"$dir/dirty-status.json" 2>&1
	check "the log holds writes before the reset" \
		grep -q '"dirty_blocks": *[1-9]' "$dir/dirty-status.json"
	finish reset
	;;
after-dirty)
	check "nxd-activate@$(uuid).service ran" wait_for 300 ran "nxd-activate@$(uuid).service"
	check "fstab mount of the volume" wait_for 300 mounted
	check "the log was replayed (recovered_blocks > 0)" \
		sh -c "nxdctl stats ost0 --json | grep -q '\"recovered_blocks\": *[1-9]'"
	check "data matches the checksums taken before the reset" sums_ok
	finish
	;;
degraded)
	check "md array started by mdadm-last-resort" \
		wait_for 300 sh -c "journalctl -b --no-pager -o cat | grep -q 'mdadm-last-resort@.*\.service\|Activate md array .* even though degraded'"
	check "fstab mount of the volume" wait_for 300 mounted
	check "the array is degraded (3 of 4)" grep -q '\[4/3\]' /proc/mdstat
	check "data matches the checksums" sums_ok
	# The volume came from the array's own event: activate ran after
	# mdadm --run, long before the 90 s timer of the SSD.
	journalctl -b --no-pager -o short-monotonic \
		-u "mdadm-last-resort@*" -u "nxd-activate@$(uuid).service" \
		-u "nxd-activate@$(uuid).timer" >>"$dir/$scen.log" 2>&1
	finish
	;;
nossd)
	check "nxd-activate@$(uuid).service ran (from its timer)" \
		wait_for 400 sh -c "[ \"\$(systemctl show -p Result --value nxd-activate@$(uuid).service)\" = exit-code ]"
	check "the journal says the SSD is missing" \
		journal_has "volume $(uuid): its HDD"
	check "... and names the missing half" journal_has "but its SSD is missing: not assembled"
	check "the volume is not assembled" sh -c "! dmsetup info ost0"
	check "the nofail fstab line is skipped: nothing on $mnt" sh -c "! findmnt $mnt"
	check "no raw array mounted" no_raw_mount
	fsuuid=$(awk -v m="$mnt" '$2 == m { sub("UUID=", "", $1); print $1 }' /etc/fstab)
	check "no /dev/disk/by-uuid link to the raw array" test ! -e "/dev/disk/by-uuid/$fsuuid"
	check "boot reached multi-user" wait_for 120 sh -c "systemctl is-active -q multi-user.target"
	finish
	;;
*)
	say "unknown scenario '$scen'"
	finish
	;;
esac
