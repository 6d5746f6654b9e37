/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd log ring accounting: the live segments of the SSD log, oldest
 * first, and where the next one goes.  Part of the kernel-neutral core
 * (nxd_core.h).
 */
#ifndef NXD_RING_H
#define NXD_RING_H

#include "nxd_shim.h"

/* ---- log ring accounting ---- */

struct nxd_segd {
	u32 pos;	/* ring offset of the header */
	u16 nr_data;
	u16 live;	/* data blocks still referenced by the index */
	u16 clean;	/* of those, how many the HDD holds (NXD_IE_CLEAN) */
	/*
	 * Seqs from this segment to the newest one whose blocks superseded
	 * some of its own (0: none; saturates): a tail that passes this
	 * segment must not be durable before those copies are.
	 */
	u32 sup;
};

struct nxd_ring {
	u64 ring_blocks;
	u64 head;		/* end of the newest segment */
	u64 next_seq;		/* seq of the next segment */
	u64 first_seq;		/* seq of fifo[first] */
	struct nxd_segd *fifo;	/* live segments, oldest first */
	u32 cap, first, count;
};

int nxd_ring_init(struct nxd_ring *r, u64 ring_blocks, u64 head, u64 next_seq);
void nxd_ring_free(struct nxd_ring *r);
/* Empty the ring in place (no allocation), next segment at @head. */
void nxd_ring_reset(struct nxd_ring *r, u64 head, u64 next_seq);
/* Position for a segment of @nr_data data blocks, or -ENOSPC. */
int nxd_ring_reserve(const struct nxd_ring *r, u32 nr_data, u64 *pos);
/* Record a written segment (at the position reserve returned). */
void nxd_ring_push(struct nxd_ring *r, u64 pos, u32 nr_data, u32 live);
/* The live segment holding ring slot @slot, or NULL; *seq gets its seq. */
struct nxd_segd *nxd_ring_find(struct nxd_ring *r, u64 slot, u64 *seq);
struct nxd_segd *nxd_ring_at(struct nxd_ring *r, u32 i);
/*
 * A block of the segment holding @slot left the index: superseded by a
 * copy in segment @new_seq, or dropped (@new_seq 0).  False if no live
 * segment holds @slot.
 */
bool nxd_ring_put(struct nxd_ring *r, u64 slot, u64 new_seq, bool clean);
/* A live block of the segment holding @slot became CLEAN. */
bool nxd_ring_clean(struct nxd_ring *r, u64 slot);
/* Live blocks of @s the HDD does not hold yet. */
static inline u32 nxd_segd_dirty(const struct nxd_segd *s)
{
	return s->clean < s->live ? s->live - s->clean : 0;
}

/*
 * How many of the oldest @n segments a tail may pass now: each block they
 * lost to a newer copy must have that copy durable: in a segment before
 * @durable_below (flushed on the SSD) or from @durable_from on (copied to
 * the HDD), or among the @n themselves unless @lossy[i] says segment i's
 * own copies did not all reach the HDD.
 */
u32 nxd_ring_safe_prefix(struct nxd_ring *r, u32 n, u64 durable_below,
			 u64 durable_from, const u8 *lossy);

static inline struct nxd_segd *nxd_ring_oldest(struct nxd_ring *r)
{
	return r->count ? nxd_ring_at(r, 0) : NULL;
}

void nxd_ring_pop(struct nxd_ring *r);
/* Shrink the newest segment, still being filled, to @nr_data data blocks. */
void nxd_ring_trim_newest(struct nxd_ring *r, u32 nr_data);
/* Forget the newest segment (its header was never written). */
void nxd_ring_unpush(struct nxd_ring *r);
u64 nxd_ring_used(const struct nxd_ring *r);
/* The (pos, seq) recovery must start from: the oldest live segment. */
void nxd_ring_tail(const struct nxd_ring *r, u64 *pos, u64 *seq);

#endif /* NXD_RING_H */
