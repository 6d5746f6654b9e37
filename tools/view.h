/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl's views of the statistics model (stats.h): the NytroXD text, the
 * routes table and the volume list (view_text.c, libsmartcols), and JSON
 * (view_json.c).  No kernel access: they print what they are given.
 */
#ifndef NXDCTL_VIEW_H
#define NXDCTL_VIEW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stats.h"
#include "status.h"

/* What JSON documents say besides the numbers. */
struct nxdctl_meta {
	const char *vol;
	uint64_t time;		/* Unix time, with interval_s */
	unsigned int interval_s;	/* --watch interval, 0: none */
};

/* Figure 6 layout, 16 buckets a direction (the last: > 32M). */
void nxdctl_print_histogram(FILE *f, const struct nxd_ioc_stats *st);
/* With @compat, NytroXD's own 15: "16M+1 - 32M" also counts > 32M. */
void nxdctl_print_histogram_compat(FILE *f, const struct nxd_ioc_stats *st,
				   bool compat);
/* Per route / alignment table with mean latencies (libsmartcols). */
int nxdctl_print_routes(FILE *f, const struct nxd_ioc_stats *st);
/*
 * The same with, for writes, why they went where they did
 * (nxdctl_route_why) under threshold @thr and @mode; no such columns if
 * @thr < 0.
 */
int nxdctl_print_routes_why(FILE *f, const struct nxd_ioc_stats *st,
			    int64_t thr, uint32_t mode);
void nxdctl_json_histogram(FILE *f, const struct nxd_ioc_stats *st,
			   const struct nxdctl_meta *m, bool pretty);
void nxdctl_print_stats(FILE *f, const struct nxd_ioc_stats *st);
void nxdctl_json_stats(FILE *f, const struct nxd_ioc_stats *st,
		       const struct nxdctl_meta *m, bool pretty);
/* NXD_IOC_LIST result as a table or JSON. */
int nxdctl_print_list(FILE *f, const struct nxd_ioc_list *l, bool json);
void nxdctl_json_list(FILE *f, const struct nxd_ioc_list *l);

/* A column of a libsmartcols table (view_text.c), right-aligned or not. */
struct libscols_table;
int nxdctl_add_col(struct libscols_table *tb, const char *name, bool right);

/* view_status.c: the health model (status.h). */
void nxdctl_print_status(FILE *f, const struct nxdctl_status *s);
void nxdctl_json_status(FILE *f, const struct nxdctl_status *s,
			unsigned int n, uint64_t time);
/* The volume list with health columns; @total: volumes that exist. */
int nxdctl_print_health(FILE *f, const struct nxdctl_status *s,
			unsigned int n, unsigned int total, bool json);

/*
 * view_prom.c: Prometheus text exposition format (node_exporter's textfile
 * collector): nxd_up (@up: the statistics could be read), the state of
 * each volume (missing ones: inactive), its settings, every counter and
 * the request size histogram of each volume with statistics.
 */
void nxdctl_prometheus(FILE *f, const struct nxdctl_status *s,
		       unsigned int n, bool up);

#endif /* NXDCTL_VIEW_H */
