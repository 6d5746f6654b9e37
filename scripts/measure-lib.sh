# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=bash
# Sourced by scripts/measure-drain.sh and measure-overwrite.sh: several
# builds of dm-nxd measured one after the other in ONE guest.
#
# measure_setup SCRIPT "VAR..." ARGS...
#   On the host (ARGS = KVER MOD.ko...): build dm-hddsim and run SCRIPT in a
#   guest with the modules' absolute paths, passing VAR..., HDD_SIZE_MB and
#   SSD_MB.  In the guest (ARGS = --guest MOD.ko...): load dm-mod and
#   raid456, a brd SSD of SSD_MB (/dev/ram0), an emulated RAID6 of 6 x
#   HDD_SIZE_MB drives (bench/mkraid.sh); sets md, vol (the longest nxd
#   volume on it, in sectors) and MODS.
# Defaults: SSD_MB 64, HDD_SIZE_MB 256.

SSD_MB=${SSD_MB:-64}
HDD_SIZE_MB=${HDD_SIZE_MB:-256}

measure_setup() {
	local script=$1 vars=$2 kv env="" v m
	local -a mods=()

	shift 2
	if [ "${1:-}" != --guest ]; then
		kv=${1:?KVER}
		shift
		. scripts/lib.sh
		nxd_build "$kv"
		for v in $vars HDD_SIZE_MB SSD_MB; do
			env+="$v=${!v} "
		done
		for m in "$@"; do
			mods+=("$(readlink -f "$m")")
		done
		nxd_vm "$kv" "$env$script --guest ${mods[*]}"
		exit
	fi
	shift
	# shellcheck disable=SC2034  # for the sourcing script, as md and vol
	MODS=("$@")
	modprobe dm-mod
	modprobe libcrc32c || true
	modprobe raid456
	modprobe brd rd_nr=1 rd_size=$((SSD_MB * 1024))
	md=$(HDD_SIZE_MB=$HDD_SIZE_MB PREFILL=0 bench/mkraid.sh up 6 | tail -n1)
	# shellcheck disable=SC2034  # for the sourcing script
	vol=$(($(blockdev --getsz "$md") / 2048 * 2048 - 2048))
}
