// SPDX-License-Identifier: GPL-2.0
/* nxdctl's JSON views (view.h), written with json.c. */
#include <string.h>

#include "../kernel/nxd_core.h"
#include "fmt.h"
#include "json.h"
#include "view.h"

static void jw_cell(struct jw *j, const char *key,
		    const struct nxd_hist_cell *c)
{
	jw_open(j, key, '{');
	jw_u64(j, "count", c->count);
	jw_u64(j, "bytes", c->bytes);
	jw_u64(j, "time_ns", c->time_ns);
	jw_close(j, '}');
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
		jw_str(&j, "label", nxd_hist_labels[b]);
		jw_u64(&j, "min_bytes", lo);
		if (hi == UINT64_MAX) {
			jw_null(&j, "max_bytes");
		} else {
			jw_u64(&j, "max_bytes", hi);
		}
		for (d = 0; d < NXD_H_NDIR; d++) {
			struct nxd_hist_cell s;

			jw_open(&j, nxdctl_dir_key[d], '{');
			nxdctl_cell_sum(st, d, b, -1, -1, &s);
			jw_u64(&j, "count", s.count);
			jw_u64(&j, "bytes", s.bytes);
			jw_u64(&j, "time_ns", s.time_ns);
			for (r = 0; r < NXD_H_NROUTE; r++) {
				jw_open(&j, nxdctl_route_key[r], '{');
				for (a = 0; a < NXD_H_NALIGN; a++)
					jw_cell(&j, nxdctl_align_key[a],
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
	jw_open(&j, "derived", '{');
	for (i = 0; i < nxdctl_nr_derived; i++)
		jw_u64(&j, nxdctl_derived[i].name, nxdctl_derived[i].get(&st->c));
	jw_close(&j, '}');
	jw_close(&j, '}');
}
