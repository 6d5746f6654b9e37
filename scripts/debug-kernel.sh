#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make debug-kernel`: build a debug kernel for the test guest from Debian's
# linux-source-6.1 (lockdep, KASAN, fault injection, ...), under
# build/debug-kernel/ only.  Idempotent: extraction, configuration and the
# build are each skipped or made incremental when already done; the config
# is regenerated only when the config fragment below changed.
#
# The tree is built in place (build/debug-kernel/linux-source-6.1): it is the
# image vm-run.sh boots (VM_KERNEL=<tree>, virtme-ng installs the tree's
# modules for the guest) and the KDIR dm-nxd builds against.
#
# Output, last two lines on stdout:
#   release <kernel release>        e.g. 6.1.158-nxd-debug
#   tree <absolute path of the build tree>   (image: <tree>/arch/x86/boot/bzImage)
#
# Environment:
#   DEBUG_KERNEL_JOBS   make -j (default 2; the machine is shared)
#   DEBUG_KERNEL_SRC    source tarball (default /usr/src/linux-source-6.1.tar.xz)
#   DEBUG_KERNEL_KASAN  outline (default) or inline
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
top=$here/build/debug-kernel
src_tar=${DEBUG_KERNEL_SRC:-/usr/src/linux-source-6.1.tar.xz}
jobs=${DEBUG_KERNEL_JOBS:-2}
kasan_mode=${DEBUG_KERNEL_KASAN:-outline}
tree=$top/linux-source-6.1
vng_cfg=$here/.venv/bin/virtme-configkernel
say() { echo "debug-kernel: $*" >&2; }
mk() { nice -n 19 make -C "$tree" ARCH=x86_64 "$@"; }

for t in flex bison bc gcc make perl; do
	command -v "$t" >/dev/null || { say "$t missing: make deps"; exit 1; }
done
[ -e /usr/include/libelf.h ] || [ -e /usr/include/elfutils/libelf.h ] ||
	{ say "libelf-dev missing (objtool): make deps"; exit 1; }
[ -r "$src_tar" ] || { say "no $src_tar: apt-get install linux-source-6.1"; exit 1; }
mkdir -p "$top"

# 1. Extract once (the stamp holds the tarball's size and mtime).
want_src=$(stat -c '%s %Y' "$src_tar")
if [ "$(cat "$top/.src-stamp" 2>/dev/null)" != "$want_src" ] || [ ! -f "$tree/Makefile" ]; then
	say "extracting $src_tar into ${top#"$here"/}"
	rm -rf "$tree" "$top/.src-stamp" "$top/.config-stamp"
	tar -C "$top" -xaf "$src_tar"
	echo "$want_src" >"$top/.src-stamp"
fi

# 2. Configure: x86_64 defconfig + kvm_guest.config + virtme-ng's fragment
# (what `vng --kconfig` appends) + the debug/test options below, which win.
# Regenerated only when this script (the fragment) changed.
frag=$top/nxd-debug.config
cat >"$frag.new" <<'CFG'
# --- identity
CONFIG_LOCALVERSION="-nxd-debug"
# CONFIG_LOCALVERSION_AUTO is not set
# --- small and quick to build: no debug info, no graphics/sound/usb/...
CONFIG_DEBUG_INFO_NONE=y
# CONFIG_DEBUG_INFO_DWARF_TOOLCHAIN_DEFAULT is not set
# CONFIG_DEBUG_INFO_BTF is not set
# CONFIG_DRM is not set
# CONFIG_FB is not set
# CONFIG_SOUND is not set
# CONFIG_USB_SUPPORT is not set
# CONFIG_HID is not set
# CONFIG_INPUT_KEYBOARD is not set
# CONFIG_INPUT_MOUSE is not set
# CONFIG_ATA is not set
# CONFIG_ETHERNET is not set
# CONFIG_WLAN is not set
# CONFIG_WIRELESS is not set
# CONFIG_NETFILTER is not set
# CONFIG_IPV6 is not set
# CONFIG_NFS_FS is not set
# CONFIG_AGP is not set
# CONFIG_PCCARD is not set
# CONFIG_HIBERNATION is not set
# CONFIG_SUSPEND is not set
# CONFIG_CPU_FREQ is not set
# CONFIG_FTRACE is not set
# CONFIG_KPROBES is not set
# CONFIG_UPROBES is not set
# CONFIG_BPF_SYSCALL is not set
# CONFIG_MACINTOSH_DRIVERS is not set
# CONFIG_SECURITY is not set
# CONFIG_AUDIT is not set
# CONFIG_MODULE_SIG is not set
# CONFIG_MODVERSIONS is not set
CONFIG_MODULES=y
CONFIG_MODULE_UNLOAD=y
CONFIG_MODULE_FORCE_UNLOAD=y
# --- the debug checks
CONFIG_DEBUG_KERNEL=y
CONFIG_DEBUG_FS=y
CONFIG_PROVE_LOCKING=y
CONFIG_DEBUG_ATOMIC_SLEEP=y
CONFIG_DEBUG_LIST=y
CONFIG_DETECT_HUNG_TASK=y
CONFIG_KASAN=y
CONFIG_KASAN_GENERIC=y
CONFIG_KASAN_VMALLOC=y
CONFIG_FAULT_INJECTION=y
CONFIG_FAILSLAB=y
CONFIG_FAIL_PAGE_ALLOC=y
CONFIG_FAIL_MAKE_REQUEST=y
CONFIG_FAULT_INJECTION_DEBUG_FS=y
# --- what the guest tests load
CONFIG_MD=y
CONFIG_BLK_DEV_DM=m
CONFIG_DM_ZERO=m
CONFIG_DM_FLAKEY=m
CONFIG_DM_LOG_WRITES=m
CONFIG_DM_SNAPSHOT=m
CONFIG_DM_DELAY=m
CONFIG_DM_WRITECACHE=m
CONFIG_DM_CACHE=m
CONFIG_DM_CACHE_SMQ=m
CONFIG_BCACHE=m
CONFIG_BLK_DEV_MD=m
CONFIG_MD_RAID456=m
CONFIG_BLK_DEV=y
CONFIG_BLK_DEV_RAM=m
CONFIG_BLK_DEV_NULL_BLK=m
CONFIG_BLK_DEV_LOOP=m
CONFIG_XFS_FS=m
CONFIG_EXT4_FS=m
CONFIG_CONFIGFS_FS=m
CONFIG_CRYPTO=y
CONFIG_CRYPTO_CRC32C=y
CONFIG_LIBCRC32C=m
CONFIG_AIO=y
CONFIG_IO_URING=y
# --- what virtme-ng needs (also in its fragment; repeated so they hold)
CONFIG_VIRTIO=y
CONFIG_VIRTIO_PCI=y
CONFIG_VIRTIO_CONSOLE=y
CONFIG_NET_9P=y
CONFIG_NET_9P_VIRTIO=y
CONFIG_9P_FS=y
CONFIG_OVERLAY_FS=y
CONFIG_TMPFS=y
CONFIG_DEVTMPFS=y
CONFIG_UNIX=y
CONFIG_BINFMT_SCRIPT=y
CONFIG_SERIAL_8250=y
CONFIG_SERIAL_8250_CONSOLE=y
CFG
kasan_line=CONFIG_KASAN_OUTLINE=y
[ "$kasan_mode" = inline ] && kasan_line=CONFIG_KASAN_INLINE=y
echo "$kasan_line" >>"$frag.new"
mv "$frag.new" "$frag"
want_cfg=$(sha256sum <"$frag" | cut -d' ' -f1)
if [ "$(cat "$top/.config-stamp" 2>/dev/null)" != "$want_cfg" ] || [ ! -f "$tree/.config" ]; then
	say "configuring (defconfig + kvm_guest.config + virtme-ng + ${frag#"$here"/})"
	rm -f "$top/.config-stamp"
	vfrag=$top/virtme.config
	if [ -x "$vng_cfg" ]; then
		"$vng_cfg" --dry-run --defconfig >"$vfrag"
	else
		say "no $vng_cfg (make deps): virtme-ng fragment skipped"
		: >"$vfrag"
	fi
	mk -s defconfig
	mk -s kvm_guest.config
	(cd "$tree" && ARCH=x86_64 scripts/kconfig/merge_config.sh -m .config "$vfrag" "$frag" >/dev/null)
	mk -s olddefconfig
	# Every option of our fragment must have survived olddefconfig.
	bad=0
	while IFS= read -r l; do
		case $l in
		CONFIG_*=*)
			grep -qxF "$l" "$tree/.config" || { say "config: wanted $l, got: $(grep -E "^(# )?${l%%=*}[= ]" "$tree/.config" || echo unset)"; bad=1; } ;;
		"# CONFIG_"*" is not set")
			o=${l#\# }; o=${o%% *}
			! grep -q "^$o=" "$tree/.config" || { say "config: wanted $o off, got $(grep "^$o=" "$tree/.config")"; bad=1; } ;;
		esac
	done <"$frag"
	[ $bad = 0 ] || { say "configuration does not hold the options above"; exit 1; }
	echo "$want_cfg" >"$top/.config-stamp"
fi

# 3. Build (incremental), then modules_prepare so the tree is a KDIR.
say "building with -j$jobs (nice 19)"
t0=$(date +%s)
mk -s -j"$jobs" bzImage modules
mk -s modules_prepare
rel=$(mk -s kernelrelease)
secs=$(($(date +%s) - t0))
say "build step took ${secs}s"
echo "$(date -Is) $rel build ${secs}s" >>"$top/build-times.log"
img=$tree/arch/x86/boot/bzImage
[ -f "$img" ] || { say "no $img after the build"; exit 1; }
[ -f "$tree/modules.order" ] || { say "no modules.order after the build"; exit 1; }
echo "$rel" >"$top/release"
say "image: $img"
echo "release $rel"
echo "tree $tree"
