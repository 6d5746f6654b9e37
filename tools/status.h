/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxdctl's health model of a volume: what status, list and
 * stats --prometheus show, computed from the control device's list entry
 * and counters, sysfs's state and the table's devices (filled in by the
 * commands; no kernel access here).
 */
#ifndef NXDCTL_STATUS_H
#define NXDCTL_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stats.h"

struct nxdctl_status {
	char name[NXD_NAME_LEN + 1];
	unsigned int major, minor;
	uint8_t uuid[16];
	uint64_t size_bytes;
	uint32_t write_threshold;
	uint32_t mode;
	char state[16];		/* ok, suspended, degraded, inactive; "": ? */
	char hdd[256], ssd[256];	/* device nodes, "": unknown */
	char hdd_id[256], ssd_id[256];	/* /dev/disk/by-id links, "": none */
	char owner[64];		/* HDD label's owner host, "": none */
	bool owner_known;	/* the label was read */
	int64_t destage_limit;	/* sysfs destage_rate, MiB/s (0: none); -1: ? */
	int low_wm, high_wm;	/* sysfs watermarks, percent; -1: ? */
	int stream_share;	/* sysfs stream_share, percent; -1: ? */
	/* In the configuration file but not active: name and UUID only. */
	bool missing;
	bool have_stats;
	struct nxd_ioc_stats st;	/* GET_STATS now */
	/* A second reading @interval_s earlier, for rates (0: none). */
	double interval_s;
	struct nxd_ioc_counters prev;
};

/* Fill the list entry's part (name, device, UUID, size, threshold, mode). */
void nxdctl_status_from_vol(struct nxdctl_status *s,
			    const struct nxd_ioc_vol *v);

/* Derived numbers; all 0 without stats. */
double nxdctl_status_log_pct(const struct nxdctl_status *s);
uint64_t nxdctl_status_log_bytes(const struct nxdctl_status *s);
uint64_t nxdctl_status_log_used_bytes(const struct nxdctl_status *s);
/* Logged 4 KiB blocks not yet destaged (an upper bound on dirty bytes). */
uint64_t nxdctl_status_dirty_bytes(const struct nxdctl_status *s);
uint64_t nxdctl_status_errors(const struct nxdctl_status *s);
/* Bytes destaged per second over interval_s; < 0 if not measured. */
double nxdctl_status_destage_bps(const struct nxdctl_status *s);
/* "degraded" from the counters if sysfs said nothing. */
const char *nxdctl_status_state(const struct nxdctl_status *s);

/* What a volume's health asks of its admin, worst last. */
enum nxdctl_health {
	NXDCTL_HEALTH_OK,
	NXDCTL_HEALTH_DEGRADED,	/* degraded, or acknowledged writes lost */
	NXDCTL_HEALTH_MISSING,	/* configured, not active */
};

enum nxdctl_health nxdctl_status_health(const struct nxdctl_status *s);
/* The worst health of @n volumes. */
enum nxdctl_health nxdctl_status_worst(const struct nxdctl_status *s,
				       unsigned int n);
/*
 * The way out for a volume that is not healthy, one line without its
 * newline, in @buf; false (and "") if there is nothing to do.
 */
bool nxdctl_status_action(const struct nxdctl_status *s, char *buf,
			  size_t len);

#endif /* NXDCTL_STATUS_H */
