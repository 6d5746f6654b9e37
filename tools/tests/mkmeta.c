// SPDX-License-Identifier: GPL-2.0
/*
 * Write the metadata of an nxd volume the way the kernel's nxd_format()
 * would: both SSD superblock copies and the HDD label, with the shared
 * codec of kernel/nxd_core.c.  For the assemble / udev-info tests.
 *
 * Usage: mkmeta SSD HDD SEED   (SEED: a byte that makes the UUIDs)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../kernel/nxd_core.h"

/* Block devices and files alike; <linux/fs.h> clashes with nxd_shim.h. */
static u64 size_of(int fd)
{
	off_t n = lseek(fd, 0, SEEK_END);

	return n < 0 ? 0 : (u64)n;
}

int main(int argc, char **argv)
{
	static u8 blk[NXD_BLOCK_SIZE];
	struct nxd_sb_info sb = { 0 };
	struct nxd_label_info l = { 0 };
	int sfd, hfd, i, seed;
	u64 ssd, hdd;

	if (argc != 4) {
		fprintf(stderr, "usage: mkmeta SSD HDD SEED\n");
		return 2;
	}
	seed = atoi(argv[3]);
	sfd = open(argv[1], O_WRONLY);
	hfd = open(argv[2], O_WRONLY);
	if (sfd < 0 || hfd < 0) {
		perror("open");
		return 1;
	}
	ssd = size_of(sfd);
	hdd = size_of(hfd) >> 9;
	for (i = 0; i < 16; i++) {
		sb.vol_uuid[i] = seed + i;
		sb.hdd_uuid[i] = 0x80 + seed + i;
	}
	sb.hdd_sectors = hdd;
	sb.data_sectors = nxd_hdd_data_sectors(hdd);
	sb.hdd_label_sector = sb.data_sectors;
	sb.ring_start = NXD_RING_START;
	sb.ring_blocks = ssd / NXD_BLOCK_SIZE - NXD_RING_START;
	sb.tail_seq = sb.head_seq = sb.gen_start_seq = 1;
	sb.gen = 1;
	sb.flags = NXD_SB_CLEAN;
	for (i = 0; i < 2; i++) {
		sb.sb_seq = i + 1;
		nxd_sb_encode(&sb, blk);
		if (pwrite(sfd, blk, sizeof(blk), i * NXD_BLOCK_SIZE) !=
		    sizeof(blk)) {
			perror("pwrite ssd");
			return 1;
		}
	}
	memcpy(l.vol_uuid, sb.vol_uuid, 16);
	memcpy(l.hdd_uuid, sb.hdd_uuid, 16);
	l.hdd_sectors = hdd;
	nxd_label_encode(&l, blk);
	if (pwrite(hfd, blk, sizeof(blk), sb.hdd_label_sector << 9) !=
	    sizeof(blk)) {
		perror("pwrite hdd");
		return 1;
	}
	return close(sfd) || close(hfd);
}
