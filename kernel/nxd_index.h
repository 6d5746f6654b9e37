/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd extent index: logical 4 KiB block -> ring slot and sector mask,
 * in address order.  Part of the kernel-neutral core (nxd_core.h).
 */
#ifndef NXD_INDEX_H
#define NXD_INDEX_H

#include "nxd_shim.h"

/* ---- extent index: logical 4 KiB block -> ring slot + sector mask ---- */

#define NXD_IE_DESTAGING	BIT(0)	/* copy to HDD in flight */
#define NXD_IE_NOCRC		BIT(1)	/* in an ORDERED segment: rsvd holds no crc */
#define NXD_IE_CLEAN		BIT(2)	/* the HDD holds this copy, flushed */

/*
 * One entry per ring slot (a slot holds one block's data, so one live
 * entry at most), as dm-writecache keeps one per cache block: nothing is
 * allocated after init, and an entry stays where it is until removed.
 * The tree keeps the entries in address order for range look-ups; a hash
 * of block numbers to slots answers point look-ups in O(1).
 */
struct nxd_ient {
	struct rb_node node;	/* in nxd_index.root, by @block */
	u64 block;		/* NXD_IE_EMPTY when the slot holds none */
	u32 slot;		/* its own place in nxd_index.tab */
	u8 mask;
	u8 flags;
	u16 rsvd;
};

#define NXD_IE_EMPTY	(~0ULL)

struct nxd_index {
	struct rb_root root;
	struct nxd_ient *tab;	/* by ring slot */
	u32 *hash;		/* block -> slot + 1 (0: empty), linear probing */
	u32 cap;		/* ring slots */
	u32 hcap;		/* hash buckets, cap * 5 / 4 + 1 */
	u64 count;
};

int nxd_index_init(struct nxd_index *ix, u64 slots);
void nxd_index_free(struct nxd_index *ix);
/* Remove every entry in place (no allocation). */
void nxd_index_clear(struct nxd_index *ix);
struct nxd_ient *nxd_index_find(const struct nxd_index *ix, u64 block);
/*
 * Insert or replace: @block's copy is now in @slot.  Returns 1 if an entry
 * was replaced (old slot/mask/flags in *old), 0 if inserted; -EINVAL for
 * a slot out of range, -EEXIST if @slot holds another block (nothing
 * changed).  The entry's flags and rsvd are cleared; @old may be NULL.
 */
int nxd_index_set(struct nxd_index *ix, u64 block, u32 slot, u8 mask,
		  struct nxd_ient *old);
/* Remove; returns true and the old entry in *old if it existed. */
bool nxd_index_del(struct nxd_index *ix, u64 block, struct nxd_ient *old);
/* The entry of the lowest block in [first, last], or NULL. */
struct nxd_ient *nxd_index_first(const struct nxd_index *ix, u64 first,
				 u64 last);
/*
 * The entry after @e in address order if its block is <= @last, or NULL.
 * A walk that may remove @e takes the next one first:
 *	for (e = nxd_index_first(ix, a, b); e; e = tmp) {
 *		tmp = nxd_index_next(e, b);
 *		...
 */
struct nxd_ient *nxd_index_next(const struct nxd_ient *e, u64 last);
/* The live entry in ring slot @slot, or NULL. */
struct nxd_ient *nxd_index_at(const struct nxd_index *ix, u64 slot);
size_t nxd_index_mem(const struct nxd_index *ix);

#endif /* NXD_INDEX_H */
