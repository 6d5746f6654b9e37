#!/usr/bin/env bash
# Build (or tear down) the emulated HDD RAID6 used by the dm-nxd benchmarks.
# Runs INSIDE the benchmark guest (root).  Test fixture only.
#
#   bench/mkraid.sh up   [N]   N (default 6) hddsim drives over memory-backed
#                                null_blk (or brd) devices + md RAID6 over them;
#                                prints the md device (e.g. /dev/md/nxdbench)
#   bench/mkraid.sh down       stop the array, remove the drives, free memory
#
# Environment:
#   HDD_SIZE_MB   size of each drive in MiB (default 128)
#   RAID_CHUNK_KB md chunk size in KiB (default 64)
#   RAID_NAME     md array name (default nxdbench)
#   RAID_STRIPE_CACHE   md's stripe_cache_size (default 1024)
#   RAID_GROUP_THREADS  md's group_thread_cnt (raid456 worker threads that
#                 share stripe handling with raid6d; unset: md's default, 0)
#   HDDSIM_OPTS   optional hddsim arguments, e.g. "4 seek_us 8000 rot_us 8333"
#                 (default: the module's calibrated defaults)
#   HDD_BACKING   nullb (default: null_blk memory_backed via configfs) or brd
#   HDDSIM_KO     path of dm-hddsim.ko (default build/$(uname -r)/hddsim/)
#   PREFILL       1 (default): write zeros over each backing device first, as
#                 brd/null_blk allocate memory on first write, which under TCG
#                 costs more than the emulated transfer; 0 to skip
#
# The array is created with --assume-clean: the members are fresh memory
# devices, and a resync through emulated HDDs would take many minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
N=${2:-${HDD_COUNT:-6}}
HDD_SIZE_MB=${HDD_SIZE_MB:-128}
RAID_CHUNK_KB=${RAID_CHUNK_KB:-64}
RAID_NAME=${RAID_NAME:-nxdbench}
HDDSIM_OPTS=${HDDSIM_OPTS:-}
HDD_BACKING=${HDD_BACKING:-nullb}
HDDSIM_KO=${HDDSIM_KO:-$here/build/$(uname -r)/hddsim/dm-hddsim.ko}
CFS=/sys/kernel/config/nullb
STATE=/run/nxd-mkraid.state
log() { echo "mkraid: $*" >&2; }

load_hddsim() {
	modprobe dm-mod
	if ! grep -qw hddsim /proc/modules 2>/dev/null && ! dmsetup targets | grep -qw hddsim; then
		[ -f "$HDDSIM_KO" ] || { log "missing $HDDSIM_KO (make -C bench/hddsim)"; exit 1; }
		insmod "$HDDSIM_KO"
	fi
}

backing_up() { # prints the N backing devices
	local i
	case $HDD_BACKING in
	nullb)
		modprobe configfs 2>/dev/null || true
		mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
		grep -qw null_blk /proc/modules || modprobe null_blk nr_devices=0
		for i in $(seq 0 $((N - 1))); do
			local d=$CFS/nxdmem$i
			mkdir -p "$d"
			echo "$HDD_SIZE_MB" > "$d/size"
			echo 1 > "$d/memory_backed"
			echo 512 > "$d/blocksize"
			echo 0 > "$d/irqmode"
			echo 2 > "$d/queue_mode"
			echo 1 > "$d/power"
			# 6.x names the disk after the configfs item; older: nullb<index>
			if [ -e "/sys/block/nxdmem$i" ]; then echo "/dev/nxdmem$i"
			else echo "/dev/nullb$(cat "$d/index")"; fi
		done
		;;
	brd)
		grep -qw brd /proc/modules && { log "brd already loaded; HDD_BACKING=brd needs it free"; exit 1; }
		modprobe brd rd_nr="$N" rd_size=$((HDD_SIZE_MB * 1024))
		for i in $(seq 0 $((N - 1))); do echo "/dev/ram$i"; done
		;;
	*) log "unknown HDD_BACKING=$HDD_BACKING"; exit 1 ;;
	esac
}

# The md device whose members are our drives (does not rely on udev having
# made the /dev/md/NAME link: under a loaded TCG host mdadm may time out
# waiting for it).
find_md() {
	local first m
	[ -e /dev/mapper/nxdhdd0 ] || return 0
	first=$(basename "$(readlink -f /dev/mapper/nxdhdd0)")
	for m in /sys/block/md*; do
		[ -e "$m/slaves/$first" ] && { echo "/dev/$(basename "$m")"; return 0; }
	done
	return 0
}

up() {
	load_hddsim
	modprobe raid456
	local devs=() i=0 b sz
	udevadm settle 2>/dev/null || true
	for b in $(backing_up); do
		for _ in $(seq 50); do [ -b "$b" ] && break; sleep 0.2; done
		sz=$(blockdev --getsz "$b")
		if [ "${PREFILL:-1}" = 1 ]; then
			dd if=/dev/zero of="$b" bs=1M count=$((sz / 2048)) oflag=direct status=none
		fi
		dmsetup create "nxdhdd$i" --table "0 $sz hddsim $b $HDDSIM_OPTS"
		devs+=("/dev/mapper/nxdhdd$i")
		i=$((i + 1))
	done
	udevadm settle 2>/dev/null || true
	echo "$HDD_BACKING $N" > $STATE
	# MDADM_NO_UDEV: mdadm makes the nodes itself instead of waiting (up to
	# minutes on a loaded TCG host) for udev.
	MDADM_NO_UDEV=1 mdadm --create "/dev/md/$RAID_NAME" --run --quiet --level=6 \
		--raid-devices="$N" --chunk="$RAID_CHUNK_KB" --assume-clean \
		--metadata=1.2 --bitmap=none --homehost=any "${devs[@]}" >&2
	udevadm settle 2>/dev/null || true
	local md maj min
	md=$(find_md)
	[ -n "$md" ] || { log "md array not found after create"; exit 1; }
	if [ ! -b "$md" ]; then
		IFS=: read -r maj min < "/sys/block/$(basename "$md")/dev"
		mknod "$md" b "$maj" "$min"
	fi
	# A bigger stripe cache lets raid6 batch full-stripe writes.
	echo "${RAID_STRIPE_CACHE:-1024}" > "/sys/block/$(basename "$md")/md/stripe_cache_size" 2>/dev/null || true
	if [ -n "${RAID_GROUP_THREADS:-}" ]; then
		echo "$RAID_GROUP_THREADS" > "/sys/block/$(basename "$md")/md/group_thread_cnt"
	fi
	log "RAID6 $md: $N x ${HDD_SIZE_MB} MiB hddsim drives, chunk ${RAID_CHUNK_KB}K"
	echo "$md"
}

down() {
	local md maj min
	md=$(find_md)
	if [ -n "$md" ]; then
		if [ ! -b "$md" ]; then
			IFS=: read -r maj min < "/sys/block/$(basename "$md")/dev"
			mknod "$md" b "$maj" "$min"
		fi
		mdadm --stop "$md" >&2 || true
	fi
	for d in /dev/mapper/nxdhdd*; do
		[ -e "$d" ] || continue
		mdadm --zero-superblock "$d" 2>/dev/null || true
		dmsetup remove --retry "$(basename "$d")" || true
	done
	if [ -d "$CFS" ]; then
		for d in "$CFS"/nxdmem*; do
			[ -d "$d" ] || continue
			echo 0 > "$d/power" 2>/dev/null || true
			rmdir "$d" || true
		done
	fi
	if [ -f $STATE ] && grep -q '^brd' $STATE; then
		rmmod brd 2>/dev/null || true
	fi
	rm -f $STATE
	log "torn down"
}

case ${1:-} in
up) up ;;
down) down ;;
*) echo "usage: $0 up [N] | down" >&2; exit 2 ;;
esac
