/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The only place that knows about kernel API differences between the LTS
 * lines dm-nxd supports (6.1 and 6.12).  Everything else calls nxd_*.
 */
#ifndef DM_NXD_COMPAT_H
#define DM_NXD_COMPAT_H

#include <linux/version.h>
#include <linux/blkdev.h>

/* 6.10 made max_hw_discard_sectors the field targets set; 6.1 reads both. */
static inline void nxd_set_discard_limits(struct queue_limits *l,
					  unsigned int max_sectors,
					  unsigned int granularity)
{
	l->discard_granularity = granularity;
	l->max_hw_discard_sectors = max_sectors;
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 10, 0)
	l->max_discard_sectors = max_sectors;
#endif
}

#endif /* DM_NXD_COMPAT_H */
