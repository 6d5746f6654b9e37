// SPDX-License-Identifier: GPL-2.0
/*
 * nxd_crc32c() for nxdctl: the kernel's raw crc32c(seed, p, len), i.e.
 * reflected Castagnoli polynomial with no pre- or post-inversion.
 * Byte-wise: nxdctl checksums a few blocks at most.
 */
#include "../kernel/nxd_shim.h"

#define CRC32C_POLY	0x82F63B78U

uint32_t nxd_crc32c(uint32_t seed, const void *p, size_t len)
{
	static uint32_t tab[256];
	const uint8_t *b = p;
	uint32_t crc = seed, c, i, j;

	if (!tab[1]) {
		for (i = 0; i < 256; i++) {
			c = i;
			for (j = 0; j < 8; j++)
				c = (c >> 1) ^ ((c & 1) ? CRC32C_POLY : 0);
			tab[i] = c;
		}
	}
	while (len--)
		crc = (crc >> 8) ^ tab[(crc ^ *b++) & 0xff];
	return crc;
}
