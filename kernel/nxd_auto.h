/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd routing that tunes itself: the automatic write-threshold
 * controller, the stream detector across tasks, and the stripe-aware
 * split of a write.  Integer arithmetic only, no allocation, no locking:
 * the caller serialises calls on one object.  Part of the kernel-neutral
 * core (nxd_core.h); docs/design.md, section 3, describes it.
 */
#ifndef NXD_AUTO_H
#define NXD_AUTO_H

#include "nxd_shim.h"
#include "nxd_route.h"

/* ---- automatic write threshold ---- */

enum nxd_auto_dev {
	NXD_AUTO_SSD = 0,	/* the log */
	NXD_AUTO_HDD,
	NXD_AUTO_DEVS
};

/* Why the threshold last changed; nxd_auto_reason_name() names them. */
enum nxd_auto_reason {
	NXD_AUTO_R_NONE = 0,
	NXD_AUTO_R_SSD_FASTER,	/* raised: the log is faster one bucket up */
	NXD_AUTO_R_HDD_FASTER,	/* lowered: the HDD is faster at the top */
	NXD_AUTO_R_LOG_FULL,	/* lowered to the log occupancy's cap */
	NXD_AUTO_R_HEADROOM,	/* lowered: the destager falls behind */
	NXD_AUTO_R_BOUNDS,	/* clamped into new admin bounds */
	NXD_AUTO_R_MAX
};

struct nxd_auto_cfg {
	u32 min_thr;		/* bytes: admin bounds of the threshold, */
	u32 max_thr;		/* 1 <= min_thr <= max_thr */
	u32 low_wm;		/* % log occupancy: up to it, no cap */
	u32 high_wm;		/* % log occupancy: from it, the cap is min_thr */
	u32 occ_hyst;		/* % a raise needs below the cap's occupancy */
	u32 headroom_min;	/* % destage headroom under which it is behind */
	u32 margin_pct;		/* how much faster a device must be, % */
	u32 min_samples;	/* per device in a bucket, for a vote */
	u32 hold_ticks;		/* consecutive ticks a vote must last */
	u32 epoch_ticks;	/* the fresh sample counts halve this often */
	u32 interval_ms;	/* ticks closer than this are not counted */
	u32 ewma_shift;		/* a new sample weighs 1 / 2^shift, 1..10 */
	u32 probe_every;	/* 1 in n boundary writes probes; 0: never */
};

/* Service-time estimates of one size bucket (nxd_hist_bucket()). */
struct nxd_auto_bucket {
	u64 ewma[NXD_AUTO_DEVS];	/* ns << NXD_AUTO_FP */
	u32 n[NXD_AUTO_DEVS];		/* samples ever, saturating */
	u32 fresh[NXD_AUTO_DEVS];	/* since the last change, halved per epoch */
};

#define NXD_AUTO_FP		4		/* fraction bits of an EWMA */
#define NXD_AUTO_NS_CAP		0x10000000000ULL	/* 2^40 ns cap a sample */

struct nxd_auto_stats {
	u64 samples[NXD_AUTO_DEVS];
	u64 dropped;		/* samples with an unknown device */
	u64 ticks;		/* ticks counted (interval elapsed) */
	u64 probes;		/* writes sent to the other device to measure it */
	u64 changes;
	u64 raises;
	u64 lowers;
	u64 by_reason[NXD_AUTO_R_MAX];
	u64 last_ns;		/* time of the last change */
	u32 last_from;		/* bytes */
	u32 last_to;
	enum nxd_auto_reason last_reason;
};

struct nxd_auto {
	struct nxd_auto_cfg cfg;
	u32 thr;		/* the current threshold, bytes */
	u32 occ;		/* % log occupancy, last reported */
	u32 headroom;		/* % destage headroom, last reported */
	u32 lo;			/* bucket of the largest logged sizes */
	u32 hi;			/* bucket of the smallest HDD sizes */
	u32 ceil;		/* raises stay below it until the epoch ends */
	int streak_dir;		/* -1 lower, 0 none, 1 raise */
	u32 streak;		/* consecutive ticks of streak_dir */
	enum nxd_auto_reason streak_why;
	u32 epoch;		/* ticks into the current epoch */
	u32 probe_ctr;
	u32 ticked;		/* a tick has been counted */
	u64 last_tick_ns;
	struct nxd_auto_bucket b[NXD_HIST_BUCKETS];
	struct nxd_auto_stats st;
};

/* Defaults: bounds 4 KiB - 1 MiB, watermarks 25 / 75 % as the tunables. */
void nxd_auto_cfg_default(struct nxd_auto_cfg *cfg);
/* 0, or -EINVAL if @cfg is out of range; @thr is clamped into bounds. */
int nxd_auto_init(struct nxd_auto *a, const struct nxd_auto_cfg *cfg,
		  u32 thr);
/*
 * New admin bounds; the threshold is clamped into them at once (reason
 * NXD_AUTO_R_BOUNDS).  1 if it changed, 0 if not, -EINVAL on bad bounds.
 */
int nxd_auto_set_bounds(struct nxd_auto *a, u32 min, u32 max, u64 now_ns);
/*
 * A completed write: @dev served @bytes in @ns, from submission to
 * completion (the latency its issuer sees).  Reads, flushes and
 * discards are not samples: their costs differ.
 */
void nxd_auto_sample(struct nxd_auto *a, enum nxd_auto_dev dev, u64 bytes,
		     u64 ns);
/*
 * Log occupancy and destage headroom, each 0-100 %.  Headroom is how much
 * faster the destager drains the log than writes fill it, over the last
 * interval: 100 * (drain - fill) / drain, 0 when it does not keep up.
 */
void nxd_auto_set_log(struct nxd_auto *a, u32 occ_pct, u32 headroom_pct);
/* The periodic step: true if the threshold changed. */
bool nxd_auto_tick(struct nxd_auto *a, u64 now_ns);
/*
 * For a write either device could take (aligned, mode auto): true if it
 * should go to the device the threshold does not pick, to measure it
 * there.  Only boundary buckets lacking samples are probed.
 */
bool nxd_auto_probe(struct nxd_auto *a, u64 bytes);
/* The estimated service time of @dev in bucket @bucket, ns; 0 if none. */
u64 nxd_auto_est_ns(const struct nxd_auto *a, enum nxd_auto_dev dev,
		    unsigned int bucket);
/* The cap log occupancy @occ_pct puts on the threshold, bytes. */
u32 nxd_auto_occ_cap(const struct nxd_auto_cfg *cfg, u32 occ_pct);
const char *nxd_auto_reason_name(enum nxd_auto_reason r);

static inline u32 nxd_auto_threshold(const struct nxd_auto *a)
{
	return a->thr;
}

/* ---- stream detection across tasks ---- */

#define NXD_STREAM_SLOTS	32
/* A write this close ahead of a run's end belongs to it (out of order). */
#define NXD_STREAM_GAP		256	/* sectors */

struct nxd_stream_ent {
	u64 start;		/* first sector of the run */
	u64 next;		/* the sector its next write starts at */
	u64 used;		/* LRU clock of its last use; 0: free */
};

struct nxd_streams {
	struct nxd_stream_ent e[NXD_STREAM_SLOTS];
	u64 min_sectors;	/* a run this long has proved long */
	u64 clock;
	u64 hits;		/* writes that continued a run */
	u64 misses;		/* writes that started a new entry */
	u64 merges;		/* two runs joined by a write between them */
	u64 ahead;		/* new entries just ahead of a run's end */
	u64 evictions;		/* least recently used entries replaced */
	u64 longs;		/* writes reported as part of a long run */
};

/* @min_bytes: the run length (rounded up to sectors) that proves a run. */
void nxd_stream_init(struct nxd_streams *s, u64 min_bytes);
/*
 * Note a write of @sectors at @sector; true if it belongs to a run of
 * at least min_bytes (counting this write).
 */
bool nxd_stream_write(struct nxd_streams *s, u64 sector, u64 sectors);

/* ---- stripe-aware split ---- */

/* A write cut at stripe boundaries: head, whole stripes, tail, in order. */
struct nxd_split {
	u64 head;		/* sectors up to the first stripe boundary */
	u64 mid;		/* sectors of whole stripes */
	u64 tail;		/* sectors after the last whole stripe */
};

/*
 * Cut @sectors at @sector at the boundaries of @stripe_bytes (the HDD's
 * io_opt).  True if it covers at least one whole stripe (mid > 0); else,
 * or when @stripe_bytes is 0 or not a multiple of 512, all is in head.
 */
bool nxd_split_stripes(u64 sector, u64 sectors, u32 stripe_bytes,
		       struct nxd_split *out);

#endif /* NXD_AUTO_H */
