// SPDX-License-Identifier: GPL-2.0
/*
 * Write the metadata of an nxd volume the way the kernel's nxd_format()
 * would: both SSD superblock copies and the HDD label, with the shared
 * codec of kernel/nxd_codec.c.  For the assemble / udev-info tests.
 *
 * Usage: mkmeta [-o DATA_OFFSET] SSD HDD SEED [SEGS [NAME [TUNABLES]]]
 *   -o: format version 2, the label in HDD block 0 and the data area from
 *   sector DATA_OFFSET (a multiple of 8, at least 2048); without it format
 *   version 1 (data from sector 0, the label at the end).
 *   SEED: a byte that makes the UUIDs; SEGS: live segments to write at the
 *   tail, each with one data block (a log holding writes not yet on the
 *   HDD, as a clean shutdown leaves it), default 0 (an empty log).
 *   NAME: the volume name the superblock stores (default none, as
 *   superblocks written before names were stored); TUNABLES: the stored
 *   tunables, "WTHR,MODE,LOW,HIGH,RATE,DISCARD,DRAIN" (MODE a number;
 *   default none).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	int sfd, hfd, i, seed, segs = 0;
	u64 ssd, hdd, pos = 0, off = 0;

	if (argc > 2 && !strcmp(argv[1], "-o")) {
		off = strtoull(argv[2], NULL, 0);
		if (!nxd_data_offset_ok(off)) {
			fprintf(stderr, "mkmeta: bad DATA_OFFSET\n");
			return 2;
		}
		argc -= 2;
		argv += 2;
	}
	if (argc < 4 || argc > 7) {
		fprintf(stderr, "usage: mkmeta [-o DATA_OFFSET] SSD HDD SEED "
			"[SEGS [NAME [TUNABLES]]]\n");
		return 2;
	}
	seed = atoi(argv[3]);
	if (argc >= 5)
		segs = atoi(argv[4]);
	if (argc >= 6)
		snprintf(sb.name, sizeof(sb.name), "%s", argv[5]);
	if (argc == 7) {
		/* the adaptive tunables, not given: their defaults */
		nxd_tun_defaults(&sb.tun);
		if (sscanf(argv[6], "%u,%u,%u,%u,%u,%u,%u",
			   &sb.tun.write_threshold, &sb.tun.mode,
			   &sb.tun.low_wm, &sb.tun.high_wm,
			   &sb.tun.destage_rate, &sb.tun.ssd_discard,
			   &sb.tun.drain_on_suspend) != 7) {
			fprintf(stderr, "mkmeta: bad TUNABLES\n");
			return 2;
		}
		sb.tun_valid = true;
	}
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
	sb.data_offset = off;
	sb.data_sectors = nxd_layout_data_sectors(hdd, off);
	sb.hdd_label_sector = off ? 0 : sb.data_sectors;
	sb.ring_start = NXD_RING_START;
	sb.ring_blocks = ssd / NXD_BLOCK_SIZE - NXD_RING_START;
	sb.tail_seq = sb.head_seq = sb.gen_start_seq = 1;
	sb.gen = 1;
	sb.flags = NXD_SB_CLEAN;
	for (i = 0; i < segs; i++) {
		static u8 data[NXD_BLOCK_SIZE];

		memset(data, 0xa0 + i, sizeof(data));
		nxd_seg_init(blk, sb.vol_uuid, sb.head_seq, sb.gen, pos);
		if (nxd_seg_add_data(blk, 100 + i, 0xff,
				     nxd_block_crc(data)) != 0)
			return 1;
		nxd_seg_seal(blk);
		if (pwrite(sfd, blk, sizeof(blk), (NXD_RING_START + pos) *
			   NXD_BLOCK_SIZE) != sizeof(blk) ||
		    pwrite(sfd, data, sizeof(data), (NXD_RING_START + pos + 1) *
			   NXD_BLOCK_SIZE) != sizeof(data)) {
			perror("pwrite segment");
			return 1;
		}
		pos = nxd_next_seg_pos(sb.ring_blocks, pos + 2);
		sb.head_seq++;
	}
	sb.head_pos = pos;
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
	l.data_offset = off;
	nxd_label_encode(&l, blk);
	if (pwrite(hfd, blk, sizeof(blk), sb.hdd_label_sector << 9) !=
	    sizeof(blk)) {
		perror("pwrite hdd");
		return 1;
	}
	return close(sfd) || close(hfd);
}
