/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl's statistics model: what a struct nxd_ioc_stats means (bucket
 * ranges, sums over route and alignment, counters by name, deltas), with
 * no output and no kernel access.  The views (view.h) print it.
 */
#ifndef NXDCTL_STATS_H
#define NXDCTL_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../kernel/nxd_ioctl.h"

#define ARRAY_SIZE_NXDCTL(a)	(sizeof(a) / sizeof((a)[0]))

/*
 * Smallest and largest request size in bytes of bucket @b (hi: UINT64_MAX);
 * the buckets and their labels are the kernel's (nxd_hist_bucket(),
 * nxd_hist_labels[], exactly the NytroXD layout plus "> 32M").
 */
void nxdctl_bucket_range(unsigned int b, uint64_t *lo, uint64_t *hi);
/* Bucket whose upper bound is exactly @bytes, or -1. */
int nxdctl_bucket_of_bound(uint64_t bytes);

/* Sum of the cells of one direction and bucket; route/align < 0 = all. */
void nxdctl_cell_sum(const struct nxd_ioc_stats *st, int dir, unsigned int b,
		     int route, int align, struct nxd_hist_cell *out);

/* @out = @now - @prev for the histogram and the monotonic counters. */
void nxdctl_stats_delta(const struct nxd_ioc_stats *now,
			const struct nxd_ioc_stats *prev,
			struct nxd_ioc_stats *out);

/* Counters by name, in struct order. */
struct nxdctl_counter {
	const char *name;
	size_t off;
	bool gauge;		/* a level, not an event count */
	const char *help;	/* one line, for Prometheus' HELP */
};
extern const struct nxdctl_counter nxdctl_counters[];
extern const unsigned int nxdctl_nr_counters;
uint64_t nxdctl_counter_get(const struct nxd_ioc_counters *c,
			    unsigned int i);

/*
 * Values derived from the counters, after them in `stats` and under
 * "derived" in its JSON.  destage_mean_bio_bytes: destaged_bytes over
 * destage_bios; destage_stripe_full_pct: destage_stripe_bios per 100
 * destage_bios; destage_busy_bytes_per_s: destaged_bytes over the time
 * spent in rounds.  Each is 0 before the first destage write.
 */
struct nxdctl_derived {
	const char *name;
	uint64_t (*get)(const struct nxd_ioc_counters *c);
};
extern const struct nxdctl_derived nxdctl_derived[];
extern const unsigned int nxdctl_nr_derived;

/* Names of the histogram's dimensions, as JSON keys and table cells. */
extern const char *const nxdctl_dir_key[NXD_H_NDIR];	/* read, write */
extern const char *const nxdctl_route_key[NXD_H_NROUTE]; /* ssd, hdd */
extern const char *const nxdctl_align_key[NXD_H_NALIGN];

/* Why the writes of bucket @b went where they did (histogram --routes). */
struct nxdctl_why {
	uint64_t ssd_size;	/* no larger than the threshold */
	uint64_t ssd_unaligned;	/* not 4 KiB aligned, above the threshold */
	uint64_t ssd_chunk;	/* 4 KiB aligned, above: not io_min aligned */
	uint64_t ssd_mode;	/* mode log_all */
	uint64_t ssd_either;	/* bucket straddles the threshold: size or chunk */
	uint64_t hdd_size;	/* larger than the threshold */
	uint64_t hdd_full;	/* no larger: the log was full (or was degraded) */
	uint64_t hdd_mode;	/* mode passthrough, or threshold 0 */
	uint64_t hdd_either;	/* straddles: size or log full */
};

/*
 * Infer the reasons from the cells of write bucket @b, the threshold
 * @thr and the mode, as if they held over the histogram's window.
 */
void nxdctl_route_why(const struct nxd_ioc_stats *st, unsigned int b,
		      uint64_t thr, uint32_t mode, struct nxdctl_why *w);

#endif /* NXDCTL_STATS_H */
