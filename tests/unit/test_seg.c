// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the segment header codec (nxd_codec.c): round trip,
 * every range check, every single-bit and byte flip, what fits in a
 * segment, the next-segment-position rule and the generation rule.
 *
 * Usage: test_seg [seed]   (or NXD_SEED=...)
 */
#include "codec_test.h"

/* ---- segments ---- */

static void seg_flip_all(u8 *blk, const u8 *uuid, u64 ring, u64 maxb)
{
	struct nxd_seg_info ref, out;
	struct nxd_rec r1, r2;
	size_t i;
	u32 k;
	int b, bad = 0;

	CHECK_EQ(nxd_seg_decode(blk, uuid, ring, maxb, &ref), 0);
	for (i = 0; i < BS; i++) {
		for (b = 0; b <= 8; b++) {
			u8 x = b == 8 ? 0xff : (u8)(1U << b);
			u8 save[BS];

			memcpy(save, blk, BS);
			blk[i] ^= x;
			if (!nxd_seg_decode(blk, uuid, ring, maxb, &out)) {
				/* must decode identically */
				if (memcmp(&out, &ref, sizeof(ref)))
					bad++;
				for (k = 0; k < out.nr_recs; k++) {
					nxd_seg_rec(blk, k, &r1);
					nxd_seg_rec(save, k, &r2);
					if (memcmp(&r1, &r2, sizeof(r1)))
						bad++;
				}
				bad++;	/* crc32c: never expected */
			}
			blk[i] ^= x;
		}
	}
	CHECK_EQ(bad, 0);
}

static void seg_mut(const u8 *good, size_t off, const void *v, size_t n,
		    int want, u64 ring, u64 maxb, int line)
{
	static u8 blk[BS];
	struct nxd_seg_info si;
	int r;

	memcpy(blk, good, BS);
	memcpy(blk + off, v, n);
	fix_crc(blk);
	r = nxd_seg_decode(blk, uuid_a, ring, maxb, &si);
	if (r != want)
		fprintf(stderr, "%s: mutation from line %d\n", __func__, line);
	CHECK_EQ(r, want);
}

#define SEG_MUT(good, field, val, want, ring, maxb) do {		\
	__typeof__(((struct nxd_seg_hdr *)0)->field) _v = (val);	\
	seg_mut(good, offsetof(struct nxd_seg_hdr, field), &_v,	\
		sizeof(_v), want, ring, maxb, __LINE__);		\
} while (0)

static void test_seg(void)
{
	static u8 blk[BS], g[BS];
	struct nxd_seg_hdr *h = (struct nxd_seg_hdr *)blk;
	struct nxd_seg_info si;
	struct nxd_rec r;
	const u64 ring = 1000, maxb = 1ULL << 20;
	u32 i;
	int bad;

	memset(blk, 0xCC, BS);
	nxd_seg_init(blk, uuid_a, 77, 5, 300);
	CHECK(!memcmp(blk, "\0NXDSEG1", 8));
	CHECK_EQ(nxd_seg_nr_data(blk), 0);
	CHECK_EQ(nxd_seg_nr_recs(blk), 0);
	CHECK_EQ(le64toh(h->seq), 77);
	CHECK_EQ(le64toh(h->gen), 5);
	CHECK_EQ(le64toh(h->pos), 300);
	CHECK_EQ(h->flags, 0);
	bad = 0;
	for (i = 0; i < sizeof(h->recs); i++)
		bad |= ((u8 *)h->recs)[i];
	CHECK_EQ(bad, 0);

	/* empty segment (e.g. only a marker) is valid */
	nxd_seg_seal(blk);
	CHECK(crc_field_ok(blk));
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, ring, maxb, &si), 0);
	CHECK_EQ(si.nr_data, 0);
	CHECK_EQ(si.nr_recs, 0);

	CHECK_EQ(nxd_seg_add_data(blk, 10, 0xff, 0x1111), 0);
	CHECK_EQ(nxd_seg_add_inval(blk, 100, 8), 0);
	CHECK_EQ(nxd_seg_add_data(blk, 11, 0x01, 0x2222), 1);
	CHECK_EQ(nxd_seg_add_data(blk, 10, 0x80, 0x3333), 2);
	CHECK_EQ(nxd_seg_add_inval(blk, 0, 0), -EINVAL);
	CHECK_EQ(nxd_seg_add_data(blk, 12, 0, 0x4444), -EINVAL);
	CHECK_EQ(nxd_seg_add_inval(blk, maxb - 1, 1), 0);
	CHECK_EQ(nxd_seg_nr_data(blk), 3);
	CHECK_EQ(nxd_seg_nr_recs(blk), 5);
	nxd_seg_seal(blk);
	CHECK(crc_field_ok(blk));
	memset(&si, 0xEE, sizeof(si));
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, ring, maxb, &si), 0);
	CHECK_EQ(si.seq, 77);
	CHECK_EQ(si.gen, 5);
	CHECK_EQ(si.pos, 300);
	CHECK_EQ(si.nr_data, 3);
	CHECK_EQ(si.nr_recs, 5);
	nxd_seg_rec(blk, 0, &r);
	CHECK(r.type == NXD_REC_DATA && r.block == 10 && r.mask == 0xff &&
	      r.val == 0x1111);
	nxd_seg_rec(blk, 1, &r);
	CHECK(r.type == NXD_REC_INVAL && r.block == 100 && r.val == 8 &&
	      r.mask == 0);
	nxd_seg_rec(blk, 2, &r);
	CHECK(r.type == NXD_REC_DATA && r.block == 11 && r.mask == 1 &&
	      r.val == 0x2222);
	nxd_seg_rec(blk, 3, &r);
	CHECK(r.type == NXD_REC_DATA && r.block == 10 && r.mask == 0x80 &&
	      r.val == 0x3333);
	nxd_seg_rec(blk, 4, &r);
	CHECK(r.type == NXD_REC_INVAL && r.block == maxb - 1 && r.val == 1);
	nxd_seg_rec(blk, NXD_SEG_MAX_RECS, &r);
	CHECK(r.type == 0 && r.block == 0);

	seg_flip_all(blk, uuid_a, ring, maxb);
	memcpy(g, blk, BS);

	/* identity errors */
	CHECK_EQ(nxd_seg_decode(blk, uuid_b, ring, maxb, &si), -ESTALE);
	blk[20] ^= 1;
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, ring, maxb, &si), -EBADMSG);
	blk[20] ^= 1;
	memset(blk, 0, 8);
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, ring, maxb, &si), NXD_ENOTNXD);
	memcpy(blk, g, BS);

	/* position vs ring (nr_data = 3, so the segment spans 4 blocks) */
	CHECK_EQ(nxd_seg_decode(g, uuid_a, 303, maxb, &si), -EINVAL);
	CHECK_EQ(nxd_seg_decode(g, uuid_a, 304, maxb, &si), 0);
	CHECK_EQ(nxd_seg_decode(g, uuid_a, 300, maxb, &si), -EINVAL);
	SEG_MUT(g, pos, htole64(ring), -EINVAL, ring, maxb);
	SEG_MUT(g, pos, htole64(ring - 4), 0, ring, maxb);
	SEG_MUT(g, pos, htole64(ring - 3), -EINVAL, ring, maxb);
	SEG_MUT(g, pos, htole64(~0ULL), -EINVAL, ring, maxb);
	SEG_MUT(g, pos, htole64(~0ULL - 2), -EINVAL, ~0ULL, maxb);
	SEG_MUT(g, pos, htole64(~0ULL - 4), 0, ~0ULL, maxb);

	/* block bounds */
	CHECK_EQ(nxd_seg_decode(g, uuid_a, ring, maxb - 1, &si), -EINVAL);
	SEG_MUT(g, recs[4].block, htole64(0), 0, ring, 108);
	SEG_MUT(g, recs[4].block, htole64(0), -EINVAL, ring, 107);
	SEG_MUT(g, recs[4].block, htole64(0), 0, ring, 108);
	SEG_MUT(g, recs[1].val, htole32(~0U), -EINVAL, ring, maxb);
	SEG_MUT(g, recs[1].val, htole32(~0U), 0, ring, ~0ULL);
	SEG_MUT(g, recs[1].block, htole64(~0ULL - 7), -EINVAL, ring, ~0ULL);
	SEG_MUT(g, recs[1].block, htole64(~0ULL - 8), 0, ring, ~0ULL);
	SEG_MUT(g, recs[0].block, htole64(maxb), -EINVAL, ring, maxb);
	SEG_MUT(g, recs[0].block, htole64(maxb - 1), 0, ring, maxb);
	SEG_MUT(g, recs[0].block, htole64(~0ULL), -EINVAL, ring, ~0ULL);

	/* record consistency */
	SEG_MUT(g, nr_data, htole32(2), -EINVAL, ring, maxb);
	SEG_MUT(g, nr_data, htole32(4), -EINVAL, ring, maxb);
	SEG_MUT(g, nr_data, htole32(NXD_SEG_MAX_DATA + 1), -EINVAL, ring,
		maxb);
	/* dropping the trailing INVAL keeps the data count consistent */
	SEG_MUT(g, nr_recs, htole32(4), 0, ring, maxb);
	SEG_MUT(g, nr_recs, htole32(3), -EINVAL, ring, maxb);
	SEG_MUT(g, nr_recs, htole32(0), -EINVAL, ring, maxb);
	SEG_MUT(g, nr_recs, htole32(6), -EINVAL, ring, maxb);
	SEG_MUT(g, nr_recs, htole32(NXD_SEG_MAX_RECS + 1), -EINVAL, ring, maxb);
	SEG_MUT(g, nr_recs, htole32(~0U), -EINVAL, ring, maxb);
	SEG_MUT(g, recs[0].type, 0, -EINVAL, ring, maxb);
	SEG_MUT(g, recs[0].type, 3, -EINVAL, ring, maxb);
	SEG_MUT(g, recs[0].type, NXD_REC_INVAL, -EINVAL, ring, maxb);
	SEG_MUT(g, recs[1].type, NXD_REC_DATA, -EINVAL, ring, maxb);
	SEG_MUT(g, recs[0].mask, 0, -EINVAL, ring, maxb);
	SEG_MUT(g, recs[1].val, 0, -EINVAL, ring, maxb);
	SEG_MUT(g, recs[1].mask, 1, -EINVAL, ring, maxb);
	SEG_MUT(g, recs[2].reserved, htole16(1), -EINVAL, ring, maxb);
	/* garbage past nr_recs is ignored; unknown header flags are not */
	SEG_MUT(g, recs[5].type, 0x77, 0, ring, maxb);
	SEG_MUT(g, recs[NXD_SEG_MAX_RECS - 1].block, htole64(~0ULL), 0, ring,
		maxb);
	SEG_MUT(g, flags, htole32(0x8000), -EINVAL, ring, maxb);
	SEG_MUT(g, flags, htole32(NXD_SEG_ORDERED | 2), -EINVAL, ring, maxb);
	SEG_MUT(g, flags, htole32(NXD_SEG_ORDERED), 0, ring, maxb);
	memcpy(blk, g, NXD_BLOCK_SIZE);
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, ring, maxb, &si), 0);
	CHECK_EQ(si.flags, 0);
	nxd_seg_set_flags(blk, NXD_SEG_ORDERED);
	nxd_seg_seal(blk);
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, ring, maxb, &si), 0);
	CHECK_EQ(si.flags, NXD_SEG_ORDERED);
	/* seq and gen are the caller's to judge */
	SEG_MUT(g, seq, htole64(0), 0, ring, maxb);
	SEG_MUT(g, gen, htole64(~0ULL), 0, ring, maxb);

	/* capacity: data limit, then record limit */
	nxd_seg_init(blk, uuid_a, 1, 1, 0);
	for (i = 0; i < NXD_SEG_MAX_DATA; i++)
		CHECK_EQ(nxd_seg_add_data(blk, i, 0xff, i), (int)i);
	CHECK_EQ(nxd_seg_add_data(blk, 1000, 0xff, 0), -ENOSPC);
	for (i = NXD_SEG_MAX_DATA; i < NXD_SEG_MAX_RECS; i++)
		CHECK_EQ(nxd_seg_add_inval(blk, i, 1), 0);
	CHECK_EQ(nxd_seg_add_inval(blk, 0, 1), -ENOSPC);
	CHECK_EQ(nxd_seg_add_data(blk, 1000, 0xff, 0), -ENOSPC);
	CHECK_EQ(nxd_seg_nr_recs(blk), NXD_SEG_MAX_RECS);
	CHECK_EQ(nxd_seg_nr_data(blk), NXD_SEG_MAX_DATA);
	nxd_seg_seal(blk);
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, NXD_SEG_MAX_BLOCKS, maxb, &si),
		 0);
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, NXD_SEG_MAX_BLOCKS - 1, maxb,
				&si), -EINVAL);
	seg_flip_all(blk, uuid_a, ring, maxb);

	/* record limit reached by invalidations first */
	nxd_seg_init(blk, uuid_a, 1, 1, 0);
	for (i = 0; i < NXD_SEG_MAX_RECS; i++)
		CHECK_EQ(nxd_seg_add_inval(blk, i, 1), 0);
	CHECK_EQ(nxd_seg_add_data(blk, 5, 0xff, 0), -ENOSPC);
	CHECK_EQ(nxd_seg_nr_data(blk), 0);
	nxd_seg_seal(blk);
	CHECK_EQ(nxd_seg_decode(blk, uuid_a, ring, maxb, &si), 0);

	/* next segment position */
	CHECK_EQ(nxd_next_seg_pos(1000, 0), 0);
	CHECK_EQ(nxd_next_seg_pos(1000, 1), 1);
	CHECK_EQ(nxd_next_seg_pos(1000, 872), 872);
	CHECK_EQ(nxd_next_seg_pos(1000, 873), 0);
	CHECK_EQ(nxd_next_seg_pos(1000, 999), 0);
	CHECK_EQ(nxd_next_seg_pos(1000, 1000), 0);
	CHECK_EQ(nxd_next_seg_pos(1000, 1001), 0);
	CHECK_EQ(nxd_next_seg_pos(128, 0), 0);

	/* generations */
	{
		struct nxd_sb_info sb;

		memset(&sb, 0, sizeof(sb));
		sb.gen = 5;
		sb.gen_start_seq = 100;
		CHECK(nxd_seg_gen_ok(&sb, 99, 4));
		CHECK(nxd_seg_gen_ok(&sb, 99, 0));
		CHECK(!nxd_seg_gen_ok(&sb, 99, 5));
		CHECK(!nxd_seg_gen_ok(&sb, 99, 6));
		CHECK(nxd_seg_gen_ok(&sb, 100, 5));
		CHECK(!nxd_seg_gen_ok(&sb, 100, 4));
		CHECK(!nxd_seg_gen_ok(&sb, 100, 6));
		CHECK(nxd_seg_gen_ok(&sb, ~0ULL, 5));
		sb.gen = 0;
		sb.gen_start_seq = 0;
		CHECK(nxd_seg_gen_ok(&sb, 0, 0));
		CHECK(!nxd_seg_gen_ok(&sb, 0, 1));
	}
}

/* ---- ring: fixed scenarios ---- */

/*
 * Segment room as the writer asks for it: a data block needs a data slot
 * and a record, an INVAL op its records.  252 INVALs leave no room for a
 * data block (the writer once let a 253rd record in and lost an INVAL).
 */
static void test_seg_fits(void)
{
	u32 d, r;

	CHECK(nxd_seg_fits(0, 0, 1, 1));
	CHECK(nxd_seg_fits(0, NXD_SEG_MAX_RECS - 1, 1, 1));
	CHECK(!nxd_seg_fits(0, NXD_SEG_MAX_RECS, 1, 1));
	CHECK(!nxd_seg_fits(0, NXD_SEG_MAX_RECS, 0, 1));
	CHECK(nxd_seg_fits(0, NXD_SEG_MAX_RECS, 0, 0));
	CHECK(!nxd_seg_fits(NXD_SEG_MAX_DATA, NXD_SEG_MAX_DATA, 1, 1));
	CHECK(nxd_seg_fits(NXD_SEG_MAX_DATA - 1, 200, 1, 1));
	CHECK(!nxd_seg_fits(10, 250, 0, 3));
	/* Whatever fits, the header really takes. */
	for (d = 0; d <= NXD_SEG_MAX_DATA; d += 7) {
		for (r = d; r <= NXD_SEG_MAX_RECS; r += 13) {
			u8 blk[BS];
			u32 i, inv = r - d;
			bool ok = true;

			nxd_seg_init(blk, uuid_a, 1, 1, 0);
			for (i = 0; i < d; i++)
				ok &= nxd_seg_add_data(blk, i, 0xff, 0) >= 0;
			for (i = 0; i < inv; i++)
				ok &= !nxd_seg_add_inval(blk, 1000 + i, 1);
			CHECK(ok);
			if (nxd_seg_fits(d, r, 1, 1))
				CHECK(nxd_seg_add_data(blk, 5000, 0xff, 0) >= 0);
			else
				CHECK_EQ(nxd_seg_add_data(blk, 5000, 0xff, 0), -ENOSPC);
		}
	}
}

NT_MAIN("test_seg", test_seg, test_seg_fits)
