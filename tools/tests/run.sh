#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# nxdctl tests that need no kernel module: the C unit tests of the
# formatting code, then the nxdctl binary driven through its test hooks
# (NXDCTL_TEST_STATS: stats from a file; NXDCTL_SYSFS: a fake sysfs tree).
# The test hooks of nxdctl (not for production use, so not in nxdctl(8)):
#   NXDCTL_SYSFS           replaces /sys as the sysfs root
#   NXDCTL_TEST_STATS      a file holding a raw struct nxd_ioc_stats, used
#                          instead of the kernel's
#   NXDCTL_TEST_THRESHOLD, NXDCTL_TEST_MODE
#                          the sysfs threshold and mode with it
#   NXDCTL_TEST_EVENTS     a file of such structs that monitor takes as its
#                          readings, one per wait (its end: the volume went)
#   NXDCTL_TEST_SYSLOG, NXDCTL_TEST_TABLE, NXDCTL_TEST_STATUS: see their
#                          getenv() in tools/.
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
assert len(c) == 37 and c["writes_logged"] == 545386
assert list(c)[0] == "log_blocks" and list(c)[25] == "degraded"
assert list(c)[26:] == ["events", "last_event", "events_degraded",
                        "events_log_full", "events_drain_done", "log_full",
                        "destage_stripe_bios", "destage_busy_us",
                        "destage_hdd_bytes", "acked_lost",
                        "events_acked_lost"]' \
	"$OUT/stats.json"
py "list.json" '
v = d["volumes"]
assert d["total"] == 2 and v[0]["name"] == "fast0"
assert (v[0]["major"], v[0]["minor"]) == (253, 0)
assert v[1]["mode"] == "passthrough"
assert v[0]["uuid"].startswith("ab000000-")
assert not any("read_threshold" in x for x in v)' "$OUT/list.json"

# ---- the binary, statistics from a file; monitor ----
. tests/stats.sh

# ---- the binary on a fake sysfs ----
. tests/sysfs.sh

# ---- create --dry-run, the config file, what create would overwrite ----
. tests/create.sh

# ---- assemble / udev-info on loop devices, boot-time assembly ----
. tests/assemble.sh
. tests/owner.sh

# ---- activate (event-driven assembly) on loop devices ----
. tests/activate.sh

# ---- grow, detach, attach, replace-ssd (--dry-run on test hooks) ----
. tests/lifecycle.sh

# ---- the HDD layouts: format 2 (label in block 0) and format 1 ----
. tests/layout.sh

# ---- usage ----
t "no command" 1 "$NXDCTL"
t "--help" 0 "$NXDCTL" --help
has "--help documents exit codes" "3 permission denied"
t "--version" 0 "$NXDCTL" --version
has "--version" "^nxdctl .* (dm-nxd ioctl ABI 1)$"
t "unknown command" 1 "$NXDCTL" frobnicate
for c in histogram stats threshold config create remove stop drain \
	pause-destage resume-destage list suggest-threshold assemble \
	activate udev-info wipe status show-super help; do
	t "$c --help" 0 "$NXDCTL" $c --help
	has "$c --help shows usage" "^Usage: nxdctl $c"
done
t "help histogram" 0 "$NXDCTL" help histogram
t "histogram: bad option" 1 "$NXDCTL" histogram vol0 --bogus
t "histogram: --watch 0" 1 "$NXDCTL" histogram vol0 --watch 0
t "histogram: extra argument" 1 "$NXDCTL" histogram vol0 vol1
err_has "extra argument named" "unexpected argument 'vol1'"
t "list: extra argument" 1 "$NXDCTL" list x

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
