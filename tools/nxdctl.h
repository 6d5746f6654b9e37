/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl: the pure (kernel-free) parts, shared by the tool and its tests.
 * Everything here works on a struct nxd_ioc_stats already in memory.
 */
#ifndef NXDCTL_H
#define NXDCTL_H

#include <stdio.h>
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>

#include "../kernel/nxd_ioctl.h"
#include "nxdctl_core.h"

#define ARRAY_SIZE_NXDCTL(a)	(sizeof(a) / sizeof((a)[0]))

/* Exit codes, documented in nxdctl(8). */
#define NXDCTL_EXIT_OK		0
#define NXDCTL_EXIT_USAGE	1
#define NXDCTL_EXIT_NOVOL	2
#define NXDCTL_EXIT_PERM	3
#define NXDCTL_EXIT_KERNEL	4

/* Bucket labels exactly as NytroXD prints them (Figure 6), plus "> 32M". */
extern const char *const nxdctl_hist_label[NXD_HIST_NBUCKETS];

/* Smallest and largest request size in bytes of bucket @b (hi: UINT64_MAX). */
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
};
extern const struct nxdctl_counter nxdctl_counters[];
extern const unsigned int nxdctl_nr_counters;
uint64_t nxdctl_counter_get(const struct nxd_ioc_counters *c,
			    unsigned int i);

/* What JSON documents say besides the numbers. */
struct nxdctl_meta {
	const char *vol;
	uint64_t time;		/* Unix time, with interval_s */
	unsigned int interval_s;	/* --watch interval, 0: none */
};

/* Figure 6 layout. */
void nxdctl_print_histogram(FILE *f, const struct nxd_ioc_stats *st);
/* Per route / alignment table with mean latencies (libsmartcols). */
int nxdctl_print_routes(FILE *f, const struct nxd_ioc_stats *st);
void nxdctl_json_histogram(FILE *f, const struct nxd_ioc_stats *st,
			   const struct nxdctl_meta *m, bool pretty);
void nxdctl_print_stats(FILE *f, const struct nxd_ioc_stats *st);
void nxdctl_json_stats(FILE *f, const struct nxd_ioc_stats *st,
		       const struct nxdctl_meta *m, bool pretty);
/* NXD_IOC_LIST result as a table or JSON. */
int nxdctl_print_list(FILE *f, const struct nxd_ioc_list *l, bool json);

/* "64K", "1.5M"-free human sizes: exact binary suffix when it divides. */
void nxdctl_fmt_size(char *buf, size_t len, uint64_t bytes);
/* Mean latency "85us", "6.20ms", "-" when @count is 0. */
void nxdctl_fmt_lat(char *buf, size_t len, uint64_t time_ns, uint64_t count);
const char *nxdctl_mode_name(uint32_t mode);
void nxdctl_fmt_uuid(char *buf, const uint8_t uuid[16]);	/* 37 bytes */

/* new_encode_dev() / new_decode_dev() of the kernel. */
uint64_t nxdctl_encode_dev(unsigned int major, unsigned int minor);
void nxdctl_decode_dev(uint64_t dev, unsigned int *major, unsigned int *minor);

/* ---- suggest-threshold ---- */

struct nxdctl_speeds {
	double ssd_iops, ssd_mbps;	/* MB = 10^6 bytes */
	double hdd_iops, hdd_mbps;
};

#define NXDCTL_SUGGEST_FACTOR	2.0

struct nxdctl_suggestion {
	/* Per bucket upper bound (buckets 1..15: 4K .. 32M). */
	double cost_hdd_ms[NXD_HIST_NBUCKETS];
	double cost_log_ms[NXD_HIST_NBUCKETS];
	int bucket;		/* last bucket routed to the log, -1: none */
	uint64_t threshold;	/* bytes; 0 if the log never pays off */
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

#endif /* NXDCTL_H */
