/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd extent index: logical 4 KiB block -> ring slot and sector mask.
 * Part of the kernel-neutral core (nxd_core.h).
 */
#ifndef NXD_INDEX_H
#define NXD_INDEX_H

#include "nxd_shim.h"

/* ---- extent index: logical 4 KiB block -> ring slot + sector mask ---- */

#define NXD_IE_DESTAGING	BIT(0)	/* copy to HDD in flight */
#define NXD_IE_NOCRC		BIT(1)	/* in an ORDERED segment: rsvd holds no crc */
#define NXD_IE_CLEAN		BIT(2)	/* the HDD holds this copy, flushed */

struct nxd_ient {
	u64 block;		/* NXD_IE_EMPTY when unused */
	u32 slot;
	u8 mask;
	u8 flags;
	u16 rsvd;
};

#define NXD_IE_EMPTY	(~0ULL)

struct nxd_index {
	struct nxd_ient *tab;
	u32 *filter;		/* entries per hashed 1 MiB region */
	u32 cap;
	u32 nfilter;
	u64 count;
};

#define NXD_REGION_SHIFT	8	/* 256 blocks = 1 MiB */

int nxd_index_init(struct nxd_index *ix, u64 max_entries);
void nxd_index_free(struct nxd_index *ix);
/* Remove every entry in place (no allocation). */
void nxd_index_clear(struct nxd_index *ix);
struct nxd_ient *nxd_index_find(const struct nxd_index *ix, u64 block);
/*
 * Insert or replace.  Returns 1 if an entry was replaced (old slot/mask in
 * *old), 0 if inserted, -ENOSPC if full.  The entry's flags are cleared
 * (*old has the previous ones); @old may be NULL.
 */
int nxd_index_set(struct nxd_index *ix, u64 block, u32 slot, u8 mask,
		  struct nxd_ient *old);
/* Remove; returns true and the old entry in *old if it existed. */
bool nxd_index_del(struct nxd_index *ix, u64 block, struct nxd_ient *old);
/* False only if no entry can lie in [first, first + nr). */
bool nxd_index_maybe(const struct nxd_index *ix, u64 first, u64 nr);
size_t nxd_index_mem(const struct nxd_index *ix);

#endif /* NXD_INDEX_H */
