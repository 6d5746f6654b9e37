// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for nxd_core.c: crc32c shim, superblock / label / segment
 * codecs (round trip, every range check, every single-bit and byte
 * flip), ring accounting against a brute-force model of occupied
 * blocks, routing, histogram buckets, size and mode parsers.
 *
 * Usage: test_core [seed]   (or NXD_SEED=...; NXD_RING_OPS=... ring ops)
 */
#include "nxd_test.h"

#define BS NXD_BLOCK_SIZE

static u64 seed;

/* ---- reference crc32c: bitwise, independent of the shim's tables ---- */

static u32 ref_crc32c(u32 crc, const void *p, size_t len)
{
	const u8 *b = p;
	int k;

	while (len--) {
		crc ^= *b++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78U & (0U - (crc & 1)));
	}
	return crc;
}

/* Recompute the crc field (offset 8) of a block the reference way. */
static void fix_crc(void *blk)
{
	u8 tmp[BS];
	u32 crc;

	memcpy(tmp, blk, BS);
	memset(tmp + 8, 0, 4);
	crc = htole32(ref_crc32c(~0U, tmp, BS));
	memcpy((u8 *)blk + 8, &crc, 4);
}

static bool crc_field_ok(const void *blk)
{
	u8 tmp[BS];
	u32 crc;

	memcpy(tmp, blk, BS);
	fix_crc(tmp);
	memcpy(&crc, tmp + 8, 4);
	return !memcmp((const u8 *)blk + 8, &crc, 4);
}

static void test_crc(void)
{
	static u8 buf[BS + 64];
	size_t i;
	int n;

	CHECK_EQ(nxd_crc32c(~0U, "123456789", 9) ^ ~0U, 0xE3069283U);
	CHECK_EQ(ref_crc32c(~0U, "123456789", 9) ^ ~0U, 0xE3069283U);
	CHECK_EQ(nxd_crc32c(0, "", 0), 0);
	CHECK_EQ(nxd_crc32c(0x12345678, "", 0), 0x12345678);
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (u8)nt_rand();
	for (n = 0; n < 2000; n++) {
		size_t off = nt_below(16), len = nt_below(BS + 40);
		size_t cut = len ? nt_below(len) : 0;
		u32 s = (u32)nt_rand();

		CHECK_EQ(nxd_crc32c(s, buf + off, len),
			 ref_crc32c(s, buf + off, len));
		/* raw semantics: chaining equals one pass */
		CHECK_EQ(nxd_crc32c(nxd_crc32c(s, buf + off, cut),
				    buf + off + cut, len - cut),
			 nxd_crc32c(s, buf + off, len));
	}
	/* nxd_block_crc is crc32c(~0) over the block, no inversion */
	CHECK_EQ(nxd_block_crc(buf), ref_crc32c(~0U, buf, BS));
}

/* ---- superblock ---- */

static const u8 uuid_a[16] = "0123456789abcdef";
static const u8 uuid_b[16] = "fedcba9876543210";

static void base_sb(struct nxd_sb_info *sb, u64 *ssd_blocks)
{
	memset(sb, 0, sizeof(*sb));
	sb->sb_seq = 42;
	memcpy(sb->vol_uuid, uuid_a, 16);
	memcpy(sb->hdd_uuid, uuid_b, 16);
	sb->hdd_sectors = (1ULL << 30) + 4096 + 7;
	sb->hdd_label_sector = nxd_hdd_data_sectors(sb->hdd_sectors);
	sb->data_sectors = 1ULL << 30;
	sb->ring_start = NXD_RING_START;
	sb->ring_blocks = 1024;
	sb->tail_pos = 10;
	sb->tail_seq = 100;
	sb->gen = 3;
	sb->gen_start_seq = 150;
	sb->head_pos = 20;
	sb->head_seq = 120;
	sb->flags = NXD_SB_CLEAN;
	*ssd_blocks = NXD_RING_START + 1024 + 5;
}

static int sb_rt(const struct nxd_sb_info *in, u64 ssd_blocks)
{
	struct nxd_sb_info out;
	static u8 blk[BS];

	memset(blk, 0xA5, sizeof(blk));
	nxd_sb_encode(in, blk);
	return nxd_sb_decode(blk, ssd_blocks, &out);
}

static void test_sb(void)
{
	static u8 blk[BS], blk2[BS];
	struct nxd_sb_info sb, out, t, ref;
	struct nxd_sb *d = (struct nxd_sb *)blk;
	u64 ssd;
	size_t i;
	int b, bad;

	base_sb(&sb, &ssd);
	memset(blk, 0xA5, sizeof(blk));
	nxd_sb_encode(&sb, blk);
	CHECK(!memcmp(blk, "\0NXD_SB1", 8));
	CHECK(crc_field_ok(blk));
	CHECK_EQ(le32toh(d->version), NXD_FORMAT_VERSION);
	CHECK_EQ(le32toh(d->block_size), 4096);
	CHECK_EQ(le32toh(d->seg_max_blocks), 128);
	CHECK_EQ(le64toh(d->ring_start), 8);
	CHECK_EQ(d->reserved0, 0);
	bad = 0;
	for (i = 0; i < sizeof(d->reserved); i++)
		bad |= d->reserved[i];
	CHECK_EQ(bad, 0);
	memset(&out, 0xEE, sizeof(out));
	CHECK_EQ(nxd_sb_decode(blk, ssd, &out), 0);
	CHECK(!memcmp(&out, &sb, sizeof(sb)));

	/* encode ignores a bogus ring_start in the info: it is a constant */
	t = sb;
	t.ring_start = 77;
	CHECK_EQ(sb_rt(&t, ssd), 0);

	/* blank / foreign */
	memset(blk2, 0, BS);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), NXD_ENOTNXD);
	memset(blk2, 0xff, BS);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), NXD_ENOTNXD);
	memcpy(blk2, blk, BS);
	blk2[1] ^= 1;
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), NXD_ENOTNXD);

	/* crc */
	memcpy(blk2, blk, BS);
	blk2[200] ^= 0x10;
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EBADMSG);
	/* reserved bytes are covered by the crc but otherwise ignored */
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);

	/* version */
	memcpy(blk2, blk, BS);
	((struct nxd_sb *)blk2)->version = htole32(2);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EPROTONOSUPPORT);
	((struct nxd_sb *)blk2)->version = htole32(0);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EPROTONOSUPPORT);

	/* constants */
	memcpy(blk2, blk, BS);
	((struct nxd_sb *)blk2)->block_size = htole32(512);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EINVAL);
	memcpy(blk2, blk, BS);
	((struct nxd_sb *)blk2)->seg_max_blocks = htole32(64);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EINVAL);
	memcpy(blk2, blk, BS);
	((struct nxd_sb *)blk2)->ring_start = htole64(9);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EINVAL);

	/* ring size */
	t = sb;
	t.ring_blocks = NXD_MIN_RING_BLOCKS - 1;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.ring_blocks = NXD_MIN_RING_BLOCKS;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t = sb;
	t.ring_blocks = ssd - NXD_RING_START;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t.ring_blocks++;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	CHECK_EQ(sb_rt(&sb, 3), -EINVAL);
	CHECK_EQ(sb_rt(&sb, 0), -EINVAL);
	t = sb;
	t.ring_blocks = ~0ULL;
	CHECK_EQ(sb_rt(&t, ~0ULL), -EINVAL);
	t.ring_blocks = ~0ULL - NXD_RING_START;
	CHECK_EQ(sb_rt(&t, ~0ULL), 0);

	/* tail / head */
	t = sb;
	t.tail_pos = t.ring_blocks;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.tail_pos = t.ring_blocks - 1;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t = sb;
	t.head_pos = t.ring_blocks;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.flags = 0;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t.head_pos = ~0ULL;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t = sb;
	t.head_pos = t.ring_blocks - 1;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t = sb;
	t.head_seq = t.tail_seq - 1;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.flags = 0;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t = sb;
	t.head_seq = t.tail_seq;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t = sb;
	t.gen_start_seq = t.tail_seq - 50;
	CHECK_EQ(sb_rt(&t, ssd), 0);

	/* flags */
	for (b = 1; b < 32; b++) {
		t = sb;
		t.flags |= 1U << b;
		CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	}

	/* data_sectors / label */
	t = sb;
	t.data_sectors = 0;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t = sb;
	t.data_sectors = t.hdd_label_sector;
	CHECK_EQ(sb_rt(&t, ssd), 0);
	t.data_sectors = t.hdd_label_sector + 1;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.hdd_label_sector = 0;
	t.data_sectors = 1;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);

	/* every single-bit and whole-byte flip is rejected or harmless */
	nxd_sb_encode(&sb, blk);
	CHECK_EQ(nxd_sb_decode(blk, ssd, &ref), 0);
	bad = 0;
	for (i = 0; i < BS; i++) {
		for (b = 0; b <= 8; b++) {
			u8 x = b == 8 ? 0xff : (u8)(1U << b);
			int r;

			blk[i] ^= x;
			r = nxd_sb_decode(blk, ssd, &out);
			if (!r && memcmp(&out, &ref, sizeof(ref)))
				bad++;
			if (!r)
				bad++;	/* crc32c catches all of these */
			blk[i] ^= x;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(nxd_sb_decode(blk, ssd, &out), 0);
}

/* The stored name and tunables (carved from reserved bytes). */
static void test_sb_meta(void)
{
	static u8 blk[BS], blk2[BS];
	struct nxd_sb_info sb, out;
	struct nxd_sb *d = (struct nxd_sb *)blk;
	struct nxd_sb *d2 = (struct nxd_sb *)blk2;
	u64 ssd, wt;
	size_t i;
	int bad;

	/* layout: every earlier offset kept, the block still 4096 bytes */
	CHECK_EQ(offsetof(struct nxd_sb, reserved0), 156);
	CHECK_EQ(offsetof(struct nxd_sb, name), 160);
	CHECK_EQ(offsetof(struct nxd_sb, tun_flags), 288);
	CHECK_EQ(offsetof(struct nxd_sb, mode), 292);
	CHECK_EQ(offsetof(struct nxd_sb, write_threshold), 296);
	CHECK_EQ(offsetof(struct nxd_sb, destage_rate), 304);
	CHECK_EQ(offsetof(struct nxd_sb, low_wm), 308);
	CHECK_EQ(offsetof(struct nxd_sb, high_wm), 309);
	CHECK_EQ(offsetof(struct nxd_sb, ssd_discard), 310);
	CHECK_EQ(offsetof(struct nxd_sb, drain_on_suspend), 311);
	CHECK_EQ(offsetof(struct nxd_sb, reserved), 312);
	CHECK_EQ(sizeof(struct nxd_sb), BS);

	/* nothing stored: all of it zero on disk, "" and no tunables */
	base_sb(&sb, &ssd);
	memset(blk, 0xA5, sizeof(blk));
	nxd_sb_encode(&sb, blk);
	bad = 0;
	for (i = 160; i < BS; i++)
		bad |= blk[i];
	CHECK_EQ(bad, 0);
	memset(&out, 0xEE, sizeof(out));
	CHECK_EQ(nxd_sb_decode(blk, ssd, &out), 0);
	CHECK_EQ(out.name[0], 0);
	CHECK(!out.tun_valid);

	/* stored: the bytes where the format says, and back */
	strcpy(sb.name, "ost0-nxd");
	sb.tun_valid = true;
	sb.write_threshold = 12288;
	sb.mode = NXD_MODE_LOG_ALL;
	sb.low_wm = 10;
	sb.high_wm = 60;
	sb.destage_rate = 300;
	sb.ssd_discard = 0;
	sb.drain_on_suspend = 1;
	memset(blk, 0xA5, sizeof(blk));
	nxd_sb_encode(&sb, blk);
	CHECK(!memcmp(blk + 160, "ost0-nxd", 9));
	bad = 0;
	for (i = 160 + 8; i < 288; i++)
		bad |= blk[i];
	for (i = 312; i < BS; i++)
		bad |= blk[i];
	CHECK_EQ(bad, 0);
	CHECK_EQ(le32toh(d->tun_flags), NXD_SB_TUN_VALID);
	CHECK_EQ(le32toh(d->mode), 2);
	memcpy(&wt, blk + 296, 8);
	CHECK_EQ(le64toh(wt), 12288);
	CHECK_EQ(le32toh(d->destage_rate), 300);
	CHECK_EQ(blk[308], 10);
	CHECK_EQ(blk[309], 60);
	CHECK_EQ(blk[310], 0);
	CHECK_EQ(blk[311], 1);
	memset(&out, 0xEE, sizeof(out));
	CHECK_EQ(nxd_sb_decode(blk, ssd, &out), 0);
	CHECK(!memcmp(&out, &sb, sizeof(sb)));

	/* a superblock of the old code (zeros there) reads as nothing stored */
	memcpy(blk2, blk, BS);
	memset(blk2 + 160, 0, 312 - 160);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK_EQ(out.name[0], 0);
	CHECK(!out.tun_valid);
	CHECK_EQ(out.write_threshold, 0);
	CHECK_EQ(out.tail_seq, sb.tail_seq);

	/* values without the VALID flag: ignored */
	memcpy(blk2, blk, BS);
	d2->tun_flags = 0;
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK(!out.tun_valid);
	CHECK_EQ(out.low_wm, 0);
	CHECK(!strcmp(out.name, "ost0-nxd"));

	/* out of range: the superblock is fine, the tunables ignored */
	for (i = 0; i < 7; i++) {
		memcpy(blk2, blk, BS);
		switch (i) {
		case 0:
			d2->write_threshold = htole64((1ULL << 30) + 1);
			break;
		case 1:
			d2->mode = htole32(NXD_MODE_MAX);
			break;
		case 2:
			d2->low_wm = 61;	/* above high */
			break;
		case 3:
			d2->high_wm = 101;
			break;
		case 4:
			d2->destage_rate = htole32(1000001);
			break;
		case 5:
			d2->ssd_discard = 2;
			break;
		case 6:
			d2->drain_on_suspend = 0xff;
			break;
		}
		fix_crc(blk2);
		memset(&out, 0xEE, sizeof(out));
		CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
		CHECK(!out.tun_valid);
		CHECK_EQ(out.write_threshold, 0);
		CHECK(!strcmp(out.name, "ost0-nxd"));
	}
	/* the limits themselves are taken */
	memcpy(blk2, blk, BS);
	d2->write_threshold = htole64(1ULL << 30);
	d2->low_wm = 100;
	d2->high_wm = 100;
	d2->destage_rate = htole32(1000000);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK(out.tun_valid);
	CHECK_EQ(out.write_threshold, 1U << 30);
	CHECK_EQ(out.destage_rate, 1000000);

	/* a name without NUL is cut at 127 bytes; bytes after a NUL dropped */
	memcpy(blk2, blk, BS);
	memset(d2->name, 'x', sizeof(d2->name));
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK_EQ(strlen(out.name), 127);
	memcpy(blk2, blk, BS);
	memcpy(d2->name, "ab\0cd", 5);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK(!strcmp(out.name, "ab"));
	CHECK_EQ(out.name[3], 0);
	/* and encode writes at most 127 bytes of it */
	memset(sb.name, 'y', sizeof(sb.name));
	nxd_sb_encode(&sb, blk2);
	CHECK_EQ(blk2[160 + 126], 'y');
	CHECK_EQ(blk2[160 + 127], 0);
}

static void test_sb_pick(void)
{
	struct nxd_sb_info s[2];
	int res[2];

	memset(s, 0, sizeof(s));
	res[0] = 0;
	res[1] = 0;
	s[0].sb_seq = 5;
	s[1].sb_seq = 6;
	CHECK_EQ(nxd_sb_pick(res, s), 1);
	s[0].sb_seq = 7;
	CHECK_EQ(nxd_sb_pick(res, s), 0);
	s[1].sb_seq = 7;
	CHECK_EQ(nxd_sb_pick(res, s), 0);
	res[1] = -EBADMSG;
	s[1].sb_seq = 100;
	CHECK_EQ(nxd_sb_pick(res, s), 0);
	res[0] = NXD_ENOTNXD;
	res[1] = 0;
	CHECK_EQ(nxd_sb_pick(res, s), 1);
	res[0] = -EINVAL;
	CHECK_EQ(nxd_sb_pick(res, s), 1);
	res[1] = NXD_ENOTNXD;
	res[0] = NXD_ENOTNXD;
	CHECK_EQ(nxd_sb_pick(res, s), NXD_SB_NONE);
	CHECK(NXD_SB_NONE < 0);
	res[0] = -EBADMSG;
	CHECK_EQ(nxd_sb_pick(res, s), -EBADMSG);
	res[0] = NXD_ENOTNXD;
	res[1] = -EBADMSG;
	CHECK_EQ(nxd_sb_pick(res, s), -EBADMSG);
	res[0] = -EINVAL;
	res[1] = -EBADMSG;
	CHECK_EQ(nxd_sb_pick(res, s), -EINVAL);
	res[0] = -EPROTONOSUPPORT;
	res[1] = NXD_ENOTNXD;
	CHECK_EQ(nxd_sb_pick(res, s), -EPROTONOSUPPORT);
}

/* ---- label ---- */

static void test_label(void)
{
	static u8 blk[BS], blk2[BS];
	struct nxd_label_info l, out;
	struct nxd_hdd_label *d = (struct nxd_hdd_label *)blk;
	size_t i;
	int b, bad;

	memset(&l, 0, sizeof(l));
	memcpy(l.vol_uuid, uuid_a, 16);
	memcpy(l.hdd_uuid, uuid_b, 16);
	l.hdd_sectors = 123456789;
	memset(blk, 0x5A, BS);
	nxd_label_encode(&l, blk);
	CHECK_EQ(le64toh(d->magic), NXD_LABEL_MAGIC);
	CHECK_EQ(le32toh(d->version), NXD_FORMAT_VERSION);
	CHECK(crc_field_ok(blk));
	bad = 0;
	for (i = 0; i < sizeof(d->reserved); i++)
		bad |= d->reserved[i];
	CHECK_EQ(bad, 0);
	memset(&out, 0, sizeof(out));
	CHECK_EQ(nxd_label_decode(blk, &out), 0);
	CHECK(!memcmp(&out, &l, sizeof(l)));
	CHECK_EQ(out.flags, 0);

	/* The abandoned-log mark round-trips; unknown flags are refused. */
	l.flags = NXD_LABEL_LOG_ABANDONED;
	l.abandoned_gen = 77;
	nxd_label_encode(&l, blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), 0);
	CHECK_EQ(out.flags, NXD_LABEL_LOG_ABANDONED);
	CHECK_EQ(out.abandoned_gen, 77);
	l.flags = 4;
	nxd_label_encode(&l, blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), -EPROTONOSUPPORT);
	l.flags = 0;
	l.abandoned_gen = 0;

	/* The frozen-log window round-trips; a tail past its end is refused. */
	l.flags = NXD_LABEL_LOG_FROZEN;
	l.frozen_end_seq = 900;
	l.frozen_tail_pos = 4321;
	l.frozen_tail_seq = 850;
	nxd_label_encode(&l, blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), 0);
	CHECK(!memcmp(&out, &l, sizeof(l)));
	l.frozen_tail_seq = 901;
	nxd_label_encode(&l, blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), -EINVAL);
	l.frozen_tail_seq = 0;
	nxd_label_encode(&l, blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), -EINVAL);
	l.frozen_tail_seq = 900;	/* drained to the end: an empty window */
	nxd_label_encode(&l, blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), 0);
	l.flags = 0;
	l.frozen_end_seq = l.frozen_tail_pos = l.frozen_tail_seq = 0;

	memset(blk2, 0, BS);
	CHECK_EQ(nxd_label_decode(blk2, &out), NXD_ENOTNXD);
	/* a superblock is not a label */
	{
		struct nxd_sb_info sb;
		u64 ssd;

		base_sb(&sb, &ssd);
		nxd_sb_encode(&sb, blk2);
		CHECK_EQ(nxd_label_decode(blk2, &out), NXD_ENOTNXD);
		CHECK_EQ(nxd_sb_decode(blk, ssd, &sb), NXD_ENOTNXD);
	}
	memcpy(blk2, blk, BS);
	blk2[4000] ^= 1;
	CHECK_EQ(nxd_label_decode(blk2, &out), -EBADMSG);
	memcpy(blk2, blk, BS);
	((struct nxd_hdd_label *)blk2)->version = htole32(9);
	fix_crc(blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), -EPROTONOSUPPORT);

	bad = 0;
	for (i = 0; i < BS; i++) {
		for (b = 0; b <= 8; b++) {
			u8 x = b == 8 ? 0xff : (u8)(1U << b);

			blk[i] ^= x;
			if (!nxd_label_decode(blk, &out))
				bad++;
			blk[i] ^= x;
		}
	}
	CHECK_EQ(bad, 0);

	CHECK_EQ(nxd_hdd_data_sectors(0), 0);
	CHECK_EQ(nxd_hdd_data_sectors(2047), 0);
	CHECK_EQ(nxd_hdd_data_sectors(2048), 0);
	CHECK_EQ(nxd_hdd_data_sectors(4095), 0);
	CHECK_EQ(nxd_hdd_data_sectors(4096), 2048);
	CHECK_EQ(nxd_hdd_data_sectors(4097), 2048);
	CHECK_EQ(nxd_hdd_data_sectors(6143), 2048);
	CHECK_EQ(nxd_hdd_data_sectors(6144), 4096);
	CHECK(nxd_hdd_data_sectors(~0ULL) == (~0ULL & ~2047ULL) - 2048);
	CHECK(nxd_hdd_data_sectors(1ULL << 40) == (1ULL << 40) - 2048);
}

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

static void test_replay_window(void)
{
	struct nxd_sb_info sb;
	struct nxd_label_info l;
	u64 pos, seq, end, ssd;

	base_sb(&sb, &ssd);
	sb.tail_pos = 100;
	sb.tail_seq = 40;
	memset(&l, 0, sizeof(l));
	nxd_replay_window(&sb, &l, &pos, &seq, &end);
	CHECK_EQ(pos, 100);
	CHECK_EQ(seq, 40);
	CHECK_EQ(end, ~0ULL);
	/* Frozen: bounded at the failed segment; the SSD tail still rules. */
	l.flags = NXD_LABEL_LOG_FROZEN;
	l.frozen_end_seq = 60;
	l.frozen_tail_pos = 50;
	l.frozen_tail_seq = 30;
	nxd_replay_window(&sb, &l, &pos, &seq, &end);
	CHECK_EQ(pos, 100);
	CHECK_EQ(seq, 40);
	CHECK_EQ(end, 60);
	/* Destaged further while frozen: the label's tail rules. */
	l.frozen_tail_pos = 300;
	l.frozen_tail_seq = 55;
	nxd_replay_window(&sb, &l, &pos, &seq, &end);
	CHECK_EQ(pos, 300);
	CHECK_EQ(seq, 55);
	CHECK_EQ(end, 60);
}

static void test_ring_fixed(void)
{
	struct nxd_ring r;
	struct nxd_segd *s;
	u64 pos, seq;
	int i;

	CHECK_EQ(nxd_ring_init(&r, NXD_SEG_MAX_BLOCKS - 1, 0, 0), -EINVAL);
	CHECK_EQ(nxd_ring_init(&r, 1000, 1001, 0), -EINVAL);
	CHECK_EQ(nxd_ring_init(&r, (1ULL << 32) + 1, 0, 0), -EINVAL);

	CHECK_EQ(nxd_ring_init(&r, 512, 0, 10), 0);
	CHECK_EQ(r.cap, 257);
	CHECK_EQ(nxd_ring_used(&r), 0);
	CHECK(!nxd_ring_oldest(&r));
	CHECK(!nxd_ring_find(&r, 0, &seq));
	nxd_ring_tail(&r, &pos, &seq);
	CHECK(pos == 0 && seq == 10);
	CHECK_EQ(nxd_ring_reserve(&r, NXD_SEG_MAX_DATA + 1, &pos), -EINVAL);
	/* fill exactly with four maximal segments */
	for (i = 0; i < 4; i++) {
		CHECK_EQ(nxd_ring_reserve(&r, 127, &pos), 0);
		CHECK_EQ(pos, 128 * i);
		nxd_ring_push(&r, pos, 127, 100 + i);
	}
	CHECK_EQ(r.head, 512);
	CHECK_EQ(nxd_ring_used(&r), 512);
	CHECK_EQ(nxd_ring_reserve(&r, 0, &pos), -ENOSPC);
	s = nxd_ring_find(&r, 300, &seq);
	CHECK(s && s->pos == 256 && seq == 12 && s->live == 102);
	s = nxd_ring_find(&r, 511, &seq);
	CHECK(s && s->pos == 384 && seq == 13);
	CHECK(!nxd_ring_find(&r, 512, &seq));
	CHECK(nxd_ring_at(&r, 3) && !nxd_ring_at(&r, 4));
	nxd_ring_tail(&r, &pos, &seq);
	CHECK(pos == 0 && seq == 10);
	nxd_ring_pop(&r);
	nxd_ring_tail(&r, &pos, &seq);
	CHECK(pos == 128 && seq == 11);
	CHECK(!nxd_ring_find(&r, 5, &seq));
	CHECK_EQ(nxd_ring_used(&r), 384);
	CHECK_EQ(nxd_ring_reserve(&r, 127, &pos), 0);
	CHECK_EQ(pos, 0);
	nxd_ring_push(&r, pos, 127, 0);
	/* wrapped and exactly full: head == tail */
	CHECK_EQ(r.head, 128);
	CHECK_EQ(nxd_ring_used(&r), 512);
	CHECK_EQ(nxd_ring_reserve(&r, 0, &pos), -ENOSPC);
	s = nxd_ring_find(&r, 5, &seq);
	CHECK(s && s->pos == 0 && seq == 14);
	s = nxd_ring_find(&r, 128, &seq);
	CHECK(s && s->pos == 128 && seq == 11);
	nxd_ring_pop(&r);
	CHECK_EQ(nxd_ring_used(&r), 384);
	CHECK_EQ(nxd_ring_reserve(&r, 127, &pos), 0);
	CHECK_EQ(pos, 128);
	CHECK_EQ(nxd_ring_reserve(&r, 0, &pos), 0);
	nxd_ring_pop(&r);
	nxd_ring_pop(&r);
	nxd_ring_pop(&r);
	CHECK_EQ(r.count, 0);
	CHECK_EQ(nxd_ring_used(&r), 0);
	nxd_ring_pop(&r);	/* no-op when empty */
	CHECK_EQ(r.count, 0);
	nxd_ring_tail(&r, &pos, &seq);
	CHECK(pos == 128 && seq == 15);
	CHECK_EQ(r.first_seq, r.next_seq);
	nxd_ring_free(&r);
	CHECK(!r.fifo);

	/* gap at the ring end: wrap early, the gap counts as used */
	CHECK_EQ(nxd_ring_init(&r, 600, 400, 0), 0);
	CHECK_EQ(nxd_ring_reserve(&r, 99, &pos), 0);
	CHECK_EQ(pos, 400);
	nxd_ring_push(&r, pos, 99, 0);		/* [400, 500) */
	CHECK_EQ(nxd_ring_reserve(&r, 9, &pos), 0);
	CHECK_EQ(pos, 0);			/* 100 < 128 left */
	nxd_ring_push(&r, pos, 9, 0);		/* [0, 10) */
	CHECK_EQ(nxd_ring_used(&r), 210);
	CHECK(!nxd_ring_find(&r, 550, &seq));
	CHECK(!nxd_ring_find(&r, 10, &seq));
	s = nxd_ring_find(&r, 9, &seq);
	CHECK(s && s->pos == 0 && seq == 1);
	s = nxd_ring_find(&r, 499, &seq);
	CHECK(s && s->pos == 400 && seq == 0);
	CHECK(!nxd_ring_find(&r, 399, NULL));
	CHECK_EQ(nxd_ring_reserve(&r, 127, &pos), 0);
	CHECK_EQ(pos, 10);
	nxd_ring_pop(&r);
	CHECK_EQ(nxd_ring_used(&r), 10);
	nxd_ring_tail(&r, &pos, &seq);
	CHECK(pos == 0 && seq == 1);
	nxd_ring_free(&r);

	/* non-wrapped: the wrap to 0 must fit before the oldest */
	CHECK_EQ(nxd_ring_init(&r, 512, 100, 0), 0);
	nxd_ring_push(&r, 100, 127, 0);		/* [100, 228) */
	nxd_ring_push(&r, 228, 127, 0);		/* [228, 356) */
	CHECK_EQ(nxd_ring_reserve(&r, 10, &pos), 0);
	CHECK_EQ(pos, 356);
	nxd_ring_push(&r, 356, 30, 0);		/* [356, 387) head 387 */
	CHECK_EQ(nxd_ring_reserve(&r, 99, &pos), 0);
	CHECK_EQ(pos, 0);
	CHECK_EQ(nxd_ring_reserve(&r, 100, &pos), -ENOSPC);
	nxd_ring_free(&r);

	/* capacity of the fifo: ring_blocks / 2 + 1 header-only segments */
	CHECK_EQ(nxd_ring_init(&r, 512, 0, 0), 0);
	for (i = 0; i < 257; i++) {
		CHECK_EQ(nxd_ring_reserve(&r, 0, &pos), 0);
		nxd_ring_push(&r, pos, 0, 0);
	}
	CHECK_EQ(nxd_ring_reserve(&r, 0, &pos), -ENOSPC);
	nxd_ring_pop(&r);
	CHECK_EQ(nxd_ring_reserve(&r, 0, &pos), 0);
	nxd_ring_free(&r);
}

/* ---- ring: random ops against a brute-force model ---- */

#define NOSEG 0xfeedULL	/* never a seq in these tests */

struct mseg {
	u64 pos, seq;
	u32 nr, live;
};

static void ring_check_all(struct nxd_ring *r, const struct mseg *q,
			   u32 qh, u32 qn, const u64 *own, u64 rb,
			   u64 head, u64 next_seq, bool full_scan)
{
	u64 used = 0, pos, seq, slot, k;
	struct nxd_segd *s;
	u32 i;
	int bad = 0;

	CHECK_EQ(r->count, qn);
	CHECK_EQ(r->head, head);
	CHECK_EQ(r->next_seq, next_seq);
	for (i = 0; i < qn; i++) {
		const struct mseg *m = &q[qh + i];

		used += 1 + m->nr;
		if (i + 1 < qn && q[qh + i + 1].pos < m->pos)
			used += rb - (m->pos + 1 + m->nr);	/* end gap */
		s = nxd_ring_at(r, i);
		if (!s || s->pos != m->pos || s->nr_data != m->nr ||
		    s->live != m->live)
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK(!nxd_ring_at(r, qn));
	CHECK_EQ(nxd_ring_used(r), used);
	nxd_ring_tail(r, &pos, &seq);
	if (qn) {
		CHECK(pos == q[qh].pos && seq == q[qh].seq);
		CHECK(nxd_ring_oldest(r) == nxd_ring_at(r, 0));
	} else {
		CHECK(pos == nxd_next_seg_pos(rb, head) && seq == next_seq);
		CHECK(!nxd_ring_oldest(r));
	}

	for (k = 0; k < (full_scan ? rb + 2 : 24); k++) {
		slot = full_scan ? k : nt_below(rb + 1);
		seq = 0xdead;
		s = nxd_ring_find(r, slot, &seq);
		if (slot >= rb || own[slot] == NOSEG) {
			if (s)
				bad++;
		} else {
			if (!s || seq != own[slot] ||
			    slot < s->pos || slot > s->pos + s->nr_data)
				bad++;
		}
	}
	CHECK_EQ(bad, 0);
}

/* Reset in place: empty, next segment where asked, capacity kept. */
/*
 * A direct segment reserves a whole segment when it opens, is trimmed to
 * what it got when it closes, and is forgotten if it is never committed:
 * the ring must look as if only what was kept had been pushed.
 */
static void test_ring_trim_unpush(void)
{
	struct nxd_ring r, m;
	struct nxd_segd *s;
	u64 pos, mpos, seq;
	int i;

	CHECK_EQ(nxd_ring_init(&r, 1024, 0, 5), 0);
	CHECK_EQ(nxd_ring_init(&m, 1024, 0, 5), 0);
	for (i = 0; i < 40; i++) {
		u32 n = 1 + (i * 37) % NXD_SEG_MAX_DATA;

		CHECK_EQ(nxd_ring_reserve(&r, NXD_SEG_MAX_DATA, &pos) == 0,
			 nxd_ring_reserve(&m, NXD_SEG_MAX_DATA, &mpos) == 0);
		if (nxd_ring_reserve(&r, NXD_SEG_MAX_DATA, &pos)) {
			nxd_ring_pop(&r);
			nxd_ring_pop(&m);
			continue;
		}
		nxd_ring_push(&r, pos, NXD_SEG_MAX_DATA, 0);
		CHECK(nxd_ring_used(&r) >= nxd_ring_used(&m) + NXD_SEG_MAX_BLOCKS);
		if (i % 3 == 2) {
			/* never committed: as if never pushed */
			nxd_ring_unpush(&r);
		} else {
			nxd_ring_trim_newest(&r, n);
			CHECK_EQ(nxd_ring_reserve(&m, n, &mpos), 0);
			CHECK_EQ(mpos, pos);
			nxd_ring_push(&m, mpos, n, n);
			/* a bigger "trim" changes nothing */
			nxd_ring_trim_newest(&r, n + 1);
		}
		CHECK_EQ(r.count, m.count);
		CHECK_EQ(r.head, m.head);
		CHECK_EQ(r.next_seq, m.next_seq);
		CHECK_EQ(r.first_seq, m.first_seq);
		CHECK_EQ(nxd_ring_used(&r), nxd_ring_used(&m));
		s = r.count ? nxd_ring_at(&r, r.count - 1) : NULL;
		if (s) {
			CHECK(nxd_ring_find(&r, s->pos + s->nr_data, &seq) == s);
			CHECK(!s->nr_data || !nxd_ring_find(&r, s->pos + s->nr_data + 1, &seq) ||
			      s->pos + s->nr_data + 1 >= 1024);
		}
	}
	/* unpushing the only segment leaves an empty ring at the same place */
	while (r.count > 1)
		nxd_ring_pop(&r);
	s = nxd_ring_at(&r, 0);
	pos = s->pos;
	seq = r.first_seq;
	nxd_ring_unpush(&r);
	CHECK_EQ(r.count, 0);
	CHECK_EQ(r.next_seq, seq);
	CHECK_EQ(r.first_seq, seq);
	CHECK_EQ(nxd_ring_reserve(&r, 3, &mpos), 0);
	CHECK_EQ(mpos, pos);
	nxd_ring_unpush(&r);	/* empty: nothing happens */
	CHECK_EQ(r.count, 0);
	nxd_ring_free(&r);
	nxd_ring_free(&m);
}

static void test_ring_reset(void)
{
	struct nxd_ring r;
	u64 pos;
	u32 cap;

	CHECK_EQ(nxd_ring_init(&r, 1024, 0, 1), 0);
	cap = r.cap;
	CHECK_EQ(nxd_ring_reserve(&r, 10, &pos), 0);
	nxd_ring_push(&r, pos, 10, 10);
	CHECK_EQ(nxd_ring_reserve(&r, 10, &pos), 0);
	nxd_ring_push(&r, pos, 10, 3);
	CHECK_EQ(r.count, 2);
	nxd_ring_reset(&r, 500, 77);
	CHECK_EQ(r.count, 0);
	CHECK_EQ(r.cap, cap);
	CHECK_EQ(r.next_seq, 77);
	CHECK_EQ(r.first_seq, 77);
	CHECK_EQ(nxd_ring_used(&r), 0);
	CHECK_EQ(nxd_ring_reserve(&r, 4, &pos), 0);
	CHECK_EQ(pos, 500);
	nxd_ring_free(&r);
}

static void test_ring_random(u64 nops)
{
	static const u64 sizes[] = { 128, 129, 255, 256, 300, 512, 513, 640,
				     777, 1000, 1031, 2048, 4099 };
	u64 done = 0;
	int round = 0;

	while (done < nops) {
		int small = round % 4;	/* segment size flavour */
		u64 rb = small == 2 ? 640 + nt_below(1500) :
			 sizes[nt_below(ARRAY_SIZE(sizes))];
		u64 head = nt_below(rb + 1);
		u64 next_seq = nt_below(4) ? 0x10000 + nt_below(1000) :
			       ~0ULL - 5000;
		u64 cap = rb / 2 + 1, n, steps = 2000 + nt_below(20000);
		u32 qh = 0, qn = 0, qsz = (u32)(steps + 1);
		struct mseg *q = calloc(qsz, sizeof(*q));
		u64 *own = malloc(rb * sizeof(*own));
		struct nxd_ring r;
		u64 i;

		CHECK(q && own);
		for (i = 0; i < rb; i++)
			own[i] = NOSEG;
		CHECK_EQ(nxd_ring_init(&r, rb, head, next_seq), 0);
		CHECK_EQ(r.cap, cap);
		for (n = 0; n < steps; n++) {
			u32 nr;
			u64 p, pos = ~0ULL;
			bool want = true;
			int ret;

			switch (small) {
			case 0:
				nr = (u32)nt_below(4);
				break;
			case 1:
				nr = (u32)nt_below(128);
				break;
			case 2:
				/* header-only: runs into the fifo capacity */
				nr = nt_below(8) ? 0 : 1;
				break;
			default:
				nr = nt_below(4) ? 127 : (u32)nt_below(128);
				break;
			}
			p = nxd_next_seg_pos(rb, head);
			if (qn >= cap)
				want = false;
			for (i = p; want && i < p + 1 + nr; i++)
				if (i >= rb || own[i] != NOSEG)
					want = false;
			ret = nxd_ring_reserve(&r, nr, &pos);
			CHECK_EQ(ret, want ? 0 : -ENOSPC);
			if (!ret)
				CHECK_EQ(pos, p);
			if (!ret && nt_below(8)) {
				u32 live = (u32)nt_below(nr + 1);

				for (i = p; i < p + 1 + nr; i++)
					own[i] = next_seq;
				q[qh + qn].pos = p;
				q[qh + qn].seq = next_seq;
				q[qh + qn].nr = nr;
				q[qh + qn].live = live;
				qn++;
				nxd_ring_push(&r, p, nr, live);
				head = p + 1 + nr;
				next_seq++;
			} else if (qn && (ret || nt_below(2))) {
				/* pop one or several oldest */
				u64 k = ret ? 1 + nt_below(3) : 1;

				while (k-- && qn) {
					struct mseg *m = &q[qh];

					for (i = m->pos;
					     i < m->pos + 1 + m->nr; i++)
						own[i] = NOSEG;
					qh++;
					qn--;
					nxd_ring_pop(&r);
				}
			}
			ring_check_all(&r, q, qh, qn, own, rb, head,
				       next_seq, (n & 63) == 0);
			/* the live segments never overlap */
			if (qn)
				CHECK(nxd_ring_used(&r) <= rb);
		}
		done += steps;
		round++;
		nxd_ring_free(&r);
		free(q);
		free(own);
	}
	fprintf(stderr, "ring: %d random rounds, %" PRIu64 " ops\n", round,
		done);
}

/* ---- routing ---- */

static bool ref_route(u64 sector, u64 bytes, u32 thr, u32 io_min,
		      enum nxd_mode m)
{
	if (m == NXD_MODE_LOG_ALL)
		return true;
	if (m != NXD_MODE_AUTO || thr == 0)
		return false;
	if (bytes <= thr)
		return true;
	if (sector % 8 || bytes % 4096)
		return true;
	if (io_min > 4096 && ((sector * 512) % io_min || bytes % io_min))
		return true;
	return false;
}

static void test_route(void)
{
	const u32 T = 65536;
	int n, bad = 0;

	CHECK(!nxd_route_write_to_log(1, 512, T, 0, NXD_MODE_PASSTHROUGH));
	CHECK(nxd_route_write_to_log(0, 1 << 30, T, 0, NXD_MODE_LOG_ALL));
	CHECK(!nxd_route_write_to_log(1, 512, T, 0, NXD_MODE_MAX));
	CHECK(!nxd_route_write_to_log(1, 512, 0, 0, NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(0, T, T, 0, NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(0, 512, T, 0, NXD_MODE_AUTO));
	CHECK(!nxd_route_write_to_log(8, T + 4096, T, 0, NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(8, T + 512, T, 0, NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(9, T + 4096, T, 0, NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(4, T + 4096, T, 0, NXD_MODE_AUTO));
	CHECK(!nxd_route_write_to_log(8, T + 4096, T, 4096, NXD_MODE_AUTO));
	CHECK(!nxd_route_write_to_log(8, T + 4096, T, 512, NXD_MODE_AUTO));
	/* io_min 64K: 128K at 64K-aligned is direct, else logged */
	CHECK(!nxd_route_write_to_log(128, 131072, 4096, 65536,
				      NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(8, 131072, 4096, 65536, NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(128, 139264, 4096, 65536,
				     NXD_MODE_AUTO));
	/* non-power-of-two io_min (RAID stripe of 3 x 4K) */
	CHECK(!nxd_route_write_to_log(24, 12288 * 10, 4096, 12288,
				      NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(16, 12288 * 10, 4096, 12288,
				     NXD_MODE_AUTO));
	CHECK(nxd_route_write_to_log(24, 12288 * 10 + 4096, 4096, 12288,
				     NXD_MODE_AUTO));
	/* huge threshold: everything logged */
	CHECK(nxd_route_write_to_log(0, ~0U, ~0U, 0, NXD_MODE_AUTO));
	CHECK(!nxd_route_write_to_log(0, 1ULL << 32, ~0U, 0, NXD_MODE_AUTO));

	for (n = 0; n < 200000; n++) {
		static const u32 thr[] = { 0, 1, 4096, 4097, 65536, 1 << 20 };
		static const u32 iom[] = { 0, 512, 4096, 8192, 12288, 65536,
					   1 << 20 };
		u64 sector = nt_below(4) ? nt_below(1 << 20) : nt_rand() >> 12;
		u64 bytes = nt_below(2) ? 4096 * (1 + nt_below(300)) :
			    512 * (1 + nt_below(3000));
		u32 t = thr[nt_below(ARRAY_SIZE(thr))];
		u32 io = iom[nt_below(ARRAY_SIZE(iom))];
		enum nxd_mode m = (enum nxd_mode)nt_below(NXD_MODE_MAX + 1);

		if (nt_below(2))
			sector &= ~7ULL;
		if (nxd_route_write_to_log(sector, bytes, t, io, m) !=
		    ref_route(sector, bytes, t, io, m))
			bad++;
	}
	CHECK_EQ(bad, 0);
}

static void test_modes(void)
{
	enum nxd_mode m = NXD_MODE_MAX;
	int i;

	CHECK(!strcmp(nxd_mode_name(NXD_MODE_AUTO), "auto"));
	CHECK(!strcmp(nxd_mode_name(NXD_MODE_PASSTHROUGH), "passthrough"));
	CHECK(!strcmp(nxd_mode_name(NXD_MODE_LOG_ALL), "log_all"));
	CHECK(!strcmp(nxd_mode_name(NXD_MODE_MAX), "unknown"));
	CHECK(!strcmp(nxd_mode_name((enum nxd_mode)-1), "unknown"));
	for (i = 0; i < NXD_MODE_MAX; i++) {
		m = NXD_MODE_MAX;
		CHECK_EQ(nxd_mode_parse(nxd_mode_name((enum nxd_mode)i), &m),
			 0);
		CHECK_EQ(m, i);
	}
	m = NXD_MODE_LOG_ALL;
	CHECK_EQ(nxd_mode_parse("Auto", &m), -EINVAL);
	CHECK_EQ(nxd_mode_parse("", &m), -EINVAL);
	CHECK_EQ(nxd_mode_parse("log-all", &m), -EINVAL);
	CHECK_EQ(nxd_mode_parse("auto ", &m), -EINVAL);
	CHECK_EQ(nxd_mode_parse("aut", &m), -EINVAL);
	CHECK_EQ(nxd_mode_parse(NULL, &m), -EINVAL);
	CHECK_EQ(m, NXD_MODE_LOG_ALL);
}

/* ---- histogram ---- */

static unsigned int ref_bucket(u64 b)
{
	unsigned int k = 2;
	u64 lim = 8192;

	if (b < 4096)
		return 0;
	if (b == 4096)
		return 1;
	while (b > lim && k < 15) {
		lim <<= 1;
		k++;
	}
	return b > lim ? 15 : k;
}

static void test_hist(void)
{
	static const char *const want[NXD_HIST_BUCKETS] = {
		"< 4K", "4K", "4K+1 - 8K", "8K+1 - 16K", "16K+1 - 32K",
		"32K+1 - 64K", "64K+1 - 128K", "128K+1 - 256K",
		"256K+1 - 512K", "512K+1 - 1M", "1M+1 - 2M", "2M+1 - 4M",
		"4M+1 - 8M", "8M+1 - 16M", "16M+1 - 32M", "> 32M",
	};
	const u64 M = 1ULL << 20;
	int i, k, bad = 0;

	for (i = 0; i < NXD_HIST_BUCKETS; i++)
		CHECK(!strcmp(nxd_hist_labels[i], want[i]));
	CHECK_EQ(nxd_hist_bucket(0), 0);
	CHECK_EQ(nxd_hist_bucket(1), 0);
	CHECK_EQ(nxd_hist_bucket(512), 0);
	CHECK_EQ(nxd_hist_bucket(4095), 0);
	CHECK_EQ(nxd_hist_bucket(4096), 1);
	CHECK_EQ(nxd_hist_bucket(4097), 2);
	CHECK_EQ(nxd_hist_bucket(8192), 2);
	CHECK_EQ(nxd_hist_bucket(8193), 3);
	CHECK_EQ(nxd_hist_bucket(16384), 3);
	CHECK_EQ(nxd_hist_bucket(16385), 4);
	CHECK_EQ(nxd_hist_bucket(M), 9);
	CHECK_EQ(nxd_hist_bucket(M + 1), 10);
	CHECK_EQ(nxd_hist_bucket(16 * M), 13);
	CHECK_EQ(nxd_hist_bucket(16 * M + 1), 14);
	CHECK_EQ(nxd_hist_bucket(32 * M), 14);
	CHECK_EQ(nxd_hist_bucket(32 * M + 1), 15);
	CHECK_EQ(nxd_hist_bucket(~0ULL), 15);
	CHECK(!strcmp(nxd_hist_labels[nxd_hist_bucket(4095)], "< 4K"));
	CHECK(!strcmp(nxd_hist_labels[nxd_hist_bucket(4096)], "4K"));
	CHECK(!strcmp(nxd_hist_labels[nxd_hist_bucket(4097)], "4K+1 - 8K"));
	CHECK(!strcmp(nxd_hist_labels[nxd_hist_bucket(32 * M)],
		      "16M+1 - 32M"));
	CHECK(!strcmp(nxd_hist_labels[nxd_hist_bucket(32 * M + 1)], "> 32M"));
	for (k = 0; k < 64; k++) {
		u64 p = 1ULL << k;

		if (nxd_hist_bucket(p) != ref_bucket(p) ||
		    nxd_hist_bucket(p - 1) != ref_bucket(p - 1) ||
		    nxd_hist_bucket(p + 1) != ref_bucket(p + 1))
			bad++;
	}
	for (i = 0; i < 100000; i++) {
		u64 b = nt_rand() >> nt_below(64);

		if (nxd_hist_bucket(b) != ref_bucket(b))
			bad++;
	}
	CHECK_EQ(bad, 0);
}

/* ---- size parser ---- */

static void ps(const char *s, int want, u64 wantv, int line)
{
	u64 v = 0xabcdef;
	int r = nxd_parse_size(s, &v);

	if (r != want || (!r && v != wantv) || (r && v != 0xabcdef))
		fprintf(stderr, "parse_size(\"%s\") line %d: %d %" PRIu64 "\n",
			s ? s : "(null)", line, r, v);
	CHECK_EQ(r, want);
	if (!r)
		CHECK(v == wantv);
	else
		CHECK(v == 0xabcdef);
}

#define PS(s, want, v) ps(s, want, v, __LINE__)

static void test_parse_size(void)
{
	PS("0", 0, 0);
	PS("4096", 0, 4096);
	PS("007", 0, 7);
	PS("64K", 0, 65536);
	PS("64k", 0, 65536);
	PS("1M", 0, 1ULL << 20);
	PS("1m", 0, 1ULL << 20);
	PS("3G", 0, 3ULL << 30);
	PS("3g", 0, 3ULL << 30);
	PS("0K", 0, 0);
	PS("18446744073709551615", 0, ~0ULL);
	PS("18446744073709551616", -ERANGE, 0);
	PS("99999999999999999999999", -ERANGE, 0);
	PS("18014398509481983K", 0, 18014398509481983ULL << 10);
	PS("18014398509481984K", -ERANGE, 0);
	PS("17592186044415M", 0, 17592186044415ULL << 20);
	PS("17592186044416M", -ERANGE, 0);
	PS("17179869183G", 0, 17179869183ULL << 30);
	PS("17179869184G", -ERANGE, 0);
	PS("", -EINVAL, 0);
	PS(NULL, -EINVAL, 0);
	PS("K", -EINVAL, 0);
	PS("-1", -EINVAL, 0);
	PS("+1", -EINVAL, 0);
	PS(" 1", -EINVAL, 0);
	PS("1 ", -EINVAL, 0);
	PS("1KB", -EINVAL, 0);
	PS("1KK", -EINVAL, 0);
	PS("1T", -EINVAL, 0);
	PS("1.5M", -EINVAL, 0);
	PS("0x10", -EINVAL, 0);
	PS("1\n", -EINVAL, 0);
	PS("99999999999999999999999x", -EINVAL, 0);
}

int main(int argc, char **argv)
{
	const char *e = getenv("NXD_RING_OPS");
	u64 ring_ops = e && *e ? strtoull(e, NULL, 0) : 300000;

	seed = nt_seed(argc, argv, 1);
	nt_rng_state = seed;
	fprintf(stderr, "test_core: seed %" PRIu64 "\n", seed);

	test_crc();
	test_sb();
	test_sb_meta();
	test_sb_pick();
	test_label();
	test_seg();
	test_seg_fits();
	test_replay_window();
	test_ring_fixed();
	test_ring_reset();
	test_ring_trim_unpush();
	test_ring_random(ring_ops);
	test_route();
	test_modes();
	test_hist();
	test_parse_size();
	nt_report();
	return 0;
}
