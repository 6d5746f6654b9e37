#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make test-debug`: run dm-nxd on the debug kernel (scripts/debug-kernel.sh:
# lockdep, KASAN, DEBUG_ATOMIC_SLEEP, DEBUG_LIST, hung-task detection, fault
# injection).  Builds the kernel if needed, builds dm-nxd.ko against it, then
# boots it (scripts/vm-run.sh with VM_KERNEL=<build tree>) up to twice:
#
#   suite     the guest pytest suite, the same command and files as
#             scripts/test.sh (NXD_TESTS overrides the files)
#   failslab  a shell loop in the guest (this script, --guest-failslab) that
#             makes kernel allocations fail while dm-nxd's constructor formats
#             a blank SSD, while it replays a log, and during I/O (failslab,
#             fail_page_alloc), and fails bios to the SSD and the HDD
#             (fail_make_request); see guest_failslab below
#
# After each boot the guest's kernel log is searched for lockdep, KASAN,
# BUG/WARNING, sleeping-in-atomic and call traces; any hit fails the run and
# is saved to build/logs/<release>-<mode>-splats.txt.
#
# Usage: scripts/test-debug.sh [suite|failslab|all]     (default all)
#
# Environment:
#   NXD_TESTS          guest test files for `suite` (default: test.sh's list)
#   TEST_FILTER, PYTEST_ARGS   as for scripts/test.sh
#   NXD_FAILSLAB_ITERS failure points per constructor sweep (default 40)
#   NXD_FAILSLAB_IO    I/O rounds with failures (default 20)
#   VM_TIMEOUT         per boot (default 10800: KASAN + lockdep are slow,
#                      under TCG very slow)
#   NXD_LOGS, VM_MEMORY, VM_CPUS, NXD_KVM: see scripts/vm-run.sh
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1

# Kernel-log lines that are a finding.  "Call Trace" alone also catches
# hung-task reports and WARN_ONs; the allocation-failure reports that fault
# injection itself provokes (warn_alloc) are filtered out by splat_filter.
SPLAT_RE='BUG:|WARNING:|KASAN|lockdep|circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|sleeping function called from invalid context|blocked for more than|general protection|Oops|Call Trace|list_(add|del) corruption|UBSAN'

# splat_filter FILE: print the finding lines of kernel log FILE.  A "Call
# Trace:" within 8 lines after a warn_alloc header (page allocation
# failure, vmalloc error) or after fault injection's own "forcing a
# failure" (verbose 2: where it failed) reports an injected failure, not a
# bug;
# the boot banner "RCU lockdep checking is enabled" is not a finding.
splat_filter() {
	awk -v re="$SPLAT_RE" '
		/page allocation failure:|vmalloc error:|warn_alloc|FAULT_INJECTION: forcing a failure/ { benign = NR }
		/RCU lockdep checking is enabled/ { next }
		$0 ~ re {
			if ($0 ~ /Call Trace/ && benign && NR - benign <= 8) next
			print
		}' "$1"
}

# ---------------------------------------------------------------- guest ---
# Runs inside the debug-kernel guest (vm-run.sh runs it as root in the repo).
guest_failslab() {
	set -u
	local iters=${NXD_FAILSLAB_ITERS:-40} io_rounds=${NXD_FAILSLAB_IO:-20}
	local rel hdd=/dev/ram0 ssd=/dev/ram1 len dbg=/sys/kernel/debug
	local bad=0 ref
	rel=$(uname -r)
	log() { echo "failslab: $*"; echo "nxd-test: failslab: $*" >/dev/kmsg; }
	mountpoint -q $dbg || mount -t debugfs none $dbg
	# udev is slow under TCG with KASAN and lockdep (each dmsetup waited
	# for it half a minute): libdevmapper manages /dev/mapper itself.
	udevadm control --exit 2>/dev/null
	export DM_DISABLE_UDEV=1
	# The marked processes run dmsetup and dd copied, with their libraries,
	# to a tmpfs: an injected failure in a 9p page fault of a marked task
	# broke the guest's 9p root (every later exec: EINVAL) in the first
	# run, which tests 9p, not dm-nxd.
	local bin=/tmp/nxd-failslab-bin f
	mkdir -p $bin
	mountpoint -q $bin || mount -t tmpfs nxdbin $bin
	for f in /usr/sbin/dmsetup /usr/bin/dd; do
		cp "$f" $bin/
		ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }' |
			while read -r l; do cp -L "$l" $bin/; done
	done
	local ld
	ld=$(ls $bin/ld-linux* | head -n1)
	DMSETUP="$ld --library-path $bin $bin/dmsetup"
	DD="$ld --library-path $bin $bin/dd"
	modprobe dm-mod
	modprobe libcrc32c || true
	grep -qw dm_nxd /proc/modules || insmod "build/$rel/dm-nxd.ko" || { log "insmod failed"; return 1; }
	grep -qw brd /proc/modules && rmmod brd
	modprobe brd rd_nr=2 rd_size=$((32 * 1024)) max_part=0 || return 1
	len=$(( $(blockdev --getsz $hdd) / 2048 * 2048 - 2048 ))
	local table="0 $len nxd $hdd $ssd"
	local fifo=/tmp/nxd-failslab.fifo
	# Fault-injection knobs common to both allocators: only marked tasks,
	# sleeping (GFP_KERNEL) allocations too, a one-line report per failure.
	for a in failslab fail_page_alloc; do
		echo 1 >$dbg/$a/task-filter
		echo N >$dbg/$a/ignore-gfp-wait
		echo 2 >$dbg/$a/verbose     # with the stack: where it failed
		echo 1 >$dbg/$a/interval
		echo 0 >$dbg/$a/probability
	done
	echo N >$dbg/fail_page_alloc/ignore-gfp-highmem
	echo 0 >$dbg/fail_page_alloc/min-order

	# wipe: zero the first and last 4 MiB of both devices (superblock,
	# label); zeroing all of them costs a minute a time under TCG.
	wipe() {
		local d mb
		for d in $hdd $ssd; do
			mb=$(( $(blockdev --getsz $d) / 2048 ))
			dd if=/dev/zero of=$d bs=1M count=4 oflag=direct status=none
			dd if=/dev/zero of=$d bs=1M count=4 seek=$((mb - 4)) oflag=direct status=none
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
			read -r nr _ </proc/$1/syscall 2>/dev/null || nr=
			case $nr in 0|257) [ "$(readlink /proc/$1/exe 2>/dev/null)" != "$me" ] && break ;; esac
			sleep 0.05
		done
		echo 1 >/proc/$1/make-it-fail 2>/dev/null
	}
	# marked_create ATTR SPACE: `dmsetup create v` whose kernel allocations
	# (after exec: dmsetup is marked while it waits for its table on a
	# fifo) fail once, after SPACE bytes, through /sys/kernel/debug/ATTR.
	# Returns dmsetup's exit status; 124 if it hung.
	marked_create() {
		local attr=$dbg/$1 space=$2 pid n rc
		rm -f $fifo; mkfifo $fifo
		exec 8<>$fifo
		$DMSETUP create v <$fifo >/tmp/nxd-failslab.out 2>&1 8>&- &
		pid=$!
		for n in $(seq 200); do
			read -r nr fd _ </proc/$pid/syscall 2>/dev/null || true
			[ "${nr:-}" = 0 ] && [ "${fd:-}" = 0x0 ] && break
			sleep 0.05
		done
		echo "$space" >$attr/space
		echo 1 >$attr/times
		echo 100 >$attr/probability
		echo 1 >/proc/$pid/make-it-fail
		echo "$table" >&8
		exec 8>&-
		( sleep 300; kill -9 $pid 2>/dev/null ) &
		local wd=$!
		wait $pid; rc=$?
		kill $wd 2>/dev/null; wait $wd 2>/dev/null
		echo 0 >$attr/probability
		[ $rc = 137 ] && rc=124
		return $rc
	}
	# sweep ATTR NAME SETUP: calibrate how many bytes a clean constructor
	# run allocates, then put the one failure at ITERS points across it.
	sweep() {
		local a=$1 name=$2 setup=$3 total left i space rc inj nerr=0 nok=0 ninj=0 hang=0 after
		$setup; marked_create "$a" 2147483647; rc=$?
		left=$(cat $dbg/$a/space)
		total=$((2147483647 - left))
		[ $rc = 0 ] || { log "$name/$a: calibration create failed ($rc): $(cat /tmp/nxd-failslab.out)"; bad=1; return; }
		[ -z "${ref:-}" ] || [ "$(vsum)" = "$ref" ] || { log "$name/$a: calibration: data differ"; bad=1; }
		vremove || { bad=1; return; }
		log "$name/$a: a clean constructor allocates $total bytes through $a"
		for i in $(seq 0 $((iters - 1))); do
			space=$(( total * i / iters + RANDOM % 64 ))
			$setup
			marked_create "$a" $space; rc=$?
			inj=$((1 - $(cat $dbg/$a/times)))
			[ $inj = 1 ] && ninj=$((ninj + 1))
			if [ $rc = 124 ]; then
				log "$name/$a: space $space: dmsetup HUNG"; hang=1; bad=1; break
			elif [ $rc = 0 ]; then
				nok=$((nok + 1))
			else
				nerr=$((nerr + 1))
				[ $inj = 1 ] || log "$name/$a: space $space: failed without an injected failure: $(tail -n1 /tmp/nxd-failslab.out)"
			fi
			vremove || { bad=1; break; }
			# A clean constructor must still work, with the same data.
			if ! echo "$table" | dmsetup create v >/tmp/nxd-failslab.out 2>&1; then
				log "$name/$a: space $space: clean create after the failure FAILED: $(tail -n1 /tmp/nxd-failslab.out)"
				bad=1; continue
			fi
			if [ -n "${ref:-}" ]; then
				after=$(vsum)
				[ "$after" = "$ref" ] || { log "$name/$a: space $space: data differ after the failure"; bad=1; }
			fi
			vremove || { bad=1; break; }
		done
		log "$name/$a: $iters failure points: $nerr create(s) failed with an error, $nok succeeded, $ninj failure(s) injected, hang=$hang"
	}

	# 1. Constructor formatting a blank SSD (and labelling the HDD).
	ref=
	setup_blank() { wipe; }
	sweep failslab format setup_blank
	sweep fail_page_alloc format setup_blank

	# 2. Constructor replaying a log: logged small writes, volume removed
	# with the log full, each marked constructor replays it.
	wipe
	echo "$table" | dmsetup create v && vwait || { log "seed create failed"; return 1; }
	dmsetup message v 0 pause_destage || log "pause_destage refused"
	local off
	for off in $(seq 0 37 $((37 * 200))); do
		dd if=/dev/urandom of=/dev/mapper/v bs=4k count=1 seek=$off oflag=direct status=none
	done
	ref=$(vsum)
	vremove || return 1
	setup_none() { :; }
	sweep failslab replay setup_none
	sweep fail_page_alloc replay setup_none
	ref=

	# 3. I/O path: the writer and destager threads and the dd processes
	# doing I/O are marked (each dd once it has been exec'd and waits on
	# a fifo); failslab and fail_page_alloc fail 5% of their allocations.
	echo "$table" | dmsetup create v || { log "create for I/O failed"; return 1; }
	vwait
	local r p eio=0 io=0 pid
	for p in /proc/[0-9]*; do
		case $(cat $p/comm 2>/dev/null) in nxd-*) echo 1 >$p/make-it-fail; log "marked $(cat $p/comm)";; esac
	done
	for a in failslab fail_page_alloc; do
		echo 0 >$dbg/$a/space; echo 5 >$dbg/$a/probability; echo -1 >$dbg/$a/times
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
	done
	for a in failslab fail_page_alloc; do echo 0 >$dbg/$a/probability; done
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
	# crash, and a fresh constructor must work afterwards.
	local fmr=$dbg/fail_make_request dev
	echo 0 >$fmr/task-filter; echo 1 >$fmr/verbose; echo 0 >$fmr/space; echo 1 >$fmr/interval
	for dev in ram1 ram0; do
		echo "$table" | dmsetup create v && vwait || { log "fail_make_request: create failed"; bad=1; break; }
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
	[ $bad = 0 ] && log "PASS" || log "FAIL"
	return $bad
}

if [ "${1:-}" = --guest-failslab ]; then
	[ "${NXD_IN_VM:-}" = 1 ] || { echo "--guest-failslab runs in the test guest only" >&2; exit 2; }
	guest_failslab
	exit $?
fi

# ----------------------------------------------------------------- host ---
mode=${1:-all}
case $mode in suite|failslab|all) ;; *) echo "usage: $0 [suite|failslab|all]" >&2; exit 2 ;; esac
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
[ -n "$kver" ] && [ -d "$tree" ] || { say "debug-kernel.sh gave no release/tree"; exit 1; }
say "debug kernel $kver ($tree)"
nice -n 19 $MAKE --no-print-directory module KDIR="$tree" JOBS=2 || { say "dm-nxd build against $kver FAILED"; exit 1; }
nice -n 19 $MAKE --no-print-directory tools || { say "tools build FAILED"; exit 1; }

if [ -z "${NXD_KVM:-}" ]; then
	# KVM is a property of the host: probe it with a stock kernel (quick).
	stock=$(ls /boot/vmlinuz-* 2>/dev/null | sed 's|^/boot/vmlinuz-||' | sort -V | head -n1)
	NXD_KVM=$(scripts/vm-run.sh --kvm-probe "$stock")
fi
export NXD_KVM VM_KERNEL=$tree VM_TIMEOUT=${VM_TIMEOUT:-10800}

# boot MODE CMD: one guest; 0 if CMD passed and the kernel log is clean.
declare -A result
fail=0
boot() {
	local m=$1 cmd=$2 rc line splats
	local console=$logs/$kver-$m-console.log dmesg=$logs/$kver-$m-dmesg.txt
	rm -f "$console" "$dmesg" "$logs/$kver-$m-splats.txt"
	say "$m: $cmd"
	VM_CONSOLE=$console VM_DMESG=$dmesg scripts/vm-run.sh "$kver" "$cmd" 2>&1 | tee "$logs/$kver-$m.log"
	rc=${PIPESTATUS[0]}
	# The dmesg the guest saved, else (crash, timeout) the console.
	if [ -s "$dmesg" ]; then splats=$(splat_filter "$dmesg"); else splats=$(splat_filter "$console"); fi
	if [ -n "$splats" ]; then
		{ echo "# $kver $m: kernel log lines matching the splat patterns"; echo "$splats"
		  echo; echo "# full kernel log: ${dmesg#"$here"/}"; } >"$logs/$kver-$m-splats.txt"
		say "$m: kernel log shows $(wc -l <<<"$splats") problem line(s); first:"
		head -n 15 <<<"$splats" | sed 's/^/  | /'
	fi
	if [ "$m" = suite ]; then
		line=$(grep -E '^(=+ )?([0-9]+ (passed|failed|errors?|skipped|xfailed|xpassed|deselected|warnings?)(, )?)+.* in [0-9.]+s|^(=+ )?no tests ran' \
			"$logs/$kver-$m.log" | tail -n1 | sed -E 's/^=+ //; s/ =+$//')
		line=${line:-no pytest summary}
	else
		line=$(grep -E '^failslab: (PASS|FAIL)' "$logs/$kver-$m.log" | tail -n1)
		line=${line:-no failslab verdict}
	fi
	line+=" (guest exit $rc${splats:+, $(wc -l <<<"$splats") splat line(s): $rel_logs/$kver-$m-splats.txt})"
	result[$m]=$line
	[ "$rc" = 0 ] && [ -z "$splats" ] || fail=1
}

if [ "$mode" = suite ] || [ "$mode" = all ]; then
	NXD_TESTS=${NXD_TESTS:-tests/vm/test_harness.py tests/vm/test_datapath.py tests/vm/test_destage.py tests/vm/test_faults.py tests/vm/test_badinput.py tests/vm/test_mgmt.py tests/vm/test_crash.py tests/vm/test_fs.py}
	pycmd="NXD_CRASH_SEEDS=${NXD_CRASH_SEEDS:-11} NXD_CRASH_LONG=${NXD_CRASH_LONG:-0}"
	pycmd+=" python3 -m pytest -q $NXD_TESTS -p no:cacheprovider --junitxml=$rel_logs/$kver-junit.xml --durations=15"
	[ -n "${TEST_FILTER:-}" ] && pycmd+=" -k $(printf '%q' "$TEST_FILTER")"
	for a in ${PYTEST_ARGS:-}; do pycmd+=" $(printf '%q' "$a")"; done
	boot suite "$pycmd"
fi
if [ "$mode" = failslab ] || [ "$mode" = all ]; then
	boot failslab "NXD_FAILSLAB_ITERS=${NXD_FAILSLAB_ITERS:-40} NXD_FAILSLAB_IO=${NXD_FAILSLAB_IO:-20} bash scripts/test-debug.sh --guest-failslab"
fi

echo
echo "==== dm-nxd debug-kernel summary ($(($(date +%s) - t0))s, $kver, kvm=$NXD_KVM) ===="
for m in suite failslab; do
	[ -n "${result[$m]:-}" ] && echo "$m: ${result[$m]}"
done
[ $fail = 0 ] && echo "debug kernel: clean" || echo "debug kernel: FAILED (logs in $rel_logs/$kver-*)"
exit $fail
