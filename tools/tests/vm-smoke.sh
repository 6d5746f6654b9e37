#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# shellcheck disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# nxdctl against the real dm-nxd module, in a guest (as root, from the
# repository root), e.g.:
#   scripts/vm-run.sh 6.1.0-56-amd64 tools/tests/vm-smoke.sh
# Loop devices over tmpfs files stand in for the HDD and the SSD.
# Prints "N passed, M failed".
set -u
NXDCTL=$PWD/tools/nxdctl
KO=${NXD_KO:-$PWD/build/$(uname -r)/dm-nxd.ko}
W=$(mktemp -d)
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $*"; }
ko() { fail=$((fail + 1)); echo "FAIL $*"; }
t() { # NAME EXPECTED_RC CMD...
	name=$1 want=$2
	shift 2
	echo "+ $*" >>"$W/log"
	"$@" >"$W/out" 2>"$W/err"
	rc=$?
	cat "$W/out" "$W/err" >>"$W/log"
	if [ "$rc" = "$want" ]; then ok "$name"; else
		ko "$name (exit $rc, want $want)"
		sed 's/^/    /' "$W/out" "$W/err"
	fi
}
has() {
	if grep -q -e "$2" "$W/out"; then ok "$1"; else
		ko "$1: no '$2' in:"; sed 's/^/    /' "$W/out"; fi
}

for m in dm-mod loop libcrc32c crc32c; do modprobe "$m" 2>/dev/null; done
insmod "$KO" || { echo "cannot load $KO"; exit 1; }
truncate -s 512M "$W/hdd"
truncate -s 64M "$W/ssd"
HDD=$(losetup -f --show "$W/hdd")
SSD=$(losetup -f --show "$W/ssd")

t "list, empty" 0 "$NXDCTL" list
t "create" 0 "$NXDCTL" create t0 "$HDD" "$SSD" --write-threshold 64K
has "create prints the table" "^dmsetup create t0 --uuid NXD-t0 --table '0 1046528 nxd $HDD $SSD 2 write_threshold 65536'$"
dmsetup table t0 >"$W/out"
has "kernel table has the threshold" "write_threshold 65536"
t "list" 0 "$NXDCTL" list
has "list shows t0" "^t0 "
t "list --json" 0 "$NXDCTL" list --json
python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["volumes"][0]["name"] == "t0"' <"$W/out" &&
	ok "list --json parses" || ko "list --json parses"

# 100 x 4K and 50 x 8K writes (log), 4 x 1M (HDD), 20 x 4K reads.
dd if=/dev/urandom of=/dev/mapper/t0 bs=4K count=100 oflag=direct 2>/dev/null
dd if=/dev/urandom of=/dev/mapper/t0 bs=8K count=50 seek=100 oflag=direct 2>/dev/null
dd if=/dev/urandom of=/dev/mapper/t0 bs=1M count=4 seek=10 oflag=direct 2>/dev/null
dd if=/dev/mapper/t0 of=/dev/null bs=4K count=20 iflag=direct 2>/dev/null

t "histogram" 0 "$NXDCTL" histogram t0
has "histogram 4K writes" "^Num Writes 4K                 = 100$"
has "histogram 8K writes" "^Num Writes 4K+1 - 8K         = 50$"
has "histogram 1M writes" "^Num Writes 512K+1 - 1M       = 4$"
# udev's probes of the new device read too: at least our 20.
n=$(sed -n 's/^Num Reads 4K  *= //p' "$W/out")
[ "${n:-0}" -ge 20 ] && ok "histogram 4K reads" ||
	ko "histogram 4K reads: $n < 20"
t "histogram by /dev/mapper" 0 "$NXDCTL" histogram /dev/mapper/t0
t "histogram by dm-N" 0 "$NXDCTL" histogram "$(basename "$(readlink -f /dev/mapper/t0)")"
t "histogram --routes" 0 "$NXDCTL" histogram t0 --routes
cat "$W/out"
t "histogram --json" 0 "$NXDCTL" histogram t0 --json
python3 -c '
import json, sys
d = json.load(sys.stdin)
w = d["buckets"][1]["write"]
assert w["count"] == 100 and w["ssd"]["aligned"]["count"] == 100, w
w = d["buckets"][10 - 1]["write"]
assert w["hdd"]["aligned"]["count"] == 4, w' <"$W/out" &&
	ok "histogram --json: 4K writes logged, 1M direct" ||
	ko "histogram --json: 4K writes logged, 1M direct"
t "stats" 0 "$NXDCTL" stats t0
has "stats writes_logged" "^writes_logged  *150$"
has "stats writes_direct" "^writes_direct  *4$"
t "stats --json" 0 "$NXDCTL" stats t0 --json
t "threshold" 0 "$NXDCTL" threshold t0
has "threshold 64K" "^write_threshold 65536 (64K)$"
t "threshold --write 128K" 0 "$NXDCTL" threshold t0 --write 128K
has "threshold now 128K" "^write_threshold 131072 (128K)$"
t "threshold rejected by the kernel" 1 "$NXDCTL" threshold t0 --write 2G
t "config" 0 "$NXDCTL" config t0
has "config state ok" "^state=ok$"
t "config set" 0 "$NXDCTL" config t0 destage_rate=100
t "config low > high" 1 "$NXDCTL" config t0 low_watermark=90 high_watermark=80
t "pause-destage" 0 "$NXDCTL" pause-destage t0
t "resume-destage" 0 "$NXDCTL" resume-destage t0
t "drain" 0 "$NXDCTL" drain t0
t "stats after drain" 0 "$NXDCTL" stats t0
has "log empty after drain" "^log_used_blocks  *0$"
t "suggest-threshold (probes)" 0 "$NXDCTL" suggest-threshold t0 --probe-seconds 1
cat "$W/out"
has "suggest-threshold answers" "^Suggested write threshold\|^No threshold pays off"
t "udev-info" 0 "$NXDCTL" udev-info "$(basename "$(readlink -f /dev/mapper/t0)")"
has "udev-info uuid" "^NXD_VOL_UUID=........-"
t "udev-info SSD" 0 "$NXDCTL" udev-info "${SSD#/dev/}"
has "udev-info SSD role" "^NXD_ROLE=ssd$"
t "histogram --reset" 0 "$NXDCTL" histogram t0 --reset
t "histogram after reset" 0 "$NXDCTL" histogram t0
has "histogram cleared" "^Num Writes 4K                 = 0$"
t "stats of a missing volume" 2 "$NXDCTL" stats nosuch
dmsetup create lin0 --table "0 2048 linear $HDD 0"
t "stats of a linear volume" 2 "$NXDCTL" stats lin0
dmsetup remove lin0
t "create over an active volume's devices" 1 "$NXDCTL" create t1 "$HDD" "$SSD"
t "remove" 0 "$NXDCTL" remove t0
has "remove prints dmsetup" "^dmsetup remove t0$"
t "assemble from the SSD" 0 "$NXDCTL" assemble "$SSD" --name t2
t "assembled volume is listed" 0 "$NXDCTL" list
has "t2 listed" "^t2 "
dd if=/dev/mapper/t2 of=/dev/null bs=4K count=1 iflag=direct 2>/dev/null &&
	ok "assembled volume reads" || ko "assembled volume reads"
t "assemble again: already active" 0 "$NXDCTL" assemble "$SSD"
has "already active" "already active as t2"
t "remove t2" 0 "$NXDCTL" remove /dev/mapper/t2
t "create --format" 0 "$NXDCTL" create t3 "$HDD" "$SSD" --format --mode log_all
t "remove t3" 0 "$NXDCTL" remove t3
t "list, empty again" 0 "$NXDCTL" list

# udev rules, when the guest runs udev (its /usr and /etc are scratch).
if [ "${NXD_IN_VM:-}" = 1 ] && udevadm control --ping 2>/dev/null; then
	install -m 0755 "$NXDCTL" /usr/sbin/nxdctl
	cp udev/60-nxd.rules /etc/udev/rules.d/60-nxd.rules
	udevadm control --reload
	udevadm trigger -c add /sys/class/misc/nxd-control
	t "create u0 (udev)" 0 "$NXDCTL" create u0 "$HDD" "$SSD"
	udevadm settle
	[ "$(stat -c %a:%G /dev/nxd-control)" = 640:disk ] &&
		ok "udev: nxd-control 0640 disk" ||
		ko "udev: nxd-control is $(stat -c %a:%G /dev/nxd-control)"
	[ "$(readlink -f /dev/nxd/u0)" = "$(readlink -f /dev/mapper/u0)" ] &&
		ok "udev: /dev/nxd/u0" || ko "udev: /dev/nxd/u0"
	u=$("$NXDCTL" list --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["volumes"][0]["uuid"])')
	[ -n "$u" ] && [ "$(readlink -f "/dev/disk/by-nxd-uuid/$u")" = \
		"$(readlink -f /dev/mapper/u0)" ] &&
		ok "udev: /dev/disk/by-nxd-uuid/$u" ||
		{ ko "udev: by-nxd-uuid link"; ls -l /dev/disk/by-nxd-uuid; }
	t "histogram by /dev/nxd/u0" 0 "$NXDCTL" histogram /dev/nxd/u0
	t "remove u0 (udev)" 0 "$NXDCTL" remove u0
	udevadm settle
	[ ! -e /dev/nxd/u0 ] && ok "udev: link gone" || ko "udev: link gone"
else
	echo "SKIP udev rules (no udev)"
fi

losetup -d "$HDD" "$SSD"
rmmod dm_nxd 2>/dev/null
cp "$W/log" "${NXD_SMOKE_LOG:-/dev/null}" 2>/dev/null
rm -rf "$W"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
