// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the on-disk codec (nxd_codec.c), superblock and label:
 * the crc32c shim, superblock and HDD label round trips, every range
 * check, every single-bit and byte flip, which superblock copy wins, the
 * window recovery replays.  Segment headers: test_seg.c.
 *
 * Usage: test_codec [seed]   (or NXD_SEED=...)
 */
#include "codec_test.h"

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
	/* No data offset: the version 1 layout, kept as version 1. */
	CHECK_EQ(le32toh(d->version), NXD_FORMAT_V1);
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
	((struct nxd_sb *)blk2)->version = htole32(3);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EPROTONOSUPPORT);
	/* version 2 needs its data offset, and the label in block 0 */
	((struct nxd_sb *)blk2)->version = htole32(2);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EINVAL);
	((struct nxd_sb *)blk2)->data_offset = htole64(2048);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), -EINVAL);
	((struct nxd_sb *)blk2)->hdd_label_sector = 0;
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK_EQ(out.data_offset, 2048);
	/* version 1: the bytes where version 2 keeps it are not read */
	((struct nxd_sb *)blk2)->version = htole32(1);
	((struct nxd_sb *)blk2)->hdd_label_sector = d->hdd_label_sector;
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK_EQ(out.data_offset, 0);
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

	/* version 2: label in block 0, data from data_offset */
	t = sb;
	t.hdd_label_sector = 0;
	t.data_offset = nxd_hdd_data_offset(256 << 10);
	t.data_sectors = nxd_layout_data_sectors(t.hdd_sectors, t.data_offset);
	memset(blk2, 0xA5, BS);
	nxd_sb_encode(&t, blk2);
	CHECK_EQ(le32toh(((struct nxd_sb *)blk2)->version), NXD_FORMAT_VERSION);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK(!memcmp(&out, &t, sizeof(t)));
	t.hdd_label_sector = 8;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.hdd_label_sector = 0;
	t.data_offset = 2052;		/* not whole blocks */
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.data_offset = 1024;		/* below 1 MiB */
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.data_offset = NXD_DATA_OFFSET_MAX + 8;
	CHECK_EQ(sb_rt(&t, ssd), -EINVAL);
	t.data_offset = NXD_DATA_OFFSET_MAX;
	CHECK_EQ(sb_rt(&t, ssd), 0);

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
	CHECK_EQ(offsetof(struct nxd_sb, auto_min_thr), 312);
	CHECK_EQ(offsetof(struct nxd_sb, auto_max_thr), 316);
	CHECK_EQ(offsetof(struct nxd_sb, stream_min), 320);
	CHECK_EQ(offsetof(struct nxd_sb, stripe_size), 324);
	CHECK_EQ(offsetof(struct nxd_sb, data_offset), 328);
	CHECK_EQ(offsetof(struct nxd_sb, stream_share), 336);
	CHECK_EQ(offsetof(struct nxd_sb, reserved), 337);
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
	sb.tun.write_threshold = 12288;
	sb.tun.mode = NXD_MODE_LOG_ALL;
	sb.tun.low_wm = 10;
	sb.tun.high_wm = 60;
	sb.tun.destage_rate = 300;
	sb.tun.ssd_discard = 0;
	sb.tun.drain_on_suspend = 1;
	sb.tun.auto_min_thr = 8192;
	sb.tun.auto_max_thr = 262144;
	sb.tun.stream_min = 1048576;
	sb.tun.stripe_size = 393216;
	sb.tun.stream_share = 30;
	memset(blk, 0xA5, sizeof(blk));
	nxd_sb_encode(&sb, blk);
	CHECK(!memcmp(blk + 160, "ost0-nxd", 9));
	bad = 0;
	for (i = 160 + 8; i < 288; i++)
		bad |= blk[i];
	for (i = 328; i < BS; i++)
		if (i != 336)
			bad |= blk[i];
	CHECK_EQ(bad, 0);
	CHECK_EQ(le32toh(d->tun_flags),
		 NXD_SB_TUN_VALID | NXD_SB_TUN_AUTO | NXD_SB_TUN_SHARE);
	CHECK_EQ(blk[336], 30);
	CHECK_EQ(le32toh(d->auto_min_thr), 8192);
	CHECK_EQ(le32toh(d->auto_max_thr), 262144);
	CHECK_EQ(le32toh(d->stream_min), 1048576);
	CHECK_EQ(le32toh(d->stripe_size), 393216);
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
	CHECK_EQ(out.tun.write_threshold, 0);
	CHECK_EQ(out.tail_seq, sb.tail_seq);

	/* written before the adaptive tunables: they take their defaults */
	memcpy(blk2, blk, BS);
	d2->tun_flags = htole32(NXD_SB_TUN_VALID);
	memset(blk2 + 312, 0, 16);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK(out.tun_valid);
	CHECK_EQ(out.tun.write_threshold, 12288);
	CHECK_EQ(out.tun.auto_min_thr, 4096);
	CHECK_EQ(out.tun.auto_max_thr, 1U << 20);
	CHECK_EQ(out.tun.stream_min, 4U << 20);
	CHECK_EQ(out.tun.stripe_size, 0);
	CHECK_EQ(out.tun.stream_share, 0);

	/* written before stream_share: its default, whatever the byte holds */
	memcpy(blk2, blk, BS);
	d2->tun_flags = htole32(NXD_SB_TUN_VALID | NXD_SB_TUN_AUTO);
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK(out.tun_valid);
	CHECK_EQ(out.tun.stripe_size, 393216);
	CHECK_EQ(out.tun.stream_share, 0);

	/* values without the VALID flag: ignored */
	memcpy(blk2, blk, BS);
	d2->tun_flags = 0;
	fix_crc(blk2);
	CHECK_EQ(nxd_sb_decode(blk2, ssd, &out), 0);
	CHECK(!out.tun_valid);
	CHECK_EQ(out.tun.low_wm, 0);
	CHECK(!strcmp(out.name, "ost0-nxd"));

	/* out of range: the superblock is fine, the tunables ignored */
	for (i = 0; i < 11; i++) {
		memcpy(blk2, blk, BS);
		switch (i) {
		case 10:
			d2->stream_share = 91;
			break;
		case 7:
			d2->auto_min_thr = htole32(524288);	/* above max */
			break;
		case 8:
			d2->auto_max_thr = htole32(2048);
			break;
		case 9:
			d2->stripe_size = htole32(393216 + 512);
			break;
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
		CHECK_EQ(out.tun.write_threshold, 0);
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
	CHECK_EQ(out.tun.write_threshold, 1U << 30);
	CHECK_EQ(out.tun.destage_rate, 1000000);

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

/* ---- layout: where the data area starts and how long it is ---- */

static void test_layout(void)
{
	u64 h = 2097152 + 1000;	/* 1 GiB and a bit, in sectors */

	CHECK_EQ(nxd_hdd_data_offset(0), 2048);
	CHECK_EQ(nxd_hdd_data_offset(256 << 10), 2048);	/* 4 x 64 KiB */
	CHECK_EQ(nxd_hdd_data_offset(320 << 10), 2560);	/* 5 x 64 KiB */
	CHECK_EQ(nxd_hdd_data_offset(4 << 20), 8192);
	CHECK_EQ(nxd_hdd_data_offset(3 << 20), 6144);
	CHECK_EQ(nxd_hdd_data_offset(1536), 2064);		/* whole blocks */
	CHECK_EQ(nxd_hdd_data_offset(1ULL << 30), 2048);	/* too large */
	CHECK_EQ(nxd_hdd_data_offset(192ULL << 20), 393216);
	CHECK_EQ(nxd_hdd_data_offset(320ULL << 20), 2048);	/* above the max */
	CHECK(nxd_data_offset_ok(nxd_hdd_data_offset(10 * (512 << 10))));
	CHECK_EQ(nxd_layout_data_sectors(h, 0), nxd_hdd_data_sectors(h));
	CHECK_EQ(nxd_layout_data_sectors(h, 2048), 2097152 - 2048);
	CHECK_EQ(nxd_layout_data_sectors(h, 2560), 2097152 - 2560);
	CHECK_EQ(nxd_layout_data_sectors(4096, 2048), 2048);
	CHECK_EQ(nxd_layout_data_sectors(4095, 2048), 0);
	CHECK_EQ(nxd_layout_data_sectors(2048, 2048), 0);
	/* version 2 never gives less than version 1 on the same HDD */
	CHECK(nxd_layout_data_sectors(h, 2048) >= nxd_hdd_data_sectors(h));
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
	CHECK_EQ(le32toh(d->version), NXD_FORMAT_V1);
	CHECK(crc_field_ok(blk));
	bad = 0;
	for (i = 0; i < sizeof(d->reserved); i++)
		bad |= d->reserved[i];
	CHECK_EQ(bad, 0);
	memset(&out, 0, sizeof(out));
	CHECK_EQ(nxd_label_decode(blk, &out), 0);
	CHECK(!memcmp(&out, &l, sizeof(l)));
	CHECK_EQ(out.flags, 0);

	/* Version 2: the data offset round-trips; zero or odd is refused. */
	l.data_offset = 4096;
	nxd_label_encode(&l, blk2);
	CHECK_EQ(le32toh(((struct nxd_hdd_label *)blk2)->version), NXD_FORMAT_VERSION);
	CHECK_EQ(le64toh(((struct nxd_hdd_label *)blk2)->data_offset), 4096);
	CHECK_EQ(nxd_label_decode(blk2, &out), 0);
	CHECK(!memcmp(&out, &l, sizeof(l)));
	((struct nxd_hdd_label *)blk2)->data_offset = 0;
	nxd_label_seal(blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), -EINVAL);
	((struct nxd_hdd_label *)blk2)->data_offset = htole64(4100);
	nxd_label_seal(blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), -EINVAL);
	((struct nxd_hdd_label *)blk2)->version = htole32(3);
	nxd_label_seal(blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), -EPROTONOSUPPORT);
	l.data_offset = 0;

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

	/*
	 * The owner: at byte 96, NUL-padded, in what was reserved (so a
	 * label written before it, all zero there, has none); at most 63
	 * bytes; past the field nothing is written.
	 */
	CHECK_EQ(out.owner[0], 0);
	snprintf(l.owner, sizeof(l.owner), "oss-a.example");
	nxd_label_encode(&l, blk2);
	CHECK(!memcmp(blk2 + 96, "oss-a.example", 14));
	bad = 0;
	for (i = 96 + 14; i < BS; i++)
		bad |= blk2[i];
	CHECK_EQ(bad, 0);
	CHECK_EQ(nxd_label_decode(blk2, &out), 0);
	CHECK(!strcmp(out.owner, "oss-a.example"));
	memset(blk2 + 96, 'x', NXD_LABEL_OWNER_LEN);	/* no NUL: 63 kept */
	fix_crc(blk2);
	CHECK_EQ(nxd_label_decode(blk2, &out), 0);
	CHECK_EQ(strlen(out.owner), NXD_LABEL_OWNER_LEN - 1);
	memset(l.owner, 0, sizeof(l.owner));

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

NT_MAIN("test_codec", test_crc, test_sb, test_sb_meta, test_sb_pick,
	test_layout, test_label, test_replay_window)
