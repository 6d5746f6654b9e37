// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd extent index: logical 4 KiB block -> ring slot and sector mask.
 *
 * Entries are preallocated one per ring slot and kept in a red-black tree
 * by logical block, so that range look-ups (reads, discards, the
 * destager's stripes) cost a descent and a walk of what they find, never
 * a probe per block or a scan of the table, and the destager can take
 * blocks in address order.  Point look-ups, the most frequent, go through
 * an open-addressing hash of block numbers to slots (linear probing,
 * backward-shift deletion), which costs one or two cache misses where a
 * descent of a tree of millions of entries costs twenty.
 */
#include "nxd_index.h"

/* A range up to this many blocks is looked up block by block in the hash. */
#define NXD_IX_PROBE_MAX	16

static inline struct nxd_ient *nxd_ie(const struct rb_node *n)
{
	return n ? rb_entry(n, struct nxd_ient, node) : NULL;
}

static inline u32 nxd_ix_home(const struct nxd_index *ix, u64 block)
{
	u32 h = (u32)((block * 0x9E3779B97F4A7C15ULL) >> 32);

	return (u32)(((u64)h * ix->hcap) >> 32);
}

static inline u32 nxd_ix_next(const struct nxd_index *ix, u32 i)
{
	return i + 1 == ix->hcap ? 0 : i + 1;
}

int nxd_index_init(struct nxd_index *ix, u64 slots)
{
	u64 hcap;

	memset(ix, 0, sizeof(*ix));
	if (!slots || slots > NXD_U32_MAX)
		return -EINVAL;
	hcap = slots * 5 / 4 + 1;
	if (hcap > NXD_U32_MAX)
		return -EINVAL;
	if (slots > SIZE_MAX / sizeof(*ix->tab) ||
	    hcap > SIZE_MAX / sizeof(*ix->hash))
		return -ENOMEM;
	ix->tab = nxd_zalloc_big((size_t)slots * sizeof(*ix->tab));
	ix->hash = nxd_zalloc_big((size_t)hcap * sizeof(*ix->hash));
	if (!ix->tab || !ix->hash) {
		nxd_index_free(ix);
		return -ENOMEM;
	}
	ix->cap = (u32)slots;
	ix->hcap = (u32)hcap;
	nxd_index_clear(ix);
	return 0;
}

void nxd_index_clear(struct nxd_index *ix)
{
	u32 i;

	for (i = 0; i < ix->cap; i++) {
		memset(&ix->tab[i], 0, sizeof(ix->tab[i]));
		ix->tab[i].block = NXD_IE_EMPTY;
		ix->tab[i].slot = i;
	}
	memset(ix->hash, 0, (size_t)ix->hcap * sizeof(*ix->hash));
	ix->root = RB_ROOT;
	ix->count = 0;
}

void nxd_index_free(struct nxd_index *ix)
{
	nxd_free_big(ix->tab);
	nxd_free_big(ix->hash);
	memset(ix, 0, sizeof(*ix));
}

/* The bucket holding @block, or the empty one that ends its probe. */
static u32 nxd_ix_bucket(const struct nxd_index *ix, u64 block)
{
	u32 i;

	/* At least one bucket is always empty, so the probe ends. */
	for (i = nxd_ix_home(ix, block);; i = nxd_ix_next(ix, i))
		if (!ix->hash[i] || ix->tab[ix->hash[i] - 1].block == block)
			return i;
}

struct nxd_ient *nxd_index_find(const struct nxd_index *ix, u64 block)
{
	u32 v;

	if (!ix->count || block == NXD_IE_EMPTY)
		return NULL;
	v = ix->hash[nxd_ix_bucket(ix, block)];
	return v ? &ix->tab[v - 1] : NULL;
}

struct nxd_ient *nxd_index_first(const struct nxd_index *ix, u64 first,
				 u64 last)
{
	const struct rb_node *n = ix->root.rb_node;
	struct nxd_ient *best = NULL;

	if (!ix->count || first > last)
		return NULL;
	if (last - first < NXD_IX_PROBE_MAX) {
		u64 b;

		for (b = first;; b++) {
			best = nxd_index_find(ix, b);
			if (best || b == last)
				return best;
		}
	}
	while (n) {
		struct nxd_ient *e = nxd_ie(n);

		if (e->block >= first) {
			best = e;
			n = n->rb_left;
		} else {
			n = n->rb_right;
		}
	}
	return best && best->block <= last ? best : NULL;
}

struct nxd_ient *nxd_index_next(const struct nxd_ient *e, u64 last)
{
	struct nxd_ient *n = nxd_ie(rb_next(&e->node));

	return n && n->block <= last ? n : NULL;
}

struct nxd_ient *nxd_index_at(const struct nxd_index *ix, u64 slot)
{
	if (slot >= ix->cap || ix->tab[slot].block == NXD_IE_EMPTY)
		return NULL;
	return &ix->tab[slot];
}

static void nxd_ie_fill(struct nxd_ient *e, u64 block, u8 mask)
{
	e->block = block;
	e->mask = mask;
	e->flags = 0;
	e->rsvd = 0;
}

/* Put @e, a free slot's entry, in the tree at its place. */
static void nxd_ix_tree_insert(struct nxd_index *ix, struct nxd_ient *ne)
{
	struct rb_node **link = &ix->root.rb_node, *parent = NULL;

	while (*link) {
		parent = *link;
		if (ne->block < nxd_ie(parent)->block)
			link = &parent->rb_left;
		else
			link = &parent->rb_right;
	}
	rb_link_node(&ne->node, parent, link);
	rb_insert_color(&ne->node, &ix->root);
}

int nxd_index_set(struct nxd_index *ix, u64 block, u32 slot, u8 mask,
		  struct nxd_ient *old)
{
	struct nxd_ient *e, *ne;
	u32 i;

	if (block == NXD_IE_EMPTY || slot >= ix->cap)
		return -EINVAL;
	ne = &ix->tab[slot];
	i = nxd_ix_bucket(ix, block);
	if (ix->hash[i]) {
		e = &ix->tab[ix->hash[i] - 1];
		if (e != ne && ne->block != NXD_IE_EMPTY)
			return -EEXIST;
		if (old)
			*old = *e;
		if (e != ne) {
			/* Same key: the new entry takes the old one's place. */
			rb_replace_node(&e->node, &ne->node, &ix->root);
			e->block = NXD_IE_EMPTY;
			ix->hash[i] = slot + 1;
		}
		nxd_ie_fill(ne, block, mask);
		return 1;
	}
	if (ne->block != NXD_IE_EMPTY)
		return -EEXIST;
	nxd_ie_fill(ne, block, mask);
	nxd_ix_tree_insert(ix, ne);
	ix->hash[i] = slot + 1;
	ix->count++;
	return 0;
}

bool nxd_index_del(struct nxd_index *ix, u64 block, struct nxd_ient *old)
{
	struct nxd_ient *e;
	u32 i, j, k;

	if (!ix->count || block == NXD_IE_EMPTY)
		return false;
	i = nxd_ix_bucket(ix, block);
	if (!ix->hash[i])
		return false;
	e = &ix->tab[ix->hash[i] - 1];
	if (old)
		*old = *e;
	rb_erase(&e->node, &ix->root);
	e->block = NXD_IE_EMPTY;
	ix->count--;

	/*
	 * Backward shift: move later buckets of the cluster into the hole
	 * unless their home lies cyclically in (hole, their position].
	 */
	for (j = nxd_ix_next(ix, i);; j = nxd_ix_next(ix, j)) {
		if (!ix->hash[j])
			break;
		k = nxd_ix_home(ix, ix->tab[ix->hash[j] - 1].block);
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		ix->hash[i] = ix->hash[j];
		i = j;
	}
	ix->hash[i] = 0;
	return true;
}

size_t nxd_index_mem(const struct nxd_index *ix)
{
	return (size_t)ix->cap * sizeof(*ix->tab) +
	       (size_t)ix->hcap * sizeof(*ix->hash);
}
