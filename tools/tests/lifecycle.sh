# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh disable=SC2015  # COND && ok .. || ko ..: ok always returns 0
# nxdctl grow, detach, attach, replace-ssd without a kernel module:
# sourced by tests/run.sh (its t, has, err_has, $OUT, $NXDCTL).

# ---- grow, detach, attach, replace-ssd: the table and status from
# NXDCTL_TEST_TABLE / NXDCTL_TEST_STATUS, devices are files (--dry-run) ----
LC=$OUT/lc
mkdir -p "$LC"
truncate -s 1026M "$LC/hdd.img"
truncate -s 64M "$LC/ssd.img" "$LC/new.img" "$LC/nxd.img"
truncate -s 1M "$LC/tiny.img"
# A format 1 volume (data from sector 0, label at the end); layout.sh has
# format 2's.
tests/mkmeta "$LC/ssd.img" "$LC/hdd.img" 5
# status: state, then the counters; log_blocks, log_used_blocks,
# index_entries first, degraded 26th
lc_status() { # STATE USED DEGRADED
	z=$(printf ' 0%.0s' $(seq 22))
	echo "$1 262144 $2 $2$z $3 0 0 0 0 0 0"
}
OPTS="22 write_threshold 65536 mode auto low_watermark 30 high_watermark 80 destage_rate 0 ssd_discard 1 drain_on_suspend 0 auto_min_threshold 4096 auto_max_threshold 1048576 stream_min 4194304 stripe_size 0"
NXDL="nxd $LC/hdd.img $LC/ssd.img"
NXDCTL_TEST_STATUS=$(lc_status ok 0 0)
export NXDCTL_TEST_STATUS
export NXDCTL_TEST_TABLE="0 1048576 $NXDL $OPTS"
t "grow --dry-run" 0 "$NXDCTL" grow v0 --dry-run
has "grow: old and new size" "^v0: 1048576 -> 2099200 sectors (0.5 -> 1.0 GiB), HDD $LC/hdd.img$"
has "grow: the live line at the new length" "^dmsetup load v0 --table '0 2099200 $NXDL $OPTS'$"
has "grow: then resume" "^dmsetup resume v0$"
t "grow: the test hooks need --dry-run" 1 "$NXDCTL" grow v0
NXDCTL_TEST_TABLE="0 2099200 $NXDL" t "grow: nothing to grow" 1 \
	"$NXDCTL" grow v0 --dry-run
err_has "grow: says why" "nothing to grow: the volume has 2099200 sectors, the HDD .* has room for 2099200"
NXDCTL_TEST_STATUS="$(lc_status degraded 5 1)" t "grow: degraded" 1 \
	"$NXDCTL" grow v0 --dry-run
err_has "grow: degraded says replace-ssd" "replace the SSD first"
NXDCTL_TEST_TABLE="0 1048576 linear $LC/hdd.img 0" t "grow: linear" 2 \
	"$NXDCTL" grow v0 --dry-run
t "grow: two volumes" 1 "$NXDCTL" grow v0 v1 --dry-run

export NXDCTL_TEST_TABLE="0 2097152 $NXDL $OPTS"
NXDCTL_TEST_STATUS=$(lc_status ok 1000 0)
export NXDCTL_TEST_STATUS
t "detach --dry-run" 0 "$NXDCTL" detach v0 --dry-run --timeout 30
has "detach: drain_on_suspend first" "^echo 1 > /sys/block/dm-0/nxd/drain_on_suspend$"
has "detach: drain" "^dmsetup message v0 0 drain$"
has "detach: linear at the same length" "^dmsetup load v0 --table '0 2097152 linear $LC/hdd.img 0'$"
has "detach: suspend with lockfs" "^dmsetup suspend v0$"
has "detach: checks the status" "^dmsetup status v0 "
has "detach: resume" "^dmsetup resume v0$"
t "detach --nolockfs --dry-run" 0 "$NXDCTL" detach v0 --dry-run --nolockfs
has "detach --nolockfs" "^dmsetup suspend --nolockfs v0$"
t "detach: the test hooks need --dry-run" 1 "$NXDCTL" detach v0
t "detach: bad --timeout" 1 "$NXDCTL" detach v0 --dry-run --timeout x
NXDCTL_TEST_STATUS="$(lc_status suspended 0 0)" t "detach: suspended" 1 \
	"$NXDCTL" detach v0 --dry-run
NXDCTL_TEST_STATUS="$(lc_status degraded 77 1)" t "detach: degraded" 0 \
	"$NXDCTL" detach v0 --dry-run
err_has "detach: degraded says what happens" "the frozen log (77 blocks)"
NXDCTL_TEST_TABLE="0 2097152 linear $LC/hdd.img 0" t "detach: linear" 2 \
	"$NXDCTL" detach v0 --dry-run
# --accept-log-loss: a degraded volume only; the log given up first
NXDCTL_TEST_STATUS="$(lc_status degraded 77 1)" \
	t "detach --accept-log-loss --dry-run: degraded" 0 \
	"$NXDCTL" detach v0 --dry-run --accept-log-loss
has "detach --accept-log-loss: asks for the ranges" "^dmsetup message v0 0 log_at_risk$"
has "detach --accept-log-loss: abandons the log" "^dmsetup message v0 0 abandon_log$"
has "detach --accept-log-loss: then linear" "^dmsetup load v0 --table '0 2097152 linear $LC/hdd.img 0'$"
t "detach --accept-log-loss: refused on a healthy volume" 1 \
	"$NXDCTL" detach v0 --dry-run --accept-log-loss --yes
err_has "detach --accept-log-loss: healthy says why" "v0 is not degraded: --accept-log-loss is for a volume whose SSD failed"
if grep -q abandon_log "$OUT/last.out"; then
	ko "detach --accept-log-loss: healthy sends nothing"
else ok "detach --accept-log-loss: healthy sends nothing"; fi
t "detach --yes alone" 1 "$NXDCTL" detach v0 --dry-run --yes
err_has "detach --yes alone says why" "--yes goes with --accept-log-loss"
NXDCTL_TEST_STATUS="$(lc_status degraded 77 1)" \
	t "replace-ssd --accept-log-loss --dry-run: degraded" 0 \
	"$NXDCTL" replace-ssd v0 "$LC/new.img" --dry-run --accept-log-loss --yes
has "replace-ssd --accept-log-loss: abandons the log" "^dmsetup message v0 0 abandon_log$"
has "replace-ssd --accept-log-loss: then the new SSD" "nxd $LC/hdd.img $LC/new.img 23 .* format'$"

t "replace-ssd --dry-run" 0 "$NXDCTL" replace-ssd v0 "$LC/new.img" --dry-run
has "replace-ssd: detach first" "^dmsetup load v0 --table '0 2097152 linear $LC/hdd.img 0'$"
has "replace-ssd: the old options and format" "^dmsetup load v0 --table '0 2097152 nxd $LC/hdd.img $LC/new.img 23 write_threshold 65536 mode auto low_watermark 30 high_watermark 80 destage_rate 0 ssd_discard 1 drain_on_suspend 0 auto_min_threshold 4096 auto_max_threshold 1048576 stream_min 4194304 stripe_size 0 format'$"
NXDCTL_TEST_TABLE="0 2097152 $NXDL" t "replace-ssd: no options" 0 \
	"$NXDCTL" replace-ssd v0 "$LC/new.img" --dry-run
has "replace-ssd: format alone" "nxd $LC/hdd.img $LC/new.img 1 format'$"
t "replace-ssd: missing NEWSSD" 1 "$NXDCTL" replace-ssd v0 --dry-run
t "replace-ssd: tiny NEWSSD" 1 "$NXDCTL" replace-ssd v0 "$LC/tiny.img" \
	--dry-run
t "replace-ssd: no NEWSSD" 2 "$NXDCTL" replace-ssd v0 "$LC/nope" --dry-run

export NXDCTL_TEST_TABLE="0 2097152 linear $LC/hdd.img 0"
t "attach --dry-run" 0 "$NXDCTL" attach v0 "$LC/new.img" --dry-run \
	--write-threshold 64K --mode log_all
has "attach: nxd at the same length, format" "^dmsetup load v0 --table '0 2097152 nxd $LC/hdd.img $LC/new.img 5 write_threshold 65536 mode log_all format'$"
has "attach: suspend" "^dmsetup suspend v0$"
has "attach: resume" "^dmsetup resume v0$"
t "attach: the test hooks need --dry-run" 1 "$NXDCTL" attach v0 "$LC/new.img"
t "attach: bad option" 1 "$NXDCTL" attach v0 "$LC/new.img" --dry-run \
	--mode fast
t "attach: missing SSD" 1 "$NXDCTL" attach v0 --dry-run
NXDCTL_TEST_TABLE="0 2097152 $NXDL" t "attach: nxd volume" 1 \
	"$NXDCTL" attach v0 "$LC/new.img" --dry-run
err_has "attach: nxd says replace-ssd" "nxdctl replace-ssd v0"
NXDCTL_TEST_TABLE="0 2097152 linear $LC/hdd.img 2048" t \
	"attach: linear not from 0" 1 "$NXDCTL" attach v0 "$LC/new.img" --dry-run
err_has "attach: the label's layout named" "puts the data area at sector 0: attaching would shift the data"
NXDCTL_TEST_TABLE="0 2097152 striped 2 8 $LC/hdd.img 0 $LC/ssd.img 0" t \
	"attach: not linear" 2 "$NXDCTL" attach v0 "$LC/new.img" --dry-run
NXDCTL_TEST_TABLE="0 2099201 linear $LC/hdd.img 0" t \
	"attach: longer than the HDD less its label" 1 "$NXDCTL" attach v0 \
	"$LC/new.img" --dry-run
err_has "attach: says the label would overwrite" "at most 2099200"
NXDCTL_TEST_TABLE="0 2099200 linear $LC/hdd.img 0" t \
	"attach: as long as the HDD allows" 0 "$NXDCTL" attach v0 \
	"$LC/new.img" --dry-run
t "attach: SSD is the HDD" 1 "$NXDCTL" attach v0 "$LC/hdd.img" --dry-run
if command -v mkfs.ext4 >/dev/null; then
	mkfs.ext4 -q -F "$LC/new.img" >/dev/null 2>&1
	t "attach: SSD with a file system" 1 "$NXDCTL" attach v0 "$LC/new.img" \
		--dry-run
	err_has "attach: names the signature" "SSD $LC/new.img holds ext4"
	t "attach --force over a file system" 0 "$NXDCTL" attach v0 \
		"$LC/new.img" --dry-run --force
	NXDCTL_TEST_TABLE="0 2097152 $NXDL" t \
		"replace-ssd: NEWSSD with a file system, checked first" 1 \
		"$NXDCTL" replace-ssd v0 "$LC/new.img" --dry-run
	grep -q "linear" "$OUT/last.out" && ko "replace-ssd: nothing done" ||
		ok "replace-ssd: nothing done"
else
	echo "SKIP attach over a file system (no mkfs.ext4)"
fi
truncate -s 1026M "$LC/hdd2.img"
tests/mkmeta "$LC/nxd.img" "$LC/hdd2.img" 77 2
t "attach: an nxd SSD without --format" 1 "$NXDCTL" attach v0 "$LC/nxd.img" \
	--dry-run
err_has "attach: nxd SSD needs --format" "carries the nxd SSD superblock of volume .*--format"
t "attach --format: its log holds writes" 1 "$NXDCTL" attach v0 \
	"$LC/nxd.img" --dry-run --format
t "attach --format --force" 0 "$NXDCTL" attach v0 "$LC/nxd.img" --dry-run \
	--format --force
tests/mkmeta "$LC/nxd.img" "$LC/hdd2.img" 78
t "attach --format: an empty log" 0 "$NXDCTL" attach v0 "$LC/nxd.img" \
	--dry-run --format
unset NXDCTL_TEST_TABLE NXDCTL_TEST_STATUS
for c in grow detach attach replace-ssd; do
	t "$c --help" 0 "$NXDCTL" $c --help
	has "$c --help shows usage" "^Usage: nxdctl $c"
done
