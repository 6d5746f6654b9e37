// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: formatting and arithmetic on struct nxd_ioc_stats.  No kernel,
 * no device access: unit-tested by tools/tests/test_fmt.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <libsmartcols.h>

#include "nxdctl.h"

const char *const nxdctl_hist_label[NXD_HIST_NBUCKETS] = {
	"< 4K", "4K", "4K+1 - 8K", "8K+1 - 16K", "16K+1 - 32K",
	"32K+1 - 64K", "64K+1 - 128K", "128K+1 - 256K", "256K+1 - 512K",
	"512K+1 - 1M", "1M+1 - 2M", "2M+1 - 4M", "4M+1 - 8M", "8M+1 - 16M",
	"16M+1 - 32M", "> 32M",
};

static const char *const dir_name[NXD_H_NDIR] = { "Reads", "Writes" };
static const char *const dir_key[NXD_H_NDIR] = { "read", "write" };
static const char *const route_key[NXD_H_NROUTE] = { "ssd", "hdd" };
static const char *const align_key[NXD_H_NALIGN] = { "aligned", "unaligned" };

void nxdctl_bucket_range(unsigned int b, uint64_t *lo, uint64_t *hi)
{
	if (b == 0) {
		*lo = 0;
		*hi = 4095;
	} else if (b == 1) {
		*lo = *hi = 4096;
	} else if (b < NXD_HIST_NBUCKETS - 1) {
		*lo = (4096ULL << (b - 2)) + 1;
		*hi = 4096ULL << (b - 1);
	} else {
		*lo = (4096ULL << (NXD_HIST_NBUCKETS - 3)) + 1;
		*hi = UINT64_MAX;
	}
}

int nxdctl_bucket_of_bound(uint64_t bytes)
{
	unsigned int b;
	uint64_t lo, hi;

	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		nxdctl_bucket_range(b, &lo, &hi);
		if (hi == bytes)
			return b;
	}
	return -1;
}

void nxdctl_cell_sum(const struct nxd_ioc_stats *st, int dir, unsigned int b,
		     int route, int align, struct nxd_hist_cell *out)
{
	int r, a;

	memset(out, 0, sizeof(*out));
	for (r = 0; r < NXD_H_NROUTE; r++) {
		if (route >= 0 && r != route)
			continue;
		for (a = 0; a < NXD_H_NALIGN; a++) {
			const struct nxd_hist_cell *c = &st->hist[dir][b][r][a];

			if (align >= 0 && a != align)
				continue;
			out->count += c->count;
			out->bytes += c->bytes;
			out->time_ns += c->time_ns;
		}
	}
}

#define CNT(n, g) { #n, offsetof(struct nxd_ioc_counters, n), g }
const struct nxdctl_counter nxdctl_counters[] = {
	CNT(log_blocks, true),
	CNT(log_used_blocks, true),
	CNT(index_entries, true),
	CNT(index_bytes, true),
	CNT(writes_logged, false),
	CNT(writes_direct, false),
	CNT(writes_around_full, false),
	CNT(reads_hdd, false),
	CNT(reads_ssd, false),
	CNT(segments_written, false),
	CNT(log_blocks_written, false),
	CNT(invalidations, false),
	CNT(rmw_reads, false),
	CNT(destaged_blocks, false),
	CNT(destaged_bytes, false),
	CNT(destage_bios, false),
	CNT(destage_throttled_ms, false),
	CNT(segments_reclaimed, false),
	CNT(ssd_errors, false),
	CNT(hdd_errors, false),
	CNT(flushes, false),
	CNT(discards, false),
	CNT(recovered_segments, true),
	CNT(recovered_blocks, true),
	CNT(recovery_us, true),
	CNT(degraded, true),
};
#undef CNT
const unsigned int nxdctl_nr_counters = ARRAY_SIZE_NXDCTL(nxdctl_counters);

uint64_t nxdctl_counter_get(const struct nxd_ioc_counters *c, unsigned int i)
{
	uint64_t v;

	memcpy(&v, (const char *)c + nxdctl_counters[i].off, sizeof(v));
	return v;
}

static void counter_set(struct nxd_ioc_counters *c, unsigned int i,
			uint64_t v)
{
	memcpy((char *)c + nxdctl_counters[i].off, &v, sizeof(v));
}

void nxdctl_stats_delta(const struct nxd_ioc_stats *now,
			const struct nxd_ioc_stats *prev,
			struct nxd_ioc_stats *out)
{
	const struct nxd_hist_cell *n = &now->hist[0][0][0][0];
	const struct nxd_hist_cell *p = &prev->hist[0][0][0][0];
	struct nxd_hist_cell *o;
	unsigned int i, ncells = sizeof(now->hist) / sizeof(*n);

	*out = *now;
	o = &out->hist[0][0][0][0];
	/* A counter going backwards means someone reset: show it as is. */
	for (i = 0; i < ncells; i++) {
		if (n[i].count < p[i].count)
			continue;
		o[i].count = n[i].count - p[i].count;
		o[i].bytes = n[i].bytes - p[i].bytes;
		o[i].time_ns = n[i].time_ns - p[i].time_ns;
	}
	for (i = 0; i < nxdctl_nr_counters; i++) {
		uint64_t a = nxdctl_counter_get(&now->c, i);
		uint64_t b = nxdctl_counter_get(&prev->c, i);

		if (!nxdctl_counters[i].gauge && a >= b)
			counter_set(&out->c, i, a - b);
	}
}

/*
 * Figure 6 pads "Num <Dir> <label>" to 30 columns for the single-size
 * labels and to 29 for the ranges, then "= N".  Kept byte for byte.
 */
void nxdctl_print_histogram(FILE *f, const struct nxd_ioc_stats *st)
{
	struct nxd_hist_cell s;
	char buf[64];
	unsigned int b;
	int d;

	fputs("Histogram :\n=====\n", f);
	for (d = 0; d < NXD_H_NDIR; d++) {
		for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
			const char *l = nxdctl_hist_label[b];
			int w = strstr(l, " - ") ? 29 : 30;

			nxdctl_cell_sum(st, d, b, -1, -1, &s);
			snprintf(buf, sizeof(buf), "Num %s %s", dir_name[d], l);
			fprintf(f, "%-*s= %" PRIu64 "\n", w, buf,
				(uint64_t)s.count);
		}
	}
}

void nxdctl_fmt_lat(char *buf, size_t len, uint64_t time_ns, uint64_t count)
{
	double ns;

	if (!count) {
		snprintf(buf, len, "-");
		return;
	}
	ns = (double)time_ns / (double)count;
	if (ns < 1e3)
		snprintf(buf, len, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(buf, len, "%.1fus", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, len, "%.2fms", ns / 1e6);
	else
		snprintf(buf, len, "%.2fs", ns / 1e9);
}

static int add_col(struct libscols_table *tb, const char *name, bool right)
{
	return scols_table_new_column(tb, name, 0, right ? SCOLS_FL_RIGHT : 0) ?
		0 : -ENOMEM;
}

static int set_u64(struct libscols_line *ln, int col, uint64_t v)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return scols_line_set_data(ln, col, buf);
}

int nxdctl_print_routes(FILE *f, const struct nxd_ioc_stats *st)
{
	static const char *const cols[] = {
		"OP", "SIZE", "REQS", "SSD", "HDD", "ALIGNED", "UNALIGNED",
		"MEAN_LAT", "SSD_LAT", "HDD_LAT",
	};
	struct libscols_table *tb;
	unsigned int i, b;
	int d, rc = 0;

	tb = scols_new_table();
	if (!tb)
		return -ENOMEM;
	scols_table_set_stream(tb, f);
	for (i = 0; i < ARRAY_SIZE_NXDCTL(cols) && !rc; i++)
		rc = add_col(tb, cols[i], i >= 2);
	for (d = 0; d < NXD_H_NDIR && !rc; d++) {
		for (b = 0; b < NXD_HIST_NBUCKETS && !rc; b++) {
			struct libscols_line *ln = scols_table_new_line(tb, NULL);
			struct nxd_hist_cell all, c;
			char lat[32];

			if (!ln) {
				rc = -ENOMEM;
				break;
			}
			nxdctl_cell_sum(st, d, b, -1, -1, &all);
			rc |= scols_line_set_data(ln, 0, dir_key[d]);
			rc |= scols_line_set_data(ln, 1, nxdctl_hist_label[b]);
			rc |= set_u64(ln, 2, all.count);
			nxdctl_cell_sum(st, d, b, NXD_H_SSD, -1, &c);
			rc |= set_u64(ln, 3, c.count);
			nxdctl_fmt_lat(lat, sizeof(lat), c.time_ns, c.count);
			rc |= scols_line_set_data(ln, 8, lat);
			nxdctl_cell_sum(st, d, b, NXD_H_HDD, -1, &c);
			rc |= set_u64(ln, 4, c.count);
			nxdctl_fmt_lat(lat, sizeof(lat), c.time_ns, c.count);
			rc |= scols_line_set_data(ln, 9, lat);
			nxdctl_cell_sum(st, d, b, -1, NXD_H_ALIGNED, &c);
			rc |= set_u64(ln, 5, c.count);
			nxdctl_cell_sum(st, d, b, -1, NXD_H_UNALIGNED, &c);
			rc |= set_u64(ln, 6, c.count);
			nxdctl_fmt_lat(lat, sizeof(lat), all.time_ns, all.count);
			rc |= scols_line_set_data(ln, 7, lat);
		}
	}
	if (!rc)
		rc = scols_print_table(tb);
	scols_unref_table(tb);
	return rc ? -EIO : 0;
}

/* ---- a very small JSON writer ---- */

struct jw {
	FILE *f;
	bool pretty;
	bool first;
	int depth;
};

static void jw_raw_str(struct jw *j, const char *s)
{
	fputc('"', j->f);
	for (; *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			fprintf(j->f, "\\%c", c);
		else if (c < 0x20)
			fprintf(j->f, "\\u%04x", c);
		else
			fputc(c, j->f);
	}
	fputc('"', j->f);
}

static void jw_key(struct jw *j, const char *key)
{
	if (!j->first)
		fputc(',', j->f);
	j->first = false;
	if (j->pretty && j->depth)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	if (key) {
		jw_raw_str(j, key);
		fputs(j->pretty ? ": " : ":", j->f);
	}
}

static void jw_open(struct jw *j, const char *key, char c)
{
	jw_key(j, key);
	fputc(c, j->f);
	j->depth++;
	j->first = true;
}

static void jw_close(struct jw *j, char c)
{
	j->depth--;
	if (j->pretty && !j->first)
		fprintf(j->f, "\n%*s", 2 * j->depth, "");
	fputc(c, j->f);
	j->first = false;
	if (!j->depth)
		fputc('\n', j->f);
}

static void jw_u64(struct jw *j, const char *key, uint64_t v)
{
	jw_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

static void jw_str(struct jw *j, const char *key, const char *v)
{
	jw_key(j, key);
	jw_raw_str(j, v);
}

static void jw_cell(struct jw *j, const char *key,
		    const struct nxd_hist_cell *c)
{
	jw_open(j, key, '{');
	jw_u64(j, "count", c->count);
	jw_u64(j, "bytes", c->bytes);
	jw_u64(j, "time_ns", c->time_ns);
	jw_close(j, '}');
}

static void jw_start(struct jw *j, FILE *f, bool pretty)
{
	j->f = f;
	j->pretty = pretty;
	j->first = true;
	j->depth = 0;
}

void nxdctl_json_histogram(FILE *f, const struct nxd_ioc_stats *st,
			   const struct nxdctl_meta *m, bool pretty)
{
	struct jw j;
	unsigned int b;
	int d, r, a;

	jw_start(&j, f, pretty);
	jw_open(&j, NULL, '{');
	if (m && m->vol)
		jw_str(&j, "volume", m->vol);
	if (m && m->interval_s) {
		jw_u64(&j, "time", m->time);
		jw_u64(&j, "interval_s", m->interval_s);
	}
	jw_open(&j, "buckets", '[');
	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		uint64_t lo, hi;

		nxdctl_bucket_range(b, &lo, &hi);
		jw_open(&j, NULL, '{');
		jw_str(&j, "label", nxdctl_hist_label[b]);
		jw_u64(&j, "min_bytes", lo);
		if (hi == UINT64_MAX) {
			jw_key(&j, "max_bytes");
			fputs("null", f);
		} else {
			jw_u64(&j, "max_bytes", hi);
		}
		for (d = 0; d < NXD_H_NDIR; d++) {
			struct nxd_hist_cell s;

			jw_open(&j, dir_key[d], '{');
			nxdctl_cell_sum(st, d, b, -1, -1, &s);
			jw_u64(&j, "count", s.count);
			jw_u64(&j, "bytes", s.bytes);
			jw_u64(&j, "time_ns", s.time_ns);
			for (r = 0; r < NXD_H_NROUTE; r++) {
				jw_open(&j, route_key[r], '{');
				for (a = 0; a < NXD_H_NALIGN; a++)
					jw_cell(&j, align_key[a],
						&st->hist[d][b][r][a]);
				jw_close(&j, '}');
			}
			jw_close(&j, '}');
		}
		jw_close(&j, '}');
	}
	jw_close(&j, ']');
	jw_close(&j, '}');
}

void nxdctl_print_stats(FILE *f, const struct nxd_ioc_stats *st)
{
	unsigned int i;

	for (i = 0; i < nxdctl_nr_counters; i++)
		fprintf(f, "%-22s %" PRIu64 "\n", nxdctl_counters[i].name,
			nxdctl_counter_get(&st->c, i));
}

void nxdctl_json_stats(FILE *f, const struct nxd_ioc_stats *st,
		       const struct nxdctl_meta *m, bool pretty)
{
	struct jw j;
	unsigned int i;

	jw_start(&j, f, pretty);
	jw_open(&j, NULL, '{');
	if (m && m->vol)
		jw_str(&j, "volume", m->vol);
	jw_open(&j, "counters", '{');
	for (i = 0; i < nxdctl_nr_counters; i++)
		jw_u64(&j, nxdctl_counters[i].name,
		       nxdctl_counter_get(&st->c, i));
	jw_close(&j, '}');
	jw_close(&j, '}');
}

static void human(char *buf, size_t len, uint64_t bytes)
{
	static const char sfx[] = "BKMGTPE";
	double v = (double)bytes;
	int i = 0;

	while (v >= 1024.0 && i < 6) {
		v /= 1024.0;
		i++;
	}
	if (!i)
		snprintf(buf, len, "%" PRIu64 "B", bytes);
	else
		snprintf(buf, len, "%.1f%c", v, sfx[i]);
}

int nxdctl_print_list(FILE *f, const struct nxd_ioc_list *l, bool json)
{
	static const char *const cols[] = {
		"NAME", "MAJ:MIN", "SIZE", "WRITE_THR", "READ_THR", "MODE",
		"UUID",
	};
	unsigned int n = l->count < NXD_IOC_MAX_VOLS ? l->count :
			 NXD_IOC_MAX_VOLS;
	struct libscols_table *tb;
	unsigned int i, ma, mi;
	char buf[64];
	struct jw j;
	int rc = 0;

	if (json) {
		jw_start(&j, f, true);
		jw_open(&j, NULL, '{');
		jw_u64(&j, "total", l->total);
		jw_open(&j, "volumes", '[');
		for (i = 0; i < n; i++) {
			const struct nxd_ioc_vol *v = &l->vols[i];
			char name[NXD_NAME_LEN + 1];

			memcpy(name, v->name, NXD_NAME_LEN);
			name[NXD_NAME_LEN] = 0;
			nxdctl_decode_dev(v->dev, &ma, &mi);
			jw_open(&j, NULL, '{');
			jw_str(&j, "name", name);
			jw_u64(&j, "major", ma);
			jw_u64(&j, "minor", mi);
			jw_u64(&j, "sectors", v->sectors);
			jw_u64(&j, "write_threshold", v->write_threshold);
			jw_u64(&j, "read_threshold", v->read_threshold);
			jw_str(&j, "mode", nxdctl_mode_name(v->mode));
			nxdctl_fmt_uuid(buf, v->vol_uuid);
			jw_str(&j, "uuid", buf);
			jw_close(&j, '}');
		}
		jw_close(&j, ']');
		jw_close(&j, '}');
		return 0;
	}

	tb = scols_new_table();
	if (!tb)
		return -ENOMEM;
	scols_table_set_stream(tb, f);
	for (i = 0; i < ARRAY_SIZE_NXDCTL(cols) && !rc; i++)
		rc = add_col(tb, cols[i], i >= 2 && i <= 4);
	for (i = 0; i < n && !rc; i++) {
		const struct nxd_ioc_vol *v = &l->vols[i];
		struct libscols_line *ln = scols_table_new_line(tb, NULL);
		char name[NXD_NAME_LEN + 1];

		if (!ln) {
			rc = -ENOMEM;
			break;
		}
		memcpy(name, v->name, NXD_NAME_LEN);
		name[NXD_NAME_LEN] = 0;
		rc |= scols_line_set_data(ln, 0, name);
		nxdctl_decode_dev(v->dev, &ma, &mi);
		snprintf(buf, sizeof(buf), "%u:%u", ma, mi);
		rc |= scols_line_set_data(ln, 1, buf);
		human(buf, sizeof(buf), v->sectors << 9);
		rc |= scols_line_set_data(ln, 2, buf);
		nxdctl_fmt_size(buf, sizeof(buf), v->write_threshold);
		rc |= scols_line_set_data(ln, 3, buf);
		nxdctl_fmt_size(buf, sizeof(buf), v->read_threshold);
		rc |= scols_line_set_data(ln, 4, buf);
		rc |= scols_line_set_data(ln, 5, nxdctl_mode_name(v->mode));
		nxdctl_fmt_uuid(buf, v->vol_uuid);
		rc |= scols_line_set_data(ln, 6, buf);
	}
	if (!rc)
		rc = scols_print_table(tb);
	scols_unref_table(tb);
	return rc ? -EIO : 0;
}

void nxdctl_fmt_size(char *buf, size_t len, uint64_t bytes)
{
	static const char sfx[] = "KMGTPE";
	int i = -1;

	while (bytes && !(bytes & 1023) && i < 5) {
		bytes >>= 10;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%" PRIu64, bytes);
	else
		snprintf(buf, len, "%" PRIu64 "%c", bytes, sfx[i]);
}

const char *nxdctl_mode_name(uint32_t mode)
{
	static const char *const names[] = {
		"auto", "passthrough", "log_all",
	};

	return mode < ARRAY_SIZE_NXDCTL(names) ? names[mode] : "unknown";
}

void nxdctl_fmt_uuid(char *buf, const uint8_t u[16])
{
	sprintf(buf, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		"%02x%02x%02x%02x%02x%02x",
		u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		u[10], u[11], u[12], u[13], u[14], u[15]);
}

uint64_t nxdctl_encode_dev(unsigned int major, unsigned int minor)
{
	return (minor & 0xff) | (major << 8) | ((minor & ~0xffU) << 12);
}

void nxdctl_decode_dev(uint64_t dev, unsigned int *major, unsigned int *minor)
{
	*major = (dev & 0xfff00) >> 8;
	*minor = (dev & 0xff) | ((dev >> 12) & 0xfff00);
}

/* ---- suggest-threshold ---- */

/* Representative request size of bucket @b for the cost model. */
static double bucket_size(unsigned int b)
{
	uint64_t lo, hi;

	nxdctl_bucket_range(b, &lo, &hi);
	return hi == UINT64_MAX ? 2.0 * lo : (double)(hi ? hi : 1);
}

static double xfer_ms(double bytes, double mbps)
{
	return bytes / (mbps * 1e6) * 1e3;
}

/*
 * In auto mode the kernel logs a write if it is no larger than the
 * threshold, or if it is not 4 KiB aligned in offset and length (whatever
 * its size, to spare the HDD a read-modify-write): the unaligned cells of
 * larger buckets count too.  A threshold of 0 logs nothing.
 */
void nxdctl_route_share(const struct nxd_ioc_stats *st, uint64_t thr,
			uint64_t *reqs, uint64_t *bytes)
{
	struct nxd_hist_cell s;
	uint64_t lo, hi;
	unsigned int b;

	*reqs = *bytes = 0;
	if (!thr)
		return;
	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		nxdctl_bucket_range(b, &lo, &hi);
		nxdctl_cell_sum(st, NXD_H_WRITE, b, -1,
				hi <= thr ? -1 : NXD_H_UNALIGNED, &s);
		*reqs += s.count;
		*bytes += s.bytes;
	}
}

/*
 * A write sent to the HDD costs a positioning (1 / hdd_iops: seek plus
 * rotation) and its transfer.  Through the log it costs an SSD write now
 * and, later, a sequential destage of the same bytes to the HDD with no
 * positioning of its own (destage coalesces).  The threshold is the largest
 * bucket boundary up to which every bucket's direct cost is at least
 * NXDCTL_SUGGEST_FACTOR times the logged cost.
 */
void nxdctl_suggest(const struct nxd_ioc_stats *st,
		    const struct nxdctl_speeds *sp, int64_t cur_threshold,
		    struct nxdctl_suggestion *sg)
{
	unsigned int b;
	uint64_t lo, hi;

	memset(sg, 0, sizeof(*sg));
	sg->bucket = -1;
	sg->cur_threshold = cur_threshold;
	if (cur_threshold >= 0)
		nxdctl_route_share(st, (uint64_t)cur_threshold, &sg->cur_reqs,
				   &sg->cur_bytes);
	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		double s = bucket_size(b);

		sg->cost_hdd_ms[b] = 1e3 / sp->hdd_iops +
				     xfer_ms(s, sp->hdd_mbps);
		sg->cost_log_ms[b] = 1e3 / sp->ssd_iops +
				     xfer_ms(s, sp->ssd_mbps) +
				     xfer_ms(s, sp->hdd_mbps);
	}
	/* Boundaries 4K .. 32M: buckets 1 .. NBUCKETS - 2. */
	for (b = 1; b < NXD_HIST_NBUCKETS - 1; b++) {
		if (sg->cost_hdd_ms[b] <
		    NXDCTL_SUGGEST_FACTOR * sg->cost_log_ms[b])
			break;
		sg->bucket = b;
	}
	if (sg->bucket > 0) {
		nxdctl_bucket_range(sg->bucket, &lo, &hi);
		sg->threshold = hi;
	}
	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		struct nxd_hist_cell s;

		nxdctl_cell_sum(st, NXD_H_WRITE, b, -1, -1, &s);
		sg->w_reqs += s.count;
		sg->w_bytes += s.bytes;
	}
	if (sg->threshold)
		nxdctl_route_share(st, sg->threshold, &sg->log_reqs,
				   &sg->log_bytes);
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static void fmt_ms(char *buf, size_t len, double ms)
{
	if (ms < 1.0)
		snprintf(buf, len, "%.3f ms", ms);
	else
		snprintf(buf, len, "%.2f ms", ms);
}

void nxdctl_print_suggestion(FILE *f, const char *vol,
			     const struct nxdctl_speeds *sp,
			     const struct nxdctl_suggestion *sg)
{
	char a[32], c[32], sz[32];
	unsigned int b;
	int last;

	fprintf(f, "Cost of one write request.  HDD direct: positioning + "
		"transfer.\nVia log: SSD write + its later sequential destage "
		"to the HDD.\n");
	fprintf(f, "  %-6s %12s %12s %7s\n", "SIZE", "HDD direct",
		"via log", "ratio");
	last = sg->bucket < 0 ? 1 : sg->bucket + 1;
	if (last > NXD_HIST_NBUCKETS - 2)
		last = NXD_HIST_NBUCKETS - 2;
	for (b = 1; b <= (unsigned int)last; b++) {
		uint64_t lo, hi;

		nxdctl_bucket_range(b, &lo, &hi);
		nxdctl_fmt_size(sz, sizeof(sz), hi);
		fmt_ms(a, sizeof(a), sg->cost_hdd_ms[b]);
		fmt_ms(c, sizeof(c), sg->cost_log_ms[b]);
		fprintf(f, "  %-6s %12s %12s %7.1f%s\n", sz, a, c,
			sg->cost_hdd_ms[b] / sg->cost_log_ms[b],
			(int)b == sg->bucket ? "  <- threshold" : "");
	}
	fputc('\n', f);

	if (!sg->threshold) {
		fprintf(f,
			"No threshold pays off: even a 4K write costs the "
			"HDD less than %.0fx what it costs\nthrough the SSD "
			"log, so the log would only add work.  Consider "
			"the table option\n\"mode passthrough\" for %s.\n",
			NXDCTL_SUGGEST_FACTOR, vol);
		return;
	}

	nxdctl_fmt_size(sz, sizeof(sz), sg->threshold);
	fprintf(f, "Suggested write threshold: %s (%" PRIu64 " bytes)\n\n",
		sz, sg->threshold);
	fprintf(f,
		"Why: the HDD spends about %.2f ms positioning its heads for "
		"every request,\nwhatever its size, and moves %.0f MB/s once "
		"there; the SSD takes about %.3f ms\nper request and moves "
		"%.0f MB/s.  Up to %s, a write sent straight to the HDD\n"
		"costs at least %.0fx what it costs through the log, because "
		"the log turns it\ninto part of a sequential stream.  Above "
		"%s the transfer time dominates: the\nlog would save little, "
		"since the data must still be written to the HDD later.\n\n",
		1e3 / sp->hdd_iops, sp->hdd_mbps, 1e3 / sp->ssd_iops,
		sp->ssd_mbps, sz, NXDCTL_SUGGEST_FACTOR, sz);

	if (!sg->w_reqs) {
		fprintf(f, "The histogram has no writes yet, so the share of "
			"traffic this would send to\nthe log cannot be "
			"estimated; run the workload and ask again.\n");
	} else {
		fprintf(f, "With it, %.1f%% of the write requests (%" PRIu64
			" of %" PRIu64 ") and %.1f%% of the\nwritten bytes "
			"seen in the histogram would go to the SSD log (writes "
			"up to the\nthreshold, and unaligned writes of any "
			"size).\n",
			pct(sg->log_reqs, sg->w_reqs), sg->log_reqs,
			sg->w_reqs, pct(sg->log_bytes, sg->w_bytes));
	}
	if (sg->cur_threshold >= 0) {
		nxdctl_fmt_size(a, sizeof(a), (uint64_t)sg->cur_threshold);
		fprintf(f, "The current write threshold is %s", a);
		if (sg->w_reqs)
			fprintf(f, ": it sends %.1f%% of the requests\nand "
				"%.1f%% of the bytes to the log", pct(sg->cur_reqs,
				sg->w_reqs), pct(sg->cur_bytes, sg->w_bytes));
		fputs(".\n", f);
	}
	fprintf(f, "Apply with: nxdctl threshold %s --write %s\n", vol, sz);
}
