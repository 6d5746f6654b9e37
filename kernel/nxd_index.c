// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd extent index: logical 4 KiB block -> ring slot and sector mask.
 *
 * Open addressing with linear probing over a table of non-power-of-two
 * size, backward-shift deletion (no tombstones), and a counting filter
 * of entries per hashed 1 MiB region so that reads of ranges with no
 * logged blocks skip the table entirely.
 */
#include "nxd_index.h"

#define NXD_IX_MIN	64

static inline u32 nxd_ix_hash(u64 x)
{
	return (u32)((x * 0x9E3779B97F4A7C15ULL) >> 32);
}

static inline u32 nxd_ix_home(const struct nxd_index *ix, u64 block)
{
	return (u32)(((u64)nxd_ix_hash(block) * ix->cap) >> 32);
}

/* Filter counter of region @region (a block number >> NXD_REGION_SHIFT). */
static inline u32 *nxd_ix_counter(const struct nxd_index *ix, u64 region)
{
	return &ix->filter[nxd_ix_hash(region) % ix->nfilter];
}

static inline u32 nxd_ix_next(const struct nxd_index *ix, u32 i)
{
	return i + 1 == ix->cap ? 0 : i + 1;
}

int nxd_index_init(struct nxd_index *ix, u64 max_entries)
{
	u64 cap, nfilter, tab_bytes, filter_bytes;

	memset(ix, 0, sizeof(*ix));
	if (max_entries > NXD_U32_MAX)
		return -EINVAL;
	cap = max_t(u64, NXD_IX_MIN, max_entries * 5 / 4 + 1);
	if (cap > NXD_U32_MAX)
		return -EINVAL;
	nfilter = max_t(u64, NXD_IX_MIN, max_entries);
	if (cap > SIZE_MAX / sizeof(*ix->tab) ||
	    nfilter > SIZE_MAX / sizeof(*ix->filter))
		return -ENOMEM;
	tab_bytes = cap * sizeof(*ix->tab);
	filter_bytes = nfilter * sizeof(*ix->filter);

	ix->tab = nxd_zalloc_big((size_t)tab_bytes);
	ix->filter = nxd_zalloc_big((size_t)filter_bytes);
	if (!ix->tab || !ix->filter) {
		nxd_index_free(ix);
		return -ENOMEM;
	}
	ix->cap = (u32)cap;
	ix->nfilter = (u32)nfilter;
	nxd_index_clear(ix);
	return 0;
}

void nxd_index_clear(struct nxd_index *ix)
{
	u32 i;

	for (i = 0; i < ix->cap; i++)
		ix->tab[i].block = NXD_IE_EMPTY;
	memset(ix->filter, 0, (size_t)ix->nfilter * sizeof(*ix->filter));
	ix->count = 0;
}

void nxd_index_free(struct nxd_index *ix)
{
	nxd_free_big(ix->tab);
	nxd_free_big(ix->filter);
	memset(ix, 0, sizeof(*ix));
}

struct nxd_ient *nxd_index_find(const struct nxd_index *ix, u64 block)
{
	struct nxd_ient *e;
	u32 i;

	if (!ix->count || block == NXD_IE_EMPTY)
		return NULL;
	/* At least one slot is always empty, so the probe terminates. */
	for (i = nxd_ix_home(ix, block);; i = nxd_ix_next(ix, i)) {
		e = &ix->tab[i];
		if (e->block == block)
			return e;
		if (e->block == NXD_IE_EMPTY)
			return NULL;
	}
}

int nxd_index_set(struct nxd_index *ix, u64 block, u32 slot, u8 mask,
		  struct nxd_ient *old)
{
	struct nxd_ient *e;
	u32 i;

	if (block == NXD_IE_EMPTY)
		return -EINVAL;
	for (i = nxd_ix_home(ix, block);; i = nxd_ix_next(ix, i)) {
		e = &ix->tab[i];
		if (e->block == block) {
			if (old)
				*old = *e;
			e->slot = slot;
			e->mask = mask;
			e->flags = 0;
			return 1;
		}
		if (e->block == NXD_IE_EMPTY)
			break;
	}
	if (ix->count >= ix->cap - 1)
		return -ENOSPC;
	e->block = block;
	e->slot = slot;
	e->mask = mask;
	e->flags = 0;
	e->rsvd = 0;
	ix->count++;
	(*nxd_ix_counter(ix, block >> NXD_REGION_SHIFT))++;
	return 0;
}

bool nxd_index_del(struct nxd_index *ix, u64 block, struct nxd_ient *old)
{
	struct nxd_ient *e = nxd_index_find(ix, block);
	u32 i, j, k;

	if (!e)
		return false;
	if (old)
		*old = *e;
	(*nxd_ix_counter(ix, block >> NXD_REGION_SHIFT))--;
	ix->count--;

	/*
	 * Backward shift: move later entries of the cluster into the hole
	 * unless their home lies cyclically in (hole, their position].
	 */
	i = (u32)(e - ix->tab);
	for (j = nxd_ix_next(ix, i);; j = nxd_ix_next(ix, j)) {
		if (ix->tab[j].block == NXD_IE_EMPTY)
			break;
		k = nxd_ix_home(ix, ix->tab[j].block);
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		ix->tab[i] = ix->tab[j];
		i = j;
	}
	ix->tab[i].block = NXD_IE_EMPTY;
	ix->tab[i].slot = 0;
	ix->tab[i].mask = 0;
	ix->tab[i].flags = 0;
	ix->tab[i].rsvd = 0;
	return true;
}

bool nxd_index_maybe(const struct nxd_index *ix, u64 first, u64 nr)
{
	u64 last, r, rl;

	if (!ix->count || !nr)
		return false;
	last = nr - 1 > NXD_U64_MAX - first ? NXD_U64_MAX : first + nr - 1;
	r = first >> NXD_REGION_SHIFT;
	rl = last >> NXD_REGION_SHIFT;
	if (rl - r >= ix->nfilter)
		return true;
	for (;; r++) {
		if (*nxd_ix_counter(ix, r))
			return true;
		if (r == rl)
			return false;
	}
}

size_t nxd_index_mem(const struct nxd_index *ix)
{
	return (size_t)ix->cap * sizeof(*ix->tab) +
	       (size_t)ix->nfilter * sizeof(*ix->filter);
}
