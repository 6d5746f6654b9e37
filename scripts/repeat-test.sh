#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# In a guest: run one test N times; if a run takes longer than LIMIT s,
# dump the nxd state (dmsetup status and table, sysfs, the stacks of the
# nxd threads and of python3, the blocked tasks) and stop with exit 9.
# For chasing an intermittent hang, e.g. from the host:
#   NXD_KVM=0 scripts/vm-run.sh 6.1.0-56-amd64 \
#     "TEST=tests/vm/test_datapath.py::test_recovery_after_remove_and_reload N=12 LIMIT=240 scripts/repeat-test.sh"
# Output: build/repeat-test.txt.
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 2
N=${N:-12}
LIMIT=${LIMIT:-240}
: "${TEST:?TEST=tests/vm/FILE::NAME}"
out=build/repeat-test.txt
: >"$out"
for i in $(seq 1 "$N"); do
	echo "=== run $i $(date +%T)" | tee -a "$out"
	NXD_TEST_WATCHDOG=$((LIMIT * 10)) python3 -m pytest -q -s -p no:cacheprovider "$TEST" >>"$out" 2>&1 &
	p=$!
	t=0
	while kill -0 "$p" 2>/dev/null && [ "$t" -lt "$LIMIT" ]; do sleep 5; t=$((t + 5)); done
	if kill -0 "$p" 2>/dev/null; then
		echo "=== HUNG in run $i after ${t}s" | tee -a "$out"
		{
			dmsetup status; dmsetup table
			for d in /sys/block/dm-*/nxd; do
				echo "$d:"
				for f in "$d"/*; do echo "  $(basename "$f")=$(cat "$f")"; done
			done
			for t in $(pgrep -f 'nxd-|python3'); do
				echo "--- $t $(cat "/proc/$t/comm")"; cat "/proc/$t/stack"
			done
			echo w >/proc/sysrq-trigger
			dmesg | tail -n 300
		} >>"$out" 2>&1
		exit 9
	fi
	wait "$p"
	echo "rc $?" | tee -a "$out"
done
echo "=== no hang in $N runs" | tee -a "$out"
