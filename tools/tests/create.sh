# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# nxdctl create --dry-run, the config file (nxdtab) and what create
# would overwrite, on image files without a kernel module: sourced by
# tests/run.sh (its t, has, err_has, py, ok, ko, $OUT, $NXDCTL).

# ---- create --dry-run ----
truncate -s 10G "$OUT/hdd.img"
truncate -s 1G "$OUT/ssd.img"
truncate -s 1M "$OUT/tiny.img"
t "create --dry-run" 0 "$NXDCTL" create v0 "$OUT/hdd.img" "$OUT/ssd.img" \
	--dry-run --write-threshold 64K --mode log_all \
	--low-watermark 20 --high-watermark 70 --destage-rate 100 \
	--ssd-discard 1 --drain-on-suspend 0 --format
has "create table line" "^dmsetup create v0 --table '0 20969472 nxd $OUT/hdd.img $OUT/ssd.img 15 write_threshold 65536 mode log_all low_watermark 20 high_watermark 70 destage_rate 100 ssd_discard 1 drain_on_suspend 0 format'$"
has "create --format: DM UUID from the new volume's" \
	"^dmsetup rename v0 --setuuid NXD-<volume UUID the format makes>$"
t "create --read-threshold (removed)" 1 "$NXDCTL" create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --read-threshold 1M
err_has "create --read-threshold message" \
	"bad option or missing value: '--read-threshold'"
t "create --dry-run, no options" 0 "$NXDCTL" create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --uuid MY-UUID
has "create table line, no options" "^dmsetup create v0 --uuid MY-UUID --table '0 20969472 nxd $OUT/hdd.img $OUT/ssd.img'$"
t "create: HDD too small" 1 "$NXDCTL" create v0 "$OUT/tiny.img" \
	"$OUT/ssd.img" --dry-run
t "create: SSD too small" 1 "$NXDCTL" create v0 "$OUT/hdd.img" \
	"$OUT/tiny.img" --dry-run
t "create: bad mode" 1 "$NXDCTL" create v0 "$OUT/hdd.img" "$OUT/ssd.img" \
	--dry-run --mode fast
t "create: watermark > 100" 1 "$NXDCTL" create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --high-watermark 101
err_has "create: watermark > 100 names the range" \
	"^nxdctl: --high-watermark: expected 0 to 100, got '101'$"
t "create --dry-run: threshold above 1G" 1 "$NXDCTL" create v0 \
	"$OUT/hdd.img" "$OUT/ssd.img" --dry-run --write-threshold 2G
err_has "create: threshold range named" \
	"^nxdctl: --write-threshold: expected 0 to 1G, got '2G'$"
t "create --dry-run: destage rate above its range" 1 "$NXDCTL" create v0 \
	"$OUT/hdd.img" "$OUT/ssd.img" --dry-run --destage-rate 1000001
err_has "create: rate range named" \
	"^nxdctl: --destage-rate: expected 0 to 1000000, got '1000001'$"
t "create --dry-run: bad mode" 1 "$NXDCTL" create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --mode fast2
err_has "create: modes named" \
	"^nxdctl: --mode: expected auto, passthrough, log_all or adaptive, got 'fast2'$"
t "create --dry-run: adaptive min above max" 1 "$NXDCTL" create v0 \
	"$OUT/hdd.img" "$OUT/ssd.img" --dry-run --auto-min-threshold 512K \
	--auto-max-threshold 64K
err_has "create: adaptive bounds' order named" \
	"^nxdctl: auto_min_threshold (524288) must not exceed auto_max_threshold (65536)$"
t "create --dry-run: low above high" 1 "$NXDCTL" create v0 \
	"$OUT/hdd.img" "$OUT/ssd.img" --dry-run --low-watermark 90 \
	--high-watermark 10
err_has "create: watermark order named" \
	"^nxdctl: low_watermark (90) must not exceed high_watermark (10)$"
t "create --dry-run: low above the default high" 1 "$NXDCTL" create v0 \
	"$OUT/hdd.img" "$OUT/ssd.img" --dry-run --low-watermark 80
err_has "create: checked against the default high" \
	"^nxdctl: low_watermark (80) must not exceed high_watermark (75)$"
[ ! -s "$OUT/last.out" ] && ok "create: no table line printed when refused" ||
	ko "create: no table line printed when refused"
t "create: bad name" 1 "$NXDCTL" create a/b "$OUT/hdd.img" "$OUT/ssd.img" \
	--dry-run
t "create: missing HDD" 2 "$NXDCTL" create v0 "$OUT/nope" "$OUT/ssd.img" \
	--dry-run
t "create: file without --dry-run" 2 "$NXDCTL" create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img"
t "create: missing argument" 1 "$NXDCTL" create v0 "$OUT/hdd.img"
t "create: --name is not create's" 1 "$NXDCTL" create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --name x
t "assemble: no --format" 1 "$NXDCTL" assemble --format

# ---- the config file (nxdtab): parsing, without devices ----
U1=01020304-0506-0708-090a-0b0c0d0e0f10
U2=11121314-1516-1718-191a-1b1c1d1e1f20
cat >"$OUT/bad.tab" <<EOF
# nxdtab with every kind of mistake; the good lines are noauto
good0	UUID=$U1 noauto,write-threshold=64K,mode=log_all  # a comment
good1 uuid=$(echo $U2 | tr a-f A-F) noauto,drain_on_stop

bad/name UUID=$U1
nouuid
badu UUID=1234-5678
badopt UUID=21222324-2526-2728-292a-2b2c2d2e2f30 frob=1
badval UUID=21222324-2526-2728-292a-2b2c2d2e2f30 write-threshold=12Q
dupname UUID=21222324-2526-2728-292a-2b2c2d2e2f30 noauto
dupname UUID=31323334-3536-3738-393a-3b3c3d3e3f40 noauto
dupuuid UUID=$U1
twice UUID=41424344-4546-4748-494a-4b4c4d4e4f50 mode=auto,mode=log_all
flagval UUID=51525354-5556-5758-595a-5b5c5d5e5f60 noauto=1
noval UUID=61626364-6566-6768-696a-6b6c6d6e6f70 write-threshold
extra UUID=71727374-7576-7778-797a-7b7c7d7e7f80 noauto more
format UUID=81828384-8586-8788-898a-8b8c8d8e8f90 format
wm UUID=91929394-9596-9798-999a-9b9c9d9e9fa0 high-watermark=101
EOF
NXD_CONFIG="$OUT/bad.tab" t "nxdtab: bad lines, exit 1" 1 "$NXDCTL" assemble \
	--all --dry-run
for l in "5: bad volume name 'bad/name'" "6: no UUID=<volume uuid> after nouuid" \
	"7: bad volume UUID '1234-5678'" "8: unknown option 'frob'" \
	"9: write-threshold: expected 0 to 1G, got '12Q'" \
	"11: volume name dupname already at line 10" \
	"12: volume UUID $U1 already at line 2" "13: mode given twice" \
	"14: noauto takes no value" "15: write-threshold needs a value" \
	"16: unexpected 'more'" "17: unknown option 'format'" \
	"18: high-watermark: expected 0 to 100, got '101'"; do
	err_has "nxdtab: error at line ${l%%:*}" "^nxdctl: $OUT/bad.tab:$l"
done
[ "$(grep -c "^nxdctl: $OUT/bad.tab:" "$OUT/last.err")" = 13 ] &&
	! grep -q "Try 'nxdctl" "$OUT/last.err" &&
	ok "nxdtab: one error a bad line, no usage hint" ||
	ko "nxdtab: one error a bad line, no usage hint"
has "nxdtab: good line kept (noauto)" "^good0: noauto in $OUT/bad.tab: not assembled$"
has "nxdtab: upper-case UUID= and UUID, drain_on_stop" "^good1: noauto in"
has "nxdtab: line 10 kept" "^dupname: noauto in"
NXD_CONFIG="$OUT/bad.tab" t "stop: needs VOL or --all" 1 "$NXDCTL" stop
t "stop: --all takes no VOL" 1 "$NXDCTL" stop --all x
if [ ! -e /dev/nxd-control ]; then
	t "stop --all without dm-nxd" 0 "$NXDCTL" stop --all
	has "stop --all without dm-nxd says so" "^no nxd volume is active (dm-nxd is not loaded)$"
fi
t "assemble --all takes no DEVICE" 1 "$NXDCTL" assemble --all /dev/null
t "assemble --auto needs a DEVICE" 1 "$NXDCTL" assemble --auto
t "assemble --all --name" 1 "$NXDCTL" assemble --all --name x
printf 'v UUID=%s noauto\n' $U1 >"$OUT/one.tab"
t "assemble --all: table options come from the config" 1 "$NXDCTL" \
	assemble --all --config "$OUT/one.tab" --write-threshold 4K
err_has "assemble --all: says so" "table options come from $OUT/one.tab"
t "assemble --all --config FILE" 0 "$NXDCTL" assemble --all --config \
	"$OUT/one.tab" --dry-run
has "assemble --all --config FILE read" "^v: noauto in $OUT/one.tab"
t "assemble --all: unreadable config" 4 "$NXDCTL" assemble --all --config \
	"$OUT"
# An explicit --config FILE must exist; only the default may be missing.
t "assemble --all --config FILE missing" 1 "$NXDCTL" assemble --all \
	--dry-run --config "$OUT/nope.tab"
err_has "assemble --all --config FILE missing: says so" \
	"^nxdctl: --config $OUT/nope.tab: no such file (only the default"
grep -q "nxd SSD\|dmsetup" "$OUT/last.out" &&
	ko "assemble --all --config FILE missing: assembles nothing" ||
	ok "assemble --all --config FILE missing: assembles nothing"
t "assemble DEVICE --config FILE missing" 1 "$NXDCTL" assemble \
	"$OUT/one.tab" --dry-run --config "$OUT/nope.tab"
t "assemble --auto DEVICE --config FILE missing" 1 "$NXDCTL" assemble \
	--auto "$OUT/one.tab" --dry-run --config "$OUT/nope.tab"
t "stop --all --config FILE missing" 1 "$NXDCTL" stop --all \
	--config "$OUT/nope.tab"
t "stop VOL --config FILE missing" 1 "$NXDCTL" stop v0 \
	--config "$OUT/nope.tab"
if [ ! -e /dev/nxd-control ]; then
	NXD_CONFIG="$OUT/nope.tab" t "stop --all: the default config may be missing" \
		0 "$NXDCTL" stop --all
fi

# ---- create: what it would overwrite (libblkid, the HDD's block 0) ----
truncate -s 0 "$OUT/fs.img" "$OUT/tail.img"
truncate -s 300M "$OUT/fs.img" "$OUT/tail.img"
if mkfs.ext4 -q -F -L ost0 "$OUT/fs.img" >/dev/null 2>&1; then
	t "create: HDD with a file system" 1 "$NXDCTL" create v0 "$OUT/fs.img" \
		"$OUT/ssd.img" --dry-run
	err_has "create: names the file system" "HDD $OUT/fs.img holds ext4 UUID .* LABEL 'ost0'"
	err_has "create: says why" "cannot be.*converted in place\|converted in place"
	err_has "create: says how to go ahead" "(--force to go ahead)"
	[ -s "$OUT/last.out" ] && ko "create: refused before the table line" ||
		ok "create: refused before the table line"
	t "create: HDD with a file system, --force" 0 "$NXDCTL" create v0 \
		"$OUT/fs.img" "$OUT/ssd.img" --dry-run --force
	has "create --force prints the table" "^dmsetup create v0 "
	t "create: SSD with a file system" 1 "$NXDCTL" create v0 "$OUT/hdd.img" \
		"$OUT/fs.img" --dry-run
	err_has "create: names the SSD's file system" "SSD $OUT/fs.img holds ext4"
	t "create: SSD with a file system, --format" 1 "$NXDCTL" create v0 \
		"$OUT/hdd.img" "$OUT/fs.img" --dry-run --format
else
	echo "SKIP create signature tests (no mkfs.ext4)"
fi
# A new volume's label goes in block 0 (format 2); the last MiB is no
# longer nxd's.
printf 'data' | dd of="$OUT/tail.img" bs=1 seek=$((300 * 1048576 - 5000)) \
	conv=notrunc 2>/dev/null
t "create: data in the HDD's last MiB is not in the way" 0 "$NXDCTL" \
	create v0 "$OUT/tail.img" "$OUT/ssd.img" --dry-run
printf 'data' | dd of="$OUT/tail.img" bs=1 seek=100 conv=notrunc 2>/dev/null
t "create: data in the HDD's block 0" 1 "$NXDCTL" create v0 "$OUT/tail.img" \
	"$OUT/ssd.img" --dry-run
err_has "create: names the offset" "holds data in its first 4 KiB (at byte 100), where nxd writes its label"
err_has "create: says a volume cannot be converted in place" "converted in place: the new volume's data area starts at"
