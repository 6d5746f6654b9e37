#!/usr/bin/env bash
# Idempotent installer of everything dm-nxd needs to build, test, demo and
# benchmark. Debian packages and PyPI only. Run as root.
#
# deps.sh --runtime (make deps-runtime): only what a server needs to build,
# install and run the module and nxdctl (compiler, headers of the running
# kernel, dkms, the libraries nxdctl links, dmsetup, udev; debhelper and
# dh-dkms for make deb); no backports, no test kernel, no qemu or test
# tools, no virtme-ng.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
VNG_VERSION=${VNG_VERSION:-1.42}
VENV=${VENV:-$here/.venv}
say() { echo "deps: $*"; }

if [ "$(id -u)" != 0 ]; then
	echo "deps: must run as root (apt-get)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive

if [ "${1:-}" = --runtime ]; then
	RT_PKGS=(build-essential make gcc pkg-config kmod dmsetup udev dkms
		 rsync libdevmapper-dev libsmartcols-dev libblkid-dev
		 dpkg-dev debhelper dh-dkms    # make deb (dpkg-buildpackage)
		 "linux-headers-$(uname -r)")
	missing=()
	for p in "${RT_PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		say "apt-get update"
		apt-get update -q
		say "installing: ${missing[*]}"
		apt-get install -y -q --no-install-recommends "${missing[@]}"
	fi
	say "runtime dependencies present"
	exit 0
elif [ $# -gt 0 ]; then
	echo "usage: deps.sh [--runtime]" >&2
	exit 2
fi

# bookworm-backports carries the 6.12 LTS kernel.
if ! grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
	say "adding bookworm-backports to apt sources"
	cat > /etc/apt/sources.list.d/bookworm-backports.sources <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	rm -f /var/lib/apt/lists/.nxd-updated
fi

PKGS=(build-essential make gcc clang llvm sparse kmod dmsetup libdevmapper-dev
      libsmartcols-dev pkg-config libblkid-dev
      qemu-system-x86 busybox-static fio blktrace mdadm xfsprogs e2fsprogs
      bcache-tools python3-pytest python3-matplotlib python3-prometheus-client
      udev util-linux
      linux-image-amd64 linux-headers-amd64 dkms cpio kbd iproute2
      libclang-rt-14-dev rsync
      flex bison libelf-dev    # these three: make debug-kernel (kconfig, objtool)
      glusterfs-server glusterfs-client attr fuse3   # make test-pfs, make demo-pfs
      shellcheck    # make lint-sh
      resource-agents libxml2-utils   # ocf-tester (tests/vm/test_owner.py); no pacemaker
      prometheus    # promtool check metrics in make -C tools check
      dpkg-dev debhelper dh-dkms lintian   # make deb (dpkg-buildpackage), DEB_LINT=1
      autoconf automake libtool autopoint curl)   # make test-prober (util-linux)
BPO_PKGS=(linux-image-amd64 linux-headers-amd64)
# make test-boot: a Debian root built with mmdebstrap, booted by QEMU on
# virtiofs (/usr/lib/qemu/virtiofsd, in qemu-system-common).
PKGS+=(mmdebstrap qemu-system-common)

say "this installs what is missing of: ${PKGS[*]}; from bookworm-backports:" \
	"${BPO_PKGS[*]} (6.12); virtme-ng $VNG_VERSION into $VENV;" \
	"checkpatch.pl into /usr/local/lib/nxd-checkpatch"
say "it starts no service and keeps the kernel the host boots by default"

# While apt installs, no package starts a service (invoke-rc.d and
# deb-systemd-invoke ask policy-rc.d; 101: not allowed).  Ours only if
# there is none; removed on exit.
POLICY=/usr/sbin/policy-rc.d
policy_ours=0
policy_on() {
	[ -e "$POLICY" ] && return 0
	printf '#!/bin/sh\n# scripts/deps.sh: no service starts while it installs\nexit 101\n' >"$POLICY"
	chmod 755 "$POLICY"
	policy_ours=1
}
policy_off() {
	if [ $policy_ours = 1 ]; then rm -f "$POLICY"; policy_ours=0; fi
}
trap policy_off EXIT
# Unit files enabled now, to undo what a package's postinst enables.
enabled_units() {
	[ -d /run/systemd/system ] || return 0
	systemctl list-unit-files --state=enabled --no-legend 2>/dev/null | awk '{print $1}' | sort
}
units_before=$(enabled_units)

# A previous install cut short (machine restart, killed job) leaves dpkg
# half-configured and every later apt-get refuses to run; finish it first.
if [ -n "$(dpkg --audit 2>/dev/null)" ] || ls /var/lib/dpkg/updates/0* >/dev/null 2>&1; then
	say "dpkg was interrupted earlier: dpkg --configure -a"
	dpkg --configure -a
fi

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
bpo_needed=1
ls /boot/vmlinuz-6.12.* >/dev/null 2>&1 && ls -d /usr/src/linux-headers-6.12.*-amd64 >/dev/null 2>&1 && bpo_needed=0

if [ ${#missing[@]} -gt 0 ] || [ $bpo_needed = 1 ]; then
	say "apt-get update"
	apt-get update -q
fi
if [ ${#missing[@]} -gt 0 ]; then
	say "installing: ${missing[*]}"
	policy_on
	apt-get install -y -q --no-install-recommends "${missing[@]}"
	policy_off
else
	say "Debian packages present"
fi

# The default boot entry: Debian's GRUB_DEFAULT=0 boots the newest kernel,
# which the backports 6.12 would become.  The tests only need its files
# in /boot; the host keeps booting the kernel it runs (GRUB_DEFAULT=saved
# in a drop-in, the running kernel's entry saved).  Left alone: no GRUB,
# an admin's own GRUB_DEFAULT, or a running kernel that is the newest.
GRUB_DROPIN=/etc/default/grub.d/50-nxd-deps.cfg
keep_boot_kernel() {
	local cfg=/boot/grub/grub.cfg def sub ent kver
	kver=$(uname -r)
	if ! command -v grub-set-default >/dev/null || ! command -v update-grub >/dev/null ||
	   [ ! -f "$cfg" ]; then
		say "no GRUB here: boot entry not touched"
		return 0
	fi
	def=$(sed -n 's/^GRUB_DEFAULT=//p' /etc/default/grub /etc/default/grub.d/*.cfg 2>/dev/null | tail -1 | tr -d '"')
	if [ -n "$def" ] && [ "$def" != 0 ] && [ ! -e "$GRUB_DROPIN" ]; then
		say "GRUB_DEFAULT=$def is the admin's: boot entry not touched"
		return 0
	fi
	[ -e "$GRUB_DROPIN" ] || printf '# scripts/deps.sh: boot the saved entry, not the newest kernel\nGRUB_DEFAULT=saved\n' >"$GRUB_DROPIN"
	update-grub
	sub=$(sed -n "s/^submenu .*\\\$menuentry_id_option '\(gnulinux-advanced-[^']*\)'.*/\\1/p" "$cfg" | head -1)
	ent=$(sed -n "s/.*\\\$menuentry_id_option '\(gnulinux-$kver-advanced-[^']*\)'.*/\\1/p" "$cfg" | head -1)
	if [ -z "$ent" ]; then
		say "WARNING: no GRUB entry for the running kernel $kver; check the default boot entry"
		return 0
	fi
	grub-set-default "${sub:+$sub>}$ent"
	say "GRUB boots $kver by default, as before (grub-set-default; $GRUB_DROPIN)"
}
if [ $bpo_needed = 1 ]; then
	say "installing the 6.12 kernel and headers from bookworm-backports"
	policy_on
	apt-get install -y -q --no-install-recommends -t bookworm-backports "${BPO_PKGS[@]}"
	policy_off
else
	say "6.12 kernel and headers present"
fi
if [ $bpo_needed = 1 ] || [[ " ${missing[*]} " == *" linux-image-amd64 "* ]]; then
	keep_boot_kernel
fi

# What a postinst enabled (glusterd, prometheus: the tests start their own
# in the guest) is disabled and stopped again.
if [ -d /run/systemd/system ]; then
	for u in $(comm -13 <(echo "$units_before") <(enabled_units)); do
		say "disabling $u, which a package enabled"
		systemctl disable --now "$u" || true
	done
fi

# virtme-ng, pinned, in a venv kept out of git.
if [ ! -x "$VENV/bin/vng" ] || ! "$VENV/bin/pip" show virtme-ng 2>/dev/null | grep -q "^Version: $VNG_VERSION\$"; then
	say "installing virtme-ng==$VNG_VERSION into $VENV"
	/usr/bin/python3 -m venv "$VENV"
	"$VENV/bin/pip" install -q "virtme-ng==$VNG_VERSION"
else
	say "virtme-ng $VNG_VERSION present in $VENV"
fi
# checkpatch.pl: Debian ships it only inside the linux-source tarball.
# Extract the three files it needs once; `make check` looks here.
CP_DIR=/usr/local/lib/nxd-checkpatch/scripts
if [ ! -x "$CP_DIR/checkpatch.pl" ]; then
	say "extracting checkpatch.pl from Debian's linux-source-6.1"
	if dpkg-query -W -f='${Status}' linux-source-6.1 2>/dev/null | grep -q "install ok installed" ||
	   apt-get install -y -q --no-install-recommends linux-source-6.1; then
		tmp=$(mktemp -d)
		if ! { tar -C "$tmp" -xaf /usr/src/linux-source-6.1.tar.xz --wildcards \
			'linux-source-6.1/scripts/checkpatch.pl' \
			'linux-source-6.1/scripts/spelling.txt' \
			'linux-source-6.1/scripts/const_structs.checkpatch' &&
		       mkdir -p "$CP_DIR" && cp "$tmp"/linux-source-6.1/scripts/* "$CP_DIR"/ &&
		       chmod +x "$CP_DIR/checkpatch.pl"; }; then
			say "WARNING: checkpatch extraction failed"
		fi
		rm -rf "$tmp"
	else
		say "WARNING: linux-source-6.1 not installable; make check will skip checkpatch"
	fi
else
	say "checkpatch present in $CP_DIR"
fi

kernels=
for k in /boot/vmlinuz-*; do [ -e "$k" ] || continue; kernels+="${k##*/} "; done
say "kernels: $kernels"
# Stamp read by scripts/test.sh: deps are current while it holds this
# script's hash (kept in the venv, which is per checkout).
sha256sum "$here/scripts/deps.sh" | cut -d' ' -f1 > "$VENV/.nxd-deps-stamp"
say "done"
