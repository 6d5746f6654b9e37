#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make test-boot: event-driven assembly under a real systemd.  A Debian
# bookworm root built from Debian's packages with mmdebstrap (cached in
# build/boot/base-HASH.tar; --format=tar, as the .tmp name would make a
# directory), with this tree's nxdctl package installed by
# dpkg (its preset, rules and units as shipped) and dm-nxd.ko in
# /lib/modules/KVER/updates, is booted by QEMU (TCG) with the Debian
# kernel and systemd as init; the root is a host folder on virtiofs (no
# initramfs), the disks are raw image files: one SSD and four RAID6
# members.  nxd-boottest.service (scripts/boot_guest.sh) checks each boot
# and writes /var/lib/nxd-boottest/SCENARIO.result.  Boots:
#
#   setup        RAID6 on the four HDDs, nxdctl create, mkfs, an nxdtab
#                line and an fstab line (UUID=, nofail); a clean reboot
#   dirty        the volume comes back by itself and is mounted; nxd-stop
#                ran at the last shutdown; small files in the log; sums;
#                a hard reset (sysrq b) with the log full of writes
#   after-dirty  the log is replayed, the files match the sums
#   degraded     one member missing: md waits, mdadm-last-resort@ starts
#                the array degraded ~30 s later, its event assembles the
#                volume, mounted, files match
#   nossd        the SSD missing: the volume is not assembled, the journal
#                names the missing half, the nofail line is skipped, the
#                raw array is not mounted, the boot goes on
#
# Prints one line per boot (wall time, result) and the failed checks;
# exit status 0 if every check passed.  Not part of make test.
#   KVER        kernel (default 6.12.95+deb12-amd64; it needs virtiofs and
#               virtio-pci built in, which Debian's 6.1 does not have)
#   BOOT_TIMEOUT seconds a boot may take (default 900)
#   TEST_BOOT_FROM=SCENARIO  reuse the last run's root and disks, start there
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
KVER=${KVER:-6.12.95+deb12-amd64}
timeout_s=${BOOT_TIMEOUT:-900}
out=$here/build/boot
root=$out/root
mkdir -p "$out"
say() { echo "test-boot: $*"; }
die() { echo "test-boot: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap, dpkg --root, virtiofsd)"
virtiofsd=/usr/lib/qemu/virtiofsd
for t in mmdebstrap qemu-system-x86_64 "$virtiofsd"; do
	command -v "$t" >/dev/null || die "$t missing: make deps"
done
[ -r "/boot/vmlinuz-$KVER" ] || die "no /boot/vmlinuz-$KVER"
# The root is virtiofs and there is no initramfs: virtiofs and virtio-pci
# must be built in (Debian's 6.12; 6.1 has them as modules).
for opt in CONFIG_VIRTIO_FS CONFIG_VIRTIO_PCI; do
	grep -qx "$opt=y" "/boot/config-$KVER" ||
		die "$KVER: $opt is not built in; the boot has no initramfs to load it (use 6.12)"
done

# TEST_BOOT_FROM=SCENARIO: keep the root and disks of the last run and
# start at SCENARIO (the guest script is refreshed).
from=${TEST_BOOT_FROM:-}
if [ -n "$from" ]; then
	[ -s "$root/var/lib/nxd-boottest/uuid" ] || die "TEST_BOOT_FROM: no earlier setup in $root"
	install -m 0755 scripts/boot_guest.sh "$root/usr/local/sbin/nxd-boottest"
else
# ---- the base root: Debian's packages, cached ----
pkgs=systemd,systemd-sysv,udev,mdadm,kmod,dmsetup,libdevmapper1.02.1,libsmartcols1,libblkid1,e2fsprogs,util-linux,procps
base=$out/base-$(echo "$pkgs" | sha256sum | cut -c1-12).tar
if [ ! -f "$base" ] || [ ! -s "$base" ]; then
	rm -rf "$base" "$base.tmp"
	say "mmdebstrap bookworm ($pkgs)"
	mmdebstrap --variant=minbase --format=tar --include="$pkgs" bookworm "$base.tmp" \
		http://deb.debian.org/debian >"$out/mmdebstrap.log" 2>&1 ||
		die "mmdebstrap failed: $out/mmdebstrap.log"
	mv "$base.tmp" "$base"
fi

# ---- this tree: module, package ----
make -s module-"$KVER" >/dev/null
make -s tools >/dev/null
DEB_OUT=$out/deb scripts/mkdeb.sh >/dev/null
deb=$(ls "$out"/deb/nxdctl_*.deb)

say "root in $root"
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" --numeric-owner -xf "$base"
mkdir -p "$root/lib/modules"
rsync -a --exclude=build --exclude=source "/lib/modules/$KVER" "$root/lib/modules/"
install -D -m 0644 "build/$KVER/dm-nxd.ko" "$root/lib/modules/$KVER/updates/dm-nxd.ko"
depmod -b "$root" "$KVER"
cp "$deb" "$root/tmp/"
chroot "$root" dpkg -i "/tmp/${deb##*/}" >"$out/dpkg.log" 2>&1 ||
	die "dpkg -i failed: $out/dpkg.log"
rm -f "$root/tmp/${deb##*/}"
echo nxdboot >"$root/etc/hostname"
printf 'HOMEHOST <system>\nMAILADDR root\n' >"$root/etc/mdadm/mdadm.conf"
mkdir -p "$root/var/log/journal"
: >"$root/etc/fstab"
passwd -R "$root" -d root >/dev/null
install -m 0755 scripts/boot_guest.sh "$root/usr/local/sbin/nxd-boottest"
cat >"$root/etc/systemd/system/nxd-boottest.service" <<'EOF'
[Unit]
Description=dm-nxd boot test (scripts/test-boot.sh)
After=basic.target

[Service]
Type=exec
ExecStart=/usr/local/sbin/nxd-boottest
StandardOutput=journal+console

[Install]
WantedBy=multi-user.target
EOF
systemctl --root="$root" enable nxd-boottest.service >/dev/null 2>&1
# Shipped as the package installs them (checked in the guest too).
[ -e "$root/usr/lib/udev/rules.d/69-nxd-activate.rules" ] ||
	die "the package has no 69-nxd-activate.rules"
[ -L "$root/etc/systemd/system/local-fs-pre.target.wants/nxd-stop.service" ] ||
	die "the package's postinst did not enable nxd-stop.service by preset"

# ---- disks ----
rm -f "$out"/disk-*.img
truncate -s 256M "$out/disk-ssd.img"
for i in 1 2 3 4; do truncate -s 128M "$out/disk-hdd$i.img"; done
fi

# boot SCENARIO DISK...: one boot; prints the wall time and the verdict.
total_fail=0
boot() {
	local scen=$1 t0 t1 args=() d sock=$out/vfs.sock rc res
	shift
	for d in "$@"; do
		args+=(-drive "file=$out/disk-$d.img,format=raw,if=none,id=$d,cache=writeback"
		       -device "virtio-blk-pci,drive=$d,serial=nxd$d")
	done
	rm -f "$sock" "$root/var/lib/nxd-boottest/$scen.result"
	"$virtiofsd" --socket-path="$sock" -o source="$root" -o cache=auto \
		-o xattr >"$out/virtiofsd-$scen.log" 2>&1 &
	local vpid=$!
	for _ in $(seq 50); do
		if [ -S "$sock" ]; then break; fi
		sleep 0.1
	done
	t0=$(date +%s)
	rc=0
	timeout "$timeout_s" qemu-system-x86_64 -accel tcg -m 1024 -smp 2 \
		-nographic -no-reboot -monitor none \
		-kernel "/boot/vmlinuz-$KVER" \
		-append "rootfstype=virtiofs root=rootfs rw console=ttyS0 panic=-1 no_timer_check nxdtest=$scen" \
		-chardev socket,id=fs,path="$sock" \
		-device vhost-user-fs-pci,chardev=fs,tag=rootfs \
		-object memory-backend-memfd,id=mem,size=1024M,share=on \
		-numa node,memdev=mem "${args[@]}" \
		-serial "file:$out/console-$scen.log" >"$out/qemu-$scen.log" 2>&1 || rc=$?
	t1=$(date +%s)
	kill "$vpid" 2>/dev/null || true
	wait "$vpid" 2>/dev/null || true
	res=$root/var/lib/nxd-boottest/$scen.result
	if [ $rc = 124 ]; then
		say "$scen: TIMEOUT after $((t1 - t0)) s (console: $out/console-$scen.log)"
		total_fail=$((total_fail + 1))
		return 1
	fi
	if ! grep -q '^done fails=0$' "$res" 2>/dev/null; then
		say "$scen: FAIL in $((t1 - t0)) s; $res:"
		sed 's/^/    /' "$res" 2>/dev/null || echo "    (no result file)"
		total_fail=$((total_fail + 1))
		return 1
	fi
	say "$scen: pass ($(grep -c '^ok ' "$res") checks) in $((t1 - t0)) s wall, $(sed -n 's/^elapsed_since_boot //p' "$res") s guest uptime"
}

all=(ssd hdd1 hdd2 hdd3 hdd4)
# Each boot after setup runs even if the one before failed a check.
skip=${from:+1}
run() {			# run SCENARIO DISK...
	[ "$1" = "$from" ] && skip=
	[ -n "$skip" ] || boot "$@"
}
if run setup "${all[@]}"; then
	run dirty "${all[@]}" || true
	run after-dirty "${all[@]}" || true
	run degraded ssd hdd1 hdd2 hdd3 || true
	run nossd hdd1 hdd2 hdd3 || true
fi
cp "$root"/var/lib/nxd-boottest/*.result "$out/" 2>/dev/null || true
if [ $total_fail = 0 ]; then
	say "all boots passed"
	exit 0
fi
say "$total_fail boot(s) failed (logs in $out: console-*.log, and $root/var/lib/nxd-boottest)"
exit 1
