// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd log writer: one thread per volume appends small writes to the SSD
 * log in segments (group commit), and orders discards that must
 * invalidate logged copies.
 *
 * Ordering rules (docs/design.md):
 * - A logged write is acknowledged after its segment is written and its
 *   blocks are in the index; FUA writes make the segment PREFLUSH|FUA.
 * - The log owns the blocks it holds: a write over them is logged (map
 *   cuts a large write at their edges), never sent to the HDD under them,
 *   so no older copy can come back over it and the tail needs no HDD
 *   flush for blocks it passes that newer copies superseded.
 * - A discard over logged blocks is sent to the HDD and flushed first;
 *   then an INVAL record is logged (PREFLUSH|FUA); only then are the
 *   index entries dropped and the discard acknowledged.  Until then reads
 *   still see the logged copy.
 * - Small writes overlapping such an in-flight discard are held until it
 *   is acknowledged, so an INVAL never kills a newer logged copy.
 * - A partial write merged with a logged copy (RMW) counts in nc->merging
 *   until the merged block is indexed: map sends no write round the writer
 *   to the HDD over it meanwhile, or the merge, if the destager dropped the
 *   copy in between, would bring the copy's other sectors back over it.
 *   So does any partial block in the open batch: map sends no whole-block
 *   write of its region to a direct segment (committed first, it would be
 *   overwritten by the partial record).
 * - Degraded (an SSD write failed, the log is frozen): nothing is logged.
 *   A write over logged blocks goes to the HDD with FUA and is parked
 *   until the destager has moved the log's tail past every logged copy
 *   of its blocks (those copies are dead, never copied over it); one
 *   that only partly covers a logged block is held until that block is
 *   destaged.  A flush is held until the log is empty.
 * - Whatever waits on the destager fails with EIO when a destage round
 *   fails: it was never acknowledged, and the device may be gone.
 */
#include <linux/slab.h>
#include <linux/highmem.h>
#include <linux/sched.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd log"

/* ---- waiting on the destager ---- */

/* Degraded: acknowledge the parked ops none of whose blocks is logged now. */
static void nxd_parked_check(struct nxd_c *nc)
{
	struct nxd_inval *op, *tmp;

	list_for_each_entry_safe(op, tmp, &nc->parked, bnode) {
		bool logged = false;

		spin_lock(&nc->lock);
		if (op->full_first <= op->full_last)
			logged = nxd_range_logged(nc, op->full_first, op->full_last);
		spin_unlock(&nc->lock);
		if (logged)
			continue;
		list_del(&op->bnode);
		nxd_inval_ack(nc, op);
	}
}

/*
 * A destage round failed: bios and parked INVAL ops that wait for it (for
 * log space, for a logged block to reach the HDD, for the log to empty)
 * may wait for good.  Fail them: none of them was acknowledged, and an
 * error leaves the sectors in an unknown state, which is all a failing
 * device allows.
 */
static void nxd_fail_waiters(struct nxd_c *nc, int err)
{
	struct nxd_inval *op, *tmp;
	struct bio_list retry = BIO_EMPTY_LIST;
	struct bio *bio;
	unsigned int n = 0;

	while ((bio = bio_list_pop(&nc->held))) {
		struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

		/*
		 * Held by a fence (the failed round's is gone with it), an
		 * INVAL in flight or a degraded redo: nothing it waits for
		 * needs the destager.  Try it again.
		 */
		if (pb->hold != NXD_HOLD_DESTAGE) {
			bio_list_add(&retry, bio);
			continue;
		}
		bio->bi_status = errno_to_blk_status(err);
		bio_endio(bio);
		n++;
	}
	if (!bio_list_empty(&retry)) {
		bio_list_merge(&nc->held, &retry);
		atomic_set(&nc->kick, 1);
	}
	/*
	 * The logged copies stay indexed: a later write over them must still
	 * wait for them to leave the log, or a replay of the frozen window
	 * would bring them back over it.
	 */
	list_for_each_entry_safe(op, tmp, &nc->parked, bnode) {
		list_del(&op->bnode);
		op->error = err;
		nxd_inval_ack(nc, op);
		n++;
	}
	if (n)
		DMERR_LIMIT("%s: destage failed: %u waiting writes failed (%d)",
			    dm_table_device_name(nc->ti->table), n, err);
}

/* ---- logging writes ---- */

/*
 * Room for @k more data blocks, counting headers, the open batch, wrap
 * waste and the INVAL reserve.
 */
static bool nxd_log_room(struct nxd_c *nc, u64 k)
{
	struct nxd_batch *bt = &nc->batch;
	u64 need, used;
	u32 segs;

	need = k + DIV_ROUND_UP_ULL(k, NXD_SEG_MAX_DATA) + 1 +
	       bt->nr_data + 1 + NXD_LOG_RESERVE;
	segs = DIV_ROUND_UP_ULL(k, NXD_SEG_MAX_DATA) + 2;
	spin_lock(&nc->lock);
	used = nxd_ring_used(&nc->ring);
	segs += nc->ring.count;
	spin_unlock(&nc->lock);
	return used + need <= nc->ring.ring_blocks && segs + 8 < nc->ring.cap;
}

static void nxd_copy_from_bio(struct bio *bio, struct bvec_iter *iter,
			      void *dst, unsigned int len)
{
	while (len) {
		struct bio_vec bv = bio_iter_iovec(bio, *iter);
		unsigned int n = min(len, bv.bv_len);
		void *src = bvec_kmap_local(&bv);

		memcpy(dst, src, n);
		kunmap_local(src);
		dst += n;
		len -= n;
		bio_advance_iter_single(bio, iter, n);
	}
}

static void nxd_inval_start(struct nxd_c *nc, struct bio *bio);
static void nxd_inval_submit(struct nxd_c *nc, struct nxd_inval *op);

/*
 * A write with nothing logged under it goes to the HDD, unless a destage
 * round is filling its stripes with HDD data: then it is held until the
 * round's writes have landed, or the round would write older data over
 * it.  True if sent.
 */
static bool nxd_writer_hdd(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	int ep = nxd_epoch_get(&nc->hw_ep);
	bool busy;

	spin_lock(&nc->lock);
	busy = e > s && nxd_fill_busy_locked(nc, s >> 3, (e - 1) >> 3);
	spin_unlock(&nc->lock);
	if (busy) {
		nxd_epoch_put(&nc->hw_ep, ep);
		nxd_hold(nc, bio, NXD_HOLD_RETRY);
		WRITE_ONCE(nc->fg_fenced, true);	/* an idle round yields */
		return false;
	}
	pb->hw_epoch = ep;
	submit_bio_noacct(nxd_bio_to_hdd(nc, bio));
	return true;
}

/* Must @op's HDD write wait for a destage round?  Under nc->lock. */
static bool nxd_inval_fenced_locked(struct nxd_c *nc, struct nxd_inval *op)
{
	return nxd_destage_busy_locked(nc, op->first, op->last) ||
	       nxd_fill_busy_locked(nc, op->first, op->last);
}

static void nxd_log_write(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	struct nxd_batch *bt = &nc->batch;
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	u64 first = s >> 3, last = (e - 1) >> 3, b, k;
	struct bvec_iter iter;
	bool busy, logged;

	spin_lock(&nc->lock);
	busy = nxd_inval_overlap_locked(nc, first, last);
	spin_unlock(&nc->lock);
	if (busy) {
		nxd_hold(nc, bio, NXD_HOLD_RETRY);
		return;
	}
	/*
	 * Room for the first segment's worth is enough: a bio larger than that
	 * waits for space between segments (nxd_batch_commit) instead.
	 */
	k = min_t(u64, last - first + 1, NXD_SEG_MAX_DATA);
	if (!nxd_log_room(nc, k)) {
		nxd_batch_commit(nc);
		if (!nxd_log_room(nc, k)) {
			nxd_log_full_set(nc, true);
			nxd_destager_wake(nc);
			spin_lock(&nc->lock);
			logged = nxd_range_logged(nc, first, last);
			spin_unlock(&nc->lock);
			if (!logged) {
				/* Nothing logged under it: straight to the HDD. */
				pb->route = NXD_H_HDD;
				if (nxd_writer_hdd(nc, bio))
					nxd_count(nc, NXD_CTR(writes_around_full), 1);
				return;
			}
			/* The log owns blocks under it: wait for space. */
			nc->room_wait = true;
			nxd_hold(nc, bio, NXD_HOLD_DESTAGE);
			return;
		}
	}
	/*
	 * A smaller write that fits must not clear the flag a held one set:
	 * a paused destager would never run for it, and nothing would kick it.
	 */
	if (!nc->room_wait)
		nxd_log_full_set(nc, false);

	atomic_set(&pb->pending, 1);
	iter = bio->bi_iter;
	for (b = first; b <= last; b++) {
		sector_t lo = max_t(sector_t, s, b << 3);
		sector_t hi = min_t(sector_t, e, (b + 1) << 3);
		void *data = nxd_batch_block(nc, bio, b, nxd_block_mask(b, s, e));

		if (!data) {
			pb->error = -EIO;
			break;
		}
		nxd_copy_from_bio(bio, &iter, data + ((lo & 7) << 9),
				  (hi - lo) << 9);
	}
	if (bio->bi_opf & REQ_FUA)
		bt->fua = true;
	nxd_count(nc, NXD_CTR(writes_logged), 1);
	nxd_bio_done(nc, bio);	/* drops the initial reference */
}

/* Zero sectors [lo, hi) of a logged block (edges of a discard). */
static void nxd_log_zero(struct nxd_c *nc, sector_t lo, sector_t hi)
{
	void *data = nxd_batch_block(nc, NULL, lo >> 3, nxd_block_mask(lo >> 3, lo, hi));

	/* Unreadable: the sectors keep their logged data, as discard allows. */
	if (data)
		memset(data + ((lo & 7) << 9), 0, (hi - lo) << 9);
}

/*
 * ---- discards over logged blocks, and degraded HDD writes over them ----
 * Healthy, a write over logged blocks is logged (map, nxd_writer_direct).
 */

static void nxd_inval_endio(struct bio *clone)
{
	struct nxd_inval *op = clone->bi_private;
	struct nxd_c *nc = op->nc;
	unsigned long flags;

	op->error = blk_status_to_errno(clone->bi_status);
	WRITE_ONCE(op->hdd_state, op->error ? NXD_HDD_FAILED : NXD_HDD_OK);
	bio_put(clone);
	nxd_fg_end(nc);
	nxd_epoch_put(&nc->hw_ep, op->hw_epoch);
	spin_lock_irqsave(&nc->qlock, flags);
	list_add_tail(&op->bnode, &nc->done_invals);
	spin_unlock_irqrestore(&nc->qlock, flags);
	wake_up(&nc->wq);
}

static void nxd_inval_start(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool discard = bio_op(bio) == REQ_OP_DISCARD;
	struct nxd_inval *op;
	bool wait, edge_logged = false;

	/* Earlier logged writes first: they must be indexed to be invalidated. */
	nxd_batch_commit(nc);

	op = &pb->inval;
	memset(op, 0, sizeof(*op));
	op->nc = nc;
	op->bio = bio;
	op->first = s >> 3;
	op->last = (e - 1) >> 3;
	op->full_first = DIV_ROUND_UP_ULL(s, NXD_SECTORS_PER_BLOCK);
	op->full_last = (e >> 3) - 1;	/* may be < full_first: none */
	if ((e >> 3) == 0 || op->full_last < op->full_first) {
		op->full_first = 1;
		op->full_last = 0;
	}

	spin_lock(&nc->lock);
	if (s & 7)
		edge_logged |= !!nxd_index_find(&nc->ix, s >> 3);
	if (e & 7)
		edge_logged |= !!nxd_index_find(&nc->ix, e >> 3);
	spin_unlock(&nc->lock);
	if (edge_logged) {
		/* Writes come here degraded only (nxd_degraded_bio). */
		if (atomic_read(&nc->degraded) || !discard) {
			/* No merge, no zeros can be logged: wait for the destager. */
			nxd_hold(nc, bio, NXD_HOLD_DESTAGE);
			return;
		}
		/* Discarded sectors of partially covered logged blocks read as zeros. */
		if (s & 7)
			nxd_log_zero(nc, s, min_t(sector_t, e, round_up(s + 1, 8)));
		if ((e & 7) && (e >> 3) != (s >> 3))
			nxd_log_zero(nc, e & ~7ULL, e);
		else if ((e & 7) && !(s & 7))
			nxd_log_zero(nc, s, e);
	}

	op->hw_epoch = nxd_epoch_get(&nc->hw_ep);
	spin_lock(&nc->lock);
	list_add_tail(&op->node, &nc->invals);
	wait = nxd_inval_fenced_locked(nc, op);
	spin_unlock(&nc->lock);
	if (wait) {
		/*
		 * An older copy of these blocks is on its way to the HDD, or
		 * a round fills their stripes: let it land first.  The op
		 * waits on a list, not the writer: nxd_fenced_check() sends
		 * it once the round's copies landed.
		 */
		nxd_epoch_put(&nc->hw_ep, op->hw_epoch);
		list_add_tail(&op->bnode, &nc->fenced);
		WRITE_ONCE(nc->fg_fenced, true);	/* an idle round yields */
		/*
		 * A copy that landed after the check saw the list empty and
		 * woke nobody: look again at the next pass.  Pairs with the
		 * barrier of atomic_dec_and_test() in nxd_destage_endio().
		 */
		smp_mb();
		atomic_set(&nc->kick, 1);
		return;
	}
	nxd_inval_submit(nc, op);
}

/* The HDD part of an inval op: FUA write (degraded), discard, or nothing. */
static void nxd_inval_submit(struct nxd_c *nc, struct nxd_inval *op)
{
	struct bio *bio = op->bio, *clone;
	bool discard = bio_op(bio) == REQ_OP_DISCARD;

	if (discard && !bdev_max_discard_sectors(nc->hdd->bdev)) {
		unsigned long flags;

		/* Nothing to do on the HDD; the logged copies are discarded. */
		nxd_epoch_put(&nc->hw_ep, op->hw_epoch);
		WRITE_ONCE(op->hdd_state, NXD_HDD_OK);
		spin_lock_irqsave(&nc->qlock, flags);
		list_add_tail(&op->bnode, &nc->done_invals);
		spin_unlock_irqrestore(&nc->qlock, flags);
		return;
	}
	clone = bio_alloc_clone(nc->hdd->bdev, bio, GFP_NOIO, &nc->bs);
	clone->bi_iter.bi_sector = nxd_hdd_sector(nc, clone->bi_iter.bi_sector);
	if (!discard)
		clone->bi_opf |= REQ_FUA;
	clone->bi_end_io = nxd_inval_endio;
	clone->bi_private = op;
	/* Foreground: idle rounds keep off. */
	nxd_fg_start(nc);
	submit_bio_noacct(clone);
}

/* The HDD part of @op is done: log the INVAL, ack at commit. */
static void nxd_inval_finish(struct nxd_c *nc, struct nxd_inval *op)
{
	struct nxd_batch *bt = &nc->batch;
	u32 recs;

	if (op->error) {
		/* The HDD write failed: the logged copy is still the newest. */
		nxd_inval_ack(nc, op);
		return;
	}
	if (bio_op(op->bio) == REQ_OP_DISCARD) {
		/*
		 * A discard has no FUA: flush it, or a crash could leave the HDD
		 * with data older than the logged copies the INVAL kills.
		 */
		op->error = nxd_hdd_flush(nc);
		if (op->error) {
			nxd_inval_ack(nc, op);
			return;
		}
	}
	if (atomic_read(&nc->degraded)) {
		/* Durable on the HDD (FUA, or flushed): see nxd_inval_park(). */
		nxd_inval_park(nc, op);
		return;
	}
	recs = op->full_first <= op->full_last ?
	       DIV_ROUND_UP_ULL(op->full_last - op->full_first + 1, U32_MAX) : 0;
	if (!nxd_batch_fits(bt, 0, recs))
		nxd_batch_commit(nc);
	bt->nr_inval += recs;
	list_add_tail(&op->bnode, &bt->invals);
}

/* ---- the thread ---- */

/* Inval ops that waited for a destage round's copies: send those now clear. */
static void nxd_fenced_check(struct nxd_c *nc)
{
	struct nxd_inval *op, *tmp;

	list_for_each_entry_safe(op, tmp, &nc->fenced, bnode) {
		bool busy;

		op->hw_epoch = nxd_epoch_get(&nc->hw_ep);
		spin_lock(&nc->lock);
		busy = nxd_inval_fenced_locked(nc, op);
		spin_unlock(&nc->lock);
		if (busy) {
			nxd_epoch_put(&nc->hw_ep, op->hw_epoch);
			continue;
		}
		list_del(&op->bnode);
		nxd_inval_submit(nc, op);
	}
}

static bool nxd_writer_has_work(struct nxd_c *nc)
{
	bool r;

	spin_lock_irq(&nc->qlock);
	r = !bio_list_empty(&nc->queue) || !list_empty(&nc->done_invals);
	spin_unlock_irq(&nc->qlock);
	return r || ((!bio_list_empty(&nc->held) || !list_empty(&nc->parked) ||
		 !list_empty(&nc->fenced)) && atomic_read(&nc->kick)) ||
	       nxd_fast_has_work(nc);
}

/* Degraded: nothing is logged; see the ordering rules at the top. */
static void nxd_degraded_bio(struct nxd_c *nc, struct bio *bio)
{
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool logged;

	/*
	 * Until the label says the log is frozen, a failed segment that landed
	 * all the same would be replayed over anything written now.
	 */
	if (!READ_ONCE(nc->frozen) && nxd_log_freeze(nc)) {
		bio_io_error(bio);
		return;
	}

	if (bio->bi_opf & REQ_PREFLUSH) {
		/*
		 * Logged writes are durable once the SSD flushed them, or else
		 * once the HDD has them all; acknowledged direct writes of
		 * void segments only once the HDD has them.
		 */
		spin_lock(&nc->lock);
		logged = nc->ring.count;
		spin_unlock(&nc->lock);
		if (nxd_fast_void_left(nc) || (logged && nxd_ssd_flush(nc)))
			nxd_hold(nc, bio, NXD_HOLD_DESTAGE);
		else if (atomic_read(&nc->acked_lost))
			/*
			 * The SSD died with acknowledged writes in its cache
			 * and the destager could not copy them: the HDD does
			 * not have everything written before this flush (7
			 * sectors lost, 6.12 crash campaign seed 841).
			 */
			bio_io_error(bio);
		else
			bio_endio(bio);
		return;
	}
	spin_lock(&nc->lock);
	logged = nxd_range_logged(nc, s >> 3, (e - 1) >> 3);
	spin_unlock(&nc->lock);
	if (logged) {
		nxd_inval_start(nc, bio);
		return;
	}
	if (bio_op(bio) == REQ_OP_DISCARD && !bdev_max_discard_sectors(nc->hdd->bdev)) {
		bio_endio(bio);
		return;
	}
	if (nxd_writer_hdd(nc, bio))
		nxd_count(nc, NXD_CTR(writes_direct), 1);
}

/*
 * An HDD write that map sent here because a merge was in progress, or a
 * destage round fills its stripes: once the open batch is indexed, it
 * goes to the HDD if the log holds none of its blocks, else it is logged.
 */
static void nxd_writer_direct(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool logged;

	nxd_batch_commit(nc);
	spin_lock(&nc->lock);
	logged = nxd_range_logged(nc, s >> 3, (e - 1) >> 3);
	spin_unlock(&nc->lock);
	if (logged) {
		pb->route = NXD_H_SSD;
		nxd_log_write(nc, bio);
	} else if (nxd_writer_hdd(nc, bio)) {
		nxd_count(nc, NXD_CTR(writes_direct), 1);
	}
}

static void nxd_writer_bio(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool busy;

	pb->hold = NXD_HOLD_NONE;	/* set again if held */
	/*
	 * What follows decides by the index: direct log writes of these
	 * regions go into it first (a flush: all of them, and they are then
	 * durable by their headers' PREFLUSH; the SSD flush covers the last).
	 */
	spin_lock(&nc->lock);
	busy = (bio->bi_opf & REQ_PREFLUSH) ? nc->fs_count :
	       nxd_fast_range_busy(nc, s >> 3, (e - 1) >> 3);
	spin_unlock(&nc->lock);
	if (busy)
		nxd_fast_sync(nc, U64_MAX);
	if ((bio->bi_opf & REQ_PREFLUSH) && !atomic_read(&nc->degraded)) {
		bio_set_dev(bio, nc->ssd->bdev);
		submit_bio_noacct(bio);
		return;
	}
	if (atomic_read(&nc->degraded))
		nxd_degraded_bio(nc, bio);
	else if (bio_op(bio) == REQ_OP_DISCARD)
		nxd_inval_start(nc, bio);
	else if (pb->route == NXD_H_HDD)
		nxd_writer_direct(nc, bio);
	else
		nxd_log_write(nc, bio);
}

static int nxd_writer_fn(void *data)
{
	struct nxd_c *nc = data;

	while (!kthread_should_stop()) {
		struct nxd_inval *op, *tmp;
		struct bio_list bios;
		struct bio *bio;
		LIST_HEAD(done);
		int r;

		/* An open direct segment is looked at every tick (group commit). */
		wait_event_interruptible_timeout(nc->wq, kthread_should_stop() ||
						 nxd_writer_has_work(nc),
						 READ_ONCE(nc->fopen) ? 1 :
						 MAX_SCHEDULE_TIMEOUT);
		spin_lock_irq(&nc->qlock);
		bios = nc->queue;
		bio_list_init(&nc->queue);
		list_splice_init(&nc->done_invals, &done);
		spin_unlock_irq(&nc->qlock);

		nxd_fast_ready(nc);
		list_for_each_entry_safe(op, tmp, &done, bnode) {
			list_del(&op->bnode);
			nxd_inval_finish(nc, op);
		}
		nxd_parked_check(nc);
		nxd_fenced_check(nc);
		r = atomic_xchg(&nc->stuck_err, 0);
		if (r)
			nxd_fail_waiters(nc, r);
		if (atomic_xchg(&nc->kick, 0) || !bio_list_empty(&bios)) {
			/* Held bios are older than new ones: they go first. */
			bio_list_merge(&nc->held, &bios);
			bios = nc->held;
			bio_list_init(&nc->held);
			/* Set again by any of them that still finds no room. */
			nc->room_wait = false;
		}
		while ((bio = bio_list_pop(&bios)))
			nxd_writer_bio(nc, bio);
		nxd_batch_commit(nc);
		cond_resched();
	}
	return 0;
}

void nxd_writer_queue(struct nxd_c *nc, struct bio *bio)
{
	unsigned long flags;

	spin_lock_irqsave(&nc->qlock, flags);
	bio_list_add(&nc->queue, bio);
	spin_unlock_irqrestore(&nc->qlock, flags);
	wake_up(&nc->wq);
}

int nxd_writer_start(struct nxd_c *nc)
{
	return nxd_thread_start(nc, nxd_writer_fn, "nxd-w", &nc->writer);
}

void nxd_writer_stop(struct nxd_c *nc)
{
	nxd_thread_stop(&nc->writer);
}
