// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of nxdctl's pure parts on synthetic struct nxd_ioc_stats.
 * Prints "PASS name" / "FAIL name: why" per check; tests/run.sh counts.
 *
 * Usage: test_fmt FIGURE6_TXT OUTDIR
 * Leaves in OUTDIR: fig6.stats (raw struct for NXDCTL_TEST_STATS),
 * hist.json, stats.json, list.json for the JSON checks of run.sh.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "../kernel/nxd_core.h"
#include "fmt.h"
#include "stats.h"
#include "suggest.h"
#include "status.h"
#include "view.h"
#include "events.h"

static int failed;

static void __attribute__((format(printf, 2, 3)))
check(int ok, const char *fmt, ...)
{
	va_list ap;

	fputs(ok ? "PASS " : "FAIL ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (!ok)
		failed++;
}

/* Figure 6 of the NytroXD paper, reads then writes, bucket order. */
static const uint64_t fig6[2][NXD_HIST_NBUCKETS] = {
	{ 0, 56796, 456385, 55, 31, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	{ 0, 23978, 499318, 19954, 1962, 127, 39, 6, 2, 0, 0, 0, 0, 0, 0, 0 },
};

/*
 * Spread each count over the four route/alignment cells unevenly so that
 * a missing cell in a sum shows.  Bytes: count * bucket max; time: 1 us
 * per SSD request, 8 ms per HDD request.
 */
static void fill_fig6(struct nxd_ioc_stats *st)
{
	unsigned int b;
	int d, r, a;

	memset(st, 0, sizeof(*st));
	st->hdr.size = sizeof(*st);
	st->hdr.version = NXD_IOCTL_VERSION;
	for (d = 0; d < 2; d++) {
		for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
			uint64_t n = fig6[d][b], left = n, lo, hi, part;

			nxdctl_bucket_range(b, &lo, &hi);
			if (hi == UINT64_MAX)
				hi = 2 * lo;
			for (r = 0; r < 2; r++) {
				for (a = 0; a < 2; a++) {
					struct nxd_hist_cell *c =
						&st->hist[d][b][r][a];

					part = (r == 1 && a == 1) ? left :
					       left / (2 + r + a);
					left -= part;
					c->count = part;
					c->bytes = part * hi;
					c->time_ns = part * (r ? 8000000 :
							     1000);
				}
			}
		}
	}
	st->c.log_blocks = 262144;
	st->c.log_used_blocks = 1000;
	st->c.writes_logged = 545386;
	st->c.writes_direct = 0;
	st->c.degraded = 0;
	st->c.recovery_us = 1234;
	st->c.destaged_bytes = 10486272;	/* 1000 bios: 10486 bytes each */
	st->c.destage_bios = 1000;
	st->c.destage_stripe_bios = 250;		/* 25 % */
	st->c.destage_busy_us = 4000000;	/* 4 s: 2621568 B/s */
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc(n + 1);
	if (fread(buf, 1, n, f) != (size_t)n) {
		fclose(f);
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	fclose(f);
	*len = n;
	return buf;
}

static char *capture(void (*fn)(FILE *, const void *), const void *arg,
		     size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	fn(f, arg);
	fclose(f);
	return buf;
}

static void hist_fn(FILE *f, const void *st)
{
	nxdctl_print_histogram(f, st);
}

static void routes_fn(FILE *f, const void *st)
{
	nxdctl_print_routes(f, st);
}

static void test_figure6(const struct nxd_ioc_stats *st, const char *fixture)
{
	size_t el, gl;
	char *exp = slurp(fixture, &el);
	char *got = capture(hist_fn, st, &gl);

	check(exp != NULL, "figure6 fixture readable (%s)", fixture);
	if (!exp)
		return;
	check(el == gl && !memcmp(exp, got, el),
	      "histogram text is Figure 6 byte for byte");
	if (el != gl || memcmp(exp, got, el))
		fprintf(stderr, "--- expected\n%s--- got\n%s", exp, got);
	free(exp);
	free(got);
}

static void test_labels(void)
{
	char a[32], z[32], want[80];
	unsigned int b;
	int same = 1, bucket_ok = 1;

	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		uint64_t lo, hi;

		nxdctl_bucket_range(b, &lo, &hi);
		/* The kernel's label names the range nxdctl computes. */
		nxdctl_fmt_size(a, sizeof(a), lo ? lo - 1 : 0);
		nxdctl_fmt_size(z, sizeof(z), hi == UINT64_MAX ? 0 : hi);
		if (b == 0)
			nxdctl_fmt_size(z, sizeof(z), hi + 1);
		if (b <= 1)
			snprintf(want, sizeof(want), "%s%s", b ? "" : "< ", z);
		else if (hi == UINT64_MAX)
			snprintf(want, sizeof(want), "> %s", a);
		else
			snprintf(want, sizeof(want), "%s+1 - %s", a, z);
		if (strcmp(want, nxd_hist_labels[b]))
			same = 0;
		if (hi == UINT64_MAX)
			hi = lo * 4;
		if (nxd_hist_bucket(lo) != b || nxd_hist_bucket(hi) != b)
			bucket_ok = 0;
		if (b && nxdctl_bucket_of_bound(hi) != (int)b &&
		    b != NXD_HIST_NBUCKETS - 1)
			bucket_ok = 0;
	}
	check(same, "kernel nxd_hist_labels name nxdctl's bucket ranges");
	check(bucket_ok, "bucket ranges agree with nxd_hist_bucket()");
}

static void compat_fn(FILE *f, const void *st)
{
	nxdctl_print_histogram_compat(f, st, true);
}

static void test_compat(const struct nxd_ioc_stats *fig6st)
{
	static struct nxd_ioc_stats st;
	size_t len, lines = 0, i;
	char *got;

	st = *fig6st;
	st.hist[NXD_H_WRITE][14][NXD_H_SSD][NXD_H_ALIGNED].count = 5;
	st.hist[NXD_H_WRITE][15][NXD_H_HDD][NXD_H_ALIGNED].count = 7;
	got = capture(compat_fn, &st, &len);
	for (i = 0; i < len; i++)
		lines += got[i] == '\n';
	check(lines == 32 && !strstr(got, "> 32M"),
	      "--compat: 15 buckets a direction, no > 32M line");
	check(strstr(got, "Num Writes 16M+1 - 32M       = 12\n") != NULL,
	      "--compat: the last bucket counts > 32M too");
	free(got);
}

static void test_routes(const struct nxd_ioc_stats *st)
{
	size_t len;
	char *got = capture(routes_fn, st, &len);
	char *line;

	check(strstr(got, "OP") && strstr(got, "UNALIGNED") &&
	      strstr(got, "MEAN_LAT") && strstr(got, "HDD_LAT"),
	      "routes table header");
	line = strstr(got, "write 4K+1 - 8K");
	check(line && strstr(line, "499318"), "routes row write 8K total");
	check(strstr(got, "8.00ms") && strstr(got, "1.0us"),
	      "routes mean latencies");
	check(strstr(got, "read  > 32M") != NULL, "routes has the > 32M row");
	free(got);
}

static void test_sums_delta(const struct nxd_ioc_stats *st)
{
	struct nxd_ioc_stats prev, d;
	struct nxd_hist_cell s, r0, r1, a0, a1;

	nxdctl_cell_sum(st, NXD_H_WRITE, 2, -1, -1, &s);
	nxdctl_cell_sum(st, NXD_H_WRITE, 2, NXD_H_SSD, -1, &r0);
	nxdctl_cell_sum(st, NXD_H_WRITE, 2, NXD_H_HDD, -1, &r1);
	nxdctl_cell_sum(st, NXD_H_WRITE, 2, -1, NXD_H_ALIGNED, &a0);
	nxdctl_cell_sum(st, NXD_H_WRITE, 2, -1, NXD_H_UNALIGNED, &a1);
	check(s.count == 499318 && r0.count + r1.count == s.count &&
	      a0.count + a1.count == s.count && s.bytes == 499318ULL * 8192,
	      "cell sums by route and alignment");

	prev = *st;
	prev.hist[NXD_H_WRITE][2][0][0].count -= 10;
	prev.hist[NXD_H_WRITE][2][0][0].bytes -= 10 * 8192;
	prev.c.writes_logged -= 7;
	prev.c.log_used_blocks = 5;
	nxdctl_stats_delta(st, &prev, &d);
	nxdctl_cell_sum(&d, NXD_H_WRITE, 2, -1, -1, &s);
	check(s.count == 10 && s.bytes == 81920, "delta of histogram cells");
	check(d.c.writes_logged == 7 && d.c.log_used_blocks == 1000,
	      "delta: events subtract, gauges kept");
}

static void test_parse(void)
{
	uint64_t v;

	check(!nxd_parse_size("64K", &v) && v == 65536, "parse 64K");
	check(!nxd_parse_size("1M", &v) && v == 1048576, "parse 1M");
	check(!nxd_parse_size("4096", &v) && v == 4096, "parse 4096");
	check(!nxd_parse_size("2g", &v) && v == 2ULL << 30, "parse 2g");
	check(nxd_parse_size("1.5M", &v) != 0, "reject 1.5M");
	check(nxd_parse_size("-4K", &v) != 0, "reject -4K");
	check(nxd_parse_size("", &v) != 0, "reject empty");
	check(nxd_parse_size("99999999999999999999", &v) != 0,
	      "reject overflow");
	check(nxd_parse_size("17179869184G", &v) != 0,
	      "reject suffix overflow");
}

static void test_misc(void)
{
	static const uint8_t u[16] = {
		0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
	};
	unsigned int ma, mi;
	char buf[64];

	nxdctl_fmt_size(buf, sizeof(buf), 65536);
	check(!strcmp(buf, "64K"), "fmt 64K");
	nxdctl_fmt_size(buf, sizeof(buf), 32 << 20);
	check(!strcmp(buf, "32M"), "fmt 32M");
	nxdctl_fmt_size(buf, sizeof(buf), 4097);
	check(!strcmp(buf, "4097"), "fmt 4097");
	nxdctl_fmt_lat(buf, sizeof(buf), 0, 0);
	check(!strcmp(buf, "-"), "lat of nothing");
	nxdctl_fmt_lat(buf, sizeof(buf), 3 * 6200000ULL, 3);
	check(!strcmp(buf, "6.20ms"), "lat 6.20ms");
	nxdctl_fmt_uuid(buf, u);
	check(!strcmp(buf, "12345678-9abc-def0-0123-456789abcdef"),
	      "uuid format");
	nxdctl_decode_dev(nxdctl_encode_dev(253, 300), &ma, &mi);
	check(ma == 253 && mi == 300, "dev encode/decode round trip");
	check(nxdctl_encode_dev(8, 16) == 0x810, "new_encode_dev(8:16)");
	check(nxd_hdd_data_sectors(20971520) == 20969472,
	      "hdd data sectors of 10 GiB");
	check(nxd_hdd_data_sectors(20971520 + 2047) == 20969472,
	      "hdd data sectors rounds down to 1 MiB");
	check(nxd_hdd_data_sectors(4095) == 0, "tiny hdd has no data");
	check(!strcmp(nxd_mode_name(2), "log_all") &&
	      !strcmp(nxd_mode_name(9), "unknown"), "mode names");
}

static void test_suggest(const struct nxd_ioc_stats *st)
{
	struct nxdctl_speeds sp = {
		.ssd_iops = 20000, .ssd_mbps = 500,
		.hdd_iops = 150, .hdd_mbps = 200,
	};
	struct nxdctl_suggestion sg;
	uint64_t all = 0;
	unsigned int b;

	for (b = 0; b < NXD_HIST_NBUCKETS; b++)
		all += fig6[1][b];
	nxdctl_suggest(st, &sp, 65536, &sg);
	check(sg.threshold == 512 * 1024, "suggest 512K for a 150 IOPS HDD "
	      "(got %" PRIu64 ")", sg.threshold);
	check(sg.w_reqs == all && sg.log_reqs == all,
	      "suggest: every Figure 6 write fits under 512K");
	/*
	 * 64K leaves out the 39 + 6 + 2 larger writes, less the unaligned
	 * ones, which the kernel logs whatever their size.
	 */
	check(sg.cur_reqs < all && sg.cur_reqs >= all - 47,
	      "suggest: current 64K threshold share");

	/* A fast array: bandwidth dominates sooner. */
	sp.hdd_iops = 150;
	sp.hdd_mbps = 2000;
	sp.ssd_mbps = 2000;
	nxdctl_suggest(st, &sp, -1, &sg);
	check(sg.threshold == 4096ULL << 10, "suggest 4M for a wide "
	      "array (got %" PRIu64 ")", sg.threshold);

	/* The wide array as a RAID6 with a 1 MiB stripe: capped there. */
	sp.stripe = 1 << 20;
	sp.chunk = 128 << 10;
	nxdctl_suggest(st, &sp, -1, &sg);
	check(sg.threshold == 1 << 20 && sg.uncapped >= 4096ULL << 10,
	      "suggest: never above a full stripe (got %" PRIu64 ", costs "
	      "alone %" PRIu64 ")", sg.threshold, sg.uncapped);
	check(sg.cost_hdd_ms[2] == 2 * (1e3 / 150 + 8192 / 2000e6 * 1e3) &&
	      sg.cost_hdd_ms[11] == 1e3 / 150 + (4 << 20) / 2000e6 * 1e3,
	      "suggest: a partial stripe costs a read-modify-write, whole "
	      "stripes do not");
	sp.no_stripe_cap = true;
	nxdctl_suggest(st, &sp, -1, &sg);
	check(sg.threshold == 4096ULL << 10 && !sg.uncapped,
	      "suggest: --no-stripe-cap lifts the cap");
	sp.stripe = sp.chunk = 0;
	sp.no_stripe_cap = false;

	/* An HDD as fast as the SSD: the log never pays. */
	sp.hdd_iops = 20000;
	sp.hdd_mbps = 500;
	sp.ssd_mbps = 500;
	nxdctl_suggest(st, &sp, -1, &sg);
	check(sg.threshold == 0 && sg.bucket == -1, "suggest: no threshold "
	      "when the HDD is as fast");
}

static void test_route_share(const struct nxd_ioc_stats *st)
{
	uint64_t r, by, r2, b2;
	struct nxd_hist_cell un;

	nxdctl_route_share(st, 0, &r, &by);
	check(r == 0 && by == 0, "threshold 0 logs nothing");
	nxdctl_route_share(st, 4096, &r, &by);
	nxdctl_route_share(st, 8192, &r2, &b2);
	nxdctl_cell_sum(st, NXD_H_WRITE, 2, -1, NXD_H_UNALIGNED, &un);
	check(r2 - r == 499318 - un.count, "raising 4K to 8K adds the "
	      "aligned 8K writes");
}

static int write_file(const char *dir, const char *name,
		      void (*fn)(FILE *, const void *), const void *arg)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fn(f, arg);
	return fclose(f) ? -errno : 0;
}

static void json_hist_fn(FILE *f, const void *st)
{
	struct nxdctl_meta m = { .vol = "vol\"0" };

	nxdctl_json_histogram(f, st, &m, true);
}

static void json_stats_fn(FILE *f, const void *st)
{
	struct nxdctl_meta m = { .vol = "vol0" };

	nxdctl_json_stats(f, st, &m, true);
}

static void raw_fn(FILE *f, const void *st)
{
	fwrite(st, 1, sizeof(struct nxd_ioc_stats), f);
}

static void list_fn(FILE *f, const void *l)
{
	nxdctl_print_list(f, l, true);
}

static void list_text_fn(FILE *f, const void *l)
{
	nxdctl_print_list(f, l, false);
}

static void test_list(const char *out)
{
	static struct nxd_ioc_list l;
	size_t len;
	char *txt;

	l.count = 2;
	l.total = 2;
	l.vols[0].dev = nxdctl_encode_dev(253, 0);
	strcpy(l.vols[0].name, "fast0");
	l.vols[0].sectors = 20969472;
	l.vols[0].write_threshold = 65536;
	l.vols[0].reserved0 = 131072;	/* was read_threshold: ignored */
	l.vols[0].mode = 0;
	l.vols[0].vol_uuid[0] = 0xab;
	l.vols[1].dev = nxdctl_encode_dev(253, 1);
	strcpy(l.vols[1].name, "slow1");
	l.vols[1].mode = 1;
	txt = capture(list_text_fn, &l, &len);
	check(strstr(txt, "fast0") && strstr(txt, "253:0") &&
	      strstr(txt, "64K") && strstr(txt, "passthrough") &&
	      strstr(txt, "10.0G"), "list table");
	free(txt);
	check(!write_file(out, "list.json", list_fn, &l), "write list.json");
}

static void test_status(const struct nxd_ioc_stats *st)
{
	static struct nxdctl_status s;
	struct nxd_ioc_vol v = { .sectors = 2048, .write_threshold = 65536 };

	strcpy(v.name, "h0");
	nxdctl_status_from_vol(&s, &v);
	check(nxdctl_status_destage_bps(&s) < 0 &&
	      !strcmp(nxdctl_status_state(&s), "unknown"),
	      "status without statistics: no rate, state unknown");
	s.have_stats = true;
	s.st = *st;
	s.st.c.index_entries = 3;
	s.st.c.destaged_bytes = 5 << 20;
	s.prev = s.st.c;
	s.prev.destaged_bytes = 1 << 20;
	s.interval_s = 2;
	check(nxdctl_status_destage_bps(&s) == 2 << 20,
	      "status: destage rate 4 MiB over 2 s");
	s.prev.destaged_bytes = 6 << 20;
	check(nxdctl_status_destage_bps(&s) < 0, "status: no rate across a "
	      "reset");
	check(nxdctl_status_dirty_bytes(&s) == 3 * 4096 &&
	      nxdctl_status_log_pct(&s) == 100.0 * 1000 / 262144,
	      "status: dirty bytes and log use");
	s.st.c.degraded = 1;
	check(!strcmp(nxdctl_status_state(&s), "degraded"),
	      "status: degraded from the counters");
}

/* The mean destage write counts the stripe fill's gaps once they are counted. */
static void test_destage_mean(const struct nxd_ioc_stats *st)
{
	struct nxd_ioc_counters c = st->c;

	check(!strcmp(nxdctl_derived[0].name, "destage_mean_bio_bytes") &&
	      nxdctl_derived[0].get(&c) == 10486,
	      "mean destage write: copies' bytes before target 2.3.0");
	c.destage_hdd_bytes = 131072 * 1000;
	check(nxdctl_derived[0].get(&c) == 131072,
	      "mean destage write: bytes of the bios, fill's gaps included");
}

static void event_json_fn(FILE *f, const void *e)
{
	nxdctl_event_json(f, e);
}

static void event_text_fn(FILE *f, const void *e)
{
	nxdctl_event_text(f, e);
}

/* Records for NXDCTL_TEST_EVENTS: readings, one per "wait". */
static void events_seq_fn(FILE *f, const void *arg)
{
	static struct nxd_ioc_stats r;
	unsigned int i;

	r = *(const struct nxd_ioc_stats *)arg;
	for (i = 0; i < 4; i++) {
		if (i == 1) {		/* the log filled */
			r.c.events_log_full++;
			r.c.log_full = 1;
			r.c.last_event = NXD_EV_LOG_FULL;
		} else if (i == 3) {	/* degraded, then its log emptied */
			r.c.events_degraded++;
			r.c.events_drain_done++;
			r.c.degraded = 1;
			r.c.ssd_errors = 2;
			r.c.last_event = NXD_EV_DRAIN_DONE;
		}
		/* i == 2: a wake-up with nothing new (a rename) */
		r.c.events = r.c.events_degraded + r.c.events_log_full +
			     r.c.events_drain_done;
		fwrite(&r, sizeof(r), 1, f);
	}
}

/* NXDCTL_TEST_STATS of a volume that lost acknowledged writes. */
static void acked_lost_fn(FILE *f, const void *arg)
{
	static struct nxd_ioc_stats r;

	r = *(const struct nxd_ioc_stats *)arg;
	r.c.acked_lost = 1;
	r.c.events_acked_lost = 1;
	fwrite(&r, sizeof(r), 1, f);
}

/* NXDCTL_TEST_EVENTS for a volume degraded before the monitor starts. */
static void events_degraded_fn(FILE *f, const void *arg)
{
	static struct nxd_ioc_stats r;

	r = *(const struct nxd_ioc_stats *)arg;
	r.c.degraded = 1;
	r.c.events_degraded = 1;
	r.c.ssd_errors = 1;
	r.c.index_entries = 5;
	r.c.last_event = NXD_EV_DEGRADED;
	r.c.events = 1;
	fwrite(&r, sizeof(r), 1, f);	/* at start: degraded */
	r.c.events_drain_done = 1;
	r.c.index_entries = 0;
	r.c.last_event = NXD_EV_DRAIN_DONE;
	r.c.events = 2;
	fwrite(&r, sizeof(r), 1, f);	/* its frozen log emptied */
}

static bool env_has(char **env, const char *kv)
{
	for (; env && *env; env++)
		if (!strcmp(*env, kv))
			return true;
	return false;
}

static void test_events(const struct nxd_ioc_stats *st, const char *out)
{
	static struct nxdctl_event e;
	struct nxd_ioc_counters prev = st->c, now = st->c;
	char kinds[64], **env;
	size_t len;
	char *txt;

	memset(&e, 0, sizeof(e));
	e.volume = "ev\"0";
	e.major = 253;
	e.minor = 4;
	e.event_nr = 7;
	e.time_ms = 1764145801123ULL;	/* 2025-11-26T08:30:01.123Z */
	check(nxdctl_event_diff(&e, &now, &prev) == 0, "events: none");
	nxdctl_event_kinds(&e, kinds, sizeof(kinds));
	check(!kinds[0], "events: no kinds");
	now.events_log_full = 1;
	now.events_drain_done = 2;
	check(nxdctl_event_diff(&e, &now, &prev) == 3 &&
	      e.count[NXD_EV_LOG_FULL] == 1 &&
	      e.count[NXD_EV_DRAIN_DONE] == 2 && !e.count[NXD_EV_DEGRADED],
	      "events: counted per kind");
	nxdctl_event_kinds(&e, kinds, sizeof(kinds));
	check(!strcmp(kinds, "log_full,drain_done"), "events: kinds '%s'",
	      kinds);
	check(nxdctl_event_diff(&e, &prev, &now) == 0 &&
	      !strcmp(nxdctl_event_kind_name(NXD_EV_DEGRADED), "degraded") &&
	      !strcmp(nxdctl_event_kind_name(NXD_EV_ACKED_LOST), "acked_lost") &&
	      !nxdctl_event_kind_name(0) && !nxdctl_event_kind_name(5),
	      "events: a counter going back counts from zero; names");
	prev.events_degraded = 5;
	now.events_degraded = 1;
	check(nxdctl_event_diff(&e, &now, &prev) == 4 &&
	      e.count[NXD_EV_DEGRADED] == 1, "events: new volume, same name");
	check(!strcmp(nxdctl_event_state(&e), "unknown"),
	      "events: state unknown without sysfs or degraded");
	strcpy(e.state, "ok");
	check(!strcmp(nxdctl_event_state(&e), "ok"), "events: state");
	txt = capture(event_json_fn, &e, &len);
	check(txt && len && txt[len - 1] == '\n' &&
	      !memchr(txt, '\n', len - 1), "events: JSON on one line");
	check(txt && strstr(txt, "\"volume\":\"ev\\\"0\"") &&
	      strstr(txt, "\"timestamp\":\"2025-11-26T08:30:01.123Z\"") &&
	      strstr(txt, "\"events\":[\"degraded\",\"log_full\","
		     "\"drain_done\"]") &&
	      strstr(txt, "\"device\":\"253:4\""),
	      "events: JSON fields");
	free(txt);
	check(!write_file(out, "event.json", event_json_fn, &e),
	      "write event.json");
	txt = capture(event_text_fn, &e, &len);
	check(txt && !strncmp(txt, "2025-11-26T08:30:01.123Z ev\"0 "
			      "degraded,log_full,drain_done state ok", 60),
	      "events: text line");
	free(txt);
	env = nxdctl_event_env(&e);
	check(env && env_has(env, "NXD_VOLUME=ev\"0") &&
	      env_has(env, "NXD_EVENTS=degraded,log_full,drain_done") &&
	      env_has(env, "NXD_NEW_DRAIN_DONE=2") &&
	      env_has(env, "NXD_EVENT_NR=7") &&
	      env_has(env, "NXD_LOG_BLOCKS=262144") &&
	      env_has(env, "NXD_DEVICE=253:4") &&
	      env_has(env, "NXD_TIME=1764145801") &&
	      env_has(env, "NXD_EVENTS_TOTAL=0") &&
	      !env_has(env, "NXD_EVENTS=0"),
	      "events: environment for --exec");
	nxdctl_env_free(env);
	e.removed = true;
	nxdctl_event_kinds(&e, kinds, sizeof(kinds));
	txt = capture(event_json_fn, &e, &len);
	check(!strcmp(kinds, "removed") && txt &&
	      strstr(txt, "\"events\":[\"removed\"]") &&
	      !strstr(txt, "counters"), "events: removed");
	free(txt);
	check(!write_file(out, "events.stats", events_seq_fn, st),
	      "write events.stats");
	check(!write_file(out, "events-degraded.stats", events_degraded_fn,
			  st), "write events-degraded.stats");
	check(!write_file(out, "acked-lost.stats", acked_lost_fn, st),
	      "write acked-lost.stats");

	/* The state at start: reported only if abnormal. */
	memset(&e, 0, sizeof(e));
	e.volume = "ev0";
	now = st->c;
	check(!nxdctl_event_current(&e, &now) && e.initial,
	      "events: a healthy start reports nothing");
	now.log_full = 1;
	now.acked_lost = 1;
	check(nxdctl_event_current(&e, &now) ==
	      ((1U << NXD_EV_LOG_FULL) | (1U << NXD_EV_ACKED_LOST)),
	      "events: log full and acked_lost at start");
	nxdctl_event_kinds(&e, kinds, sizeof(kinds));
	check(!strcmp(kinds, "log_full,acked_lost") &&
	      nxdctl_event_level(&e) == LOG_CRIT, "events: kinds at start "
	      "'%s', critical", kinds);
	now = st->c;
	strcpy(e.state, "degraded");
	check(nxdctl_event_current(&e, &now) == 1U << NXD_EV_DEGRADED,
	      "events: sysfs degraded at start");
	txt = capture(event_json_fn, &e, &len);
	check(txt && strstr(txt, "\"events\":[\"degraded\"]") &&
	      strstr(txt, "\"initial\":true") &&
	      strstr(txt, "\"new\":{\"degraded\":0,"), "events: JSON at start");
	free(txt);
	txt = capture(event_text_fn, &e, &len);
	check(txt && strstr(txt, " ev0 degraded state degraded, ") &&
	      strstr(txt, "(at start, event 0)\n"), "events: text at start");
	free(txt);
	env = nxdctl_event_env(&e);
	check(env && env_has(env, "NXD_INITIAL=1") &&
	      env_has(env, "NXD_EVENTS=degraded"), "events: env at start");
	nxdctl_env_free(env);
	memset(&e, 0, sizeof(e));
	e.volume = "ghost";
	e.missing = true;
	txt = capture(event_text_fn, &e, &len);
	check(txt && strstr(txt, " ghost missing state inactive (in the "
			    "configuration file, not active)\n") &&
	      nxdctl_event_level(&e) == LOG_ERR, "events: missing");
	free(txt);
	e.missing = false;
	e.count[NXD_EV_LOG_FULL] = 1;
	check(nxdctl_event_level(&e) == LOG_WARNING, "events: log_full warns");
	e.count[NXD_EV_LOG_FULL] = 0;
	e.count[NXD_EV_DRAIN_DONE] = 1;
	check(nxdctl_event_level(&e) == LOG_INFO, "events: drain_done informs");
}

int main(int argc, char **argv)
{
	static struct nxd_ioc_stats st;

	if (argc != 3) {
		fprintf(stderr, "usage: test_fmt FIGURE6_TXT OUTDIR\n");
		return 2;
	}
	fill_fig6(&st);
	test_figure6(&st, argv[1]);
	test_labels();
	test_compat(&st);
	test_routes(&st);
	test_sums_delta(&st);
	test_parse();
	test_misc();
	test_suggest(&st);
	test_route_share(&st);
	test_list(argv[2]);
	test_status(&st);
	test_destage_mean(&st);
	test_events(&st, argv[2]);
	check(!write_file(argv[2], "fig6.stats", raw_fn, &st),
	      "write fig6.stats");
	check(!write_file(argv[2], "hist.json", json_hist_fn, &st),
	      "write hist.json");
	check(!write_file(argv[2], "stats.json", json_stats_fn, &st),
	      "write stats.json");
	return failed ? 1 : 0;
}
