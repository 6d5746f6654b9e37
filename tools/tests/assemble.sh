# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# nxdctl assemble and udev-info on loop devices (root, losetup, mkmeta),
# and the boot-time assembly (nxdtab, removal marks): sourced by
# tests/run.sh (its t, has, err_has, py, ok, ko, $OUT, $NXDCTL), after
# tests/create.sh, whose $OUT/hdd.img it attaches.

# ---- assemble / udev-info on loop devices (root, losetup, the core) ----
LOOPS=
cleanup_loops() {
	for l in $LOOPS; do losetup -d "$l" 2>/dev/null; done
	LOOPS=
}
loop() { # FILE: attach it; the device goes to $DEV (no subshell: $LOOPS)
	DEV=$(losetup -f --show "$1" 2>/dev/null) || return 1
	LOOPS="$LOOPS $DEV"
}
images() { # LETTER...: fresh images, a 64M SSD and a 300M HDD each
	for v in "$@"; do
		truncate -s 0 "$OUT/ssd-$v.img" "$OUT/hdd-$v.img"
		truncate -s 64M "$OUT/ssd-$v.img"
		truncate -s 300M "$OUT/hdd-$v.img"
	done
}
# [-o DATA_OFFSET] LETTER MKMETA-ARGS...: fresh images, metadata (with -o
# format 2, data from DATA_OFFSET; else format 1), loop devices S<L>, H<L>
pair() {
	_o=
	if [ "$1" = -o ]; then
		_o=$2
		shift 2
	fi
	_p=$1
	shift
	images "$_p"
	if [ -n "$_o" ]; then
		tests/mkmeta -o "$_o" "$OUT/ssd-$_p.img" "$OUT/hdd-$_p.img" "$@"
	else
		tests/mkmeta "$OUT/ssd-$_p.img" "$OUT/hdd-$_p.img" "$@"
	fi
	_up=$(echo "$_p" | tr '[:lower:]' '[:upper:]')
	loop "$OUT/ssd-$_p.img" && eval "S$_up=\$DEV"
	loop "$OUT/hdd-$_p.img" && eval "H$_up=\$DEV"
}
if [ "$(id -u)" = 0 ] && [ -x tests/mkmeta ] && command -v losetup \
	>/dev/null && loop "$OUT/hdd.img"; then
	l=$DEV
	trap cleanup_loops EXIT
	pair a 16
	pair b 48
	UA=10111213-1415-1617-1819-1a1b1c1d1e1f
	t "udev-info: SSD" 0 "$NXDCTL" udev-info "${SA#/dev/}"
	has "udev-info: SSD role" "^NXD_ROLE=ssd$"
	has "udev-info: SSD volume uuid" "^NXD_VOL_UUID=$UA$"
	has "udev-info: SSD hdd uuid" "^NXD_HDD_UUID=90919293-"
	t "udev-info: HDD" 0 "$NXDCTL" udev-info "$HA"
	has "udev-info: HDD role" "^NXD_ROLE=hdd$"
	t "udev-info: other device" 0 "$NXDCTL" udev-info "${l#/dev/}"
	[ -s "$OUT/last.out" ] && ko "udev-info: nothing for others" ||
		ok "udev-info: nothing for others"
	t "assemble from the SSD" 0 "$NXDCTL" assemble "$SA" --dry-run
	has "assemble pairs A" "^dmsetup create nxd-10111213 --uuid NXD-$UA --table '0 612352 nxd $HA $SA'$"
	t "assemble from the HDD, named" 0 "$NXDCTL" assemble "${HB#/dev/}" \
		--dry-run --name bee --write-threshold 32K
	has "assemble pairs B" "^dmsetup create bee --uuid NXD-30313233-.* --table '0 612352 nxd $HB $SB 2 write_threshold 32768'$"
	t "assemble everything" 0 "$NXDCTL" assemble --dry-run
	has "assemble everything: A" "nxd $HA $SA'$"
	has "assemble everything: B" "nxd $HB $SB'$"
	# ---- boot-time assembly: the config file, the removal marks ----
	UB=30313233-3435-3637-3839-3a3b3c3d3e3f
	cat >"$OUT/nxdtab" <<EOF
# two volumes, B not at boot
alpha UUID=$UA write_threshold=64K,mode=log_all,drain-on-stop
beta  UUID=$UB noauto
EOF
	export NXD_CONFIG="$OUT/nxdtab"
	t "assemble --all" 0 "$NXDCTL" assemble --all --dry-run
	has "assemble --all: A with its NAME, UUID and options" "^dmsetup create alpha --uuid NXD-$UA --table '0 612352 nxd $HA $SA 4 write_threshold 65536 mode log_all'$"
	has "assemble --all: B noauto" "^beta: noauto in $OUT/nxdtab: not assembled$"
	grep -q "nxd $HB" "$OUT/last.out" && ko "assemble --all: B left alone" ||
		ok "assemble --all: B left alone"
	t "assemble --auto: A from its HDD" 0 "$NXDCTL" assemble --auto \
		"$HA" --dry-run
	has "assemble --auto: A named" "^dmsetup create alpha --uuid NXD-$UA .* 4 write_threshold 65536 mode log_all'$"
	t "assemble --auto: B noauto" 0 "$NXDCTL" assemble --auto "$SB" --dry-run
	has "assemble --auto: B says noauto" "^beta: noauto"
	mkdir -p "$NXD_REMOVED_DIR"
	echo alpha >"$NXD_REMOVED_DIR/$UA"
	t "assemble --all: A removed on purpose" 0 "$NXDCTL" assemble --all \
		--dry-run
	has "assemble --all: says A was removed" "^volume $UA was removed with nxdctl remove"
	grep -q "^dmsetup" "$OUT/last.out" && ko "assemble --all: nothing made" ||
		ok "assemble --all: nothing made"
	t "assemble --auto: A removed on purpose" 0 "$NXDCTL" assemble --auto \
		"$SA" --dry-run
	has "assemble --auto: says A was removed" "^volume $UA was removed"
	t "assemble DEVICE: A by hand" 0 "$NXDCTL" assemble "$SA" --dry-run
	has "assemble DEVICE: A by hand, as its config line says" "^dmsetup create alpha --uuid NXD-$UA .* 4 write_threshold 65536 mode log_all'$"
	t "assemble DEVICE --name: A by hand" 0 "$NXDCTL" assemble "$SA" \
		--dry-run --name a1
	has "assemble DEVICE --name: not the config's" "^dmsetup create a1 --uuid NXD-$UA .*nxd $HA $SA'$"
	t "assemble DEVICE --config" 0 "$NXDCTL" assemble "$SB" --dry-run \
		--config "$OUT/one.tab"
	has "assemble DEVICE --config: B not in it" "^dmsetup create nxd-30313233 "
	NXD_CONFIG="$OUT/nope" t "assemble --all, no config" 0 "$NXDCTL" \
		assemble --all --dry-run
	has "assemble --all, no config: B" "^dmsetup create nxd-30313233 .*nxd $HB $SB'$"
	has "assemble --all, no config: not A" "^volume $UA was removed"
	rm -f "$NXD_REMOVED_DIR/$UA"
	printf 'alpha UUID=%s\n' "$(echo $UA | tr 0 9)" >"$OUT/gone.tab"
	t "assemble --all: a volume not present" 2 "$NXDCTL" assemble --all \
		--config "$OUT/gone.tab" --dry-run
	err_has "assemble --all: names it" "alpha: neither the SSD nor the HDD of volume 19111213-.* is present ($OUT/gone.tab:1)"
	export NXD_CONFIG="$OUT/no-nxdtab"
	# Copy A of the superblock damaged: copy B still serves.
	printf 'X' | dd of="$OUT/ssd-a.img" bs=1 seek=100 conv=notrunc \
		2>/dev/null
	t "assemble with one bad superblock copy" 0 "$NXDCTL" assemble "$SA" \
		--dry-run
	# A second HDD with the same label: ambiguous.
	cp "$OUT/hdd-a.img" "$OUT/hdd-a2.img"
	loop "$OUT/hdd-a2.img" && HA2=$DEV
	t "assemble: two matching HDDs" 2 "$NXDCTL" assemble "$SA" --dry-run
	err_has "assemble: ambiguity named" "both .* match"
	losetup -d "$HA" "$HA2"
	t "assemble: HDD missing" 2 "$NXDCTL" assemble "$SA" --dry-run
	err_has "assemble: HDD missing message" "its HDD is not present"
	t "assemble: not nxd" 2 "$NXDCTL" assemble "$l" --dry-run

	# ---- nxd-probe (the udev helper) ----
	t "nxd-probe: SSD" 0 ./nxd-probe "$SA"
	has "nxd-probe: SSD role" "^NXD_ROLE=ssd$"
	has "nxd-probe: SSD fs type" "^NXD_FS_TYPE=nxd_log$"
	has "nxd-probe: SSD usage" "^NXD_FS_USAGE=other$"
	has "nxd-probe: SSD volume uuid" "^NXD_VOL_UUID=$UA$"
	has "nxd-probe: SSD clean" "^NXD_SB_CLEAN=1$"
	t "nxd-probe: HDD" 0 ./nxd-probe "$HB"
	has "nxd-probe: HDD fs type" "^NXD_FS_TYPE=nxd_hdd$"
	has "nxd-probe: HDD usage" "^NXD_FS_USAGE=raid$"
	has "nxd-probe: HDD uuids" "^NXD_HDD_UUID=b0b1b2b3-"
	t "nxd-probe: other device" 0 ./nxd-probe "$l"
	[ -s "$OUT/last.out" ] && ko "nxd-probe: nothing for others" ||
		ok "nxd-probe: nothing for others"
	t "nxd-probe: usage" 1 ./nxd-probe
	t "nxd-probe --links" 0 ./nxd-probe --links uuid=U1 label=L1 \
		disk/by-id/md-uuid-1 disk/by-uuid/U1 disk/by-label/L1 \
		disk/by-label/L2 md/ost0
	has "nxd-probe --links drops the fs links" \
		"^NXD_LINKS=disk/by-id/md-uuid-1 disk/by-label/L2 md/ost0$"
	t "nxd-probe --links, no fs" 0 ./nxd-probe --links uuid= label= a
	has "nxd-probe --links keeps the rest" "^NXD_LINKS=a$"

	# ---- wipe: C's log holds 3 segments of writes, D's is empty ----
	pair c 64 3
	pair d 80
	# ---- show-super, before C is wiped ----
	t "show-super: SSD" 0 "$NXDCTL" show-super "$SC"
	has "show-super: copy in use" "^  copy B  *block 1: valid, sb_seq 2 (in use)$"
	has "show-super: uuid" "^  volume UUID  *40414243-4445-4647-4849-4a4b4c4d4e4f$"
	has "show-super: head" "^  head  *position 6, segment 4$"
	has "show-super: the log" "^  log  *3 live segments from segment 1, 3 data blocks not yet on the HDD$"
	has "show-super: the HDD found" "^  HDD  *$HC$"
	t "show-super: HDD" 0 "$NXDCTL" show-super "${HC#/dev/}"
	has "show-super: label position" "nxd HDD label, format 1, at sector 612352$"
	t "show-super --json" 0 "$NXDCTL" show-super "$SC" --json
	cp "$OUT/last.out" "$OUT/super.json"
	py "show-super --json" '
assert d["role"] == "ssd" and d["in_use"] == 1
assert [c["decode"] for c in d["copies"]] == ["valid", "valid"]
sb = d["superblock"]
assert sb["sb_seq"] == 2 and sb["head_seq"] == 4 and sb["clean"] is True
assert sb["ring_blocks"] == 64 * 256 - 8 and sb["data_sectors"] == 612352
assert d["log"]["live_segments"] == 3 and d["log"]["data_blocks"] == 3' \
		"$OUT/super.json"
	printf 'X' | dd of="$SC" bs=1 seek=100 conv=notrunc 2>/dev/null
	t "show-super: a damaged copy" 0 "$NXDCTL" show-super "$SC"
	has "show-super: names the damage" "^  copy A  *block 0: bad checksum$"
	t "show-super: not nxd" 2 "$NXDCTL" show-super "$l"
	t "wipe: SSD with writes in its log" 1 "$NXDCTL" wipe "$SC"
	err_has "wipe: says the log holds writes" "holds writes not yet on the HDD"
	err_has "wipe: names the first segment" "segment 1 onwards"
	t "wipe: its HDD" 1 "$NXDCTL" wipe "${HC#/dev/}"
	t "wipe --dry-run --force" 0 "$NXDCTL" wipe "$SC" --dry-run --force
	has "wipe --dry-run says what" "would wipe the nxd SSD superblocks .* (32768 bytes at offset 0), with writes still in its log"
	./nxd-probe "$SC" | grep -q "^NXD_ROLE=ssd$" &&
		ok "wipe --dry-run changes nothing" ||
		ko "wipe --dry-run changes nothing"
	t "wipe --force" 0 "$NXDCTL" wipe -f "$SC"
	[ -z "$(./nxd-probe "$SC")" ] && cmp -s -n 32768 "$SC" /dev/zero &&
		ok "wipe --force zeroed both superblocks" ||
		ko "wipe --force zeroed both superblocks"
	cmp -s -i 32768 -n 8192 "$SC" "$OUT/ssd-c.img" &&
		! cmp -s -i 32768 -n 8192 "$SC" /dev/zero &&
		ok "wipe leaves the ring alone" || ko "wipe leaves the ring alone"
	t "wipe: HDD whose SSD is gone" 1 "$NXDCTL" wipe "$HC"
	err_has "wipe: SSD not present" "SSD of volume 40414243-.* is not present"
	t "wipe: HDD, forced" 0 "$NXDCTL" wipe "$HC" --force
	[ -z "$(./nxd-probe "$HC")" ] && ok "wipe: label gone" ||
		ko "wipe: label gone"
	t "wipe: nothing left" 0 "$NXDCTL" wipe "$HC"
	has "wipe: nothing left says so" "no nxd signature"
	t "wipe: empty log, HDD then SSD" 0 "$NXDCTL" wipe "$HD" "$SD"
	[ -z "$(./nxd-probe "$HD")$(./nxd-probe "$SD")" ] &&
		ok "wipe: both halves clean" || ko "wipe: both halves clean"
	t "wipe: missing device" 2 "$NXDCTL" wipe "$OUT/nope"

	# ---- the name and tunables the superblock stores ----
	# G: named ost7, tunables stored; H: a name that is no dm name.
	pair g 128 0 ost7  12288,2,10,60,300,0,1
	pair h 144 0 "has space"
	UG=80818283-8485-8687-8889-8a8b8c8d8e8f
	GOPTS="24 write_threshold 12288 mode log_all low_watermark 10 high_watermark 60 destage_rate 300 ssd_discard 0 drain_on_suspend 1 auto_min_threshold 4096 auto_max_threshold 1048576 stream_min 4194304 stripe_size 0 stream_share 0"
	t "show-super: stored name" 0 "$NXDCTL" show-super "$SG"
	has "show-super: the name" "^  name  *ost7$"
	has "show-super: the tunables" "^  tunables  *write_threshold 12288 mode log_all low_watermark 10 high_watermark 60 destage_rate 300 ssd_discard 0 drain_on_suspend 1 auto_min_threshold 4096 auto_max_threshold 1048576 stream_min 4194304 stripe_size 0 stream_share 0$"
	t "show-super --json: stored name" 0 "$NXDCTL" show-super "$SG" --json
	cp "$OUT/last.out" "$OUT/super-g.json"
	py "show-super --json: name and tunables" '
sb = d["superblock"]
assert sb["name"] == "ost7", sb["name"]
assert sb["tunables"] == {"write_threshold": 12288, "mode": "log_all",
	"low_watermark": 10, "high_watermark": 60, "destage_rate": 300,
	"ssd_discard": 0, "drain_on_suspend": 1, "auto_min_threshold": 4096,
	"auto_max_threshold": 1048576, "stream_min": 4194304,
	"stripe_size": 0, "stream_share": 0}, sb["tunables"]
assert all(c["superblock"]["name"] == "ost7" for c in d["copies"])' \
		"$OUT/super-g.json"
	t "show-super: an older superblock" 0 "$NXDCTL" show-super "$SB"
	has "show-super: no name stored" "^  name  *none stored$"
	has "show-super: no tunables stored" "^  tunables  *none stored$"
	t "show-super --json: an older superblock" 0 "$NXDCTL" show-super \
		"$SB" --json
	cp "$OUT/last.out" "$OUT/super-b.json"
	py "show-super --json: nothing stored" '
sb = d["superblock"]
assert sb["name"] == "" and sb["tunables"] is None, sb' "$OUT/super-b.json"
	t "assemble: the stored name and tunables" 0 "$NXDCTL" assemble "$SG" \
		--dry-run
	has "assemble: ost7 as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	t "assemble --auto, no config: stored" 0 "$NXDCTL" assemble --auto \
		"$HG" --dry-run
	has "assemble --auto, no config: ost7 as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	# (exit 2: A's HDD was detached above)
	t "assemble --all, no config: stored" 2 "$NXDCTL" assemble --all \
		--dry-run
	has "assemble --all, no config: ost7 as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	has "assemble --all, no config: older B as before" "^dmsetup create nxd-30313233 .*nxd $HB $SB'$"
	t "assemble --all, no config, options given" 2 "$NXDCTL" assemble \
		--all --dry-run --write-threshold 32K
	has "assemble --all: given options, not the stored ones" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 write_threshold 32768'$"
	t "assemble: options given" 0 "$NXDCTL" assemble "$SG" --dry-run \
		--mode passthrough
	has "assemble: given options win, stored name" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 mode passthrough'$"
	t "assemble --name: stored tunables" 0 "$NXDCTL" assemble "$SG" \
		--dry-run --name g2
	has "assemble --name: with the stored tunables" "^dmsetup create g2 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	printf 'gee UUID=%s write_threshold=64K\n' "$UG" >"$OUT/g.tab"
	t "assemble --all: a config line wins" 0 "$NXDCTL" assemble --all \
		--dry-run --config "$OUT/g.tab"
	has "assemble --all: the line's name and options" "^dmsetup create gee --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 write_threshold 65536'$"
	t "assemble DEVICE: a config line wins" 0 "$NXDCTL" assemble "$HG" \
		--dry-run --config "$OUT/g.tab"
	has "assemble DEVICE: the line's name and options" "^dmsetup create gee --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 write_threshold 65536'$"
	printf 'gee UUID=%s\n' "$UG" >"$OUT/g0.tab"
	t "assemble --all: a config line without options" 0 "$NXDCTL" \
		assemble --all --dry-run --config "$OUT/g0.tab"
	has "assemble --all: no options given (the kernel keeps the stored ones)" "^dmsetup create gee --uuid NXD-$UG --table '0 612352 nxd $HG $SG'$"
	t "assemble DEVICE: not in the config" 0 "$NXDCTL" assemble "$SG" \
		--dry-run --config "$OUT/gone.tab"
	has "assemble DEVICE: not in the config: as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	t "assemble: a stored name that is no dm name" 0 "$NXDCTL" assemble \
		"$SH" --dry-run
	has "assemble: bad stored name: nxd-UUID, no tunables" "^dmsetup create nxd-90919293 --uuid NXD-90919293-.* --table '0 612352 nxd $HH $SH'$"
	losetup -d "$SG" "$HG" "$SH" "$HH"

	# ---- create --format over a log (loop devices: the pair is found) ----
	pair e 96 2
	# F: format 2 from sector 2048, the layout a new volume gets here
	pair -o 2048 f 112
	t "create: the pair again (replay)" 0 "$NXDCTL" create v0 "$HE" "$SE" \
		--dry-run
	has "create: the pair again: DM UUID from the superblock" \
		"^dmsetup create v0 --uuid NXD-60616263-6465-6667-6869-6a6b6c6d6e6f --table "
	t "create: the pair again, --uuid wins" 0 "$NXDCTL" create v0 "$HE" \
		"$SE" --dry-run --uuid MINE
	has "create: --uuid wins" "^dmsetup create v0 --uuid MINE --table "
	t "create --format over an old log: DM UUID set later" 0 "$NXDCTL" \
		create v0 "$HF" "$SF" --dry-run --format
	has "create --format: no DM UUID of the old volume" \
		"^dmsetup create v0 --table "
	t "create --format over writes in the log" 1 "$NXDCTL" create v0 "$HE" \
		"$SE" --dry-run --format
	err_has "create --format: says the log holds writes" "holds writes not yet on the HDD"
	t "create --format --force over writes" 0 "$NXDCTL" create v0 "$HE" \
		"$SE" --dry-run --format --force
	t "create --format over an empty log" 0 "$NXDCTL" create v0 "$HF" "$SF" \
		--dry-run --format
	has "create --format: the old label cleared first" "^$HF: would clear the nxd HDD label at sector 0 (4096 bytes at offset 0)$"
	# E is format 1: a new volume over it would not hold its data.
	t "create --format over a format 1 volume" 1 "$NXDCTL" create v0 "$HE" \
		"$SE" --dry-run --format
	err_has "create --format: says the data would not be in it" "holds the data of volume 60616263-.* (format 1, data from sector 0); the new volume's data"
	t "create --format --force over a format 1 volume" 0 "$NXDCTL" create \
		v0 "$HE" "$SE" --dry-run --format --force
	has "create --format --force: the format 1 label cleared" "^$HE: would clear the nxd HDD label at sector 612352 "
	has "create --format --force: format 2 length" "^dmsetup create v0 --table '0 612352 nxd $HE $SE 1 format'$"
	cmp -s -n 4096 "$HF" /dev/zero && ko "create --dry-run: the label stays" ||
		ok "create --dry-run: the label stays"
	t "create: new HDD, SSD holding another volume's writes" 1 "$NXDCTL" \
		create v0 "$OUT/hdd.img" "$SE" --dry-run --format
	t "create: another volume's HDD" 1 "$NXDCTL" create v0 "$HE" "$SF" \
		--dry-run --format
	# E's HDD grows: its label is no longer at the end; still the pair.
	truncate -s 400M "$OUT/hdd-e.img"
	losetup -c "$HE"
	t "create: the pair again after the HDD grew" 0 "$NXDCTL" create v0 \
		"$HE" "$SE" --dry-run
	cleanup_loops
	trap - EXIT
else
	echo "SKIP assemble/udev-info tests (need root, losetup, kernel/nxd_codec.c)"
fi
