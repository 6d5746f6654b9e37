#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Streaming-write bandwidth through dm-nxd with and without destaging
# running, in ONE guest (issue: destage pacing).  Runs inside the guest as
# root: `scripts/vm-run.sh KVER scripts/measure-destage.sh --guest`, or from
# the host: `scripts/measure-destage.sh [KVER]`.
#   1. emulated RAID6 (bench/mkraid.sh), brd SSD, nxd over them;
#   2. destage paused, 64 MiB of random 4 KiB writes fill part of the log;
#   3. 1 MiB sequential writes to the other half, destage paused;
#   4. the same with destaging at full speed (watermarks 0);
#   5. the same on the array alone (reference).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
if [ "${1:-}" != --guest ]; then
	. scripts/lib.sh
	nxd_guest_script "${1:-}" scripts/measure-destage.sh
	exit
fi
say() { echo "measure: $*"; }
modprobe dm-mod; modprobe libcrc32c || true; modprobe raid456
grep -q '^dm_nxd ' /proc/modules || insmod "build/$(uname -r)/dm-nxd.ko"
grep -q '^brd ' /proc/modules || modprobe brd rd_nr=1 rd_size=$((256 * 1024))
md=$(PREFILL=0 bench/mkraid.sh up 6 | tail -n1)
sz=$(blockdev --getsz "$md")
vol=$((sz / 2048 * 2048 - 2048))
half=$((vol * 512 / 2))
stream() {	# DEV LABEL
	fio --name=s --filename="$1" --rw=write --bs=1M --iodepth=4 --ioengine=libaio \
		--direct=1 --offset="$half" --size=$((half / 2)) --runtime=15 --time_based \
		--output-format=terse --terse-version=3 | awk -F';' '{printf "%.1f", $48 / 1024}'
}
dmsetup create mdx --table "0 $vol nxd $md /dev/ram0 1 format"
dev=/dev/mapper/mdx
dmsetup message mdx 0 pause_destage
fio --name=f --filename=$dev --rw=randwrite --bs=4k --iodepth=8 --ioengine=libaio --direct=1 \
	--size=64m --norandommap=0 --output-format=terse >/dev/null
st() { dmsetup status mdx | awk '{print "log_used_blocks=" $6 " destaged_bytes=" $19}'; }
say "after filling: $(st)"
a=$(stream $dev)
say "streaming, destage paused: $a MiB/s ($(st))"
dn=$(basename "$(readlink -f $dev)")
echo 0 >"/sys/block/$dn/nxd/low_watermark"
echo 0 >"/sys/block/$dn/nxd/high_watermark"
dmsetup message mdx 0 resume_destage
b=$(stream $dev)
say "streaming, destaging at full speed: $b MiB/s ($(st))"
udevadm settle || true
for _ in 1 2 3 4 5 6; do dmsetup remove --retry mdx && break; sleep 5; done
c=$(stream "$md")
say "streaming, array alone: $c MiB/s"
echo "RESULT streaming MiB/s: destage paused $a, destaging $b, array alone $c"
bench/mkraid.sh down >/dev/null 2>&1 || true
