#!/usr/bin/env bash
# dm-nxd benchmark: boots ONE QEMU (TCG) guest, builds an emulated HDD RAID6
# (dm-hddsim drives, md raid6) and a memory-backed SSD, runs the fio jobs of
# fio-jobs/ against md alone, the raw SSD, bcache, dm-writecache, dm-cache
# and dm-nxd, then writes
#   results/<timestamp>/*.json      fio JSON per run, summary.json
#   results/summary.json            copy of the latest summary
#   docs/bench/*.png                plots
#   docs/performance.md             table + plots between the bench markers
#
#   make bench          full matrix (about an hour under TCG)
#   make bench-smoke    BENCH_SMOKE=1: ~3 s per job, reduced matrix; checks
#                       only that every system ran
#
# Environment: BENCH_SMOKE, BENCH_JOBS (comma list of job-id prefixes,
# e.g. drain,streaming), BENCH_KVER (guest kernel, default
# 6.1.0-56-amd64), BENCH_RUNTIME, BENCH_RAMP, BENCH_IODEPTH, BENCH_SYSTEMS
# (comma list), HDDSIM_OPTS, HDD_SIZE_MB, RAID_CHUNK_KB, SSD_MB,
# BENCH_TIMEOUT (seconds for the guest), BENCH_NO_DOCS=1 (leave
# docs/performance.md alone).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
KVER=${BENCH_KVER:-6.1.0-56-amd64}
SMOKE=${BENCH_SMOKE:-0}
[ "$SMOKE" = 0 ] && SMOKE=
say() { echo "bench: $*"; }
t0=$(date +%s)

[ -e "/boot/vmlinuz-$KVER" ] || { say "no /boot/vmlinuz-$KVER" >&2; exit 1; }
KDIR=/usr/src/linux-headers-$KVER
say "building dm-hddsim for $KVER"
make -s -C tests/fixtures/hddsim KDIR="$KDIR" >/dev/null
if [ -f "build/$KVER/dm-nxd.ko" ]; then
	say "dm-nxd: build/$KVER/dm-nxd.ko"
else
	say "dm-nxd: build/$KVER/dm-nxd.ko not built: the nxd system will be skipped"
fi

ts=$(date -u +%Y%m%dT%H%M%SZ)
out=results/$ts
mkdir -p "$out"
vars=""
for v in BENCH_SMOKE BENCH_RUNTIME BENCH_RAMP BENCH_IODEPTH BENCH_SYSTEMS BENCH_JOBS BENCH_PREFILL BENCH_REWRITE_SIZE \
	BENCH_DRAIN_SIZE HDDSIM_OPTS HDD_SIZE_MB HDD_COUNT RAID_CHUNK_KB SSD_MB; do
	[ -n "${!v:-}" ] && vars+="$v='${!v}' "
done
if [ -n "$SMOKE" ]; then limit=${BENCH_TIMEOUT:-2400}; else limit=${BENCH_TIMEOUT:-14400}; fi
say "guest $KVER, results in $out${SMOKE:+ (smoke)}"
set +e
PATH=$here/.venv/bin:$PATH timeout --foreground -k 30 "$limit" vng --run "/boot/vmlinuz-$KVER" \
	--disable-kvm --cpus 2 --memory 3G --rwdir="$here/results" \
	--exec "cd $here && env $vars python3 scripts/bench_guest.py run --out $here/$out" \
	2>&1 | tee "$out/console.log" | grep --line-buffered -E '^(bench|mkraid):|Traceback|Error'
rc=${PIPESTATUS[0]}
set -e
[ "$rc" = 0 ] || say "guest exited with status $rc"
if [ ! -s "$out/summary.json" ]; then
	say "FAILED: no $out/summary.json (see $out/console.log)"
	exit 1
fi
cp "$out/summary.json" results/summary.json
shopt -s nullglob
report_args=()
[ "${BENCH_NO_DOCS:-0}" = 1 ] && report_args+=(--no-docs)
[ -n "$SMOKE" ] && report_args+=(--check-all-ran)
rc2=0
PY=python3
/usr/bin/python3 -c "import matplotlib" 2>/dev/null && PY=/usr/bin/python3
$PY scripts/bench_report.py "${report_args[@]}" "$out" || rc2=$?
say "finished in $(( $(date +%s) - t0 )) s"
exit $rc2
