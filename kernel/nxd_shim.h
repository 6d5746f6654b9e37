/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The few kernel facilities the shared core uses, so that the same .c files
 * build into dm-nxd.ko and into userspace unit tests and fuzzers.
 */
#ifndef NXD_SHIM_H
#define NXD_SHIM_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/errno.h>
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/math64.h>
#include <linux/crc32c.h>
#include <linux/rbtree.h>
#include <asm/byteorder.h>

static inline u32 nxd_crc32c(u32 seed, const void *p, size_t len)
{
	return crc32c(seed, p, len);
}

/* No WARN for a size over INT_MAX: the caller says what failed. */
#define nxd_zalloc_big(sz)	kvzalloc((sz), GFP_KERNEL | __GFP_NOWARN)
#define nxd_free_big(p)		kvfree(p)

#else
/* Userspace stand-ins (unit tests, fuzzers, nxdctl). */
#include "user/nxd_shim_user.h"
#endif /* __KERNEL__ */

/* U32_MAX and U64_MAX for both builds (userspace has neither). */
#define NXD_U32_MAX	0xffffffffU
#define NXD_U64_MAX	(~0ULL)

/* @v mod @d through div_u64_rem(): a 32-bit build has no 64-bit '%'. */
static inline u32 nxd_rem_u64(u64 v, u32 d)
{
	u32 r;

	div_u64_rem(v, d, &r);
	return r;
}

#endif /* NXD_SHIM_H */
