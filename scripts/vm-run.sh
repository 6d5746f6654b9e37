#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# vm-run.sh KVER CMD...
# vm-run.sh --kvm-probe KVER     prints 1 if KVM is usable, else 0
#
# Boot /boot/vmlinuz-KVER in a QEMU guest with virtme-ng (the host root fs,
# read-only, with tmpfs overlays on /etc /usr /var /tmp ...), run CMD (a shell
# command line; several arguments are joined with spaces) as root in the
# repository root, and exit with CMD's exit status.
#
# The guest can write to build/ (shared read-write); everything else of the
# repository is read-only there.  The full serial console goes to
# build/logs/KVER-console.log, the guest's dmesg at the end to
# build/logs/KVER-dmesg.txt; CMD's stdout comes out on our stdout.
# CMD sees NXD_IN_VM=1, NXD_KVER and NXD_LOGS in its environment.
#
# Environment:
#   VM_TIMEOUT   seconds before the guest is killed (default 2400; exit 124)
#   VM_MEMORY    guest memory (default 3G)
#   VM_CPUS      guest CPUs (default 2)
#   NXD_KVM      1/0 forces KVM on/off; unset = probe (result cached in
#                NXD_KVM by callers that export it)
#   VNG          vng binary (default .venv/bin/vng)
#   VNG_ARGS     extra vng arguments
#   VM_APPEND    extra kernel command line (default log_buf_len=16M, so that
#                the tests' dmesg markers do not scroll away, and a blacklist
#                of modules for emulated hardware that no test uses)
#   NXD_LOGS     log directory under build/ (default build/logs)
#   VM_CONSOLE   console log (default build/logs/KVER-console.log); the
#                guest's dmesg is saved next to it as ...-dmesg.txt
#   VM_KERNEL    kernel to boot instead of /boot/vmlinuz-KVER: an image, or a
#                kernel build tree (vng then uses the tree's modules; see
#                scripts/debug-kernel.sh).  KVER still names the logs.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
probe_only=0
if [ "${1:-}" = --kvm-probe ]; then
	probe_only=1
	shift
elif [ $# -lt 2 ]; then
	echo "usage: $0 KVER CMD...   |   $0 --kvm-probe KVER (prints 1 or 0)" >&2
	exit 2
fi
kver=$1
shift
cmd="$*"
kernel=${VM_KERNEL:-/boot/vmlinuz-$kver}
kimage=$kernel
[ -d "$kernel" ] && kimage=$kernel/arch/x86/boot/bzImage
VM_TIMEOUT=${VM_TIMEOUT:-2400}
VM_MEMORY=${VM_MEMORY:-3G}
VM_CPUS=${VM_CPUS:-2}
VNG=${VNG:-$here/.venv/bin/vng}
build=$here/build
# NXD_LOGS: where logs go (must be under build/, the guest's writable dir);
# set it to a private dir when several people test in one work tree.
logs=${NXD_LOGS:-$build/logs}
case $logs in /*) ;; *) logs=$here/$logs ;; esac
vmdir=$build/vm

say() { echo "vm-run[$kver]: $*" >&2; }

[ -r "$kimage" ] || { say "no kernel $kimage"; exit 2; }
[ -x "$VNG" ] || { say "no vng at $VNG: run 'make deps'"; exit 2; }
# vng runs virtme-run from PATH.
PATH=$(dirname "$VNG"):$PATH
mkdir -p "$logs" "$vmdir"

# KVM only when /dev/kvm opens AND a real KVM guest gets as far as the
# kernel's "no root fs" panic.  A nested or broken KVM can pass the first
# test and then abort (MSR assertion) or spin forever.
kvm_probe() {
	local out
	(exec 3<>/dev/kvm) 2>/dev/null || return 1
	out=$(timeout -k 5 30 qemu-system-x86_64 -accel kvm -cpu host -m 256 \
		-nodefaults -display none -no-reboot -serial stdio \
		-kernel "$kimage" -append "console=ttyS0 panic=-1" </dev/null 2>&1)
	grep -q "Kernel panic" <<<"$out"
}
if [ -z "${NXD_KVM:-}" ]; then
	if kvm_probe; then NXD_KVM=1; else NXD_KVM=0; fi
fi
if [ $probe_only = 1 ]; then
	echo "$NXD_KVM"
	exit 0
fi
kvm_args=()
if [ "$NXD_KVM" = 1 ]; then accel=kvm; else accel=tcg; kvm_args=(--disable-kvm); fi

# Per-run files (several guests may run at once, also for the same kernel).
console=${VM_CONSOLE:-$logs/$kver-console.log}
dmesg_out=${VM_DMESG:-${console%-console.log}-dmesg.txt}
[ "$dmesg_out" = "$console" ] && dmesg_out=$console.dmesg
run=$(mktemp -d "$vmdir/$kver.XXXXXX")
vpid='' wpid=''
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
	[ -n "$vpid" ] && kill -TERM -- "-$vpid" 2>/dev/null
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The command runs from a script file: no quoting through vng's --exec.
# After it: stop md arrays (a running array hangs power-off), save dmesg.
cat >"$run/cmd.sh" <<EOS
#!/bin/bash
export PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
export PYTHONDONTWRITEBYTECODE=1 NXD_KVER='$kver' NXD_IN_VM=1 NXD_LOGS='$logs'
cd '$here' || exit 125
bash -c $(printf '%q' "$cmd")
rc=\$?
mdadm --stop --scan >/dev/null 2>&1
dmesg >'$dmesg_out' 2>/dev/null
sync
exit \$rc
EOS

# udev's coldplug loads these for QEMU's emulated hardware; no test uses
# them.  Loading kvm showed 8 s into a boot alone (20 s beside two other
# guests), but coldplug ended only 2 s sooner without them (2026-11-29):
# something else there waits too.
unused_modules=modprobe.blacklist=kvm,kvm_amd,kvm_intel,powernow_k8,pcspkr,iTCO_wdt,iTCO_vendor_support,i2c_i801,lpc_ich,sr_mod,cdrom,ahci
args=(--run "$kernel" "${kvm_args[@]}" --cpus "$VM_CPUS" --memory "$VM_MEMORY"
      --force-9p --verbose --name "nxd-vm" --rwdir "$build"
      --append "${VM_APPEND:-log_buf_len=16M $unused_modules}"
      --exec "bash $run/cmd.sh")
# shellcheck disable=SC2206
[ -n "${VNG_ARGS:-}" ] && args+=($VNG_ARGS)
{
	echo "# vm-run $(date -Is) kver=$kver accel=$accel timeout=${VM_TIMEOUT}s"
	echo "# cmd: $cmd"
	echo "# vng ${args[*]}"
} >"$console"
say "booting ($accel, $VM_CPUS cpus, $VM_MEMORY, timeout ${VM_TIMEOUT}s); console: ${console#"$here"/}"
start=$(date +%s)

# qemu's outputs must be pipes: vng hands qemu /proc/self/fd/1 and
# /proc/self/fd/2 as chardev *files*; on a regular file each chardev opens
# its own offset (and truncates), clobbering the others.  vng runs in its
# own session so that a timeout, or our own death, takes qemu down with it.
mkfifo "$run/out" "$run/err"
cat "$run/err" >>"$console" &
epid=$!
cat "$run/out" &
opid=$!
setsid "$VNG" "${args[@]}" </dev/null >"$run/out" 2>"$run/err" &
vpid=$!
(
	trap 'kill "$sp" 2>/dev/null; exit 0' TERM
	sleep "$VM_TIMEOUT" &
	sp=$!
	wait "$sp"
	touch "$run/timed-out"
	echo "vm-run[$kver]: timeout, killing the guest" >&2
	kill -TERM -- "-$vpid" 2>/dev/null
	sleep 20
	kill -KILL -- "-$vpid" 2>/dev/null
) &
wpid=$!
wait "$vpid"
rc=$?
timed_out=0
[ -e "$run/timed-out" ] && timed_out=1
kill "$wpid" 2>/dev/null
wpid=
# qemu may outlive vng for a moment: reap the whole group.
kill -KILL -- "-$vpid" 2>/dev/null
vpid=
wait "$epid" "$opid"
secs=$(($(date +%s) - start))
[ $timed_out = 1 ] && rc=124
echo "# exit $rc after ${secs}s" >>"$console"
if [ $timed_out = 1 ]; then
	say "TIMEOUT after ${secs}s (VM_TIMEOUT=$VM_TIMEOUT)"
elif [ "$rc" != 0 ]; then
	say "guest command failed (exit $rc) after ${secs}s; console tail:"
	tail -n 30 "$console" | sed 's/^/  | /' >&2
else
	say "ok after ${secs}s"
fi
exit "$rc"
