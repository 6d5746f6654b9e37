#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# crash-campaign.sh: dm-nxd over two dm-pcut devices (volatile write caches,
# seeded power cuts), many cut points, one guest per kernel.
#
#   make crash-campaign SEEDS=20            # seeds 1..20, CUTS cuts each
#   SEEDS=5-12 CUTS=6 scripts/crash-campaign.sh
#   TEST_KVERS=6.12.95+deb12-amd64 make crash-campaign SEEDS=4
#   make crash-campaign SEEDS=1-60 CUTS=8 MAX_N=2500   # cuts within 2500 group ops
#   make crash-campaign SEEDS=1-60 FILL=2   # stripe fill: the HDD advertises a
#                                           # 128 KiB io_opt, destage_fill_min=2
#   make crash-campaign PARAMS=destage_pressure_ahead=Y   # module parameters
#                                           # (comma-separated), for every chain
#   make crash-campaign OPTSET=adaptive     # every chain with one option set
#                                           # (ids: tests/vm/test_crash_pcut.py)
#
# The kernels' guests run at the same time (CAMPAIGN_PARALLEL=0: one after
# the other).  Each seed is one chain (tests/vm/test_crash_pcut.py::test_pcut_crash_campaign):
# a fresh volume (nxd option set = seed % 5 of: defaults,
# "write_threshold 131072 low_watermark 0", "mode log_all", "ssd_discard 0",
# "mode adaptive stream_min 65536 stripe_size 65536"; OPTSET: one of them)
# and CUTS power cuts in a row (keep 0/50/100, SSD or HDD first, gap 0, small
# or large, all from the seed).  Builds dm-nxd.ko and dm-pcut.ko first.
# Prints one summary line per kernel (cut points, sectors checked, lost,
# stale/unexplained); the counts are appended to
# build/logs/<kver>-crash-campaign.txt, per-cut lines to
# build/logs/<kver>-crash-campaign-detail.txt, and each cut with a loss
# leaves build/logs/<kver>-pcut-seed<S>-cut<I>.json.
# Exits non-zero if any kernel lost data, hung, or failed to run.
#
# SOAK=1 (make crash-soak): the same workloads without power cuts; after
# each round an fsync makes every completed write durable, the live volume
# is checked, then replayed from its log (both devices powered off with
# everything flushed) and checked again (test_pcut_live_soak; summary in
# build/logs/<kver>-crash-soak.txt, losses in <kver>-soak-seed*.json).
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 2
SEEDS=${SEEDS:-8}
kind=campaign switch=CAMPAIGN
if [ "${SOAK:-0}" = 1 ]; then
	kind=soak switch=SOAK
fi
CUTS=${CUTS:-4}
case $SEEDS in
*-* | *,*) seeds=$SEEDS ;;
*) seeds=1-$SEEDS ;;
esac
. scripts/lib.sh
[ -n "${TEST_KVERS:-}" ] || TEST_KVERS=$(nxd_kvers)
nseeds=$(python3 -c "import sys; a,_,b=sys.argv[1].partition('-'); print(int(b)-int(a)+1 if b else len(a.split(',')))" "$seeds")
# About 15-40 s per cut under TCG, plus boot.
timeout=${VM_TIMEOUT:-$((600 + nseeds * CUTS * 60))}
mkdir -p build/logs
# campaign KVER: one guest; leaves its summary line in
# build/logs/run-KVER.campaign and exits non-zero on a failure.
campaign() {
	local kv=$1 sumf before after grc line
	echo "crash-campaign[$kv]: building dm-nxd and dm-pcut"
	if ! nxd_build "$kv"; then
		echo "build FAILED" >"build/logs/run-$kv.campaign"
		return 1
	fi
	sumf=build/logs/$kv-crash-$kind.txt
	before=$(wc -l 2>/dev/null <"$sumf" || echo 0)
	echo "crash-campaign[$kv]: seeds $seeds x $CUTS cuts${PARAMS:+, module parameters $PARAMS}${OPTSET:+, option set $OPTSET}, guest timeout ${timeout}s"
	VM_TIMEOUT=$timeout nxd_vm "$kv" \
		"NXD_PCUT_$switch=1 NXD_PCUT_SEEDS=$seeds NXD_PCUT_CUTS=$CUTS NXD_TEST_WATCHDOG=$timeout" \
		"NXD_PCUT_MAX_N=${MAX_N:-6000} NXD_PCUT_FILL=${FILL:-0}" \
		${PARAMS:+"NXD_MODULE_PARAMS=$PARAMS"} ${OPTSET:+"NXD_PCUT_OPTSET=$OPTSET"} \
		"python3 -m pytest -q -s -p no:cacheprovider tests/vm/test_crash_pcut.py -k $kind" \
		>"build/logs/$kv-crash-$kind-pytest.txt" 2>&1
	grc=$?
	tail -n 3 "build/logs/$kv-crash-$kind-pytest.txt" | sed "s/^/crash-campaign[$kv]: /"
	after=$(wc -l 2>/dev/null <"$sumf" || echo 0)
	if [ "$after" -gt "$before" ]; then
		line=$(tail -n 1 "$sumf" | cut -d' ' -f3-)
	else
		line="no summary (guest exit $grc; see build/logs/$kv-crash-$kind-pytest.txt)"
	fi
	echo "$line" >"build/logs/run-$kv.campaign"
	return $grc
}

# The kernels' guests run at once (each is mostly one busy vCPU);
# CAMPAIGN_PARALLEL=0: one after the other.
rc=0
pids=()
for kv in $TEST_KVERS; do
	rm -f "build/logs/run-$kv.campaign"
	if [ "${CAMPAIGN_PARALLEL:-1}" = 1 ]; then
		campaign "$kv" &
		pids+=($!)
	else
		campaign "$kv" || rc=1
	fi
done
for p in "${pids[@]}"; do
	wait "$p" || rc=1
done
echo "crash-campaign summary:"
for kv in $TEST_KVERS; do
	echo "  $kv: $(cat "build/logs/run-$kv.campaign" 2>/dev/null || echo "not run")"
done
exit $rc
