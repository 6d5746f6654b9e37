/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd tunables: one table of their names (the table-line key and the
 * sysfs file), defaults, ranges and value syntax, read by the table
 * parser, sysfs, the superblock codec and nxdctl.  Part of the
 * kernel-neutral core (nxd_core.h).
 */
#ifndef NXD_TUN_H
#define NXD_TUN_H

#include "nxd_shim.h"

/* A volume's tunables; every table of one dm device shares them. */
struct nxd_tun {
	u32 write_threshold;	/* bytes */
	u32 mode;		/* enum nxd_mode */
	u32 low_wm;		/* % log occupancy */
	u32 high_wm;
	u32 destage_rate;	/* MB/s, 0 = unlimited */
	u32 ssd_discard;	/* TRIM reclaimed log space */
	u32 drain_on_suspend;
	u32 auto_min_thr;	/* bytes: bounds of mode adaptive's threshold */
	u32 auto_max_thr;
	u32 stream_min;		/* bytes a sequential run needs to bypass the log */
	u32 stripe_size;	/* bytes; 0: the HDD's io_opt */
	u32 stream_share;	/* % of the HDD kept from the destager when full */
};

/* How a value is written. */
enum nxd_tun_kind {
	NXD_TUN_BYTES,	/* a size: decimal, or with a K/M/G suffix */
	NXD_TUN_NUM,	/* a number, parsed like a size */
	NXD_TUN_MODE,	/* a name of enum nxd_mode */
};

struct nxd_tun_desc {
	const char *name;	/* table-line key and sysfs file */
	unsigned int off;	/* of its u32 in struct nxd_tun */
	enum nxd_tun_kind kind;
	u32 def;
	u32 min;
	u32 max;
};

/* In the order of the status table line, sysfs and nxdctl config. */
#define NXD_TUN_NR	12
extern const struct nxd_tun_desc nxd_tuns[NXD_TUN_NR];

/* Room for any value's text (u32 or mode name) and its NUL. */
#define NXD_TUN_STR_LEN	16

static inline u32 *nxd_tun_field(struct nxd_tun *t,
				 const struct nxd_tun_desc *d)
{
	return (u32 *)((char *)t + d->off);
}

static inline u32 nxd_tun_val(const struct nxd_tun *t,
			      const struct nxd_tun_desc *d)
{
	return *(const u32 *)((const char *)t + d->off);
}

void nxd_tun_defaults(struct nxd_tun *t);
/* The tunable called @name (any case), or NULL. */
const struct nxd_tun_desc *nxd_tun_find(const char *name);
/* 0; -EINVAL (syntax, unknown mode) or -ERANGE; *@v set only on 0. */
int nxd_tun_parse(const struct nxd_tun_desc *d, const char *s, u32 *v);
/* nxd_tun_parse() of tunable @key into @t; -ENOENT if there is none. */
int nxd_tun_set(struct nxd_tun *t, const char *key, const char *val);
/* @v as the table line and sysfs show it; @buf: NXD_TUN_STR_LEN bytes. */
const char *nxd_tun_str(const struct nxd_tun_desc *d, u32 v, char *buf);
/*
 * What nxd_tun_parse() of @d takes ("0 to 1G", "auto, passthrough or
 * log_all"), for error messages; @buf: NXD_TUN_RANGE_LEN bytes.
 */
#define NXD_TUN_RANGE_LEN	64
const char *nxd_tun_range(const struct nxd_tun_desc *d, char *buf);
/*
 * Every value in its range, low_watermark <= high_watermark,
 * auto_min_threshold <= auto_max_threshold, stripe_size whole 4 KiB blocks.
 */
bool nxd_tun_valid(const struct nxd_tun *t);

#endif /* NXD_TUN_H */
