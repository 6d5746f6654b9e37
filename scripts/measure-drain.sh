#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Drain of a log full of random 4 KiB writes, for one or more builds of
# dm-nxd side by side in ONE guest (issue: destage at streaming speed):
#   scripts/measure-drain.sh KVER MOD.ko [MOD.ko...]    (from the host)
# For each module: emulated RAID6 (bench/mkraid.sh, dm-hddsim drives), a
# brd SSD, a fresh volume; destage paused, FILL_MB of random 4 KiB writes
# over a region REGION_X times the log; then `drain` with the watermarks at
# 0, timed.  Prints the drain rate, the mean destage bio and, once, random
# 4 KiB direct writes of the same region on the array alone (reference).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/measure-lib.sh
FILL_MB=${FILL_MB:-40}
REGION_X=${REGION_X:-8}
measure_setup scripts/measure-drain.sh "FILL_MB REGION_X" "$@"
say() { echo "drain: $*"; }
region=$((SSD_MB * REGION_X))
say "array $md $((vol / 2048 + 1)) MiB, SSD ${SSD_MB} MiB, fill ${FILL_MB} MiB of 4 KiB over ${region} MiB"
[ $((region * 2048)) -le "$vol" ] || { say "region larger than the array"; exit 1; }
# status fields after "0 LEN nxd VERSION": docs/status.md's counters.
field() { dmsetup status dx | awk -v n="$1" '{print $(4 + n)}'; }
for ko in "${MODS[@]}"; do
	insmod "$ko"
	dmsetup create dx --table "0 $vol nxd $md /dev/ram0 1 format"
	dn=$(basename "$(readlink -f /dev/mapper/dx)")
	dmsetup message dx 0 pause_destage
	fio --name=f --filename=/dev/mapper/dx --rw=randwrite --bs=4k --iodepth=8 \
		--ioengine=libaio --direct=1 --size="${region}m" --io_size="${FILL_MB}m" \
		--randrepeat=1 --output-format=terse >/dev/null
	used=$(field 2)
	b0=$(field 15)
	n0=$(field 16)
	echo 0 >"/sys/block/$dn/nxd/low_watermark"
	echo 0 >"/sys/block/$dn/nxd/high_watermark" 2>/dev/null || true
	dmsetup message dx 0 resume_destage
	t0=$(date +%s.%N)
	dmsetup message dx 0 drain
	t1=$(date +%s.%N)
	b1=$(field 15)
	n1=$(field 16)
	python3 -c "
import sys
t=$t1-$t0; b=$b1-$b0; n=$n1-$n0
print('drain: %s: log used %d blocks; drained %.1f MiB in %.1f s = %.2f MiB/s, %d destage bios, mean %.1f KiB, log used after %s'
      % ('$ko', $used, b/2**20, t, b/2**20/t, n, b/1024/max(n,1), '$(field 2)'))"
	udevadm settle || true
	dmsetup remove --retry dx
	rmmod dm_nxd
done
ref=$(fio --name=r --filename="$md" --rw=randwrite --bs=4k --iodepth=8 --ioengine=libaio \
	--direct=1 --size=${region}m --runtime=30 --time_based --randrepeat=1 \
	--output-format=terse --terse-version=3 | awk -F';' '{printf "%.2f", $48 / 1024}')
say "array alone, random 4 KiB writes over the region, QD 8: $ref MiB/s"
bench/mkraid.sh down >/dev/null 2>&1 || mdadm --stop "$md" || true
