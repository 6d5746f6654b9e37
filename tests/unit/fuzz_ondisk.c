// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target for the on-disk decoders: nxd_sb_decode,
 * nxd_label_decode, nxd_seg_decode and nxd_seg_rec over every record.
 *
 * Input: ctl (1 byte), p1 (u64 le), p2 (u64 le), then up to one block
 * (zero padded).  p1 is the SSD size for the superblock and the ring size
 * for segments, p2 the segment's max_block.  ctl bits:
 *   0-2  recompute the crc of the sb / label / segment copy, so that
 *        mutations reach the checks behind the crc
 *   3    decode the segment against its own vol_uuid (else all-zero)
 *   4-5  force the magic: 1 sb, 2 label, 3 segment
 * Whatever a decoder accepts must satisfy the documented invariants and
 * survive a re-encode / decode round trip unchanged.
 */
#include "../../kernel/nxd_codec.h"
#include "../../kernel/nxd_route.h"	/* NXD_MODE_MAX */
#include <stdio.h>
#include <stdlib.h>

#define BS NXD_BLOCK_SIZE

#define ASSERT(c) do {							\
	if (!(c)) {							\
		fprintf(stderr, "%s:%d: ASSERT(%s)\n", __FILE__,	\
			__LINE__, #c);					\
		abort();						\
	}								\
} while (0)

static void set_crc(u8 *blk)
{
	u32 crc;

	memset(blk + 8, 0, 4);
	crc = htole32(nxd_crc32c(~0U, blk, BS));
	memcpy(blk + 8, &crc, 4);
}

static u64 get64(const u8 *p)
{
	u64 v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static void put64(u8 *p, u64 v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static bool known_err(int r)
{
	return r == NXD_ENOTNXD || r == -EBADMSG ||
	       r == -EPROTONOSUPPORT || r == -EINVAL;
}

static void fuzz_sb(const u8 *in, u8 ctl, u64 ssd_blocks)
{
	const struct nxd_tun *t;
	static u8 b[BS], b2[BS];
	struct nxd_sb_info sb, sb2, sbs[2];
	int r, res[2], pick;

	memcpy(b, in, BS);
	if (ctl & 1)
		set_crc(b);
	r = nxd_sb_decode(b, ssd_blocks, &sb);
	ASSERT(r == 0 || known_err(r));
	/* the pick of two copies is one of them or an error from them */
	res[0] = r;
	res[1] = nxd_sb_decode(in, ssd_blocks, &sbs[1]);
	sbs[0] = sb;
	pick = nxd_sb_pick(res, sbs);
	if (pick == 0 || pick == 1)
		ASSERT(res[pick] == 0 &&
		       (res[!pick] || sbs[pick].sb_seq >= sbs[!pick].sb_seq));
	else if (pick == NXD_SB_NONE)
		ASSERT(res[0] == NXD_ENOTNXD && res[1] == NXD_ENOTNXD);
	else
		ASSERT(pick < 0 && (pick == res[0] || pick == res[1]));
	if (r)
		return;

	ASSERT(sb.ring_start == NXD_RING_START);
	ASSERT(sb.ring_blocks >= NXD_MIN_RING_BLOCKS);
	ASSERT(ssd_blocks >= NXD_RING_START &&
	       sb.ring_blocks <= ssd_blocks - NXD_RING_START);
	ASSERT(sb.tail_pos < sb.ring_blocks);
	ASSERT(!(sb.flags & ~NXD_SB_FLAGS_KNOWN));
	if (sb.flags & NXD_SB_CLEAN)
		ASSERT(sb.head_pos < sb.ring_blocks &&
		       sb.head_seq >= sb.tail_seq);
	ASSERT(sb.data_sectors);
	if (sb.data_offset)	/* version 2: label in block 0, data after it */
		ASSERT(!sb.hdd_label_sector && nxd_data_offset_ok(sb.data_offset));
	else
		ASSERT(sb.hdd_label_sector >= sb.data_sectors);
	/* stored name and tunables: terminated, and in range if valid */
	ASSERT(memchr(sb.name, 0, sizeof(sb.name)));
	t = &sb.tun;
	if (sb.tun_valid)
		ASSERT(t->write_threshold <= (1U << 30) &&
		       t->mode < NXD_MODE_MAX && t->low_wm <= t->high_wm &&
		       t->high_wm <= 100 && t->destage_rate <= 1000000 &&
		       t->ssd_discard <= 1 && t->drain_on_suspend <= 1);
	else
		ASSERT(!t->write_threshold && !t->mode && !t->low_wm &&
		       !t->high_wm && !t->destage_rate && !t->ssd_discard &&
		       !t->drain_on_suspend);

	nxd_sb_encode(&sb, b2);
	ASSERT(nxd_sb_decode(b2, ssd_blocks, &sb2) == 0);
	ASSERT(!memcmp(&sb, &sb2, sizeof(sb)));
	/* encode writes the same bytes except crc and reserved space */
	ASSERT(!memcmp(b2, b, 8));
	ASSERT(!memcmp(b2 + 12, b + 12,
		       offsetof(struct nxd_sb, reserved0) - 12));
}

static void fuzz_label(const u8 *in, u8 ctl)
{
	static u8 b[BS], b2[BS];
	struct nxd_label_info l, l2;
	int r;

	memcpy(b, in, BS);
	if (ctl & 2)
		set_crc(b);
	r = nxd_label_decode(b, &l);
	ASSERT(r == 0 || r == NXD_ENOTNXD || r == -EBADMSG ||
	       r == -EPROTONOSUPPORT || r == -EINVAL);
	if (r)
		return;
	if (l.flags & NXD_LABEL_LOG_FROZEN)
		ASSERT(l.frozen_tail_seq && l.frozen_tail_seq <= l.frozen_end_seq);
	nxd_label_encode(&l, b2);
	ASSERT(nxd_label_decode(b2, &l2) == 0);
	ASSERT(!memcmp(&l, &l2, sizeof(l)));
	ASSERT(!memcmp(b2, b, 8));
	/* Everything decoded is re-encoded; reserved0 is not checked. */
	ASSERT(!memcmp(b2 + 12, b + 12,
		       offsetof(struct nxd_hdd_label, reserved0) - 12));
	ASSERT(!memcmp(b2 + offsetof(struct nxd_hdd_label, abandoned_gen),
		       b + offsetof(struct nxd_hdd_label, abandoned_gen),
		       offsetof(struct nxd_hdd_label, owner) -
		       offsetof(struct nxd_hdd_label, abandoned_gen)));
	/* The owner up to its first NUL (63 bytes at most), then zeros. */
	ASSERT(!memcmp(b2 + offsetof(struct nxd_hdd_label, owner), l.owner,
		       NXD_LABEL_OWNER_LEN));
	ASSERT(!strncmp(l.owner, (const char *)b +
			offsetof(struct nxd_hdd_label, owner),
			NXD_LABEL_OWNER_LEN - 1));
}

static void fuzz_seg(const u8 *in, u8 ctl, u64 ring, u64 max_block)
{
	static const u8 zero_uuid[16];
	static u8 b[BS], b2[BS];
	struct nxd_seg_info si, si2;
	struct nxd_rec r, r2;
	const u8 *uuid;
	u32 i, ndata = 0;
	int ret;

	/* the struct has tail padding that memcmp below must see as equal */
	memset(&si, 0, sizeof(si));
	memset(&si2, 0, sizeof(si2));
	memcpy(b, in, BS);
	if (ctl & 4)
		set_crc(b);
	uuid = (ctl & 8) ? b + offsetof(struct nxd_seg_hdr, vol_uuid) :
	       zero_uuid;
	ret = nxd_seg_decode(b, uuid, ring, max_block, &si);
	ASSERT(ret == 0 || ret == -ESTALE || known_err(ret));
	/* nxd_seg_rec is also safe on rejected headers */
	for (i = 0; i < NXD_SEG_MAX_RECS + 1; i += 37)
		nxd_seg_rec(b, i, &r);
	if (ret)
		return;

	ASSERT(si.nr_recs <= NXD_SEG_MAX_RECS);
	ASSERT(si.nr_data <= NXD_SEG_MAX_DATA);
	ASSERT(si.pos < ring && si.pos + 1 + si.nr_data <= ring);
	ASSERT(si.nr_data == nxd_seg_nr_data(b));
	ASSERT(si.nr_recs == nxd_seg_nr_recs(b));

	/* rebuild from the decoded records: must decode identically */
	nxd_seg_init(b2, uuid, si.seq, si.gen, si.pos);
	for (i = 0; i < si.nr_recs; i++) {
		nxd_seg_rec(b, i, &r);
		if (r.type == NXD_REC_DATA) {
			ASSERT(r.mask && r.block < max_block);
			ASSERT(nxd_seg_add_data(b2, r.block, r.mask, r.val) ==
			       (int)ndata);
			ndata++;
		} else {
			ASSERT(r.type == NXD_REC_INVAL);
			ASSERT(r.val && !r.mask && r.val <= max_block &&
			       r.block <= max_block - r.val);
			ASSERT(nxd_seg_add_inval(b2, r.block, r.val) == 0);
		}
	}
	ASSERT(ndata == si.nr_data);
	ASSERT(!(si.flags & ~NXD_SEG_FLAGS_KNOWN));
	nxd_seg_set_flags(b2, si.flags);
	nxd_seg_seal(b2);
	ASSERT(nxd_seg_decode(b2, uuid, ring, max_block, &si2) == 0);
	ASSERT(!memcmp(&si, &si2, sizeof(si)));
	for (i = 0; i < si.nr_recs; i++) {
		nxd_seg_rec(b, i, &r);
		nxd_seg_rec(b2, i, &r2);
		ASSERT(!memcmp(&r, &r2, sizeof(r)));
	}
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	static u8 blk[BS];
	u8 ctl;
	u64 p1, p2;
	size_t n;

	if (size < 17)
		return 0;
	ctl = data[0];
	p1 = get64(data + 1);
	p2 = get64(data + 9);
	n = size - 17 < BS ? size - 17 : BS;
	memset(blk, 0, BS);
	memcpy(blk, data + 17, n);
	switch ((ctl >> 4) & 3) {
	case 1:
		put64(blk, NXD_SB_MAGIC);
		break;
	case 2:
		put64(blk, NXD_LABEL_MAGIC);
		break;
	case 3:
		put64(blk, NXD_SEG_MAGIC);
		break;
	}
	fuzz_sb(blk, ctl, p1);
	fuzz_label(blk, ctl);
	fuzz_seg(blk, ctl, p1, p2);
	return 0;
}
