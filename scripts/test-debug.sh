#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make test-debug`: run dm-nxd on the debug kernel (scripts/debug-kernel.sh:
# lockdep, KASAN, DEBUG_ATOMIC_SLEEP, DEBUG_LIST, hung-task detection, fault
# injection).  Builds the kernel if needed, builds dm-nxd.ko against it, then
# boots it (scripts/vm-run.sh with VM_KERNEL=<build tree>) up to three times:
#
#   suite     the guest pytest suite (pytest -v) on a subset of the CI
#             files that fits a TCG + KASAN guest (DEBUG_SUITE below;
#             NXD_TESTS overrides it)
#   failslab  a shell loop in the guest (this script, --guest-failslab) that
#             makes exactly one kernel allocation fail (fail-nth, through
#             the nxd-failnth helper) inside the table load + resume that
#             formats a blank SSD, then one that replays a log; fails 5 %
#             of the allocations of the volume's threads and of dd during
#             I/O (failslab, fail_page_alloc); and fails bios to the SSD and
#             the HDD (fail_make_request); see guest_failslab below.  A
#             broken harness (9p root) ends it with "HARNESS ERROR", exit 3
#   campaign  the dm-pcut crash campaign (tests/vm/test_crash_pcut.py, as
#             make crash-campaign) on a few seeds: NXD_DEBUG_SEEDS (1-3),
#             NXD_DEBUG_CUTS (3) cuts each, within NXD_DEBUG_MAX_N (1500)
#             group ops; seeds 1 and 3 also cut a format, seed 3 a grow
#
# After each boot the guest's kernel log is searched for lockdep, KASAN,
# BUG/WARNING, sleeping-in-atomic and call traces; any hit fails the run and
# is saved to build/logs/<release>-<mode>-splats.txt.
#
# Usage: scripts/test-debug.sh [suite|failslab|campaign|all]   (default all)
#
# Environment:
#   NXD_TESTS          guest tests for `suite` (default: DEBUG_SUITE below)
#   NXD_TEST_WATCHDOG  per-test watchdog in the guest (default here 2400 s)
#   TEST_FILTER, PYTEST_ARGS   as for scripts/test.sh
#   NXD_FAILSLAB_ITERS failure points per constructor sweep (default 12;
#                      all of them if the constructor has fewer)
#   NXD_FAILSLAB_WRITES logged 4 KiB writes the replay sweep replays (60)
#   NXD_FAILSLAB_IO    I/O rounds with failures (default 6)
#                      (40/100/20 did not finish in 2400 s on the shared
#                      2-core host; 12/60/6 took 655 s)
#   VM_TIMEOUT         per boot (default 10800: KASAN + lockdep are slow,
#                      under TCG very slow)
#   NXD_LOGS, VM_MEMORY, VM_CPUS, NXD_KVM: see scripts/vm-run.sh
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$here/scripts/lib.sh"
cd "$here" || exit 1

# Kernel-log lines that are a finding (not a bare "lockdep": lockdep_*
# frames show up in the stacks of injected failures; lockdep's own reports
# start with WARNING:/BUG: or DEBUG_LOCKS_WARN_ON).  "Call Trace" alone also catches
# hung-task reports and WARN_ONs; the allocation-failure reports that fault
# injection itself provokes (warn_alloc) are filtered out by splat_filter.
SPLAT_RE='BUG:|WARNING:|KASAN|DEBUG_LOCKS_WARN_ON|lockdep is turned off|circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|sleeping function called from invalid context|blocked for more than|general protection|Oops|Call Trace|list_(add|del) corruption|UBSAN'

# splat_filter FILE: print the finding lines of kernel log FILE.  A "Call
# Trace:" within 8 lines after a warn_alloc header (page allocation
# failure, vmalloc error) or after fault injection's own "forcing a
# failure" (verbose 2: where it failed), or after the slab core's
# "kmem_cache_create(...) failed with error -12" (its own dump_stack when
# the injected failure hits a cache creation, e.g. dm's bioset_init)
# reports an injected failure, not a bug;
# the boot banner "RCU lockdep checking is enabled" is not a finding.
splat_filter() {
	awk -v re="$SPLAT_RE" '
		/page allocation failure:|vmalloc error:|warn_alloc|FAULT_INJECTION: forcing a failure|kmem_cache_create(_usercopy)?\(.*\) failed with error/ { benign = NR }
		/RCU lockdep checking is enabled/ { next }
		$0 ~ re {
			if ($0 ~ /Call Trace/ && benign && NR - benign <= 8) next
			print
		}' "$1"
}

# ---------------------------------------------------------------- guest ---
# Runs inside the debug-kernel guest (vm-run.sh runs it as root in the repo).
#
# Where the injected failures land.  The guest's root file system is 9p:
# an allocation failure inside the 9p client of any task (an exec, a page
# fault on a 9p-backed binary, a lookup) can break the mount for every
# later exec (the first attempts ended in `/usr/bin/sleep: Invalid
# argument`, `libc.so.6: ... Invalid argument`: that tests 9p, not
# dm-nxd).  So:
#  * the constructor sweeps use no task marking at all: nxd-failnth (C,
#    built on the host by the host part below) writes N to its own
#    /proc/thread-self/fail-nth right before DM_TABLE_LOAD and reads it
#    back and clears it right after the resume; with mlockall() nothing of
#    its own faults in between, so the N-th fault-injection point *inside
#    those two ioctls* fails, exactly once, and nothing else;
#  * the I/O phase marks (make-it-fail) only the volume's nxd-* kernel
#    threads and dd copies on a tmpfs, each after its exec, never the
#    shell; the marks and probabilities are reset right after;
#  * after each step a canary exec from the 9p root must still work;
#    if it does not, the run stops with "failslab: HARNESS ERROR" (exit 3),
#    which the host reports as a harness error, not a finding.
guest_failslab() {
	set -u
	local iters=${NXD_FAILSLAB_ITERS:-12} io_rounds=${NXD_FAILSLAB_IO:-6}
	local rel hdd=/dev/ram0 ssd=/dev/ram1 len dbg=/sys/kernel/debug
	local bad=0 ref
	rel=$(uname -r)
	log() { echo "failslab: $*"; echo "nxd-test: failslab: $*" >/dev/kmsg; }
	# harness_ok WHERE: the 9p root still runs programs; else stop.
	harness_ok() {
		if ! /usr/bin/true 2>/dev/null || [ "$(/usr/bin/cat /proc/sys/kernel/ostype 2>/dev/null)" != Linux ]; then
			log "HARNESS ERROR after $1: the guest's 9p root no longer runs programs (not a dm-nxd finding)"
			exit 3
		fi
	}
	mountpoint -q $dbg || mount -t debugfs none $dbg
	# udev is slow under TCG with KASAN and lockdep (each dmsetup waited
	# for it half a minute): libdevmapper manages /dev/mapper itself.
	udevadm control --exit 2>/dev/null
	export DM_DISABLE_UDEV=1
	# The marked dd processes and nxd-failnth run from a tmpfs, with their
	# libraries: no 9p page faults in a task that can be failed.
	local bin=/tmp/nxd-failslab-bin f l fn=build/debug-tools/nxd-failnth
	[ -x $fn ] || { log "HARNESS ERROR: no $fn (built by the host part)"; exit 3; }
	mkdir -p $bin
	mountpoint -q $bin || mount -t tmpfs nxdbin $bin
	for f in /usr/bin/dd $fn; do
		cp "$f" $bin/
		ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' |
			while read -r l; do cp -L "$l" $bin/; done
	done
	local ld
	ld=$(find "$bin" -maxdepth 1 -name 'ld-linux*' | sort | head -n1)
	DD="$ld --library-path $bin $bin/dd"
	FN="$ld --library-path $bin $bin/nxd-failnth"
	modprobe dm-mod
	modprobe libcrc32c || true
	grep -qw dm_nxd /proc/modules || insmod "build/$rel/dm-nxd.ko" || { log "insmod failed"; return 1; }
	grep -qw brd /proc/modules && rmmod brd
	modprobe brd rd_nr=2 rd_size=$((32 * 1024)) max_part=0 || return 1
	len=$(( $(blockdev --getsz $hdd) / 2048 * 2048 - 2048 ))
	local table="0 $len nxd $hdd $ssd"
	local fifo=/tmp/nxd-failslab.fifo
	# Fault-injection knobs common to both allocators: probability 0 (the
	# sweeps use fail-nth, which ignores it), only marked tasks, sleeping
	# (GFP_KERNEL) and highmem allocations and order 0 too (else fail-nth
	# would not count them), the stack of each injected failure (verbose
	# 2: where it failed).
	for a in failslab fail_page_alloc; do
		echo 1 >$dbg/$a/task-filter
		echo N >$dbg/$a/ignore-gfp-wait
		echo 2 >$dbg/$a/verbose
		echo 1 >$dbg/$a/interval
		echo 0 >$dbg/$a/probability
		echo 0 >$dbg/$a/space
		echo -1 >$dbg/$a/times
	done
	echo N >$dbg/fail_page_alloc/ignore-gfp-highmem
	echo 0 >$dbg/fail_page_alloc/min-order
	harness_ok setup

	# wipe: zero the first and last 4 MiB of both devices (superblock,
	# label); zeroing all of them costs a minute a time under TCG.
	wipe() {
		local d mb
		for d in $hdd $ssd; do
			mb=$(( $(blockdev --getsz "$d") / 2048 ))
			dd if=/dev/zero of="$d" bs=1M count=4 oflag=direct status=none
			dd if=/dev/zero of="$d" bs=1M count=4 seek=$((mb - 4)) oflag=direct status=none
		done
	}
	vremove() {
		local i
		for i in 1 2 3 4 5; do
			dmsetup info v >/dev/null 2>&1 || return 0
			dmsetup remove --retry v >/dev/null 2>&1 && return 0
			sleep 1
		done
		log "cannot remove v"; return 1
	}
	vwait() {
		local n
		for n in $(seq 100); do [ -b /dev/mapper/v ] && return 0; sleep 0.1; done
		log "no /dev/mapper/v"; return 1
	}
	vsum() { vwait && md5sum </dev/mapper/v | cut -d' ' -f1; }
	# rwcheck MIB: 1 MiB of /tmp/nxd-io.pat written at MIB and read back.
	rwcheck() {
		dd if=/tmp/nxd-io.pat of=/dev/mapper/v bs=1M seek="$1" oflag=direct status=none &&
		cmp -s -n 1048576 /tmp/nxd-io.pat <(dd if=/dev/mapper/v bs=1M skip="$1" count=1 iflag=direct status=none)
	}
	# mark_when_blocked PID: once PID has exec'd (it is no longer bash)
	# and sleeps in read or openat (on a fifo), let fault injection hit it.
	mark_when_blocked() {
		local n nr me
		me=$(readlink /proc/$$/exe)
		for n in $(seq 200); do
			read -r nr _ <"/proc/$1/syscall" 2>/dev/null || nr=
			case $nr in 0|257) [ "$(readlink "/proc/$1/exe" 2>/dev/null)" != "$me" ] && break ;; esac
			sleep 0.05
		done
		echo 1 >"/proc/$1/make-it-fail" 2>/dev/null
	}
	# failnth NTH: nxd-failnth create v with the NTH fault-injection point
	# of the table load + resume failed (0: none); sets fn_out (its
	# "load=... resume=... left=... removed=..." line), fn_rc (124: hung).
	fn_out='' fn_rc=0
	failnth() {
		# shellcheck disable=SC2086  # $FN: the loader, its options and nxd-failnth
		fn_out=$(timeout -s KILL 600 $FN create v "$len" nxd "$hdd $ssd" "$1" 2>/tmp/nxd-failslab.err)
		fn_rc=$?
		[ $fn_rc = 137 ] && fn_rc=124
		return 0
	}
	field() { sed -n "s/.*\\<$1=\\([^ ]*\\).*/\\1/p" <<<"$fn_out"; }
	# sweep NAME SETUP: count the fault-injection points of a clean table
	# load + resume, then fail each of ITERS of them (all of them if there
	# are fewer), spread evenly, one per constructor run.
	sweep() {
		local name=$1 setup=$2 total left i nth prev=0 nerr=0 nok=0 nmiss=0 hang=0 after load res errs=
		local big=1000000
		$setup; failnth $big
		left=$(field left)
		if [ $fn_rc != 0 ] || [ -z "$left" ]; then
			log "$name: calibration create failed (rc $fn_rc): $fn_out $(cat /tmp/nxd-failslab.err)"; bad=1; return
		fi
		total=$((big - left))
		if [ -n "${ref:-}" ]; then
			dmsetup mknodes v
			[ "$(vsum)" = "$ref" ] || { log "$name: calibration: data differ"; bad=1; }
		fi
		$FN remove v || { bad=1; return; }
		harness_ok "$name calibration"
		log "$name: a clean table load + resume passes $total fault-injection points (slab and page allocations)"
		local n=$iters; [ "$total" -lt "$n" ] && n=$total
		for i in $(seq 0 $((n - 1))); do
			nth=$(( n > 1 ? 1 + (total - 1) * i / (n - 1) : 1 ))
			[ "$nth" = "$prev" ] && continue
			prev=$nth
			$setup
			failnth "$nth"
			load=$(field load); res=$(field resume); left=$(field left)
			if [ $fn_rc = 124 ]; then
				log "$name: fail point $nth/$total: the table load or resume HUNG"; hang=1; bad=1; break
			elif [ $fn_rc = 2 ] || [ -z "$load" ]; then
				log "HARNESS ERROR: nxd-failnth (rc $fn_rc): $fn_out $(cat /tmp/nxd-failslab.err)"; exit 3
			fi
			if [ "$left" != 0 ]; then
				nmiss=$((nmiss + 1))
				log "$name: fail point $nth/$total: not reached ($left left): load=$load resume=$res"
				[ $fn_rc = 0 ] || { log "$name: fail point $nth/$total: failed without an injected failure"; bad=1; }
			elif [ $fn_rc = 0 ]; then
				nok=$((nok + 1))
				log "$name: fail point $nth/$total: injected, the volume came up anyway"
			else
				nerr=$((nerr + 1)); errs+=" load=$load/resume=$res"
				log "$name: fail point $nth/$total: injected, load=$load resume=$res"
			fi
			[ $fn_rc = 0 ] && { $FN remove v || { bad=1; break; }; }
			grep -q "removed=0" <<<"$fn_out" && [ $fn_rc != 0 ] && { log "$name: fail point $nth: device not removed after the failure"; bad=1; }
			harness_ok "$name fail point $nth"
			# A clean constructor must still work, with the same data.
			if ! echo "$table" | dmsetup create v >/tmp/nxd-failslab.out 2>&1; then
				log "$name: fail point $nth: clean create after the failure FAILED: $(tail -n1 /tmp/nxd-failslab.out)"
				bad=1; continue
			fi
			if [ -n "${ref:-}" ]; then
				after=$(vsum)
				[ "$after" = "$ref" ] || { log "$name: fail point $nth: data differ after the failure"; bad=1; }
			fi
			vremove || { bad=1; break; }
		done
		errs=$(tr ' ' '\n' <<<"$errs" | sed '/^$/d' | sort | uniq -c | awk '{ printf "%s%s x%s", s, $2, $1; s = ", " }')
		log "$name: $((nerr + nok + nmiss)) of $total fail points tried: $nerr create(s) failed cleanly (${errs:-none}), $nok came up anyway, $nmiss not reached, hang=$hang"
	}

	# 1. Constructor formatting a blank SSD (and labelling the HDD).
	ref=
	# shellcheck disable=SC2317  # called by sweep
	setup_blank() { wipe; }
	sweep format setup_blank

	# 2. Constructor replaying a log: logged small writes, volume removed
	# with the log full, each constructor replays it.
	wipe
	if ! { echo "$table" | dmsetup create v && vwait; }; then log "seed create failed"; return 1; fi
	dmsetup message v 0 pause_destage || log "pause_destage refused"
	local off
	for off in $(seq 0 37 $((37 * ${NXD_FAILSLAB_WRITES:-60}))); do
		dd if=/dev/urandom of=/dev/mapper/v bs=4k count=1 seek="$off" oflag=direct status=none
	done
	ref=$(vsum)
	vremove || return 1
	# shellcheck disable=SC2317  # called by sweep
	setup_none() { :; }
	sweep replay setup_none
	ref=

	# 3. I/O path: the writer and destager threads and the dd processes
	# doing I/O are marked (each dd once it has been exec'd and waits on
	# a fifo); failslab and fail_page_alloc fail 5% of their allocations.
	echo "$table" | dmsetup create v || { log "create for I/O failed"; return 1; }
	vwait
	local r p eio=0 io=0 pid marked=
	for p in /proc/[0-9]*; do
		case $(cat "$p/comm" 2>/dev/null) in nxd-*) echo 1 >"$p/make-it-fail"; marked+=" $p"; log "marked $(cat "$p/comm")";; esac
	done
	for a in failslab fail_page_alloc; do
		echo 5 >$dbg/$a/probability
		echo 1 >$dbg/$a/verbose
	done
	rm -f $fifo; mkfifo $fifo
	for r in $(seq "$io_rounds"); do
		io=$((io + 3))
		$DD if=$fifo of=/dev/mapper/v bs=4k seek=$(( (r * 97) % 7000 )) iflag=fullblock oflag=direct status=none 2>/dev/null &
		pid=$!; mark_when_blocked $pid
		dd if=/dev/urandom bs=4k count=64 status=none >$fifo
		wait $pid || eio=$((eio + 1))
		$DD if=$fifo of=/dev/mapper/v bs=1M seek=$(( r % 24 )) iflag=fullblock oflag=direct status=none 2>/dev/null &
		pid=$!; mark_when_blocked $pid
		dd if=/dev/urandom bs=1M count=2 status=none >$fifo
		wait $pid || eio=$((eio + 1))
		$DD if=/dev/mapper/v of=$fifo bs=64k count=256 iflag=direct status=none 2>/dev/null &
		pid=$!; mark_when_blocked $pid
		cat $fifo >/dev/null
		wait $pid || eio=$((eio + 1))
		harness_ok "I/O round $r"
	done
	for a in failslab fail_page_alloc; do echo 0 >$dbg/$a/probability; done
	for p in $marked; do echo 0 >"$p/make-it-fail" 2>/dev/null; done
	log "io: $io marked dd jobs under 5% allocation failures, $eio ended with an error"
	dd if=/dev/urandom of=/tmp/nxd-io.pat bs=1M count=1 status=none
	if rwcheck 3; then log "io: write/read-back on the same volume after the failures: ok"
	else log "io: write/read-back on the same volume after the failures: failed (status: $(dmsetup status v))"; fi
	dmsetup status v | sed 's/^/failslab: status: /'
	vremove || return 1
	if echo "$table" | dmsetup create v && vwait && rwcheck 7; then
		log "io: re-created volume works"
	else
		log "io: re-created volume FAILED"; bad=1
	fi
	vremove || return 1

	# 4. fail_make_request: bios to the SSD, then to the HDD, fail (10%,
	# at most 20), under a writer; the volume must report errors, not
	# crash, and a fresh constructor must work afterwards.  Only the brd
	# disk is marked (/sys/block/ramN/make-it-fail): no task filter.
	local fmr=$dbg/fail_make_request dev
	echo 0 >$fmr/task-filter; echo 1 >$fmr/verbose; echo 0 >$fmr/space; echo 1 >$fmr/interval
	for dev in ram1 ram0; do
		if ! { echo "$table" | dmsetup create v && vwait; }; then log "fail_make_request: create failed"; bad=1; break; fi
		echo 10 >$fmr/probability; echo 20 >$fmr/times
		echo 1 >/sys/block/$dev/make-it-fail
		eio=0
		for r in $(seq 10); do
			dd if=/dev/urandom of=/dev/mapper/v bs=4k count=64 seek=$((r * 131)) oflag=direct status=none 2>/dev/null || eio=$((eio + 1))
			dd if=/dev/urandom of=/dev/mapper/v bs=1M count=2 seek=$((r * 2)) oflag=direct status=none 2>/dev/null || eio=$((eio + 1))
			dd if=/dev/mapper/v of=/dev/null bs=64k count=256 iflag=direct status=none 2>/dev/null || eio=$((eio + 1))
		done
		sync
		echo 0 >/sys/block/$dev/make-it-fail; echo 0 >$fmr/probability
		harness_ok "fail_make_request on $dev"
		log "fail_make_request on $dev: $((20 - $(cat $fmr/times))) bio(s) failed, $eio of 30 dd jobs ended with an error; status: $(dmsetup status v)"
		vremove || { bad=1; break; }
		if echo "$table" | dmsetup create v && vwait; then
			rwcheck 5 || { log "fail_make_request on $dev: I/O after re-create FAILED"; bad=1; }
			vremove || bad=1
		else
			log "fail_make_request on $dev: re-create FAILED"; bad=1
		fi
	done

	rmmod dm_nxd || { log "rmmod dm_nxd failed"; bad=1; }
	rmmod brd 2>/dev/null
	if [ $bad = 0 ]; then log "PASS"; else log "FAIL"; fi
	return $bad
}

if [ "${1:-}" = --guest-failslab ]; then
	[ "${NXD_IN_VM:-}" = 1 ] || { echo "--guest-failslab runs in the test guest only" >&2; exit 2; }
	guest_failslab
	exit $?
fi

# ----------------------------------------------------------------- host ---
mode=${1:-all}
case $mode in suite|failslab|campaign|all) ;; *) echo "usage: $0 [suite|failslab|campaign|all]" >&2; exit 2 ;; esac
logs=${NXD_LOGS:-$here/build/logs}
case $logs in /*) ;; *) logs=$here/$logs ;; esac
case $logs in "$here"/build/*) ;; *) echo "test-debug: NXD_LOGS must be under build/" >&2; exit 2 ;; esac
export NXD_LOGS=$logs
rel_logs=${logs#"$here"/}
MAKE=${MAKE:-make}
say() { echo "test-debug: $*"; }
t0=$(date +%s)
mkdir -p "$logs"

out=$(scripts/debug-kernel.sh | tail -n2) || { say "debug kernel build FAILED"; exit 1; }
kver=$(sed -n 's/^release //p' <<<"$out")
tree=$(sed -n 's/^tree //p' <<<"$out")
if [ -z "$kver" ] || [ ! -d "$tree" ]; then say "debug-kernel.sh gave no release/tree"; exit 1; fi
say "debug kernel $kver ($tree)"
nice -n 19 "$MAKE" --no-print-directory module KDIR="$tree" JOBS=2 || { say "dm-nxd build against $kver FAILED"; exit 1; }
nice -n 19 "$MAKE" --no-print-directory tools || { say "tools build FAILED"; exit 1; }

# nxd-failnth, the guest's fail-nth driver for the constructor sweeps (see
# "Where the injected failures land" above): built on the host (the guest
# runs the host's root file system, so the same libc), into build/.
build_failnth() {
	local d=$here/build/debug-tools
	mkdir -p "$d"
	cat >"$d/nxd-failnth.c" <<'CEOF'
/* nxd-failnth: device-mapper ioctls with exactly one injected failure
 * (/proc/thread-self/fail-nth) armed only around DM_TABLE_LOAD and the
 * resume of a new device.  Built and used by scripts/test-debug.sh.
 *
 *   nxd-failnth create NAME SECTORS TARGET PARAMS NTH
 *       DM_DEV_CREATE NAME (unarmed); fail-nth := NTH; DM_TABLE_LOAD
 *       (0 SECTORS TARGET PARAMS); if it worked, DM_DEV_SUSPEND (resume);
 *       read back and clear fail-nth.  NTH 0: no failure.  If the load or
 *       the resume failed, the device is removed (unarmed).  Prints
 *         load=ERR resume=ERR left=N removed=0|1
 *       (ERR 0 or an errno name; left: fail-nth after the window, 0 when
 *       the NTH-th fault-injection point was reached and failed).  Exit 0
 *       if the device is active, 1 if a step failed, 2 on a usage or
 *       harness error.
 *   nxd-failnth remove NAME
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/dm-ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

static union { struct dm_ioctl io; char b[16384]; } buf;
static int ctl, nth_fd;

static void init(const char *name, unsigned flags)
{
	memset(&buf, 0, sizeof(buf));
	buf.io.version[0] = DM_VERSION_MAJOR;
	buf.io.version[1] = 0;
	buf.io.version[2] = 0;
	buf.io.data_size = sizeof(buf);
	buf.io.data_start = sizeof(struct dm_ioctl);
	buf.io.flags = flags;
	snprintf(buf.io.name, sizeof(buf.io.name), "%s", name);
}

static int dm(unsigned long cmd)
{
	return ioctl(ctl, cmd, &buf) ? errno : 0;
}

static void arm(unsigned n)
{
	char s[16];
	int len = snprintf(s, sizeof(s), "%u", n);
	if (pwrite(nth_fd, s, len, 0) != len) {
		perror("nxd-failnth: write fail-nth");
		exit(2);
	}
}

static unsigned disarm(void)
{
	char s[16] = "";
	ssize_t r = pread(nth_fd, s, sizeof(s) - 1, 0);
	arm(0);
	return r > 0 ? strtoul(s, NULL, 10) : ~0u;
}

static const char *err(int e)
{
	static char s[4][32];
	static int i;
	if (!e)
		return "0";
	i = (i + 1) % 4;
	snprintf(s[i], sizeof(s[i]), "%s", strerrorname_np(e) ? strerrorname_np(e) : "?");
	return s[i];
}

static int rm(const char *name)
{
	int e = 0, i;
	for (i = 0; i < 20; i++) {
		init(name, 0);
		e = dm(DM_DEV_REMOVE);
		if (e != EBUSY)
			break;
		usleep(250000);
	}
	return e == ENXIO ? 0 : e;
}

int main(int argc, char **argv)
{
	int le = 0, re = -1, removed = 0;
	unsigned nth, left = 0;
	struct dm_target_spec *sp;

	ctl = open("/dev/mapper/control", O_RDWR);
	if (ctl < 0) {
		perror("nxd-failnth: /dev/mapper/control");
		return 2;
	}
	if (argc == 3 && !strcmp(argv[1], "remove")) {
		int e = rm(argv[2]);
		if (e)
			fprintf(stderr, "nxd-failnth: remove %s: %s\n", argv[2], err(e));
		return e ? 1 : 0;
	}
	if (argc != 7 || strcmp(argv[1], "create")) {
		fprintf(stderr, "usage: nxd-failnth create NAME SECTORS TARGET PARAMS NTH | remove NAME\n");
		return 2;
	}
	nth = strtoul(argv[6], NULL, 0);
	nth_fd = open("/proc/thread-self/fail-nth", O_RDWR);
	if (nth_fd < 0) {
		perror("nxd-failnth: /proc/thread-self/fail-nth");
		return 2;
	}
	/* No page fault inside the window: it would consume the count. */
	if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
		perror("nxd-failnth: mlockall");
		return 2;
	}
	init(argv[2], 0);
	if ((le = dm(DM_DEV_CREATE))) {
		fprintf(stderr, "nxd-failnth: DM_DEV_CREATE %s: %s\n", argv[2], err(le));
		return 2;
	}
	/* the table */
	init(argv[2], 0);
	buf.io.target_count = 1;
	sp = (struct dm_target_spec *)(buf.b + sizeof(struct dm_ioctl));
	sp->sector_start = 0;
	sp->length = strtoull(argv[3], NULL, 0);
	snprintf(sp->target_type, sizeof(sp->target_type), "%s", argv[4]);
	snprintf((char *)(sp + 1), sizeof(buf) - sizeof(struct dm_ioctl) - sizeof(*sp), "%s", argv[5]);
	sp->next = 0;
	{
		unsigned long cmd_load = DM_TABLE_LOAD, cmd_resume = DM_DEV_SUSPEND;
		if (nth)
			arm(nth);
		le = dm(cmd_load);
		if (!le) {
			init(argv[2], 0);	/* flags 0: resume */
			re = dm(cmd_resume);
		}
		if (nth)
			left = disarm();
	}
	if (le || re) {
		int e = rm(argv[2]);
		removed = !e;
		if (e)
			fprintf(stderr, "nxd-failnth: remove %s after the failure: %s\n", argv[2], err(e));
	}
	printf("load=%s resume=%s left=%u removed=%d\n", err(le), re < 0 ? "-" : err(re), left, removed);
	fflush(stdout);
	return (le || re) ? 1 : 0;
}
CEOF
	cc -O2 -Wall -Wextra -o "$d/nxd-failnth" "$d/nxd-failnth.c"
}
if [ "$mode" = failslab ] || [ "$mode" = all ]; then
	build_failnth || { say "nxd-failnth build FAILED"; exit 1; }
fi

if [ -z "${NXD_KVM:-}" ]; then
	# KVM is a property of the host: probe it with a stock kernel (quick).
	stock=$(nxd_default_kver) || exit 1
	NXD_KVM=$(scripts/vm-run.sh --kvm-probe "$stock")
fi
export NXD_KVM VM_KERNEL=$tree VM_TIMEOUT=${VM_TIMEOUT:-10800}
# kasan_multi_shot: KASAN reports every bug, not only the first one.
export VM_APPEND=${VM_APPEND:-log_buf_len=16M kasan_multi_shot}
# A boot whose kernel reported a bug before the guest command (seen: an
# intermittent KASAN wild-memory-access in rcu_is_watching during CPU
# bring-up under TCG) has lockdep switched off by the taint: the guest
# gives up at once (exit 75) and the host boots again, up to
# NXD_DEBUG_BOOTS (3) times.
boot_guard='if dmesg | grep -qE "BUG:|WARNING:|Disabling lock debugging"; then echo "test-debug: kernel report before the tests, rebooting"; dmesg | grep -m3 -E "BUG:|WARNING:"; exit 75; fi; '

# boot MODE CMD: one guest; 0 if CMD passed and the kernel log is clean.
declare -A result
fail=0
boot() {
	local m=$1 cmd=$2 rc line splats
	local console=$logs/$kver-$m-console.log dmesg=$logs/$kver-$m-dmesg.txt
	rm -f "$console" "$dmesg" "$logs/$kver-$m-splats.txt"
	say "$m: $cmd"
	local attempt
	for attempt in $(seq 1 "${NXD_DEBUG_BOOTS:-3}"); do
		VM_CONSOLE=$console VM_DMESG=$dmesg scripts/vm-run.sh "$kver" "$boot_guard$cmd" 2>&1 | tee "$logs/$kver-$m.log"
		rc=${PIPESTATUS[0]}
		[ "$rc" = 75 ] || break
		say "$m: boot $attempt had a kernel report before the tests; booting again"
		cp "$console" "$logs/$kver-$m-console-boot$attempt.log"
	done
	# The dmesg the guest saved, else (crash, timeout) the console.
	if [ -s "$dmesg" ]; then splats=$(splat_filter "$dmesg"); else splats=$(splat_filter "$console"); fi
	if [ -n "$splats" ]; then
		{ echo "# $kver $m: kernel log lines matching the splat patterns"; echo "$splats"
		  echo; echo "# full kernel log: ${dmesg#"$here"/}"; } >"$logs/$kver-$m-splats.txt"
		say "$m: kernel log shows $(wc -l <<<"$splats") problem line(s); first:"
		head -n 15 <<<"$splats" | sed 's/^/  | /'
	fi
	if [ "$m" = suite ] || [ "$m" = campaign ]; then
		# The console too: a guest whose init fell back to the serial
		# console prints there (colours and all), not to vng's stdout.
		line=$(cat "$logs/$kver-$m.log" "$console" | tr -d '\r' | sed 's/\x1b\[[0-9;]*m//g' |
			grep -E '^(=+ )?([0-9]+ (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)(, )?)+.* in [0-9.]+s|^(=+ )?no tests ran' |
			tail -n1 | sed -E 's/^=+ //; s/ =+$//')
		# No summary (timeout, guest died): what the -v lines say.
		[ -n "$line" ] || line="no pytest summary; $(grep -cE '::.* PASSED' "$logs/$kver-$m.log") passed, $(grep -cE '::.* (FAILED|ERROR)' "$logs/$kver-$m.log") failed/error before the end"
	else
		line=$(grep -E '^failslab: (PASS|FAIL|HARNESS ERROR)' "$logs/$kver-$m.log" | tail -n1)
		line=${line:-no failslab verdict}
		# exit 3: the harness broke (9p root, helper), not dm-nxd; it
		# still fails the run, but says so.
		[ "$rc" = 3 ] && line="HARNESS ERROR, not a finding: $line"
	fi
	line+=" (guest exit $rc${splats:+, $(wc -l <<<"$splats") splat line(s): $rel_logs/$kver-$m-splats.txt})"
	# A report before the guest command started is the kernel's own (seen:
	# an intermittent KASAN wild-memory-access in rcu_is_watching from an
	# interrupt during cpu_detect at ~4 s under TCG), not dm-nxd's; and any
	# taint-adding report switches lockdep off for the rest of the boot,
	# which the summary must say.
	local start_ln boot_bad off
	start_ln=$(grep -n -m1 'virtme-ng-init: starting script' "$console" | cut -d: -f1)
	if [ -n "$start_ln" ]; then
		boot_bad=$(head -n "$start_ln" "$console" | grep -v '^#' | grep -m1 -E 'BUG:|WARNING:' | sed 's/^\[ *[0-9.]*\] //')
		[ -n "$boot_bad" ] && line+=" [boot-time report before the tests, not dm-nxd: $boot_bad]"
	fi
	off=$(grep -m1 'Disabling lock debugging due to kernel taint' "$console" | sed -E 's/^\[ *([0-9.]+)\].*/\1/')
	[ -n "$off" ] && line+=" [LOCKDEP OFF from ${off}s: lock debugging disabled by a taint]"
	result[$m]=$line
	[ "$rc" = 0 ] && [ -z "$splats" ] || fail=1
}

# The default `suite` selection.  The whole CI list (scripts/test.sh) is
# out of reach under TCG with KASAN and lockdep: the guest spends ~6 min in
# udev's coldplug and ~3 min starting pytest, and each test then takes 1 to
# 12 min (test_differential_default: 12.5 min); the first attempt did 13
# tests in 50 min.  This subset exercises the paths where a locking,
# lifetime or allocation bug would show: module load, the no-loss ordering
# tests (suspend, concurrent table destruction, flush failures over
# dm-pcut), SSD and HDD error handling, degradation, suspend/resume and
# removal of a degraded or draining volume, drain on suspend, a suspend
# beside a drain message (dm's table SRCU), replay after
# reload, refused tables, and reads racing direct and large writes across
# processes (the range locks).  NXD_TESTS=... runs anything else (e.g. the CI
# list, with VM_TIMEOUT raised accordingly).
DEBUG_SUITE="tests/vm/test_harness.py::test_module_loaded
 tests/vm/test_noloss.py
 tests/vm/test_faults.py::test_ssd_write_errors_degrade
 tests/vm/test_faults.py::test_degraded_volume_suspends_and_resumes
 tests/vm/test_faults.py::test_hdd_errors_reach_the_caller
 tests/vm/test_faults.py::test_remove_during_stuck_drain
 tests/vm/test_destage.py::test_drain_on_suspend_and_pause
 tests/vm/test_destage.py::test_suspend_does_not_wait_for_a_drain_message
 tests/vm/test_datapath.py::test_recovery_after_remove_and_reload
 tests/vm/test_datapath.py::test_reads_see_acknowledged_writes_across_processes
 tests/vm/test_badinput.py::test_table_lines_refused"

if [ "$mode" = suite ] || [ "$mode" = all ]; then
	# shellcheck disable=SC2086,SC2116  # the list on one line
	NXD_TESTS=${NXD_TESTS:-$(echo $DEBUG_SUITE)}
	# -v, not -q: one line per test as it ends, so that a run cut short
	# (timeout, killed) still says what passed (the first attempt's log
	# held 13 dots and nothing else).  The per-test watchdog (conftest.py,
	# 900 s by default) would take a slow test for a hang here.
	pycmd="NXD_CRASH_SEEDS=${NXD_CRASH_SEEDS:-11} NXD_CRASH_LONG=${NXD_CRASH_LONG:-0} NXD_TEST_WATCHDOG=${NXD_TEST_WATCHDOG:-2400}"
	pycmd+=" python3 -m pytest -v -rfE $NXD_TESTS -p no:cacheprovider --junitxml=$rel_logs/$kver-junit.xml --durations=15"
	[ -n "${TEST_FILTER:-}" ] && pycmd+=" -k $(printf '%q' "$TEST_FILTER")"
	for a in ${PYTEST_ARGS:-}; do pycmd+=" $(printf '%q' "$a")"; done
	boot suite "$pycmd"
fi
if [ "$mode" = failslab ] || [ "$mode" = all ]; then
	boot failslab "NXD_FAILSLAB_ITERS=${NXD_FAILSLAB_ITERS:-12} NXD_FAILSLAB_IO=${NXD_FAILSLAB_IO:-6} NXD_FAILSLAB_WRITES=${NXD_FAILSLAB_WRITES:-60} bash scripts/test-debug.sh --guest-failslab"
fi
if [ "$mode" = campaign ] || [ "$mode" = all ]; then
	seeds=${NXD_DEBUG_SEEDS:-1-3}
	pycmd="NXD_PCUT_CAMPAIGN=1 NXD_PCUT_SEEDS=$seeds NXD_PCUT_CUTS=${NXD_DEBUG_CUTS:-3}"
	pycmd+=" NXD_PCUT_MAX_N=${NXD_DEBUG_MAX_N:-1500} NXD_TEST_WATCHDOG=${NXD_TEST_WATCHDOG:-7200}"
	pycmd+=" python3 -m pytest -v -s -rfE tests/vm/test_crash_pcut.py -k campaign -p no:cacheprovider"
	boot campaign "$pycmd"
	# The campaign's own counts (cut points, lost, stale) for the summary.
	c=$(grep -h "crash-campaign $kver" "$logs/$kver-crash-campaign.txt" 2>/dev/null | tail -n1 | cut -d' ' -f3-)
	[ -n "$c" ] && result[campaign]+=" [$c]"
fi

echo
echo "==== dm-nxd debug-kernel summary ($(($(date +%s) - t0))s, $kver, kvm=$NXD_KVM) ===="
for m in suite failslab campaign; do
	[ -n "${result[$m]:-}" ] && echo "$m: ${result[$m]}"
done
[ $fail = 0 ] && echo "debug kernel: clean" || echo "debug kernel: FAILED (logs in $rel_logs/$kver-*)"
exit $fail
