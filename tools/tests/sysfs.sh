# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# nxdctl threshold, config, status, list and --prometheus on a fake
# sysfs tree (NXDCTL_SYSFS) without a kernel module: sourced by
# tests/run.sh (its t, has, err_has, py, ok, ko, $OUT, $NXDCTL).

# ---- the binary on a fake sysfs ----
SYS=$OUT/sys
mkdir -p "$SYS/block/dm-0/dm" "$SYS/block/dm-0/nxd" "$SYS/block/dm-1/dm"
echo vol0 >"$SYS/block/dm-0/dm/name"
echo 253:0 >"$SYS/block/dm-0/dev"
echo lin1 >"$SYS/block/dm-1/dm/name"
echo 253:1 >"$SYS/block/dm-1/dev"
echo 65536 >"$SYS/block/dm-0/nxd/write_threshold"
for a in mode:auto low_watermark:30 high_watermark:80 destage_rate:0 \
	ssd_discard:1 drain_on_suspend:1 log_used_pct:12 state:ok; do
	echo "${a#*:}" >"$SYS/block/dm-0/nxd/${a%%:*}"
done
export NXDCTL_SYSFS="$SYS"
t "threshold by name" 0 "$NXDCTL" threshold vol0
has "threshold prints write" "^write_threshold 65536 (64K)$"
grep -q read_threshold "$OUT/last.out" &&
	ko "threshold prints no read threshold" ||
	ok "threshold prints no read threshold"
t "threshold by dm-0" 0 "$NXDCTL" threshold dm-0
t "threshold by /dev/dm-0" 0 "$NXDCTL" threshold /dev/dm-0
t "threshold by /dev/mapper/vol0" 0 "$NXDCTL" threshold /dev/mapper/vol0
t "threshold by /dev/nxd/vol0" 0 "$NXDCTL" threshold /dev/nxd/vol0
t "threshold --read (removed)" 1 "$NXDCTL" threshold vol0 --write 1M \
	--read 256K
err_has "threshold --read message" "bad option or missing value: '--read'"
[ "$(cat "$SYS/block/dm-0/nxd/write_threshold")" = 65536 ] &&
	[ ! -e "$SYS/block/dm-0/nxd/read_threshold" ] &&
	ok "threshold --read changes nothing" ||
	ko "threshold --read changes nothing"
t "threshold --write 1M" 0 "$NXDCTL" threshold vol0 --write 1M
[ "$(cat "$SYS/block/dm-0/nxd/write_threshold")" = 1048576 ] &&
	ok "threshold writes bytes to sysfs" ||
	ko "threshold writes bytes to sysfs"
t "threshold --write junk" 1 "$NXDCTL" threshold vol0 --write 12Q
t "threshold --write > 4G" 1 "$NXDCTL" threshold vol0 --write 8G
t "unknown volume" 2 "$NXDCTL" threshold nosuch
err_has "unknown volume message" "volume 'nosuch' not found"
t "config lists all" 0 "$NXDCTL" config vol0
has "config mode" "^mode=auto$"
has "config state" "^state=ok$"
[ "$(grep -c = "$OUT/last.out")" = 9 ] &&
	! grep -q read_threshold "$OUT/last.out" &&
	ok "config lists 7 tunables and 2 read-only, no read_threshold" ||
	ko "config lists 7 tunables and 2 read-only, no read_threshold"
t "config read_threshold (removed)" 1 "$NXDCTL" config vol0 \
	read_threshold=0
err_has "config read_threshold message" \
	"unknown writable attribute 'read_threshold'"
t "config set" 0 "$NXDCTL" config vol0 high_watermark=90 write_threshold=32K
[ "$(cat "$SYS/block/dm-0/nxd/write_threshold")" = 32768 ] &&
	[ "$(cat "$SYS/block/dm-0/nxd/high_watermark")" = 90 ] &&
	ok "config writes sysfs" || ko "config writes sysfs"
t "config read-only attr" 1 "$NXDCTL" config vol0 state=x

# status, list and --prometheus: statistics from the file, state from sysfs
export NXDCTL_TEST_STATS="$OUT/fig6.stats"
t "status" 0 "$NXDCTL" status vol0 --interval 0
has "status: state" "^vol0: ok$"
has "status: log use" "^  log  *0.4% used (3.9M of 1.0G)$"
has "status: dirty" "^  dirty  *0 blocks logged and not yet on the HDD"
has "status: destage, not measured" "^  destage  *rate not measured (no limit)"
has "status: writes" "^  writes  *545386 logged, 0 to the HDD, 0 around a full log$"
has "status: errors" "^  errors  *SSD 0, HDD 0$"
has "status: recovery" "^  recovery .* in 1.2 ms at activation$"
t "status, with a rate" 0 "$NXDCTL" status vol0 --interval 0.2
has "status: rate of an unchanged file" "^  destage  *0.0 MiB/s over the last 0.2 s"
t "status --json" 0 "$NXDCTL" status vol0 --json --interval 0
cp "$OUT/last.out" "$OUT/status.json"
py "status --json" '
v = d["volumes"][0]
assert d["time"] > 0 and v["name"] == "vol0" and v["state"] == "ok"
assert v["log_bytes"] == 262144 * 4096 and v["log_used_bytes"] == 1000 * 4096
assert abs(v["log_used_pct"] - 100 * 1000 / 262144) < 1e-3
assert v["destage_bytes_per_s"] is None and v["destage_rate_limit_mib_s"] == 0
assert v["writes_logged"] == 545386 and v["recovery_us"] == 1234
assert v["acked_lost"] is False
assert "read_threshold" not in v' \
	"$OUT/status.json"
t "status: bad interval" 1 "$NXDCTL" status vol0 --interval x
t "stats --prometheus" 0 "$NXDCTL" stats vol0 --prometheus
cp "$OUT/last.out" "$OUT/prom.txt"
PY3=python3
[ -x /usr/bin/python3 ] && PY3=/usr/bin/python3
if $PY3 -c '
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
fam = {f.name: f for f in parse(open(sys.argv[1]).read())}
def val(name, **labels):
    for f in fam.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError((name, labels))
assert fam["nxd_writes_logged"].type == "counter"
assert val("nxd_writes_logged_total", volume="vol0") == 545386
assert fam["nxd_log_blocks"].type == "gauge" and val("nxd_log_blocks") == 262144
assert val("nxd_state", state="ok") == 1 and val("nxd_state", state="degraded") == 0
h = fam["nxd_request_size_bytes"]
assert h.type == "histogram"
assert val("nxd_request_size_bytes_bucket", op="write", le="4096") == 23978
assert val("nxd_request_size_bytes_bucket", op="write", le="8192") == 23978 + 499318
assert val("nxd_request_size_bytes_bucket", op="write", le="+Inf") == 545386
assert val("nxd_request_size_bytes_count", op="read") == 56796 + 456385 + 55 + 31 + 4
assert val("nxd_request_size_bytes_sum", op="write") == sum(
    n * b for n, b in [(23978, 4096), (499318, 8192), (19954, 16384),
                       (1962, 32768), (127, 65536), (39, 131072),
                       (6, 262144), (2, 524288)])
t = sum(val("nxd_requests_total", op="write", route=r, align=a)
        for r in ("ssd", "hdd") for a in ("aligned", "unaligned"))
assert t == 545386, t
print(len(fam), "families")' "$OUT/prom.txt" >"$OUT/py.out" 2>&1; then
	ok "stats --prometheus parses (prometheus_client) and adds up"
else
	ko "stats --prometheus parses (prometheus_client) and adds up"
	sed 's/^/    /' "$OUT/py.out"
fi
t "stats --prometheus --json" 1 "$NXDCTL" stats vol0 --prometheus --json
unset NXDCTL_TEST_STATS
t "config unknown attr" 1 "$NXDCTL" config vol0 bogus
chmod 0444 "$SYS/block/dm-0/nxd/mode"
if [ "$(id -u)" != 0 ]; then
	t "permission denied is exit 3" 3 "$NXDCTL" config vol0 mode=log_all
fi
unset NXDCTL_SYSFS
