// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the tunables table (nxd_tun.c): names, defaults and
 * ranges against a literal copy of what the table line and sysfs took
 * before the table existed, the parser at and past every bound, keys in
 * any case, the printer, and the validity check against a reference.
 * test_codec.c checks that the superblock decoder keeps these ranges.
 *
 * Usage: test_tun [seed]   (or NXD_SEED=...)
 */
#include "nxd_test.h"

/* The reference: what the table line and sysfs have always taken. */
static const struct {
	const char *name;
	size_t off;
	u32 def, min, max;
} ref[] = {
	{ "write_threshold", offsetof(struct nxd_tun, write_threshold),
	  65536, 0, 1U << 30 },
	{ "mode", offsetof(struct nxd_tun, mode), NXD_MODE_AUTO, 0, 3 },
	{ "low_watermark", offsetof(struct nxd_tun, low_wm), 25, 0, 100 },
	{ "high_watermark", offsetof(struct nxd_tun, high_wm), 75, 0, 100 },
	{ "destage_rate", offsetof(struct nxd_tun, destage_rate),
	  0, 0, 1000000 },
	{ "ssd_discard", offsetof(struct nxd_tun, ssd_discard), 1, 0, 1 },
	{ "drain_on_suspend", offsetof(struct nxd_tun, drain_on_suspend),
	  0, 0, 1 },
	/* mode adaptive's */
	{ "auto_min_threshold", offsetof(struct nxd_tun, auto_min_thr),
	  4096, 4096, 1U << 30 },
	{ "auto_max_threshold", offsetof(struct nxd_tun, auto_max_thr),
	  1U << 20, 4096, 1U << 30 },
	{ "stream_min", offsetof(struct nxd_tun, stream_min),
	  4U << 20, 4096, 1U << 30 },
	{ "stripe_size", offsetof(struct nxd_tun, stripe_size), 0, 0, 1U << 30 },
	{ "stream_share", offsetof(struct nxd_tun, stream_share), 0, 0, 90 },
};

static void test_table(void)
{
	struct nxd_tun t;
	size_t i;

	CHECK_EQ(NXD_TUN_NR, ARRAY_SIZE(ref));
	CHECK_EQ(NXD_TUN_NR * sizeof(u32), sizeof(struct nxd_tun));
	memset(&t, 0xa5, sizeof(t));
	nxd_tun_defaults(&t);
	for (i = 0; i < ARRAY_SIZE(ref); i++) {
		const struct nxd_tun_desc *d = &nxd_tuns[i];

		CHECK(!strcmp(d->name, ref[i].name));
		CHECK_EQ(d->off, ref[i].off);
		CHECK_EQ(d->def, ref[i].def);
		CHECK_EQ(d->min, ref[i].min);
		CHECK_EQ(d->max, ref[i].max);
		CHECK_EQ(nxd_tun_val(&t, d), ref[i].def);
		CHECK(nxd_tun_find(ref[i].name) == d);
	}
	CHECK(nxd_tun_valid(&t));
	CHECK_EQ(nxd_tuns[0].kind, NXD_TUN_BYTES);
	CHECK_EQ(nxd_tuns[1].kind, NXD_TUN_MODE);
	for (i = 2; i < 7; i++)
		CHECK_EQ(nxd_tuns[i].kind, NXD_TUN_NUM);
	for (i = 7; i < 11; i++)
		CHECK_EQ(nxd_tuns[i].kind, NXD_TUN_BYTES);
	CHECK_EQ(nxd_tuns[11].kind, NXD_TUN_NUM);	/* stream_share */
}

static void set_ok(const char *key, const char *val, size_t i, u32 want)
{
	struct nxd_tun t;

	nxd_tun_defaults(&t);
	CHECK_EQ(nxd_tun_set(&t, key, val), 0);
	CHECK_EQ(*(u32 *)((char *)&t + ref[i].off), want);
}

static void set_err(const char *key, const char *val, int err)
{
	struct nxd_tun t, d;

	nxd_tun_defaults(&t);
	d = t;
	CHECK_EQ(nxd_tun_set(&t, key, val), err);
	CHECK(!memcmp(&t, &d, sizeof(t)));	/* untouched on error */
}

static void test_bounds(void)
{
	char s[32];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(ref); i++) {
		if (i == 1)	/* mode: by name, below */
			continue;
		if (i == 7)	/* the upper bound must stay above */
			set_ok("auto_max_threshold", "1G", 8, 1U << 30);
		snprintf(s, sizeof(s), "%u", ref[i].min);
		set_ok(ref[i].name, s, i, ref[i].min);
		snprintf(s, sizeof(s), "%u", ref[i].max);
		set_ok(ref[i].name, s, i, ref[i].max);
		snprintf(s, sizeof(s), "%llu", ref[i].max + 1ULL);
		set_err(ref[i].name, s, -ERANGE);
		set_err(ref[i].name, "-1", -EINVAL);
		set_err(ref[i].name, "", -EINVAL);
		set_err(ref[i].name, "1x", -EINVAL);
		set_err(ref[i].name, "99999999999999999999", -ERANGE);
	}
	/* Every number takes the size syntax, as it always did. */
	set_ok("write_threshold", "1G", 0, 1U << 30);
	set_err("write_threshold", "1025M", -ERANGE);
	set_ok("write_threshold", "64k", 0, 65536);
	set_ok("destage_rate", "1K", 4, 1024);
	set_err("low_watermark", "1K", -ERANGE);
	/* Modes by their exact names only. */
	set_ok("mode", "passthrough", 1, NXD_MODE_PASSTHROUGH);
	set_ok("mode", "log_all", 1, NXD_MODE_LOG_ALL);
	set_ok("mode", "auto", 1, NXD_MODE_AUTO);
	set_ok("mode", "adaptive", 1, NXD_MODE_ADAPTIVE);
	set_err("mode", "Auto", -EINVAL);
	set_err("mode", "1", -EINVAL);
	/* Keys in any case; unknown ones are -ENOENT. */
	set_ok("WRITE_Threshold", "4096", 0, 4096);
	set_ok("Low_Watermark", "7", 2, 7);
	set_err("read_threshold", "1", -ENOENT);
	set_err("write_threshold ", "1", -ENOENT);
	set_err("", "1", -ENOENT);
	CHECK(!nxd_tun_find("log_used_pct"));
}

static void test_str(void)
{
	char buf[NXD_TUN_STR_LEN];

	CHECK(!strcmp(nxd_tun_str(&nxd_tuns[0], 65536, buf), "65536"));
	CHECK(!strcmp(nxd_tun_str(&nxd_tuns[0], NXD_U32_MAX, buf),
		      "4294967295"));
	CHECK(!strcmp(nxd_tun_str(&nxd_tuns[1], NXD_MODE_LOG_ALL, buf),
		      "log_all"));
	CHECK(!strcmp(nxd_tun_str(&nxd_tuns[1], NXD_MODE_MAX, buf),
		      "unknown"));
	CHECK(!strcmp(nxd_tun_str(&nxd_tuns[6], 0, buf), "0"));
}

/* nxd_tun_valid() against a reference, over random and edge values. */
static void test_valid(void)
{
	static const u32 edge[] = { 0, 1, 2, 3, 99, 100, 101, 1000000,
				    1000001, 1U << 30, (1U << 30) + 1,
				    NXD_U32_MAX };
	struct nxd_tun t;
	bool want;
	size_t i, k;
	int n;

	for (n = 0; n < 20000; n++) {
		nxd_tun_defaults(&t);
		for (k = nt_below(4); k; k--) {
			i = nt_below(NXD_TUN_NR);
			*(u32 *)((char *)&t + ref[i].off) =
				nt_below(2) ? edge[nt_below(ARRAY_SIZE(edge))] :
				(u32)nt_rand();
		}
		want = t.low_wm <= t.high_wm &&
		       t.auto_min_thr <= t.auto_max_thr &&
		       !(t.stripe_size & 4095);
		for (i = 0; i < ARRAY_SIZE(ref); i++) {
			u32 v = *(u32 *)((char *)&t + ref[i].off);

			if (v < ref[i].min || v > ref[i].max)
				want = false;
		}
		CHECK_EQ(nxd_tun_valid(&t), want);
	}
	nxd_tun_defaults(&t);
	t.low_wm = 76;
	CHECK(!nxd_tun_valid(&t));
	t.high_wm = 76;
	CHECK(nxd_tun_valid(&t));
	/* adaptive bounds in order; a stripe of whole blocks */
	t.auto_min_thr = t.auto_max_thr + 4096;
	CHECK(!nxd_tun_valid(&t));
	t.auto_min_thr = t.auto_max_thr;
	CHECK(nxd_tun_valid(&t));
	t.stripe_size = 65536 + 512;
	CHECK(!nxd_tun_valid(&t));
	t.stripe_size = 65536 + 4096;
	CHECK(nxd_tun_valid(&t));
}

/*
 * nxd_tun_range(): the text every refusal shows; each bound it names
 * parses back to the table's bound (the range says what is taken).
 */
static void test_range(void)
{
	char buf[NXD_TUN_RANGE_LEN], lo[32], hi[32];
	const struct nxd_tun_desc *d;
	size_t i;
	u32 v;

	CHECK(!strcmp(nxd_tun_range(nxd_tun_find("write_threshold"), buf),
		      "0 to 1G"));
	CHECK(!strcmp(nxd_tun_range(nxd_tun_find("mode"), buf),
		      "auto, passthrough, log_all or adaptive"));
	CHECK(!strcmp(nxd_tun_range(nxd_tun_find("low_watermark"), buf),
		      "0 to 100"));
	CHECK(!strcmp(nxd_tun_range(nxd_tun_find("destage_rate"), buf),
		      "0 to 1000000"));
	for (i = 0; i < NXD_TUN_NR; i++) {
		d = &nxd_tuns[i];
		if (d->kind == NXD_TUN_MODE)
			continue;
		CHECK_EQ(sscanf(nxd_tun_range(d, buf), "%31s to %31s", lo, hi),
			 2);
		CHECK(!nxd_tun_parse(d, lo, &v));
		CHECK_EQ(v, d->min);
		CHECK(!nxd_tun_parse(d, hi, &v));
		CHECK_EQ(v, d->max);
	}
}

NT_MAIN("test_tun", test_table, test_bounds, test_str, test_valid,
	test_range)
