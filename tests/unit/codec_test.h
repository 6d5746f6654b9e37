/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the codec tests (test_codec.c, test_seg.c) share: an independent
 * bitwise crc32c, fixing and checking a block's crc field with it, and
 * two volume uuids.
 */
#ifndef NXD_CODEC_TEST_H
#define NXD_CODEC_TEST_H

#include "nxd_test.h"

#define BS NXD_BLOCK_SIZE

/* ---- reference crc32c: bitwise, independent of the shim's tables ---- */

static inline u32 ref_crc32c(u32 crc, const void *p, size_t len)
{
	const u8 *b = p;
	int k;

	while (len--) {
		crc ^= *b++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78U & (0U - (crc & 1)));
	}
	return crc;
}

/* Recompute the crc field (offset 8) of a block the reference way. */
static inline void fix_crc(void *blk)
{
	u8 tmp[BS];
	u32 crc;

	memcpy(tmp, blk, BS);
	memset(tmp + 8, 0, 4);
	crc = htole32(ref_crc32c(~0U, tmp, BS));
	memcpy((u8 *)blk + 8, &crc, 4);
}

static inline bool crc_field_ok(const void *blk)
{
	u8 tmp[BS];
	u32 crc;

	memcpy(tmp, blk, BS);
	fix_crc(tmp);
	memcpy(&crc, tmp + 8, 4);
	return !memcmp((const u8 *)blk + 8, &crc, 4);
}

/* Two volume uuids. */
static const u8 uuid_a[16] = "0123456789abcdef";
static const u8 uuid_b[16] = "fedcba9876543210";

#endif /* NXD_CODEC_TEST_H */
