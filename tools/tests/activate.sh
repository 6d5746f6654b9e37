# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# nxdctl activate (69-nxd-activate.rules, nxd-activate@.service) on loop
# devices: sourced by tests/run.sh after tests/assemble.sh, whose loop and
# pair helpers it uses.
if [ "$(id -u)" = 0 ] && [ -x tests/mkmeta ] && command -v losetup \
	>/dev/null && command -v dmsetup >/dev/null; then
	trap cleanup_loops EXIT
	unset NXD_CONFIG
	pair k 16
	UK=10111213-1415-1617-1819-1a1b1c1d1e1f
	t "activate --udev: SSD, HDD present" 0 "$NXDCTL" activate --udev "$SK"
	has "activate --udev: NXD_PEER=1 from the SSD" "^NXD_PEER=1$"
	t "activate --udev: HDD, SSD present" 0 "$NXDCTL" activate --udev "$HK"
	has "activate --udev: NXD_PEER=1 from the HDD" "^NXD_PEER=1$"
	t "activate: both present" 0 "$NXDCTL" activate "$UK" --dry-run
	has "activate: assembles from the pair" \
		"^dmsetup create nxd-10111213 --uuid NXD-$UK --table '0 612352 nxd $HK $SK'$"
	# The HDD held by a dm device over its first MiB: the SSD is alone.
	dmsetup create nxdt-hold --table "0 2048 linear $HK 0" 2>/dev/null &&
		held=1 || held=
	if [ -n "$held" ]; then
		t "activate --udev: SSD alone" 0 "$NXDCTL" activate --udev "$SK"
		has "activate --udev: NXD_PEER=0" "^NXD_PEER=0$"
		t "activate: the HDD missing" 2 "$NXDCTL" activate "$UK" --dry-run
		err_has "activate: names the half missing" \
			"^nxdctl: volume $UK: its SSD $SK is present but its HDD is missing: not assembled"
		grep -q "dmsetup create" "$OUT/last.out" &&
			ko "activate: nothing assembled" || ok "activate: nothing assembled"
		dmsetup remove nxdt-hold
	else
		echo "SKIP activate with a missing half (dmsetup create failed)"
	fi
	t "activate --udev: not nxd" 0 "$NXDCTL" activate --udev "$OUT/hdd.img"
	[ -s "$OUT/last.out" ] && ko "activate --udev: nothing for others" ||
		ok "activate --udev: nothing for others"
	t "activate: no member present" 2 "$NXDCTL" activate \
		01234567-89ab-cdef-0123-456789abcdef --dry-run
	err_has "activate: says neither half is there" \
		"neither its SSD nor its HDD is present: not assembled"
	t "activate: not a UUID" 1 "$NXDCTL" activate not-a-uuid
	cleanup_loops
	trap - EXIT
else
	echo "SKIP activate tests (need root, losetup, dmsetup, kernel/nxd_codec.c)"
fi
