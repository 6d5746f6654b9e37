# SPDX-License-Identifier: GPL-2.0
# Sourced by the host scripts that build for a test kernel and boot it
# (test, demo, demo-pfs, bench, calibration, measurements, crash campaign):
# one rule for the kernels, one build, one guest launcher (vm-run.sh).
#
#   nxd_kvers            the test kernels: every /boot/vmlinuz-* with
#                        headers, oldest first (the Makefile's TEST_KVERS)
#   nxd_default_kver     NXD_KVER if set, else the oldest test kernel
#                        (Debian stable's own)
#   nxd_build KVER [tools]   make module-KVER: build/KVER/dm-nxd.ko and the
#                        fixtures dm-pcut and dm-hddsim next to it; with
#                        "tools", nxdctl too
#   nxd_vm KVER CMD...   scripts/vm-run.sh (see its header)
# Each prints its own error and returns non-zero on failure.

nxd_here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

nxd_kvers() {
	make -s --no-print-directory -C "$nxd_here" print-vars | sed -n 's/^TEST_KVERS=//p'
}

nxd_default_kver() {
	local kv

	if [ -n "${NXD_KVER:-}" ]; then
		echo "$NXD_KVER"
		return 0
	fi
	read -r kv _ <<<"$(nxd_kvers)"
	if [ -z "$kv" ]; then
		echo "no kernel with headers in /boot: run 'make deps'" >&2
		return 1
	fi
	echo "$kv"
}

nxd_build() {
	local kv=${1:?KVER} what=module-$1

	[ "${2:-}" = tools ] && what="$what tools"
	[ -e "/boot/vmlinuz-$kv" ] || { echo "no /boot/vmlinuz-$kv" >&2; return 1; }
	# shellcheck disable=SC2086
	make -s --no-print-directory -C "$nxd_here" KVER="$kv" $what >/dev/null ||
		{ echo "build for $kv FAILED" >&2; return 1; }
}

nxd_vm() {
	"$nxd_here/scripts/vm-run.sh" "$@"
}

# The host side of a script that measures in a guest: build for KVER ($1,
# empty: the default kernel), then run "$2 --guest" in one guest, after
# the environment assignments $3...
nxd_guest_script() {
	local kv=${1:-$(nxd_default_kver)} script=$2

	shift 2
	nxd_build "$kv" && nxd_vm "$kv" "${*:+$* }$script --guest"
}
