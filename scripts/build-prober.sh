#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# make test-prober, first half: Debian bookworm's util-linux source (the
# 2.38.1 orig tarball from deb.debian.org, checked against its sha256)
# with docs/contrib/util-linux-nxd-prober.patch applied, configured for
# libblkid and libsmartcols only and built static: blkid and wipefs in
# build/util-linux/bin.  The patch adds a source to Makemodule.am, so
# make reruns automake (autoconf, automake, libtool: make deps).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
ver=2.38.1
sha=60492a19b44e6cf9a3ddff68325b333b8b52b6c59ce3ebd6a0ecaa4c5117e84f
url=http://deb.debian.org/debian/pool/main/u/util-linux/util-linux_$ver.orig.tar.xz
out=$here/build/util-linux
tarball=$out/util-linux_$ver.orig.tar.xz
src=$out/util-linux-$ver
patch=$here/docs/contrib/util-linux-nxd-prober.patch
say() { echo "build-prober: $*"; }
die() { echo "build-prober: $*" >&2; exit 1; }

for t in autoreconf automake libtoolize bison pkg-config; do
	command -v "$t" >/dev/null || die "$t missing: make deps"
done
mkdir -p "$out/bin"
if ! [ -f "$tarball" ] || ! echo "$sha  $tarball" | sha256sum -c --quiet >/dev/null 2>&1; then
	say "fetching $url"
	curl -fsSL -o "$tarball.tmp" "$url"
	echo "$sha  $tarball.tmp" | sha256sum -c --quiet || die "$url: wrong sha256"
	mv "$tarball.tmp" "$tarball"
fi
# A fresh tree each time: the patch must apply to the pristine source.
rm -rf "$src"
tar -C "$out" --no-same-owner -xf "$tarball"
patch -d "$src" -p1 --quiet --no-backup-if-mismatch < "$patch"
say "configure and build (libblkid, libsmartcols, blkid, wipefs; static)"
cd "$src"
if ! ./configure -q --disable-all-programs --enable-libblkid --enable-blkid \
	--enable-libsmartcols --enable-wipefs --disable-shared --enable-static \
	--without-systemd --without-python --disable-nls \
	--disable-bash-completion >"$out/configure.log" 2>&1; then
	tail -20 "$out/configure.log"
	die "configure failed ($out/configure.log)"
fi
if ! make -j"$(nproc)" blkid wipefs >"$out/make.log" 2>&1; then
	tail -30 "$out/make.log"
	die "build failed ($out/make.log)"
fi
install -m 0755 "$src/blkid" "$src/wipefs" "$out/bin/"
say "built $out/bin/blkid and $out/bin/wipefs ($("$out/bin/blkid" -V))"
