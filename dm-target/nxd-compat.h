/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The only place that knows about kernel API differences between the LTS
 * lines dm-nxd supports (6.1 and 6.12).  Everything else calls nxd_*.
 */
#ifndef DM_NXD_COMPAT_H
#define DM_NXD_COMPAT_H

#include <linux/blkdev.h>

/*
 * 6.1 reads max_discard_sectors; from 6.10 targets set max_hw_discard_sectors
 * and the block layer derives the other.  Setting both suits both.
 */
static inline void nxd_set_discard_limits(struct queue_limits *l,
					  unsigned int max_sectors,
					  unsigned int granularity)
{
	l->discard_granularity = granularity;
	l->max_hw_discard_sectors = max_sectors;
	l->max_discard_sectors = max_sectors;
}

/*
 * module_dm() (6.4+) is not in 6.1: dm-nxd registers with module_init(),
 * which also sets up its control device.
 */

#endif /* DM_NXD_COMPAT_H */
