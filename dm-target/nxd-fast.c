// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd direct log writes: a logged write is remapped by map straight to
 * free slots of the open log segment and acknowledged when its data
 * lands, so the submitter pays what a plain remap costs (no copy, no
 * checksum, no thread hop).  Its blocks are whole, but for partial ones at
 * its ends that have no copy logged or on its way (nxd_fast_partial_ok):
 * those keep their other sectors on the HDD, as the writer's own partial
 * records of unlogged blocks do.  The writer thread writes each
 * segment's header once all of its data landed, with PREFLUSH so that the
 * data is durable before the header can be (NXD_SEG_ORDERED: no data
 * checksums), then moves its blocks into the index.
 *
 * Ordering (docs/design.md, section 4):
 * - Segments, direct or the writer's own batch, are committed strictly in
 *   seq order by the writer, so the index changes in the order a replay
 *   applies them.
 * - An acknowledged block of an uncommitted segment is found by reads in
 *   the segment itself (nxd_fast_lookup_locked).  Whatever decides by the
 *   index (map's direct HDD path, discards, the writer's slow paths, the
 *   look-up of a partial block to merge) first commits the direct segments
 *   of the regions concerned, or sends the bio to the writer, which does.
 * - A flush makes acknowledged writes durable: while direct segments are
 *   uncommitted, the SSD's flush goes through the writer, which commits
 *   them first.  A FUA write is acknowledged at its segment's commit (the
 *   header is PREFLUSH|FUA).
 * - A failed data or header write, or a freeze of the log, ends the
 *   segments in flight: those at or after the freeze are void (never
 *   replayed); their acknowledged blocks are indexed and served from the
 *   SSD, and the degraded destager copies them to the HDD; flushes wait
 *   until it has (nxd_fast_void_left).  The bios not yet acknowledged are
 *   redone on the degraded path.
 */
#include <linux/slab.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd fast"

/*
 * N: a write with a partial block at either end goes to the writer, which
 * copies it into a checksummed batch, as every such write once did (for
 * comparisons, and for tests that need such batches).
 */
static bool direct_partial = true;
module_param(direct_partial, bool, 0644);
MODULE_PARM_DESC(direct_partial,
		 "partial blocks at a logged write's ends go direct to the log, no copy (default Y)");

int nxd_fast_alloc(struct nxd_c *nc)
{
	nc->fsegs = kvcalloc(NXD_FSEG_MAX, sizeof(*nc->fsegs), GFP_KERNEL);
	nc->fhdr = kmalloc(NXD_BLOCK_SIZE, GFP_KERNEL);
	return nc->fsegs && nc->fhdr ? 0 : -ENOMEM;
}

void nxd_fast_free(struct nxd_c *nc)
{
	kvfree(nc->fsegs);
	kfree(nc->fhdr);
	nc->fsegs = NULL;
	nc->fhdr = NULL;
}

static struct nxd_fseg *nxd_fseg_at(struct nxd_c *nc, u32 i)
{
	return &nc->fsegs[(nc->fs_first + i) % NXD_FSEG_MAX];
}

/*
 * The oldest direct segment not committed nor failed, or U64_MAX: the
 * destager stops before it even when the log is frozen, since until
 * nxd_fast_fail() indexes what it acknowledged its live count says 0.
 */
u64 nxd_fast_first_seq_locked(struct nxd_c *nc)
{
	return nc->fs_count ? nxd_fseg_at(nc, 0)->seq : U64_MAX;
}

/* No more blocks go into the open segment; it is the ring's newest. */
void nxd_fast_close_locked(struct nxd_c *nc)
{
	struct nxd_fseg *f = nc->fopen;

	nc->fopen = NULL;
	nxd_ring_trim_newest(&nc->ring, f->nr);
	if (atomic_dec_and_test(&f->pending))
		wake_up(&nc->wq);
}

/*
 * Open a segment at the ring's head, reserving a whole one.  Leaves room
 * for the writer's own batch and the INVAL reserve, so a direct write
 * never takes the space a held write or an INVAL needs.
 */
static struct nxd_fseg *nxd_fast_open_locked(struct nxd_c *nc)
{
	struct nxd_ring *r = &nc->ring;
	struct nxd_fseg *f;
	u64 pos;

	if (nc->fopen)
		nxd_fast_close_locked(nc);
	if (nc->fs_count == NXD_FSEG_MAX ||
	    nxd_ring_used(r) + 2 * NXD_SEG_MAX_BLOCKS + NXD_LOG_RESERVE > r->ring_blocks ||
	    r->count + 16 >= r->cap ||
	    nxd_ring_reserve(r, NXD_SEG_MAX_DATA, &pos))
		return NULL;
	f = nxd_fseg_at(nc, nc->fs_count++);
	f->seq = r->next_seq;
	f->pos = (u32)pos;
	f->nr = 0;
	f->seen = 0;
	f->fua = false;
	f->error = 0;
	bio_list_init(&f->bios);
	bitmap_zero(f->acked, NXD_SEG_MAX_DATA);
	memset(f->hkeys, 0xff, sizeof(f->hkeys));
	atomic_set(&f->pending, 1);
	nxd_ring_push(r, pos, NXD_SEG_MAX_DATA, 0);
	nc->fopen = f;
	return f;
}

/* Does an uncommitted direct segment hold any copy of @block, landed or not? */
static bool nxd_fast_holds_locked(struct nxd_c *nc, u64 block)
{
	u32 i;

	if (!nc->fs_count || !*nxd_region_ctr(nc->fast_blocks, block))
		return false;
	for (i = 0; i < nc->fs_count; i++)
		if (nxd_blk_hash_lookup(nxd_fseg_at(nc, i)->hkeys,
					nxd_fseg_at(nc, i)->hvals, block) >= 0)
			return true;
	return false;
}

/* Does the log hold @block: indexed, or in a direct segment not committed? */
static bool nxd_log_holds_locked(struct nxd_c *nc, u64 block)
{
	return nxd_index_find(&nc->ix, block) || nxd_fast_holds_locked(nc, block);
}

/*
 * The number of blocks from @first on (at most to @last) that the log
 * holds, if it holds @first (*@owned true), or else that it does not.
 * A write is cut there: the log owns what it holds, so no write reaches
 * the HDD under a logged copy, and no copy can come back over one.
 */
u64 nxd_owned_run_locked(struct nxd_c *nc, u64 first, u64 last, bool *owned)
{
	u64 b;

	*owned = false;
	if (!nxd_index_first(&nc->ix, first, last) &&
	    !nxd_fast_range_busy(nc, first, last))
		return last - first + 1;
	*owned = nxd_log_holds_locked(nc, first);
	for (b = first + 1; b <= last; b++)
		if (nxd_log_holds_locked(nc, b) != *owned)
			break;
	return b - first;
}

/*
 * May a partial block go to a direct segment, its other sectors left to
 * the HDD as the writer does for a block with no logged copy?  Only if no
 * copy of it is logged, on its way into the log or in the writer's hands:
 * its record would replace that copy, whose other sectors the write did
 * not rewrite.
 */
static bool nxd_fast_partial_ok(struct nxd_c *nc, u64 block)
{
	return !nxd_index_find(&nc->ix, block) &&
	       !nxd_fast_holds_locked(nc, block) &&
	       !nxd_queued_busy(nc, block);
}

/*
 * Remap a logged write to the open direct segment.  Whole blocks, and
 * partial ones at the ends with no copy anywhere (nxd_fast_partial_ok):
 * the bio lands at its sectors' offsets in contiguous slots, and the
 * header's masks say which sectors count.
 */
bool nxd_fast_map(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb)
{
	sector_t s = bio->bi_iter.bi_sector, nr = bio_sectors(bio), e = s + nr;
	u64 first = s >> 3, last = (e - 1) >> 3, k = last - first + 1, i;
	bool partial = (s | nr) & 7;
	struct nxd_fseg *f;
	bool opened = false;
	u32 slot, m;

	if (k > NXD_SEG_MAX_DATA || READ_ONCE(nc->log_full))
		return false;
	/* Sectors of a slot written alone: the SSD must take 512 B writes. */
	if (partial && (!READ_ONCE(direct_partial) ||
			bdev_logical_block_size(nc->ssd->bdev) > SECTOR_SIZE))
		return false;
	spin_lock(&nc->lock);
	/* nxd_fast_fail() relies on this check under the lock. */
	if (atomic_read(&nc->degraded) || nc->frozen_end ||
	    nxd_inval_overlap_locked(nc, first, last) ||
	    nxd_merging_locked(nc, first, last))
		goto slow;
	if (partial && (((s & 7) && !nxd_fast_partial_ok(nc, first)) ||
			((e & 7) && !nxd_fast_partial_ok(nc, last))))
		goto slow;
	f = nc->fopen;
	if (!f || f->nr + k > NXD_SEG_MAX_DATA) {
		/* The segment set changes: every reader's look-up with it. */
		nxd_shards_lock(nc, NXD_SHARDS_ALL);
		f = nxd_fast_open_locked(nc);
		nxd_shards_unlock(nc, NXD_SHARDS_ALL);
		if (!f)
			goto slow;
		opened = true;
	}
	pb->fidx = f->nr;
	pb->fnr = k;
	slot = f->pos + 1 + f->nr;
	m = nxd_shard_mask(first, last);
	nxd_shards_lock(nc, m);
	for (i = first; i <= last; i++) {
		nxd_blk_hash_set(f->hkeys, f->hvals, i, f->nr);
		f->masks[f->nr] = nxd_block_mask(i, s, e);
		f->blocks[f->nr++] = i;
		(*nxd_region_ctr(nc->fast_blocks, i))++;
	}
	nxd_shards_unlock(nc, m);
	atomic_inc(&f->pending);
	if (bio->bi_opf & REQ_FUA)
		f->fua = true;
	spin_unlock(&nc->lock);
	/* The writer looks at an open segment every tick from now on. */
	if (opened)
		wake_up(&nc->wq);

	pb->fast = NXD_FAST_INFLIGHT;
	pb->fseg = f;
	pb->fua = bio->bi_opf & REQ_FUA;
	pb->iter = bio->bi_iter;
	pb->route = NXD_H_SSD;
	/* The header's PREFLUSH (and FUA) covers the data. */
	bio->bi_opf &= ~REQ_FUA;
	bio_set_dev(bio, nc->ssd->bdev);
	bio->bi_iter.bi_sector = nxd_slot_sector(nc, slot) + (s & 7);
	nxd_count(nc, NXD_CTR(writes_logged), 1);
	return true;
slow:
	spin_unlock(&nc->lock);
	return false;
}

/*
 * end_io of a direct write's data.  Landed and not FUA: acknowledged now
 * (readable through its segment until the commit indexes it).  FUA or
 * failed: the writer completes it at the commit, or redoes it.
 */
int nxd_fast_endio(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb,
		   blk_status_t *error)
{
	struct nxd_fseg *f = pb->fseg;
	unsigned long flags;
	int r = DM_ENDIO_DONE, kept;
	u32 i;

	if (*error || pb->fua) {
		if (*error)
			WRITE_ONCE(f->error, blk_status_to_errno(*error));
		spin_lock_irqsave(&nc->qlock, flags);
		bio_list_add(&f->bios, bio);
		spin_unlock_irqrestore(&nc->qlock, flags);
		r = DM_ENDIO_INCOMPLETE;
	} else {
		for (i = pb->fidx; i < pb->fidx + pb->fnr; i++)
			set_bit(i, f->acked);
		pb->fast = NXD_FAST_NONE;
		pb->fseg = NULL;
	}
	/*
	 * Last thing we touch: at 0 the writer may commit and reuse @f.  A
	 * FUA or failed write also wants its open segment closed now (at 1,
	 * the open reference), not at the writer's next tick.
	 */
	kept = r == DM_ENDIO_INCOMPLETE;
	if (atomic_dec_return(&f->pending) <= kept)
		wake_up(&nc->wq);
	return r;
}

/*
 * The newest acknowledged copy of @block in an uncommitted direct segment:
 * newer than anything in the index.  Under nc->lock, or @block's shard.
 */
bool nxd_fast_lookup_locked(struct nxd_c *nc, u64 block, u32 *slot, u8 *mask)
{
	u32 i;

	if (!nc->fs_count || !*nxd_region_ctr(nc->fast_blocks, block))
		return false;
	for (i = nc->fs_count; i-- > 0;) {
		struct nxd_fseg *f = nxd_fseg_at(nc, i);
		int j = nxd_blk_hash_lookup(f->hkeys, f->hvals, block);

		/* The newest copy may still be in flight: then an older one. */
		for (; j >= 0; j--) {
			if (f->blocks[j] == block && test_bit(j, f->acked)) {
				*slot = f->pos + 1 + j;
				*mask = f->masks[j];
				return true;
			}
		}
	}
	return false;
}

/*
 * Does the oldest direct segment wait for the writer: closed with all its
 * data in; open and never looked at (the writer then waits a tick at a
 * time, not for a wake-up); or open with all its data in and either a FUA
 * write in it or nothing added since the writer's last look
 * (nxd_fast_ready)?
 */
bool nxd_fast_has_work(struct nxd_c *nc)
{
	bool r = false;

	spin_lock(&nc->lock);
	if (nc->fs_count) {
		struct nxd_fseg *f = nxd_fseg_at(nc, 0);

		if (f != nc->fopen)
			r = !atomic_read(&f->pending);
		else
			r = !f->seen || (atomic_read(&f->pending) == 1 &&
					 (f->fua || f->nr == f->seen));
	}
	spin_unlock(&nc->lock);
	return r;
}

/*
 * Degraded: does a segment the freeze made void still hold a live block?
 * Acknowledged, it exists only there until the destager copies it.
 */
bool nxd_fast_void_left(struct nxd_c *nc)
{
	struct nxd_ring *rg = &nc->ring;
	bool r = false;
	u64 seq;

	spin_lock(&nc->lock);
	if (nc->frozen_end && rg->count) {
		for (seq = max(rg->first_seq, nc->frozen_end);
		     seq < rg->next_seq && !r; seq++)
			r = nxd_ring_at(rg, seq - rg->first_seq)->live;
	}
	spin_unlock(&nc->lock);
	return r;
}

/*
 * A data or header write failed, or the log froze (@err 0): no segment
 * from the freeze on will be committed.  Once their data writes are in,
 * index what they acknowledged (void segments, destaged while degraded),
 * and redo the rest on the degraded path, or fail it if the log could not
 * be frozen.
 */
void nxd_fast_fail(struct nxd_c *nc, int err)
{
	struct bio_list bios = BIO_EMPTY_LIST;
	struct nxd_ient old;
	struct bio *bio;
	int frz, r;
	u32 i, j;

	if (err)
		nxd_ssd_failed(nc, err, "log write");
	/*
	 * The volume is degraded by now, and map opens no segment once it
	 * sees that under the lock: after this section the set is final.
	 */
	spin_lock(&nc->lock);
	if (nc->fopen)
		nxd_fast_close_locked(nc);
	spin_unlock(&nc->lock);
	for (i = 0; i < nc->fs_count; i++) {
		struct nxd_fseg *f = nxd_fseg_at(nc, i);

		wait_event(nc->wq, !atomic_read(&f->pending));
	}
	frz = nxd_log_freeze(nc);

	spin_lock(&nc->lock);
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
	for (i = 0; i < nc->fs_count; i++) {
		struct nxd_fseg *f = nxd_fseg_at(nc, i);
		struct nxd_segd *sd = nxd_ring_at(&nc->ring, f->seq - nc->ring.first_seq);

		sd->live = bitmap_weight(f->acked, NXD_SEG_MAX_DATA);
		for_each_set_bit(j, f->acked, NXD_SEG_MAX_DATA) {
			r = nxd_index_set(&nc->ix, f->blocks[j], f->pos + 1 + j,
					  f->masks[j], &old);
			if (r == 1)
				nxd_seg_supersede_locked(nc, &old, f->seq);
			if (!WARN_ON_ONCE(r < 0))
				nxd_index_find(&nc->ix, f->blocks[j])->flags |= NXD_IE_NOCRC;
		}
		spin_lock_irq(&nc->qlock);
		bio_list_merge(&bios, &f->bios);
		bio_list_init(&f->bios);
		spin_unlock_irq(&nc->qlock);
	}
	nc->fs_count = 0;
	nc->fs_first = 0;
	memset(nc->fast_blocks, 0, sizeof(nc->fast_blocks));
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	spin_unlock(&nc->lock);
	wake_up_all(&nc->ewq);

	while ((bio = bio_list_pop(&bios))) {
		struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

		/* As map saw it; the degraded path sends it to the HDD. */
		pb->fast = NXD_FAST_NONE;
		pb->fseg = NULL;
		nxd_bio_reset(bio, &pb->iter);
		bio->bi_status = BLK_STS_OK;
		if (pb->fua)
			bio->bi_opf |= REQ_FUA;
		atomic_set(&pb->pending, 1);
		pb->error = frz ? frz : NXD_PB_RETRY;
		nxd_bio_done(nc, bio);
	}
}

/*
 * Commit the oldest direct segment, whose data all landed: header with
 * PREFLUSH (every data block durable before it), then index its blocks
 * and complete its FUA bios.  @flushed: an SSD flush that began after
 * its data landed has completed, so the header needs no PREFLUSH of its
 * own, unless it carries a FUA write: then the headers before it must be
 * durable too.  Writer only.
 */
static void nxd_fast_commit(struct nxd_c *nc, struct nxd_fseg *f, bool flushed)
{
	void *hdr = nc->fhdr;
	struct bio_list bios;
	struct nxd_segd *sd;
	struct nxd_ient old;
	struct bio *bio;
	blk_opf_t opf = REQ_OP_WRITE | REQ_SYNC;
	u32 i;
	int r;

	r = READ_ONCE(f->error);
	if (r || atomic_read(&nc->degraded)) {
		nxd_fast_fail(nc, r);
		return;
	}
	nxd_seg_init(hdr, nc->sb.vol_uuid, f->seq, nc->sb.gen, f->pos);
	nxd_seg_set_flags(hdr, NXD_SEG_ORDERED);
	for (i = 0; i < f->nr; i++)
		nxd_seg_add_data(hdr, f->blocks[i], f->masks[i], 0);
	nxd_seg_seal(hdr);
	if (f->fua)
		opf |= REQ_PREFLUSH | REQ_FUA;
	else if (!flushed)
		opf |= REQ_PREFLUSH;
	if (nxd_fault(NXD_FAULT_COMMIT_PREFLUSH))
		opf &= ~REQ_PREFLUSH;
	r = nxd_ssd_io(nc, opf, nc->sb.ring_start + f->pos, 1, hdr);
	if (r) {
		nxd_fast_fail(nc, r);
		return;
	}

	spin_lock(&nc->lock);
	if (nc->frozen_end && f->seq >= nc->frozen_end) {
		/* Frozen meanwhile: it lies past the log's end. */
		spin_unlock(&nc->lock);
		nxd_fast_fail(nc, 0);
		return;
	}
	sd = nxd_ring_at(&nc->ring, f->seq - nc->ring.first_seq);
	sd->live = f->nr;
	/* From the segment to the index in one step for every reader. */
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
	for (i = 0; i < f->nr; i++) {
		u64 b = f->blocks[i];

		r = nxd_index_set(&nc->ix, b, f->pos + 1 + i, f->masks[i], &old);
		if (r == 1)
			nxd_seg_supersede_locked(nc, &old, f->seq);
		if (!WARN_ON_ONCE(r < 0))
			nxd_index_find(&nc->ix, b)->flags |= NXD_IE_NOCRC;
		(*nxd_region_ctr(nc->fast_blocks, b))--;
	}
	nc->commit_seq = f->seq + 1;
	nc->fs_first = (nc->fs_first + 1) % NXD_FSEG_MAX;
	nc->fs_count--;
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	spin_lock_irq(&nc->qlock);
	bios = f->bios;
	bio_list_init(&f->bios);
	spin_unlock_irq(&nc->qlock);
	spin_unlock(&nc->lock);
	wake_up_all(&nc->ewq);

	nxd_count(nc, NXD_CTR(segments_written), 1);
	nxd_count(nc, NXD_CTR(log_blocks_written), 1 + f->nr);
	while ((bio = bio_list_pop(&bios))) {
		struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

		pb->fast = NXD_FAST_DONE;
		bio->bi_status = BLK_STS_OK;
		bio_endio(bio);
	}
	if (nxd_log_used_pct(nc) >= READ_ONCE(nc->vol->tun.low_wm))
		nxd_destager_wake(nc);
}

/* Closed direct segments, oldest first, whose data all landed. */
static u32 nxd_fast_nr_ready_locked(struct nxd_c *nc)
{
	u32 i;

	for (i = 0; i < nc->fs_count; i++) {
		struct nxd_fseg *f = nxd_fseg_at(nc, i);

		if (f == nc->fopen || atomic_read(&f->pending))
			break;
	}
	return i;
}

/*
 * Commit the direct segments whose data landed, oldest first.  The open
 * one is closed when it is full, when a FUA write waits in it, or once
 * its data is in and nothing was added since the writer's last look (it
 * comes back every tick while one is open): under a steady stream the
 * segments fill up, and an idle volume commits within two ticks.  When
 * several are ready, one SSD flush covers the data of them all, and
 * their headers go without a PREFLUSH each (review finding 6).
 */
void nxd_fast_ready(struct nxd_c *nc)
{
	u32 covered = 0;

	for (;;) {
		struct nxd_fseg *f;
		u32 n;

		spin_lock(&nc->lock);
		if (!nc->fs_count) {
			spin_unlock(&nc->lock);
			return;
		}
		f = nxd_fseg_at(nc, 0);
		if (f == nc->fopen) {
			if (atomic_read(&f->pending) == 1 &&
			    (f->fua || f->nr == f->seen))
				nxd_fast_close_locked(nc);
			else
				f->seen = f->nr;
		}
		n = nxd_fast_nr_ready_locked(nc);
		spin_unlock(&nc->lock);
		if (!n)
			return;
		if (!covered && n > 1 && !nxd_ssd_flush(nc))
			covered = n;
		nxd_fast_commit(nc, f, covered > 0);
		if (covered)
			covered--;
	}
}

/*
 * Commit every direct segment older than @before, waiting for its data;
 * U64_MAX: every one opened so far (not those opened meanwhile, so that a
 * steady stream of direct writes cannot keep the caller here).
 */
void nxd_fast_sync(struct nxd_c *nc, u64 before)
{
	if (before == U64_MAX) {
		spin_lock(&nc->lock);
		before = nc->ring.next_seq;
		spin_unlock(&nc->lock);
	}
	for (;;) {
		struct nxd_fseg *f;

		spin_lock(&nc->lock);
		f = nc->fs_count ? nxd_fseg_at(nc, 0) : NULL;
		if (!f || f->seq >= before) {
			spin_unlock(&nc->lock);
			return;
		}
		if (f == nc->fopen)
			nxd_fast_close_locked(nc);
		spin_unlock(&nc->lock);
		wait_event(nc->wq, !atomic_read(&f->pending));
		nxd_fast_commit(nc, f, false);
	}
}

/* Not the writer: wait until it has committed every direct segment. */
void nxd_fast_wait_committed(struct nxd_c *nc)
{
	for (;;) {
		bool done;

		spin_lock(&nc->lock);
		done = !nc->fs_count;
		if (!done && nc->fopen)
			nc->fopen->seen = nc->fopen->nr;	/* closes at its next look */
		spin_unlock(&nc->lock);
		if (done)
			return;
		nxd_writer_wake(nc);
		wait_event_timeout(nc->ewq, false, HZ / 50);
	}
}
