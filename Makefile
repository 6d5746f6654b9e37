# SPDX-License-Identifier: GPL-2.0
#
# dm-nxd top-level Makefile.  kbuild itself reads ./Kbuild; this file only
# drives it.  The module is never built in the source tree: each kernel gets
# its own copy of the module sources under build/<kver>/src (so that several
# kernels, and the userspace unit tests that compile kernel/*.c, never share
# object files), and the result lands in build/<kver>/dm-nxd.ko.
#
# Variables (command line or environment):
#   KVER        kernel release to build `all`/`install` for.  Default: the
#               running kernel if /lib/modules/$(uname -r)/build exists,
#               else the newest /usr/src/linux-headers-*-amd64.
#   KDIR        kernel build dir (default from KVER).  Giving only KDIR
#               derives KVER from it.
#   TEST_KVERS  kernels for modules-all/check/test.  Default: every
#               /boot/vmlinuz-* that has headers.
#   TEST_FILTER pytest -k expression for `make test`.
#   NXD_OBJS    override the object list of Kbuild (harness development).
#   NXD_OVERLAY directory copied over the per-kernel source copy (ditto).
#   DESTDIR     staging root for `install`.

SHELL := /bin/bash
TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
BUILD := $(TOP)/build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

# Kernel build dir of release $(1).
kdir_of = $(if $(wildcard /lib/modules/$(1)/build/Makefile),/lib/modules/$(1)/build,/usr/src/linux-headers-$(1))

ifdef KDIR
  ifndef KVER
    KVER := $(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"/\1/p' \
	      $(KDIR)/include/generated/utsrelease.h 2>/dev/null)
  endif
else
  ifndef KVER
    UNAME_R := $(shell uname -r)
    ifneq ($(wildcard /lib/modules/$(UNAME_R)/build/Makefile),)
      KVER := $(UNAME_R)
    else
      KVER := $(shell ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | \
		sed 's|.*/linux-headers-||' | sort -V | tail -n1)
    endif
  endif
  KDIR := $(call kdir_of,$(KVER))
endif

ifndef TEST_KVERS
  TEST_KVERS := $(shell ls /boot/vmlinuz-* 2>/dev/null | sed 's|^/boot/vmlinuz-||' | \
	while read -r v; do \
	if [ -f /lib/modules/$$v/build/Makefile ] || \
	   [ -f /usr/src/linux-headers-$$v/Makefile ]; then echo $$v; fi; \
	done | sort -V | tr '\n' ' ')
endif
export TEST_KVERS

DKMS_NAME := dm-nxd
DKMS_VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$$/\1/p' $(TOP)/dkms.conf)

# Only the module sources go to build/<kver>/src; object files that live in
# the source tree (userspace unit-test builds) are never copied, and
# kbuild's own products in the copy are kept so rebuilds are incremental.
RSYNC_FILTER := \
	--exclude='*.o' --exclude='*.ko' --exclude='.*.cmd' --exclude='*.mod' \
	--exclude='*.mod.c' --exclude='*.a' --exclude='modules.order' \
	--exclude='Module.symvers' --exclude='.tmp*' --exclude='*.dwo' \
	--include='/Kbuild' --include='/dm-target/***' --include='/kernel/***' \
	--exclude='*'

# $(call kbuild,OUTDIR,KVER,KDIR,extra kbuild args): copy the sources to
# OUTDIR/src and build them there against KDIR.
define kbuild
	@set -e; kv='$(2)'; kd='$(3)'; out='$(1)'; \
	if [ ! -f "$$kd/Makefile" ]; then \
		echo "error: no kernel headers for $$kv ($$kd); run 'make deps'" >&2; exit 1; fi; \
	command -v rsync >/dev/null || { echo "error: rsync missing; run 'make deps'" >&2; exit 1; }; \
	mkdir -p "$$out/src"; \
	rsync -a --delete $(RSYNC_FILTER) '$(TOP)/' "$$out/src/"; \
	if [ -n '$(NXD_OVERLAY)' ]; then rsync -a '$(NXD_OVERLAY)/' "$$out/src/"; fi; \
	echo "  KBUILD  $$kv -> $$out"; \
	$(MAKE) --no-print-directory -j$(JOBS) -C "$$kd" M="$$out/src" $(4) modules
endef

.PHONY: all module tools modules-all deps deps-runtime check kbuild-check unit test test-full demo bench \
	bench-smoke install install-module install-tools uninstall deb dkms-install dkms-remove clean help print-vars \
	debug-kernel test-debug lint-sh

all: module tools

# One rule per kernel: module-<kver> builds build/<kver>/dm-nxd.ko.
define module_rule
.PHONY: module-$(1)
module-$(1):
	$$(call kbuild,$$(BUILD)/$(1),$(1),$(2),NXD_FAULT_INJECT=)
	@# copied only when it changed: a guest may be loading the old copy
	@cmp -s '$$(BUILD)/$(1)/src/dm-nxd.ko' '$$(BUILD)/$(1)/dm-nxd.ko' || \
		cp '$$(BUILD)/$(1)/src/dm-nxd.ko' '$$(BUILD)/$(1)/dm-nxd.ko'
	@echo "  MODULE  build/$(1)/dm-nxd.ko"
	@# with NXD_FAULT_CONTROL=1 (as scripts/test.sh builds), the fault-injection
	@# test build (fault_skip) for the ordering-step control of
	@# tests/vm/test_controls.py; never installed
	$$(if $$(filter 1,$$(NXD_FAULT_CONTROL)),$$(call kbuild,$$(BUILD)/$(1)/fault,$(1),$(2),NXD_FAULT_INJECT=y))
	@if [ '$$(NXD_FAULT_CONTROL)' = 1 ]; then \
		cp '$$(BUILD)/$(1)/fault/src/dm-nxd.ko' '$$(BUILD)/$(1)/fault/dm-nxd.ko' && \
		echo "  MODULE  build/$(1)/fault/dm-nxd.ko (fault injection, tests only)"; fi
	@# the fixtures: the power cut the guest tests load, the HDD emulator
	@# of the benchmark, demos and measurements (tests/fixtures/pcut, bench/hddsim)
	@$$(MAKE) --no-print-directory -s -C '$$(TOP)/tests/fixtures/pcut' KDIR='$(2)' KVER='$(1)' >/dev/null
	@echo "  MODULE  build/$(1)/pcut/dm-pcut.ko"
	@$$(MAKE) --no-print-directory -s -C '$$(TOP)/bench/hddsim' KDIR='$(2)' KVER='$(1)' >/dev/null
	@echo "  MODULE  build/$(1)/hddsim/dm-hddsim.ko"
endef
$(eval $(call module_rule,$(KVER),$(KDIR)))
$(foreach kv,$(filter-out $(KVER),$(TEST_KVERS)),$(eval $(call module_rule,$(kv),$(call kdir_of,$(kv)))))

module: module-$(KVER)

tools:
	@if [ -f tools/Makefile ]; then $(MAKE) -C tools; \
	else echo "tools: tools/Makefile not present, skipped"; fi

modules-all: $(addprefix module-,$(TEST_KVERS))
	@[ -n '$(strip $(TEST_KVERS))' ] || { echo "error: no kernel with headers found (TEST_KVERS empty); run 'make deps'" >&2; exit 1; }

deps:
	$(TOP)/scripts/deps.sh

# What a server needs to build, install and run dm-nxd and nxdctl: no
# test kernel, no qemu, no test tools (scripts/deps.sh --runtime).
deps-runtime:
	$(TOP)/scripts/deps.sh --runtime

# The module's layers (scripts/callgraph.py: no call from a dm-target file
# to one after it in Kbuild, no cycle), W=1 build (any compiler or modpost
# warning fails), sparse (C=2), and checkpatch --strict, on every TEST_KVERS.  Uses build/check/<kver> so the
# normal build's objects stay untouched.
CHECKPATCH ?= $(firstword $(wildcard \
	/usr/src/linux-headers-*/scripts/checkpatch.pl \
	/usr/src/linux-source-*/scripts/checkpatch.pl \
	/usr/local/lib/nxd-checkpatch/scripts/checkpatch.pl))
NXD_SRCS = $(sort $(wildcard $(TOP)/dm-target/*.[ch] $(TOP)/kernel/*.[ch]))

check:
	@[ -n '$(strip $(TEST_KVERS))' ] || { echo "error: TEST_KVERS empty; run 'make deps'" >&2; exit 1; }
	@set -o pipefail; rc=0; mkdir -p '$(BUILD)/check'; \
	if python3 '$(TOP)/scripts/callgraph.py' >'$(BUILD)/check/callgraph.log' 2>&1; \
	then echo "check: call graph: calls go downward only"; \
	else cat '$(BUILD)/check/callgraph.log'; echo "check: call graph: upward call or cycle (scripts/callgraph.py)" >&2; rc=1; fi; \
	for kv in $(TEST_KVERS); do \
		log='$(BUILD)/check/'"$$kv"-w1.log; \
		rm -rf '$(BUILD)/check/'"$$kv"; \
		if ! $(MAKE) --no-print-directory -s kbuild-check CHECK_KVER="$$kv" \
			CHECK_ARGS='W=1' >"$$log" 2>&1; then \
			cat "$$log"; echo "check: $$kv: W=1 build FAILED" >&2; rc=1; continue; fi; \
		if grep -Eiq 'warning:|error:' "$$log"; then \
			grep -Ei -B2 -A3 'warning:|error:' "$$log"; \
			echo "check: $$kv: W=1 warnings (treated as errors)" >&2; rc=1; \
		else echo "check: $$kv: W=1 clean"; fi; \
		slog='$(BUILD)/check/'"$$kv"-sparse.log; \
		if ! command -v sparse >/dev/null; then echo "check: sparse not installed, skipped (make deps)"; continue; fi; \
		if ! $(MAKE) --no-print-directory -s kbuild-check CHECK_KVER="$$kv" \
			CHECK_ARGS='C=2 CHECK=sparse' >"$$slog" 2>&1; then \
			cat "$$slog"; echo "check: $$kv: sparse build FAILED" >&2; rc=1; continue; fi; \
		if grep -Eq '(dm-target|kernel)/[^ :]+:[0-9]+:[0-9]+: (warning|error):' "$$slog"; then \
			grep -E '(dm-target|kernel)/[^ :]+:[0-9]+:[0-9]+: (warning|error):' "$$slog"; \
			echo "check: $$kv: sparse warnings" >&2; rc=1; \
		else echo "check: $$kv: sparse clean"; fi; \
	done; \
	if [ -z '$(NXD_SRCS)' ]; then echo "check: no sources for checkpatch"; \
	elif [ -n '$(CHECKPATCH)' ]; then \
		if (cd '$(BUILD)/check' && '$(CHECKPATCH)' --strict --no-tree --terse --show-types --quiet --no-summary \
			--ignore SPDX_LICENSE_TAG,FILE_PATH_CHANGES \
			-f $(NXD_SRCS)); then echo "check: checkpatch clean"; \
		else echo "check: checkpatch found problems" >&2; rc=1; fi; \
	else echo "check: checkpatch.pl not found, skipped (make deps extracts it from Debian's linux-source)"; fi; \
	exit $$rc

# bash -n and shellcheck on every shell script git tracks (scripts/lint-sh.sh).
lint-sh:
	@'$(TOP)/scripts/lint-sh.sh'

kbuild-check:
	$(call kbuild,$(BUILD)/check/$(CHECK_KVER),$(CHECK_KVER),$(call kdir_of,$(CHECK_KVER)),$(CHECK_ARGS))

# Userspace unit tests (ASan/UBSan) and a bounded run of the libFuzzer
# target over the on-disk parsers (FUZZ_SECONDS, 30 in make test).
FUZZ_SECONDS ?= 30
unit:
	@if [ -f tests/unit/Makefile ]; then $(MAKE) -C tests/unit run && \
		$(MAKE) -C tests/unit fuzz FUZZ_SECONDS=$(FUZZ_SECONDS); \
	else echo "unit: tests/unit/Makefile not present, skipped"; fi

test:
	$(TOP)/scripts/test.sh

# Every guest test on every kernel (make test runs most tests on one kernel
# each and leaves out FULL_ONLY: tests/vm/conftest.py).
test-full:
	NXD_FULL=1 $(TOP)/scripts/test.sh

# Debug kernel (lockdep, KASAN, fault injection) from Debian's linux-source,
# built under build/debug-kernel; test-debug runs the guest suite and a
# fault-injection loop and a few crash-campaign seeds on it
# (TEST_DEBUG_MODE=suite|failslab|campaign|all).
debug-kernel:
	$(TOP)/scripts/debug-kernel.sh

test-debug:
	$(TOP)/scripts/test-debug.sh $(TEST_DEBUG_MODE)

demo:
	@if [ -x scripts/demo.sh ]; then scripts/demo.sh; \
	else echo "demo: scripts/demo.sh not present" >&2; exit 1; fi

# GlusterFS on dm-nxd (not in make test: ~25 min a kernel; scripts/test-pfs.sh).
.PHONY: test-pfs demo-pfs
test-pfs:
	$(TOP)/scripts/test-pfs.sh

demo-pfs:
	$(TOP)/scripts/demo-pfs.sh

bench:
	@if [ -x bench/bench.sh ]; then bench/bench.sh $(BENCH_ARGS); \
	else echo "bench: bench/bench.sh not present" >&2; exit 1; fi

# dm-nxd over dm-pcut (volatile caches, seeded power cuts): SEEDS chains of
# CUTS cuts, one guest per kernel, all at once (scripts/crash-campaign.sh).
.PHONY: crash-campaign
crash-campaign:
	@SEEDS='$(or $(SEEDS),8)' CUTS='$(or $(CUTS),4)' $(TOP)/scripts/crash-campaign.sh

# The same workloads without cuts: live and replayed volume checked exactly.
.PHONY: crash-soak
crash-soak:
	@SOAK=1 SEEDS='$(or $(SEEDS),8)' CUTS='$(or $(CUTS),8)' $(TOP)/scripts/crash-campaign.sh

# The package tests, the DKMS one included (too slow for make test).  One
# guest, of the newest kernel: the DKMS test builds the module inside it for
# every kernel with headers, four builds under TCG; beside a second guest it
# did not finish in 4,500 s, hence the longer limit.
.PHONY: test-packages
test-packages:
	@NXD_FULL=1 NXD_DKMS_TEST=1 NXD_POWERCUT=0 NXD_BENCH_SMOKE=0 NXD_DEMO=0 \
		TEST_KVERS='$(lastword $(TEST_KVERS))' VM_TIMEOUT=$(or $(VM_TIMEOUT),9000) \
		NXD_TESTS=tests/vm/test_admin.py $(TOP)/scripts/test.sh

# The util-linux prober of docs/contrib: blkid and wipefs built with it from
# Debian's util-linux source, then its guest test on every kernel.
.PHONY: test-prober
test-prober:
	$(TOP)/scripts/build-prober.sh
	@NXD_FULL=1 NXD_POWERCUT=0 NXD_REBOOT=0 NXD_BENCH_SMOKE=0 NXD_DEMO=0 NXD_CHECK=0 SKIP_UNIT=1 \
		NXD_TESTS=tests/vm/test_layout.py::test_util_linux_prober $(TOP)/scripts/test.sh

# Event-driven assembly under a real systemd: a Debian root from
# mmdebstrap booted by QEMU, five boots (scripts/test-boot.sh; ~15 min).
.PHONY: test-boot
test-boot: tools
	$(TOP)/scripts/test-boot.sh

bench-smoke:
	@if [ -x bench/bench.sh ]; then BENCH_SMOKE=1 bench/bench.sh $(BENCH_ARGS); \
	else echo "bench-smoke: bench/bench.sh not present" >&2; exit 1; fi

# install = install-module + install-tools (tools/Makefile's install:
# nxdctl, nxd-probe, the udev rules in /usr/lib/udev/rules.d, the man
# pages), after `all`; uninstall undoes both (same KVER and DESTDIR).
MODDIR := $(DESTDIR)/lib/modules/$(KVER)/extra
install: all
	@$(MAKE) --no-print-directory install-module install-tools
	@echo "installed dm-nxd for $(KVER)"

install-module:
	@[ -f '$(BUILD)/$(KVER)/dm-nxd.ko' ] || { echo "error: build/$(KVER)/dm-nxd.ko not built (make module KVER=$(KVER))" >&2; exit 1; }
	install -D -m 0644 '$(BUILD)/$(KVER)/dm-nxd.ko' '$(MODDIR)/dm-nxd.ko'
	@if [ -z '$(DESTDIR)' ]; then depmod -a '$(KVER)'; \
	else depmod -a -b '$(DESTDIR)' '$(KVER)' 2>/dev/null || true; fi

install-tools:
	@$(MAKE) --no-print-directory -C tools install DESTDIR='$(DESTDIR)'
	@if [ -z '$(DESTDIR)' ] && command -v udevadm >/dev/null; then udevadm control --reload 2>/dev/null || true; fi

uninstall:
	rm -f '$(MODDIR)/dm-nxd.ko'
	@$(MAKE) --no-print-directory -C tools uninstall DESTDIR='$(DESTDIR)'
	@if [ -z '$(DESTDIR)' ]; then depmod -a '$(KVER)' 2>/dev/null || true; \
	  if command -v udevadm >/dev/null; then udevadm control --reload 2>/dev/null || true; fi; \
	else depmod -a -b '$(DESTDIR)' '$(KVER)' 2>/dev/null || true; fi
	@echo "uninstalled dm-nxd for $(KVER) (DKMS: make dkms-remove)"

# Debian packages (scripts/mkdeb.sh: dpkg-buildpackage on debian/ in a
# copy of the tree): dm-nxd-dkms and nxdctl in build/deb.
deb:
	$(TOP)/scripts/mkdeb.sh

DKMS_SRC := /usr/src/$(DKMS_NAME)-$(DKMS_VERSION)
dkms-install:
	@[ -n '$(DKMS_VERSION)' ] || { echo "error: no PACKAGE_VERSION in dkms.conf" >&2; exit 1; }
	-dkms remove -m $(DKMS_NAME) -v $(DKMS_VERSION) --all >/dev/null 2>&1
	rm -rf '$(DKMS_SRC)'
	mkdir -p '$(DKMS_SRC)'
	rsync -a --include='/dkms.conf' $(RSYNC_FILTER) '$(TOP)/' '$(DKMS_SRC)/'
	dkms add -m $(DKMS_NAME) -v $(DKMS_VERSION)
	dkms build -m $(DKMS_NAME) -v $(DKMS_VERSION) -k '$(KVER)'
	dkms install -m $(DKMS_NAME) -v $(DKMS_VERSION) -k '$(KVER)'

dkms-remove:
	-dkms remove -m $(DKMS_NAME) -v $(DKMS_VERSION) --all
	rm -rf '$(DKMS_SRC)'

clean:
	rm -rf '$(BUILD)'
	@if [ -f tools/Makefile ]; then $(MAKE) -C tools clean; fi
	@if [ -f tests/unit/Makefile ]; then $(MAKE) -C tests/unit clean; fi

print-vars:
	@echo "KVER=$(KVER)"
	@echo "KDIR=$(KDIR)"
	@echo "TEST_KVERS=$(TEST_KVERS)"
	@echo "CHECKPATCH=$(or $(CHECKPATCH),<none>)"
	@echo "DKMS_VERSION=$(DKMS_VERSION)"

help:
	@echo "targets: all modules-all deps check lint-sh unit test test-full test-packages test-prober demo bench bench-smoke"
	@echo "         debug-kernel test-debug test-pfs demo-pfs"
	@echo "         install uninstall deb deps-runtime dkms-install dkms-remove clean print-vars"
	@$(MAKE) --no-print-directory print-vars
