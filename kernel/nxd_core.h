/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kernel-neutral core of dm-nxd: on-disk codec, log ring accounting,
 * extent index, routing decision and histogram bucketing.  Compiled into
 * the module and into the userspace unit tests and fuzzers.
 */
#ifndef NXD_CORE_H
#define NXD_CORE_H

#include "nxd_shim.h"
#include "nxd_format.h"

/* ---- superblock ---- */

struct nxd_sb_info {
	u64 sb_seq;
	u8 vol_uuid[16];
	u8 hdd_uuid[16];
	u64 hdd_sectors;
	u64 hdd_label_sector;
	u64 data_sectors;
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
	u32 write_threshold;
	u32 mode;
	u32 low_wm;
	u32 high_wm;
	u32 destage_rate;
	u32 ssd_discard;
	u32 drain_on_suspend;
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
};

int nxd_label_decode(const void *blk, struct nxd_label_info *l);
void nxd_label_encode(const struct nxd_label_info *l, void *blk);

/* Usable logical sectors of an HDD of @hdd_sectors, and where the label goes. */
u64 nxd_hdd_data_sectors(u64 hdd_sectors);

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
struct nxd_label_info;
void nxd_replay_window(const struct nxd_sb_info *sb,
		       const struct nxd_label_info *l, u64 *pos, u64 *seq,
		       u64 *end_seq);
/* Is a segment of @gen with @seq acceptable under superblock @sb? */
bool nxd_seg_gen_ok(const struct nxd_sb_info *sb, u64 seq, u64 gen);

static inline u32 nxd_block_crc(const void *data)
{
	return nxd_crc32c(~0U, data, NXD_BLOCK_SIZE);
}

/* ---- log ring accounting ---- */

struct nxd_segd {
	u32 pos;	/* ring offset of the header */
	u16 nr_data;
	u16 live;	/* data blocks still referenced by the index */
};

struct nxd_ring {
	u64 ring_blocks;
	u64 head;		/* end of the newest segment */
	u64 next_seq;		/* seq of the next segment */
	u64 first_seq;		/* seq of fifo[first] */
	struct nxd_segd *fifo;	/* live segments, oldest first */
	u32 cap, first, count;
};

int nxd_ring_init(struct nxd_ring *r, u64 ring_blocks, u64 head, u64 next_seq);
void nxd_ring_free(struct nxd_ring *r);
/* Empty the ring in place (no allocation), next segment at @head. */
void nxd_ring_reset(struct nxd_ring *r, u64 head, u64 next_seq);
/* Position for a segment of @nr_data data blocks, or -ENOSPC. */
int nxd_ring_reserve(const struct nxd_ring *r, u32 nr_data, u64 *pos);
/* Record a written segment (at the position reserve returned). */
void nxd_ring_push(struct nxd_ring *r, u64 pos, u32 nr_data, u32 live);
/* The live segment holding ring slot @slot, or NULL; *seq gets its seq. */
struct nxd_segd *nxd_ring_find(struct nxd_ring *r, u64 slot, u64 *seq);
struct nxd_segd *nxd_ring_at(struct nxd_ring *r, u32 i);

static inline struct nxd_segd *nxd_ring_oldest(struct nxd_ring *r)
{
	return r->count ? nxd_ring_at(r, 0) : NULL;
}

void nxd_ring_pop(struct nxd_ring *r);
/* Shrink the newest segment, still being filled, to @nr_data data blocks. */
void nxd_ring_trim_newest(struct nxd_ring *r, u32 nr_data);
/* Forget the newest segment (its header was never written). */
void nxd_ring_unpush(struct nxd_ring *r);
u64 nxd_ring_used(const struct nxd_ring *r);
/* The (pos, seq) recovery must start from: the oldest live segment. */
void nxd_ring_tail(const struct nxd_ring *r, u64 *pos, u64 *seq);

/* ---- extent index: logical 4 KiB block -> ring slot + sector mask ---- */

#define NXD_IE_DESTAGING	BIT(0)	/* copy to HDD in flight */
#define NXD_IE_NOCRC		BIT(1)	/* in an ORDERED segment: rsvd holds no crc */

struct nxd_ient {
	u64 block;		/* NXD_IE_EMPTY when unused */
	u32 slot;
	u8 mask;
	u8 flags;
	u16 rsvd;
};

#define NXD_IE_EMPTY	(~0ULL)

struct nxd_index {
	struct nxd_ient *tab;
	u32 *filter;		/* entries per hashed 1 MiB region */
	u32 cap;
	u32 nfilter;
	u64 count;
};

#define NXD_REGION_SHIFT	8	/* 256 blocks = 1 MiB */

int nxd_index_init(struct nxd_index *ix, u64 max_entries);
void nxd_index_free(struct nxd_index *ix);
/* Remove every entry in place (no allocation). */
void nxd_index_clear(struct nxd_index *ix);
struct nxd_ient *nxd_index_find(const struct nxd_index *ix, u64 block);
/*
 * Insert or replace.  Returns 1 if an entry was replaced (old slot/mask in
 * *old), 0 if inserted, -ENOSPC if full.  The entry's flags are cleared
 * (*old has the previous ones); @old may be NULL.
 */
int nxd_index_set(struct nxd_index *ix, u64 block, u32 slot, u8 mask,
		  struct nxd_ient *old);
/* Remove; returns true and the old entry in *old if it existed. */
bool nxd_index_del(struct nxd_index *ix, u64 block, struct nxd_ient *old);
/* False only if no entry can lie in [first, first + nr). */
bool nxd_index_maybe(const struct nxd_index *ix, u64 first, u64 nr);
size_t nxd_index_mem(const struct nxd_index *ix);

/* ---- routing ---- */

enum nxd_mode {
	NXD_MODE_AUTO = 0,	/* by size and alignment */
	NXD_MODE_PASSTHROUGH,	/* every write to the HDD */
	NXD_MODE_LOG_ALL,	/* every write to the log */
	NXD_MODE_MAX
};

/* True if a write of @bytes at @sector goes to the SSD log. */
bool nxd_route_write_to_log(u64 sector, u64 bytes, u32 threshold,
			    u32 io_min, enum nxd_mode mode);
const char *nxd_mode_name(enum nxd_mode m);
int nxd_mode_parse(const char *s, enum nxd_mode *m);

/* ---- histogram ---- */

#define NXD_HIST_BUCKETS	16
unsigned int nxd_hist_bucket(u64 bytes);
extern const char *const nxd_hist_labels[NXD_HIST_BUCKETS];

/* Parse "64K", "1M", "4096" into bytes; rejects overflow and junk. */
int nxd_parse_size(const char *s, u64 *out);

#endif /* NXD_CORE_H */
