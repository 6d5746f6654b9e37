// SPDX-License-Identifier: GPL-2.0
/*
 * Randomized test of the extent index (nxd_index.c) against a plain
 * array model: a universe of candidate block numbers with per-key
 * presence, slot, mask and flags, and the owner of each ring slot.
 * Checks every operation's result, range walks against the model's
 * sorted keys, and periodically the whole index: in-order keys strictly
 * increasing, every entry in its own slot and in the model, the
 * red-black rules (no red node with a red child, one black height), one
 * hash bucket per live entry, the count and the memory figure.
 *
 * Usage: test_index [seed [ops]]   (or NXD_SEED=..., NXD_OPS=...)
 * Default: 2,000,000 ops.  The same seed and ops reproduce the run.
 */
#include "nxd_test.h"
#include "user/rbtree_augmented.h"

struct model {
	u64 *key;
	u8 *present;
	u32 *slot;
	u8 *mask, *flags;
	u32 n;		/* universe size */
	u64 count;
	s64 *owner;	/* per slot: key index, or -1 */
	u32 cap;
};

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

/* Black height of @n's subtree, or -1 if a rule is broken below it. */
static int rb_check(const struct rb_node *n, bool parent_red)
{
	int l, r;
	bool red;

	if (!n)
		return 1;
	red = !__rb_is_black(n->__rb_parent_color);
	if (red && parent_red)
		return -1;
	l = rb_check(n->rb_left, red);
	r = rb_check(n->rb_right, red);
	if (l < 0 || r < 0 || l != r)
		return -1;
	return l + !red;
}

static void verify_all(const struct nxd_index *ix, const struct model *m)
{
	const struct rb_node *rn;
	u64 prev = 0, seen = 0;
	int bad = 0;
	u32 i;

	CHECK_EQ(ix->count, m->count);
	CHECK(rb_check(ix->root.rb_node, false) > 0);
	for (rn = rb_first(&ix->root); rn; rn = rb_next(rn)) {
		const struct nxd_ient *e = rb_entry(rn, struct nxd_ient, node);
		s64 k;

		if (seen && e->block <= prev)
			bad++;
		prev = e->block;
		seen++;
		if (e != &ix->tab[e->slot] || e->slot >= ix->cap) {
			bad++;
			continue;
		}
		k = m->owner[e->slot];
		if (k < 0 || m->key[k] != e->block || !m->present[k] ||
		    m->mask[k] != e->mask || m->flags[k] != e->flags)
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(seen, m->count);
	for (i = 0; i < m->n; i++) {
		struct nxd_ient *e = nxd_index_find(ix, m->key[i]);

		if (m->present[i] ? !e || e->slot != m->slot[i] : e != NULL)
			bad++;
	}
	for (i = 0; i < ix->cap; i++) {
		struct nxd_ient *e = nxd_index_at(ix, i);

		if (m->owner[i] < 0 ? e != NULL : e != &ix->tab[i])
			bad++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(ix->hcap, (u64)ix->cap * 5 / 4 + 1);
	CHECK_EQ(nxd_index_mem(ix), (size_t)ix->cap * sizeof(struct nxd_ient) +
		 (size_t)ix->hcap * sizeof(u32));
	/* Every live entry has one hash bucket, the others none. */
	{
		u64 used = 0;

		for (i = 0; i < ix->hcap; i++) {
			u32 v = ix->hash[i];

			if (!v)
				continue;
			used++;
			if (v > ix->cap || ix->tab[v - 1].block == NXD_IE_EMPTY)
				bad++;
		}
		CHECK_EQ(used, m->count);
		CHECK_EQ(bad, 0);
	}
}

/* Walk [first, last] with first/next and compare with the model. */
static void check_range(const struct nxd_index *ix, const struct model *m,
			u64 *want, u64 first, u64 last)
{
	struct nxd_ient *e, *tmp;
	u32 i, nw = 0, ng = 0;
	int bad = 0;

	for (i = 0; i < m->n; i++)
		if (m->present[i] && m->key[i] >= first && m->key[i] <= last)
			want[nw++] = m->key[i];
	qsort(want, nw, sizeof(*want), cmp_u64);
	for (e = nxd_index_first(ix, first, last); e; e = tmp) {
		tmp = nxd_index_next(e, last);
		if (ng >= nw || e->block != want[ng])
			bad++;
		ng++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(ng, nw);
	e = nxd_index_first(ix, first, last);
	CHECK(nw ? e && e->block == want[0] : !e);
}

enum keymode { K_DENSE, K_RANDOM, K_CLUSTER, K_EDGE, K_NMODES };

static void gen_keys(struct model *m, enum keymode km)
{
	u64 base = nt_rand() >> nt_below(64);
	u32 i, j;

	for (i = 0; i < m->n; i++) {
		u64 k;

		do {
			switch (km) {
			case K_DENSE:
				k = base + i;
				break;
			case K_RANDOM:
				k = nt_rand();
				break;
			case K_CLUSTER:
				/* a few 1 MiB regions, sparse within */
				k = ((nt_below(8) + (base >> 20)) << 8) +
				    nt_below(256) + ((u64)nt_below(4) << 30);
				break;
			default:
				k = nt_below(2) ? nt_below(1000) :
				    ~0ULL - 1 - nt_below(1000);
				break;
			}
			if (k == NXD_IE_EMPTY)
				k = 0;
			/* Distinct keys where collisions are likely. */
			j = i;
			if (km == K_CLUSTER || km == K_EDGE)
				for (j = 0; j < i; j++)
					if (m->key[j] == k)
						break;
		} while (j < i);
		m->key[i] = k;
	}
}

/* A range to walk: around a key, or anywhere. */
static void pick_range(const struct model *m, u64 *first, u64 *last)
{
	u64 k = m->key[nt_below(m->n)];
	u64 w = nt_below(4) ? nt_below(600) : nt_rand() >> nt_below(64);

	switch (nt_below(4)) {
	case 0:
		*first = k;
		break;
	case 1:
		*first = k > w / 2 ? k - w / 2 : 0;
		break;
	case 2:
		*first = k + 1;
		break;
	default:
		*first = nt_rand() >> nt_below(64);
		break;
	}
	*last = w > ~0ULL - *first ? ~0ULL : *first + w;
}

static u64 run_phase(u32 cap, u32 n, enum keymode km, u64 ops)
{
	struct nxd_index ix;
	struct model m;
	u64 op, verify_every = n <= 1000 ? 997 : 20011;
	u64 *want;
	u32 i;

	CHECK_EQ(nxd_index_init(&ix, cap), 0);
	CHECK_EQ(ix.cap, cap);
	CHECK_EQ(ix.count, 0);
	memset(&m, 0, sizeof(m));
	m.n = n;
	m.cap = cap;
	m.key = calloc(n, sizeof(*m.key));
	m.present = calloc(n, 1);
	m.slot = calloc(n, sizeof(*m.slot));
	m.mask = calloc(n, 1);
	m.flags = calloc(n, 1);
	m.owner = malloc(cap * sizeof(*m.owner));
	want = malloc((n + 1) * sizeof(*want));
	CHECK(m.key && m.present && m.slot && m.mask && m.flags && m.owner &&
	      want);
	for (i = 0; i < cap; i++)
		m.owner[i] = -1;
	gen_keys(&m, km);

	for (op = 0; op < ops; op++) {
		u32 k = (u32)nt_below(n), r = (u32)nt_below(100), slot;
		struct nxd_ient old, *e;
		int ret;

		if (r < 40) {
			u8 mask = (u8)(1 + nt_below(255));

			/* A free slot mostly, else its own or any slot. */
			slot = (u32)nt_below(cap);
			if (nt_below(4)) {
				for (i = 0; i < 8 && m.owner[slot] >= 0; i++)
					slot = (u32)nt_below(cap);
			} else if (nt_below(2) && m.present[k]) {
				slot = m.slot[k];
			}
			memset(&old, 0xa5, sizeof(old));
			ret = nxd_index_set(&ix, m.key[k], slot, mask, &old);
			if (m.owner[slot] >= 0 && m.owner[slot] != k) {
				CHECK_EQ(ret, -EEXIST);
				continue;
			}
			if (m.present[k]) {
				CHECK_EQ(ret, 1);
				CHECK(old.block == m.key[k] &&
				      old.slot == m.slot[k] &&
				      old.mask == m.mask[k] &&
				      old.flags == m.flags[k]);
				m.owner[m.slot[k]] = -1;
			} else {
				CHECK_EQ(ret, 0);
				m.present[k] = 1;
				m.count++;
			}
			m.slot[k] = slot;
			m.mask[k] = mask;
			m.flags[k] = 0;
			m.owner[slot] = k;
		} else if (r < 65) {
			bool had = m.present[k];

			ret = nxd_index_del(&ix, m.key[k], &old);
			CHECK_EQ(ret, had);
			if (had) {
				CHECK(old.block == m.key[k] &&
				      old.slot == m.slot[k] &&
				      old.mask == m.mask[k]);
				m.owner[m.slot[k]] = -1;
				m.present[k] = 0;
				m.count--;
			}
		} else if (r < 80) {
			e = nxd_index_find(&ix, m.key[k]);
			CHECK(m.present[k] ? e && e->block == m.key[k] &&
			      e->slot == m.slot[k] && e->mask == m.mask[k] &&
			      e->flags == m.flags[k] : !e);
		} else if (r < 85) {
			e = nxd_index_find(&ix, m.key[k]);
			if (e) {
				e->flags = (u8)nt_below(8);
				m.flags[k] = e->flags;
			}
		} else if (r < 95) {
			u64 first, last;

			/* The model's walk is O(n): rarer in big universes. */
			if (n > 5000 && nt_below(200))
				continue;
			pick_range(&m, &first, &last);
			check_range(&ix, &m, want, first, last);
		} else if (r < 99) {
			slot = (u32)nt_below(cap + 2);
			e = nxd_index_at(&ix, slot);
			CHECK(slot < cap && m.owner[slot] >= 0 ?
			      e == &ix.tab[slot] && e->block == m.key[m.owner[slot]] :
			      !e);
		} else if (!nt_below(500)) {
			nxd_index_clear(&ix);
			for (i = 0; i < n; i++)
				m.present[i] = 0;
			for (i = 0; i < cap; i++)
				m.owner[i] = -1;
			m.count = 0;
		}
		if (op % verify_every == 0)
			verify_all(&ix, &m);
	}
	verify_all(&ix, &m);

	/* Remove everything through a range walk, as invalidation does. */
	{
		struct nxd_ient *e, *tmp;
		u64 removed = 0;

		for (e = nxd_index_first(&ix, 0, ~0ULL - 1); e; e = tmp) {
			tmp = nxd_index_next(e, ~0ULL - 1);
			CHECK(nxd_index_del(&ix, e->block, NULL));
			removed++;
		}
		CHECK_EQ(removed, m.count);
		CHECK_EQ(ix.count, 0);
		CHECK(!nxd_index_first(&ix, 0, ~0ULL));
		for (i = 0; i < cap; i++)
			CHECK(!nxd_index_at(&ix, i));
	}
	nxd_index_free(&ix);
	CHECK(!ix.tab);
	free(m.key);
	free(m.present);
	free(m.slot);
	free(m.mask);
	free(m.flags);
	free(m.owner);
	free(want);
	return op;
}

static void test_fixed(void)
{
	struct nxd_index ix;
	struct nxd_ient old, *e, *tmp;
	u64 i, n;

	CHECK_EQ(nxd_index_init(&ix, 0), -EINVAL);
	CHECK(!ix.tab);
	CHECK_EQ(nxd_index_init(&ix, 1ULL << 32), -EINVAL);
	CHECK(!ix.tab);
	CHECK_EQ(nxd_index_init(&ix, 0xfffffff0ULL), -EINVAL); /* hash > u32 */
	CHECK(!ix.tab && !ix.hash);

	CHECK_EQ(nxd_index_init(&ix, 64), 0);
	CHECK_EQ(ix.cap, 64);
	CHECK_EQ(ix.hcap, 81);
	CHECK_EQ(nxd_index_mem(&ix), 64 * sizeof(struct nxd_ient) + 81 * 4);
	CHECK(!nxd_index_find(&ix, 0));
	CHECK(!nxd_index_first(&ix, 0, ~0ULL));
	CHECK_EQ(nxd_index_set(&ix, NXD_IE_EMPTY, 1, 1, NULL), -EINVAL);
	CHECK_EQ(nxd_index_set(&ix, 1, 64, 1, NULL), -EINVAL);
	CHECK(!nxd_index_del(&ix, NXD_IE_EMPTY, NULL));
	CHECK(!nxd_index_find(&ix, NXD_IE_EMPTY));
	CHECK_EQ(nxd_index_set(&ix, 5, 7, 0xff, NULL), 0);
	e = nxd_index_find(&ix, 5);
	CHECK(e && e == &ix.tab[7] && e->slot == 7 && e->mask == 0xff &&
	      e->flags == 0);
	CHECK(nxd_index_at(&ix, 7) == e);
	CHECK(!nxd_index_at(&ix, 8));
	e->flags |= NXD_IE_DESTAGING;
	e->rsvd = 0x1234;
	/* A new copy in another slot: that slot's entry takes the key. */
	CHECK_EQ(nxd_index_set(&ix, 5, 9, 0x0f, &old), 1);
	CHECK(old.block == 5 && old.slot == 7 && old.mask == 0xff &&
	      old.flags == NXD_IE_DESTAGING && old.rsvd == 0x1234);
	e = nxd_index_find(&ix, 5);
	CHECK(e && e->slot == 9 && e->mask == 0x0f && e->flags == 0 &&
	      e->rsvd == 0);
	CHECK(!nxd_index_at(&ix, 7));
	CHECK_EQ(ix.count, 1);
	/* The same slot again: replaced in place. */
	CHECK_EQ(nxd_index_set(&ix, 5, 9, 0x01, &old), 1);
	CHECK(old.slot == 9 && old.mask == 0x0f);
	/* A slot holding another block is refused, nothing changed. */
	CHECK_EQ(nxd_index_set(&ix, 6, 9, 0xff, NULL), -EEXIST);
	CHECK_EQ(nxd_index_set(&ix, 6, 10, 0xff, NULL), 0);
	CHECK_EQ(nxd_index_set(&ix, 5, 10, 0xff, NULL), -EEXIST);
	CHECK(nxd_index_find(&ix, 5)->slot == 9 &&
	      nxd_index_find(&ix, 5)->mask == 0x01);
	CHECK(nxd_index_find(&ix, 6)->slot == 10);
	CHECK(nxd_index_first(&ix, 0, 4) == NULL);
	CHECK(nxd_index_first(&ix, 0, 5)->block == 5);
	CHECK(nxd_index_first(&ix, 6, ~0ULL)->block == 6);
	CHECK(!nxd_index_first(&ix, 7, ~0ULL));
	CHECK(nxd_index_next(nxd_index_find(&ix, 5), 6)->block == 6);
	CHECK(!nxd_index_next(nxd_index_find(&ix, 5), 5));
	CHECK(nxd_index_del(&ix, 5, &old));
	CHECK(old.slot == 9);
	CHECK(!nxd_index_del(&ix, 5, &old));
	CHECK(nxd_index_del(&ix, 6, NULL));
	CHECK(!nxd_index_first(&ix, 0, ~0ULL));
	/* Every slot used: all 64 entries, none more. */
	for (i = 0; i < 64; i++)
		CHECK_EQ(nxd_index_set(&ix, 1000 - i * 10, (u32)i, 1, NULL), 0);
	CHECK_EQ(ix.count, 64);
	n = 0;
	for (e = nxd_index_first(&ix, 370, 1000); e; e = tmp) {
		tmp = nxd_index_next(e, 1000);
		CHECK_EQ(e->block, 370 + n * 10);
		n++;
	}
	CHECK_EQ(n, 64);
	/* Removal while walking: every other entry. */
	n = 0;
	for (e = nxd_index_first(&ix, 400, 800); e; e = tmp) {
		tmp = nxd_index_next(e, 800);
		if (e->block % 20 == 0)
			n += nxd_index_del(&ix, e->block, NULL);
	}
	CHECK_EQ(n, 21);
	CHECK_EQ(ix.count, 43);
	CHECK(!nxd_index_find(&ix, 400) && nxd_index_find(&ix, 410));
	/* Cleared in place: nothing found, refillable. */
	nxd_index_clear(&ix);
	CHECK_EQ(ix.count, 0);
	CHECK_EQ(ix.cap, 64);
	for (i = 0; i < 64; i++)
		CHECK(!nxd_index_at(&ix, i) && ix.tab[i].slot == i);
	CHECK(!nxd_index_find(&ix, 410));
	CHECK_EQ(nxd_index_set(&ix, 14, 3, 0xff, NULL), 0);
	CHECK(nxd_index_find(&ix, 14) && nxd_index_find(&ix, 14)->slot == 3);
	nxd_index_free(&ix);
	nxd_index_free(&ix);	/* idempotent */
}

int main(int argc, char **argv)
{
	static const u32 caps[] = { 1, 2, 50, 64, 100, 257, 1000, 4096,
				    20000, 100000 };
	const char *e = argc > 2 ? argv[2] : getenv("NXD_OPS");
	u64 seed = nt_seed(argc, argv, 1);
	u64 total = e && *e ? strtoull(e, NULL, 0) : 2000000;
	u64 done = 0;
	int phases = 0;

	nt_rng_state = seed;
	fprintf(stderr, "test_index: seed %" PRIu64 ", %" PRIu64 " ops\n",
		seed, total);
	test_fixed();

	while (done < total) {
		u32 cap = caps[nt_below(ARRAY_SIZE(caps))];
		enum keymode km = (enum keymode)nt_below(K_NMODES);
		u64 n, ops;

		/* Universes from half the slots to twice them. */
		n = cap / 2 + nt_below(2 * (u64)cap);
		if ((km == K_CLUSTER || km == K_EDGE) && n > 2000)
			n = 2000;	/* distinct-key generation is O(n^2) */
		if (n < 1)
			n = 1;
		ops = 20000 + nt_below(200000);
		if (ops > total - done)
			ops = total - done;
		done += run_phase(cap, (u32)n, km, ops);
		phases++;
	}
	fprintf(stderr, "index: %d phases, %" PRIu64 " ops\n", phases, done);
	nt_report();
	return 0;
}
