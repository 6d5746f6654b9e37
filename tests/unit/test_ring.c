// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for the log ring accounting (nxd_ring.c): fixed cases, reset,
 * trim and unpush, and random operations against a brute-force model of
 * the occupied blocks.
 *
 * Usage: test_ring [seed]   (or NXD_SEED=...; NXD_RING_OPS=... random ops)
 */
#include "nxd_test.h"

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

/* Reset in place: empty, next segment where asked, capacity kept. */
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

static void test_ring_random(void)
{
	const char *e = getenv("NXD_RING_OPS");
	u64 nops = e && *e ? strtoull(e, NULL, 0) : 300000;
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

/*
 * Superseded copies and the tail: segments 20..25, one data block each
 * at slot pos + 1.  The degraded destager passes a segment only once the
 * copies that superseded its blocks are durable (6.1 crash campaign, seed
 * 930 cut 0).
 */
static void test_ring_safe_prefix(void)
{
	struct nxd_ring r;
	u8 lossy[8] = { 0 };
	u64 pos;
	int i;

	CHECK_EQ(nxd_ring_init(&r, 512, 0, 20), 0);
	for (i = 0; i < 6; i++) {
		CHECK_EQ(nxd_ring_reserve(&r, 1, &pos), 0);
		nxd_ring_push(&r, pos, 1, 1);
	}
	/* Nothing superseded: every segment may go. */
	CHECK_EQ(nxd_ring_safe_prefix(&r, 6, 0, NXD_U64_MAX, lossy), 6);
	/* 20's block superseded by 24's copy; 21's block dropped (destaged). */
	CHECK(nxd_ring_put(&r, 1, 24, false));
	CHECK(nxd_ring_put(&r, 3, 0, false));
	CHECK(nxd_ring_at(&r, 0)->sup == 4 && !nxd_ring_at(&r, 0)->live);
	CHECK(nxd_ring_at(&r, 1)->sup == 0 && !nxd_ring_at(&r, 1)->live);
	CHECK(!nxd_ring_put(&r, 3, 0, false));		/* no live block left there */
	CHECK(!nxd_ring_put(&r, 400, 0, false));	/* no segment there */
	/* 24 neither flushed nor among the passed: nothing passes. */
	CHECK_EQ(nxd_ring_safe_prefix(&r, 4, 0, NXD_U64_MAX, lossy), 0);
	CHECK_EQ(nxd_ring_safe_prefix(&r, 4, 24, NXD_U64_MAX, lossy), 0);
	/* Flushed on the SSD (segments before 25), or on the HDD (from 24). */
	CHECK_EQ(nxd_ring_safe_prefix(&r, 4, 25, NXD_U64_MAX, lossy), 4);
	CHECK_EQ(nxd_ring_safe_prefix(&r, 4, 0, 24, lossy), 4);
	/* Among the passed and copied: up to it and beyond. */
	CHECK_EQ(nxd_ring_safe_prefix(&r, 5, 0, NXD_U64_MAX, lossy), 5);
	CHECK_EQ(nxd_ring_safe_prefix(&r, 6, 0, NXD_U64_MAX, lossy), 6);
	/* ... unless its copy did not reach the HDD. */
	lossy[4] = 1;
	CHECK_EQ(nxd_ring_safe_prefix(&r, 6, 0, NXD_U64_MAX, lossy), 0);
	CHECK_EQ(nxd_ring_safe_prefix(&r, 6, 25, NXD_U64_MAX, lossy), 6);
	lossy[4] = 0;
	/* 22 superseded by 23, then 23 by 25: chains are checked link by link. */
	CHECK(nxd_ring_put(&r, 5, 23, false));
	CHECK(nxd_ring_put(&r, 7, 25, false));
	CHECK_EQ(nxd_ring_safe_prefix(&r, 5, 24, NXD_U64_MAX, lossy), 0);
	CHECK_EQ(nxd_ring_safe_prefix(&r, 6, 24, NXD_U64_MAX, lossy), 6);
	CHECK_EQ(nxd_ring_safe_prefix(&r, 5, 26, NXD_U64_MAX, lossy), 5);
	CHECK_EQ(nxd_ring_safe_prefix(&r, 3, 24, 23, lossy), 3);
	/* n beyond the ring: the ring's count. */
	CHECK_EQ(nxd_ring_safe_prefix(&r, 100, 26, NXD_U64_MAX, lossy), 6);
	/* A new segment in the slot starts with no superseder. */
	nxd_ring_pop(&r);
	CHECK_EQ(nxd_ring_reserve(&r, 1, &pos), 0);
	nxd_ring_push(&r, pos, 1, 1);
	CHECK_EQ(nxd_ring_at(&r, 5)->sup, 0);
	nxd_ring_free(&r);
}

/* The clean count: live blocks the HDD holds, never above live. */
static void test_ring_clean(void)
{
	struct nxd_ring r;
	u64 pos;

	CHECK_EQ(nxd_ring_init(&r, 512, 0, 1), 0);
	CHECK_EQ(nxd_ring_reserve(&r, 3, &pos), 0);
	nxd_ring_push(&r, pos, 3, 3);			/* slots 1..3 */
	CHECK_EQ(nxd_ring_at(&r, 0)->clean, 0);
	CHECK_EQ(nxd_segd_dirty(nxd_ring_at(&r, 0)), 3);
	CHECK(nxd_ring_clean(&r, 1));
	CHECK(nxd_ring_clean(&r, 2));
	CHECK_EQ(nxd_segd_dirty(nxd_ring_at(&r, 0)), 1);
	/* A clean block superseded, a dirty one dropped. */
	CHECK(nxd_ring_put(&r, 1, 5, true));
	CHECK(nxd_ring_put(&r, 3, 0, false));
	CHECK_EQ(nxd_ring_at(&r, 0)->live, 1);
	CHECK_EQ(nxd_ring_at(&r, 0)->clean, 1);
	CHECK_EQ(nxd_segd_dirty(nxd_ring_at(&r, 0)), 0);
	/* No more clean blocks than live ones. */
	CHECK(!nxd_ring_clean(&r, 2));
	CHECK(!nxd_ring_clean(&r, 400));
	CHECK(nxd_ring_put(&r, 2, 0, true));
	CHECK_EQ(nxd_ring_at(&r, 0)->clean, 0);
	/* A new segment starts with none. */
	nxd_ring_pop(&r);
	CHECK_EQ(nxd_ring_reserve(&r, 1, &pos), 0);
	nxd_ring_push(&r, pos, 1, 1);
	CHECK_EQ(nxd_ring_at(&r, 0)->clean, 0);
	nxd_ring_free(&r);
}

NT_MAIN("test_ring", test_ring_fixed, test_ring_reset, test_ring_trim_unpush,
	test_ring_random, test_ring_safe_prefix, test_ring_clean)
