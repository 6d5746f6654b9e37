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
	ssd_discard:1 drain_on_suspend:1 auto_min_threshold:4096 \
	auto_max_threshold:1048576 stream_min:4194304 stripe_size:0 stream_share:0 \
	log_used_pct:12 state:ok; do
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
[ "$(grep -c = "$OUT/last.out")" = 14 ] &&
	! grep -q read_threshold "$OUT/last.out" &&
	ok "config lists 12 tunables and 2 read-only, no read_threshold" ||
	ko "config lists 12 tunables and 2 read-only, no read_threshold"
t "config read_threshold (removed)" 1 "$NXDCTL" config vol0 \
	read_threshold=0
err_has "config read_threshold message" \
	"unknown writable attribute 'read_threshold'"
t "config set" 0 "$NXDCTL" config vol0 high_watermark=90 write_threshold=32K
[ "$(cat "$SYS/block/dm-0/nxd/write_threshold")" = 32768 ] &&
	[ "$(cat "$SYS/block/dm-0/nxd/high_watermark")" = 90 ] &&
	ok "config writes sysfs" || ko "config writes sysfs"
t "config read-only attr" 1 "$NXDCTL" config vol0 state=x

# ---- config: every value checked first, all or nothing ----
NXD=$SYS/block/dm-0/nxd
tunables() { # the seven values, one line
	for k in write_threshold mode low_watermark high_watermark \
		destage_rate ssd_discard drain_on_suspend; do
		printf '%s=%s ' "$k" "$(cat "$NXD/$k")"
	done
}
before=$(tunables)
t "config: a bad value after a good one" 1 "$NXDCTL" config vol0 \
	mode=log_all write_threshold=2G
err_has "config: the range is named" \
	"^nxdctl: write_threshold: expected 0 to 1G, got '2G'$"
[ "$(tunables)" = "$before" ] && ok "config: a refused value writes nothing" ||
	ko "config: a refused value writes nothing"
t "config --dry-run: out of range" 1 "$NXDCTL" config vol0 --dry-run \
	destage_rate=1000001
err_has "config --dry-run: the same message" \
	"^nxdctl: destage_rate: expected 0 to 1000000, got '1000001'$"
t "config: a bad mode" 1 "$NXDCTL" config vol0 mode=fast
err_has "config: the modes are named" \
	"^nxdctl: mode: expected auto, passthrough, log_all or adaptive, got 'fast'$"
t "config: a key twice" 1 "$NXDCTL" config vol0 mode=auto mode=log_all
t "config: low above the current high" 1 "$NXDCTL" config vol0 \
	low_watermark=95
err_has "config: the order is checked against sysfs" \
	"^nxdctl: low_watermark (95) must not exceed high_watermark (90)$"
t "config --dry-run: good values" 0 "$NXDCTL" config vol0 --dry-run \
	write_threshold=128K mode=log_all
has "config --dry-run: prints the value" "^write_threshold=131072$"
[ "$(tunables)" = "$before" ] && ok "config --dry-run changes nothing" ||
	ko "config --dry-run changes nothing"
# Both watermarks above the current high: high must be written first.
t "config: raise both watermarks" 0 "$NXDCTL" config vol0 \
	low_watermark=92 high_watermark=95
[ "$(sed -n 1p "$OUT/last.out")" = high_watermark=95 ] &&
	[ "$(cat "$NXD/low_watermark")" = 92 ] &&
	[ "$(cat "$NXD/high_watermark")" = 95 ] &&
	ok "config: high written before a low above the old high" ||
	ko "config: high written before a low above the old high"
t "config: adaptive min above the current max" 1 "$NXDCTL" config vol0 \
	auto_min_threshold=2M
err_has "config: the adaptive bounds are checked against sysfs" \
	"^nxdctl: auto_min_threshold (2097152) must not exceed auto_max_threshold (1048576)$"
t "config: a stripe of part of a block" 1 "$NXDCTL" config vol0 \
	stripe_size=6000
err_has "config: the stripe's block multiple is named" \
	"^nxdctl: stripe_size (6000) must be a multiple of 4096$"
t "config: raise both adaptive bounds" 0 "$NXDCTL" config vol0 \
	auto_min_threshold=2M auto_max_threshold=4M
[ "$(sed -n 1p "$OUT/last.out")" = auto_max_threshold=4194304 ] &&
	[ "$(cat "$NXD/auto_min_threshold")" = 2097152 ] &&
	ok "config: max written before a min above the old max" ||
	ko "config: max written before a min above the old max"
echo 4096 >"$NXD/auto_min_threshold"
echo 1048576 >"$NXD/auto_max_threshold"
t "config: lower both watermarks" 0 "$NXDCTL" config vol0 \
	high_watermark=20 low_watermark=10
[ "$(sed -n 1p "$OUT/last.out")" = low_watermark=10 ] &&
	ok "config: low written before a high below the old low" ||
	ko "config: low written before a high below the old low"
# The kernel refuses a later key: the earlier ones are put back.  A
# read-only sysctl file (root may not write it either) stands in.
before=$(tunables)
mv "$NXD/destage_rate" "$OUT/rate.save"
ln -s /proc/sys/kernel/cap_last_cap "$NXD/destage_rate"
t "config: a write the kernel refuses" 3 "$NXDCTL" config vol0 \
	write_threshold=8K mode=passthrough destage_rate=7
rm "$NXD/destage_rate"
mv "$OUT/rate.save" "$NXD/destage_rate"
err_has "config: says nothing changed" "^nxdctl: vol0: nothing changed$"
[ "$(tunables)" = "$before" ] &&
	ok "config: the keys written before the refusal are put back" ||
	ko "config: the keys written before the refusal are put back"
# Back to the values the checks below expect.
for a in write_threshold:32768 mode:auto low_watermark:30 \
	high_watermark:90 destage_rate:0 ssd_discard:1 drain_on_suspend:1 \
	stream_share:40; do
	echo "${a#*:}" >"$NXD/${a%%:*}"
done
t "threshold --write above 1G" 1 "$NXDCTL" threshold vol0 --write 1025M
err_has "threshold: the range is named" \
	"^nxdctl: --write: expected 0 to 1G, got '1025M'$"

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
PROM_FAM_PY='
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
fam = {f.name: f for f in parse(open(sys.argv[1]).read())}
def val(name, **labels):
    for f in fam.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError((name, labels))
'
if $PY3 -c "$PROM_FAM_PY"'
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

# Prometheus: nxd_up, settings, base units, promtool's own check
if $PY3 -c "$PROM_FAM_PY"'
assert fam["nxd_up"].type == "gauge" and val("nxd_up") == 1
assert val("nxd_info", volume="vol0", mode="auto", hdd="", ssd="",
           uuid="00000000-0000-0000-0000-000000000000") == 1
assert val("nxd_write_threshold_bytes", volume="vol0") == 32768
assert val("nxd_low_watermark_ratio", volume="vol0") == 0.30
assert val("nxd_high_watermark_ratio", volume="vol0") == 0.90
assert val("nxd_destage_rate_limit_bytes_per_second", volume="vol0") == 0
assert val("nxd_stream_share_ratio", volume="vol0") == 0.40
assert val("nxd_recovery_seconds", volume="vol0") == 0.001234
assert fam["nxd_destage_throttled_seconds"].type == "counter"
assert fam["nxd_destage_busy_seconds"].type == "counter"
assert not [n for n in fam if n.endswith(("_ms", "_us"))], list(fam)
' "$OUT/prom.txt" >"$OUT/py.out" 2>&1; then
	ok "stats --prometheus: nxd_up, nxd_info, settings, seconds"
else
	ko "stats --prometheus: nxd_up, nxd_info, settings, seconds"
	sed 's/^/    /' "$OUT/py.out"
fi
# Counters in ms and us are exported in seconds.
if python3 - "$OUT/fig6.stats" "$OUT/prom.txt" >"$OUT/py.out" 2>&1 <<'PYEOF'
import sys
names = ["log_blocks", "log_used_blocks", "index_entries", "index_bytes",
         "writes_logged", "writes_direct", "writes_around_full", "reads_hdd",
         "reads_ssd", "segments_written", "log_blocks_written",
         "invalidations", "rmw_reads", "destaged_blocks", "destaged_bytes",
         "destage_bios", "destage_throttled_ms", "segments_reclaimed",
         "ssd_errors", "hdd_errors", "flushes", "discards",
         "recovered_segments", "recovered_blocks", "recovery_us",
         "degraded", "events", "last_event", "events_degraded",
         "events_log_full", "events_drain_done", "log_full",
         "destage_stripe_bios", "destage_busy_us"]
prom = {}
for line in open(sys.argv[2]):
    if not line.startswith("#"):
        k, v = line.rsplit(" ", 1)
        prom[k] = float(v)
import json
c = json.load(open(sys.argv[1].replace("fig6.stats", "stats.json")))["counters"]
for n, per in (("destage_busy_us", 1e6), ("destage_throttled_ms", 1e3)):
    k = 'nxd_%s_seconds_total{volume="vol0"}' % n.rsplit("_", 1)[0]
    assert abs(prom[k] - c[n] / per) < 1e-6, (k, prom[k], c[n])
PYEOF
then
	ok "stats --prometheus: _seconds_total = the ms and us counters converted"
else
	ko "stats --prometheus: _seconds_total = the ms and us counters converted"
	sed 's/^/    /' "$OUT/py.out"
fi
if command -v promtool >/dev/null; then
	if promtool check metrics <"$OUT/prom.txt" >"$OUT/promtool.out" 2>&1
	then
		ok "promtool check metrics: stats --prometheus"
	else
		ko "promtool check metrics: stats --prometheus"
		sed 's/^/    /' "$OUT/promtool.out"
	fi
else
	echo "SKIP promtool check metrics: no promtool (Debian's prometheus package; make deps)"
fi

# ---- health: exit status, action line, configured volumes not active ----
U0=00000000-0000-0000-0000-000000000000
UG=9a8b7c6d-0000-4000-8000-00000000abcd
printf 'vol0 UUID=%s\nghost UUID=%s\nha0 UUID=%s noauto\n' $U0 $UG \
	"$(echo $UG | tr 0 1)" >"$OUT/health.tab"
printf 'vol0 UUID=%s\n' $U0 >"$OUT/healthy.tab"
t "status, healthy: exit 0" 0 "$NXDCTL" status vol0 --interval 0
grep -q "action" "$OUT/last.out" && ko "status, healthy: no action line" ||
	ok "status, healthy: no action line"
t "list: the default config may be missing" 0 "$NXDCTL" list
t "status: the default config may be missing" 0 "$NXDCTL" status \
	--interval 0
t "list, healthy, config all active: exit 0" 0 "$NXDCTL" list \
	--config "$OUT/healthy.tab"
has "list: the active volume" "^vol0  *253:0 .* ok "
t "status, healthy, config all active: exit 0" 0 "$NXDCTL" status \
	--interval 0 --config "$OUT/healthy.tab"
has "status: every volume" "^vol0: ok$"
NXDCTL_TEST_SYSLOG="$OUT/syslog1" t "monitor --oneshot, healthy: exit 0" 0 \
	"$NXDCTL" monitor --oneshot --config "$OUT/healthy.tab"
[ ! -s "$OUT/last.out" ] && [ ! -e "$OUT/syslog1" ] &&
	ok "monitor --oneshot, healthy: nothing reported" ||
	ko "monitor --oneshot, healthy: nothing reported"
t "list: a configured volume not active: exit 2" 2 "$NXDCTL" list \
	--config "$OUT/health.tab"
has "list: the missing volume's row" "^ghost  *-  *-  *inactive  *- .* $UG$"
grep -q "^ha0" "$OUT/last.out" && ko "list: a noauto volume is not missing" ||
	ok "list: a noauto volume is not missing"
NXD_CONFIG="$OUT/health.tab" t "list --json: missing, \$NXD_CONFIG" 2 \
	"$NXDCTL" list --json
cp "$OUT/last.out" "$OUT/list-missing.json"
py "list --json: the missing volume" '
v = d["volumes"]
assert d["total"] == 2 and len(v) == 2, d
assert v[0]["name"] == "vol0" and v[0]["active"] is True, v[0]
assert v[1] == {"name": "ghost", "state": "inactive",
                "uuid": "9a8b7c6d-0000-4000-8000-00000000abcd",
                "active": False}, v[1]' "$OUT/list-missing.json"
t "status: a configured volume not active: exit 2" 2 "$NXDCTL" status \
	--interval 0 --config "$OUT/health.tab"
has "status: missing volume state" "^ghost: inactive$"
has "status: missing volume action" "^  action  *configured but not active: nxdctl assemble --all"
t "status VOL --config, active" 0 "$NXDCTL" status vol0 --interval 0 \
	--config "$OUT/health.tab"
t "status VOL: configured, not active: exit 2" 2 "$NXDCTL" status ghost \
	--interval 0 --config "$OUT/health.tab"
has "status VOL: inactive" "^ghost: inactive$"
has "status VOL: says configured but not active" \
	"^  action  *configured but not active"
[ ! -s "$OUT/last.err" ] && ok "status VOL: inactive is no error message" ||
	ko "status VOL: inactive is no error message"
NXD_CONFIG="$OUT/health.tab" t "status VOL, a noauto volume not active" 2 \
	"$NXDCTL" status ha0 --interval 0 --json
py "status VOL --json: inactive" '
v = d["volumes"]
assert len(v) == 1 and v[0]["name"] == "ha0" and v[0]["active"] is False, v
assert v[0]["state"] == "inactive", v' "$OUT/last.out"
t "status VOL VOL: active and inactive" 2 "$NXDCTL" status vol0 ghost \
	--interval 0 --config "$OUT/health.tab"
has "status VOL VOL: the active one" "^vol0: ok$"
has "status VOL VOL: the inactive one" "^ghost: inactive$"
t "list --config missing file" 1 "$NXDCTL" list --config "$OUT/nope.tab"
err_has "list --config missing file: says so" "^nxdctl: --config $OUT/nope.tab: no such file"
t "status --config missing file" 1 "$NXDCTL" status --config "$OUT/nope.tab"
NXDCTL_TEST_STATS="$OUT/acked-lost.stats" t "status, acked_lost: exit 5" 5 \
	"$NXDCTL" status vol0 --interval 0
has "status, acked_lost: action" "^  action  *acknowledged log writes were lost and flushes fail: check the file system (xfs_repair, e2fsck), replace the SSD, then reload the table (nxdctl stop vol0; nxdctl assemble), which clears it$"
NXDCTL_TEST_STATS="$OUT/acked-lost.stats" t \
	"monitor --oneshot, acked_lost: exit 5" 5 "$NXDCTL" monitor vol0 --oneshot
has "monitor --oneshot, acked_lost" " vol0 acked_lost state ok, .* (at start, event 0)$"
echo degraded >"$SYS/block/dm-0/nxd/state"
t "status, degraded: exit 5" 5 "$NXDCTL" status vol0 --interval 0
has "status, degraded: state" "^vol0: degraded$"
has "status, degraded: action names replace-ssd" "^  action  *the SSD failed and its log is on the HDD: replace the SSD online (nxdctl replace-ssd vol0 NEW_SSD) or fix its path and reload the same table$"
t "status --json, degraded: exit 5" 5 "$NXDCTL" status vol0 --json \
	--interval 0
cp "$OUT/last.out" "$OUT/status-degraded.json"
py "status --json, degraded: action" '
v = d["volumes"][0]
assert v["state"] == "degraded" and v["active"] is True
assert v["action"].startswith("the SSD failed"), v' "$OUT/status-degraded.json"
t "list, degraded: exit 5" 5 "$NXDCTL" list --config "$OUT/healthy.tab"
has "list, degraded: state" "^vol0  *253:0 .* degraded "
t "status, degraded and missing: exit 2" 2 "$NXDCTL" status --interval 0 \
	--config "$OUT/health.tab"
NXDCTL_TEST_SYSLOG="$OUT/syslog1" t "monitor --oneshot, degraded: exit 5" 5 \
	"$NXDCTL" monitor --oneshot --config "$OUT/healthy.tab"
has "monitor --oneshot: the degraded volume" "^20[0-9-]*T[0-9:.]*Z vol0 degraded state degraded, .* (at start, event 0)$"
[ "$(wc -l <"$OUT/last.out")" = 1 ] && ok "monitor --oneshot: one report" ||
	ko "monitor --oneshot: one report"
grep -q "^<26>vol0 degraded state degraded" "$OUT/syslog1" &&
	ok "monitor --oneshot: syslog" || ko "monitor --oneshot: syslog"
NXDCTL_TEST_SYSLOG="$OUT/syslog2" t \
	"monitor --oneshot --json, degraded and missing: exit 2" 2 "$NXDCTL" \
	monitor --oneshot --json --config "$OUT/health.tab"
grep -q "^<27>ghost missing state inactive (in the configuration file, not active)$" \
	"$OUT/syslog2" && ok "monitor --oneshot: a missing volume is daemon.err" ||
	ko "monitor --oneshot: a missing volume is daemon.err"
cp "$OUT/last.out" "$OUT/oneshot.ndjson"
if python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
assert [(l["volume"], l["events"], l["state"], l["initial"]) for l in ls] == [
    ("vol0", ["degraded"], "degraded", True),
    ("ghost", ["missing"], "inactive", True)], ls
assert "counters" not in ls[1]' "$OUT/oneshot.ndjson" 2>"$OUT/py.err"; then
	ok "monitor --oneshot --json: degraded, and the configured volume missing"
else
	ko "monitor --oneshot --json: degraded, and the configured volume missing"
	cat "$OUT/py.err" "$OUT/oneshot.ndjson"
fi
t "monitor --oneshot VOL, degraded: exit 5" 5 "$NXDCTL" monitor vol0 \
	--oneshot
t "stats --prometheus, degraded, missing" 0 "$NXDCTL" stats --prometheus \
	--config "$OUT/health.tab"
cp "$OUT/last.out" "$OUT/prom-missing.txt"
if $PY3 -c "$PROM_FAM_PY"'
assert val("nxd_up") == 1
assert val("nxd_state", volume="ghost", state="inactive") == 1
assert val("nxd_state", volume="ghost", state="ok") == 0
assert not any(s.labels.get("volume") == "ghost" for f in fam.values()
               for s in f.samples if f.name != "nxd_state")
' "$OUT/prom-missing.txt" >"$OUT/py.out" 2>&1; then
	ok "stats --prometheus: a configured volume not active is inactive"
else
	ko "stats --prometheus: a configured volume not active is inactive"
	sed 's/^/    /' "$OUT/py.out"
fi
t "stats --prometheus VOL, degraded" 0 "$NXDCTL" stats vol0 --prometheus
has "stats --prometheus: degraded state" '^nxd_state{volume="vol0",state="degraded"} 1$'
t "stats --prometheus --config missing file" 1 "$NXDCTL" stats \
	--prometheus --config "$OUT/nope.tab"
t "stats --config without --prometheus" 1 "$NXDCTL" stats vol0 \
	--config "$OUT/health.tab"
echo ok >"$SYS/block/dm-0/nxd/state"
unset NXDCTL_TEST_STATS
# Without dm-nxd: nxd_up 0, the configured volumes inactive, exit 0.
if [ ! -e /dev/nxd-control ]; then
	t "stats --prometheus without dm-nxd: exit 0" 0 "$NXDCTL" stats \
		--prometheus --config "$OUT/health.tab"
	has "stats --prometheus without dm-nxd: nxd_up 0" "^nxd_up 0$"
	has "stats --prometheus without dm-nxd: configured, inactive" \
		'^nxd_state{volume="ghost",state="inactive"} 1$'
	cp "$OUT/last.out" "$OUT/prom-down.txt"
	[ ! -s "$OUT/last.err" ] && ok "stats --prometheus without dm-nxd: quiet" ||
		ko "stats --prometheus without dm-nxd: quiet"
	if command -v promtool >/dev/null; then
		promtool check metrics <"$OUT/prom-down.txt" \
			>"$OUT/promtool.out" 2>&1 &&
			ok "promtool check metrics: without dm-nxd" ||
			ko "promtool check metrics: without dm-nxd"
	fi
	t "list without dm-nxd: exit 4" 4 "$NXDCTL" list
fi
t "config unknown attr" 1 "$NXDCTL" config vol0 bogus
chmod 0444 "$SYS/block/dm-0/nxd/mode"
if [ "$(id -u)" != 0 ]; then
	t "permission denied is exit 3" 3 "$NXDCTL" config vol0 mode=log_all
fi
unset NXDCTL_SYSFS
