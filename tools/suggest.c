// SPDX-License-Identifier: GPL-2.0
/* suggest-threshold: the cost model and its report (suggest.h). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../kernel/nxd_core.h"
#include "fmt.h"
#include "suggest.h"

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
 * rotation) and its transfer, twice over on an array with a known stripe
 * if it is not a whole number of stripes (RAID5/6 read-modify-write: read
 * the old data and parity, then write).  Through the log it costs an SSD write now
 * and, later, a sequential destage of the same bytes to the HDD with no
 * positioning of its own (destage coalesces).  The threshold is the largest
 * bucket boundary up to which every bucket's direct cost is at least
 * NXDCTL_SUGGEST_FACTOR times the logged cost, and no larger than the
 * stripe.
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
		/* RAID6 partial stripe: read old data and parity, then write. */
		int rmw = sp->stripe && (uint64_t)s % sp->stripe ? 2 : 1;

		sg->cost_hdd_ms[b] = rmw * (1e3 / sp->hdd_iops +
					    xfer_ms(s, sp->hdd_mbps));
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
	/* Never above a full stripe, the array's best write, unless told. */
	while (sp->stripe && !sp->no_stripe_cap && sg->bucket > 0) {
		nxdctl_bucket_range(sg->bucket, &lo, &hi);
		if (hi <= sp->stripe)
			break;
		if (!sg->uncapped)
			sg->uncapped = hi;
		sg->bucket--;
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
		"transfer%s.\nVia log: SSD write + its later sequential destage "
		"to the HDD.\n", sp->stripe ? ", twice for\na partial "
		"stripe (read-modify-write)" : "");
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
	if (sp->stripe) {
		nxdctl_fmt_size(a, sizeof(a), sp->stripe);
		nxdctl_fmt_size(c, sizeof(c), sp->chunk);
		fprintf(f, "The array: full stripe %s, chunk %s.  ", a, c);
		if (sg->uncapped) {
			char u[32];

			nxdctl_fmt_size(u, sizeof(u), sg->uncapped);
			fprintf(f, "The costs alone would say %s, but a write "
				"of a full\nstripe is the array's best case "
				"(no read-modify-write), and logging it\nonly "
				"doubles its bytes: the threshold stays at or "
				"below the stripe\n(--no-stripe-cap to lift "
				"this).\n\n", u);
		} else {
			fprintf(f, "The threshold is within a stripe.\n\n");
		}
	}
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
	if (sp->chunk > 4096) {
		nxdctl_fmt_size(a, sizeof(a), sp->chunk);
		fprintf(f, "Writes not aligned to the chunk (%s) also go to the "
			"log whatever their size;\nthe histogram counts 4 KiB "
			"alignment only, so the share above leaves them "
			"out.\n", a);
	}
	fprintf(f, "Apply with: nxdctl threshold %s --write %s\n", vol, sz);
}
