#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make deb`: the two binary packages of debian/ (debhelper, dh_dkms),
# built with dpkg-buildpackage -b in a copy of the tree under build/ (no
# build output in the source tree), then moved to build/deb/:
#
#   dm-nxd-dkms_VERSION_all.deb   the module's sources in
#                                 /usr/src/dm-nxd-MODVER with dkms.conf;
#                                 its postinst (dh_dkms) registers them
#                                 with DKMS and builds and installs the
#                                 module for every kernel with headers in
#                                 /lib/modules/<kver>/build, on install
#                                 and upgrade (DKMS's AUTOINSTALL builds it
#                                 for kernels installed later); prerm
#                                 removes it from DKMS.
#   nxdctl_VERSION_ARCH.deb       /usr/sbin/nxdctl, /usr/lib/udev/nxd-probe,
#                                 the udev rules (69-nxd-activate.rules
#                                 assembles volumes as their devices
#                                 appear), nxd-activate@.service and
#                                 .timer, nxd-stop.service (enabled by
#                                 80-nxd.preset), nxd-monitor.service
#                                 (not enabled), the OCF resource agent,
#                                 the man pages and the admin guide.
#
# MODVER is dkms.conf's PACKAGE_VERSION (the module's; DKMS knows the
# module by it).  VERSION is MODVER+git<commits>.g<hash> in a git
# checkout (the commit count makes each commit's build sort above its
# parent's for dpkg), MODVER elsewhere; DEB_VERSION overrides it.
# DEB_OUT overrides the output folder (the guests of make test build
# their own at once, one per kernel, so a shared folder would be removed
# under the other's feet).  DEB_LINT=1: lintian on the result, its
# output on stderr, failing on errors.  Prints the paths of the two
# packages, nothing else on stdout.  mkdeb.sh --print-version prints the
# version it would build and stops.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
out=${DEB_OUT:-$here/build/deb}
modver=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' dkms.conf)
[ -n "$modver" ] || { echo "mkdeb: no PACKAGE_VERSION in dkms.conf" >&2; exit 1; }
gitver=
if git rev-parse --git-dir >/dev/null 2>&1; then
	gitver=+git$(git rev-list --count HEAD).g$(git rev-parse --short HEAD)
fi
debver=${DEB_VERSION:-$modver$gitver}
if [ "${1:-}" = --print-version ]; then
	echo "$debver"
	exit 0
elif [ $# -gt 0 ]; then
	echo "usage: mkdeb.sh [--print-version]" >&2
	exit 2
fi
for c in dpkg-buildpackage dh dh_dkms; do
	command -v "$c" >/dev/null ||
		{ echo "mkdeb: no $c: dpkg-dev, debhelper and dh-dkms needed (make deps-runtime)" >&2; exit 1; }
done

# The copy: the files git knows (tracked, or new and not ignored), else
# the tree without build products.
mkdir -p "$here/build"
work=$(mktemp -d "$here/build/deb-tree.XXXXXX")
trap 'rm -rf "$work"' EXIT
tree=$work/dm-nxd
mkdir -p "$tree"
if git rev-parse --git-dir >/dev/null 2>&1; then
	git ls-files -z --cached --others --exclude-standard |
		rsync -a --from0 --files-from=- ./ "$tree/"
else
	rsync -a --exclude=/build --exclude=/.venv --exclude=/.git \
		--exclude='*.o' --exclude=/tools/nxdctl --exclude=/tools/nxd-probe \
		./ "$tree/"
fi

# This build's version and date (the commit's, so the same commit gives
# the same changelog) on the changelog's first entry.
date=$(git log -1 --format=%aD 2>/dev/null || date -R)
sed -i -e "1s/^\([^ ]*\) ([^)]*)/\1 ($debver)/" \
	-e "0,/^ -- /s/^\( -- .*>  \).*/\1$date/" "$tree/debian/changelog"
sed -n '1p' "$tree/debian/changelog" | grep -qF "($debver)" ||
	{ echo "mkdeb: bad version '$debver'" >&2; exit 1; }

(cd "$tree" && dpkg-buildpackage -b -us -uc -j"$(nproc)") >"$work/build.log" 2>&1 ||
	{ cat "$work/build.log" >&2; echo "mkdeb: dpkg-buildpackage failed" >&2; exit 1; }
arch=$(dpkg --print-architecture)
debs=("$work/dm-nxd-dkms_${debver}_all.deb" "$work/nxdctl_${debver}_$arch.deb")
for d in "${debs[@]}"; do
	[ -f "$d" ] || { cat "$work/build.log" >&2; echo "mkdeb: no ${d##*/}" >&2; exit 1; }
done
if [ "${DEB_LINT:-0}" = 1 ]; then
	lintian --fail-on error --info --display-info \
		"$work/dm-nxd_${debver}_$arch.changes" >&2
fi

rm -rf "$out"
mkdir -p "$out"
mv "${debs[@]}" "$out/"
ls "$out"/*.deb
