// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd look-ups of what the log holds, for every layer above: the range
 * locks, index entries and the ring's live counts, the per-region
 * counters of blocks being merged or written directly, HDD writes in
 * flight over logged blocks, and how full the log is.  The look-ups run
 * under nc->lock, or under the shards of their range (section 14); the
 * changes under both.  Calls only the kernel-neutral core.
 */
#include "nxd.h"

/* ---- range locks ---- */

/* The shards of the blocks [first, last], as a mask. */
u32 nxd_shard_mask(u64 first, u64 last)
{
	u64 r = first >> NXD_REGION_SHIFT, rl = last >> NXD_REGION_SHIFT;
	u32 m = 0;

	if (rl - r >= NXD_SHARDS - 1)
		return NXD_SHARDS_ALL;
	for (; r <= rl; r++)
		m |= BIT(r % NXD_SHARDS);
	return m;
}

/* In shard order, each its own lockdep subclass: any two masks nest alike. */
void nxd_shards_lock(struct nxd_c *nc, u32 mask)
{
	unsigned long m = mask;
	unsigned int i;

	for_each_set_bit(i, &m, NXD_SHARDS) {
		spin_lock_nested(&nc->shard[i].lock, i);
		__release(&nc->shard[i].lock);	/* sparse: held past return */
	}
}

void nxd_shards_unlock(struct nxd_c *nc, u32 mask)
{
	unsigned long m = mask;
	unsigned int i;

	for_each_set_bit(i, &m, NXD_SHARDS) {
		__acquire(&nc->shard[i].lock);
		spin_unlock(&nc->shard[i].lock);
	}
}

/* A change to what readers of the shards in @mask see: all of them held. */
void nxd_shards_assert(struct nxd_c *nc, u32 mask)
{
	unsigned long m = mask;
	unsigned int i;

	lockdep_assert_held(&nc->lock);
	for_each_set_bit(i, &m, NXD_SHARDS)
		lockdep_assert_held(&nc->shard[i].lock);
}

/* ---- hashes ---- */

/* A region's counter slot: region % NXD_MERGE_SLOTS, in the region's shard. */
static u32 nxd_region_slot(u64 block)
{
	return (block >> NXD_REGION_SHIFT) % NXD_MERGE_SLOTS;
}

u32 *nxd_region_ctr(u32 *ctrs, u64 block)
{
	return &ctrs[nxd_region_slot(block)];
}

/* A 256-slot open-addressing map of logical block -> data index. */
static u32 nxd_blk_hash(u64 block)
{
	return (u32)((block * 0x9E3779B97F4A7C15ULL) >> 56);
}

int nxd_blk_hash_lookup(const u64 *keys, const u8 *vals, u64 block)
{
	u32 h = nxd_blk_hash(block);

	while (keys[h] != NXD_IE_EMPTY) {
		if (keys[h] == block)
			return vals[h];
		h = (h + 1) & 255;
	}
	return -1;
}

void nxd_blk_hash_set(u64 *keys, u8 *vals, u64 block, u8 idx)
{
	u32 h = nxd_blk_hash(block);

	while (keys[h] != NXD_IE_EMPTY && keys[h] != block)
		h = (h + 1) & 255;
	keys[h] = block;
	vals[h] = idx;
}

/* ---- index and ring, under nc->lock ---- */

/* Any logged copy of a block in [first, last]? */
bool nxd_range_logged(struct nxd_c *nc, u64 first, u64 last)
{
	return nxd_index_first(&nc->ix, first, last);
}

/* The live block @old of its segment is gone. */
void nxd_seg_put_locked(struct nxd_c *nc, const struct nxd_ient *old)
{
	WARN_ON_ONCE(!nxd_ring_put(&nc->ring, old->slot, 0,
				   old->flags & NXD_IE_CLEAN));
}

/* The HDD holds @e's copy, flushed: its segment counts it clean. */
void nxd_mark_clean_locked(struct nxd_c *nc, struct nxd_ient *e)
{
	if (e->flags & NXD_IE_CLEAN)
		return;
	e->flags |= NXD_IE_CLEAN;
	nxd_ring_clean(&nc->ring, e->slot);
}

/*
 * The block at @slot is superseded by a copy in segment @seq: the tail
 * may pass its segment only once that copy is durable (the degraded
 * destager checks, nxd_ring_safe_prefix).
 */
void nxd_seg_supersede_locked(struct nxd_c *nc, const struct nxd_ient *old,
			      u64 seq)
{
	WARN_ON_ONCE(!nxd_ring_put(&nc->ring, old->slot, seq,
				   old->flags & NXD_IE_CLEAN));
}

/* Drop @block's index entry, if any.  One tree: every shard held. */
void nxd_drop_entry_locked(struct nxd_c *nc, u64 block)
{
	struct nxd_ient old;

	nxd_shards_assert(nc, NXD_SHARDS_ALL);
	if (nxd_index_del(&nc->ix, block, &old))
		nxd_seg_put_locked(nc, &old);
}

/* Drop every entry in [first, last]; returns how many. */
u64 nxd_inval_range_locked(struct nxd_c *nc, u64 first, u64 last)
{
	struct nxd_ient *e, *tmp;
	u64 total = 0;

	if (first > last)
		return 0;
	for (e = nxd_index_first(&nc->ix, first, last); e; e = tmp) {
		tmp = nxd_index_next(e, last);
		nxd_drop_entry_locked(nc, e->block);
		total++;
	}
	return total;
}

/* ---- blocks in flight, under nc->lock ---- */

/*
 * Does a region (hashed 1 MiB, nxd_region_ctr) of [first, last] count a
 * block in @ctrs?  A range over more regions than there are counters is
 * taken as busy.
 */
static bool nxd_regions_busy(u32 *ctrs, u64 first, u64 last)
{
	u64 r, rl = last >> NXD_REGION_SHIFT;

	if (rl - (first >> NXD_REGION_SHIFT) >= NXD_MERGE_SLOTS)
		return true;
	for (r = first >> NXD_REGION_SHIFT; r <= rl; r++)
		if (*nxd_region_ctr(ctrs, r << NXD_REGION_SHIFT))
			return true;
	return false;
}

/* Is a block of [first, last] being merged by the writer? */
bool nxd_merging_locked(struct nxd_c *nc, u64 first, u64 last)
{
	return atomic_read(&nc->nr_merging) &&
	       nxd_regions_busy(nc->merging, first, last);
}

/*
 * @block's region takes a merged or partial block of the writer's batch:
 * map keeps the region's writes off the HDD and the direct path.
 */
void nxd_merge_get_locked(struct nxd_c *nc, u64 block)
{
	u32 m = nxd_shard_mask(block, block);

	nxd_shards_lock(nc, m);
	(*nxd_region_ctr(nc->merging, block))++;
	atomic_inc(&nc->nr_merging);
	nxd_shards_unlock(nc, m);
}

void nxd_merge_put_locked(struct nxd_c *nc, u64 block)
{
	u32 m = nxd_shard_mask(block, block);
	u32 *c = nxd_region_ctr(nc->merging, block);

	nxd_shards_lock(nc, m);
	if (!WARN_ON_ONCE(!*c || !atomic_read(&nc->nr_merging))) {
		(*c)--;
		atomic_dec(&nc->nr_merging);
	}
	nxd_shards_unlock(nc, m);
}

/* Does an uncommitted direct segment hold a block of a region of the range? */
bool nxd_fast_range_busy(struct nxd_c *nc, u64 first, u64 last)
{
	return nc->fs_count && nxd_regions_busy(nc->fast_blocks, first, last);
}

/*
 * Count a bio map sends to the writer in its regions, until it ends.  No
 * lock: the writer takes it from its queue (qlock) before it reserves its
 * segment (nc->lock), so a direct write that opens a later segment sees
 * the count.
 */
static void nxd_queued_add(struct nxd_c *nc, u64 first, u64 last, int d)
{
	u64 r, rl = last >> NXD_REGION_SHIFT;

	if (rl - (first >> NXD_REGION_SHIFT) >= NXD_MERGE_SLOTS) {
		atomic_add(d, &nc->queued_wide);
		return;
	}
	for (r = first >> NXD_REGION_SHIFT; r <= rl; r++)
		atomic_add(d, &nc->queued[nxd_region_slot(r << NXD_REGION_SHIFT)]);
}

void nxd_queued_get(struct nxd_c *nc, struct nxd_pb *pb, u64 first, u64 last)
{
	pb->qfirst = first;
	pb->qlast = last;
	pb->queued = true;
	nxd_queued_add(nc, first, last, 1);
}

/* end_io, after the writer indexed the bio's blocks or gave up on them. */
void nxd_queued_put(struct nxd_c *nc, struct nxd_pb *pb)
{
	nxd_queued_add(nc, pb->qfirst, pb->qlast, -1);
	pb->queued = false;
}

/* May a bio the writer has not finished write to @block's region? */
bool nxd_queued_busy(struct nxd_c *nc, u64 block)
{
	return atomic_read(&nc->queued_wide) ||
	       atomic_read(&nc->queued[nxd_region_slot(block)]);
}

/* Is an HDD write or discard over logged blocks in flight in the range? */
bool nxd_inval_overlap_locked(struct nxd_c *nc, u64 first, u64 last)
{
	struct nxd_inval *op;

	list_for_each_entry(op, &nc->invals, node)
		if (op->first <= last && first <= op->last)
			return true;
	return false;
}

/* ---- log space ---- */

/* Percent of the ring in use; takes nc->lock. */
u32 nxd_log_used_pct(struct nxd_c *nc)
{
	u64 used;

	spin_lock(&nc->lock);
	used = nxd_ring_used(&nc->ring);
	spin_unlock(&nc->lock);
	return div64_u64(used * 100, nc->ring.ring_blocks);
}
