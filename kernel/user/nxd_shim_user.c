// SPDX-License-Identifier: GPL-2.0
/*
 * Userspace stand-ins for the kernel facilities nxd_shim.h declares, for
 * the unit tests, the fuzzer and nxdctl (the one userspace crc32c).
 *
 * nxd_crc32c() has the kernel's raw crc32c(seed, p, len) semantics:
 * reflected Castagnoli polynomial, no pre- or post-inversion, so that
 * crc32c(crc32c(s, a), b) == crc32c(s, a || b).  Slicing-by-8 for speed
 * (the fuzzer checksums several 4 KiB blocks per input).
 */
#include "nxd_shim.h"

#define CRC32C_POLY	0x82F63B78U

static u32 crc_tab[8][256];
static int crc_tab_ready;

static void crc_tab_init(void)
{
	u32 i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ ((c & 1) ? CRC32C_POLY : 0);
		crc_tab[0][i] = c;
	}
	for (i = 0; i < 256; i++) {
		c = crc_tab[0][i];
		for (j = 1; j < 8; j++) {
			c = (c >> 8) ^ crc_tab[0][c & 0xff];
			crc_tab[j][i] = c;
		}
	}
	crc_tab_ready = 1;
}

u32 nxd_crc32c(u32 seed, const void *p, size_t len)
{
	const u8 *b = p;
	u32 crc = seed;

	if (!crc_tab_ready)
		crc_tab_init();
	while (len && ((uintptr_t)b & 7)) {
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *b++) & 0xff];
		len--;
	}
	while (len >= 8) {
		u32 lo, hi;

		memcpy(&lo, b, 4);
		memcpy(&hi, b + 4, 4);
		lo = le32toh(lo) ^ crc;
		hi = le32toh(hi);
		crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		      crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^
		      crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
		      crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
		b += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *b++) & 0xff];
	return crc;
}
