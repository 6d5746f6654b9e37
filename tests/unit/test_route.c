// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for routing and the histogram (nxd_route.c): the routing
 * decision against a reference, mode names, histogram buckets at every
 * boundary, the size parser, a write's sector mask in one block, destage
 * pacing.
 *
 * Usage: test_route [seed]   (or NXD_SEED=...)
 */
#include "nxd_test.h"

/* ---- routing ---- */

static bool ref_route(u64 sector, u64 bytes, u32 thr, u32 io_min,
		      enum nxd_mode m)
{
	if (m == NXD_MODE_LOG_ALL)
		return true;
	/* adaptive: the same rule, at the controller's threshold */
	if ((m != NXD_MODE_AUTO && m != NXD_MODE_ADAPTIVE) || thr == 0)
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
		/* aligned enough to bypass: what auto checks above thr */
		if (nxd_route_aligned(sector, bytes, io) !=
		    !ref_route(sector, bytes, 1, io, NXD_MODE_AUTO))
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
	CHECK(!strcmp(nxd_mode_name(NXD_MODE_ADAPTIVE), "adaptive"));
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

/* ---- a write's sectors in one block ---- */

static void test_block_mask(void)
{
	int n, bad = 0;

	CHECK_EQ(nxd_block_mask(0, 0, 8), 0xff);
	CHECK_EQ(nxd_block_mask(1, 0, 10), 0x03);
	CHECK_EQ(nxd_block_mask(0, 0, 10), 0xff);
	CHECK_EQ(nxd_block_mask(1, 11, 13), 0x18);
	CHECK_EQ(nxd_block_mask(2, 20, 40), 0xf0);
	CHECK_EQ(nxd_block_mask(3, 20, 40), 0xff);
	CHECK_EQ(nxd_block_mask(5, 20, 40), 0);
	CHECK_EQ(nxd_block_mask(2, 16, 16), 0);
	CHECK_EQ(nxd_block_mask(7, 63, 64), 0x80);
	CHECK_EQ(nxd_block_mask(1ULL << 50, (1ULL << 53) + 1, 1ULL << 60), 0xfe);

	/* Against a sector-by-sector reference. */
	for (n = 0; n < 100000; n++) {
		u64 s = nt_below(4) ? nt_below(64) : nt_rand() >> 4;
		u64 e = s + nt_below(40);
		u64 b = (s >> 3) + nt_below(3);
		unsigned int i, want = 0;

		if (b)
			b--;

		for (i = 0; i < 8; i++)
			if (b * 8 + i >= s && b * 8 + i < e)
				want |= 1U << i;
		if (nxd_block_mask(b, s, e) != want)
			bad++;
	}
	CHECK_EQ(bad, 0);
}

/* ---- destage pacing ---- */

static void test_pace(void)
{
	u32 pct, prev = 0;
	int n, bad = 0;

	CHECK_EQ(nxd_pace_duty(0, 25, 75, 100, 1000), 100);
	CHECK_EQ(nxd_pace_duty(25, 25, 75, 100, 1000), 100);
	CHECK_EQ(nxd_pace_duty(50, 25, 75, 100, 1000), 550);
	CHECK_EQ(nxd_pace_duty(75, 25, 75, 100, 1000), 1000);
	CHECK_EQ(nxd_pace_duty(100, 25, 75, 100, 1000), 1000);
	/* Equal watermarks: a step, no division by zero. */
	CHECK_EQ(nxd_pace_duty(40, 50, 50, 100, 1000), 100);
	CHECK_EQ(nxd_pace_duty(50, 50, 50, 100, 1000), 1000);
	/* A share of 0 would never drain; over 1000 is all of it. */
	CHECK_EQ(nxd_pace_duty(0, 25, 75, 0, 1000), 1);
	CHECK_EQ(nxd_pace_duty(0, 25, 75, 5000, 1000), 1000);
	/* stream_share: the destager's share tops out below all of it. */
	CHECK_EQ(nxd_pace_duty(0, 25, 75, 100, 500), 100);
	CHECK_EQ(nxd_pace_duty(50, 25, 75, 100, 500), 300);
	CHECK_EQ(nxd_pace_duty(75, 25, 75, 100, 500), 500);
	CHECK_EQ(nxd_pace_duty(100, 25, 75, 100, 500), 500);
	/* a maximum below the minimum wins; neither is ever 0 */
	CHECK_EQ(nxd_pace_duty(0, 25, 75, 100, 50), 50);
	CHECK_EQ(nxd_pace_duty(100, 25, 75, 100, 0), 1);
	CHECK_EQ(nxd_pace_duty(100, 25, 75, 0, 0), 1);

	CHECK_EQ(nxd_pace_pause_ms(100, 1000), 0);
	CHECK_EQ(nxd_pace_pause_ms(100, 500), 100);
	CHECK_EQ(nxd_pace_pause_ms(100, 100), 900);
	CHECK_EQ(nxd_pace_pause_ms(0, 100), 0);
	CHECK_EQ(nxd_pace_pause_ms(1, 0), 999);
	CHECK_EQ(nxd_pace_pause_ms(NXD_U32_MAX, 1), 999000000U);

	/* Rising with occupancy, and busy / (busy + pause) within 1 % of the share. */
	for (pct = 0; pct <= 100; pct++) {
		u32 d = nxd_pace_duty(pct, 25, 75, 100, 1000);

		CHECK(d >= prev);
		prev = d;
	}
	for (n = 0; n < 100000; n++) {
		u32 busy = 100 + nt_below(100000);
		u32 d = 1 + nt_below(1000);
		u32 pause = nxd_pace_pause_ms(busy, d);
		double got = (double)busy / ((double)busy + pause) * 1000;

		if (got < (double)d - 10 || got > (double)d + 10)
			bad++;
	}
	CHECK_EQ(bad, 0);
}

NT_MAIN("test_route", test_route, test_modes, test_hist, test_parse_size,
	test_block_mask, test_pace)
