# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# Host ownership (owner.c, cmd_owner.c) on loop devices: the owner in the
# HDD label, assemble's refusal of another host's volume, takeover,
# set-owner, create's record.  Sourced by tests/run.sh after
# tests/assemble.sh (its loop, pair, cleanup_loops).

owner_at() { # IMAGE: the owner field of the label of a 300M HDD image,
	# read from the bytes (docs/on-disk-format.md), not through nxdctl
	python3 -c 'import sys
f = open(sys.argv[1], "rb"); f.seek(612352 * 512 + 96)
print(f.read(64).rstrip(b"\0").decode() or "-")' "$1"
}
if [ "$(id -u)" = 0 ] && [ -x tests/mkmeta ] && command -v losetup \
	>/dev/null; then
	trap cleanup_loops EXIT
	export NXD_SYSTEM_ID_FILE="$OUT/system_id"
	printf '# this host\nnode-a\n' >"$NXD_SYSTEM_ID_FILE"
	pair o 176 0 ost0
	UO=b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf
	t "owner: label written before owners: none" 0 "$NXDCTL" show-super "$HO"
	has "owner: show-super says none" "^  owner         none"
	t "owner: an unowned volume assembles as before" 0 "$NXDCTL" assemble \
		"$SO" --dry-run
	has "owner: unowned assembles" "^dmsetup create ost0 "
	t "owner: set-owner gives an unowned volume away" 0 "$NXDCTL" set-owner \
		"$SO" node-b
	has "owner: set-owner says what it does" "^set-owner: volume $UO: owner '(none)' -> 'node-b' in the HDD label of $HO (sector 612352);"
	[ "$(owner_at "$OUT/hdd-o.img")" = node-b ] && ok "owner: node-b in the label's bytes" ||
		ko "owner: node-b in the label's bytes ($(owner_at "$OUT/hdd-o.img"))"
	t "owner: show-super of the HDD" 0 "$NXDCTL" show-super "$HO"
	has "owner: show-super HDD names node-b" "^  owner         node-b$"
	t "owner: show-super of the SSD" 0 "$NXDCTL" show-super "$SO"
	has "owner: show-super SSD names node-b" "^  owner         node-b (HDD label)$"
	"$NXDCTL" show-super "$HO" --json >"$OUT/own.json" 2>&1
	py "owner: show-super --json" 'assert d["label"]["owner"] == "node-b"' \
		"$OUT/own.json"
	cp "$OUT/hdd-o.img" "$OUT/hdd-o.before"
	t "owner: assemble refuses node-b's volume" 6 "$NXDCTL" assemble "$SO" \
		--dry-run
	err_has "owner: refusal names the owner and this host" \
		"belongs to host 'node-b', this host is 'node-a': not activated"
	err_has "owner: refusal names the way out" "nxdctl takeover $HO"
	grep -q "^dmsetup" "$OUT/last.out" && ko "owner: refused, no table" ||
		ok "owner: refused, no table"
	t "owner: assemble from the HDD refuses too" 6 "$NXDCTL" assemble "$HO" \
		--dry-run
	t "owner: assemble --auto (udev) refuses" 6 "$NXDCTL" assemble --auto \
		"$HO" --dry-run
	t "owner: assemble --all (no config) refuses" 6 "$NXDCTL" assemble \
		--all --dry-run
	err_has "owner: assemble --all says whose" "belongs to host 'node-b'"
	printf 'ost0 UUID=%s\n' "$UO" >"$OUT/own-tab"
	t "owner: assemble --all (config) refuses" 6 "$NXDCTL" assemble --all \
		--config "$OUT/own-tab" --dry-run
	t "owner: create by hand refuses" 6 "$NXDCTL" create ost0 "$HO" "$SO" \
		--dry-run
	t "owner: set-owner refuses another host's volume" 6 "$NXDCTL" \
		set-owner "$SO" --clear
	err_has "owner: set-owner points to takeover" "nxdctl takeover $SO first"
	t "owner: takeover --dry-run" 0 "$NXDCTL" takeover "$SO" --dry-run
	has "owner: takeover --dry-run says what" "^takeover: volume $UO: owner 'node-b' -> 'node-a' .*"
	has "owner: takeover --dry-run writes nothing" "(--dry-run: nothing written)"
	t "owner: assemble --take-over --dry-run" 0 "$NXDCTL" assemble "$SO" \
		--take-over --dry-run
	has "owner: assemble --take-over says so" "^takeover: volume ost0 ($UO): owner 'node-b' -> 'node-a'"
	has "owner: assemble --take-over assembles" "^dmsetup create ost0 "
	t "owner: --take-over needs a DEVICE" 1 "$NXDCTL" assemble --all \
		--take-over --dry-run
	cmp -s "$OUT/hdd-o.img" "$OUT/hdd-o.before" &&
		ok "owner: refusals and dry runs left the HDD unchanged" ||
		ko "owner: refusals and dry runs left the HDD unchanged"
	t "owner: takeover" 0 "$NXDCTL" takeover "$HO"
	[ "$(owner_at "$OUT/hdd-o.img")" = node-a ] && ok "owner: takeover wrote node-a" ||
		ko "owner: takeover wrote node-a ($(owner_at "$OUT/hdd-o.img"))"
	cmp -s -n $((612352 * 512)) "$OUT/hdd-o.img" "$OUT/hdd-o.before" &&
		ok "owner: takeover changed nothing but the label" ||
		ko "owner: takeover changed nothing but the label"
	t "owner: own volume assembles" 0 "$NXDCTL" assemble "$SO" --dry-run
	has "owner: own volume: table" "^dmsetup create ost0 "
	t "owner: takeover again" 0 "$NXDCTL" takeover "$SO"
	has "owner: already ours" "already belongs to this host ('node-a')"
	t "owner: set-owner by config NAME, --clear" 0 env \
		NXD_CONFIG="$OUT/own-tab" "$NXDCTL" set-owner ost0 --clear
	t "owner: set-owner: bad host" 1 "$NXDCTL" set-owner "$SO" "no spaces"
	t "owner: set-owner: HOST and --clear" 1 "$NXDCTL" set-owner "$SO" \
		x --clear
	[ "$(owner_at "$OUT/hdd-o.img")" = - ] && ok "owner: cleared" ||
		ko "owner: cleared ($(owner_at "$OUT/hdd-o.img"))"
	t "owner: set-owner to this host" 0 "$NXDCTL" set-owner "$HO"
	[ "$(owner_at "$OUT/hdd-o.img")" = node-a ] && ok "owner: default is this host" ||
		ko "owner: default is this host"
	# A new volume over another host's HDD: --force; create records us.
	# (P: format 2, the layout a new volume gets, so only the owner is
	# in the way; set-owner rewrites its label in block 0.)
	pair -o 2048 p 180
	"$NXDCTL" set-owner "$SP" node-b >/dev/null
	t "owner: set-owner, format 2" 0 "$NXDCTL" show-super "$HP"
	has "owner: format 2 label at block 0 names node-b" "^  owner         node-b$"
	t "owner: create --format over node-b's HDD" 6 "$NXDCTL" create v0 \
		"$HP" "$SP" --format --dry-run
	err_has "owner: create --format names the owner" "belongs to host 'node-b': --force to replace it"
	t "owner: create --format --force" 0 "$NXDCTL" create v0 "$HP" "$SP" \
		--format --force --dry-run
	has "owner: create --dry-run names the new owner" "^owner: 'node-a' (this host), recorded in the new HDD label$"
	# The system id: a bad one is an error; without the file, the host name.
	echo "two words" >"$NXD_SYSTEM_ID_FILE"
	t "owner: bad system id" 1 "$NXDCTL" takeover "$SO" --dry-run
	err_has "owner: bad system id named" "$NXD_SYSTEM_ID_FILE: bad system id 'two words'"
	rm -f "$NXD_SYSTEM_ID_FILE"
	t "owner: no system id file: the host name" 0 "$NXDCTL" takeover "$SO" \
		--dry-run
	has "owner: host name as owner" "-> '$(hostname)'"
	unset NXD_SYSTEM_ID_FILE
	cleanup_loops
	trap - EXIT
else
	echo "SKIP owner tests (need root, losetup, kernel/nxd_codec.c)"
fi
