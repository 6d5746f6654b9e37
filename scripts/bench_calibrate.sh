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
# Output also lands in build/calibration/<timestamp>/calibration.json.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
KVER=${BENCH_KVER:-6.1.0-56-amd64}
KDIR=/usr/src/linux-headers-$KVER
[ -e "/boot/vmlinuz-$KVER" ] || { echo "no /boot/vmlinuz-$KVER" >&2; exit 1; }
make -s -C "$here/tests/fixtures/hddsim" KDIR="$KDIR" >/dev/null
ts=$(date -u +%Y%m%dT%H%M%SZ)
out=$here/build/calibration/$ts
mkdir -p "$out"
guest_env="HDDSIM_OPTS='${HDDSIM_OPTS:-}' CAL_RUNTIME=${CAL_RUNTIME:-10} CAL_SIZE_MB=${CAL_SIZE_MB:-256}"
PATH=$here/.venv/bin:$PATH timeout ${CAL_TIMEOUT:-1200} vng --run "/boot/vmlinuz-$KVER" --disable-kvm \
	--cpus 2 --memory 3G --rwdir="$here/build" \
	--exec "cd $here && env $guest_env python3 scripts/bench_guest.py calibrate --out $out" \
	2>&1 | tee "$out/console.log" | grep -v '^\s*$'
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
