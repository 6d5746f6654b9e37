// SPDX-License-Identifier: GPL-2.0
/*
 * Randomized test of the extent index (nxd_index.c) against a plain
 * array model: a universe of candidate block numbers with per-key
 * presence, slot, mask and flags.  Checks every operation's result and,
 * periodically, the whole table: contents, the linear-probing invariant
 * (no empty slot between an entry and its home), the region filter
 * counters, the count and the memory figure.
 *
 * Usage: test_index [seed [ops]]   (or NXD_SEED=..., NXD_OPS=...)
 * Default: 2,000,000 ops.  The same seed and ops reproduce the run.
 */
#include "nxd_test.h"

struct model {
	u64 *key;
	u8 *present;
	u32 *slot;
	u8 *mask, *flags;
	u32 n;		/* universe size */
	u64 count;
	u32 *filter;	/* expected region counters */
};

/* Independent restatement of the documented hashing. */
static u32 m_hash(u64 x)
{
	return (u32)((x * 0x9E3779B97F4A7C15ULL) >> 32);
}

static u32 m_home(u32 cap, u64 block)
{
	return (u32)(((u64)m_hash(block) * cap) >> 32);
}

static u32 m_fidx(u32 nfilter, u64 block)
{
	return m_hash(block >> NXD_REGION_SHIFT) % nfilter;
}

static bool m_maybe(const struct nxd_index *ix, const struct model *m,
		    u64 first, u64 nr)
{
	u64 last, r, rl;

	if (!m->count || !nr)
		return false;
	last = nr - 1 > ~0ULL - first ? ~0ULL : first + nr - 1;
	r = first >> NXD_REGION_SHIFT;
	rl = last >> NXD_REGION_SHIFT;
	if (rl - r + 1 > ix->nfilter)
		return true;
	for (; r <= rl; r++) {
		if (m->filter[m_hash(r) % ix->nfilter])
			return true;
		if (r == ~0ULL)
			break;
	}
	return false;
}

static bool m_has_in(const struct model *m, u64 first, u64 nr)
{
	u32 i;

	for (i = 0; i < m->n; i++)
		if (m->present[i] && m->key[i] >= first &&
		    m->key[i] - first < nr)
			return true;
	return false;
}

static void verify_all(const struct nxd_index *ix, const struct model *m)
{
	u32 i, j, cap = ix->cap, start, run, used = 0;
	u32 *fil = calloc(ix->nfilter, sizeof(*fil));
	int bad = 0;

	CHECK(fil);
	CHECK_EQ(ix->count, m->count);
	CHECK(ix->count <= (u64)cap - 1);
	for (i = 0; i < m->n; i++) {
		struct nxd_ient *e = nxd_index_find(ix, m->key[i]);

		if (!m->present[i]) {
			if (e)
				bad++;
			continue;
		}
		if (!e || e->block != m->key[i] || e->slot != m->slot[i] ||
		    e->mask != m->mask[i] || e->flags != m->flags[i]) {
			bad++;
			continue;
		}
		fil[m_fidx(ix->nfilter, m->key[i])]++;
	}
	CHECK_EQ(bad, 0);
	CHECK(!memcmp(fil, ix->filter, ix->nfilter * sizeof(*fil)));
	CHECK(!memcmp(fil, m->filter, ix->nfilter * sizeof(*fil)));
	free(fil);

	/*
	 * Probing invariant: walking from an empty slot, track the run of
	 * occupied slots; an entry at j with home k needs dist(k, j) < run.
	 */
	for (start = 0; start < cap; start++)
		if (ix->tab[start].block == NXD_IE_EMPTY)
			break;
	CHECK(start < cap);
	run = 0;
	for (i = 1; i <= cap; i++) {
		j = (start + i) % cap;
		if (ix->tab[j].block == NXD_IE_EMPTY) {
			run = 0;
			continue;
		}
		run++;
		used++;
		{
			u32 k = m_home(cap, ix->tab[j].block);
			u32 d = j >= k ? j - k : cap - k + j;

			if (d >= run)
				bad++;
		}
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(used, m->count);
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
			/*
			 * Keep keys distinct where collisions are likely
			 * (those universes are small); random 64-bit keys
			 * do not collide in practice.
			 */
			j = i;
			if (km == K_CLUSTER || km == K_EDGE)
				for (j = 0; j < i; j++)
					if (m->key[j] == k)
						break;
		} while (j < i);
		m->key[i] = k;
	}
}

static u64 run_phase(u64 max_entries, u32 n, enum keymode km, u64 ops)
{
	struct nxd_index ix;
	struct model m;
	u64 op, cap, verify_every;
	int ret, bad = 0;

	memset(&m, 0, sizeof(m));
	CHECK_EQ(nxd_index_init(&ix, max_entries), 0);
	cap = max_entries * 5 / 4 + 1;
	if (cap < 64)
		cap = 64;
	CHECK_EQ(ix.cap, cap);
	CHECK_EQ(ix.nfilter, max_entries < 64 ? 64 : max_entries);
	CHECK_EQ(nxd_index_mem(&ix), ix.cap * 16 + ix.nfilter * 4);
	CHECK_EQ(ix.count, 0);

	m.n = n;
	m.key = calloc(n, sizeof(*m.key));
	m.present = calloc(n, 1);
	m.slot = calloc(n, sizeof(*m.slot));
	m.mask = calloc(n, 1);
	m.flags = calloc(n, 1);
	m.filter = calloc(ix.nfilter, sizeof(*m.filter));
	CHECK(m.key && m.present && m.slot && m.mask && m.flags && m.filter);
	gen_keys(&m, km);
	verify_every = cap < 2000 ? 2000 : cap;

	for (op = 0; op < ops; op++) {
		u32 i = (u32)nt_below(n);
		u64 key = m.key[i];
		struct nxd_ient old, *e;
		u64 c = nt_below(100);

		memset(&old, 0x77, sizeof(old));
		if (c < 45) {
			u32 slot = (u32)nt_rand();
			u8 mask = (u8)nt_rand();

			ret = nxd_index_set(&ix, key, slot, mask,
					    nt_below(8) ? &old : NULL);
			if (m.present[i]) {
				if (ret != 1)
					bad++;
				if (old.block != 0x7777777777777777ULL &&
				    (old.block != key ||
				     old.slot != m.slot[i] ||
				     old.mask != m.mask[i] ||
				     old.flags != m.flags[i]))
					bad++;
			} else if (m.count >= ix.cap - 1) {
				if (ret != -ENOSPC)
					bad++;
				continue;
			} else {
				if (ret != 0)
					bad++;
				m.present[i] = 1;
				m.count++;
				m.filter[m_fidx(ix.nfilter, key)]++;
			}
			m.slot[i] = slot;
			m.mask[i] = mask;
			m.flags[i] = 0;
		} else if (c < 75) {
			bool r = nxd_index_del(&ix, key,
					       nt_below(8) ? &old : NULL);

			if (r != !!m.present[i])
				bad++;
			if (r && old.block != 0x7777777777777777ULL &&
			    (old.block != key || old.slot != m.slot[i] ||
			     old.mask != m.mask[i] ||
			     old.flags != m.flags[i]))
				bad++;
			if (m.present[i]) {
				m.present[i] = 0;
				m.count--;
				m.filter[m_fidx(ix.nfilter, key)]--;
			}
		} else if (c < 90) {
			e = nxd_index_find(&ix, key);
			if (!m.present[i] ? !!e :
			    (!e || e->block != key || e->slot != m.slot[i] ||
			     e->mask != m.mask[i] || e->flags != m.flags[i]))
				bad++;
			/* destage marks live in the entry */
			if (e && nt_below(2)) {
				e->flags ^= NXD_IE_DESTAGING;
				m.flags[i] ^= NXD_IE_DESTAGING;
			}
		} else {
			u64 first, nr;
			bool mb;

			switch (nt_below(4)) {
			case 0:
				first = key - nt_below(300);
				nr = 1 + nt_below(600);
				break;
			case 1:
				first = nt_rand();
				nr = 1 + nt_below(1 << 12);
				break;
			case 2:
				first = key;
				nr = nt_below(2) ? 0 : ~0ULL;
				break;
			default:
				/* around the "more regions than counters" cut */
				first = key & ~255ULL;
				nr = 1 + nt_below(64);
				if (ix.nfilter <= 4096 && nt_below(2))
					nr = ix.nfilter - 1 + nt_below(3);
				nr <<= 8;
				if (nt_below(2))
					first += nt_below(256);
				break;
			}
			mb = nxd_index_maybe(&ix, first, nr);
			if (mb != m_maybe(&ix, &m, first, nr))
				bad++;
			/* never a false negative */
			if (!mb && nt_below(16) == 0 &&
			    m_has_in(&m, first, nr))
				bad++;
		}
		if (bad) {
			fprintf(stderr, "index mismatch at op %" PRIu64
				" (key %#" PRIx64 ")\n", op, key);
			break;
		}
		if ((op + 1) % verify_every == 0)
			verify_all(&ix, &m);
	}
	CHECK_EQ(bad, 0);
	nt_pass += op;	/* each op was checked against the model */
	verify_all(&ix, &m);

	/* drain everything: table must end empty with zeroed filter */
	{
		u32 i, nz = 0;

		for (i = 0; i < n; i++) {
			if (m.present[i]) {
				CHECK(nxd_index_del(&ix, m.key[i], NULL));
				m.present[i] = 0;
				m.count--;
				m.filter[m_fidx(ix.nfilter, m.key[i])]--;
			}
		}
		CHECK_EQ(ix.count, 0);
		for (i = 0; i < ix.cap; i++)
			nz += ix.tab[i].block != NXD_IE_EMPTY;
		for (i = 0; i < ix.nfilter; i++)
			nz += ix.filter[i] != 0;
		CHECK_EQ(nz, 0);
		CHECK(!nxd_index_maybe(&ix, 0, ~0ULL));
	}

	nxd_index_free(&ix);
	CHECK(!ix.tab && !ix.filter);
	free(m.key);
	free(m.present);
	free(m.slot);
	free(m.mask);
	free(m.flags);
	free(m.filter);
	return op;
}

static void test_fixed(void)
{
	struct nxd_index ix;
	struct nxd_ient old, *e;
	u64 i;

	CHECK_EQ(nxd_index_init(&ix, 0), 0);
	CHECK_EQ(ix.cap, 64);
	CHECK_EQ(ix.nfilter, 64);
	CHECK(!nxd_index_find(&ix, 0));
	CHECK(!nxd_index_maybe(&ix, 0, ~0ULL));
	CHECK_EQ(nxd_index_set(&ix, NXD_IE_EMPTY, 1, 1, NULL), -EINVAL);
	CHECK(!nxd_index_del(&ix, NXD_IE_EMPTY, NULL));
	CHECK(!nxd_index_find(&ix, NXD_IE_EMPTY));
	CHECK_EQ(nxd_index_set(&ix, 5, 7, 0xff, NULL), 0);
	e = nxd_index_find(&ix, 5);
	CHECK(e && e->slot == 7 && e->mask == 0xff && e->flags == 0);
	e->flags |= NXD_IE_DESTAGING;
	CHECK_EQ(nxd_index_set(&ix, 5, 9, 0x0f, &old), 1);
	CHECK(old.block == 5 && old.slot == 7 && old.mask == 0xff &&
	      old.flags == NXD_IE_DESTAGING);
	e = nxd_index_find(&ix, 5);
	CHECK(e && e->slot == 9 && e->mask == 0x0f && e->flags == 0);
	CHECK(nxd_index_maybe(&ix, 5, 1));
	CHECK(nxd_index_maybe(&ix, 0, 256));
	CHECK(nxd_index_maybe(&ix, 255, 2));
	CHECK(!nxd_index_maybe(&ix, 5, 0));
	CHECK(nxd_index_maybe(&ix, 0, ~0ULL));	/* more regions than counters */
	CHECK(nxd_index_maybe(&ix, 6, 64 << 8));
	CHECK(nxd_index_del(&ix, 5, &old));
	CHECK(old.slot == 9);
	CHECK(!nxd_index_del(&ix, 5, &old));
	CHECK(!nxd_index_maybe(&ix, 0, ~0ULL));
	/* capacity is cap - 1 entries */
	for (i = 0; i < 63; i++)
		CHECK_EQ(nxd_index_set(&ix, i * 1000, (u32)i, 1, NULL), 0);
	CHECK_EQ(nxd_index_set(&ix, 1, 1, 1, NULL), -ENOSPC);
	CHECK_EQ(nxd_index_set(&ix, 0, 1, 1, NULL), 1);	/* replace ok */
	CHECK(!nxd_index_find(&ix, 1));
	CHECK(nxd_index_del(&ix, 0, NULL));
	CHECK_EQ(nxd_index_set(&ix, 1, 1, 1, NULL), 0);
	nxd_index_free(&ix);

	CHECK_EQ(nxd_index_init(&ix, 1000), 0);
	CHECK_EQ(ix.cap, 1251);
	CHECK_EQ(ix.nfilter, 1000);
	CHECK_EQ(nxd_index_mem(&ix), 1251 * 16 + 1000 * 4);
	for (i = 0; i < ix.cap; i++)
		CHECK(ix.tab[i].block == NXD_IE_EMPTY);
	/* Cleared in place: nothing found, the filter empty, refillable. */
	for (i = 0; i < 900; i++)
		CHECK_EQ(nxd_index_set(&ix, i * 7, (u32)i, 0xff, NULL), 0);
	CHECK(nxd_index_maybe(&ix, 0, 1));
	nxd_index_clear(&ix);
	CHECK_EQ(ix.count, 0);
	CHECK_EQ(ix.cap, 1251);
	for (i = 0; i < 900; i++)
		CHECK(!nxd_index_find(&ix, i * 7));
	for (i = 0; i < ix.nfilter; i++)
		CHECK_EQ(ix.filter[i], 0);
	CHECK_EQ(nxd_index_set(&ix, 14, 3, 0xff, NULL), 0);
	CHECK(nxd_index_find(&ix, 14) && nxd_index_find(&ix, 14)->slot == 3);
	nxd_index_free(&ix);
	nxd_index_free(&ix);	/* idempotent */

	CHECK_EQ(nxd_index_init(&ix, 1ULL << 32), -EINVAL);
	CHECK(!ix.tab);
	CHECK_EQ(nxd_index_init(&ix, 0xfffffff0ULL), -EINVAL); /* cap > u32 */
}

int main(int argc, char **argv)
{
	static const u64 sizes[] = { 0, 1, 50, 63, 64, 100, 257, 1000, 4096,
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
		u64 me = sizes[nt_below(ARRAY_SIZE(sizes))];
		u64 cap = me * 5 / 4 + 1 < 64 ? 64 : me * 5 / 4 + 1;
		enum keymode km = (enum keymode)nt_below(K_NMODES);
		u64 n, ops;

		/*
		 * Small tables run full (universe above capacity); large
		 * ones stay below ~90% load so linear probing stays fast.
		 */
		if (cap <= 1300)
			n = cap / 2 + nt_below(2 * cap);
		else
			n = cap / 4 + nt_below(cap * 2 / 3);
		if ((km == K_CLUSTER || km == K_EDGE) && n > 2000)
			n = 2000;	/* distinct-key generation is O(n^2) */
		if (n < 1)
			n = 1;
		ops = 20000 + nt_below(200000);
		if (ops > total - done)
			ops = total - done;
		done += run_phase(me, (u32)n, km, ops);
		phases++;
	}
	fprintf(stderr, "index: %d phases, %" PRIu64 " ops\n", phases, done);
	nt_report();
	return 0;
}
