#!/usr/bin/env bash
# Calibrate the dm-hddsim HDD emulator: in ONE guest boot, one hddsim drive
# over a brd ramdisk, fio 4 KiB random write/read at QD1/QD8 and 1 MiB
# sequential; prints IOPS and MB/s (a markdown table at the end).
#
# Environment:
#   BENCH_KVER    guest kernel release (default 6.1.0-56-amd64)
#   HDDSIM_OPTS   hddsim optional arguments to try, e.g.
#                 "4 seek_us 5000 settle_us 400" (default: module defaults)
#   CAL_RUNTIME   seconds per fio run (default 10)
#   CAL_SIZE_MB   size of the emulated drive (default 256)
#   CAL_UPDATE_DOCS=1  write the table into docs/performance.md
#   CAL_MODE=array  instead: md RAID6 alone (bench/mkraid.sh, HDD_COUNT,
#                 HDD_SIZE_MB, RAID_CHUNK_KB) over the hddsim drives and over
#                 "instant" hddsim drives (no seek, rotation or transfer
#                 time), 1 MiB sequential and 4/64 KiB random writes, for
#                 each "group_thread_cnt:stripe_cache_size" of ARRAY_SETTINGS
#                 (default "0:1024 1:1024 2:4096"), with guest CPU and drive
#                 busy: whether md's CPU or the drives set the pace
#   CAL_CPUS      guest vCPUs (default 2)
# Output also lands in build/calibration/<timestamp>/calibration.json
# (array.json for CAL_MODE=array).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/lib.sh
. "$here/scripts/lib.sh"
KVER=${BENCH_KVER:-$(nxd_default_kver)}
nxd_build "$KVER"
ts=$(date -u +%Y%m%dT%H%M%SZ)
out=$here/build/calibration/$ts
mkdir -p "$out"
guest_env="HDDSIM_OPTS='${HDDSIM_OPTS:-}' CAL_RUNTIME=${CAL_RUNTIME:-10} CAL_SIZE_MB=${CAL_SIZE_MB:-256}"
mode=calibrate
if [ "${CAL_MODE:-}" = array ]; then
	mode=array
	guest_env+=" ARRAY_SETTINGS='${ARRAY_SETTINGS:-0:1024 1:1024 2:4096}' HDD_COUNT=${HDD_COUNT:-6}"
	guest_env+=" HDD_SIZE_MB=${HDD_SIZE_MB:-256} RAID_CHUNK_KB=${RAID_CHUNK_KB:-64}"
fi
VM_TIMEOUT=${CAL_TIMEOUT:-1200} VM_CPUS=${CAL_CPUS:-2} VM_MEMORY=3G VM_CONSOLE=$out/console.log \
	VM_APPEND="log_buf_len=16M${BENCH_APPEND:+ $BENCH_APPEND}" \
	nxd_vm "$KVER" "env $guest_env python3 bench/bench_guest.py $mode --out $out" \
	2>&1 | tee "$out/output.log" | grep -v '^\s*$'
if [ $mode = array ]; then
	test -s "$out/array.json"
	[ "${CAL_UPDATE_DOCS:-0}" = 1 ] || exit 0
	python3 - "$out/array.json" "$here/docs/performance.md" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
h = c["hdd"]
rows = ["md RAID6 of %d x %d MiB drives, chunk %d KiB, guest %s, %d vCPUs, %d s per test; "
        "CPU: all vCPUs / the busiest (guest /proc/stat); drives: the busiest hddsim drive's "
        "busy time (instant drives: no seek, rotation or transfer time)."
        % (h["count"], h["size_mb"], h["chunk_kb"], c["kernel"], c["cpus"], c["runtime"]), "",
        "| drives | group_thread_cnt | stripe_cache_size | test | IOPS | MB/s | CPU % all / busiest | drive busy % |",
        "|---|---:|---:|---|---:|---:|---|---:|"]
rows += ["| %s | %d | %d | %s | %.0f | %.1f | %.0f / %.0f | %s |"
         % (r["drives"], r["group_thread_cnt"], r["stripe_cache_size"], r["test"], r["iops"], r["mbps"],
            r["cpu_busy_pct"], r["cpu_max_pct"],
            "-" if r["drive_busy_pct_max"] is None else "%.0f" % r["drive_busy_pct_max"])
         for r in c["rows"]]
doc = open(sys.argv[2]).read()
b, e = "<!-- array:begin -->", "<!-- array:end -->"
if b not in doc:
    sys.exit("no array markers in docs/performance.md")
i, j = doc.index(b) + len(b), doc.index(e)
open(sys.argv[2], "w").write(doc[:i] + "\n" + "\n".join(rows) + "\n" + doc[j:])
print("array table written to docs/performance.md")
PY
	exit 0
fi
test -s "$out/calibration.json"
# CAL_UPDATE_DOCS=1: put the table between the calibration markers of
# docs/performance.md.
if [ "${CAL_UPDATE_DOCS:-0}" = 1 ]; then
	python3 - "$out/calibration.json" "$here/docs/performance.md" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
rows = ["Drive table: `%s` (kernel %s, %d MiB)." % (c["table"], c["kernel"], c["size_mb"]), "",
        "| test | IOPS | MB/s | mean completion latency (us) |", "|---|---:|---:|---:|"]
rows += ["| %s | %.0f | %.1f | %.0f |" % (r["test"], r["iops"], r["mbps"], r["lat_us"]) for r in c["rows"]]
doc = open(sys.argv[2]).read()
b, e = "<!-- calibration:begin -->", "<!-- calibration:end -->"
i, j = doc.index(b) + len(b), doc.index(e)
open(sys.argv[2], "w").write(doc[:i] + "\n" + "\n".join(rows) + "\n" + doc[j:])
print("calibration table written to docs/performance.md")
PY
fi
