// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd batch: the log segment the writer thread assembles (struct
 * nxd_batch), below the thread itself (nxd-writer.c, where the ordering
 * rules are).  Filling it, merging a partial block with its logged copy
 * (RMW), committing it in seq order after the direct segments, failing
 * it.  Writer thread only, but for the allocation at ctr.
 */
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/sched.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd log"

/* ---- filling ---- */

int nxd_batch_init(struct nxd_batch *b)
{
	b->buf = vzalloc((size_t)NXD_SEG_MAX_BLOCKS * NXD_BLOCK_SIZE);
	if (!b->buf)
		return -ENOMEM;
	bio_list_init(&b->bios);
	INIT_LIST_HEAD(&b->invals);
	memset(b->hkeys, 0xff, sizeof(b->hkeys));
	return 0;
}

void nxd_batch_free(struct nxd_batch *b)
{
	vfree(b->buf);
	b->buf = NULL;
}

static void *nxd_batch_data(struct nxd_batch *b, u32 i)
{
	return b->buf + (size_t)(i + 1) * NXD_BLOCK_SIZE;
}

/* Indexed or given up: the batch's merged blocks no longer hold writes back. */
static void nxd_batch_unmerge(struct nxd_c *nc, struct nxd_batch *b)
{
	u32 i;

	if (bitmap_empty(b->merged, NXD_SEG_MAX_DATA))
		return;
	spin_lock(&nc->lock);
	for_each_set_bit(i, b->merged, NXD_SEG_MAX_DATA)
		nxd_merge_put_locked(nc, b->blocks[i]);
	spin_unlock(&nc->lock);
	bitmap_zero(b->merged, NXD_SEG_MAX_DATA);
}

static void nxd_batch_reset(struct nxd_c *nc, struct nxd_batch *b)
{
	nxd_batch_unmerge(nc, b);
	b->nr_data = 0;
	b->nr_inval = 0;
	b->fua = false;
	b->last_bio = NULL;
	memset(b->hkeys, 0xff, sizeof(b->hkeys));
}

/* Room in the open segment for @data more blocks and @recs more records? */
bool nxd_batch_fits(struct nxd_batch *b, u32 data, u32 recs)
{
	return nxd_seg_fits(b->nr_data, b->nr_data + b->nr_inval, data, recs);
}

/* ---- completion, failure, commit ---- */

void nxd_inval_ack(struct nxd_c *nc, struct nxd_inval *op)
{
	struct bio *bio = op->bio;

	spin_lock(&nc->lock);
	list_del(&op->node);
	spin_unlock(&nc->lock);
	if (op->error)
		bio->bi_status = errno_to_blk_status(op->error);
	atomic_set(&nc->kick, 1);
	wake_up_all(&nc->ewq);
	/* Last: @op lives in the bio's per-bio data. */
	bio_endio(bio);
}

/*
 * Degraded: the HDD copy of @op is durable (FUA) but no INVAL can be
 * logged.  Acknowledge it once the destager has moved the log's tail past
 * every logged copy of its blocks; until then @op stays on nc->invals, so
 * the destager treats those copies as dead and never copies them over it.
 */
void nxd_inval_park(struct nxd_c *nc, struct nxd_inval *op)
{
	list_add_tail(&op->bnode, &nc->parked);
	atomic_set(&nc->kick, 1);
}

/* Fail every bio and INVAL op of the batch with @err. */
static void nxd_batch_abort(struct nxd_c *nc, int err)
{
	struct nxd_batch *bt = &nc->batch;
	struct nxd_inval *op, *tmp;
	struct bio *bio;

	while ((bio = bio_list_pop(&bt->bios))) {
		struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

		pb->error = err;
		nxd_bio_done(nc, bio);
	}
	/* Failed: the logged copies stay indexed, as in nxd_fail_waiters(). */
	list_for_each_entry_safe(op, tmp, &bt->invals, bnode) {
		list_del(&op->bnode);
		op->error = err;
		nxd_inval_ack(nc, op);
	}
	nxd_batch_reset(nc, bt);
}

/*
 * The SSD write of a batch failed (@err), or the volume is degraded
 * already (@err 0): freeze the log before anything is acknowledged, so
 * the segment, should it have landed all the same, is never replayed over
 * newer HDD data.  Then every bio of the batch is redone on the degraded
 * path and every INVAL op is parked.  If the HDD label cannot be written
 * either, nothing is safe: fail all.
 */
static void nxd_batch_fail(struct nxd_c *nc, int err)
{
	struct nxd_batch *bt = &nc->batch;
	struct nxd_inval *op, *tmp;
	struct bio *bio;
	int frz;

	if (err)
		nxd_ssd_failed(nc, err, "log write");
	frz = nxd_log_freeze(nc);
	if (frz) {
		nxd_batch_abort(nc, frz);
		nxd_fast_fail(nc, 0);
		return;
	}
	while ((bio = bio_list_pop(&bt->bios))) {
		struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

		if (!pb->error)
			pb->error = NXD_PB_RETRY;
		nxd_bio_done(nc, bio);
	}
	list_for_each_entry_safe(op, tmp, &bt->invals, bnode) {
		list_del(&op->bnode);
		nxd_inval_park(nc, op);
	}
	nxd_batch_reset(nc, bt);
	/* The direct segments after it, and its own ring space. */
	nxd_fast_fail(nc, 0);
}

/*
 * Place the batch at the ring's head, after the open direct segment
 * (closed here), and push it uncommitted: direct segments opened from now
 * on come after it.
 */
static bool nxd_batch_reserve(struct nxd_c *nc, u32 nr_data, u64 *pos, u64 *seq)
{
	bool ok;

	spin_lock(&nc->lock);
	if (nc->fopen)
		nxd_fast_close_locked(nc);
	ok = !nxd_ring_reserve(&nc->ring, nr_data, pos);
	if (ok) {
		*seq = nc->ring.next_seq;
		nxd_ring_push(&nc->ring, *pos, nr_data, 0);
	}
	spin_unlock(&nc->lock);
	return ok;
}

int nxd_batch_commit(struct nxd_c *nc)
{
	struct nxd_batch *bt = &nc->batch;
	struct nxd_inval *op, *tmp;
	void *hdr = bt->buf;
	blk_opf_t opf = REQ_OP_WRITE | REQ_SYNC;
	struct nxd_ient old;
	struct nxd_segd *sd;
	struct bio *bio;
	u64 pos, seq, dropped = 0;
	u32 i;
	int r;

	if (!bt->nr_data && !bt->nr_inval) {
		/*
		 * Discards of logged partial blocks only: nothing to record
		 * (their zeros went into an earlier segment), but they must be
		 * acknowledged.
		 */
		list_for_each_entry_safe(op, tmp, &bt->invals, bnode)
			nxd_inval_ack(nc, op);
		INIT_LIST_HEAD(&bt->invals);
		return 0;
	}
	/* Segments are committed in seq order: the direct ones first. */
	nxd_fast_sync(nc, U64_MAX);
	while (!nxd_batch_reserve(nc, bt->nr_data, &pos, &seq)) {
		if (atomic_read(&nc->degraded)) {
			nxd_batch_fail(nc, 0);
			return -EIO;
		}
		r = atomic_read(&nc->stuck_err);
		if (r) {
			/* No room and the destager cannot make any. */
			nxd_batch_abort(nc, r);
			return r;
		}
		/* INVAL-only segments, or a bio bigger than a segment. */
		nxd_log_full_set(nc, true);
		nxd_destager_wake(nc);
		wait_event_timeout(nc->ewq, false, HZ / 20);
		nxd_fast_sync(nc, U64_MAX);
	}
	/* Opened between the sync and the reservation: before this batch. */
	nxd_fast_sync(nc, seq);
	if (atomic_read(&nc->degraded)) {
		nxd_batch_fail(nc, 0);
		return -EIO;
	}

	nxd_seg_init(hdr, nc->sb.vol_uuid, seq, nc->sb.gen, pos);
	r = 0;
	for (i = 0; i < bt->nr_data && r >= 0; i++) {
		bt->crcs[i] = nxd_block_crc(nxd_batch_data(bt, i));
		r = nxd_seg_add_data(hdr, bt->blocks[i], bt->masks[i], bt->crcs[i]);
	}
	list_for_each_entry(op, &bt->invals, bnode) {
		u64 b = op->full_first;

		while (b <= op->full_last && r >= 0) {
			u32 n = min_t(u64, op->full_last - b + 1, U32_MAX);

			r = nxd_seg_add_inval(hdr, b, n);
			b += n;
		}
	}
	/* The accounting (nxd_batch_fits) never lets this happen. */
	if (WARN_ON_ONCE(r < 0)) {
		nxd_batch_fail(nc, -EINVAL);
		return -EINVAL;
	}
	nxd_seg_seal(hdr);
	if (bt->fua || bt->nr_inval)
		opf |= REQ_PREFLUSH | REQ_FUA;
	r = nxd_ssd_io(nc, opf, nc->sb.ring_start + pos, 1 + bt->nr_data, bt->buf);
	if (r) {
		nxd_batch_fail(nc, r);
		return r;
	}

	spin_lock(&nc->lock);
	if (nc->frozen_end && seq >= nc->frozen_end) {
		/* Frozen while it was in flight: it is past the log's end. */
		spin_unlock(&nc->lock);
		nxd_batch_fail(nc, 0);
		return -EIO;
	}
	/* Same order as recovery: INVALs kill older copies, then new data. */
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
	list_for_each_entry(op, &bt->invals, bnode)
		dropped += nxd_inval_range_locked(nc, op->full_first, op->full_last);
	sd = nxd_ring_at(&nc->ring, seq - nc->ring.first_seq);
	sd->live = bt->nr_data;
	nc->commit_seq = seq + 1;
	for (i = 0; i < bt->nr_data; i++) {
		r = nxd_index_set(&nc->ix, bt->blocks[i], pos + 1 + i,
				  bt->masks[i], &old);
		if (r == 1)
			nxd_seg_supersede_locked(nc, &old, seq);
		if (!WARN_ON_ONCE(r < 0))
			nxd_index_find(&nc->ix, bt->blocks[i])->rsvd =
				nxd_crc16(bt->crcs[i]);
	}
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	spin_unlock(&nc->lock);

	nxd_count(nc, NXD_CTR(segments_written), 1);
	nxd_count(nc, NXD_CTR(log_blocks_written), 1 + bt->nr_data);
	if (dropped)
		nxd_count(nc, NXD_CTR(invalidations), dropped);
	while ((bio = bio_list_pop(&bt->bios)))
		nxd_bio_done(nc, bio);
	list_for_each_entry_safe(op, tmp, &bt->invals, bnode)
		nxd_inval_ack(nc, op);
	INIT_LIST_HEAD(&bt->invals);
	nxd_batch_reset(nc, bt);
	if (nxd_log_used_pct(nc) >= READ_ONCE(nc->vol->tun.low_wm))
		nxd_destager_wake(nc);
	return 0;
}

/* ---- log space and merges ---- */

/*
 * Writer only.  Writes start (or stop) going round a full log.  The
 * log_full event is raised once per episode, not each time a destage
 * round makes a little room under a steady overload: it is re-armed once
 * the log is below high_watermark again (here, when the flag clears, or
 * by the destager after a round).
 */
void nxd_log_full_set(struct nxd_c *nc, bool full)
{
	if (full == nc->log_full)
		return;
	WRITE_ONCE(nc->log_full, full);
	if (full) {
		if (atomic_xchg(&nc->full_armed, 0))
			nxd_event(nc, NXD_EV_LOG_FULL);
	} else if (nxd_log_used_pct(nc) < READ_ONCE(nc->vol->tun.high_wm)) {
		atomic_set(&nc->full_armed, 1);
	}
}

/*
 * The batch slot for logical block @blk, merging with its logged copy if
 * the new sectors @mask do not cover it.  @bio (may be NULL) waits for it.
 * NULL if the logged copy cannot be read: nothing was added for @blk.
 */
void *nxd_batch_block(struct nxd_c *nc, struct bio *bio, u64 blk, u8 mask)
{
	struct nxd_batch *bt = &nc->batch;
	struct nxd_ient *e;
	u8 old_mask = 0;
	u32 slot = 0;
	void *data;
	int idx, epoch = -1, r;
	bool counted = false;

	idx = nxd_blk_hash_lookup(bt->hkeys, bt->hvals, blk);
	if (idx < 0) {
		if (!nxd_batch_fits(bt, 1, 1))
			nxd_batch_commit(nc);
		data = nxd_batch_data(bt, bt->nr_data);

		spin_lock(&nc->lock);
		if (mask != 0xff && nxd_fast_range_busy(nc, blk, blk)) {
			/*
			 * A direct write of this region is not indexed yet:
			 * keep new ones out (map checks the merge counter),
			 * commit those, then look the block up.
			 */
			nxd_merge_get_locked(nc, blk);
			counted = true;
			spin_unlock(&nc->lock);
			nxd_fast_sync(nc, U64_MAX);
			spin_lock(&nc->lock);
		}
		e = nxd_index_find(&nc->ix, blk);
		if (e && (e->mask & ~mask)) {
			old_mask = e->mask;
			slot = e->slot;
			epoch = nxd_epoch_get(&nc->rd_ep);
			/*
			 * The destager may drop this entry before the merged
			 * block is indexed; a write that saw neither would go
			 * to the HDD and the merge would bring the copy's
			 * other sectors back over it.
			 */
			if (!counted) {
				nxd_merge_get_locked(nc, blk);
				counted = true;
			}
		}
		/*
		 * Any partial block, merged or not: until it is indexed, map
		 * sends whole-block writes of its region here, not to a direct
		 * segment.  That segment would be committed (indexed) before
		 * this batch, and this record would then replace the newer
		 * whole block, its other sectors read from the HDD again (2
		 * sectors lost in a clean-clone pcut slice, 6.1, seed 103).
		 */
		if (mask != 0xff && !counted) {
			nxd_merge_get_locked(nc, blk);
			counted = true;
		}
		spin_unlock(&nc->lock);
		if (old_mask) {
			/* Partial rewrite of a logged block: merge (RMW). */
			r = nxd_ssd_io(nc, REQ_OP_READ, nc->sb.ring_start + slot,
				       1, data);
			nxd_epoch_put(&nc->rd_ep, epoch);
			if (r) {
				spin_lock(&nc->lock);
				nxd_merge_put_locked(nc, blk);
				spin_unlock(&nc->lock);
				/* Only this write fails; the log keeps its copy. */
				nxd_count(nc, NXD_CTR(ssd_errors), 1);
				DMERR_LIMIT("%s: SSD read of logged block %llu failed (%d)",
					    dm_table_device_name(nc->ti->table), blk, r);
				return NULL;
			}
			nxd_count(nc, NXD_CTR(rmw_reads), 1);
		} else if (mask != 0xff) {
			memset(data, 0, NXD_BLOCK_SIZE);
		}
		idx = bt->nr_data++;
		nxd_blk_hash_set(bt->hkeys, bt->hvals, blk, idx);
		bt->blocks[idx] = blk;
		bt->masks[idx] = old_mask;
		if (counted)
			__set_bit(idx, bt->merged);
	}
	bt->masks[idx] |= mask;
	if (bio && bt->last_bio != bio) {
		struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

		atomic_inc(&pb->pending);
		bio_list_add(&bt->bios, bio);
		bt->last_bio = bio;
	}
	return nxd_batch_data(bt, idx);
}
