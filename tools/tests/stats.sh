# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# nxdctl histogram, stats, monitor and suggest-threshold on statistics
# from a file (NXDCTL_TEST_STATS, NXDCTL_TEST_EVENTS) without a kernel
# module: sourced by tests/run.sh (its t, has, err_has, py, ok, ko,
# $OUT, $NXDCTL), after the unit tests, whose fig6.stats and readings it
# reads.

# ---- the binary, statistics from a file ----
export NXDCTL_TEST_STATS="$OUT/fig6.stats"
t "histogram" 0 "$NXDCTL" histogram vol0
if cmp -s "$OUT/last.out" tests/figure6.txt; then ok "histogram = Figure 6"
else ko "histogram = Figure 6"; diff tests/figure6.txt "$OUT/last.out"; fi
# --compat through the binary: NytroXD's 15 buckets a direction.  Figure 6
# has nothing above 32M, so it is Figure 6 without its two "> 32M" lines.
t "histogram --compat" 0 "$NXDCTL" histogram vol0 --compat
if grep -v '> 32M' tests/figure6.txt | cmp -s - "$OUT/last.out" &&
	[ "$(wc -l <"$OUT/last.out")" = 32 ]; then
	ok "histogram --compat = Figure 6 in 15 buckets a direction"
else
	ko "histogram --compat = Figure 6 in 15 buckets a direction"
	grep -v '> 32M' tests/figure6.txt | diff - "$OUT/last.out"
fi
t "histogram --json" 0 "$NXDCTL" histogram vol0 --json
cp "$OUT/last.out" "$OUT/cli-hist.json"
py "histogram --json parses" \
	'assert d["volume"] == "vol0" and d["buckets"][3]["write"]["count"] == 19954' \
	"$OUT/cli-hist.json"
t "histogram --routes" 0 "$NXDCTL" histogram vol0 --routes
has "routes header" "OP *SIZE *REQS *SSD *HDD *ALIGNED *UNALIGNED *MEAN_LAT"
has "routes > 32M row" "write > 32M"
NXDCTL_TEST_THRESHOLD=64K t "histogram --routes, why" 0 "$NXDCTL" histogram \
	vol0 --routes
has "routes: why columns" "HDD_LAT  *SSD_WHY  *HDD_WHY$"
has "routes: at or below the threshold: size, else full" \
	"^write 4K+1 - 8K .* size 332878  *full 166440$"
has "routes: above: unaligned, chunk; HDD: size" \
	"^write 64K+1 - 128K .* unaligned 6, chunk 19 size 14$"
has "routes: reads have no why" "^read  4K .* -  *-$"
NXDCTL_TEST_THRESHOLD=64K NXDCTL_TEST_MODE=passthrough t \
	"histogram --routes, passthrough" 0 "$NXDCTL" histogram vol0 --routes
has "routes: passthrough is the mode" "^write 4K+1 - 8K .* size|chunk 332878 *mode 166440$"
t "stats" 0 "$NXDCTL" stats vol0
has "stats by name" "^writes_logged  *545386$"
has "stats: mean destage write, rounded down" "^destage_mean_bio_bytes  *10486$"
has "stats: whole-stripe share of destage writes" "^destage_stripe_full_pct  *25$"
has "stats: destage rate while busy" "^destage_busy_bytes_per_s  *2621568$"
[ "$(wc -l <"$OUT/last.out")" = 40 ] && ok "stats prints 37 counters and 3 derived values" ||
	ko "stats prints 37 counters and 3 derived values"
t "stats --json" 0 "$NXDCTL" stats vol0 --json
cp "$OUT/last.out" "$OUT/cli-stats.json"
py "stats --json parses" 'assert d["counters"]["recovery_us"] == 1234' \
	"$OUT/cli-stats.json"
py "stats --json: mean destage write" \
	'assert d["derived"] == {"destage_mean_bio_bytes": 10486, "destage_stripe_full_pct": 25, "destage_busy_bytes_per_s": 2621568}, d' \
	"$OUT/cli-stats.json"

# ---- monitor, on readings from a file (NXDCTL_TEST_EVENTS) ----
py "event.json: one event, every field" '
assert d["events"] == ["degraded", "log_full", "drain_done"]
assert d["new"] == {"degraded": 1, "log_full": 1, "drain_done": 2, "acked_lost": 0}
assert d["event_nr"] == 7 and d["state"] == "ok" and d["device"] == "253:4"
assert d["counters"]["events_drain_done"] == 2 and len(d["counters"]) == 37' \
	"$OUT/event.json"
NXDCTL_TEST_EVENTS="$OUT/events.stats" t "monitor --json" 0 \
	"$NXDCTL" monitor ev0 --json
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
	"$NXDCTL" monitor ev0 --count 1
[ "$(wc -l <"$OUT/last.out")" = 1 ] && ok "monitor --count 1: one line" ||
	ko "monitor --count 1: one line"
has "monitor text line" "^20[0-9-]*T[0-9:.]*Z ev0 log_full state unknown, log used 0%, dirty blocks 0, ssd_errors 0, hdd_errors 0 (event 1)$"
# shellcheck disable=SC2016  # expanded by the shell nxdctl runs --exec in
EXEC_OUT="$OUT/exec.out" NXDCTL_TEST_EVENTS="$OUT/events.stats" \
	t "monitor --exec" 0 \
	"$NXDCTL" monitor ev0 --exec 'echo "$NXD_VOLUME $NXD_EVENTS $NXD_STATE $NXD_NEW_DRAIN_DONE $NXD_SSD_ERRORS" >>"$EXEC_OUT"; exit 3'
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
	"$NXDCTL" monitor ev0 --json --exec true
[ "$(wc -l <"$OUT/last.out")" = 3 ] && ok "monitor --json --exec prints" ||
	ko "monitor --json --exec prints"
# A volume already degraded when the monitor starts: reported once, at
# start; then its events; every report in syslog (facility daemon).
NXDCTL_TEST_SYSLOG="$OUT/syslog" NXDCTL_TEST_EVENTS="$OUT/events-degraded.stats" \
	t "monitor --json: degraded at start" 0 "$NXDCTL" monitor ev0 --json
cp "$OUT/last.out" "$OUT/monitor-start.ndjson"
if python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
assert [l["events"] for l in ls] == [["degraded"], ["drain_done"],
                                     ["removed"]], ls
assert [l["initial"] for l in ls] == [True, False, False], ls
assert ls[0]["state"] == "degraded" and ls[0]["counters"]["index_entries"] == 5
assert ls[0]["new"] == {"degraded": 0, "log_full": 0, "drain_done": 0,
                        "acked_lost": 0}, ls[0]
assert ls[1]["new"]["drain_done"] == 1 and ls[1]["new"]["degraded"] == 0' \
	"$OUT/monitor-start.ndjson" 2>"$OUT/py.err"; then
	ok "monitor: a volume degraded at start is reported once, then its events"
else
	ko "monitor: a volume degraded at start is reported once, then its events"
	cat "$OUT/py.err" "$OUT/monitor-start.ndjson"
fi
if [ "$(cat "$OUT/syslog" 2>/dev/null)" = "<26>ev0 degraded state degraded, log used 0%, dirty blocks 5, ssd_errors 1, hdd_errors 0 (at start, event 0)
<30>ev0 drain_done state degraded, log used 0%, dirty blocks 0, ssd_errors 1, hdd_errors 0 (event 1)
<29>ev0 removed state removed (event 2)" ]; then
	ok "monitor: syslog, daemon.crit for degraded, the volume named"
else
	ko "monitor: syslog, daemon.crit for degraded, the volume named"
	cat "$OUT/syslog"
fi
rm -f "$OUT/syslog"
NXDCTL_TEST_SYSLOG="$OUT/syslog" NXDCTL_TEST_EVENTS="$OUT/events-degraded.stats" \
	t "monitor --no-syslog" 0 "$NXDCTL" monitor ev0 --no-syslog --count 1
has "monitor text line at start" "^20[0-9-]*T[0-9:.]*Z ev0 degraded state degraded, log used 0%, dirty blocks 5, ssd_errors 1, hdd_errors 0 (at start, event 0)$"
[ "$(wc -l <"$OUT/last.out")" = 1 ] && [ ! -e "$OUT/syslog" ] &&
	ok "monitor --no-syslog --count 1: the report at start, no syslog" ||
	ko "monitor --no-syslog --count 1: the report at start, no syslog"
# shellcheck disable=SC2016  # expanded by the shell nxdctl runs --exec in
EXEC_OUT="$OUT/exec2.out" NXDCTL_TEST_EVENTS="$OUT/events-degraded.stats" \
	t "monitor --exec: degraded at start" 0 "$NXDCTL" monitor ev0 \
	--exec 'echo "$NXD_EVENTS $NXD_INITIAL $NXD_STATE" >>"$EXEC_OUT"'
if [ "$(cat "$OUT/exec2.out")" = "degraded 1 degraded
drain_done 0 degraded
removed 0 removed" ]; then
	ok "monitor --exec: NXD_INITIAL for the state at start"
else
	ko "monitor --exec: NXD_INITIAL for the state at start"
	cat "$OUT/exec2.out"
fi
t "monitor: --config FILE missing" 1 "$NXDCTL" monitor --config "$OUT/nope.tab"
err_has "monitor: --config FILE missing: says so" "^nxdctl: --config $OUT/nope.tab: no such file"
t "monitor: --oneshot --count" 1 "$NXDCTL" monitor ev0 --oneshot --count 1
t "monitor: --count needs a number" 1 "$NXDCTL" monitor ev0 --count 0
t "monitor: two volumes" 1 "$NXDCTL" monitor a b
NXDCTL_TEST_EVENTS="$OUT/events.stats" t "monitor: hook needs a VOL" 1 \
	"$NXDCTL" monitor --json

# --watch: deltas of an unchanging file are zero; SIGINT ends it with 0.
timeout --preserve-status -s INT 2.6 "$NXDCTL" histogram vol0 --watch 1 --json \
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
timeout --preserve-status -s INT 1.5 "$NXDCTL" histogram vol0 --watch 1 >"$OUT/watch.out" 2>&1
grep -q "^--- .* vol0, last 1 s ---" "$OUT/watch.out" &&
	grep -q "^Num Writes 4K+1 - 8K         = 0$" "$OUT/watch.out" &&
	ok "watch text shows zero deltas" || ko "watch text shows zero deltas"

t "suggest-threshold" 0 "$NXDCTL" suggest-threshold vol0 --ssd-iops 20000 \
	--ssd-mbps 500 --hdd-iops 150 --hdd-mbps 200
has "suggests 512K" "^Suggested write threshold: 512K (524288 bytes)"
has "explains" "^Why: the HDD spends about 6.67 ms"
has "reports the share" "100.0% of the write requests (545386 of 545386)"
has "says how to apply" "nxdctl threshold vol0 --write 512K"
t "suggest-threshold on a RAID6" 0 "$NXDCTL" suggest-threshold vol0 \
	--ssd-iops 20000 --ssd-mbps 500 --hdd-iops 150 --hdd-mbps 200 \
	--stripe 256K --chunk 64K
has "capped at the stripe" "^Suggested write threshold: 256K (262144 bytes)"
has "says what the costs alone said" "The costs alone would say 512K"
has "names the geometry" "^Array: full stripe 256K, chunk 64K \\[given\\]"
has "names chunk misalignment" "Writes not aligned to the chunk (64K) also go to the log"
t "suggest-threshold --no-stripe-cap" 0 "$NXDCTL" suggest-threshold vol0 \
	--ssd-iops 20000 --ssd-mbps 500 --hdd-iops 150 --hdd-mbps 200 \
	--stripe 256K --chunk 64K --no-stripe-cap
has "uncapped" "^Suggested write threshold: 512K"
t "suggest-threshold, HDD as fast as SSD" 0 "$NXDCTL" suggest-threshold \
	vol0 --ssd-iops 20000 --ssd-mbps 500 --hdd-iops 20000 --hdd-mbps 500
has "no threshold pays off" "^No threshold pays off"
t "suggest-threshold, bad speed" 1 "$NXDCTL" suggest-threshold vol0 \
	--hdd-iops -5
unset NXDCTL_TEST_STATS
