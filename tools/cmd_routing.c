// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl routing: the adaptive routing of a volume (NXD_IOC_GET_AUTO):
 * the threshold, its bounds and changes by reason, the service-time
 * estimates, the stream table, the stripe splits.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "nxdctl.h"
#include "json.h"

static const char *reason(unsigned int r)
{
	return nxd_auto_reason_name((enum nxd_auto_reason)r);
}

static void routing_json(const struct vol *v, const struct nxd_ioc_auto *a)
{
	static const char *const dev[2] = { "ssd", "hdd" };
	struct jw j;
	unsigned int i, k;

	jw_start(&j, stdout, true);
	jw_open(&j, NULL, '{');
	jw_str(&j, "volume", v->name);
	jw_bool(&j, "active", a->active);
	jw_str(&j, "mode", nxd_mode_name(a->mode));
	jw_u64(&j, "threshold", a->threshold);
	jw_u64(&j, "min_threshold", a->min_thr);
	jw_u64(&j, "max_threshold", a->max_thr);
	jw_u64(&j, "log_occupancy_pct", a->occ_pct);
	jw_u64(&j, "destage_headroom_pct", a->headroom_pct);
	jw_u64(&j, "stripe_bytes", a->stripe_bytes);
	jw_u64(&j, "stream_min", a->stream_min);
	jw_u64(&j, "ticks", a->ticks);
	jw_u64(&j, "changes", a->changes);
	jw_u64(&j, "raises", a->raises);
	jw_u64(&j, "lowers", a->lowers);
	jw_open(&j, "changes_by_reason", '{');
	for (i = 1; i < NXD_AUTO_R_MAX && i < NXD_AUTO_NREASONS; i++)
		jw_u64(&j, reason(i), a->by_reason[i]);
	jw_close(&j, '}');
	jw_open(&j, "last_change", '{');
	jw_u64(&j, "from", a->last_from);
	jw_u64(&j, "to", a->last_to);
	jw_str(&j, "reason", reason(a->last_reason));
	jw_close(&j, '}');
	jw_u64(&j, "probes", a->probes);
	jw_u64(&j, "samples_ssd", a->samples[0]);
	jw_u64(&j, "samples_hdd", a->samples[1]);
	jw_open(&j, "service_ns", '{');
	for (i = 0; i < 2; i++) {
		jw_open(&j, dev[i], '[');
		for (k = 0; k < NXD_HIST_NBUCKETS; k++)
			jw_u64(&j, NULL, a->est_ns[i][k]);
		jw_close(&j, ']');
	}
	jw_close(&j, '}');
	jw_u64(&j, "stream_writes", a->stream_writes);
	jw_u64(&j, "split_cuts", a->split_cuts);
	jw_u64(&j, "split_log_bytes", a->split_log_bytes);
	jw_u64(&j, "split_hdd_bytes", a->split_hdd_bytes);
	jw_u64(&j, "stream_hits", a->stream_hits);
	jw_u64(&j, "stream_misses", a->stream_misses);
	jw_u64(&j, "stream_merges", a->stream_merges);
	jw_u64(&j, "stream_evictions", a->stream_evictions);
	jw_u64(&j, "stream_longs", a->stream_longs);
	jw_open(&j, "streams", '[');
	for (i = 0; i < a->nstreams && i < NXD_AUTO_NSTREAMS; i++) {
		jw_open(&j, NULL, '{');
		jw_u64(&j, "start", a->streams[i].start);
		jw_u64(&j, "next", a->streams[i].next);
		jw_u64(&j, "idle", a->streams[i].idle);
		jw_close(&j, '}');
	}
	jw_close(&j, ']');
	jw_close(&j, '}');
}

static void routing_text(const struct vol *v, const struct nxd_ioc_auto *a)
{
	unsigned int i, k;
	bool any = false;

	printf("%s: mode %s%s\n", v->name, nxd_mode_name(a->mode),
	       a->active ? "" : " (no live table)");
	printf("  threshold %u bytes, bounds %u - %u\n", a->threshold,
	       a->min_thr, a->max_thr);
	printf("  log occupancy %u %%, destage headroom %u %%\n", a->occ_pct,
	       a->headroom_pct);
	printf("  changes %llu (raises %llu, lowers %llu) in %llu ticks, "
	       "%llu probes\n", (unsigned long long)a->changes,
	       (unsigned long long)a->raises, (unsigned long long)a->lowers,
	       (unsigned long long)a->ticks, (unsigned long long)a->probes);
	printf("  by reason:");
	for (i = 1; i < NXD_AUTO_R_MAX && i < NXD_AUTO_NREASONS; i++)
		printf(" %s %llu", reason(i),
		       (unsigned long long)a->by_reason[i]);
	printf("\n");
	if (a->changes)
		printf("  last change: %u -> %u (%s)\n", a->last_from,
		       a->last_to, reason(a->last_reason));
	printf("  service time (EWMA, us):\n");
	for (k = 0; k < NXD_HIST_NBUCKETS; k++) {
		if (!a->est_ns[0][k] && !a->est_ns[1][k])
			continue;
		any = true;
		printf("    %-14s ssd %9.1f  hdd %9.1f\n", nxd_hist_labels[k],
		       a->est_ns[0][k] / 1e3, a->est_ns[1][k] / 1e3);
	}
	if (!any)
		printf("    (no samples)\n");
	printf("  stripe %u bytes: %llu cuts, %llu bytes to the log, "
	       "%llu to the HDD\n", a->stripe_bytes,
	       (unsigned long long)a->split_cuts,
	       (unsigned long long)a->split_log_bytes,
	       (unsigned long long)a->split_hdd_bytes);
	printf("  streams: %llu small writes to the HDD in runs of at least "
	       "%u bytes; hits %llu, misses %llu, merges %llu, "
	       "evictions %llu\n", (unsigned long long)a->stream_writes,
	       a->stream_min, (unsigned long long)a->stream_hits,
	       (unsigned long long)a->stream_misses,
	       (unsigned long long)a->stream_merges,
	       (unsigned long long)a->stream_evictions);
	printf("  stream table (%u of %u):\n", a->nstreams, NXD_AUTO_NSTREAMS);
	if (a->nstreams)
		printf("    %14s %14s %12s %8s\n", "start", "next", "bytes",
		       "idle");
	for (i = 0; i < a->nstreams && i < NXD_AUTO_NSTREAMS; i++)
		printf("    %14llu %14llu %12llu %8llu\n",
		       (unsigned long long)a->streams[i].start,
		       (unsigned long long)a->streams[i].next,
		       (unsigned long long)(a->streams[i].next -
					    a->streams[i].start) * 512,
		       (unsigned long long)a->streams[i].idle);
}

static int do_routing(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' }, HELP_OPT, { 0 }
	};
	bool json = false;
	const struct simple_opt so[] = { { 'j', &json, NULL }, { 0 } };
	struct nxd_ioc_auto a;
	struct vol v;
	int rc;

	rc = simple_opts(c, argc, argv, "jh", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_vol(c, argc, argv, &v);
	if (!rc)
		rc = get_auto(&v, &a);
	if (rc)
		return rc;
	if (json)
		routing_json(&v, &a);
	else
		routing_text(&v, &a);
	return 0;
}

const struct cmd cmd_routing = {
	"routing", do_routing, "VOL [--json]",
	"Show the adaptive routing of VOL: the threshold, its bounds and "
	"changes\nby reason, service times, stripe splits and the stream "
	"table.",
	"In mode adaptive the write threshold moves within auto_min_threshold "
	"and\nauto_max_threshold (nxdctl config); a long sequential run of "
	"small writes\n(stream_min bytes) goes to the HDD, and a large write "
	"is cut at stripe\nboundaries (stripe_size, or the HDD's "
	"optimal_io_size).  Sectors are 512 bytes;\nidle is the writes "
	"seen since the entry was last used.\n"
	"Options:\n"
	"  --json   one JSON object\n" VOL_HELP,
};
