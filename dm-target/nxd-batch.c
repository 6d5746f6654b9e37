// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd batch: the log segment the writer thread assembles (struct
 * nxd_batch), below the thread itself (nxd-writer.c, where the ordering
 * rules are).  Filling it, merging a partial block with its logged copy
 * (RMW), committing it in seq order after the direct segments, failing
 * it, and the lazy INVALs it carries.  Writer thread only, but for
 * nxd_lazy_sync() and the allocation at ctr.
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

static void nxd_unmerge_locked(struct nxd_c *nc, u64 block)
{
	u32 *c = nxd_region_ctr(nc->merging, block);

	if (!WARN_ON_ONCE(!*c || !nc->nr_merging)) {
		(*c)--;
		nc->nr_merging--;
	}
}

/* Indexed or given up: the batch's merged blocks no longer hold writes back. */
static void nxd_batch_unmerge(struct nxd_c *nc, struct nxd_batch *b)
{
	u32 i;

	if (bitmap_empty(b->merged, NXD_SEG_MAX_DATA))
		return;
	spin_lock(&nc->lock);
	for_each_set_bit(i, b->merged, NXD_SEG_MAX_DATA)
		nxd_unmerge_locked(nc, b->blocks[i]);
	spin_unlock(&nc->lock);
	bitmap_zero(b->merged, NXD_SEG_MAX_DATA);
}

static void nxd_batch_reset(struct nxd_c *nc, struct nxd_batch *b)
{
	struct nxd_lazy *lz;

	if (b->lazy_recs) {
		/* Not logged: flushed again when they are next logged. */
		spin_lock(&nc->lock);
		list_for_each_entry(lz, &nc->lazy, node)
			lz->covered = false;
		spin_unlock(&nc->lock);
		b->lazy_recs = 0;
	}
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
	spin_lock(&nc->lock);
	list_del(&op->node);
	spin_unlock(&nc->lock);
	if (op->error)
		op->bio->bi_status = errno_to_blk_status(op->error);
	bio_endio(op->bio);
	kfree(op);
	atomic_set(&nc->kick, 1);
	wake_up_all(&nc->ewq);
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
	struct nxd_lazy *lz, *ltmp;
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
	/* Writer only changes nc->lazy: no lock to read it here. */
	list_for_each_entry(lz, &nc->lazy, node) {
		u64 b = lz->first;

		while (lz->covered && b <= lz->last && r >= 0) {
			u32 n = min_t(u64, lz->last - b + 1, U32_MAX);

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
	/* Their copies left the index when their writes landed. */
	list_for_each_entry_safe(lz, ltmp, &nc->lazy, node) {
		if (!lz->covered)
			continue;
		list_del(&lz->node);
		nc->nr_lazy--;
		kfree(lz);
	}
	bt->lazy_recs = 0;
	/* Same order as recovery: INVALs kill older copies, then new data. */
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
			(*nxd_region_ctr(nc->merging, blk))++;
			nc->nr_merging++;
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
				(*nxd_region_ctr(nc->merging, blk))++;
				nc->nr_merging++;
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
			(*nxd_region_ctr(nc->merging, blk))++;
			nc->nr_merging++;
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
				nxd_unmerge_locked(nc, blk);
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

/* ---- lazy INVALs (see the ordering rules in nxd-writer.c) ---- */

static u32 nxd_lazy_nr_recs(struct nxd_lazy *lz)
{
	return DIV_ROUND_UP_ULL(lz->last - lz->first + 1, U32_MAX);
}

/*
 * Put every lazy INVAL into the open batch, after an HDD flush: their
 * writes landed before it started, so the flush makes them durable
 * before the INVAL that kills the logged copies can be.  Writer only.
 */
int nxd_lazy_log(struct nxd_c *nc)
{
	struct nxd_batch *bt = &nc->batch;
	struct nxd_lazy *lz;
	u32 recs = 0;
	int r;

	list_for_each_entry(lz, &nc->lazy, node)
		if (!lz->covered)
			recs += nxd_lazy_nr_recs(lz);
	if (!recs)
		return 0;
	if (!nxd_batch_fits(bt, 0, recs)) {
		r = nxd_batch_commit(nc);
		if (r)
			return r;
		recs = 0;
		list_for_each_entry(lz, &nc->lazy, node)
			recs += nxd_lazy_nr_recs(lz);
	}
	r = nxd_hdd_flush_fg(nc);
	if (r)
		return r;
	spin_lock(&nc->lock);
	list_for_each_entry(lz, &nc->lazy, node)
		lz->covered = true;
	spin_unlock(&nc->lock);
	bt->nr_inval += recs;
	bt->lazy_recs += recs;
	return 0;
}

/* Log the lazy INVALs now and commit them.  Writer only. */
int nxd_lazy_commit(struct nxd_c *nc)
{
	int r;

	if (!nc->nr_lazy)
		return 0;
	r = nxd_lazy_log(nc);
	return r ? r : nxd_batch_commit(nc);
}

/*
 * A pending lazy INVAL, not yet in the open batch, that [first, last]
 * overlaps or continues on either side.  The writes of a stream at a
 * queue depth above one land out of order; joined, they stay one record,
 * not one per write up to NXD_LAZY_MAX and an HDD flush.  Under nc->lock.
 */
static struct nxd_lazy *nxd_lazy_touching(struct nxd_c *nc, u64 first, u64 last)
{
	struct nxd_lazy *lz;

	list_for_each_entry_reverse(lz, &nc->lazy, node)
		if (!lz->covered && first <= lz->last + 1 && lz->first <= last + 1)
			return lz;
	return NULL;
}

/*
 * Widen @lz to the union with [first, last], every block of which a plain
 * HDD write landed on, and absorb the pending ranges it now touches.
 * Under nc->lock.
 */
static void nxd_lazy_grow(struct nxd_c *nc, struct nxd_lazy *lz, u64 first, u64 last)
{
	struct nxd_lazy *o;

	lz->first = min(lz->first, first);
	lz->last = max(lz->last, last);
	list_del(&lz->node);
	while ((o = nxd_lazy_touching(nc, lz->first, lz->last))) {
		lz->first = min(lz->first, o->first);
		lz->last = max(lz->last, o->last);
		list_del(&o->node);
		nc->nr_lazy--;
		kfree(o);
	}
	list_add_tail(&lz->node, &nc->lazy);
}

/*
 * @op's plain HDD write landed: drop the logged copies, keep the INVAL
 * for later, acknowledge.  Writer only.
 */
void nxd_lazy_add(struct nxd_c *nc, struct nxd_inval *op)
{
	struct nxd_lazy *lz = NULL, *tail;
	u64 dropped = 0;
	int r;

	if (nc->nr_lazy >= NXD_LAZY_MAX) {
		r = nxd_lazy_commit(nc);
		if (r) {
			/* The logged copies stay indexed, the newest we vouch for. */
			op->error = r;
			nxd_inval_ack(nc, op);
			return;
		}
	}
	if (op->full_first <= op->full_last)
		lz = kmalloc(sizeof(*lz), GFP_NOIO | __GFP_NOFAIL);
	spin_lock(&nc->lock);
	if (lz) {
		dropped = nxd_inval_range_locked(nc, op->full_first, op->full_last);
		tail = nxd_lazy_touching(nc, op->full_first, op->full_last);
		if (tail) {
			/* A stream over logged blocks: one record. */
			nxd_lazy_grow(nc, tail, op->full_first, op->full_last);
		} else {
			lz->first = op->full_first;
			lz->last = op->full_last;
			lz->covered = false;
			list_add_tail(&lz->node, &nc->lazy);
			nc->nr_lazy++;
			lz = NULL;
		}
	}
	list_del(&op->node);
	spin_unlock(&nc->lock);
	kfree(lz);
	if (dropped)
		nxd_count(nc, NXD_CTR(invalidations), dropped);
	bio_endio(op->bio);
	kfree(op);
	atomic_set(&nc->kick, 1);
	wake_up_all(&nc->ewq);
}

/*
 * A FUA write to the HDD over blocks with a lazy INVAL is durable at once,
 * so the INVAL must be durable first: a replay would bring the older
 * logged copy back over it (74 sectors lost in a pcut slice, 6.1).  Log
 * them; degraded they cannot be, so hold the write until the log is empty
 * (nxd_lazy_drop_if_empty).  True if @bio was taken care of.  Writer only.
 */
bool nxd_lazy_fua_blocked(struct nxd_c *nc, struct bio *bio)
{
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool lazy;
	int r;

	if (!(bio->bi_opf & REQ_FUA))
		return false;
	spin_lock(&nc->lock);
	lazy = nxd_lazy_overlap_locked(nc, s >> 3, (e - 1) >> 3);
	spin_unlock(&nc->lock);
	if (!lazy)
		return false;
	if (!atomic_read(&nc->degraded)) {
		r = nxd_lazy_commit(nc);
		if (!r)
			return false;
		if (!atomic_read(&nc->degraded)) {
			bio_io_error(bio);
			return true;
		}
	}
	/* Degraded: the lazy INVALs go once the log is empty. */
	nxd_hold(nc, bio, NXD_HOLD_DESTAGE);
	return true;
}

/* Degraded: once the log is empty no lazy INVAL is needed any more. */
void nxd_lazy_drop_if_empty(struct nxd_c *nc)
{
	spin_lock(&nc->lock);
	if (nc->nr_lazy && !nc->ring.count)
		nxd_lazy_free(nc);
	spin_unlock(&nc->lock);
}

/* postsuspend: the lazy INVALs are logged (or cannot be) on return. */
void nxd_lazy_sync(struct nxd_c *nc)
{
	atomic_set(&nc->lazy_want, 1);
	wake_up(&nc->wq);
	wait_event(nc->ewq, !atomic_read(&nc->lazy_want));
}

/* dtr */
void nxd_lazy_free(struct nxd_c *nc)
{
	struct nxd_lazy *lz, *tmp;

	list_for_each_entry_safe(lz, tmp, &nc->lazy, node) {
		list_del(&lz->node);
		kfree(lz);
	}
	nc->nr_lazy = 0;
}
