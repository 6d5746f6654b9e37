# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# The HDD layouts (docs/on-disk-format.md): format 2 (the label in HDD
# block 0, data from data_offset) and format 1 (data from sector 0, the
# label at the end).  Sourced by tests/run.sh after tests/lifecycle.sh
# (its t, has, err_has, py, ok, ko, $OUT, $NXDCTL; lc_status; and, from
# tests/assemble.sh, loop, pair, images, cleanup_loops).

# ---- grow, detach, attach, replace-ssd over format 2 (test hooks) ----
L2=$OUT/l2
mkdir -p "$L2"
truncate -s 1026M "$L2/hdd.img" "$L2/fresh.img" "$L2/grown.img"
truncate -s 64M "$L2/ssd.img" "$L2/new.img" "$L2/ssd-g.img"
# Data from sector 6144 (a 3 MiB stripe): 2101248 - 6144 data sectors.
tests/mkmeta -o 6144 "$L2/ssd.img" "$L2/hdd.img" 33
NXDCTL_TEST_STATUS=$(lc_status ok 0 0)
export NXDCTL_TEST_STATUS
export NXDCTL_TEST_TABLE="0 1048576 nxd $L2/hdd.img $L2/ssd.img"
t "format 2: detach --dry-run" 0 "$NXDCTL" detach v0 --dry-run
has "format 2: detach: linear from the data offset" "^dmsetup load v0 --table '0 1048576 linear $L2/hdd.img 6144'$"
NXDCTL_TEST_TABLE="0 1048576 nxd $L2/hdd.img $L2/gone.img" \
	t "format 2: detach, SSD gone" 0 "$NXDCTL" detach v0 --dry-run
has "format 2: detach: the offset from the HDD label" "linear $L2/hdd.img 6144'$"
NXDCTL_TEST_TABLE="0 1048576 nxd $L2/fresh.img $L2/gone.img" \
	t "detach: no metadata to say where the data start" 2 "$NXDCTL" \
	detach v0 --dry-run
err_has "detach: no metadata: says so" "cannot tell where the volume's data area starts"
t "format 2: grow --dry-run" 0 "$NXDCTL" grow v0 --dry-run
has "format 2: grow to the data area" "^v0: 1048576 -> 2095104 sectors "
t "format 2: replace-ssd --dry-run" 0 "$NXDCTL" replace-ssd v0 \
	"$L2/new.img" --dry-run
has "format 2: replace-ssd: linear from the offset" "^dmsetup load v0 --table '0 1048576 linear $L2/hdd.img 6144'$"
has "format 2: replace-ssd: then the new SSD" "^dmsetup load v0 --table '0 1048576 nxd $L2/hdd.img $L2/new.img 1 format'$"

export NXDCTL_TEST_TABLE="0 1048576 linear $L2/hdd.img 6144"
t "format 2: attach --dry-run" 0 "$NXDCTL" attach v0 "$L2/new.img" --dry-run
has "format 2: attach: nxd at the same length" "^dmsetup load v0 --table '0 1048576 nxd $L2/hdd.img $L2/new.img 1 format'$"
err_has "format 2: attach: says where the label goes" "new label in block 0 of $L2/hdd.img (format 2,"
NXDCTL_TEST_TABLE="0 1048576 linear $L2/hdd.img 0" \
	t "format 2: attach: linear from 0" 1 "$NXDCTL" attach v0 \
	"$L2/new.img" --dry-run
err_has "format 2: attach: the offset mismatch named" "from sector 0, but the HDD's label (volume "
err_has "format 2: attach: the label's offset named" "format 2) puts the data area at sector 6144: attaching would shift the data"
[ -s "$OUT/last.out" ] && ko "format 2: attach: refused before any step" ||
	ok "format 2: attach: refused before any step"
NXDCTL_TEST_TABLE="0 2095105 linear $L2/hdd.img 6144" \
	t "format 2: attach: longer than the data area" 1 "$NXDCTL" attach v0 \
	"$L2/new.img" --dry-run
err_has "format 2: attach: the data area's size" "at most 2095104 (format 2, data from sector 6144)"
NXDCTL_TEST_TABLE="0 2095104 linear $L2/hdd.img 6144" \
	t "format 2: attach: as long as the data area" 0 "$NXDCTL" attach v0 \
	"$L2/new.img" --dry-run
# A never-labelled HDD: the kernel makes the format 2 layout.
NXDCTL_TEST_TABLE="0 1048576 linear $L2/fresh.img 0" \
	t "attach: linear from 0 over an unlabelled HDD" 1 "$NXDCTL" attach v0 \
	"$L2/new.img" --dry-run
err_has "attach: unlabelled: cannot be attached in place" "carries no nxd label, so a"
err_has "attach: unlabelled: says what to do" "cannot be attached in place (back up its data, nxdctl create,"
NXDCTL_TEST_TABLE="0 1048576 linear $L2/fresh.img 2048" \
	t "attach: linear from the new offset over an unlabelled HDD" 0 \
	"$NXDCTL" attach v0 "$L2/new.img" --dry-run
# Format 1 whose HDD grew without grow: its label is not at the end, so a
# new log would not find it (the kernel would make format 2).
truncate -s 1026M "$L2/grown.img"
tests/mkmeta "$L2/ssd-g.img" "$L2/grown.img" 34
truncate -s 1100M "$L2/grown.img"
export NXDCTL_TEST_TABLE="0 2099200 nxd $L2/grown.img $L2/ssd-g.img"
t "format 1, HDD grown: detach" 0 "$NXDCTL" detach v0 --dry-run
has "format 1: detach: linear from 0" "linear $L2/grown.img 0'$"
t "format 1, HDD grown: replace-ssd refused" 1 "$NXDCTL" replace-ssd v0 \
	"$L2/new.img" --dry-run
err_has "format 1, HDD grown: replace-ssd says grow first" "grow the volume first (nxdctl grow v0)"
grep -q linear "$OUT/last.out" && ko "format 1, HDD grown: nothing done" ||
	ok "format 1, HDD grown: nothing done"
NXDCTL_TEST_TABLE="0 2099200 linear $L2/grown.img 0" \
	t "format 1, HDD grown: attach refused" 1 "$NXDCTL" attach v0 \
	"$L2/new.img" --dry-run
unset NXDCTL_TEST_TABLE NXDCTL_TEST_STATUS

# ---- create: the format 2 length, on files (no optimal I/O size) ----
t "create: a new volume is format 2" 0 "$NXDCTL" create v0 "$L2/fresh.img" \
	"$L2/new.img" --dry-run
has "create: format 2 length (data from sector 2048)" "^dmsetup create v0 --table '0 2099200 nxd $L2/fresh.img $L2/new.img'$"

# ---- on loop devices: probes, show-super, wipe, create's offset ----
if [ "$(id -u)" = 0 ] && [ -x tests/mkmeta ] && command -v losetup \
	>/dev/null; then
	trap cleanup_loops EXIT
	pair -o 6144 v 200 2
	pair -o 6144 w 216
	pair x 232
	UV=c8c9cacb-cccd-cecf-d0d1-d2d3d4d5d6d7
	UW=d8d9dadb-dcdd-dedf-e0e1-e2e3e4e5e6e7
	# --- what probes see ---
	t "nxd-probe: format 2 HDD" 0 ./nxd-probe "$HV"
	has "nxd-probe: format 2 HDD role" "^NXD_ROLE=hdd$"
	has "nxd-probe: format 2 HDD volume" "^NXD_VOL_UUID=$UV$"
	has "nxd-probe: format 2 HDD version" "^NXD_FORMAT_VERSION=2$"
	has "nxd-probe: format 2 HDD data offset" "^NXD_DATA_OFFSET=6144$"
	t "nxd-probe: format 2 SSD" 0 ./nxd-probe "$SV"
	has "nxd-probe: format 2 SSD version" "^NXD_FORMAT_VERSION=2$"
	t "nxd-probe: format 1 HDD" 0 ./nxd-probe "$HX"
	has "nxd-probe: format 1 HDD role" "^NXD_ROLE=hdd$"
	has "nxd-probe: format 1 HDD version" "^NXD_FORMAT_VERSION=1$"
	has "nxd-probe: format 1 HDD data offset" "^NXD_DATA_OFFSET=0$"
	t "udev-info: format 2 HDD" 0 "$NXDCTL" udev-info "$HV"
	has "udev-info: format 2 HDD role" "^NXD_ROLE=hdd$"
	has "udev-info: format 2 HDD volume" "^NXD_VOL_UUID=$UV$"
	# --- show-super ---
	t "show-super: format 2 HDD" 0 "$NXDCTL" show-super "$HV"
	has "show-super: format 2 label in block 0" "nxd HDD label, format 2, at sector 0$"
	has "show-super: format 2 HDD layout" "^  layout        format 2: label in HDD block 0, data from sector 6144 (3 MiB)$"
	t "show-super: format 2 SSD" 0 "$NXDCTL" show-super "$SV"
	has "show-super: format 2 SSD" "nxd SSD superblock, format 2$"
	has "show-super: format 2 SSD layout" "^  layout        format 2: label in HDD block 0, data from sector 6144 (3 MiB)$"
	has "show-super: format 2 SSD finds its HDD" "^  HDD  *$HV$"
	has "show-super: format 2 log" "^  log  *2 live segments"
	t "show-super: format 1 HDD" 0 "$NXDCTL" show-super "$HX"
	has "show-super: format 1 HDD layout" "^  layout        format 1: data from sector 0, label at sector 612352$"
	t "show-super: format 1 SSD" 0 "$NXDCTL" show-super "$SX"
	has "show-super: format 1 SSD" "nxd SSD superblock, format 1$"
	has "show-super: format 1 SSD layout" "^  layout        format 1: data from sector 0, label at sector 612352$"
	"$NXDCTL" show-super "$HV" --json >"$OUT/v2h.json" 2>&1
	py "show-super --json: format 2 HDD" '
assert d["role"] == "hdd" and d["format_version"] == 2
assert d["data_offset"] == 6144
assert d["label"]["sector"] == 0 and d["label"]["data_offset"] == 6144' \
		"$OUT/v2h.json"
	"$NXDCTL" show-super "$SV" --json >"$OUT/v2s.json" 2>&1
	py "show-super --json: format 2 SSD" '
assert d["role"] == "ssd" and d["format_version"] == 2
assert d["data_offset"] == 6144
sb = d["superblock"]
assert sb["data_offset"] == 6144 and sb["hdd_label_sector"] == 0
assert sb["data_sectors"] == 614400 - 6144
assert all(c["superblock"]["data_offset"] == 6144 for c in d["copies"])' \
		"$OUT/v2s.json"
	"$NXDCTL" show-super "$HX" --json >"$OUT/v1h.json" 2>&1
	py "show-super --json: format 1 HDD" '
assert d["format_version"] == 1 and d["data_offset"] == 0
assert d["label"]["sector"] == 612352 and d["label"]["data_offset"] == 0' \
		"$OUT/v1h.json"
	"$NXDCTL" show-super "$SX" --json >"$OUT/v1s.json" 2>&1
	py "show-super --json: format 1 SSD" '
assert d["format_version"] == 1 and d["superblock"]["data_offset"] == 0
assert d["superblock"]["hdd_label_sector"] == 612352' "$OUT/v1s.json"
	# --- assemble: the length from the superblock ---
	t "assemble: format 2" 0 "$NXDCTL" assemble "$SV" --dry-run
	has "assemble: format 2 length" "^dmsetup create nxd-c8c9cacb --uuid NXD-$UV --table '0 608256 nxd $HV $SV'$"
	t "assemble: format 2, from the HDD" 0 "$NXDCTL" assemble "$HV" --dry-run
	has "assemble: format 2, from the HDD: its SSD found" "nxd $HV $SV'$"
	t "create: the format 2 pair again" 0 "$NXDCTL" create v0 "$HV" "$SV" \
		--dry-run
	has "create: the pair again: its own layout" "^dmsetup create v0 --uuid NXD-$UV --table '0 608256 nxd $HV $SV'$"
	grep -q "clear" "$OUT/last.out" && ko "create: the pair again: no label cleared" ||
		ok "create: the pair again: no label cleared"
	# A labelled HDD and a blank SSD: that is no new volume without --format.
	truncate -s 0 "$OUT/blank-ssd.img"
	truncate -s 64M "$OUT/blank-ssd.img"
	loop "$OUT/blank-ssd.img" && SBL=$DEV
	t "create: labelled HDD, blank SSD" 1 "$NXDCTL" create v0 "$HW" "$SBL" \
		--dry-run
	err_has "create: labelled HDD: says so" "carries the label of volume $UW, and $SBL no log of it"
	# A stale SSD superblock copy after a format 2 label: still an HDD.
	dd if="$SW" of="$HW" bs=4096 skip=1 seek=1 count=1 conv=notrunc \
		2>/dev/null
	t "nxd-probe: format 2 HDD, stale superblock in block 1" 0 ./nxd-probe "$HW"
	has "nxd-probe: the block 0 label wins" "^NXD_ROLE=hdd$"
	# --- the point of format 2: the raw array shows no file system ---
	if command -v mkfs.ext4 >/dev/null && command -v blkid >/dev/null &&
		loop_off=$(losetup -f --show -o $((6144 * 512)) "$OUT/hdd-w.img"); then
		mkfs.ext4 -q -F -L v2data "$loop_off" >/dev/null 2>&1
		losetup -d "$loop_off"
		blockdev --flushbufs "$HW" 2>/dev/null
		blkid -p "$HW" >"$OUT/last.out" 2>&1
		[ $? = 2 ] && ok "format 2: blkid -p finds nothing on the raw HDD" ||
			{ ko "format 2: blkid -p finds nothing on the raw HDD"; cat "$OUT/last.out"; }
		./nxd-probe "$HW" | grep -q "^NXD_ROLE=hdd$" &&
			ok "format 2: nxd-probe still finds the member" ||
			ko "format 2: nxd-probe still finds the member"
	else
		echo "SKIP format 2 blkid test (no mkfs.ext4, blkid or loop offset)"
	fi
	# --- wipe: both spots, and nothing else ---
	printf 'DATA' | dd of="$HW" bs=1 seek=$((6144 * 512)) conv=notrunc \
		2>/dev/null
	t "wipe: format 2 HDD and SSD" 0 "$NXDCTL" wipe "$HW" "$SW"
	has "wipe: format 2: names the layout" "wiping the nxd HDD label of volume .* (format 2, data from sector 6144)"
	has "wipe: format 2: clears block 0" "^$HW: clearing the nxd HDD label at sector 0 (4096 bytes at offset 0)$"
	has "wipe: format 2: and the stale superblock before the data" "^$HW: clearing a stale nxd SSD superblock (32768 bytes at offset 0, before the data area)$"
	cmp -s -n 32768 "$HW" /dev/zero && [ -z "$(./nxd-probe "$HW")" ] &&
		ok "wipe: format 2 label gone" || ko "wipe: format 2 label gone"
	[ "$(dd if="$HW" bs=1 skip=$((6144 * 512)) count=4 2>/dev/null)" = DATA ] &&
		ok "wipe: format 2 data area untouched" ||
		ko "wipe: format 2 data area untouched"
	t "wipe: format 2, nothing left" 0 "$NXDCTL" wipe "$HW"
	has "wipe: format 2, nothing left says so" "no nxd signature"
	# Format 1: data in block 0 stay; a stale format 2 label in block 0
	# of another HDD (X gets V's) is what probes see first, and wipe
	# clears both spots.
	printf 'DATA' | dd of="$HX" bs=1 seek=0 conv=notrunc 2>/dev/null
	t "wipe --dry-run: format 1 HDD" 0 "$NXDCTL" wipe "$HX" --dry-run --force
	has "wipe --dry-run: format 1: the end spot" "^$HX: would clear the nxd HDD label at sector 612352 "
	grep -q "sector 0 " "$OUT/last.out" && ko "wipe: format 1: block 0 is data" ||
		ok "wipe: format 1: block 0 is data"
	t "wipe: format 1 HDD" 0 "$NXDCTL" wipe "$HX" --force
	[ "$(dd if="$HX" bs=1 count=4 2>/dev/null)" = DATA ] &&
		ok "wipe: format 1 data in block 0 untouched" ||
		ko "wipe: format 1 data in block 0 untouched"
	[ -z "$(./nxd-probe "$HX")" ] && ok "wipe: format 1 label gone" ||
		ko "wipe: format 1 label gone"
	pair y 240
	dd if="$HV" of="$HY" bs=4096 count=1 conv=notrunc 2>/dev/null
	t "nxd-probe: both spots labelled" 0 ./nxd-probe "$HY"
	has "nxd-probe: block 0 first" "^NXD_VOL_UUID=$UV$"
	t "wipe: both spots labelled" 0 "$NXDCTL" wipe "$HY" --force
	has "wipe: both: block 0" "^$HY: clearing the nxd HDD label at sector 0 "
	has "wipe: both: the end spot" "^$HY: clearing the nxd HDD label at sector 612352 "
	[ -z "$(./nxd-probe "$HY")" ] && ok "wipe: both spots clean" ||
		ko "wipe: both spots clean"
	# --- create: the data offset follows the HDD's optimal I/O size ---
	images z
	loop "$OUT/hdd-z.img" && HZ=$DEV
	loop "$OUT/ssd-z.img" && SZ=$DEV
	mm=$(stat -L -c '%t:%T' "$HZ")
	mm=$(printf '%d:%d' "0x${mm%:*}" "0x${mm#*:}")
	FS=$OUT/fsys
	rm -rf "$FS"
	mkdir -p "$FS/dev/block/$mm/queue"
	echo 3145728 >"$FS/dev/block/$mm/queue/optimal_io_size"
	NXDCTL_SYSFS=$FS t "create: a 3 MiB stripe" 0 "$NXDCTL" create v0 "$HZ" \
		"$SZ" --dry-run
	has "create: data from sector 6144" "^dmsetup create v0 --table '0 608256 nxd $HZ $SZ'$"
	# A partition: its disk's queue.
	rm -rf "$FS"
	mkdir -p "$FS/dev/block" "$FS/devices/disk/queue" "$FS/devices/disk/part"
	echo 1572864 >"$FS/devices/disk/queue/optimal_io_size"
	: >"$FS/devices/disk/part/partition"
	ln -s ../../devices/disk/part "$FS/dev/block/$mm"
	NXDCTL_SYSFS=$FS t "create: a partition of a 1.5 MiB stripe" 0 \
		"$NXDCTL" create v0 "$HZ" "$SZ" --dry-run
	has "create: the disk's stripe (data from sector 3072)" "^dmsetup create v0 --table '0 611328 nxd $HZ $SZ'$"
	# No optimal I/O size: 1 MiB.
	t "create: no optimal I/O size" 0 "$NXDCTL" create v0 "$HZ" "$SZ" --dry-run
	has "create: data from sector 2048" "^dmsetup create v0 --table '0 612352 nxd $HZ $SZ'$"
	cleanup_loops
	trap - EXIT
else
	echo "SKIP format 2 loop device tests (need root, losetup, kernel/nxd_codec.c)"
fi
