// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the routing that tunes itself (nxd_auto.c): the threshold
 * controller (EWMAs, moves toward the faster device per bucket, bounds,
 * hysteresis, log occupancy and destage headroom, reasons and counters,
 * probes), the stream detector across tasks, the stripe-aware split, and a
 * deterministic closed-loop simulation of a workload that changes phase.
 *
 * Usage: test_auto [seed]   (or NXD_SEED=...)
 */
#include "nxd_test.h"

#define K		1024U
#define M		(1024U * 1024U)
#define MS		1000000ULL	/* ns */

/* A small fixed-seed generator: the noise of the controller tests must
 * not depend on the run's seed, so their expectations hold for any. */
static u64 lcg_state;

static u32 lcg(void)
{
	lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (u32)(lcg_state >> 33);
}

/* @v within +-@pct % */
static u64 noisy(u64 v, u32 pct)
{
	u64 span = v * pct / 100;

	if (!span)
		return v;
	return v - span + lcg() % (2 * span + 1);
}

static void cfg_test(struct nxd_auto_cfg *c)
{
	nxd_auto_cfg_default(c);
	c->min_samples = 4;
	c->hold_ticks = 3;
	c->probe_every = 4;
}

/* @n samples of @dev at @bytes taking @ns each. */
static void feed(struct nxd_auto *a, enum nxd_auto_dev dev, u64 bytes,
		 u64 ns, unsigned int n)
{
	while (n--)
		nxd_auto_sample(a, dev, bytes, ns);
}

/* Tick @n times an interval apart from *@now; the number of changes. */
static unsigned int ticks(struct nxd_auto *a, u64 *now, unsigned int n)
{
	unsigned int c = 0;

	while (n--) {
		*now += a->cfg.interval_ms * MS;
		c += nxd_auto_tick(a, *now);
	}
	return c;
}

/* ---- configuration, names, EWMA ---- */

static void test_cfg(void)
{
	struct nxd_auto_cfg c, bad;
	struct nxd_auto a;

	nxd_auto_cfg_default(&c);
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	CHECK_EQ(nxd_auto_threshold(&a), 64 * K);
	CHECK_EQ(a.st.changes, 0);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_NONE);
	CHECK_EQ(nxd_auto_init(&a, &c, 0), 0);
	CHECK_EQ(nxd_auto_threshold(&a), c.min_thr);
	CHECK_EQ(nxd_auto_init(&a, &c, NXD_U32_MAX), 0);
	CHECK_EQ(nxd_auto_threshold(&a), c.max_thr);

	bad = c; bad.min_thr = 0;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.min_thr = bad.max_thr + 1;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.low_wm = bad.high_wm;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.high_wm = 101;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.ewma_shift = 0;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.ewma_shift = 11;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.hold_ticks = 0;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.min_samples = 0;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.epoch_ticks = 0;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	bad = c; bad.margin_pct = 1001;
	CHECK_EQ(nxd_auto_init(&a, &bad, 1), -EINVAL);
	/* extreme but valid */
	bad = c; bad.min_thr = 1; bad.max_thr = NXD_U32_MAX; bad.low_wm = 0;
	bad.high_wm = 100; bad.margin_pct = 1000; bad.ewma_shift = 10;
	CHECK_EQ(nxd_auto_init(&a, &bad, 12345), 0);
	CHECK_EQ(nxd_auto_threshold(&a), 12345);
}

static void test_names(void)
{
	static const char *const want[NXD_AUTO_R_MAX] = {
		"none", "ssd_faster", "hdd_faster", "log_occupancy",
		"destage_headroom", "bounds",
	};
	int i;

	for (i = 0; i < NXD_AUTO_R_MAX; i++)
		CHECK(!strcmp(nxd_auto_reason_name((enum nxd_auto_reason)i),
			      want[i]));
	CHECK(!strcmp(nxd_auto_reason_name(NXD_AUTO_R_MAX), "unknown"));
	CHECK(!strcmp(nxd_auto_reason_name((enum nxd_auto_reason)-1),
		      "unknown"));
}

static void test_ewma(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	unsigned int i;

	cfg_test(&c);
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_SSD, 1), 0);
	nxd_auto_sample(&a, NXD_AUTO_SSD, 4096, 1000);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_SSD, 1), 1000);	/* first sets */
	nxd_auto_sample(&a, NXD_AUTO_SSD, 4096, 9000);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_SSD, 1), 2000);	/* 1/8 of 8000 */
	for (i = 0; i < 200; i++)
		nxd_auto_sample(&a, NXD_AUTO_SSD, 4096, 9000);
	CHECK(nxd_auto_est_ns(&a, NXD_AUTO_SSD, 1) >= 8990);
	CHECK(nxd_auto_est_ns(&a, NXD_AUTO_SSD, 1) <= 9000);
	for (i = 0; i < 200; i++)
		nxd_auto_sample(&a, NXD_AUTO_SSD, 4096, 0);
	CHECK(nxd_auto_est_ns(&a, NXD_AUTO_SSD, 1) <= 16);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_HDD, 1), 0);	/* per device */
	CHECK_EQ(a.b[1].n[NXD_AUTO_SSD], 402);
	CHECK_EQ(a.st.samples[NXD_AUTO_SSD], 402);
	CHECK_EQ(a.st.samples[NXD_AUTO_HDD], 0);

	/* extreme values: capped, no overflow (UBSan) */
	for (i = 0; i < 100; i++)
		nxd_auto_sample(&a, NXD_AUTO_HDD, ~0ULL, ~0ULL);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_HDD, NXD_HIST_BUCKETS - 1),
		 NXD_AUTO_NS_CAP);
	nxd_auto_sample(&a, NXD_AUTO_HDD, 0, 5);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_HDD, 0), 5);
	nxd_auto_sample(&a, NXD_AUTO_DEVS, 4096, 5);
	nxd_auto_sample(&a, (enum nxd_auto_dev)-1, 4096, 5);
	CHECK_EQ(a.st.dropped, 2);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_DEVS, 1), 0);
	CHECK_EQ(nxd_auto_est_ns(&a, NXD_AUTO_SSD, NXD_HIST_BUCKETS), 0);
	/* the saturating counts */
	a.b[2].n[NXD_AUTO_SSD] = NXD_U32_MAX;
	a.b[2].fresh[NXD_AUTO_SSD] = NXD_U32_MAX;
	nxd_auto_sample(&a, NXD_AUTO_SSD, 8192, 5);
	CHECK_EQ(a.b[2].n[NXD_AUTO_SSD], NXD_U32_MAX);
	CHECK_EQ(a.b[2].fresh[NXD_AUTO_SSD], NXD_U32_MAX);
}

/* ---- the threshold follows the faster device ---- */

static void test_raise(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	u64 now = 0;

	cfg_test(&c);
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	/* bucket 6 (64K+1 - 128K): the log is 10x faster */
	feed(&a, NXD_AUTO_SSD, 128 * K, 1 * MS, 4);
	feed(&a, NXD_AUTO_HDD, 128 * K, 10 * MS, 3);
	CHECK_EQ(ticks(&a, &now, 5), 0);	/* 3 HDD samples: too few */
	feed(&a, NXD_AUTO_HDD, 128 * K, 10 * MS, 1);
	CHECK_EQ(ticks(&a, &now, 2), 0);	/* held 2 ticks of 3 */
	CHECK_EQ(ticks(&a, &now, 1), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 128 * K);
	CHECK_EQ(a.st.changes, 1);
	CHECK_EQ(a.st.raises, 1);
	CHECK_EQ(a.st.lowers, 0);
	CHECK_EQ(a.st.by_reason[NXD_AUTO_R_SSD_FASTER], 1);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_SSD_FASTER);
	CHECK_EQ(a.st.last_from, 64 * K);
	CHECK_EQ(a.st.last_to, 128 * K);
	CHECK_EQ(a.st.last_ns, now);
	/* the change needs fresh evidence: the old samples do not count */
	CHECK_EQ(ticks(&a, &now, 10), 0);

	/* the log faster in every bucket: up, one populated bucket at a time,
	 * to max_thr and not beyond */
	while (a.st.changes < 40) {
		unsigned int ch;

		feed(&a, NXD_AUTO_SSD, 256 * K, 1 * MS, 4);
		feed(&a, NXD_AUTO_HDD, 256 * K, 10 * MS, 4);
		feed(&a, NXD_AUTO_SSD, 1 * M, 2 * MS, 4);
		feed(&a, NXD_AUTO_HDD, 1 * M, 12 * MS, 4);
		feed(&a, NXD_AUTO_SSD, 8 * M, 8 * MS, 4);
		feed(&a, NXD_AUTO_HDD, 8 * M, 40 * MS, 4);
		ch = ticks(&a, &now, 3);
		if (!ch)
			break;
		CHECK_EQ(ch, 1);
	}
	CHECK_EQ(nxd_auto_threshold(&a), c.max_thr);
	/* 128K -> 256K -> 1M (bucket 8 empty, skipped) */
	CHECK_EQ(a.st.raises, 3);
	CHECK_EQ(a.st.last_from, 256 * K);
	CHECK_EQ(ticks(&a, &now, 20), 0);
}

static void test_lower(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	u64 now = 0;
	unsigned int i;

	cfg_test(&c);
	CHECK_EQ(nxd_auto_init(&a, &c, 256 * K), 0);
	/* bucket 7 (128K+1 - 256K): the HDD is twice as fast */
	feed(&a, NXD_AUTO_SSD, 200 * K, 4 * MS, 4);
	feed(&a, NXD_AUTO_HDD, 200 * K, 2 * MS, 4);
	CHECK_EQ(ticks(&a, &now, 3), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 128 * K);
	CHECK_EQ(a.st.lowers, 1);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_HDD_FASTER);
	CHECK_EQ(a.st.by_reason[NXD_AUTO_R_HDD_FASTER], 1);

	/* the HDD faster everywhere: down to min_thr, and no further */
	for (i = 0; i < 40; i++) {
		unsigned int k;

		for (k = 0; k < NXD_HIST_BUCKETS; k++) {
			u64 sz = k ? 4096ULL << (k - 1) : 512;

			feed(&a, NXD_AUTO_SSD, sz, 4 * MS, 4);
			feed(&a, NXD_AUTO_HDD, sz, 1 * MS, 4);
		}
		ticks(&a, &now, 3);
	}
	CHECK_EQ(nxd_auto_threshold(&a), c.min_thr);
	CHECK_EQ(a.st.raises, 0);
	/* 128K, 64K, 32K, 16K, 8K, 4K(min): 5 more */
	CHECK_EQ(a.st.lowers, 6);
}

/* Modelled service times: log 30 us + 2 ns/B; HDD 4 ms + 1 ns/B
 * (random), 0.2 ms + 1 ns/B (sequential).  Crossover near 3.9 MiB. */
static u64 model_ns(enum nxd_auto_dev d, u64 bytes, bool seq)
{
	if (d == NXD_AUTO_SSD)
		return 30000 + 2 * bytes;
	return (seq ? 200000 : 4000000) + bytes;
}

/* One aligned write of @bytes through the routing, a probe, the model. */
static bool sim_write(struct nxd_auto *a, u64 bytes, bool seq)
{
	bool log = nxd_route_write_to_log(0, bytes, nxd_auto_threshold(a), 0,
					  NXD_MODE_AUTO);
	enum nxd_auto_dev d;

	if (nxd_auto_probe(a, bytes))
		log = !log;
	d = log ? NXD_AUTO_SSD : NXD_AUTO_HDD;
	nxd_auto_sample(a, d, bytes, noisy(model_ns(d, bytes, seq), 10));
	return log;
}

/* Closed loop, every bucket from 4K to 32M in use: from either end, the
 * threshold settles in the dead band around the crossover. */
static void test_crossover(void)
{
	static const u32 start[] = { 4096, 32 * M, 1 * M };
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	unsigned int s, t, k;
	u64 now = 0;

	lcg_state = 46;
	cfg_test(&c);
	c.max_thr = 32 * M;
	for (s = 0; s < ARRAY_SIZE(start); s++) {
		CHECK_EQ(nxd_auto_init(&a, &c, start[s]), 0);
		for (t = 0; t < 600; t++) {
			for (k = 1; k < NXD_HIST_BUCKETS - 1; k++)
				sim_write(&a, 4096ULL << (k - 1), false);
			now += c.interval_ms * MS;
			nxd_auto_tick(&a, now);
		}
		/* 2M: log 4.2 ms, HDD 6.1; 4M: 8.4 / 8.2 (dead band);
		 * 8M: 16.8 / 12.4 */
		CHECK(nxd_auto_threshold(&a) >= 2 * M);
		CHECK(nxd_auto_threshold(&a) <= 4 * M);
		CHECK(a.st.probes > 0);
		CHECK(a.st.changes <= 12);
	}
}

/* ---- bounds ---- */

static void test_bounds(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	u64 now = 0;
	unsigned int i, out = 0;

	cfg_test(&c);
	c.min_thr = 8 * K;
	c.max_thr = 512 * K;
	c.hold_ticks = 1;
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	lcg_state = 7;
	for (i = 0; i < 20000; i++) {
		u64 bytes = 1ULL << (lcg() % 40);
		enum nxd_auto_dev d = (enum nxd_auto_dev)(lcg() % 2);
		u64 ns = lcg() % 3 ? (u64)(lcg() % 100) << (lcg() % 30) :
				      ~0ULL >> (lcg() % 64);

		nxd_auto_sample(&a, d, bytes, ns);
		if (!(i % 7)) {
			nxd_auto_set_log(&a, lcg() % 130, lcg() % 130);
			now += c.interval_ms * MS;
			nxd_auto_tick(&a, now);
		}
		if (nxd_auto_threshold(&a) < c.min_thr ||
		    nxd_auto_threshold(&a) > c.max_thr)
			out++;
	}
	CHECK_EQ(out, 0);
	CHECK(a.st.changes > 10);
	CHECK(a.occ <= 100 && a.headroom <= 100);

	/* extreme settings and times: no overflow (UBSan) */
	c.margin_pct = 1000;
	c.interval_ms = NXD_U32_MAX;
	c.min_thr = 1;
	c.max_thr = NXD_U32_MAX;
	CHECK_EQ(nxd_auto_init(&a, &c, NXD_U32_MAX - 1), 0);
	for (i = 0; i < NXD_HIST_BUCKETS; i++) {
		u64 sz = i ? 4096ULL << (i - 1) : 1;

		feed(&a, NXD_AUTO_SSD, sz, ~0ULL, 8);
		feed(&a, NXD_AUTO_HDD, sz, 1, 8);
	}
	now = ~0ULL - 5;
	CHECK(nxd_auto_tick(&a, now));		/* hold 1: at once */
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_HDD_FASTER);
	CHECK_EQ(nxd_auto_threshold(&a), 32 * M);
	/* the interval across the clock's wrap */
	CHECK(!nxd_auto_tick(&a, now + (u64)NXD_U32_MAX * MS - 1));
	CHECK_EQ(a.st.ticks, 1);
	CHECK(!nxd_auto_tick(&a, now + (u64)NXD_U32_MAX * MS));
	CHECK_EQ(a.st.ticks, 2);
	nxd_auto_set_log(&a, NXD_U32_MAX, NXD_U32_MAX);
	CHECK_EQ(a.occ, 100);
	CHECK(nxd_auto_tick(&a, now + 2 * (u64)NXD_U32_MAX * MS));
	CHECK_EQ(nxd_auto_threshold(&a), 1);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_LOG_FULL);
	cfg_test(&c);
	c.min_thr = 8 * K;
	c.max_thr = 512 * K;

	/* new bounds clamp at once, counted as such */
	CHECK_EQ(nxd_auto_init(&a, &c, 256 * K), 0);
	CHECK_EQ(nxd_auto_set_bounds(&a, 4 * K, 128 * K, 77), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 128 * K);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_BOUNDS);
	CHECK_EQ(a.st.by_reason[NXD_AUTO_R_BOUNDS], 1);
	CHECK_EQ(a.st.last_ns, 77);
	CHECK_EQ(nxd_auto_set_bounds(&a, 4 * K, 1 * M, 78), 0);	/* inside */
	CHECK_EQ(nxd_auto_threshold(&a), 128 * K);
	CHECK_EQ(nxd_auto_set_bounds(&a, 256 * K, 1 * M, 79), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 256 * K);
	CHECK_EQ(a.st.raises, 1);
	CHECK_EQ(nxd_auto_set_bounds(&a, 0, 1 * M, 80), -EINVAL);
	CHECK_EQ(nxd_auto_set_bounds(&a, 2 * M, 1 * M, 80), -EINVAL);
	CHECK_EQ(a.cfg.min_thr, 256 * K);
	CHECK_EQ(a.st.changes, 2);
}

/* ---- hysteresis ---- */

/* Both boundary buckets equal on average, +-25 % noise: the number of
 * changes in 2000 ticks with the given margin and hold. */
static u64 noisy_run(u32 margin, u32 hold)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	unsigned int t, i;
	u64 now = 0;

	cfg_test(&c);
	c.margin_pct = margin;
	c.hold_ticks = hold;
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	lcg_state = 4646;
	for (t = 0; t < 2000; t++) {
		for (i = 0; i < 4; i++) {
			u32 th = nxd_auto_threshold(&a);

			/* the top of lo and hi, both devices */
			nxd_auto_sample(&a, NXD_AUTO_SSD, th, noisy(5 * MS, 25));
			nxd_auto_sample(&a, NXD_AUTO_HDD, th, noisy(5 * MS, 25));
			nxd_auto_sample(&a, NXD_AUTO_SSD, 2ULL * th,
					noisy(5 * MS, 25));
			nxd_auto_sample(&a, NXD_AUTO_HDD, 2ULL * th,
					noisy(5 * MS, 25));
		}
		now += c.interval_ms * MS;
		nxd_auto_tick(&a, now);
	}
	return a.st.changes;
}

static void test_hysteresis(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	u64 now = 0;

	/* with the defaults' margin and hold: still */
	CHECK_EQ(noisy_run(20, 3), 0);
	/* without the margin the same noise flaps, held or not: the test
	 * can see flapping */
	CHECK(noisy_run(0, 3) > 50);
	CHECK(noisy_run(0, 1) > 3 * noisy_run(0, 3));

	/* a vote interrupted before hold_ticks starts again */
	cfg_test(&c);
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	feed(&a, NXD_AUTO_SSD, 128 * K, 1 * MS, 4);
	feed(&a, NXD_AUTO_HDD, 128 * K, 10 * MS, 4);
	CHECK_EQ(ticks(&a, &now, 2), 0);
	feed(&a, NXD_AUTO_SSD, 128 * K, 100 * MS, 8);	/* vote gone */
	CHECK_EQ(ticks(&a, &now, 1), 0);
	feed(&a, NXD_AUTO_SSD, 128 * K, 0, 64);		/* back */
	CHECK_EQ(ticks(&a, &now, 2), 0);
	CHECK_EQ(ticks(&a, &now, 1), 1);

	/* ticks closer than interval_ms are not counted */
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	feed(&a, NXD_AUTO_SSD, 128 * K, 1 * MS, 4);
	feed(&a, NXD_AUTO_HDD, 128 * K, 10 * MS, 4);
	now = 1000 * MS;
	CHECK(!nxd_auto_tick(&a, now));
	CHECK(!nxd_auto_tick(&a, now + 1));
	CHECK(!nxd_auto_tick(&a, now + c.interval_ms * MS - 1));
	CHECK_EQ(a.st.ticks, 1);
	CHECK(!nxd_auto_tick(&a, now + c.interval_ms * MS));
	CHECK(nxd_auto_tick(&a, now + 2 * c.interval_ms * MS));
	CHECK_EQ(a.st.ticks, 3);

	/* fresh counts fade: a bucket's evidence halves every epoch */
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	feed(&a, NXD_AUTO_SSD, 128 * K, 1 * MS, 8);
	feed(&a, NXD_AUTO_HDD, 4 * M, 1 * MS, 8);
	now = 0;
	a.cfg.hold_ticks = 1000;
	ticks(&a, &now, c.epoch_ticks);
	CHECK_EQ(a.b[6].fresh[NXD_AUTO_SSD], 4);
	ticks(&a, &now, 3 * c.epoch_ticks);
	CHECK_EQ(a.b[6].fresh[NXD_AUTO_SSD], 0);
	CHECK_EQ(a.b[6].n[NXD_AUTO_SSD], 8);
}

/* ---- log occupancy and destage headroom ---- */

static void test_occupancy(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	u32 occ, prev, cap;
	u64 now = 0;
	unsigned int i, bad = 0;

	cfg_test(&c);
	c.max_thr = 4 * M;
	/* the cap: max_thr up to low_wm, min_thr from high_wm, falling */
	prev = NXD_U32_MAX;
	for (occ = 0; occ <= 120; occ++) {
		cap = nxd_auto_occ_cap(&c, occ);
		if (cap > prev || cap < c.min_thr || cap > c.max_thr)
			bad++;
		if (occ <= c.low_wm && cap != c.max_thr)
			bad++;
		if (occ >= c.high_wm && cap != c.min_thr)
			bad++;
		prev = cap;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(nxd_auto_occ_cap(&c, 50), 128 * K);	/* 10 halvings, half way */
	for (i = 0; i < 1000; i++) {
		struct nxd_auto_cfg r = c;

		r.min_thr = 1 + lcg() % 100000;
		r.max_thr = r.min_thr + (lcg() % 2 ? lcg() : NXD_U32_MAX - r.min_thr);
		r.low_wm = lcg() % 100;
		r.high_wm = r.low_wm + 1 + lcg() % (100 - r.low_wm);
		prev = NXD_U32_MAX;
		for (occ = 0; occ <= 100; occ++) {
			cap = nxd_auto_occ_cap(&r, occ);
			if (cap > prev || cap < r.min_thr || cap > r.max_thr)
				bad++;
			prev = cap;
		}
		if (nxd_auto_occ_cap(&r, 100) != r.min_thr ||
		    nxd_auto_occ_cap(&r, 0) != r.max_thr)
			bad++;
	}
	CHECK_EQ(bad, 0);

	/* the log faster everywhere, threshold at max: occupancy rises */
	CHECK_EQ(nxd_auto_init(&a, &c, 4 * M), 0);
	prev = nxd_auto_threshold(&a);
	for (occ = 0; occ <= 100; occ += 5) {
		nxd_auto_set_log(&a, occ, 50);
		ticks(&a, &now, 1);
		if (nxd_auto_threshold(&a) > prev ||
		    nxd_auto_threshold(&a) > nxd_auto_occ_cap(&c, occ))
			bad++;
		prev = nxd_auto_threshold(&a);
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(nxd_auto_threshold(&a), c.min_thr);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_LOG_FULL);
	CHECK_EQ(a.st.by_reason[NXD_AUTO_R_LOG_FULL], 10);
	CHECK_EQ(a.st.lowers, 10);

	/* falling again: a raise needs the cap at occupancy + occ_hyst */
	nxd_auto_set_log(&a, 70, 50);	/* cap(70) 8K, cap(75) 4K */
	feed(&a, NXD_AUTO_SSD, 8 * K, 10000, 8);
	feed(&a, NXD_AUTO_HDD, 8 * K, 5 * MS, 8);
	CHECK_EQ(ticks(&a, &now, 10), 0);
	nxd_auto_set_log(&a, 64, 50);	/* cap(69) 8K */
	CHECK_EQ(ticks(&a, &now, 3), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 8 * K);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_SSD_FASTER);
	/* and a threshold over the cap drops at the next tick, no hold */
	nxd_auto_set_log(&a, 75, 50);
	CHECK_EQ(ticks(&a, &now, 1), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 4 * K);
}

static void test_headroom(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	u64 now = 0;

	cfg_test(&c);
	/* while the log is nearly empty, headroom does not matter */
	CHECK_EQ(nxd_auto_init(&a, &c, 32 * K), 0);
	nxd_auto_set_log(&a, c.low_wm, 0);
	feed(&a, NXD_AUTO_SSD, 64 * K, 1 * MS, 4);
	feed(&a, NXD_AUTO_HDD, 64 * K, 10 * MS, 4);
	CHECK_EQ(ticks(&a, &now, 3), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 64 * K);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_SSD_FASTER);

	/* the log faster one bucket up, but the destager is behind */
	feed(&a, NXD_AUTO_SSD, 128 * K, 1 * MS, 4);
	feed(&a, NXD_AUTO_HDD, 128 * K, 10 * MS, 4);
	nxd_auto_set_log(&a, c.low_wm + 1, c.headroom_min - 1);
	CHECK_EQ(ticks(&a, &now, 2), 0);
	CHECK_EQ(ticks(&a, &now, 1), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 32 * K);
	CHECK_EQ(a.st.last_reason, NXD_AUTO_R_HEADROOM);
	CHECK_EQ(a.st.by_reason[NXD_AUTO_R_HEADROOM], 1);
	CHECK_EQ(a.st.lowers, 1);
	CHECK_EQ(a.ceil, 64 * K);

	/* headroom back at headroom_min, not behind: a raise to the value
	 * it fell behind at waits for the end of the epoch */
	nxd_auto_set_log(&a, 30, c.headroom_min);
	feed(&a, NXD_AUTO_SSD, 64 * K, 1 * MS, 8);
	feed(&a, NXD_AUTO_HDD, 64 * K, 10 * MS, 8);
	CHECK_EQ(ticks(&a, &now, 10), 0);
	CHECK_EQ(nxd_auto_threshold(&a), 32 * K);
	a.epoch = c.epoch_ticks - 1;
	CHECK_EQ(ticks(&a, &now, 1), 0);
	CHECK_EQ(a.ceil, NXD_U32_MAX);
	feed(&a, NXD_AUTO_SSD, 64 * K, 1 * MS, 8);
	feed(&a, NXD_AUTO_HDD, 64 * K, 10 * MS, 8);
	CHECK_EQ(ticks(&a, &now, 3), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 64 * K);
	CHECK_EQ(a.st.raises, 2);

	/* behind at min_thr: raises barred even where the log is faster,
	 * and nothing lower to go to */
	CHECK_EQ(nxd_auto_set_bounds(&a, 64 * K, 1 * M, now), 0);
	nxd_auto_set_log(&a, 30, 0);
	feed(&a, NXD_AUTO_SSD, 128 * K, 1 * MS, 8);
	feed(&a, NXD_AUTO_HDD, 128 * K, 10 * MS, 8);
	CHECK_EQ(ticks(&a, &now, 10), 0);
	CHECK_EQ(nxd_auto_threshold(&a), 64 * K);
	/* caught up: the raise */
	nxd_auto_set_log(&a, 30, 100);
	CHECK_EQ(ticks(&a, &now, 3), 1);
	CHECK_EQ(nxd_auto_threshold(&a), 128 * K);
}

static void test_probe(void)
{
	struct nxd_auto_cfg c;
	struct nxd_auto a;
	unsigned int i, n = 0;

	cfg_test(&c);
	c.probe_every = 8;
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	CHECK_EQ(a.lo, 5);
	CHECK_EQ(a.hi, 6);
	/* not a boundary bucket: never */
	for (i = 0; i < 100; i++)
		n += nxd_auto_probe(&a, 4096);
	CHECK_EQ(n, 0);
	/* bucket hi goes to the HDD: 1 in 8 probes the log */
	for (i = 0; i < 64; i++)
		n += nxd_auto_probe(&a, 100 * K);
	CHECK_EQ(n, 8);
	CHECK_EQ(a.st.probes, 8);
	/* until the log has min_samples fresh ones there */
	feed(&a, NXD_AUTO_SSD, 100 * K, 1 * MS, c.min_samples);
	for (i = 0; i < 64; i++)
		n += nxd_auto_probe(&a, 100 * K);
	CHECK_EQ(n, 8);
	/* bucket lo goes to the log: probes go to the HDD */
	for (i = 0; i < 64; i++)
		n += nxd_auto_probe(&a, 64 * K);
	CHECK_EQ(n, 16);
	c.probe_every = 0;
	CHECK_EQ(nxd_auto_init(&a, &c, 64 * K), 0);
	for (i = 0; i < 64; i++)
		n += nxd_auto_probe(&a, 64 * K);
	CHECK_EQ(n, 16);
}

/* ---- stream detection ---- */

static unsigned int stream_used(const struct nxd_streams *s)
{
	unsigned int i, n = 0;

	for (i = 0; i < NXD_STREAM_SLOTS; i++)
		n += !!s->e[i].used;
	return n;
}

static void test_stream_runs(void)
{
	struct nxd_streams s;
	unsigned int i, t, longs = 0;

	/* one run of 4K writes proves itself at min_bytes, not before */
	nxd_stream_init(&s, 64 * K);
	for (i = 0; i < 15; i++)
		CHECK(!nxd_stream_write(&s, 1000 + i * 8, 8));
	CHECK(nxd_stream_write(&s, 1000 + 15 * 8, 8));
	CHECK(nxd_stream_write(&s, 1000 + 16 * 8, 8));
	CHECK_EQ(s.hits, 16);
	CHECK_EQ(s.misses, 1);
	CHECK_EQ(s.longs, 2);
	/* min_bytes rounds up to a sector */
	nxd_stream_init(&s, 1025);
	CHECK(!nxd_stream_write(&s, 0, 2));
	CHECK(nxd_stream_write(&s, 2, 1));
	nxd_stream_init(&s, 0);
	CHECK(nxd_stream_write(&s, 5, 1));

	/* 8 files written by 8 tasks, interleaved: all found */
	nxd_stream_init(&s, 1 * M);
	for (i = 0; i < 512; i++)
		for (t = 0; t < 8; t++)
			longs += nxd_stream_write(&s, (u64)t << 30 | i * 8, 8);
	/* each run is long from its 256th write on */
	CHECK_EQ(longs, 8 * (512 - 255));
	CHECK_EQ(s.misses, 8);
	CHECK_EQ(s.evictions, 0);

	/* one file's writeback split among 3 tasks in 32K chunks, each task
	 * a little late: out of order, one run in the end */
	nxd_stream_init(&s, 1 * M);
	longs = 0;
	for (i = 0; i < 300; i += 3) {
		static const unsigned int order[3] = { 2, 0, 1 };

		for (t = 0; t < 3; t++)
			longs += nxd_stream_write(&s, (u64)(i + order[t]) * 64,
						  64);
	}
	CHECK(s.merges > 0);
	CHECK(s.ahead > 0);
	CHECK(longs >= 300 - 40);
	CHECK(nxd_stream_write(&s, 300 * 64, 64));
	/* merged entries are freed: one run, one entry */
	CHECK_EQ(stream_used(&s), 1);
	for (i = 0; i < NXD_STREAM_SLOTS; i++) {
		if (s.e[i].used) {
			CHECK_EQ(s.e[i].start, 0);
			CHECK_EQ(s.e[i].next, 301 * 64);
		}
	}
}

static void test_stream_random(void)
{
	struct nxd_streams s;
	unsigned int i, longs = 0;

	nxd_stream_init(&s, 256 * K);
	for (i = 0; i < 20000; i++)
		longs += nxd_stream_write(&s, (nt_rand() >> 24) & ~7ULL, 8);
	CHECK_EQ(longs, 0);
	CHECK(s.misses >= 19990);
	CHECK(s.evictions >= 19990 - NXD_STREAM_SLOTS);

	/* a stream amid random writes is still found */
	nxd_stream_init(&s, 256 * K);
	longs = 0;
	for (i = 0; i < 4000; i++) {
		nxd_stream_write(&s, (nt_rand() >> 24) & ~7ULL, 8);
		if (i % 4 == 0)
			longs += nxd_stream_write(&s, (1ULL << 50) + i / 4 * 8,
						  8);
	}
	CHECK_EQ(longs, 1000 - 63);
}

static void test_stream_lru(void)
{
	struct nxd_streams s;
	unsigned int i;

	nxd_stream_init(&s, 1 * M);
	for (i = 0; i < NXD_STREAM_SLOTS; i++)
		nxd_stream_write(&s, (u64)i << 20, 8);
	CHECK_EQ(s.evictions, 0);
	/* every stream but 3 used again: 3 is the least recent */
	for (i = 0; i < NXD_STREAM_SLOTS; i++)
		if (i != 3)
			nxd_stream_write(&s, ((u64)i << 20) + 8, 8);
	CHECK_EQ(s.hits, NXD_STREAM_SLOTS - 1);
	nxd_stream_write(&s, 999ULL << 20, 8);
	CHECK_EQ(s.evictions, 1);
	/* 3 is gone, 4 is kept */
	nxd_stream_write(&s, (4ULL << 20) + 16, 8);
	CHECK_EQ(s.hits, NXD_STREAM_SLOTS);
	nxd_stream_write(&s, (3ULL << 20) + 8, 8);
	CHECK_EQ(s.hits, NXD_STREAM_SLOTS);
	CHECK_EQ(s.misses, NXD_STREAM_SLOTS + 2);
	CHECK_EQ(s.evictions, 2);

	/* extremes: no overflow, no entry for an impossible write */
	nxd_stream_init(&s, 4096);
	CHECK(!nxd_stream_write(&s, 0, 0));
	CHECK(!nxd_stream_write(&s, ~0ULL, 1));
	CHECK(!nxd_stream_write(&s, 1, ~0ULL));
	CHECK_EQ(s.misses + s.hits, 0);
	CHECK(nxd_stream_write(&s, ~0ULL - 8, 8));
	CHECK(nxd_stream_write(&s, 0, ~0ULL));
}

/* ---- stripe-aware split ---- */

/* By walking the sectors: the reference. */
static void ref_split(u64 sector, u64 sectors, u32 stripe,
		      struct nxd_split *o)
{
	u64 ss = stripe / 512, i, first = ~0ULL, last = 0;

	o->head = sectors;
	o->mid = 0;
	o->tail = 0;
	if (!ss || stripe % 512)
		return;
	/* the whole stripes inside [sector, sector + sectors) */
	for (i = sector; i < sector + sectors; i++) {
		if (i % ss == 0 && i + ss <= sector + sectors) {
			if (first == ~0ULL)
				first = i;
			last = i + ss;
		}
	}
	if (first == ~0ULL)
		return;
	o->head = first - sector;
	o->mid = last - first;
	o->tail = sector + sectors - last;
}

static void sp(u64 sector, u64 sectors, u32 stripe, u64 h, u64 m, u64 t,
	       int line)
{
	struct nxd_split o;
	bool r = nxd_split_stripes(sector, sectors, stripe, &o);

	if (o.head != h || o.mid != m || o.tail != t)
		fprintf(stderr, "split line %d: %llu %llu %llu\n", line,
			(unsigned long long)o.head, (unsigned long long)o.mid,
			(unsigned long long)o.tail);
	CHECK(o.head == h && o.mid == m && o.tail == t);
	CHECK_EQ(r, m > 0);
}

#define SP(s, n, st, h, m, t) sp(s, n, st, h, m, t, __LINE__)

static void test_split(void)
{
	const u32 S = 256 * K;	/* 512 sectors */
	struct nxd_split o, w;
	unsigned int i, bad = 0;

	SP(0, 512, S, 0, 512, 0);		/* exactly one stripe */
	SP(512, 512, S, 0, 512, 0);
	SP(0, 1024, S, 0, 1024, 0);		/* two */
	SP(8, 100, S, 100, 0, 0);		/* sub-stripe */
	SP(0, 511, S, 511, 0, 0);		/* one sector short */
	/* no whole stripe: all in head, whatever the boundaries crossed */
	SP(1, 512, S, 512, 0, 0);		/* a stripe's length, unaligned */
	SP(256, 512, S, 512, 0, 0);		/* across one boundary */
	SP(256, 1024, S, 256, 512, 256);	/* head, stripe, tail */
	SP(0, 700, S, 0, 512, 188);		/* aligned start, tail */
	SP(100, 924, S, 412, 512, 0);		/* ends on a boundary */
	SP(5, 0, S, 0, 0, 0);			/* empty */
	SP(0, 1024, 0, 1024, 0, 0);		/* no stripe size */
	SP(0, 1024, 1000, 1024, 0, 0);		/* not sectors */
	SP(0, 1024, 512, 0, 1024, 0);		/* one-sector stripes */
	SP(0, 1200, 192 * K, 0, 1152, 48);	/* 3 x 64K, not a power of 2 */
	SP(300, 1200, 192 * K, 84, 768, 348);
	SP(0, 64 * M / 512, NXD_U32_MAX & ~511U, 64 * M / 512, 0, 0);

	/* extremes: no overflow (UBSan), the parts add up */
	CHECK(nxd_split_stripes(0, ~0ULL, S, &o));
	CHECK(o.head == 0 && o.head + o.mid + o.tail == ~0ULL && o.tail == 511);
	CHECK(nxd_split_stripes(~0ULL - 2000, 2000, S, &o));
	CHECK_EQ(o.head + o.mid + o.tail, 2000);
	CHECK(!nxd_split_stripes(~0ULL - 100, 100, NXD_U32_MAX & ~511U, &o));
	CHECK(nxd_split_stripes(3, ~0ULL - 3, 4096, &o));
	CHECK(o.head == 5 && o.head + o.mid + o.tail == ~0ULL - 3);

	for (i = 0; i < 20000; i++) {
		static const u32 st[] = { 0, 4096, 12288, 65536, 192 * 1024,
					  256 * 1024, 1 << 20, 100 };
		u32 stripe = st[nt_below(ARRAY_SIZE(st))];
		u64 sector = nt_below(3) ? nt_below(1 << 14) :
			     nt_rand() >> 20;
		u64 sectors = nt_below(6000);

		nxd_split_stripes(sector, sectors, stripe, &o);
		ref_split(sector, sectors, stripe, &w);
		if (o.head != w.head || o.mid != w.mid || o.tail != w.tail)
			bad++;
		if (o.mid && (stripe / 512 == 0 ||
			      (sector + o.head) % (stripe / 512) ||
			      o.mid % (stripe / 512)))
			bad++;
	}
	CHECK_EQ(bad, 0);
}

/* ---- closed-loop simulation: a workload that changes phase ---- */

struct sim {
	struct nxd_auto a;
	u64 now;
	u64 log;		/* bytes in the log */
	u64 cap;		/* the log's size */
	u64 drain;		/* the destager's bytes per tick */
	u64 in;			/* bytes logged this tick */
	u32 max_occ;
	u64 big_logged;		/* 1M writes logged, probes aside */
};

static void sim_put(struct sim *s, u64 bytes, bool seq)
{
	u64 probes = s->a.st.probes;

	if (sim_write(&s->a, bytes, seq)) {
		s->in += bytes;
		if (bytes >= M && s->a.st.probes == probes)
			s->big_logged++;
	}
}

static void sim_tick(struct sim *s)
{
	u64 out = s->log + s->in < s->drain ? s->log + s->in : s->drain;
	u32 occ, head;

	s->log = s->log + s->in - out;
	if (s->log > s->cap)
		s->log = s->cap;
	occ = (u32)(s->log * 100 / s->cap);
	head = s->in < s->drain ? (u32)((s->drain - s->in) * 100 / s->drain) : 0;
	if (occ > s->max_occ)
		s->max_occ = occ;
	nxd_auto_set_log(&s->a, occ, head);
	s->in = 0;
	s->now += s->a.cfg.interval_ms * MS;
	nxd_auto_tick(&s->a, s->now);
}

static void test_sim_phases(void)
{
	static const u32 small[] = { 4 * K, 8 * K, 16 * K, 32 * K, 64 * K };
	struct nxd_auto_cfg c;
	struct sim s;
	unsigned int t, i;

	lcg_state = 2026;
	memset(&s, 0, sizeof(s));
	cfg_test(&c);
	c.max_thr = 4 * M;
	CHECK_EQ(nxd_auto_init(&s.a, &c, 64 * K), 0);
	s.cap = 256ULL * M;
	s.drain = 1 * M;	/* 10 MB/s at 10 ticks per second */

	/* 1: small random writes, some of them up to 1M; little volume */
	for (t = 0; t < 300; t++) {
		for (i = 0; i < 4; i++)
			sim_put(&s, 4096ULL << (lcg() % 9), false);
		sim_tick(&s);
	}
	/* the log is faster for all of them: all logged */
	CHECK(nxd_auto_threshold(&s.a) >= 1 * M);
	CHECK(s.max_occ < c.low_wm);

	/* 2: streams of 1M writes: sequential on the HDD, faster there */
	s.big_logged = 0;
	for (t = 0; t < 300; t++) {
		for (i = 0; i < 8; i++)
			sim_put(&s, 1 * M, true);
		sim_tick(&s);
	}
	CHECK(nxd_auto_threshold(&s.a) < 1 * M);
	CHECK(nxd_auto_threshold(&s.a) >= c.min_thr);
	CHECK(s.big_logged < 300);	/* only until it learnt */

	/* 3: mixed: the streams and many small random writes, more than
	 * the destager drains if all are logged: the log fills, the
	 * threshold comes down, the streams stay on the HDD */
	s.max_occ = 0;
	s.big_logged = 0;
	for (t = 0; t < 600; t++) {
		for (i = 0; i < 20; i++) {
			unsigned int k;

			for (k = 0; k < ARRAY_SIZE(small); k++)
				sim_put(&s, small[k], false);
		}
		for (i = 0; i < 4; i++)
			sim_put(&s, 1 * M, true);
		sim_tick(&s);
	}
	CHECK(nxd_auto_threshold(&s.a) <= 64 * K);
	CHECK(nxd_auto_threshold(&s.a) >= c.min_thr);
	CHECK(s.max_occ < c.high_wm);
	CHECK(s.max_occ > c.low_wm);
	CHECK_EQ(s.big_logged, 0);
	CHECK(s.a.st.by_reason[NXD_AUTO_R_LOG_FULL] +
	      s.a.st.by_reason[NXD_AUTO_R_HEADROOM] >= 1);
	/* no flapping: at most one change per hold_ticks, far fewer */
	CHECK(s.a.st.changes < 1200 / c.hold_ticks / 4);
	fprintf(stderr, "sim: threshold %u, %llu changes (%llu up, %llu down), max occupancy %u %%, %llu probes\n",
		nxd_auto_threshold(&s.a), (unsigned long long)s.a.st.changes,
		(unsigned long long)s.a.st.raises,
		(unsigned long long)s.a.st.lowers, s.max_occ,
		(unsigned long long)s.a.st.probes);
}

NT_MAIN("test_auto", test_cfg, test_names, test_ewma, test_raise,
	test_lower, test_crossover, test_bounds, test_hysteresis,
	test_occupancy, test_headroom, test_probe, test_stream_runs,
	test_stream_random, test_stream_lru, test_split, test_sim_phases)
