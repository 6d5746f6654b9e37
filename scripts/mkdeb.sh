#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make deb`: two Debian packages in build/deb/, built with dpkg-deb from
# the tree (tools already built by make):
#
#   dm-nxd-dkms_VERSION_all.deb   the module's sources in
#                                 /usr/src/dm-nxd-VERSION with dkms.conf;
#                                 its postinst registers them with DKMS and
#                                 builds and installs the module for the
#                                 running kernel (DKMS's AUTOINSTALL builds
#                                 it for kernels installed later); prerm
#                                 removes it from DKMS.
#   nxdctl_VERSION_ARCH.deb       /usr/sbin/nxdctl, /usr/lib/udev/nxd-probe,
#                                 the udev rules (69-nxd-activate.rules
#                                 assembles volumes as their devices
#                                 appear), nxd-activate@.service and
#                                 .timer, nxd-stop.service (enabled by
#                                 80-nxd.preset), nxd-monitor.service
#                                 (not enabled), the man pages and the
#                                 admin guide.
#
# VERSION is dkms.conf's PACKAGE_VERSION (the module's, which the DKMS
# package must use), plus +gHASH when the tree is a git checkout;
# DEB_VERSION overrides it; DEB_OUT overrides the output folder (the
# guests of make test build their own at once, one per kernel, so a shared
# folder would be removed under the other's feet).  Prints the paths of
# the two packages.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=${DEB_OUT:-$here/build/deb}
name=dm-nxd
modver=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' dkms.conf)
[ -n "$modver" ] || { echo "mkdeb: no PACKAGE_VERSION in dkms.conf" >&2; exit 1; }
hash=$(git rev-parse --short HEAD 2>/dev/null || true)
debver=${DEB_VERSION:-$modver${hash:++g$hash}}
arch=$(dpkg --print-architecture)
maint="dm-nxd developers <dm-nxd@localhost>"

for f in tools/nxdctl tools/nxd-probe; do
	[ -x "$f" ] || { echo "mkdeb: $f not built (make tools)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out"

# ---- dm-nxd-dkms ----
root=$out/dkms
src=$root/usr/src/$name-$modver
mkdir -p "$src" "$root/DEBIAN" "$root/usr/share/doc/$name-dkms"
cp dkms.conf Kbuild "$src/"
mkdir -p "$src/dm-target" "$src/kernel"
cp dm-target/*.[ch] "$src/dm-target/"
cp kernel/*.[ch] "$src/kernel/"
cp docs/on-disk-format.md "$root/usr/share/doc/$name-dkms/"
cat >"$root/DEBIAN/control" <<EOF
Package: $name-dkms
Version: $debver
Architecture: all
Maintainer: $maint
Depends: dkms (>= 2.1.0.0)
Recommends: nxdctl
Section: kernel
Priority: optional
Description: dm-nxd device-mapper target (DKMS sources)
 An SSD log in front of a disk array: small and unaligned writes go to a
 crash-safe log on the SSD, large aligned writes straight to the array,
 and a destager copies the log back.  This package builds dm-nxd.ko for
 the installed kernels with DKMS.
EOF
cat >"$root/DEBIAN/postinst" <<EOF
#!/bin/sh
set -e
case "\$1" in
configure)
	if ! dkms status -m $name -v $modver | grep -q .; then
		dkms add -m $name -v $modver
	fi
	kver=\$(uname -r)
	if [ -e "/lib/modules/\$kver/build/Makefile" ] ||
	   [ -e "/usr/src/linux-headers-\$kver/Makefile" ]; then
		dkms build -m $name -v $modver -k "\$kver" &&
		dkms install -m $name -v $modver -k "\$kver" ||
			echo "dm-nxd-dkms: building for \$kver failed (see /var/lib/dkms/$name/$modver/build/make.log)" >&2
	else
		echo "dm-nxd-dkms: no headers for the running kernel \$kver: install linux-headers-\$kver" >&2
	fi
	;;
esac
exit 0
EOF
cat >"$root/DEBIAN/prerm" <<EOF
#!/bin/sh
set -e
case "\$1" in
remove|upgrade|deconfigure)
	if dkms status -m $name -v $modver | grep -q .; then
		dkms remove -m $name -v $modver --all || true
	fi
	;;
esac
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm"

# ---- nxdctl ----
root=$out/nxdctl
mkdir -p "$root/DEBIAN" "$root/usr/sbin" "$root/usr/lib/udev/rules.d" \
	"$root/usr/lib/systemd/system" "$root/usr/lib/systemd/system-preset" \
	"$root/usr/share/man/man8" "$root/usr/share/man/man4" \
	"$root/usr/share/man/man5" \
	"$root/usr/share/doc/nxdctl"
install -m 0755 tools/nxdctl "$root/usr/sbin/nxdctl"
install -m 0755 tools/nxd-probe "$root/usr/lib/udev/nxd-probe"
install -m 0644 udev/*.rules "$root/usr/lib/udev/rules.d/"
install -m 0644 systemd/nxd-activate@.service systemd/nxd-activate@.timer \
	systemd/nxd-stop.service "$root/usr/lib/systemd/system/"
# The preset enables nxd-stop.service; nxd-monitor.service is not
# enabled: systemctl enable --now nxd-monitor.
install -m 0644 systemd/nxd-monitor.service "$root/usr/lib/systemd/system/"
install -m 0644 systemd/80-nxd.preset "$root/usr/lib/systemd/system-preset/"
gzip -9n -c docs/man/nxdctl.8 >"$root/usr/share/man/man8/nxdctl.8.gz"
gzip -9n -c docs/man/dm-nxd.4 >"$root/usr/share/man/man4/dm-nxd.4.gz"
gzip -9n -c docs/man/nxdtab.5 >"$root/usr/share/man/man5/nxdtab.5.gz"
gzip -9n -c docs/man/nxd-probe.8 >"$root/usr/share/man/man8/nxd-probe.8.gz"
install -m 0644 docs/admin-guide.md "$root/usr/share/doc/nxdctl/"
# The Pacemaker resource agent, ocf:nxd:nxd (resource-agents not needed).
install -D -m 0755 tools/ocf/nxd "$root/usr/lib/ocf/resource.d/nxd/nxd"
# Depends: the packages of the shared libraries the binaries link
# directly (their NEEDED entries).
deps=$(for b in tools/nxdctl tools/nxd-probe; do
		for n in $(readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			ldd "$b" | awk -v n="$n" '$1 == n { print $3 }'
		done
	done | sort -u |
	while read -r lib; do
		p=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
		    dpkg -S "$lib" 2>/dev/null) || continue
		p=${p%%:*}
		v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)
		echo "$p (>= ${v%%-*})"
	done | sort -u | paste -sd, - | sed 's/,/, /g')
cat >"$root/DEBIAN/control" <<EOF
Package: nxdctl
Version: $debver
Architecture: $arch
Maintainer: $maint
Depends: $deps, udev, dmsetup
Recommends: $name-dkms
Suggests: pacemaker, resource-agents
Section: admin
Priority: optional
Description: administration tool and udev rules for dm-nxd volumes
 nxdctl creates, assembles, inspects and tunes dm-nxd volumes (an SSD log
 in front of a disk array); nxd-probe and the udev rules make the two
 halves of a volume known to lsblk and blkid-based tools and keep the
 array's file system links for the volume.
EOF
# nxd-stop.service as the preset says, on the first installation only
# (an admin's later disable stays).  Volumes present now are left to
# nxdctl assemble or the next boot.
cat >"$root/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = configure ] && command -v udevadm >/dev/null; then
	udevadm control --reload 2>/dev/null || true
fi
if [ "$1" = configure ] && [ -z "$2" ] && command -v systemctl >/dev/null; then
	systemctl preset nxd-stop.service 2>/dev/null || true
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
		systemctl start nxd-stop.service || true
	fi
fi
exit 0
EOF
cat >"$root/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ "$1" = purge ] && command -v systemctl >/dev/null; then
	systemctl disable nxd-stop.service 2>/dev/null || true
fi
exit 0
EOF
chmod 0755 "$root/DEBIAN/postinst" "$root/DEBIAN/postrm"

for p in dkms nxdctl; do
	dpkg-deb --root-owner-group -Zxz --build "$out/$p" "$out" >/dev/null
	rm -rf "${out:?}/$p"
done
ls "$out"/*.deb
