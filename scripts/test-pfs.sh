#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make test-pfs`: GlusterFS on dm-nxd.  For each kernel of TEST_KVERS
# (default: every installed kernel with headers), one after the other:
#   1. tests/vm/test_pfs.py in one guest, through scripts/test.sh (its
#      build, test accounting and skip rules): the stack, the mixed
#      workload, a brick killed and restarted, an nxd volume switched to
#      linear and back under the live brick, fsck; and a cut of every
#      brick device at once under dm-pcut (volatile write caches);
#   2. scripts/pfs-powercut.sh: the whole-guest power cut with Gluster on
#      top (two more boots).
# Not part of `make test` (scripts/test.sh excludes test_pfs.py): about 25
# minutes a kernel under TCG on top of the suite's 55.
# Prints a summary and exits non-zero on any failure.
#
# Environment: TEST_KVERS, NXD_LOGS (default build/logs), PFS_POWERCUT=0
# skips the power cut, PFS_POWERCUT_SEED (default 201, 202, ... per kernel),
# VM_* as for scripts/vm-run.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
MAKE=${MAKE:-make}
t0=$(date +%s)
if [ -z "${TEST_KVERS:-}" ]; then
	TEST_KVERS=$($MAKE -s --no-print-directory print-vars | sed -n 's/^TEST_KVERS=//p')
fi
read -r -a kvers <<<"$TEST_KVERS"
[ ${#kvers[@]} -gt 0 ] || { echo "test-pfs: no test kernels: make deps" >&2; exit 1; }
fail=0
lines=()
i=0
for kv in "${kvers[@]}"; do
	out=$(NXD_TESTS=tests/vm/test_pfs.py TEST_KVERS=$kv NXD_POWERCUT=0 SKIP_UNIT=1 \
		scripts/test.sh 2>&1 | tee /dev/stderr)
	rc=$?
	# Not grep -E "^$kv: ": the "+" of 6.12.95+deb12-amd64 is a regex
	# operator there (the 6.12 summary was lost: "no summary").
	s=$(awk -v p="$kv: " 'index($0, p) == 1' <<<"$out" | tail -n1)
	lines+=("${s:-$kv: no summary (test.sh exit $rc)}")
	[ "$rc" = 0 ] || fail=1
	if [ "${PFS_POWERCUT:-1}" = 1 ]; then
		seed=${PFS_POWERCUT_SEED:-$((201 + i))}
		p=$(scripts/pfs-powercut.sh "$kv" "$seed" | tail -n1)
		prc=${PIPESTATUS[0]}
		lines+=("${p:-pfs-powercut $kv seed $seed: FAIL: no verdict}")
		{ [ "$prc" = 0 ] && grep -q ": PASS" <<<"$p"; } || fail=1
	fi
	i=$((i + 1))
done
echo
echo "==== dm-nxd test-pfs summary ($(($(date +%s) - t0))s) ===="
printf '%s\n' "${lines[@]}"
[ $fail = 0 ] && echo "test-pfs: PASS" || echo "test-pfs: FAIL"
exit $fail
