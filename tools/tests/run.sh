#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# nxdctl tests that need no kernel module: the C unit tests of the
# formatting code, then the nxdctl binary driven through its test hooks
# (NXDCTL_TEST_STATS: stats from a file; NXDCTL_SYSFS: a fake sysfs tree).
# Run from tools/ (make check).  Prints "N passed, M failed".
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=tests/out
NXDCTL=./nxdctl
rm -rf "$OUT"
mkdir -p "$OUT"
pass=0
fail=0
# The config file and the removal marks of the boot-time assembly: ours.
export NXD_CONFIG="$OUT/no-nxdtab" NXD_REMOVED_DIR="$OUT/removed"

ok() { pass=$((pass + 1)); echo "PASS $*"; }
ko() { fail=$((fail + 1)); echo "FAIL $*"; }
# t NAME EXPECTED_RC CMD...: run, keep stdout/stderr in $OUT/last.*
t() {
	name=$1 want=$2
	shift 2
	"$@" >"$OUT/last.out" 2>"$OUT/last.err"
	rc=$?
	if [ "$rc" = "$want" ]; then
		ok "$name"
	else
		ko "$name (exit $rc, want $want)"
		sed 's/^/    /' "$OUT/last.err"
	fi
}
has() { # NAME PATTERN: last stdout matches
	if grep -q -e "$2" "$OUT/last.out"; then ok "$1"; else
		ko "$1: no '$2' in:"; sed 's/^/    /' "$OUT/last.out"; fi
}
err_has() {
	if grep -q -e "$2" "$OUT/last.err"; then ok "$1"; else
		ko "$1: no '$2' in stderr:"; sed 's/^/    /' "$OUT/last.err"; fi
}
py() { # NAME PYTHON_CODE FILE: the code sees d = json.load(FILE)
	if python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $2" \
		"$3" 2>"$OUT/py.err"; then ok "$1"; else
		ko "$1"; sed 's/^/    /' "$OUT/py.err"; fi
}

# ---- C unit tests ----
tests/test_fmt tests/figure6.txt "$OUT" >"$OUT/unit.log" 2>&1
cat "$OUT/unit.log"
pass=$((pass + $(grep -c '^PASS' "$OUT/unit.log")))
fail=$((fail + $(grep -c '^FAIL' "$OUT/unit.log")))
[ -s "$OUT/fig6.stats" ] || { ko "unit tests left no fig6.stats"; }

# ---- JSON written by the unit tests ----
py "hist.json parses, 16 buckets" \
	'assert len(d["buckets"]) == 16 and d["volume"] == "vol\"0"' \
	"$OUT/hist.json"
py "hist.json cells add up to the totals" '
for b in d["buckets"]:
    for k in ("read", "write"):
        x = b[k]
        for f in ("count", "bytes", "time_ns"):
            s = sum(x[r][a][f] for r in ("ssd", "hdd")
                    for a in ("aligned", "unaligned"))
            assert s == x[f], (b["label"], k, f)
assert d["buckets"][2]["write"]["count"] == 499318
assert d["buckets"][1]["read"]["count"] == 56796
assert d["buckets"][15]["max_bytes"] is None
assert d["buckets"][15]["label"] == "> 32M"' "$OUT/hist.json"
py "stats.json has every counter" '
c = d["counters"]
assert len(c) == 32 and c["writes_logged"] == 545386
assert list(c)[0] == "log_blocks" and list(c)[25] == "degraded"
assert list(c)[26:] == ["events", "last_event", "events_degraded",
                        "events_log_full", "events_drain_done", "log_full"]' \
	"$OUT/stats.json"
py "list.json" '
v = d["volumes"]
assert d["total"] == 2 and v[0]["name"] == "fast0"
assert (v[0]["major"], v[0]["minor"]) == (253, 0)
assert v[1]["mode"] == "passthrough"
assert v[0]["uuid"].startswith("ab000000-")
assert not any("read_threshold" in x for x in v)' "$OUT/list.json"

# ---- the binary, statistics from a file ----
export NXDCTL_TEST_STATS="$OUT/fig6.stats"
t "histogram" 0 $NXDCTL histogram vol0
if cmp -s "$OUT/last.out" tests/figure6.txt; then ok "histogram = Figure 6"
else ko "histogram = Figure 6"; diff tests/figure6.txt "$OUT/last.out"; fi
# --compat through the binary: NytroXD's 15 buckets a direction.  Figure 6
# has nothing above 32M, so it is Figure 6 without its two "> 32M" lines.
t "histogram --compat" 0 $NXDCTL histogram vol0 --compat
if grep -v '> 32M' tests/figure6.txt | cmp -s - "$OUT/last.out" &&
	[ "$(wc -l <"$OUT/last.out")" = 32 ]; then
	ok "histogram --compat = Figure 6 in 15 buckets a direction"
else
	ko "histogram --compat = Figure 6 in 15 buckets a direction"
	grep -v '> 32M' tests/figure6.txt | diff - "$OUT/last.out"
fi
t "histogram --json" 0 $NXDCTL histogram vol0 --json
cp "$OUT/last.out" "$OUT/cli-hist.json"
py "histogram --json parses" \
	'assert d["volume"] == "vol0" and d["buckets"][3]["write"]["count"] == 19954' \
	"$OUT/cli-hist.json"
t "histogram --routes" 0 $NXDCTL histogram vol0 --routes
has "routes header" "OP *SIZE *REQS *SSD *HDD *ALIGNED *UNALIGNED *MEAN_LAT"
has "routes > 32M row" "write > 32M"
NXDCTL_TEST_THRESHOLD=64K t "histogram --routes, why" 0 $NXDCTL histogram \
	vol0 --routes
has "routes: why columns" "HDD_LAT  *SSD_WHY  *HDD_WHY$"
has "routes: at or below the threshold: size, else full" \
	"^write 4K+1 - 8K .* size 332878  *full 166440$"
has "routes: above: unaligned, chunk; HDD: size" \
	"^write 64K+1 - 128K .* unaligned 6, chunk 19 size 14$"
has "routes: reads have no why" "^read  4K .* -  *-$"
NXDCTL_TEST_THRESHOLD=64K NXDCTL_TEST_MODE=passthrough t \
	"histogram --routes, passthrough" 0 $NXDCTL histogram vol0 --routes
has "routes: passthrough is the mode" "^write 4K+1 - 8K .* size|chunk 332878 *mode 166440$"
t "stats" 0 $NXDCTL stats vol0
has "stats by name" "^writes_logged  *545386$"
[ "$(wc -l <"$OUT/last.out")" = 32 ] && ok "stats prints 32 counters" ||
	ko "stats prints 32 counters"
t "stats --json" 0 $NXDCTL stats vol0 --json
cp "$OUT/last.out" "$OUT/cli-stats.json"
py "stats --json parses" 'assert d["counters"]["recovery_us"] == 1234' \
	"$OUT/cli-stats.json"

# ---- monitor, on readings from a file (NXDCTL_TEST_EVENTS) ----
py "event.json: one event, every field" '
assert d["events"] == ["degraded", "log_full", "drain_done"]
assert d["new"] == {"degraded": 1, "log_full": 1, "drain_done": 2}
assert d["event_nr"] == 7 and d["state"] == "ok" and d["device"] == "253:4"
assert d["counters"]["events_drain_done"] == 2 and len(d["counters"]) == 32' \
	"$OUT/event.json"
NXDCTL_TEST_EVENTS="$OUT/events.stats" t "monitor --json" 0 \
	$NXDCTL monitor ev0 --json
cp "$OUT/last.out" "$OUT/monitor.ndjson"
if python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
assert [l["events"] for l in ls] == [["log_full"], ["degraded", "drain_done"],
                                     ["removed"]], ls
assert [l["event_nr"] for l in ls] == [1, 3, 4]
assert ls[0]["counters"]["log_full"] == 1 and ls[0]["new"]["log_full"] == 1
assert ls[1]["state"] == "degraded" and ls[1]["counters"]["ssd_errors"] == 2
assert ls[1]["counters"]["last_event"] == 3
assert all(l["volume"] == "ev0" and l["time"] > 1.7e9 for l in ls)' \
	"$OUT/monitor.ndjson" 2>"$OUT/py.err"; then
	ok "monitor --json: one line per event, none for a wake-up without"
else
	ko "monitor --json: one line per event, none for a wake-up without"
	cat "$OUT/py.err" "$OUT/monitor.ndjson"
fi
NXDCTL_TEST_EVENTS="$OUT/events.stats" t "monitor --count 1" 0 \
	$NXDCTL monitor ev0 --count 1
[ "$(wc -l <"$OUT/last.out")" = 1 ] && ok "monitor --count 1: one line" ||
	ko "monitor --count 1: one line"
has "monitor text line" "^20[0-9-]*T[0-9:.]*Z ev0 log_full state unknown, log used 0%, dirty blocks 0, ssd_errors 0, hdd_errors 0 (event 1)$"
EXEC_OUT="$OUT/exec.out" NXDCTL_TEST_EVENTS="$OUT/events.stats" \
	t "monitor --exec" 0 \
	$NXDCTL monitor ev0 --exec 'echo "$NXD_VOLUME $NXD_EVENTS $NXD_STATE $NXD_NEW_DRAIN_DONE $NXD_SSD_ERRORS" >>"$EXEC_OUT"; exit 3'
[ ! -s "$OUT/last.out" ] && ok "monitor --exec alone prints nothing" ||
	ko "monitor --exec alone prints nothing"
if [ "$(cat "$OUT/exec.out")" = "ev0 log_full unknown 0 0
ev0 degraded,drain_done degraded 1 2
ev0 removed removed  " ]; then
	ok "monitor --exec: the event in the environment"
else
	ko "monitor --exec: the event in the environment"; cat "$OUT/exec.out"
fi
err_has "monitor --exec: a failing program is reported" "exited 3"
NXDCTL_TEST_EVENTS="$OUT/events.stats" t "monitor --json --exec" 0 \
	$NXDCTL monitor ev0 --json --exec true
[ "$(wc -l <"$OUT/last.out")" = 3 ] && ok "monitor --json --exec prints" ||
	ko "monitor --json --exec prints"
t "monitor: --count needs a number" 1 $NXDCTL monitor ev0 --count 0
t "monitor: two volumes" 1 $NXDCTL monitor a b
NXDCTL_TEST_EVENTS="$OUT/events.stats" t "monitor: hook needs a VOL" 1 \
	$NXDCTL monitor --json

# --watch: deltas of an unchanging file are zero; SIGINT ends it with 0.
timeout --preserve-status -s INT 2.6 $NXDCTL histogram vol0 --watch 1 --json \
	>"$OUT/watch.out" 2>"$OUT/watch.err"
rc=$?
[ $rc = 0 ] && ok "watch ends cleanly on SIGINT" ||
	ko "watch ends cleanly on SIGINT (exit $rc)"
if [ "$(wc -l <"$OUT/watch.out")" -ge 2 ] && python3 -c '
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    assert d["interval_s"] == 1
    assert all(b[k]["count"] == 0 for b in d["buckets"]
               for k in ("read", "write"))' "$OUT/watch.out"; then
	ok "watch --json: one zero-delta document per line"
else
	ko "watch --json: one zero-delta document per line"
	cat "$OUT/watch.out"
fi
timeout --preserve-status -s INT 1.5 $NXDCTL histogram vol0 --watch 1 >"$OUT/watch.out" 2>&1
grep -q "^--- .* vol0, last 1 s ---" "$OUT/watch.out" &&
	grep -q "^Num Writes 4K+1 - 8K         = 0$" "$OUT/watch.out" &&
	ok "watch text shows zero deltas" || ko "watch text shows zero deltas"

t "suggest-threshold" 0 $NXDCTL suggest-threshold vol0 --ssd-iops 20000 \
	--ssd-mbps 500 --hdd-iops 150 --hdd-mbps 200
has "suggests 512K" "^Suggested write threshold: 512K (524288 bytes)"
has "explains" "^Why: the HDD spends about 6.67 ms"
has "reports the share" "100.0% of the write requests (545386 of 545386)"
has "says how to apply" "nxdctl threshold vol0 --write 512K"
t "suggest-threshold on a RAID6" 0 $NXDCTL suggest-threshold vol0 \
	--ssd-iops 20000 --ssd-mbps 500 --hdd-iops 150 --hdd-mbps 200 \
	--stripe 256K --chunk 64K
has "capped at the stripe" "^Suggested write threshold: 256K (262144 bytes)"
has "says what the costs alone said" "The costs alone would say 512K"
has "names the geometry" "^Array: full stripe 256K, chunk 64K \\[given\\]"
has "names chunk misalignment" "Writes not aligned to the chunk (64K) also go to the log"
t "suggest-threshold --no-stripe-cap" 0 $NXDCTL suggest-threshold vol0 \
	--ssd-iops 20000 --ssd-mbps 500 --hdd-iops 150 --hdd-mbps 200 \
	--stripe 256K --chunk 64K --no-stripe-cap
has "uncapped" "^Suggested write threshold: 512K"
t "suggest-threshold, HDD as fast as SSD" 0 $NXDCTL suggest-threshold \
	vol0 --ssd-iops 20000 --ssd-mbps 500 --hdd-iops 20000 --hdd-mbps 500
has "no threshold pays off" "^No threshold pays off"
t "suggest-threshold, bad speed" 1 $NXDCTL suggest-threshold vol0 \
	--hdd-iops -5
unset NXDCTL_TEST_STATS

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
t "threshold by name" 0 $NXDCTL threshold vol0
has "threshold prints write" "^write_threshold 65536 (64K)$"
grep -q read_threshold "$OUT/last.out" &&
	ko "threshold prints no read threshold" ||
	ok "threshold prints no read threshold"
t "threshold by dm-0" 0 $NXDCTL threshold dm-0
t "threshold by /dev/dm-0" 0 $NXDCTL threshold /dev/dm-0
t "threshold by /dev/mapper/vol0" 0 $NXDCTL threshold /dev/mapper/vol0
t "threshold by /dev/nxd/vol0" 0 $NXDCTL threshold /dev/nxd/vol0
t "threshold --read (removed)" 1 $NXDCTL threshold vol0 --write 1M \
	--read 256K
err_has "threshold --read message" "bad option or missing value: '--read'"
[ "$(cat "$SYS/block/dm-0/nxd/write_threshold")" = 65536 ] &&
	[ ! -e "$SYS/block/dm-0/nxd/read_threshold" ] &&
	ok "threshold --read changes nothing" ||
	ko "threshold --read changes nothing"
t "threshold --write 1M" 0 $NXDCTL threshold vol0 --write 1M
[ "$(cat "$SYS/block/dm-0/nxd/write_threshold")" = 1048576 ] &&
	ok "threshold writes bytes to sysfs" ||
	ko "threshold writes bytes to sysfs"
t "threshold --write junk" 1 $NXDCTL threshold vol0 --write 12Q
t "threshold --write > 4G" 1 $NXDCTL threshold vol0 --write 8G
t "unknown volume" 2 $NXDCTL threshold nosuch
err_has "unknown volume message" "volume 'nosuch' not found"
t "config lists all" 0 $NXDCTL config vol0
has "config mode" "^mode=auto$"
has "config state" "^state=ok$"
[ "$(grep -c = "$OUT/last.out")" = 9 ] &&
	! grep -q read_threshold "$OUT/last.out" &&
	ok "config lists 7 tunables and 2 read-only, no read_threshold" ||
	ko "config lists 7 tunables and 2 read-only, no read_threshold"
t "config read_threshold (removed)" 1 $NXDCTL config vol0 \
	read_threshold=0
err_has "config read_threshold message" \
	"unknown writable attribute 'read_threshold'"
t "config set" 0 $NXDCTL config vol0 high_watermark=90 write_threshold=32K
[ "$(cat "$SYS/block/dm-0/nxd/write_threshold")" = 32768 ] &&
	[ "$(cat "$SYS/block/dm-0/nxd/high_watermark")" = 90 ] &&
	ok "config writes sysfs" || ko "config writes sysfs"
t "config read-only attr" 1 $NXDCTL config vol0 state=x

# status, list and --prometheus: statistics from the file, state from sysfs
export NXDCTL_TEST_STATS="$OUT/fig6.stats"
t "status" 0 $NXDCTL status vol0 --interval 0
has "status: state" "^vol0: ok$"
has "status: log use" "^  log  *0.4% used (3.9M of 1.0G)$"
has "status: dirty" "^  dirty  *0 blocks logged and not yet on the HDD"
has "status: destage, not measured" "^  destage  *rate not measured (no limit)"
has "status: writes" "^  writes  *545386 logged, 0 to the HDD, 0 around a full log$"
has "status: errors" "^  errors  *SSD 0, HDD 0$"
has "status: recovery" "^  recovery .* in 1.2 ms at activation$"
t "status, with a rate" 0 $NXDCTL status vol0 --interval 0.2
has "status: rate of an unchanged file" "^  destage  *0.0 MiB/s over the last 0.2 s"
t "status --json" 0 $NXDCTL status vol0 --json --interval 0
cp "$OUT/last.out" "$OUT/status.json"
py "status --json" '
v = d["volumes"][0]
assert d["time"] > 0 and v["name"] == "vol0" and v["state"] == "ok"
assert v["log_bytes"] == 262144 * 4096 and v["log_used_bytes"] == 1000 * 4096
assert abs(v["log_used_pct"] - 100 * 1000 / 262144) < 1e-3
assert v["destage_bytes_per_s"] is None and v["destage_rate_limit_mib_s"] == 0
assert v["writes_logged"] == 545386 and v["recovery_us"] == 1234
assert "read_threshold" not in v' \
	"$OUT/status.json"
t "status: bad interval" 1 $NXDCTL status vol0 --interval x
t "stats --prometheus" 0 $NXDCTL stats vol0 --prometheus
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
t "stats --prometheus --json" 1 $NXDCTL stats vol0 --prometheus --json
unset NXDCTL_TEST_STATS
t "config unknown attr" 1 $NXDCTL config vol0 bogus
chmod 0444 "$SYS/block/dm-0/nxd/mode"
if [ "$(id -u)" != 0 ]; then
	t "permission denied is exit 3" 3 $NXDCTL config vol0 mode=log_all
fi
unset NXDCTL_SYSFS

# ---- create --dry-run ----
truncate -s 10G "$OUT/hdd.img"
truncate -s 1G "$OUT/ssd.img"
truncate -s 1M "$OUT/tiny.img"
t "create --dry-run" 0 $NXDCTL create v0 "$OUT/hdd.img" "$OUT/ssd.img" \
	--dry-run --write-threshold 64K --mode log_all \
	--low-watermark 20 --high-watermark 70 --destage-rate 100 \
	--ssd-discard 1 --drain-on-suspend 0 --format
has "create table line" "^dmsetup create v0 --table '0 20969472 nxd $OUT/hdd.img $OUT/ssd.img 15 write_threshold 65536 mode log_all low_watermark 20 high_watermark 70 destage_rate 100 ssd_discard 1 drain_on_suspend 0 format'$"
has "create --format: DM UUID from the new volume's" \
	"^dmsetup rename v0 --setuuid NXD-<volume UUID the format makes>$"
t "create --read-threshold (removed)" 1 $NXDCTL create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --read-threshold 1M
err_has "create --read-threshold message" \
	"bad option or missing value: '--read-threshold'"
t "create --dry-run, no options" 0 $NXDCTL create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --uuid MY-UUID
has "create table line, no options" "^dmsetup create v0 --uuid MY-UUID --table '0 20969472 nxd $OUT/hdd.img $OUT/ssd.img'$"
t "create: HDD too small" 1 $NXDCTL create v0 "$OUT/tiny.img" \
	"$OUT/ssd.img" --dry-run
t "create: SSD too small" 1 $NXDCTL create v0 "$OUT/hdd.img" \
	"$OUT/tiny.img" --dry-run
t "create: bad mode" 1 $NXDCTL create v0 "$OUT/hdd.img" "$OUT/ssd.img" \
	--dry-run --mode fast
t "create: watermark > 100" 1 $NXDCTL create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --high-watermark 101
t "create: bad name" 1 $NXDCTL create a/b "$OUT/hdd.img" "$OUT/ssd.img" \
	--dry-run
t "create: missing HDD" 2 $NXDCTL create v0 "$OUT/nope" "$OUT/ssd.img" \
	--dry-run
t "create: file without --dry-run" 2 $NXDCTL create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img"
t "create: missing argument" 1 $NXDCTL create v0 "$OUT/hdd.img"
t "create: --name is not create's" 1 $NXDCTL create v0 "$OUT/hdd.img" \
	"$OUT/ssd.img" --dry-run --name x
t "assemble: no --format" 1 $NXDCTL assemble --format

# ---- the config file (nxdtab): parsing, without devices ----
U1=01020304-0506-0708-090a-0b0c0d0e0f10
U2=11121314-1516-1718-191a-1b1c1d1e1f20
cat >"$OUT/bad.tab" <<EOF
# nxdtab with every kind of mistake; the good lines are noauto
good0	UUID=$U1 noauto,write-threshold=64K,mode=log_all  # a comment
good1 uuid=$(echo $U2 | tr a-f A-F) noauto,drain_on_stop

bad/name UUID=$U1
nouuid
badu UUID=1234-5678
badopt UUID=21222324-2526-2728-292a-2b2c2d2e2f30 frob=1
badval UUID=21222324-2526-2728-292a-2b2c2d2e2f30 write-threshold=12Q
dupname UUID=21222324-2526-2728-292a-2b2c2d2e2f30 noauto
dupname UUID=31323334-3536-3738-393a-3b3c3d3e3f40 noauto
dupuuid UUID=$U1
twice UUID=41424344-4546-4748-494a-4b4c4d4e4f50 mode=auto,mode=log_all
flagval UUID=51525354-5556-5758-595a-5b5c5d5e5f60 noauto=1
noval UUID=61626364-6566-6768-696a-6b6c6d6e6f70 write-threshold
extra UUID=71727374-7576-7778-797a-7b7c7d7e7f80 noauto more
format UUID=81828384-8586-8788-898a-8b8c8d8e8f90 format
wm UUID=91929394-9596-9798-999a-9b9c9d9e9fa0 high-watermark=101
EOF
NXD_CONFIG="$OUT/bad.tab" t "nxdtab: bad lines, exit 1" 1 $NXDCTL assemble \
	--all --dry-run
for l in "5: bad volume name 'bad/name'" "6: no UUID=<volume uuid> after nouuid" \
	"7: bad volume UUID '1234-5678'" "8: unknown option 'frob'" \
	"9: --write-threshold: bad size '12Q'" \
	"11: volume name dupname already at line 10" \
	"12: volume UUID $U1 already at line 2" "13: mode given twice" \
	"14: noauto takes no value" "15: write-threshold needs a value" \
	"16: unexpected 'more'" "17: unknown option 'format'" \
	"18: --high-watermark: expected a number from 0 to 100"; do
	err_has "nxdtab: error at line ${l%%:*}" "^nxdctl: $OUT/bad.tab:$l"
done
[ "$(grep -c "^nxdctl: $OUT/bad.tab:" "$OUT/last.err")" = 13 ] &&
	! grep -q "Try 'nxdctl" "$OUT/last.err" &&
	ok "nxdtab: one error a bad line, no usage hint" ||
	ko "nxdtab: one error a bad line, no usage hint"
has "nxdtab: good line kept (noauto)" "^good0: noauto in $OUT/bad.tab: not assembled$"
has "nxdtab: upper-case UUID= and UUID, drain_on_stop" "^good1: noauto in"
has "nxdtab: line 10 kept" "^dupname: noauto in"
NXD_CONFIG="$OUT/bad.tab" t "stop: needs VOL or --all" 1 $NXDCTL stop
t "stop: --all takes no VOL" 1 $NXDCTL stop --all x
if [ ! -e /dev/nxd-control ]; then
	t "stop --all without dm-nxd" 0 $NXDCTL stop --all
	has "stop --all without dm-nxd says so" "^no nxd volume is active (dm-nxd is not loaded)$"
fi
t "assemble --all takes no DEVICE" 1 $NXDCTL assemble --all /dev/null
t "assemble --auto needs a DEVICE" 1 $NXDCTL assemble --auto
t "assemble --all --name" 1 $NXDCTL assemble --all --name x
printf 'v UUID=%s noauto\n' $U1 >"$OUT/one.tab"
t "assemble --all: table options come from the config" 1 $NXDCTL \
	assemble --all --config "$OUT/one.tab" --write-threshold 4K
err_has "assemble --all: says so" "table options come from $OUT/one.tab"
t "assemble --all --config FILE" 0 $NXDCTL assemble --all --config \
	"$OUT/one.tab" --dry-run
has "assemble --all --config FILE read" "^v: noauto in $OUT/one.tab"
t "assemble --all: unreadable config" 4 $NXDCTL assemble --all --config \
	"$OUT"

# ---- create: what it would overwrite (libblkid, the HDD's last MiB) ----
truncate -s 0 "$OUT/fs.img" "$OUT/tail.img"
truncate -s 300M "$OUT/fs.img" "$OUT/tail.img"
if mkfs.ext4 -q -F -L ost0 "$OUT/fs.img" >/dev/null 2>&1; then
	t "create: HDD with a file system" 1 $NXDCTL create v0 "$OUT/fs.img" \
		"$OUT/ssd.img" --dry-run
	err_has "create: names the file system" "HDD $OUT/fs.img holds ext4 UUID .* LABEL 'ost0'"
	err_has "create: says why" "cannot be.*converted in place\|converted in place"
	err_has "create: says how to go ahead" "(--force to go ahead)"
	[ -s "$OUT/last.out" ] && ko "create: refused before the table line" ||
		ok "create: refused before the table line"
	t "create: HDD with a file system, --force" 0 $NXDCTL create v0 \
		"$OUT/fs.img" "$OUT/ssd.img" --dry-run --force
	has "create --force prints the table" "^dmsetup create v0 "
	t "create: SSD with a file system" 1 $NXDCTL create v0 "$OUT/hdd.img" \
		"$OUT/fs.img" --dry-run
	err_has "create: names the SSD's file system" "SSD $OUT/fs.img holds ext4"
	t "create: SSD with a file system, --format" 1 $NXDCTL create v0 \
		"$OUT/hdd.img" "$OUT/fs.img" --dry-run --format
else
	echo "SKIP create signature tests (no mkfs.ext4)"
fi
printf 'data' | dd of="$OUT/tail.img" bs=1 seek=$((300 * 1048576 - 5000)) \
	conv=notrunc 2>/dev/null
t "create: data in the HDD's last MiB" 1 $NXDCTL create v0 "$OUT/tail.img" \
	"$OUT/ssd.img" --dry-run
err_has "create: names the offset" "holds data in its last MiB (at byte $((300 * 1048576 - 5000)))"

# ---- assemble / udev-info on loop devices (root, losetup, the core) ----
LOOPS=
cleanup_loops() {
	for l in $LOOPS; do losetup -d "$l" 2>/dev/null; done
	LOOPS=
}
loop() { # FILE: attach it; the device goes to $DEV (no subshell: $LOOPS)
	DEV=$(losetup -f --show "$1" 2>/dev/null) || return 1
	LOOPS="$LOOPS $DEV"
}
if [ "$(id -u)" = 0 ] && [ -x tests/mkmeta ] && command -v losetup \
	>/dev/null && loop "$OUT/hdd.img"; then
	l=$DEV
	trap cleanup_loops EXIT
	for v in a b; do
		truncate -s 0 "$OUT/ssd-$v.img" "$OUT/hdd-$v.img"
		truncate -s 64M "$OUT/ssd-$v.img"
		truncate -s 300M "$OUT/hdd-$v.img"
	done
	tests/mkmeta "$OUT/ssd-a.img" "$OUT/hdd-a.img" 16
	tests/mkmeta "$OUT/ssd-b.img" "$OUT/hdd-b.img" 48
	loop "$OUT/ssd-a.img" && SA=$DEV
	loop "$OUT/hdd-a.img" && HA=$DEV
	loop "$OUT/ssd-b.img" && SB=$DEV
	loop "$OUT/hdd-b.img" && HB=$DEV
	UA=10111213-1415-1617-1819-1a1b1c1d1e1f
	t "udev-info: SSD" 0 $NXDCTL udev-info "${SA#/dev/}"
	has "udev-info: SSD role" "^NXD_ROLE=ssd$"
	has "udev-info: SSD volume uuid" "^NXD_VOL_UUID=$UA$"
	has "udev-info: SSD hdd uuid" "^NXD_HDD_UUID=90919293-"
	t "udev-info: HDD" 0 $NXDCTL udev-info "$HA"
	has "udev-info: HDD role" "^NXD_ROLE=hdd$"
	t "udev-info: other device" 0 $NXDCTL udev-info "${l#/dev/}"
	[ -s "$OUT/last.out" ] && ko "udev-info: nothing for others" ||
		ok "udev-info: nothing for others"
	t "assemble from the SSD" 0 $NXDCTL assemble "$SA" --dry-run
	has "assemble pairs A" "^dmsetup create nxd-10111213 --uuid NXD-$UA --table '0 612352 nxd $HA $SA'$"
	t "assemble from the HDD, named" 0 $NXDCTL assemble "${HB#/dev/}" \
		--dry-run --name bee --write-threshold 32K
	has "assemble pairs B" "^dmsetup create bee --uuid NXD-30313233-.* --table '0 612352 nxd $HB $SB 2 write_threshold 32768'$"
	t "assemble everything" 0 $NXDCTL assemble --dry-run
	has "assemble everything: A" "nxd $HA $SA'$"
	has "assemble everything: B" "nxd $HB $SB'$"
	# ---- boot-time assembly: the config file, the removal marks ----
	UB=30313233-3435-3637-3839-3a3b3c3d3e3f
	cat >"$OUT/nxdtab" <<EOF
# two volumes, B not at boot
alpha UUID=$UA write_threshold=64K,mode=log_all,drain-on-stop
beta  UUID=$UB noauto
EOF
	export NXD_CONFIG="$OUT/nxdtab"
	t "assemble --all" 0 $NXDCTL assemble --all --dry-run
	has "assemble --all: A with its NAME, UUID and options" "^dmsetup create alpha --uuid NXD-$UA --table '0 612352 nxd $HA $SA 4 write_threshold 65536 mode log_all'$"
	has "assemble --all: B noauto" "^beta: noauto in $OUT/nxdtab: not assembled$"
	grep -q "nxd $HB" "$OUT/last.out" && ko "assemble --all: B left alone" ||
		ok "assemble --all: B left alone"
	t "assemble --auto: A from its HDD" 0 $NXDCTL assemble --auto \
		"$HA" --dry-run
	has "assemble --auto: A named" "^dmsetup create alpha --uuid NXD-$UA .* 4 write_threshold 65536 mode log_all'$"
	t "assemble --auto: B noauto" 0 $NXDCTL assemble --auto "$SB" --dry-run
	has "assemble --auto: B says noauto" "^beta: noauto"
	mkdir -p "$NXD_REMOVED_DIR"
	echo alpha >"$NXD_REMOVED_DIR/$UA"
	t "assemble --all: A removed on purpose" 0 $NXDCTL assemble --all \
		--dry-run
	has "assemble --all: says A was removed" "^volume $UA was removed with nxdctl remove"
	grep -q "^dmsetup" "$OUT/last.out" && ko "assemble --all: nothing made" ||
		ok "assemble --all: nothing made"
	t "assemble --auto: A removed on purpose" 0 $NXDCTL assemble --auto \
		"$SA" --dry-run
	has "assemble --auto: says A was removed" "^volume $UA was removed"
	t "assemble DEVICE: A by hand" 0 $NXDCTL assemble "$SA" --dry-run
	has "assemble DEVICE: A by hand, as its config line says" "^dmsetup create alpha --uuid NXD-$UA .* 4 write_threshold 65536 mode log_all'$"
	t "assemble DEVICE --name: A by hand" 0 $NXDCTL assemble "$SA" \
		--dry-run --name a1
	has "assemble DEVICE --name: not the config's" "^dmsetup create a1 --uuid NXD-$UA .*nxd $HA $SA'$"
	t "assemble DEVICE --config" 0 $NXDCTL assemble "$SB" --dry-run \
		--config "$OUT/one.tab"
	has "assemble DEVICE --config: B not in it" "^dmsetup create nxd-30313233 "
	NXD_CONFIG="$OUT/nope" t "assemble --all, no config" 0 $NXDCTL \
		assemble --all --dry-run
	has "assemble --all, no config: B" "^dmsetup create nxd-30313233 .*nxd $HB $SB'$"
	has "assemble --all, no config: not A" "^volume $UA was removed"
	rm -f "$NXD_REMOVED_DIR/$UA"
	printf 'alpha UUID=%s\n' "$(echo $UA | tr 0 9)" >"$OUT/gone.tab"
	t "assemble --all: a volume not present" 2 $NXDCTL assemble --all \
		--config "$OUT/gone.tab" --dry-run
	err_has "assemble --all: names it" "alpha: neither the SSD nor the HDD of volume 19111213-.* is present ($OUT/gone.tab:1)"
	export NXD_CONFIG="$OUT/no-nxdtab"
	# Copy A of the superblock damaged: copy B still serves.
	printf 'X' | dd of="$OUT/ssd-a.img" bs=1 seek=100 conv=notrunc \
		2>/dev/null
	t "assemble with one bad superblock copy" 0 $NXDCTL assemble "$SA" \
		--dry-run
	# A second HDD with the same label: ambiguous.
	cp "$OUT/hdd-a.img" "$OUT/hdd-a2.img"
	loop "$OUT/hdd-a2.img" && HA2=$DEV
	t "assemble: two matching HDDs" 2 $NXDCTL assemble "$SA" --dry-run
	err_has "assemble: ambiguity named" "both .* match"
	losetup -d "$HA" "$HA2"
	t "assemble: HDD missing" 2 $NXDCTL assemble "$SA" --dry-run
	err_has "assemble: HDD missing message" "its HDD is not present"
	t "assemble: not nxd" 2 $NXDCTL assemble "$l" --dry-run

	# ---- nxd-probe (the udev helper) ----
	t "nxd-probe: SSD" 0 ./nxd-probe "$SA"
	has "nxd-probe: SSD role" "^NXD_ROLE=ssd$"
	has "nxd-probe: SSD fs type" "^NXD_FS_TYPE=nxd_log$"
	has "nxd-probe: SSD usage" "^NXD_FS_USAGE=other$"
	has "nxd-probe: SSD volume uuid" "^NXD_VOL_UUID=$UA$"
	has "nxd-probe: SSD clean" "^NXD_SB_CLEAN=1$"
	t "nxd-probe: HDD" 0 ./nxd-probe "$HB"
	has "nxd-probe: HDD fs type" "^NXD_FS_TYPE=nxd_hdd$"
	has "nxd-probe: HDD usage" "^NXD_FS_USAGE=raid$"
	has "nxd-probe: HDD uuids" "^NXD_HDD_UUID=b0b1b2b3-"
	t "nxd-probe: other device" 0 ./nxd-probe "$l"
	[ -s "$OUT/last.out" ] && ko "nxd-probe: nothing for others" ||
		ok "nxd-probe: nothing for others"
	t "nxd-probe: usage" 1 ./nxd-probe
	t "nxd-probe --links" 0 ./nxd-probe --links uuid=U1 label=L1 \
		disk/by-id/md-uuid-1 disk/by-uuid/U1 disk/by-label/L1 \
		disk/by-label/L2 md/ost0
	has "nxd-probe --links drops the fs links" \
		"^NXD_LINKS=disk/by-id/md-uuid-1 disk/by-label/L2 md/ost0$"
	t "nxd-probe --links, no fs" 0 ./nxd-probe --links uuid= label= a
	has "nxd-probe --links keeps the rest" "^NXD_LINKS=a$"

	# ---- wipe: C's log holds 3 segments of writes, D's is empty ----
	for v in c d; do
		truncate -s 0 "$OUT/ssd-$v.img" "$OUT/hdd-$v.img"
		truncate -s 64M "$OUT/ssd-$v.img"
		truncate -s 300M "$OUT/hdd-$v.img"
	done
	tests/mkmeta "$OUT/ssd-c.img" "$OUT/hdd-c.img" 64 3
	tests/mkmeta "$OUT/ssd-d.img" "$OUT/hdd-d.img" 80
	loop "$OUT/ssd-c.img" && SC=$DEV
	loop "$OUT/hdd-c.img" && HC=$DEV
	loop "$OUT/ssd-d.img" && SD=$DEV
	loop "$OUT/hdd-d.img" && HD=$DEV
	# ---- show-super, before C is wiped ----
	t "show-super: SSD" 0 $NXDCTL show-super "$SC"
	has "show-super: copy in use" "^  copy B  *block 1: valid, sb_seq 2 (in use)$"
	has "show-super: uuid" "^  volume UUID  *40414243-4445-4647-4849-4a4b4c4d4e4f$"
	has "show-super: head" "^  head  *position 6, segment 4$"
	has "show-super: the log" "^  log  *3 live segments from segment 1, 3 data blocks not yet on the HDD$"
	has "show-super: the HDD found" "^  HDD  *$HC$"
	t "show-super: HDD" 0 $NXDCTL show-super "${HC#/dev/}"
	has "show-super: label position" "nxd HDD label, format 1, at sector 612352$"
	t "show-super --json" 0 $NXDCTL show-super "$SC" --json
	cp "$OUT/last.out" "$OUT/super.json"
	py "show-super --json" '
assert d["role"] == "ssd" and d["in_use"] == 1
assert [c["decode"] for c in d["copies"]] == ["valid", "valid"]
sb = d["superblock"]
assert sb["sb_seq"] == 2 and sb["head_seq"] == 4 and sb["clean"] is True
assert sb["ring_blocks"] == 64 * 256 - 8 and sb["data_sectors"] == 612352
assert d["log"]["live_segments"] == 3 and d["log"]["data_blocks"] == 3' \
		"$OUT/super.json"
	printf 'X' | dd of="$SC" bs=1 seek=100 conv=notrunc 2>/dev/null
	t "show-super: a damaged copy" 0 $NXDCTL show-super "$SC"
	has "show-super: names the damage" "^  copy A  *block 0: bad checksum$"
	t "show-super: not nxd" 2 $NXDCTL show-super "$l"
	t "wipe: SSD with writes in its log" 1 $NXDCTL wipe "$SC"
	err_has "wipe: says the log holds writes" "holds writes not yet on the HDD"
	err_has "wipe: names the first segment" "segment 1 onwards"
	t "wipe: its HDD" 1 $NXDCTL wipe "${HC#/dev/}"
	t "wipe --dry-run --force" 0 $NXDCTL wipe "$SC" --dry-run --force
	has "wipe --dry-run says what" "would wipe the nxd SSD superblocks .* (32768 bytes at offset 0), with writes still in its log"
	./nxd-probe "$SC" | grep -q "^NXD_ROLE=ssd$" &&
		ok "wipe --dry-run changes nothing" ||
		ko "wipe --dry-run changes nothing"
	t "wipe --force" 0 $NXDCTL wipe -f "$SC"
	[ -z "$(./nxd-probe "$SC")" ] && cmp -s -n 32768 "$SC" /dev/zero &&
		ok "wipe --force zeroed both superblocks" ||
		ko "wipe --force zeroed both superblocks"
	cmp -s -i 32768 -n 8192 "$SC" "$OUT/ssd-c.img" &&
		! cmp -s -i 32768 -n 8192 "$SC" /dev/zero &&
		ok "wipe leaves the ring alone" || ko "wipe leaves the ring alone"
	t "wipe: HDD whose SSD is gone" 1 $NXDCTL wipe "$HC"
	err_has "wipe: SSD not present" "SSD of volume 40414243-.* is not present"
	t "wipe: HDD, forced" 0 $NXDCTL wipe "$HC" --force
	[ -z "$(./nxd-probe "$HC")" ] && ok "wipe: label gone" ||
		ko "wipe: label gone"
	t "wipe: nothing left" 0 $NXDCTL wipe "$HC"
	has "wipe: nothing left says so" "no nxd signature"
	t "wipe: empty log, HDD then SSD" 0 $NXDCTL wipe "$HD" "$SD"
	[ -z "$(./nxd-probe "$HD")$(./nxd-probe "$SD")" ] &&
		ok "wipe: both halves clean" || ko "wipe: both halves clean"
	t "wipe: missing device" 2 $NXDCTL wipe "$OUT/nope"

	# ---- the name and tunables the superblock stores ----
	# G: named ost7, tunables stored; H: a name that is no dm name.
	for v in g h; do
		truncate -s 0 "$OUT/ssd-$v.img" "$OUT/hdd-$v.img"
		truncate -s 64M "$OUT/ssd-$v.img"
		truncate -s 300M "$OUT/hdd-$v.img"
	done
	tests/mkmeta "$OUT/ssd-g.img" "$OUT/hdd-g.img" 128 0 ost7 \
		12288,2,10,60,300,0,1
	tests/mkmeta "$OUT/ssd-h.img" "$OUT/hdd-h.img" 144 0 "has space"
	loop "$OUT/ssd-g.img" && SG=$DEV
	loop "$OUT/hdd-g.img" && HG=$DEV
	loop "$OUT/ssd-h.img" && SH=$DEV
	loop "$OUT/hdd-h.img" && HH=$DEV
	UG=80818283-8485-8687-8889-8a8b8c8d8e8f
	GOPTS="14 write_threshold 12288 mode log_all low_watermark 10 high_watermark 60 destage_rate 300 ssd_discard 0 drain_on_suspend 1"
	t "show-super: stored name" 0 $NXDCTL show-super "$SG"
	has "show-super: the name" "^  name  *ost7$"
	has "show-super: the tunables" "^  tunables  *write_threshold 12288 mode log_all low_watermark 10 high_watermark 60 destage_rate 300 ssd_discard 0 drain_on_suspend 1$"
	t "show-super --json: stored name" 0 $NXDCTL show-super "$SG" --json
	cp "$OUT/last.out" "$OUT/super-g.json"
	py "show-super --json: name and tunables" '
sb = d["superblock"]
assert sb["name"] == "ost7", sb["name"]
assert sb["tunables"] == {"write_threshold": 12288, "mode": "log_all",
	"low_watermark": 10, "high_watermark": 60, "destage_rate": 300,
	"ssd_discard": 0, "drain_on_suspend": 1}, sb["tunables"]
assert all(c["superblock"]["name"] == "ost7" for c in d["copies"])' \
		"$OUT/super-g.json"
	t "show-super: an older superblock" 0 $NXDCTL show-super "$SB"
	has "show-super: no name stored" "^  name  *none stored$"
	has "show-super: no tunables stored" "^  tunables  *none stored$"
	t "show-super --json: an older superblock" 0 $NXDCTL show-super \
		"$SB" --json
	cp "$OUT/last.out" "$OUT/super-b.json"
	py "show-super --json: nothing stored" '
sb = d["superblock"]
assert sb["name"] == "" and sb["tunables"] is None, sb' "$OUT/super-b.json"
	t "assemble: the stored name and tunables" 0 $NXDCTL assemble "$SG" \
		--dry-run
	has "assemble: ost7 as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	t "assemble --auto, no config: stored" 0 $NXDCTL assemble --auto \
		"$HG" --dry-run
	has "assemble --auto, no config: ost7 as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	# (exit 2: A's HDD was detached above)
	t "assemble --all, no config: stored" 2 $NXDCTL assemble --all \
		--dry-run
	has "assemble --all, no config: ost7 as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	has "assemble --all, no config: older B as before" "^dmsetup create nxd-30313233 .*nxd $HB $SB'$"
	t "assemble --all, no config, options given" 2 $NXDCTL assemble \
		--all --dry-run --write-threshold 32K
	has "assemble --all: given options, not the stored ones" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 write_threshold 32768'$"
	t "assemble: options given" 0 $NXDCTL assemble "$SG" --dry-run \
		--mode passthrough
	has "assemble: given options win, stored name" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 mode passthrough'$"
	t "assemble --name: stored tunables" 0 $NXDCTL assemble "$SG" \
		--dry-run --name g2
	has "assemble --name: with the stored tunables" "^dmsetup create g2 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	printf 'gee UUID=%s write_threshold=64K\n' "$UG" >"$OUT/g.tab"
	t "assemble --all: a config line wins" 0 $NXDCTL assemble --all \
		--dry-run --config "$OUT/g.tab"
	has "assemble --all: the line's name and options" "^dmsetup create gee --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 write_threshold 65536'$"
	t "assemble DEVICE: a config line wins" 0 $NXDCTL assemble "$HG" \
		--dry-run --config "$OUT/g.tab"
	has "assemble DEVICE: the line's name and options" "^dmsetup create gee --uuid NXD-$UG --table '0 612352 nxd $HG $SG 2 write_threshold 65536'$"
	printf 'gee UUID=%s\n' "$UG" >"$OUT/g0.tab"
	t "assemble --all: a config line without options" 0 $NXDCTL \
		assemble --all --dry-run --config "$OUT/g0.tab"
	has "assemble --all: the line's defaults, not the stored" "^dmsetup create gee --uuid NXD-$UG --table '0 612352 nxd $HG $SG'$"
	t "assemble DEVICE: not in the config" 0 $NXDCTL assemble "$SG" \
		--dry-run --config "$OUT/gone.tab"
	has "assemble DEVICE: not in the config: as stored" "^dmsetup create ost7 --uuid NXD-$UG --table '0 612352 nxd $HG $SG $GOPTS'$"
	t "assemble: a stored name that is no dm name" 0 $NXDCTL assemble \
		"$SH" --dry-run
	has "assemble: bad stored name: nxd-UUID, no tunables" "^dmsetup create nxd-90919293 --uuid NXD-90919293-.* --table '0 612352 nxd $HH $SH'$"
	losetup -d "$SG" "$HG" "$SH" "$HH"

	# ---- create --format over a log (loop devices: the pair is found) ----
	for v in e f; do
		truncate -s 0 "$OUT/ssd-$v.img" "$OUT/hdd-$v.img"
		truncate -s 64M "$OUT/ssd-$v.img"
		truncate -s 300M "$OUT/hdd-$v.img"
	done
	tests/mkmeta "$OUT/ssd-e.img" "$OUT/hdd-e.img" 96 2
	tests/mkmeta "$OUT/ssd-f.img" "$OUT/hdd-f.img" 112
	loop "$OUT/ssd-e.img" && SE=$DEV
	loop "$OUT/hdd-e.img" && HE=$DEV
	loop "$OUT/ssd-f.img" && SF=$DEV
	loop "$OUT/hdd-f.img" && HF=$DEV
	t "create: the pair again (replay)" 0 $NXDCTL create v0 "$HE" "$SE" \
		--dry-run
	has "create: the pair again: DM UUID from the superblock" \
		"^dmsetup create v0 --uuid NXD-60616263-6465-6667-6869-6a6b6c6d6e6f --table "
	t "create: the pair again, --uuid wins" 0 $NXDCTL create v0 "$HE" \
		"$SE" --dry-run --uuid MINE
	has "create: --uuid wins" "^dmsetup create v0 --uuid MINE --table "
	t "create --format over an old log: DM UUID set later" 0 $NXDCTL \
		create v0 "$HF" "$SF" --dry-run --format
	has "create --format: no DM UUID of the old volume" \
		"^dmsetup create v0 --table "
	t "create --format over writes in the log" 1 $NXDCTL create v0 "$HE" \
		"$SE" --dry-run --format
	err_has "create --format: says the log holds writes" "holds writes not yet on the HDD"
	t "create --format --force over writes" 0 $NXDCTL create v0 "$HE" \
		"$SE" --dry-run --format --force
	t "create --format over an empty log" 0 $NXDCTL create v0 "$HF" "$SF" \
		--dry-run --format
	t "create: new HDD, SSD holding another volume's writes" 1 $NXDCTL \
		create v0 "$OUT/hdd.img" "$SE" --dry-run --format
	t "create: another volume's HDD" 1 $NXDCTL create v0 "$HE" "$SF" \
		--dry-run --format
	# E's HDD grows: its label is no longer at the end; still the pair.
	truncate -s 400M "$OUT/hdd-e.img"
	losetup -c "$HE"
	t "create: the pair again after the HDD grew" 0 $NXDCTL create v0 \
		"$HE" "$SE" --dry-run
	cleanup_loops
	trap - EXIT
else
	echo "SKIP assemble/udev-info tests (need root, losetup, kernel/nxd_codec.c)"
fi

# ---- grow, detach, attach, replace-ssd (--dry-run on test hooks) ----
. tests/lifecycle.sh

# ---- usage ----
t "no command" 1 $NXDCTL
t "--help" 0 $NXDCTL --help
has "--help documents exit codes" "3 permission denied"
t "--version" 0 $NXDCTL --version
has "--version" "^nxdctl .* (dm-nxd ioctl ABI 1)$"
t "unknown command" 1 $NXDCTL frobnicate
for c in histogram stats threshold config create remove stop drain \
	pause-destage resume-destage list suggest-threshold assemble \
	udev-info wipe status show-super help; do
	t "$c --help" 0 $NXDCTL $c --help
	has "$c --help shows usage" "^Usage: nxdctl $c"
done
t "help histogram" 0 $NXDCTL help histogram
t "histogram: bad option" 1 $NXDCTL histogram vol0 --bogus
t "histogram: --watch 0" 1 $NXDCTL histogram vol0 --watch 0
t "histogram: extra argument" 1 $NXDCTL histogram vol0 vol1
err_has "extra argument named" "unexpected argument 'vol1'"
t "list: extra argument" 1 $NXDCTL list x

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
