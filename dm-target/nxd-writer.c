// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd log writer: one thread per volume appends small writes to the SSD
 * log in segments (group commit), and orders HDD writes that must
 * invalidate logged copies.
 *
 * Ordering rules (docs/design.md):
 * - A logged write is acknowledged after its segment is written and its
 *   blocks are in the index; FUA writes make the segment PREFLUSH|FUA.
 * - A FUA write or a discard to the HDD over logged blocks is written
 *   (FUA, or flushed) first; then an INVAL record is logged
 *   (PREFLUSH|FUA); only then are the index entries dropped and the write
 *   acknowledged.  Until then reads still see the logged copy, which was
 *   the newest acknowledged data.
 * - A plain write to the HDD over logged blocks (no FUA) is acknowledged
 *   when it lands: the index entries are dropped then, and its INVAL is
 *   kept in nc->lazy.  A crash before that INVAL is logged may bring the
 *   logged copy back, which a write not yet flushed allows.  The INVAL is
 *   logged after an HDD flush (never before the data it vouches for is
 *   durable), and before: the next flush completes; any newer copy of
 *   those blocks is logged (a later INVAL would kill it at replay; in the
 *   same segment INVALs come first); a clean stop.
 * - Small writes overlapping such an in-flight HDD write are held until it
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
 *   of its blocks (those copies are dead, never copied over it); one that
 *   only partly covers a logged block is held until that block is
 *   destaged.  A flush is held until the log is empty.
 * - Whatever waits on the destager fails with EIO when a destage round
 *   fails: it was never acknowledged, and the device may be gone.
 */
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/highmem.h>
#include <linux/sched.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd log"

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
static bool nxd_batch_fits(struct nxd_batch *b, u32 data, u32 recs)
{
	return nxd_seg_fits(b->nr_data, b->nr_data + b->nr_inval, data, recs);
}

/* ---- segment commit ---- */

static void nxd_inval_ack(struct nxd_c *nc, struct nxd_inval *op)
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
static void nxd_inval_park(struct nxd_c *nc, struct nxd_inval *op)
{
	list_add_tail(&op->bnode, &nc->parked);
	atomic_set(&nc->kick, 1);
}

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
	struct bio *bio;
	unsigned int n = 0;

	while ((bio = bio_list_pop(&nc->held))) {
		bio->bi_status = errno_to_blk_status(err);
		bio_endio(bio);
		n++;
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
			nxd_seg_put_locked(nc, old.slot);
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

/* ---- lazy INVALs (see the ordering rules at the top) ---- */

static u32 nxd_lazy_nr_recs(struct nxd_lazy *lz)
{
	return DIV_ROUND_UP_ULL(lz->last - lz->first + 1, U32_MAX);
}

/*
 * Put every lazy INVAL into the open batch, after an HDD flush: their
 * writes landed before it started, so the flush makes them durable
 * before the INVAL that kills the logged copies can be.  Writer only.
 */
static int nxd_lazy_log(struct nxd_c *nc)
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
	r = nxd_hdd_flush(nc);
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
static int nxd_lazy_commit(struct nxd_c *nc)
{
	int r;

	if (!nc->nr_lazy)
		return 0;
	r = nxd_lazy_log(nc);
	return r ? r : nxd_batch_commit(nc);
}

/*
 * @op's plain HDD write landed: drop the logged copies, keep the INVAL
 * for later, acknowledge.  Writer only.
 */
static void nxd_lazy_add(struct nxd_c *nc, struct nxd_inval *op)
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
		tail = list_empty(&nc->lazy) ? NULL :
		       list_last_entry(&nc->lazy, struct nxd_lazy, node);
		if (tail && !tail->covered && tail->last + 1 == op->full_first) {
			/* A stream over logged blocks: one record. */
			tail->last = op->full_last;
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
static bool nxd_lazy_fua_blocked(struct nxd_c *nc, struct bio *bio)
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
	bio_list_add(&nc->held, bio);
	return true;
}

/* Degraded: once the log is empty no lazy INVAL is needed any more. */
static void nxd_lazy_drop_if_empty(struct nxd_c *nc)
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

/*
 * The batch slot for logical block @blk, merging with its logged copy if
 * the new sectors @mask do not cover it.  @bio (may be NULL) waits for it.
 * NULL if the logged copy cannot be read: nothing was added for @blk.
 */
static void *nxd_batch_block(struct nxd_c *nc, struct bio *bio, u64 blk, u8 mask)
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
			epoch = nxd_read_epoch_get(nc);
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
			nxd_read_epoch_put(nc, epoch);
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

static u8 nxd_sector_mask(sector_t lo, sector_t hi)
{
	return ((1U << (hi - lo)) - 1) << (lo & 7);
}

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

static void nxd_inval_start(struct nxd_c *nc, struct bio *bio);
static void nxd_inval_submit(struct nxd_c *nc, struct nxd_inval *op);

static void nxd_log_write(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	struct nxd_batch *bt = &nc->batch;
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	u64 first = s >> 3, last = (e - 1) >> 3, b, k;
	struct bvec_iter iter;
	bool busy, lazy, logged;

	spin_lock(&nc->lock);
	busy = nxd_inval_overlap_locked(nc, first, last);
	lazy = nxd_lazy_overlap_locked(nc, first, last);
	spin_unlock(&nc->lock);
	if (busy) {
		bio_list_add(&nc->held, bio);
		return;
	}
	/* A newer copy of blocks with a lazy INVAL: the INVAL goes first. */
	if (lazy && nxd_lazy_log(nc)) {
		bio_io_error(bio);
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
				nxd_count(nc, NXD_CTR(writes_around_full), 1);
				submit_bio_noacct(nxd_bio_to_hdd(nc, bio));
				return;
			}
			if (!((s | e) & 7)) {
				/* Whole blocks: write the HDD, invalidate the log. */
				nxd_count(nc, NXD_CTR(writes_around_full), 1);
				pb->route = NXD_H_HDD;
				nxd_inval_start(nc, bio);
				return;
			}
			/* Partial blocks over logged data: wait for space. */
			nc->room_wait = true;
			bio_list_add(&nc->held, bio);
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
		void *data = nxd_batch_block(nc, bio, b, nxd_sector_mask(lo, hi));

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
	void *data = nxd_batch_block(nc, NULL, lo >> 3, nxd_sector_mask(lo, hi));

	/* Unreadable: the sectors keep their logged data, as discard allows. */
	if (data)
		memset(data + ((lo & 7) << 9), 0, (hi - lo) << 9);
}

/* ---- HDD writes and discards over logged blocks ---- */

static void nxd_inval_endio(struct bio *clone)
{
	struct nxd_inval *op = clone->bi_private;
	struct nxd_c *nc = op->nc;
	unsigned long flags;

	op->error = blk_status_to_errno(clone->bi_status);
	WRITE_ONCE(op->hdd_state, op->error ? NXD_HDD_FAILED : NXD_HDD_OK);
	bio_put(clone);
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

	op = kzalloc(sizeof(*op), GFP_NOIO | __GFP_NOFAIL);
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
	pb->inval = op;

	spin_lock(&nc->lock);
	if (s & 7)
		edge_logged |= !!nxd_index_find(&nc->ix, s >> 3);
	if (e & 7)
		edge_logged |= !!nxd_index_find(&nc->ix, e >> 3);
	spin_unlock(&nc->lock);
	if (edge_logged) {
		if (atomic_read(&nc->degraded)) {
			/* No merge, no zeros can be logged: wait for the destager. */
			kfree(op);
			pb->inval = NULL;
			bio_list_add(&nc->held, bio);
			return;
		}
		if (!discard) {
			/* Partial blocks over logged data must merge in the log. */
			kfree(op);
			pb->inval = NULL;
			pb->route = NXD_H_SSD;
			nxd_log_write(nc, bio);
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

	spin_lock(&nc->lock);
	list_add_tail(&op->node, &nc->invals);
	wait = nxd_destage_busy_locked(nc, op->first, op->last);
	spin_unlock(&nc->lock);
	if (wait) {
		/*
		 * An older copy of these blocks is on its way to the HDD: let
		 * it land first.  The op waits on a list, not the writer:
		 * nxd_fenced_check() sends it once the round's copies landed.
		 */
		list_add_tail(&op->bnode, &nc->fenced);
		return;
	}
	nxd_inval_submit(nc, op);
}

/* The HDD part of an inval op: FUA write, or discard, or nothing. */
static void nxd_inval_submit(struct nxd_c *nc, struct nxd_inval *op)
{
	struct bio *bio = op->bio, *clone;
	bool discard = bio_op(bio) == REQ_OP_DISCARD;

	if (discard && !bdev_max_discard_sectors(nc->hdd->bdev)) {
		unsigned long flags;

		/* Nothing to do on the HDD; the logged copies are discarded. */
		WRITE_ONCE(op->hdd_state, NXD_HDD_OK);
		spin_lock_irqsave(&nc->qlock, flags);
		list_add_tail(&op->bnode, &nc->done_invals);
		spin_unlock_irqrestore(&nc->qlock, flags);
		return;
	}
	/* A plain write needs no FUA: its INVAL is logged lazily. */
	op->lazy = !discard && !(bio->bi_opf & REQ_FUA) &&
		   !atomic_read(&nc->degraded);
	clone = bio_alloc_clone(nc->hdd->bdev, bio, GFP_NOIO, &nc->bs);
	if (!discard && !op->lazy)
		clone->bi_opf |= REQ_FUA;
	clone->bi_end_io = nxd_inval_endio;
	clone->bi_private = op;
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
		/* Parked ops must be durable on the HDD: see nxd_inval_park(). */
		if (op->lazy)
			op->error = nxd_hdd_flush(nc);
		if (op->error)
			nxd_inval_ack(nc, op);
		else
			nxd_inval_park(nc, op);
		return;
	}
	if (op->lazy) {
		nxd_lazy_add(nc, op);
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

		spin_lock(&nc->lock);
		busy = nxd_destage_busy_locked(nc, op->first, op->last);
		spin_unlock(&nc->lock);
		if (busy)
			continue;
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
	return r || atomic_read(&nc->lazy_want) ||
	       ((!bio_list_empty(&nc->held) || !list_empty(&nc->parked) ||
		 !list_empty(&nc->fenced)) && atomic_read(&nc->kick)) ||
	       nxd_fast_has_work(nc);
}

/* Degraded: nothing is logged; see the ordering rules at the top. */
static void nxd_degraded_bio(struct nxd_c *nc, struct bio *bio)
{
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool logged, lazy;

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
		lazy = nc->nr_lazy;
		spin_unlock(&nc->lock);
		/*
		 * Lazy INVALs cannot be logged now: their logged copies must
		 * leave the log first, or a replay would bring them back.
		 */
		if (lazy && !logged) {
			nxd_lazy_drop_if_empty(nc);
			lazy = false;
		}
		if (nxd_fast_void_left(nc) ||
		    (logged && (lazy || nxd_ssd_flush(nc))))
			bio_list_add(&nc->held, bio);
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
	nxd_lazy_drop_if_empty(nc);
	if (nxd_lazy_fua_blocked(nc, bio))
		return;
	nxd_count(nc, NXD_CTR(writes_direct), 1);
	submit_bio_noacct(nxd_bio_to_hdd(nc, bio));
}

/*
 * An HDD write that map sent here because a merge was in progress: once
 * the open batch is indexed, nothing logged under it means no INVAL.
 */
static bool nxd_writer_direct(struct nxd_c *nc, struct bio *bio)
{
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool logged;

	nxd_batch_commit(nc);
	spin_lock(&nc->lock);
	logged = nxd_range_logged(nc, s >> 3, (e - 1) >> 3);
	spin_unlock(&nc->lock);
	if (logged)
		return false;
	if (nxd_lazy_fua_blocked(nc, bio))
		return true;
	nxd_count(nc, NXD_CTR(writes_direct), 1);
	submit_bio_noacct(nxd_bio_to_hdd(nc, bio));
	return true;
}

static void nxd_writer_bio(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	sector_t s = bio->bi_iter.bi_sector, e = bio_end_sector(bio);
	bool busy;

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
		/* Writes acknowledged before this flush: their INVALs first. */
		if (nxd_lazy_commit(nc) && !atomic_read(&nc->degraded)) {
			bio_io_error(bio);
			return;
		}
		if (!atomic_read(&nc->degraded)) {
			bio_set_dev(bio, nc->ssd->bdev);
			submit_bio_noacct(bio);
			return;
		}
	}
	if (atomic_read(&nc->degraded))
		nxd_degraded_bio(nc, bio);
	else if (bio_op(bio) == REQ_OP_WRITE && pb->route == NXD_H_HDD &&
		 nxd_writer_direct(nc, bio))
		return;
	else if (bio_op(bio) == REQ_OP_DISCARD || pb->route == NXD_H_HDD)
		nxd_inval_start(nc, bio);
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
		if (atomic_read(&nc->lazy_want)) {
			/* Degraded, they wait for the log to empty (held flush). */
			if (!atomic_read(&nc->degraded))
				nxd_lazy_commit(nc);
			atomic_set(&nc->lazy_want, 0);
			wake_up_all(&nc->ewq);
		}
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
	struct task_struct *t;

	t = kthread_run(nxd_writer_fn, nc, "nxd-w/%s",
			dm_table_device_name(nc->ti->table));
	if (IS_ERR(t))
		return PTR_ERR(t);
	nc->writer = t;
	return 0;
}

void nxd_writer_stop(struct nxd_c *nc)
{
	if (nc->writer) {
		kthread_stop(nc->writer);
		nc->writer = NULL;
	}
}
