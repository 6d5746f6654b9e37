// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd on-disk codec: superblock, HDD label and segment header, their
 * checks, which superblock copy wins, where the next segment starts, the
 * generation rule and the window recovery replays.  Built into dm-nxd.ko
 * and into userspace tests; uses only what nxd_shim.h provides.
 */
#include "nxd_codec.h"

/* All three block types keep their crc32c at the same offset. */
#define NXD_CRC_OFF	8

/*
 * crc32c(~0) of a whole block as if its crc field were zero, without
 * copying the block.
 */
static u32 nxd_crc_block(const void *blk)
{
	static const u8 zero[4];
	const u8 *p = blk;
	u32 crc;

	crc = nxd_crc32c(~0U, p, NXD_CRC_OFF);
	crc = nxd_crc32c(crc, zero, sizeof(zero));
	return nxd_crc32c(crc, p + NXD_CRC_OFF + sizeof(zero),
			  NXD_BLOCK_SIZE - NXD_CRC_OFF - sizeof(zero));
}

static bool nxd_crc_ok(const void *blk, __le32 stored)
{
	return le32_to_cpu(stored) == nxd_crc_block(blk);
}

/* ---- superblock ---- */

/*
 * The stored name and tunables are advice for the next assembly, never
 * a reason to refuse the superblock: a name is read up to its first NUL
 * (127 bytes at most), and tunables out of the ranges the table parser
 * takes (nxd_tuns[]) are ignored (tun_valid false).
 */
static void nxd_sb_decode_tun(const struct nxd_sb *d, struct nxd_sb_info *sb)
{
	u64 wt = le64_to_cpu(d->write_threshold);
	u32 flags = le32_to_cpu(d->tun_flags);
	struct nxd_tun t;

	/* sb was zeroed: up to the first NUL, the rest stays zero. */
	memcpy(sb->name, d->name, strnlen(d->name, sizeof(d->name) - 1));
	if (!(flags & NXD_SB_TUN_VALID))
		return;
	/* Written before a field existed: its default. */
	nxd_tun_defaults(&t);
	/* Above any range: out of range, not truncated into one. */
	t.write_threshold = min_t(u64, wt, NXD_U32_MAX);
	t.mode = le32_to_cpu(d->mode);
	t.low_wm = d->low_wm;
	t.high_wm = d->high_wm;
	t.destage_rate = le32_to_cpu(d->destage_rate);
	t.ssd_discard = d->ssd_discard;
	t.drain_on_suspend = d->drain_on_suspend;
	if (flags & NXD_SB_TUN_AUTO) {
		t.auto_min_thr = le32_to_cpu(d->auto_min_thr);
		t.auto_max_thr = le32_to_cpu(d->auto_max_thr);
		t.stream_min = le32_to_cpu(d->stream_min);
		t.stripe_size = le32_to_cpu(d->stripe_size);
	}
	if (flags & NXD_SB_TUN_SHARE)
		t.stream_share = d->stream_share;
	if (!nxd_tun_valid(&t))
		return;
	sb->tun_valid = true;
	sb->tun = t;
}

static void nxd_sb_encode_tun(const struct nxd_sb_info *sb, struct nxd_sb *d)
{
	size_t n = strnlen(sb->name, sizeof(d->name) - 1);

	memcpy(d->name, sb->name, n);	/* the rest stays zero */
	if (!sb->tun_valid)
		return;
	d->tun_flags = cpu_to_le32(NXD_SB_TUN_VALID | NXD_SB_TUN_AUTO |
				   NXD_SB_TUN_SHARE);
	d->mode = cpu_to_le32(sb->tun.mode);
	d->write_threshold = cpu_to_le64(sb->tun.write_threshold);
	d->destage_rate = cpu_to_le32(sb->tun.destage_rate);
	d->low_wm = min_t(u32, sb->tun.low_wm, 255);
	d->high_wm = min_t(u32, sb->tun.high_wm, 255);
	d->ssd_discard = min_t(u32, sb->tun.ssd_discard, 255);
	d->drain_on_suspend = min_t(u32, sb->tun.drain_on_suspend, 255);
	d->auto_min_thr = cpu_to_le32(sb->tun.auto_min_thr);
	d->auto_max_thr = cpu_to_le32(sb->tun.auto_max_thr);
	d->stream_min = cpu_to_le32(sb->tun.stream_min);
	d->stripe_size = cpu_to_le32(sb->tun.stripe_size);
	d->stream_share = min_t(u32, sb->tun.stream_share, 255);
}

int nxd_sb_decode(const void *blk, u64 ssd_blocks, struct nxd_sb_info *sb)
{
	const struct nxd_sb *d = blk;
	u32 v;

	if (le64_to_cpu(d->magic) != NXD_SB_MAGIC)
		return NXD_ENOTNXD;
	if (!nxd_crc_ok(blk, d->crc))
		return -EBADMSG;
	v = le32_to_cpu(d->version);
	if (v != NXD_FORMAT_VERSION && v != NXD_FORMAT_V1)
		return -EPROTONOSUPPORT;

	memset(sb, 0, sizeof(*sb));
	/* Version 1 had reserved (zero) bytes there: its data start at 0. */
	if (v == NXD_FORMAT_VERSION)
		sb->data_offset = le64_to_cpu(d->data_offset);
	sb->sb_seq = le64_to_cpu(d->sb_seq);
	memcpy(sb->vol_uuid, d->vol_uuid, sizeof(sb->vol_uuid));
	memcpy(sb->hdd_uuid, d->hdd_uuid, sizeof(sb->hdd_uuid));
	sb->hdd_sectors = le64_to_cpu(d->hdd_sectors);
	sb->hdd_label_sector = le64_to_cpu(d->hdd_label_sector);
	sb->data_sectors = le64_to_cpu(d->data_sectors);
	sb->ring_start = le64_to_cpu(d->ring_start);
	sb->ring_blocks = le64_to_cpu(d->ring_blocks);
	sb->tail_pos = le64_to_cpu(d->tail_pos);
	sb->tail_seq = le64_to_cpu(d->tail_seq);
	sb->gen = le64_to_cpu(d->gen);
	sb->gen_start_seq = le64_to_cpu(d->gen_start_seq);
	sb->head_pos = le64_to_cpu(d->head_pos);
	sb->head_seq = le64_to_cpu(d->head_seq);
	sb->flags = le32_to_cpu(d->flags);
	nxd_sb_decode_tun(d, sb);

	if (le32_to_cpu(d->block_size) != NXD_BLOCK_SIZE ||
	    le32_to_cpu(d->seg_max_blocks) != NXD_SEG_MAX_BLOCKS ||
	    sb->ring_start != NXD_RING_START)
		return -EINVAL;
	if (sb->ring_blocks < NXD_MIN_RING_BLOCKS ||
	    ssd_blocks < sb->ring_start ||
	    sb->ring_blocks > ssd_blocks - sb->ring_start)
		return -EINVAL;
	if (sb->tail_pos >= sb->ring_blocks)
		return -EINVAL;
	if (sb->flags & ~NXD_SB_FLAGS_KNOWN)
		return -EINVAL;
	if ((sb->flags & NXD_SB_CLEAN) &&
	    (sb->head_pos >= sb->ring_blocks || sb->head_seq < sb->tail_seq))
		return -EINVAL;
	if (!sb->data_sectors)
		return -EINVAL;
	if (v == NXD_FORMAT_V1)
		return sb->hdd_label_sector < sb->data_sectors ? -EINVAL : 0;
	/* Version 2: the label in block 0, the data area after it. */
	if (sb->hdd_label_sector || !nxd_data_offset_ok(sb->data_offset))
		return -EINVAL;
	return 0;
}

void nxd_sb_encode(const struct nxd_sb_info *sb, void *blk)
{
	struct nxd_sb *d = blk;

	memset(d, 0, sizeof(*d));
	d->magic = cpu_to_le64(NXD_SB_MAGIC);
	/* A volume keeps the version of its layout. */
	d->version = cpu_to_le32(sb->data_offset ? NXD_FORMAT_VERSION : NXD_FORMAT_V1);
	d->data_offset = cpu_to_le64(sb->data_offset);
	d->sb_seq = cpu_to_le64(sb->sb_seq);
	memcpy(d->vol_uuid, sb->vol_uuid, sizeof(d->vol_uuid));
	memcpy(d->hdd_uuid, sb->hdd_uuid, sizeof(d->hdd_uuid));
	d->hdd_sectors = cpu_to_le64(sb->hdd_sectors);
	d->hdd_label_sector = cpu_to_le64(sb->hdd_label_sector);
	d->data_sectors = cpu_to_le64(sb->data_sectors);
	d->block_size = cpu_to_le32(NXD_BLOCK_SIZE);
	d->seg_max_blocks = cpu_to_le32(NXD_SEG_MAX_BLOCKS);
	d->ring_start = cpu_to_le64(NXD_RING_START);
	d->ring_blocks = cpu_to_le64(sb->ring_blocks);
	d->tail_pos = cpu_to_le64(sb->tail_pos);
	d->tail_seq = cpu_to_le64(sb->tail_seq);
	d->gen = cpu_to_le64(sb->gen);
	d->gen_start_seq = cpu_to_le64(sb->gen_start_seq);
	d->head_pos = cpu_to_le64(sb->head_pos);
	d->head_seq = cpu_to_le64(sb->head_seq);
	d->flags = cpu_to_le32(sb->flags);
	nxd_sb_encode_tun(sb, d);
	d->crc = cpu_to_le32(nxd_crc_block(blk));
}

int nxd_sb_pick(const int res[2], const struct nxd_sb_info sbs[2])
{
	if (!res[0] && !res[1])
		return sbs[1].sb_seq > sbs[0].sb_seq ? 1 : 0;
	if (!res[0])
		return 0;
	if (!res[1])
		return 1;
	if (res[0] == NXD_ENOTNXD && res[1] == NXD_ENOTNXD)
		return NXD_SB_NONE;
	return res[0] < 0 ? res[0] : res[1];
}

/* ---- HDD label ---- */

int nxd_label_decode(const void *blk, struct nxd_label_info *l)
{
	const struct nxd_hdd_label *d = blk;
	u32 v;

	if (le64_to_cpu(d->magic) != NXD_LABEL_MAGIC)
		return NXD_ENOTNXD;
	if (!nxd_crc_ok(blk, d->crc))
		return -EBADMSG;
	v = le32_to_cpu(d->version);
	if ((v != NXD_FORMAT_VERSION && v != NXD_FORMAT_V1) ||
	    (le32_to_cpu(d->flags) & ~NXD_LABEL_FLAGS_KNOWN))
		return -EPROTONOSUPPORT;
	memset(l, 0, sizeof(*l));
	if (v == NXD_FORMAT_VERSION) {
		l->data_offset = le64_to_cpu(d->data_offset);
		if (!nxd_data_offset_ok(l->data_offset))
			return -EINVAL;
	}
	memcpy(l->vol_uuid, d->vol_uuid, sizeof(l->vol_uuid));
	memcpy(l->hdd_uuid, d->hdd_uuid, sizeof(l->hdd_uuid));
	l->hdd_sectors = le64_to_cpu(d->hdd_sectors);
	l->flags = le32_to_cpu(d->flags);
	l->abandoned_gen = le64_to_cpu(d->abandoned_gen);
	l->frozen_end_seq = le64_to_cpu(d->frozen_end_seq);
	l->frozen_tail_pos = le64_to_cpu(d->frozen_tail_pos);
	l->frozen_tail_seq = le64_to_cpu(d->frozen_tail_seq);
	/* Advice, never a reason to refuse: up to the first NUL, 63 at most. */
	memcpy(l->owner, d->owner, strnlen(d->owner, sizeof(d->owner) - 1));
	l->lost_blocks = le64_to_cpu(d->lost_blocks);
	l->lost_ranges = le32_to_cpu(d->lost_ranges);
	l->lost_listed = min_t(u32, le32_to_cpu(d->lost_listed), NXD_LABEL_LOST_MAX);
	/* A frozen log's window: the tail never passes its end. */
	if ((l->flags & NXD_LABEL_LOG_FROZEN) &&
	    (!l->frozen_tail_seq || l->frozen_tail_seq > l->frozen_end_seq))
		return -EINVAL;
	return 0;
}

void nxd_label_encode(const struct nxd_label_info *l, void *blk)
{
	struct nxd_hdd_label *d = blk;

	memset(d, 0, sizeof(*d));
	d->magic = cpu_to_le64(NXD_LABEL_MAGIC);
	d->version = cpu_to_le32(l->data_offset ? NXD_FORMAT_VERSION : NXD_FORMAT_V1);
	d->data_offset = cpu_to_le64(l->data_offset);
	memcpy(d->vol_uuid, l->vol_uuid, sizeof(d->vol_uuid));
	memcpy(d->hdd_uuid, l->hdd_uuid, sizeof(d->hdd_uuid));
	d->hdd_sectors = cpu_to_le64(l->hdd_sectors);
	d->flags = cpu_to_le32(l->flags);
	d->abandoned_gen = cpu_to_le64(l->abandoned_gen);
	d->frozen_end_seq = cpu_to_le64(l->frozen_end_seq);
	d->frozen_tail_pos = cpu_to_le64(l->frozen_tail_pos);
	d->frozen_tail_seq = cpu_to_le64(l->frozen_tail_seq);
	memcpy(d->owner, l->owner, strnlen(l->owner, sizeof(d->owner) - 1));
	d->lost_blocks = cpu_to_le64(l->lost_blocks);
	d->lost_ranges = cpu_to_le32(l->lost_ranges);
	d->lost_listed = cpu_to_le32(min_t(u32, l->lost_listed, NXD_LABEL_LOST_MAX));
	d->crc = cpu_to_le32(nxd_crc_block(blk));
}

void nxd_label_set_lost(void *blk, u32 i, u64 first, u64 nr)
{
	struct nxd_hdd_label *d = blk;

	if (i < NXD_LABEL_LOST_MAX) {
		d->lost[i].first = cpu_to_le64(first);
		d->lost[i].nr = cpu_to_le64(nr);
	}
}

void nxd_label_get_lost(const void *blk, u32 i, u64 *first, u64 *nr)
{
	const struct nxd_hdd_label *d = blk;

	*first = 0;
	*nr = 0;
	if (i < NXD_LABEL_LOST_MAX) {
		*first = le64_to_cpu(d->lost[i].first);
		*nr = le64_to_cpu(d->lost[i].nr);
	}
}

void nxd_label_keep_lost(void *blk, const void *old)
{
	memcpy(((struct nxd_hdd_label *)blk)->lost,
	       ((const struct nxd_hdd_label *)old)->lost,
	       sizeof(((struct nxd_hdd_label *)blk)->lost));
	nxd_label_seal(blk);
}

void nxd_label_seal(void *blk)
{
	struct nxd_hdd_label *d = blk;

	d->crc = cpu_to_le32(nxd_crc_block(blk));
}

u64 nxd_hdd_data_sectors(u64 hdd_sectors)
{
	u64 r = hdd_sectors & ~(NXD_HDD_RESERVED_SECTORS - 1);

	return r > NXD_HDD_RESERVED_SECTORS ? r - NXD_HDD_RESERVED_SECTORS : 0;
}

bool nxd_data_offset_ok(u64 off)
{
	return off >= NXD_DATA_OFFSET_MIN && off <= NXD_DATA_OFFSET_MAX &&
	       !(off & (NXD_SECTORS_PER_BLOCK - 1));
}

u64 nxd_hdd_data_offset(u64 io_opt_bytes)
{
	u64 a = io_opt_bytes >> 9, off;

	/* A whole number of 4 KiB blocks and of stripes. */
	if (!a || a > NXD_DATA_OFFSET_MAX)
		return NXD_DATA_OFFSET_MIN;
	if (a & (NXD_SECTORS_PER_BLOCK - 1))
		a *= NXD_SECTORS_PER_BLOCK;
	off = (NXD_DATA_OFFSET_MIN + a - 1) / a * a;
	return off > NXD_DATA_OFFSET_MAX ? NXD_DATA_OFFSET_MIN : off;
}

u64 nxd_layout_data_sectors(u64 hdd_sectors, u64 data_offset)
{
	u64 end = hdd_sectors & ~(NXD_HDD_RESERVED_SECTORS - 1);

	if (!data_offset)
		return nxd_hdd_data_sectors(hdd_sectors);
	return end > data_offset + NXD_SECTORS_PER_BLOCK ?
	       (end - data_offset) & ~(u64)(NXD_SECTORS_PER_BLOCK - 1) : 0;
}

/* ---- segments ---- */

int nxd_seg_decode(const void *blk, const u8 vol_uuid[16], u64 ring_blocks,
		   u64 max_block, struct nxd_seg_info *si)
{
	const struct nxd_seg_hdr *h = blk;
	u32 nr_data, nr_recs, i, ndata = 0;
	u64 pos;

	if (le64_to_cpu(h->magic) != NXD_SEG_MAGIC)
		return NXD_ENOTNXD;
	if (!nxd_crc_ok(blk, h->crc))
		return -EBADMSG;
	if (memcmp(h->vol_uuid, vol_uuid, sizeof(h->vol_uuid)))
		return -ESTALE;
	if (le32_to_cpu(h->flags) & ~NXD_SEG_FLAGS_KNOWN)
		return -EINVAL;

	nr_data = le32_to_cpu(h->nr_data);
	nr_recs = le32_to_cpu(h->nr_recs);
	pos = le64_to_cpu(h->pos);
	if (nr_recs > NXD_SEG_MAX_RECS || nr_data > NXD_SEG_MAX_DATA)
		return -EINVAL;
	if (pos >= ring_blocks || ring_blocks - pos < 1 + (u64)nr_data)
		return -EINVAL;

	for (i = 0; i < nr_recs; i++) {
		const struct nxd_seg_rec *rec = &h->recs[i];
		u64 block = le64_to_cpu(rec->block);
		u32 val = le32_to_cpu(rec->val);

		if (rec->reserved)
			return -EINVAL;
		switch (rec->type) {
		case NXD_REC_DATA:
			if (!rec->mask || block >= max_block)
				return -EINVAL;
			ndata++;
			break;
		case NXD_REC_INVAL:
			if (!val || rec->mask || val > max_block ||
			    block > max_block - val)
				return -EINVAL;
			break;
		default:
			return -EINVAL;
		}
	}
	if (ndata != nr_data)
		return -EINVAL;

	si->seq = le64_to_cpu(h->seq);
	si->gen = le64_to_cpu(h->gen);
	si->pos = pos;
	si->nr_data = nr_data;
	si->nr_recs = nr_recs;
	si->flags = le32_to_cpu(h->flags);
	return 0;
}

void nxd_seg_rec(const void *blk, u32 i, struct nxd_rec *r)
{
	const struct nxd_seg_hdr *h = blk;
	const struct nxd_seg_rec *rec;

	memset(r, 0, sizeof(*r));
	if (i >= NXD_SEG_MAX_RECS)
		return;
	rec = &h->recs[i];
	r->block = le64_to_cpu(rec->block);
	r->val = le32_to_cpu(rec->val);
	r->type = rec->type;
	r->mask = rec->mask;
}

void nxd_seg_init(void *blk, const u8 vol_uuid[16], u64 seq, u64 gen, u64 pos)
{
	struct nxd_seg_hdr *h = blk;

	memset(h, 0, sizeof(*h));
	h->magic = cpu_to_le64(NXD_SEG_MAGIC);
	h->seq = cpu_to_le64(seq);
	h->gen = cpu_to_le64(gen);
	h->pos = cpu_to_le64(pos);
	memcpy(h->vol_uuid, vol_uuid, sizeof(h->vol_uuid));
}

static int nxd_seg_add(struct nxd_seg_hdr *h, u8 type, u64 block, u32 val,
		       u8 mask)
{
	u32 nr_recs = le32_to_cpu(h->nr_recs);
	struct nxd_seg_rec *rec;

	if (nr_recs >= NXD_SEG_MAX_RECS)
		return -ENOSPC;
	rec = &h->recs[nr_recs];
	rec->block = cpu_to_le64(block);
	rec->val = cpu_to_le32(val);
	rec->type = type;
	rec->mask = mask;
	rec->reserved = 0;
	h->nr_recs = cpu_to_le32(nr_recs + 1);
	return 0;
}

int nxd_seg_add_data(void *blk, u64 block, u8 mask, u32 crc)
{
	struct nxd_seg_hdr *h = blk;
	u32 nr_data = le32_to_cpu(h->nr_data);
	int ret;

	if (!mask)
		return -EINVAL;
	if (nr_data >= NXD_SEG_MAX_DATA)
		return -ENOSPC;
	ret = nxd_seg_add(h, NXD_REC_DATA, block, crc, mask);
	if (ret)
		return ret;
	h->nr_data = cpu_to_le32(nr_data + 1);
	return nr_data;
}

int nxd_seg_add_inval(void *blk, u64 block, u32 count)
{
	if (!count)
		return -EINVAL;
	return nxd_seg_add(blk, NXD_REC_INVAL, block, count, 0);
}

u32 nxd_seg_nr_data(const void *blk)
{
	const struct nxd_seg_hdr *h = blk;

	return le32_to_cpu(h->nr_data);
}

u32 nxd_seg_nr_recs(const void *blk)
{
	const struct nxd_seg_hdr *h = blk;

	return le32_to_cpu(h->nr_recs);
}

void nxd_seg_set_flags(void *blk, u32 flags)
{
	struct nxd_seg_hdr *h = blk;

	h->flags = cpu_to_le32(flags);
}

void nxd_seg_seal(void *blk)
{
	struct nxd_seg_hdr *h = blk;

	h->crc = cpu_to_le32(nxd_crc_block(blk));
}

u64 nxd_next_seg_pos(u64 ring_blocks, u64 end)
{
	if (end > ring_blocks || ring_blocks - end < NXD_SEG_MAX_BLOCKS)
		return 0;
	return end;
}

bool nxd_seg_fits(u32 nr_data, u32 nr_recs, u32 data, u32 recs)
{
	return nr_data + data <= NXD_SEG_MAX_DATA &&
	       nr_recs + recs <= NXD_SEG_MAX_RECS;
}

void nxd_replay_window(const struct nxd_sb_info *sb,
		       const struct nxd_label_info *l, u64 *pos, u64 *seq,
		       u64 *end_seq)
{
	*pos = sb->tail_pos;
	*seq = sb->tail_seq;
	*end_seq = NXD_U64_MAX;
	if (!(l->flags & NXD_LABEL_LOG_FROZEN))
		return;
	*end_seq = l->frozen_end_seq;
	/* Destaged while frozen: the SSD superblock could not record it. */
	if (l->frozen_tail_seq > *seq) {
		*pos = l->frozen_tail_pos;
		*seq = l->frozen_tail_seq;
	}
}

bool nxd_seg_gen_ok(const struct nxd_sb_info *sb, u64 seq, u64 gen)
{
	if (seq < sb->gen_start_seq)
		return gen < sb->gen;
	return gen == sb->gen;
}
