/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd write routing (log or HDD) and modes, destage pacing, size
 * histogram buckets, the size parser.  Part of the kernel-neutral core (nxd_core.h).
 */
#ifndef NXD_ROUTE_H
#define NXD_ROUTE_H

#include "nxd_shim.h"

/* ---- routing ---- */

enum nxd_mode {
	NXD_MODE_AUTO = 0,	/* by size and alignment */
	NXD_MODE_PASSTHROUGH,	/* every write to the HDD */
	NXD_MODE_LOG_ALL,	/* every write to the log */
	NXD_MODE_ADAPTIVE,	/* as auto, by a threshold that tunes itself */
	NXD_MODE_MAX
};

/* True if a write of @bytes at @sector goes to the SSD log. */
bool nxd_route_write_to_log(u64 sector, u64 bytes, u32 threshold,
			    u32 io_min, enum nxd_mode mode);
const char *nxd_mode_name(enum nxd_mode m);
/*
 * A write HDD-aligned enough to bypass the log: offset and length whole
 * 4 KiB blocks and, if @io_min is above 4 KiB, multiples of it.
 */
bool nxd_route_aligned(u64 sector, u64 bytes, u32 io_min);

/*
 * The sectors of 4 KiB block @block that a write of sectors [@start,
 * @end) covers, as a record's mask (bit i: sector i of the block); 0 if
 * it covers none.
 */
u8 nxd_block_mask(u64 block, u64 start, u64 end);
int nxd_mode_parse(const char *s, enum nxd_mode *m);

/* ---- destage pacing ---- */

/*
 * The destager's share of the HDD's time, in per mille, at log
 * occupancy @pct: @min_duty up to @low, rising linearly to @max_duty at
 * @high and above (both at least 1, @min_duty at most @max_duty).
 */
u32 nxd_pace_duty(u32 pct, u32 low, u32 high, u32 min_duty, u32 max_duty);
/*
 * The pause after @busy_ms of destaging that gives it @duty of the time;
 * @busy_ms counts up to 1000 s.
 */
u32 nxd_pace_pause_ms(u32 busy_ms, u32 duty);

/* ---- histogram ---- */

#define NXD_HIST_BUCKETS	16
unsigned int nxd_hist_bucket(u64 bytes);
extern const char *const nxd_hist_labels[NXD_HIST_BUCKETS];

/* Parse "64K", "1M", "4096" into bytes; rejects overflow and junk. */
int nxd_parse_size(const char *s, u64 *out);

#endif /* NXD_ROUTE_H */
