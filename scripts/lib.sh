# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
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
#   nxd_cut_boot1 / nxd_cut_boot2   the verdicts of a whole-guest power
#                        cut's two boots (powercut.sh, pfs-powercut.sh)
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

# nxd_demo_host WHO TOOL...: a demo's host part.  Sets kver (DEMO_KVER or
# the default), checks virtme-ng and each TOOL, builds dm-nxd, nxdctl and
# dm-hddsim for kver.
nxd_demo_host() {
	local who=$1 c

	shift
	kver=${DEMO_KVER:-$(nxd_default_kver)} || return 1
	[ -x "$nxd_here/.venv/bin/vng" ] ||
		{ echo "$who: no .venv/bin/vng (virtme-ng): run 'make deps' first" >&2; return 1; }
	for c in "$@"; do
		command -v "$c" >/dev/null || { echo "$who: $c missing: run 'make deps'" >&2; return 1; }
	done
	echo "$who: building dm-nxd, nxdctl and dm-hddsim for $kver" >&2
	nxd_build "$kver" tools
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

# Whole-guest power cuts (powercut.sh, pfs-powercut.sh): boot 1 runs a
# guest command that creates $dir/armed once its workload runs,
# $dir/boot1-failed if a live check failed, $dir/no-crash if sysrq-b did
# not reset the guest; its output is in $dir/boot1.out.
#
# nxd_cut_prepare TAG KVER SEED: prints a fresh build/TAG/KVER-SEED and
# makes the log dir ($NXD_LOGS, default build/logs); returns 2 without
# the module.
nxd_cut_prepare() {
	local tag=$1 kv=$2 seed=$3 dir=build/$1/$2-$3

	if [ ! -f "build/$kv/dm-nxd.ko" ]; then
		echo "${tag}[$kv seed $seed]: build/$kv/dm-nxd.ko missing: make modules-all" >&2
		return 2
	fi
	mkdir -p "${NXD_LOGS:-build/logs}" && rm -rf "$dir" && mkdir -p "$dir" && echo "$dir"
}

# nxd_cut_boot1 TAG KVER SEED DIR CONSOLE RC [MARK]: 0 if boot 1 ended in
# the reset (vng's 255, "sysrq: Resetting" on CONSOLE) with no failure and
# no kernel problem before it (after the line MARK, when boot 1 was the end
# of a longer guest run); else prints TAG's FAIL line and returns 1, or
# 2 for a setup problem (never armed, no reset).
nxd_cut_boot1() {
	local tag=$1 kv=$2 seed=$3 dir=$4 console=$5 rc=$6 mark=${7:-} bad

	if [ ! -e "$dir/armed" ]; then
		tail -n 30 "$dir/boot1.out" >&2
		echo "$tag $kv seed $seed: FAIL: setup (boot 1 exit $rc, never armed; see $console)"
		return 2
	fi
	# The workload checks every read while it runs: a mismatch or an I/O
	# error before the cut is a failure, not a setup problem.
	if [ -e "$dir/boot1-failed" ]; then
		echo "$tag $kv seed $seed: FAIL: boot 1 (before the cut): $(head -c 300 "$dir/boot1-failed")"
		return 1
	fi
	if [ -e "$dir/no-crash" ]; then
		echo "$tag $kv seed $seed: FAIL: setup (sysrq-b did not reset the guest)"
		return 2
	fi
	# A guest reset by sysrq-b ends vng with 255 (the command never
	# returns); any other status means it ended by itself or failed
	# otherwise (124: vm-run.sh's timeout).
	if ! grep -aq "sysrq: Resetting" "$console" || [ "$rc" != 255 ]; then
		echo "$tag $kv seed $seed: FAIL: boot 1 did not end in the reset (exit $rc; see $dir/boot1.out, $console)"
		return 1
	fi
	bad=$(if [ -n "$mark" ]; then sed -n "/$mark/,\$p" "$console"; else cat "$console"; fi |
		sed -n '1,/sysrq: Resetting/p' |
		grep -aE 'BUG:|WARNING:|Oops|blocked for more than|Call Trace' | head -n 5)
	if [ -n "$bad" ]; then
		echo "$bad" >&2
		echo "$tag $kv seed $seed: FAIL: kernel problems in boot 1 (see $console)"
		return 1
	fi
	return 0
}

# nxd_never_started CONSOLE: the guest of CONSOLE never started its command.
nxd_never_started() {
	! grep -aq "virtme-ng-init: starting script" "$1"
}

# nxd_cut_boot2 TAG KVER SEED DIR CONSOLE KEEP GUESTCMD: boot 2 runs
# GUESTCMD, whose last "TAG ...: PASS|FAIL" line is the verdict, printed
# here; returns 0 on PASS (the images removed unless KEEP is 1), else 1.
nxd_cut_boot2() {
	local tag=$1 kv=$2 seed=$3 dir=$4 console=$5 keep=$6 cmd=$7 out rc line

	out=$(VM_CONSOLE=$console nxd_vm "$kv" "$cmd" 2>&1)
	rc=$?
	line=$(grep -E "^$tag .*: (PASS|FAIL)" <<<"$out" | tail -n 1)
	if [ -z "$line" ] && nxd_never_started "$console"; then
		# The guest died before its command ran (a TCG "Oops: int3" while
		# the kernel patches jump labels at boot): nothing touched the
		# images, so boot once more.
		echo "${tag}[$kv seed $seed]: boot 2 died before its command ran (exit $rc); booting again" >&2
		cp "$console" "$console.failed-boot"
		out=$(VM_CONSOLE=$console nxd_vm "$kv" "$cmd" 2>&1)
		rc=$?
		line=$(grep -E "^$tag .*: (PASS|FAIL)" <<<"$out" | tail -n 1)
	fi
	echo "$out" >"$dir/boot2.out"
	if [ -z "$line" ]; then
		echo "$out" | tail -n 30 >&2
		echo "$tag $kv seed $seed: FAIL: no verdict from boot 2 (exit $rc)"
		return 1
	fi
	if [ "$rc" != 0 ] || ! grep -q ": PASS" <<<"$line"; then
		grep -v "^$tag " <<<"$out" | tail -n 40 >&2
		echo "$line"
		echo "${tag}[$kv seed $seed]: kept $dir (images, boot outputs) and $console" >&2
		return 1
	fi
	echo "$line"
	[ "$keep" = 1 ] || rm -f "$dir"/*.img
	return 0
}
