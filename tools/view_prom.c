// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl stats --prometheus: the Prometheus text exposition format
 * (version 0.0.4), for node_exporter's textfile collector.  Every metric
 * family is written once, with one sample per volume:
 *
 *   nxd_up                1 if the statistics could be read (no volume label)
 *   nxd_state{state=...}  1 for the volume's state, 0 for the others; a
 *                         volume of the configuration file that is not
 *                         active is "inactive"
 *   nxd_info{uuid,mode,hdd,ssd} 1, and the settings as gauges:
 *                         nxd_write_threshold_bytes, nxd_low_watermark_ratio,
 *                         nxd_high_watermark_ratio,
 *                         nxd_destage_rate_limit_bytes_per_second,
 *                         nxd_stream_share_ratio
 *   nxd_<counter>_total   the event counters of struct nxd_ioc_counters
 *   nxd_<gauge>           its gauges (log_blocks, index_entries, ...);
 *                         counters kept in ms or us are exported in
 *                         seconds (renamed: see unit_renames)
 *   nxd_request_size_bytes histogram per op (read, write): the size
 *                         buckets of dm-nxd (le = each bucket's upper
 *                         bound), _sum in bytes, _count in requests
 *   nxd_requests_total, nxd_request_bytes_total, nxd_request_seconds_total
 *                         per op, route (ssd, hdd) and alignment
 */
#include <inttypes.h>
#include <string.h>

#include "../kernel/nxd_core.h"
#include "fmt.h"
#include "view.h"

static const char *const states[] = { "ok", "suspended", "degraded",
				      "inactive" };

/* Counters the kernel keeps in ms or us, exported in seconds. */
static const struct {
	const char *counter, *metric;
	double per_second;
	const char *help;
} unit_renames[] = {
	{ "destage_throttled_ms", "nxd_destage_throttled_seconds_total", 1e3,
	  "Seconds the destager waited for its rate limit or HDD idleness." },
	{ "destage_busy_us", "nxd_destage_busy_seconds_total", 1e6,
	  "Seconds the destager spent in rounds (reading, writing, "
	  "flushing)." },
	{ "recovery_us", "nxd_recovery_seconds", 1e6,
	  "Seconds the last recovery took." },
};

/* A label value: backslash, double quote and newline escaped. */
static void label(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void family(FILE *f, const char *name, const char *type,
		   const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_start(FILE *f, const char *name,
			 const struct nxdctl_status *s)
{
	fprintf(f, "%s{volume=\"", name);
	label(f, s->name);
	fputc('"', f);
}

static void histogram(FILE *f, const struct nxdctl_status *s, int d)
{
	struct nxd_hist_cell c;
	uint64_t lo, hi, n = 0, bytes = 0;
	unsigned int b;

	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		nxdctl_bucket_range(b, &lo, &hi);
		nxdctl_cell_sum(&s->st, d, b, -1, -1, &c);
		n += c.count;
		bytes += c.bytes;
		sample_start(f, "nxd_request_size_bytes_bucket", s);
		if (hi == UINT64_MAX)
			fprintf(f, ",op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n",
				nxdctl_dir_key[d], n);
		else
			fprintf(f, ",op=\"%s\",le=\"%" PRIu64 "\"} %" PRIu64
				"\n", nxdctl_dir_key[d], hi, n);
	}
	sample_start(f, "nxd_request_size_bytes_sum", s);
	fprintf(f, ",op=\"%s\"} %" PRIu64 "\n", nxdctl_dir_key[d], bytes);
	sample_start(f, "nxd_request_size_bytes_count", s);
	fprintf(f, ",op=\"%s\"} %" PRIu64 "\n", nxdctl_dir_key[d], n);
}

/* Requests, bytes or seconds per op, route and alignment. */
static void routes(FILE *f, const struct nxdctl_status *s, const char *name,
		   int what)
{
	struct nxd_hist_cell t, c;
	unsigned int b;
	int d, r, a;

	for (d = 0; d < NXD_H_NDIR; d++) {
		for (r = 0; r < NXD_H_NROUTE; r++) {
			for (a = 0; a < NXD_H_NALIGN; a++) {
				memset(&t, 0, sizeof(t));
				for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
					nxdctl_cell_sum(&s->st, d, b, r, a, &c);
					t.count += c.count;
					t.bytes += c.bytes;
					t.time_ns += c.time_ns;
				}
				sample_start(f, name, s);
				fprintf(f, ",op=\"%s\",route=\"%s\",align=\"%s\"} ",
					nxdctl_dir_key[d], nxdctl_route_key[r],
					nxdctl_align_key[a]);
				if (what == 0)
					fprintf(f, "%" PRIu64 "\n",
						(uint64_t)t.count);
				else if (what == 1)
					fprintf(f, "%" PRIu64 "\n",
						(uint64_t)t.bytes);
				else
					fprintf(f, "%.9f\n", t.time_ns / 1e9);
			}
		}
	}
}

/* One gauge of the settings, for the active volumes that have it. */
static void setting(FILE *f, const struct nxdctl_status *s, unsigned int n,
		    const char *name, const char *help, int which)
{
	unsigned int i;

	family(f, name, "gauge", help);
	for (i = 0; i < n; i++) {
		const struct nxdctl_status *v = &s[i];

		if (v->missing)
			continue;
		if (which == 0) {
			sample_start(f, name, v);
			fprintf(f, "} %u\n", v->write_threshold);
		} else if (which == 1 && v->low_wm >= 0) {
			sample_start(f, name, v);
			fprintf(f, "} %.2f\n", v->low_wm / 100.0);
		} else if (which == 2 && v->high_wm >= 0) {
			sample_start(f, name, v);
			fprintf(f, "} %.2f\n", v->high_wm / 100.0);
		} else if (which == 3 && v->destage_limit >= 0) {
			sample_start(f, name, v);
			fprintf(f, "} %" PRId64 "\n",
				v->destage_limit * 1048576);
		} else if (which == 4 && v->stream_share >= 0) {
			sample_start(f, name, v);
			fprintf(f, "} %.2f\n", v->stream_share / 100.0);
		}
	}
}

static void settings(FILE *f, const struct nxdctl_status *s, unsigned int n)
{
	unsigned int i;
	char u[40];

	family(f, "nxd_info", "gauge", "Always 1: the volume's UUID, write "
	       "mode and devices (\"\" if unknown) as labels.");
	for (i = 0; i < n; i++) {
		if (s[i].missing)
			continue;
		nxdctl_fmt_uuid(u, s[i].uuid);
		sample_start(f, "nxd_info", &s[i]);
		fprintf(f, ",uuid=\"%s\",mode=\"%s\",hdd=\"", u,
			nxd_mode_name(s[i].mode));
		label(f, s[i].hdd);
		fputs("\",ssd=\"", f);
		label(f, s[i].ssd);
		fputs("\"} 1\n", f);
	}
	setting(f, s, n, "nxd_write_threshold_bytes", "Write threshold: "
		"writes up to this size go to the SSD log.", 0);
	setting(f, s, n, "nxd_low_watermark_ratio", "Log use below which the "
		"destager rests (low_watermark / 100).", 1);
	setting(f, s, n, "nxd_high_watermark_ratio", "Log use above which the "
		"destager runs flat out (high_watermark / 100).", 2);
	setting(f, s, n, "nxd_destage_rate_limit_bytes_per_second", "Destage "
		"rate limit (destage_rate); 0: none.", 3);
	setting(f, s, n, "nxd_stream_share_ratio", "Share of the HDD the "
		"destager leaves to foreground I/O on a full log "
		"(stream_share / 100).", 4);
}

/* The renamed family of counter @k, if its unit is not a base unit. */
static int unit_rename(unsigned int k)
{
	unsigned int r;

	for (r = 0; r < ARRAY_SIZE_NXDCTL(unit_renames); r++)
		if (!strcmp(nxdctl_counters[k].name, unit_renames[r].counter))
			return (int)r;
	return -1;
}

void nxdctl_prometheus(FILE *f, const struct nxdctl_status *s,
		       unsigned int n, bool up)
{
	char name[80];
	unsigned int i, k, m;
	int r;

	family(f, "nxd_up", "gauge", "1 if the dm-nxd statistics could be "
	       "read, 0 if not (module not loaded).");
	fprintf(f, "nxd_up %d\n", up);
	family(f, "nxd_state", "gauge", "State of the dm-nxd volume: 1 for "
	       "the current one (ok, suspended, degraded, inactive: "
	       "configured, not active).");
	for (i = 0; i < n; i++) {
		for (m = 0; m < ARRAY_SIZE_NXDCTL(states); m++) {
			sample_start(f, "nxd_state", &s[i]);
			fprintf(f, ",state=\"%s\"} %d\n", states[m],
				!strcmp(nxdctl_status_state(&s[i]), states[m]));
		}
	}
	settings(f, s, n);
	for (k = 0; k < nxdctl_nr_counters; k++) {
		const struct nxdctl_counter *c = &nxdctl_counters[k];

		r = unit_rename(k);
		if (r >= 0)
			snprintf(name, sizeof(name), "%s",
				 unit_renames[r].metric);
		else
			snprintf(name, sizeof(name), "nxd_%s%s", c->name,
				 c->gauge ? "" : "_total");
		family(f, name, c->gauge ? "gauge" : "counter",
		       r >= 0 ? unit_renames[r].help : c->help);
		for (i = 0; i < n; i++) {
			if (!s[i].have_stats)
				continue;
			sample_start(f, name, &s[i]);
			if (r >= 0)
				fprintf(f, "} %.6f\n",
					nxdctl_counter_get(&s[i].st.c, k) /
					unit_renames[r].per_second);
			else
				fprintf(f, "} %" PRIu64 "\n",
					nxdctl_counter_get(&s[i].st.c, k));
		}
	}
	family(f, "nxd_request_size_bytes", "histogram", "Request sizes "
	       "in the dm-nxd size buckets, per operation.");
	for (i = 0; i < n; i++) {
		if (!s[i].have_stats)
			continue;
		for (m = 0; m < NXD_H_NDIR; m++)
			histogram(f, &s[i], m);
	}
	family(f, "nxd_requests_total", "counter", "Requests per operation, "
	       "route (ssd: the log) and 4 KiB alignment.");
	for (i = 0; i < n; i++)
		if (s[i].have_stats)
			routes(f, &s[i], "nxd_requests_total", 0);
	family(f, "nxd_request_bytes_total", "counter", "Bytes per operation, "
	       "route and alignment.");
	for (i = 0; i < n; i++)
		if (s[i].have_stats)
			routes(f, &s[i], "nxd_request_bytes_total", 1);
	family(f, "nxd_request_seconds_total", "counter", "Service time, "
	       "submission to completion, per operation, route and "
	       "alignment.");
	for (i = 0; i < n; i++)
		if (s[i].have_stats)
			routes(f, &s[i], "nxd_request_seconds_total", 2);
}
