#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Where the CPU goes on the small-write path, in ONE guest: 4 KiB random
# writes at QD 8 on the raw SSD, dm-writecache, dm-linear and dm-nxd (log empty,
# destage paused; 128 MiB written over a 64 MiB region), each under `perf record -a -g` (cpu-clock: TCG has no
# PMU).  Both "SSD" and "HDD" are brd ramdisks, so that the HDD is never
# the bottleneck and only the write path is measured.
#   scripts/profile-write.sh [KVER]        from the host
#   PROFILE_MODULES="main=build/KVER/dm-nxd.ko wp=/work/wp/build/KVER/dm-nxd.ko"
#                  several dm-nxd builds, one after the other in the same boot;
#                  LABEL=KO,key=value,... adds table options
# Writes build/logs/profile-<kver>/{SYSTEM.fio.json,SYSTEM.perf.txt,summary.txt}.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
if [ "${1:-}" != --guest ]; then
	. scripts/lib.sh
	VM_TIMEOUT=${VM_TIMEOUT:-1200} nxd_guest_script "${1:-}" \
		scripts/profile-write.sh "PROFILE_MODULES='${PROFILE_MODULES:-}'"
	exit
fi
out=build/logs/profile-$(uname -r)
mkdir -p "$out"
modprobe dm-mod; modprobe dm-writecache; modprobe libcrc32c || true
mods=${PROFILE_MODULES:-nxd=build/$(uname -r)/dm-nxd.ko}
modprobe brd rd_nr=2 rd_size=$((256 * 1024))
echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
sz=$(blockdev --getsz /dev/ram1)
vol=$((sz - 8192))

cpu() { awk '/^cpu /{print $2+$3+$4+$6+$7+$8, $5}' /proc/stat; }

run() {	# NAME DEV
	local name=$1 dev=$2 c0 c1
	c0=$(cpu)
	perf record -q -a -g -e cpu-clock -F 499 -o "/tmp/$name.data" -- \
		fio --name="$name" --filename="$dev" --rw=randwrite --bs=4k --iodepth=8 \
		--ioengine=libaio --direct=1 --size=64m --io_size=128m --runtime=120 \
		--randrepeat=0 --output-format=json >"$out/$name.fio.json" 2>/dev/null
	c1=$(cpu)
	perf report -i "/tmp/$name.data" --no-children --sort sym --stdio \
		--percent-limit 0.5 -g none 2>/dev/null >"$out/$name.perf.txt" || true
	perf report -i "/tmp/$name.data" --no-children --sort comm --stdio \
		-g none 2>/dev/null >"$out/$name.comm.txt" || true
	python3 - "$name" "$out/$name.fio.json" "$c0" "$c1" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
name, f, c0, c1 = sys.argv[1:]
j = json.load(open(f))["jobs"][0]["write"]
b0, i0 = map(int, c0.split()); b1, i1 = map(int, c1.split())
busy = b1 - b0
ios = j["total_ios"]
print(f"{name:12s} {j['iops']:9.0f} IOPS  p99 {j['clat_ns']['percentile']['99.000000']/1000:8.0f} us"
      f"  busy {100*busy/max(1,busy+i1-i0):5.1f}%  CPU per write {busy*10000/max(1,ios):7.1f} us")
EOF
}

: >"$out/summary.txt"
run ssd /dev/ram0
# dm-writecache formats only a zeroed superblock ("Invalid magic" otherwise).
dd if=/dev/zero of=/dev/ram0 bs=1M count=4 status=none
dmsetup create pw-wc --table "0 $sz writecache s /dev/ram1 /dev/ram0 4096 0"
run writecache /dev/mapper/pw-wc
dmsetup remove --retry pw-wc
# dm-linear: what any device-mapper target pays for one remap per bio.
dmsetup create pw-lin --table "0 $(blockdev --getsz /dev/ram0) linear /dev/ram0 0"
run linear /dev/mapper/pw-lin
dmsetup remove --retry pw-lin
for m in $mods; do
	label=${m%%=*}
	ko=${m#*=}
	opts=
	nopt=1
	if [ "${ko#*,}" != "$ko" ]; then	# ko,key=val,...: table options
		for kv in $(tr ',' ' ' <<<"${ko#*,}"); do
			opts+=" ${kv%%=*} ${kv#*=}"
			nopt=$((nopt + 2))
		done
		ko=${ko%%,*}
	fi
	rmmod dm_nxd 2>/dev/null || true
	insmod "$ko"
	dd if=/dev/zero of=/dev/ram0 bs=1M count=4 status=none
	dd if=/dev/zero of=/dev/ram1 bs=1M count=4 status=none
	dd if=/dev/zero of=/dev/ram1 bs=1M seek=$((sz / 2048 - 4)) count=4 status=none
	dmsetup create pw-nxd --table "0 $vol nxd /dev/ram1 /dev/ram0 $nopt format$opts"
	dmsetup message pw-nxd 0 pause_destage
	run "$label" /dev/mapper/pw-nxd
	dmsetup status pw-nxd >"$out/$label.status.txt"
	dmsetup remove --retry pw-nxd
done
cat "$out/summary.txt"
