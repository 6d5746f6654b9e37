/* SPDX-License-Identifier: GPL-2.0 */
/*
 * suggest-threshold's cost model and its report (suggest.c): from a
 * histogram and the speeds of the two devices, the write threshold above
 * which the log stops paying off.
 */
#ifndef NXDCTL_SUGGEST_H
#define NXDCTL_SUGGEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stats.h"

struct nxdctl_speeds {
	double ssd_iops, ssd_mbps;	/* MB = 10^6 bytes */
	double hdd_iops, hdd_mbps;
	/*
	 * The array's geometry, 0 if unknown: its minimum I/O size (the md
	 * chunk) and optimal I/O size (the full stripe).  With a stripe, a
	 * direct write that is not a whole number of stripes pays a
	 * read-modify-write, and the threshold stays at or below a stripe
	 * unless @no_stripe_cap.
	 */
	uint64_t chunk, stripe;
	bool no_stripe_cap;
};

#define NXDCTL_SUGGEST_FACTOR	2.0

struct nxdctl_suggestion {
	/* Per bucket upper bound (buckets 1..15: 4K .. 32M). */
	double cost_hdd_ms[NXD_HIST_NBUCKETS];
	double cost_log_ms[NXD_HIST_NBUCKETS];
	int bucket;		/* last bucket routed to the log, -1: none */
	uint64_t threshold;	/* bytes; 0 if the log never pays off */
	uint64_t uncapped;	/* what the costs alone said, if capped */
	uint64_t w_reqs, w_bytes;	/* all writes in the histogram */
	uint64_t log_reqs, log_bytes;	/* those <= threshold */
	int64_t cur_threshold;		/* -1: unknown */
	uint64_t cur_reqs, cur_bytes;	/* those <= cur_threshold */
};

void nxdctl_suggest(const struct nxd_ioc_stats *st,
		    const struct nxdctl_speeds *sp, int64_t cur_threshold,
		    struct nxdctl_suggestion *sg);
/* Share of the histogram's writes that threshold @thr sends to the log. */
void nxdctl_route_share(const struct nxd_ioc_stats *st, uint64_t thr,
			uint64_t *reqs, uint64_t *bytes);
void nxdctl_print_suggestion(FILE *f, const char *vol,
			     const struct nxdctl_speeds *sp,
			     const struct nxdctl_suggestion *sg);

#endif /* NXDCTL_SUGGEST_H */
