/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Userspace definitions of what kernel/nxd_shim.h gets from the kernel.
 * __le* and __u* come from <linux/types.h>, as in the kernel, so the UAPI
 * header nxd_ioctl.h can be included beside this one.
 */
#ifndef NXD_SHIM_USER_H
#define NXD_SHIM_USER_H


#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <endian.h>
#include <assert.h>
#include <linux/types.h>

#include "rbtree.h"

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t s64;
typedef uint64_t sector_t;

#define cpu_to_le16(x)	htole16(x)
#define cpu_to_le32(x)	htole32(x)
#define cpu_to_le64(x)	htole64(x)
#define le16_to_cpu(x)	le16toh(x)
#define le32_to_cpu(x)	le32toh(x)
#define le64_to_cpu(x)	le64toh(x)

#define __packed	__attribute__((packed))
#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif
#define min_t(t, a, b)	((t)(a) < (t)(b) ? (t)(a) : (t)(b))
#define max_t(t, a, b)	((t)(a) > (t)(b) ? (t)(a) : (t)(b))

u32 nxd_crc32c(u32 seed, const void *p, size_t len);

/* <linux/math64.h>: the kernel's 64-bit divisions, which 32-bit builds need. */
static inline u64 div_u64_rem(u64 dividend, u32 divisor, u32 *remainder)
{
	*remainder = (u32)(dividend % divisor);
	return dividend / divisor;
}

static inline u64 div_u64(u64 dividend, u32 divisor)
{
	return dividend / divisor;
}

static inline u64 div64_u64(u64 dividend, u64 divisor)
{
	return dividend / divisor;
}

#define nxd_zalloc_big(sz)	calloc(1, (sz))
#define nxd_free_big(p)		free(p)


#ifndef BIT
#define BIT(n)		(1UL << (n))
#endif

#endif /* NXD_SHIM_USER_H */
