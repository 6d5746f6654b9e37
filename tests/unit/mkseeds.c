// SPDX-License-Identifier: GPL-2.0
/*
 * Writes a small seed corpus for fuzz_ondisk into the directory given as
 * argv[1]: valid superblocks, labels and segments in the fuzzer's input
 * format (ctl, p1, p2, block), plus a few near misses.
 */
#include "../../kernel/nxd_codec.h"
#include <stdio.h>

#define BS NXD_BLOCK_SIZE

static const u8 uuid[16] = "nxd-seed-uuid-01";
static const u8 huuid[16] = "nxd-seed-hdd-002";

static int nseeds;

static int put(const char *dir, u8 ctl, u64 p1, u64 p2, const u8 *blk,
	       size_t len)
{
	char path[4096];
	u8 hdr[17];
	FILE *f;
	u64 v;

	hdr[0] = ctl;
	v = htole64(p1);
	memcpy(hdr + 1, &v, 8);
	v = htole64(p2);
	memcpy(hdr + 9, &v, 8);
	snprintf(path, sizeof(path), "%s/seed-%03d", dir, nseeds++);
	f = fopen(path, "wb");
	if (!f || fwrite(hdr, 1, 17, f) != 17 ||
	    fwrite(blk, 1, len, f) != len || fclose(f)) {
		perror(path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static u8 blk[BS];
	struct nxd_sb_info sb;
	struct nxd_label_info l;
	const u64 ssd = 8 + 4096, maxb = 1 << 20;
	int err = 0, i;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}

	memset(&sb, 0, sizeof(sb));
	sb.sb_seq = 3;
	memcpy(sb.vol_uuid, uuid, 16);
	memcpy(sb.hdd_uuid, huuid, 16);
	sb.hdd_sectors = (8ULL << 20) + 12345;
	sb.hdd_label_sector = nxd_hdd_data_sectors(sb.hdd_sectors);
	sb.data_sectors = sb.hdd_label_sector;
	sb.ring_blocks = 4096;
	sb.tail_pos = 100;
	sb.tail_seq = 50;
	sb.gen = 2;
	sb.gen_start_seq = 60;
	sb.head_pos = 700;
	sb.head_seq = 70;
	sb.flags = NXD_SB_CLEAN;
	nxd_sb_encode(&sb, blk);
	err |= put(argv[1], 0, ssd, maxb, blk, BS);
	err |= put(argv[1], 1, ssd, maxb, blk, BS);
	err |= put(argv[1], 1, ssd, maxb, blk, 256);	/* tail is zeros */
	sb.flags = 0;
	nxd_sb_encode(&sb, blk);
	err |= put(argv[1], 0, ssd, maxb, blk, BS);
	/* the version 2 layout: label in block 0, data from 1 MiB */
	sb.data_offset = 2048;
	sb.hdd_label_sector = 0;
	sb.data_sectors = nxd_layout_data_sectors(sb.hdd_sectors, 2048);
	nxd_sb_encode(&sb, blk);
	err |= put(argv[1], 0, ssd, maxb, blk, BS);
	sb.data_offset = 0;
	sb.hdd_label_sector = nxd_hdd_data_sectors(sb.hdd_sectors);
	sb.data_sectors = sb.hdd_label_sector;

	memcpy(l.vol_uuid, uuid, 16);
	memcpy(l.hdd_uuid, huuid, 16);
	l.hdd_sectors = sb.hdd_sectors;
	nxd_label_encode(&l, blk);
	err |= put(argv[1], 0, ssd, maxb, blk, BS);
	err |= put(argv[1], 2, ssd, maxb, blk, 64);

	nxd_seg_init(blk, uuid, 77, 2, 128);
	for (i = 0; i < 10; i++)
		nxd_seg_add_data(blk, 1000 + i * 3, (u8)(0xff >> (i & 7)),
				 0x1234567u * i);
	nxd_seg_add_inval(blk, 5000, 64);
	nxd_seg_add_data(blk, 7, 0x0f, 42);
	nxd_seg_seal(blk);
	err |= put(argv[1], 8, 4096, maxb, blk, BS);
	err |= put(argv[1], 8 | 4, 4096, maxb, blk, 64 + 12 * 16);
	nxd_seg_init(blk, uuid, 1, 1, 0);
	nxd_seg_seal(blk);
	err |= put(argv[1], 8, 4096, maxb, blk, BS);
	/* a direct (ORDERED) segment: data records without crc */
	nxd_seg_init(blk, uuid, 5, 3, 640);
	for (i = 0; i < 4; i++)
		nxd_seg_add_data(blk, 200 + i, 0xff, 0);
	nxd_seg_set_flags(blk, NXD_SEG_ORDERED);
	nxd_seg_seal(blk);
	err |= put(argv[1], 8, 4096, maxb, blk, BS);
	nxd_seg_init(blk, uuid, 9, 9, 3968);
	for (i = 0; i < NXD_SEG_MAX_DATA; i++)
		nxd_seg_add_data(blk, i, 0xff, i);
	while (nxd_seg_add_inval(blk, maxb - 9, 9) == 0)
		;
	nxd_seg_seal(blk);
	err |= put(argv[1], 8, 4096, maxb, blk, BS);

	memset(blk, 0, BS);
	err |= put(argv[1], 0, 0, 0, blk, 64);
	err |= put(argv[1], 0x10 | 1, ssd, maxb, blk, 256);
	err |= put(argv[1], 0x30 | 4 | 8, 4096, maxb, blk, 256);
	printf("%d seeds in %s\n", nseeds, argv[1]);
	return err;
}
