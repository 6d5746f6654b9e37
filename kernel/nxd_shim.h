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
#include <linux/crc32c.h>
#include <asm/byteorder.h>

static inline u32 nxd_crc32c(u32 seed, const void *p, size_t len)
{
	return crc32c(seed, p, len);
}

#define nxd_zalloc_big(sz)	kvzalloc((sz), GFP_KERNEL)
#define nxd_free_big(p)		kvfree(p)

#else /* userspace */

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <errno.h>
#include <stdlib.h>
#include <endian.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int64_t s64;
typedef uint16_t __le16;
typedef uint32_t __le32;
typedef uint64_t __le64;
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

#define nxd_zalloc_big(sz)	calloc(1, (sz))
#define nxd_free_big(p)		free(p)

#endif /* __KERNEL__ */
#endif /* NXD_SHIM_H */
