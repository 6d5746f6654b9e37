#!/usr/bin/env bash
# dm-nxd benchmark.  The matrix is cut into chunks (bench/bench_guest.py
# chunks: small, nytro, mixed, steady, drain, routing, cpu); each chunk runs
# in ONE QEMU (TCG) guest boot with every system in it (md alone, the raw
# SSD, bcache, dm-writecache, dm-cache, dm-nxd; the routing chunk: md, the
# raw SSD and dm-nxd with fixed thresholds and with mode adaptive; the cpu
# chunk: the raw SSD, dm-linear over it and dm-nxd), so every ratio comes
# from one boot.
# Each boot builds an emulated HDD RAID6 (dm-hddsim drives, md raid6) and a
# memory-backed SSD.  Then the report (bench/bench_report.py) merges the
# chunks:
#   results/<timestamp>/<chunk>/*.json   fio JSON per run, summary.json
#   results/<timestamp>/report.md        the merged report
#   docs/bench/*.png, docs/performance.md (between the bench markers)
#
#   make bench          every chunk, one boot each (40 min at most each)
#   make bench-smoke    one short chunk (md and dm-nxd through every kind of job,
#                       each peer through a burst job, steady state and drain);
#                       fails unless every system ran every job meant for it
#
# Exit status: non-zero when a guest failed, a system could not be set up,
# or a job failed (the report says which and why).
#
# Environment: BENCH_CHUNKS (space or comma list; default all), BENCH_SMOKE,
# BENCH_KVER (guest kernel, default the oldest test kernel: scripts/lib.sh), BENCH_SYSTEMS,
# BENCH_JOBS (job-id prefixes), BENCH_ROUNDS (rounds of the small-write target
# jobs on the raw SSD, dm-writecache and dm-nxd, default 3), BENCH_RUNTIME, BENCH_RAMP, BENCH_BURST_PCT,
# BENCH_STEADY_S, BENCH_STEADY_WINDOW_S, BENCH_DRAIN_FILL_PCT, SSD_MB,
# HDD_SIZE_MB, HDD_COUNT, RAID_CHUNK_KB, RAID_GROUP_THREADS, RAID_STRIPE_CACHE,
# HDDSIM_OPTS, BENCH_NXD_MODPARAMS (dm-nxd module parameters, e.g.
# "destage_depth=256 destage_clean_ahead=N"),
# BENCH_APPEND (extra guest kernel command line, e.g. "clocksource=tsc
# tsc=reliable": the emulated HPET costs every system alike), BENCH_CPUS
# (guest vCPUs, default VM_CPUS or 2), BENCH_MEMORY (default 3G), BENCH_TIMEOUT
# (seconds a boot, default 2400; no job starts after BENCH_TIMEOUT less
# BENCH_MARGIN, default 420 s: the rest is marked not run), BENCH_NO_DOCS=1 (leave
# docs/ alone), BENCH_OUT (results directory).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
. scripts/lib.sh
KVER=${BENCH_KVER:-$(nxd_default_kver)}
SMOKE=${BENCH_SMOKE:-0}
[ "$SMOKE" = 0 ] && SMOKE=
say() { echo "bench: $*"; }
t0=$(date +%s)

# Sizes: the steady state wants a working set 4x the SSD and the drain job
# a region 8x it, inside the array.
if [ -n "$SMOKE" ]; then
	# Small enough to run in make test (CI): fills and drains scale with it.
	export SSD_MB=${SSD_MB:-32} HDD_SIZE_MB=${HDD_SIZE_MB:-64}
	chunks=smoke
else
	export SSD_MB=${SSD_MB:-128} HDD_SIZE_MB=${HDD_SIZE_MB:-256}
	chunks=${BENCH_CHUNKS:-$(python3 bench/bench_guest.py chunks)}
fi
chunks=${chunks//,/ }

say "building dm-hddsim and dm-nxd for $KVER"
nxd_build "$KVER"

ts=$(date -u +%Y%m%dT%H%M%SZ)
out=${BENCH_OUT:-results/$ts}
mkdir -p "$out"
out=$(cd "$out" && pwd)
vars=""
for v in BENCH_SMOKE BENCH_RUNTIME BENCH_RAMP BENCH_SYSTEMS BENCH_JOBS BENCH_ROUNDS BENCH_PREFILL BENCH_BURST_PCT \
	BENCH_STEADY_S BENCH_STEADY_NOCACHE_S BENCH_STEADY_WINDOW_S BENCH_DRAIN_FILL_PCT BENCH_FILL_LIMIT \
	BENCH_CLEAN_LIMIT BENCH_NXD_MODPARAMS BENCH_NXD_FILL_MIN BENCH_NXDALT_PARAMS HDDSIM_OPTS HDD_SIZE_MB HDD_COUNT RAID_CHUNK_KB RAID_GROUP_THREADS RAID_STRIPE_CACHE SSD_MB; do
	[ -n "${!v:-}" ] && vars+="$v='${!v}' "
done
limit=${BENCH_TIMEOUT:-2400}
cpus=${BENCH_CPUS:-${VM_CPUS:-2}}
mem=${BENCH_MEMORY:-3G}
# The host is shared (other guests, builds): its load around each boot goes
# into the results, since it changes every number.
hostload() {
	printf '{"when": "%s", "uptime": "%s", "loadavg": "%s", "qemu": %d}' "$1" \
		"$(uptime | sed 's/^ *//')" "$(cut -d' ' -f1-3 /proc/loadavg)" \
		"$(pgrep -c qemu-system || true)"
}
# Every 2 s while a guest runs: time, host load, and the CPU time (ticks)
# of the QEMU process of this run (found by its --rwdir path): under TCG
# the guest cannot see how much host CPU it was denied, the host can.
sampler() {
	local pid="" t
	set +e +o pipefail
	while :; do
		[ -n "$pid" ] && [ -d "/proc/$pid" ] || pid=$(pgrep -f -- "qemu-system.*$out" | head -1)
		t=0
		[ -n "$pid" ] && t=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
		echo "$(date +%s.%N) $(cut -d' ' -f1 /proc/loadavg) ${pid:-0} $t"
		sleep 2
	done
}
fail=0
for c in $chunks; do
	cdir=$out/$c
	mkdir -p "$cdir"
	say "chunk $c: guest $KVER, results in $cdir${SMOKE:+ (smoke)}"
	c0=$(date +%s)
	before=$(hostload before)
	l0=$(cut -d' ' -f1-3 /proc/loadavg)
	sampler > "$cdir/host-samples.txt" &
	spid=$!
	set +e
	VM_TIMEOUT=$limit VM_CPUS=$cpus VM_MEMORY=$mem VNG_ARGS="--rwdir=$out" \
		VM_APPEND="log_buf_len=16M${BENCH_APPEND:+ $BENCH_APPEND}" VM_CONSOLE=$cdir/console.log \
		nxd_vm "$KVER" "env $vars BENCH_DEADLINE_S=$((limit - ${BENCH_MARGIN:-420})) python3 bench/bench_guest.py run --chunk $c --out $cdir" \
		2>&1 | tee "$cdir/output.log" | grep --line-buffered -E '^(bench|mkraid|vm-run\[.*\]):|Traceback|Error'
	rc=${PIPESTATUS[0]}
	set -e
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	printf '{"nproc": %d, "vcpus": %d, "memory": "%s", "append": "%s", "seconds": %d, "guest_status": %d, "load": [%s, %s]}\n' \
		"$(nproc)" "$cpus" "$mem" "${BENCH_APPEND:-}" "$(( $(date +%s) - c0 ))" "$rc" \
		"$before" "$(hostload after)" > "$cdir/host.json"
	say "chunk $c: host load average before: $l0; after: $(cut -d' ' -f1-3 /proc/loadavg)"
	say "chunk $c: $(( $(date +%s) - c0 )) s, guest status $rc"
	if [ "$rc" != 0 ] || [ ! -s "$cdir/summary.json" ]; then
		say "chunk $c FAILED (guest status $rc; see $cdir/output.log and console.log)"
		fail=1
	fi
done
ls "$out"/*/summary.json >/dev/null 2>&1 || { say "FAILED: no summary.json in $out"; exit 1; }
report_args=()
[ "${BENCH_NO_DOCS:-0}" = 1 ] || [ -n "$SMOKE" ] && report_args+=(--no-docs)
PY=python3
/usr/bin/python3 -c "import matplotlib" 2>/dev/null && PY=/usr/bin/python3
rc2=0
$PY bench/bench_report.py "${report_args[@]}" "$out" || rc2=$?
say "finished in $(( $(date +%s) - t0 )) s"
[ $fail = 0 ] && [ $rc2 = 0 ]
