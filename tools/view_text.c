// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl's text views (view.h): the NytroXD histogram, the routes table,
 * counters by name and the volume list.  Tables through libsmartcols.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <libsmartcols.h>

#include "../kernel/nxd_core.h"
#include "fmt.h"
#include "view.h"

static const char *const dir_name[NXD_H_NDIR] = { "Reads", "Writes" };

/*
 * Figure 6 pads "Num <Dir> <label>" to 30 columns for the single-size
 * labels and to 29 for the ranges, then "= N".  Kept byte for byte.
 */
void nxdctl_print_histogram(FILE *f, const struct nxd_ioc_stats *st)
{
	nxdctl_print_histogram_compat(f, st, false);
}

void nxdctl_print_histogram_compat(FILE *f, const struct nxd_ioc_stats *st,
				   bool compat)
{
	unsigned int b, n = NXD_HIST_NBUCKETS - (compat ? 1 : 0);
	struct nxd_hist_cell s, big;
	char buf[64];
	int d;

	fputs("Histogram :\n=====\n", f);
	for (d = 0; d < NXD_H_NDIR; d++) {
		for (b = 0; b < n; b++) {
			const char *l = nxd_hist_labels[b];
			int w = strstr(l, " - ") ? 29 : 30;

			nxdctl_cell_sum(st, d, b, -1, -1, &s);
			/* NytroXD's last line takes everything above 16M. */
			if (compat && b == n - 1) {
				nxdctl_cell_sum(st, d, b + 1, -1, -1, &big);
				s.count += big.count;
			}
			snprintf(buf, sizeof(buf), "Num %s %s", dir_name[d], l);
			fprintf(f, "%-*s= %" PRIu64 "\n", w, buf,
				(uint64_t)s.count);
		}
	}
}

int nxdctl_add_col(struct libscols_table *tb, const char *name, bool right)
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

static void fmt_why(char *buf, size_t len, const struct nxdctl_why *w,
		    bool ssd);

int nxdctl_print_routes(FILE *f, const struct nxd_ioc_stats *st)
{
	return nxdctl_print_routes_why(f, st, -1, 0);
}

int nxdctl_print_routes_why(FILE *f, const struct nxd_ioc_stats *st,
			    int64_t thr, uint32_t mode)
{
	static const char *const cols[] = {
		"OP", "SIZE", "REQS", "SSD", "HDD", "ALIGNED", "UNALIGNED",
		"MEAN_LAT", "SSD_LAT", "HDD_LAT", "SSD_WHY", "HDD_WHY",
	};
	unsigned int ncols = ARRAY_SIZE_NXDCTL(cols) - (thr < 0 ? 2 : 0);
	struct libscols_table *tb;
	unsigned int i, b;
	int d, rc = 0;

	tb = scols_new_table();
	if (!tb)
		return -ENOMEM;
	scols_table_set_stream(tb, f);
	for (i = 0; i < ncols && !rc; i++)
		rc = nxdctl_add_col(tb, cols[i], i >= 2 && i < 10);
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
			rc |= scols_line_set_data(ln, 0, nxdctl_dir_key[d]);
			rc |= scols_line_set_data(ln, 1, nxd_hist_labels[b]);
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
			if (thr >= 0 && d == NXD_H_WRITE) {
				struct nxdctl_why w;
				char why[128];

				nxdctl_route_why(st, b, thr, mode, &w);
				fmt_why(why, sizeof(why), &w, true);
				rc |= scols_line_set_data(ln, 10, why);
				fmt_why(why, sizeof(why), &w, false);
				rc |= scols_line_set_data(ln, 11, why);
			} else if (thr >= 0) {
				rc |= scols_line_set_data(ln, 10, "-");
				rc |= scols_line_set_data(ln, 11, "-");
			}
		}
	}
	if (!rc)
		rc = scols_print_table(tb);
	scols_unref_table(tb);
	return rc ? -EIO : 0;
}

void nxdctl_print_stats(FILE *f, const struct nxd_ioc_stats *st)
{
	unsigned int i;

	for (i = 0; i < nxdctl_nr_counters; i++)
		fprintf(f, "%-22s %" PRIu64 "\n", nxdctl_counters[i].name,
			nxdctl_counter_get(&st->c, i));
	for (i = 0; i < nxdctl_nr_derived; i++)
		fprintf(f, "%-22s %" PRIu64 "\n", nxdctl_derived[i].name,
			nxdctl_derived[i].get(&st->c));
}

static void fmt_why(char *buf, size_t len, const struct nxdctl_why *w,
		    bool ssd)
{
	const struct { const char *what; uint64_t n; } r[] = {
		{ "size", ssd ? w->ssd_size : w->hdd_size },
		{ "unaligned", ssd ? w->ssd_unaligned : 0 },
		{ "chunk", ssd ? w->ssd_chunk : 0 },
		{ "full", ssd ? 0 : w->hdd_full },
		{ "mode", ssd ? w->ssd_mode : w->hdd_mode },
		{ ssd ? "size|chunk" : "size|full",
		  ssd ? w->ssd_either : w->hdd_either },
	};
	size_t l = 0;
	unsigned int i;

	buf[0] = 0;
	for (i = 0; i < ARRAY_SIZE_NXDCTL(r) && l + 1 < len; i++) {
		if (!r[i].n)
			continue;
		l += snprintf(buf + l, len - l, "%s%s %" PRIu64, l ? ", " : "",
			      r[i].what, r[i].n);
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}
