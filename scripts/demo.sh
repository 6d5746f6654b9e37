#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make demo`: dm-nxd in one guest, in a few minutes.
#
# On the host: builds dm-nxd.ko, nxdctl and the dm-hddsim HDD emulator for
# the newest kernel that has headers, then boots ONE QEMU guest of that
# kernel (scripts/vm-run.sh) that:
#   1. builds an emulated SSD (null_blk, memory-backed) and an emulated HDD
#      RAID6 (6 dm-hddsim drives over null_blk, md raid6, chunk 64K:
#      bench/mkraid.sh),
#   2. formats XFS on the array alone and runs a mixed fio workload on it:
#      4 small 8 KiB random writers beside one 1 MiB sequential writer,
#   3. creates the hybrid volume with dmsetup (nxd <array> <ssd>), formats
#      XFS on it and runs the same workload,
#   4. prints the comparison table (MB/s and IOPS of both groups, the
#      bytes both wrote), the destage policy that shared the array with
#      the stream, and `nxdctl histogram` of the workload on dm-nxd,
# then checks both on the host (scripts/demo_check.py): exit 1 if a system
# or group has no result, fio reported an error, or the histogram misses
# writes fio completed.
#
# Environment:
#   DEMO_KVER      guest kernel (default: the oldest test kernel, scripts/lib.sh)
#   DEMO_RUNTIME   seconds of each fio run (default 20)
#   DEMO_SSD_MB    SSD log size in MiB (default 128)
#   DEMO_SHARE     the volume's stream_share, 0 to 90 (default 0): who
#                  pays when the log fills (dm-nxd(4))
#   HDD_SIZE_MB    size of each emulated drive (default 96), HDDSIM_OPTS:
#                  see bench/mkraid.sh
#   VM_TIMEOUT     guest time limit in seconds (default 1800: a loaded host)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"

RUNTIME=${DEMO_RUNTIME:-20}
SSD_MB=${DEMO_SSD_MB:-128}
SHARE=${DEMO_SHARE:-0}
export HDD_SIZE_MB=${HDD_SIZE_MB:-96}
MNT=/tmp/nxd-demo
VOL=nxddemo

# ----------------------------------------------------------------- guest ---
if [ "${1:-}" = --guest ]; then
	say() { echo "demo: $*"; }
	out=build/demo
	mkdir -p "$out"
	t0=$(date +%s)
	# shellcheck disable=SC2317  # run by the EXIT trap
	cleanup() {
		umount "$MNT" 2>/dev/null || true
		dmsetup remove --retry "$VOL" >/dev/null 2>&1 || true
		bench/mkraid.sh down >/dev/null 2>&1 || true
		if [ -n "${ssdcfg:-}" ] && [ -d "$ssdcfg" ]; then
			echo 0 >"$ssdcfg/power" 2>/dev/null || true
			rmdir "$ssdcfg" 2>/dev/null || true
		fi
	}
	trap cleanup EXIT

	modprobe dm-mod
	modprobe libcrc32c 2>/dev/null || true
	grep -qw dm_nxd /proc/modules || insmod "build/$(uname -r)/dm-nxd.ko"
	modprobe raid456
	# No udev re-probe of the devices each time fio closes them.
	mkdir -p /run/udev/rules.d
	echo 'ACTION=="add|change", SUBSYSTEM=="block", OPTIONS+="nowatch"' \
		>/run/udev/rules.d/90-nxd-demo-nowatch.rules
	udevadm control --reload 2>/dev/null || true

	# 1. Devices.  The SSD: a memory-backed null_blk (configfs).
	modprobe configfs 2>/dev/null || true
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config
	grep -qw null_blk /proc/modules || modprobe null_blk nr_devices=0
	ssdcfg=/sys/kernel/config/nullb/nxddemossd
	mkdir "$ssdcfg"
	for kv in size=$SSD_MB memory_backed=1 blocksize=512 discard=1 irqmode=0; do
		echo "${kv#*=}" >"$ssdcfg/${kv%%=*}"
	done
	echo 1 >"$ssdcfg/power"
	# The disk is named after the configfs folder on newer kernels, by its
	# index on older ones.
	ssd=
	for _ in $(seq 100); do
		for c in "/dev/$(basename "$ssdcfg")" "/dev/nullb$(cat "$ssdcfg/index")"; do
			[ -b "$c" ] && { ssd=$c; break 2; }
		done
		sleep 0.1
	done
	[ -n "$ssd" ] || { say "null_blk SSD did not appear"; exit 1; }
	say "SSD: $ssd, null_blk memory-backed, $SSD_MB MiB"
	md=$(bench/mkraid.sh up 6 2>"$out/mkraid.log" | tail -n1) || {
		cat "$out/mkraid.log" >&2; say "RAID6 setup failed"; exit 1; }
	mdn=$(basename "$md")
	say "HDD: $md, md RAID6 of 6 dm-hddsim drives (${HDD_SIZE_MB} MiB each, chunk 64K): $(($(blockdev --getsz "$md") / 2048)) MiB," \
		"io_min $(cat "/sys/block/$mdn/queue/minimum_io_size") io_opt $(cat "/sys/block/$mdn/queue/optimal_io_size")"
	mkdir -p "$MNT"

	# fio: group 0 = 4 x 8 KiB random writers, group 1 = 1 MiB streamer.
	cat >"$out/mixed.fio" <<-EOF
	[global]
	directory=$MNT
	ioengine=libaio
	direct=1
	time_based=1
	runtime=$RUNTIME
	group_reporting=1
	randrepeat=1
	randseed=20240601

	[small]
	rw=randwrite
	bs=8k
	iodepth=8
	numjobs=4
	size=24m

	[stream]
	new_group
	rw=write
	bs=1M
	iodepth=4
	numjobs=1
	size=128m
	write_bw_log=\${NXD_DEMO_BWLOG}
	log_avg_msec=1000
	EOF

	# run_fio LABEL DEV: fio in the background, one progress line every 5 s.
	# Each second it also notes the log's occupancy (LABEL-log.txt: ms since
	# fio started, % used), and fio logs the streamer's MB/s per second
	# (LABEL-stream_bw.N.log, N its job index): the table's "while the log had room" row.
	run_fio() {
		local label=$1 dev=$2 t=0 line pct ms
		local dn
		dn=$(basename "$(readlink -f "$dev")")
		local w0 start
		w0=$(awk '{print $7}' "/sys/block/$mdn/stat")
		: >"$out/$label-log.txt"
		start=$(date +%s%N)
		NXD_DEMO_BWLOG=$out/$label-stream fio --output-format=json --output="$out/$label.json" "$out/mixed.fio" &
		local pid=$!
		while kill -0 "$pid" 2>/dev/null; do
			sleep 1
			t=$((t + 1))
			kill -0 "$pid" 2>/dev/null || break
			ms=$((($(date +%s%N) - start) / 1000000))
			pct=
			if [ -d "/sys/block/$dn/nxd" ]; then
				pct=$(dmsetup status "$VOL" | awk '{printf "%d", $6 * 100 / $5}')
				echo "$ms $pct" >>"$out/$label-log.txt"
			fi
			[ $((t % 5)) = 0 ] || continue
			line=$(awk -v w0="$w0" '{printf "array written %d MiB", ($7 - w0) / 2048}' "/sys/block/$mdn/stat")
			if [ -n "$pct" ]; then
				line+=$(dmsetup status "$VOL" | awk '{printf ", log %d%% used, %d writes logged, %d MiB destaged",
					$6 * 100 / $5, $9, $19 / 1048576}')
			fi
			printf 'demo:   [%-4s %3d/%d s] %s\n' "$label" "$t" "$RUNTIME" "$line"
		done
		wait "$pid"
	}

	# 2. The array alone.
	say "XFS on $md alone; fio ${RUNTIME}s: 4 x 8 KiB random writers + 1 x 1 MiB sequential writer"
	# mkfs.xfs ignores the device's stripe geometry below 1 GiB: give it the
	# exported hints explicitly (the same on the array and on dm-nxd).
	io_min=$(cat "/sys/block/$mdn/queue/minimum_io_size")
	io_opt=$(cat "/sys/block/$mdn/queue/optimal_io_size")
	xfs_opts=(-q -f -d "agcount=2,su=$io_min,sw=$((io_opt / io_min))" -l size=64m)
	mkfs.xfs "${xfs_opts[@]}" "$md"
	mount "$md" "$MNT"
	run_fio md "$md"
	umount "$MNT"

	# 3. The hybrid volume: nxd <hdd> <ssd>, as long as the array less 1 MiB.
	len=$(( $(blockdev --getsz "$md") / 2048 * 2048 - 2048 ))
	table="0 $len nxd $md $ssd 3 format stream_share $SHARE"
	say "dmsetup create $VOL --table '$table'"
	dmsetup create "$VOL" --table "$table"
	udevadm settle 2>/dev/null || true
	dn=$(basename "$(readlink -f "/dev/mapper/$VOL")")
	say "/dev/mapper/$VOL ($dn): io_min $(cat "/sys/block/$dn/queue/minimum_io_size")" \
		"io_opt $(cat "/sys/block/$dn/queue/optimal_io_size"), write_threshold $(cat "/sys/block/$dn/nxd/write_threshold")"
	say "XFS on /dev/mapper/$VOL; same fio workload"
	mkfs.xfs "${xfs_opts[@]}" "/dev/mapper/$VOL"
	say "xfs_info: $(xfs_info "/dev/mapper/$VOL" | grep -o 'sunit=[0-9]* *swidth=[0-9]* blks' | head -1)"
	mount "/dev/mapper/$VOL" "$MNT"
	tools/nxdctl histogram "$VOL" --reset >/dev/null   # count the workload only
	run_fio nxd "/dev/mapper/$VOL"
	tools/nxdctl histogram "$VOL" >"$out/histogram.txt"
	tools/nxdctl stats "$VOL" >"$out/stats.txt"
	umount "$MNT"

	# 4. Results, and the policy that shared the array between the
	# stream and the destager (docs/design.md, section 8, pacing).
	sysd=/sys/block/$dn/nxd
	policy="while foreground I/O uses the array, the destager gets"
	policy+=" $(cat /sys/module/dm_nxd/parameters/destage_min_duty) % of its time"
	policy+=" at low_watermark ($(cat "$sysd/low_watermark") % of the log),"
	share=$(cat "$sysd/stream_share")
	policy+=" rising to $((100 - share)) % at high_watermark ($(cat "$sysd/high_watermark") %)"
	policy+=" and on a full log (stream_share $share: the stream keeps $share %,"
	policy+=" set it with nxdctl config $VOL stream_share=N)"
	python3 - "$out/md.json" "$out/nxd.json" "$policy" "$out" "$(cat "$sysd/high_watermark")" <<-'PY'
	import glob, json, sys
	def groups(path):
	    text = open(path).read()
	    jobs = json.loads(text[text.find("{"):])["jobs"]
	    g = {}
	    for j in jobs:
	        w = j["write"]
	        g[j["groupid"]] = (w["bw"] * 1024 / 1e6, w["iops"],
	                           w.get("clat_ns", {}).get("mean", 0) / 1e6, j.get("error", 0),
	                           w.get("io_bytes", 0) / 1e6)
	    return g
	md, nxd = groups(sys.argv[1]), groups(sys.argv[2])
	print()
	print("%-22s | %-33s | %-33s | %9s" % ("", "4 x 8 KiB random writers", "1 MiB sequential writer", "both"))
	print("%-22s | %9s %10s %11s | %9s %10s %11s | %9s" % ("system", "MB/s", "IOPS", "lat ms", "MB/s", "IOPS",
	                                                       "lat ms", "total MB"))
	print("-" * 106)
	for name, g in (("md RAID6 alone", md), ("dm-nxd (SSD log)", nxd)):
	    print("%-22s | %9.1f %10.0f %11.2f | %9.1f %10.0f %11.2f | %9.0f" % (
	        name, *g[0][:3], *g[1][:3], g[0][4] + g[1][4]))
	def ratio(a, b):
	    return "x%.1f" % (a / b) if b else "-"
	print("%-22s | %9s %10s %11s | %9s %10s %11s | %9s" % (
	    "dm-nxd / md", ratio(nxd[0][0], md[0][0]), ratio(nxd[0][1], md[0][1]), "",
	    ratio(nxd[1][0], md[1][0]), ratio(nxd[1][1], md[1][1]), "",
	    ratio(nxd[0][4] + nxd[1][4], md[0][4] + md[1][4])))
	# The streamer while the log had room: its MB/s in the seconds before
	# the log first reached high_watermark, on dm-nxd and, over the same
	# seconds, on the array alone.
	def bw(label, upto_ms):
	    vals = []
	    # fio numbers the file by the job's index: the streamer comes last
	    files = glob.glob("%s/%s-stream_bw.*.log" % (sys.argv[4], label))
	    if len(files) != 1:
	        return None
	    try:
	        for line in open(files[0]):
	            f = line.split(",")
	            if int(f[0]) <= upto_ms:
	                vals.append(int(f[1]) * 1024 / 1e6)
	    except (OSError, ValueError, IndexError):
	        return None
	    return sum(vals) / len(vals) if vals else None
	room_ms = None
	try:
	    samples = [tuple(map(int, l.split())) for l in open(sys.argv[4] + "/nxd-log.txt")]
	    full = [ms for ms, pct in samples if pct >= int(sys.argv[5])]
	    room_ms = full[0] if full else (samples[-1][0] if samples else None)
	except (OSError, ValueError):
	    pass
	print()
	if room_ms is None or room_ms < 2000:
	    print("1 MiB sequential writer while the log had room: not measured (room for under 2 s)")
	else:
	    m, n = bw("md", room_ms), bw("nxd", room_ms)
	    if m and n:
	        print("1 MiB sequential writer while the log had room (its first %.0f s, below high_watermark):"
	              " dm-nxd %.1f MB/s, md alone %.1f MB/s over the same seconds: x%.2f"
	              % (room_ms / 1000, n, m, n / m))
	    else:
	        print("1 MiB sequential writer while the log had room: no bandwidth log")
	print("destage policy: " + sys.argv[3])
	errs = sum(v[3] for g in (md, nxd) for v in g.values())
	if errs:
	    print("fio reported %d errors" % errs)
	    sys.exit(1)
	PY
	echo
	say "nxdctl histogram $VOL (the fio run on dm-nxd):"
	cat "$out/histogram.txt"
	echo
	say "dmsetup status $VOL: $(dmsetup status "$VOL" | cut -d' ' -f4-9) ..." \
		"(state log_blocks log_used index_entries index_bytes writes_logged)"
	dmsetup remove --retry "$VOL"
	say "guest part done in $(($(date +%s) - t0)) s (results in $out/)"
	exit 0
fi

# ------------------------------------------------------------------ host ---
t0=$(date +%s)
say() { echo "demo: $*" >&2; }
. scripts/lib.sh
nxd_demo_host demo fio || exit 1
mkdir -p build/logs
export VM_TIMEOUT=${VM_TIMEOUT:-1800}
export VM_CONSOLE=${VM_CONSOLE:-$here/build/logs/demo-console.log}
envs="DEMO_RUNTIME=$RUNTIME DEMO_SSD_MB=$SSD_MB DEMO_SHARE=$SHARE"
for v in HDD_SIZE_MB HDDSIM_OPTS; do
	[ -n "${!v:-}" ] && envs+=" $v='${!v}'"
done
rc=0
rm -rf build/demo
nxd_vm "$kver" "env $envs scripts/demo.sh --guest" || rc=$?
# The table (both systems, both groups) and the histogram, checked against
# fio's own counts (scripts/demo_check.py).
if [ $rc = 0 ]; then
	python3 scripts/demo_check.py build/demo >&2 || rc=1
fi
say "finished in $(($(date +%s) - t0)) s (exit $rc); guest console: ${VM_CONSOLE#"$here"/}"
exit $rc
