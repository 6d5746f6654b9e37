#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# 1 MiB sequential writes over logged blocks (the "streaming right after
# small writes" case), for one or more builds of dm-nxd side by side in ONE
# guest:   scripts/measure-overwrite.sh KVER MOD.ko [MOD.ko...]
# For each module: emulated RAID6 (bench/mkraid.sh), a brd SSD, a fresh
# volume, destage paused; FILL_MB of random 4 KiB writes over a REGION_MB
# region (logged), then 1 MiB O_DIRECT sequential writes (QD 4, 15 s) over
# that region; then the same 1 MiB writes on the array alone (reference).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/measure-lib.sh
FILL_MB=${FILL_MB:-32}
REGION_MB=${REGION_MB:-256}
measure_setup scripts/measure-overwrite.sh "FILL_MB REGION_MB" "$@"
say() { echo "overwrite: $*"; }
say "array $md $((vol / 2048 + 1)) MiB, SSD ${SSD_MB} MiB, ${FILL_MB} MiB of 4 KiB logged over ${REGION_MB} MiB, then 1 MiB writes over it"
field() { dmsetup status ox | awk -v n="$1" '{print $(4 + n)}'; }
stream() {	# DEV
	fio --name=s --filename="$1" --rw=write --bs=1M --iodepth=4 --ioengine=libaio \
		--direct=1 --size="${REGION_MB}m" --runtime=15 --time_based \
		--output-format=terse --terse-version=3 | awk -F';' '{printf "%.1f", $48 / 1024}'
}
for ko in "${MODS[@]}"; do
	insmod "$ko"
	dmsetup create ox --table "0 $vol nxd $md /dev/ram0 1 format"
	dmsetup message ox 0 pause_destage
	fio --name=f --filename=/dev/mapper/ox --rw=randwrite --bs=4k --iodepth=8 \
		--ioengine=libaio --direct=1 --size="${REGION_MB}m" --io_size="${FILL_MB}m" \
		--randrepeat=1 --output-format=terse >/dev/null
	e0=$(field 3)
	r=$(stream /dev/mapper/ox)
	say "$ko: 1 MiB writes over logged blocks: $r MiB/s (index entries $e0 -> $(field 3), invalidations $(field 12))"
	udevadm settle || true
	dmsetup remove --retry ox
	rmmod dm_nxd
done
say "array alone, 1 MiB writes: $(stream "$md") MiB/s"
bench/mkraid.sh down >/dev/null 2>&1 || mdadm --stop "$md" || true
