#!/usr/bin/env bash
# Idempotent installer of everything dm-nxd needs to build, test, demo and
# benchmark. Debian packages and PyPI only. Run as root.
#
# deps.sh --runtime (make deps-runtime): only what a server needs to build,
# install and run the module and nxdctl (compiler, headers of the running
# kernel, dkms, the libraries nxdctl links, dmsetup, udev); no backports,
# no test kernel, no qemu or test tools, no virtme-ng.
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
      prometheus)   # promtool check metrics in make -C tools check
BPO_PKGS=(linux-image-amd64 linux-headers-amd64)
# make test-boot: a Debian root built with mmdebstrap, booted by QEMU on
# virtiofs (/usr/lib/qemu/virtiofsd, in qemu-system-common).
PKGS+=(mmdebstrap qemu-system-common)

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
	apt-get install -y -q --no-install-recommends "${missing[@]}"
else
	say "Debian packages present"
fi
# The prometheus package is here for promtool; its postinst enables and
# starts a Prometheus server, which was not asked for: put it back.
if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
	say "prometheus: only promtool is needed; disabling the server it started"
	systemctl disable --now prometheus.service || true
fi
if [ $bpo_needed = 1 ]; then
	say "installing the 6.12 kernel and headers from bookworm-backports"
	apt-get install -y -q --no-install-recommends -t bookworm-backports "${BPO_PKGS[@]}"
else
	say "6.12 kernel and headers present"
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
