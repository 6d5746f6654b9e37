/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd on-disk codec: decode, check and encode the superblock, the HDD
 * label and the segment header; which superblock copy wins; where the
 * next segment starts; the generation rule; the window recovery replays.
 * Part of the kernel-neutral core (nxd_core.h).
 */
#ifndef NXD_CODEC_H
#define NXD_CODEC_H

#include "nxd_shim.h"
#include "nxd_format.h"
#include "nxd_tun.h"

/* ---- superblock ---- */

struct nxd_sb_info {
	u64 sb_seq;
	u8 vol_uuid[16];
	u8 hdd_uuid[16];
	u64 hdd_sectors;
	u64 hdd_label_sector;
	u64 data_sectors;
	u64 data_offset;	/* 0: version 1, data from HDD sector 0 */
	u64 ring_start;
	u64 ring_blocks;
	u64 tail_pos;
	u64 tail_seq;
	u64 gen;
	u64 gen_start_seq;
	u64 head_pos;
	u64 head_seq;
	u32 flags;
	/* Stored name and tunables ("" and tun_valid false: none). */
	char name[NXD_SB_NAME_LEN];	/* NUL-terminated */
	bool tun_valid;
	struct nxd_tun tun;
};

/* Decode results besides 0. */
#define NXD_ENOTNXD	1	/* no nxd magic: not ours (or blank) */

int nxd_sb_decode(const void *blk, u64 ssd_blocks, struct nxd_sb_info *sb);
void nxd_sb_encode(const struct nxd_sb_info *sb, void *blk);
/*
 * Pick the newest valid of the two copies (@res: their decode results).
 * Returns the index (0 or 1) of the copy to use, the higher sb_seq, ties
 * to 0; NXD_SB_NONE if neither copy has the nxd magic (blank or foreign
 * device; NXD_ENOTNXD itself would read as index 1); else the first
 * negative decode error.
 */
#define NXD_SB_NONE	(-ENODATA)
int nxd_sb_pick(const int res[2], const struct nxd_sb_info sbs[2]);

struct nxd_label_info {
	u8 vol_uuid[16];
	u8 hdd_uuid[16];
	u64 hdd_sectors;
	u64 abandoned_gen;
	u64 frozen_end_seq;
	u64 frozen_tail_pos;
	u64 frozen_tail_seq;
	u32 flags;
	char owner[NXD_LABEL_OWNER_LEN];	/* NUL-terminated; "" = none */
	u64 lost_blocks;			/* ABANDONED: blocks given up */
	u32 lost_ranges;
	u32 lost_listed;			/* at most NXD_LABEL_LOST_MAX */
	u64 data_offset;			/* 0: version 1 */
};

int nxd_label_decode(const void *blk, struct nxd_label_info *l);
/* The lost[] ranges are left zero: nxd_label_set_lost() fills them. */
void nxd_label_encode(const struct nxd_label_info *l, void *blk);
/* Range @i of lost[] in an encoded label; call nxd_label_seal() after. */
void nxd_label_set_lost(void *blk, u32 i, u64 first, u64 nr);
void nxd_label_get_lost(const void *blk, u32 i, u64 *first, u64 *nr);
/* Copy lost[] from @old, an encoded label, into @blk; seals @blk. */
void nxd_label_keep_lost(void *blk, const void *old);
/* Recompute the checksum of an encoded label. */
void nxd_label_seal(void *blk);

/*
 * Version 1: usable logical sectors of an HDD of @hdd_sectors, and where
 * its label goes.
 */
u64 nxd_hdd_data_sectors(u64 hdd_sectors);
/* Version 2: the data offset a new volume gets on an HDD of that io_opt. */
u64 nxd_hdd_data_offset(u64 io_opt_bytes);
bool nxd_data_offset_ok(u64 off);
/*
 * Usable logical sectors of either layout (@data_offset 0: version 1);
 * version 2's area ends at the 1 MiB-rounded size.
 */
u64 nxd_layout_data_sectors(u64 hdd_sectors, u64 data_offset);

/* ---- segments ---- */

struct nxd_seg_info {
	u64 seq;
	u64 gen;
	u64 pos;
	u32 nr_data;
	u32 nr_recs;
	u32 flags;		/* NXD_SEG_* */
};

struct nxd_rec {
	u64 block;
	u32 val;
	u8 type;
	u8 mask;
};

/*
 * Validate a segment header: magic, crc, volume, position and record
 * consistency.  Data blocks are checked separately (crc per record).
 * @max_block bounds the logical block numbers records may name.
 */
int nxd_seg_decode(const void *blk, const u8 vol_uuid[16], u64 ring_blocks,
		   u64 max_block, struct nxd_seg_info *si);
void nxd_seg_rec(const void *blk, u32 i, struct nxd_rec *r);

void nxd_seg_init(void *blk, const u8 vol_uuid[16], u64 seq, u64 gen, u64 pos);
/*
 * Append a DATA record; returns its data index (the block goes to ring
 * slot pos + 1 + index), -ENOSPC if the data or record slots are full,
 * -EINVAL for an empty @mask.
 */
int nxd_seg_add_data(void *blk, u64 block, u8 mask, u32 crc);
/* Append an INVAL record: 0, -ENOSPC if full, -EINVAL if @count is 0. */
int nxd_seg_add_inval(void *blk, u64 block, u32 count);
u32 nxd_seg_nr_data(const void *blk);
u32 nxd_seg_nr_recs(const void *blk);
void nxd_seg_set_flags(void *blk, u32 flags);
void nxd_seg_seal(void *blk);

/* Where a segment following one that ends at @end starts. */
u64 nxd_next_seg_pos(u64 ring_blocks, u64 end);
/*
 * Can a segment holding @nr_data data blocks and @nr_recs records take
 * @data more data blocks and @recs more records?
 */
bool nxd_seg_fits(u32 nr_data, u32 nr_recs, u32 data, u32 recs);
/*
 * The part of the log recovery replays: from *@pos / *@seq up to, not
 * including, *@end_seq (U64_MAX: to the first invalid segment).  A label
 * that froze the log after an SSD failure bounds it at the failed
 * segment and may carry a tail the destager reached while frozen.
 */
void nxd_replay_window(const struct nxd_sb_info *sb,
		       const struct nxd_label_info *l, u64 *pos, u64 *seq,
		       u64 *end_seq);
/* Is a segment of @gen with @seq acceptable under superblock @sb? */
bool nxd_seg_gen_ok(const struct nxd_sb_info *sb, u64 seq, u64 gen);

static inline u32 nxd_block_crc(const void *data)
{
	return nxd_crc32c(~0U, data, NXD_BLOCK_SIZE);
}

#endif /* NXD_CODEC_H */
