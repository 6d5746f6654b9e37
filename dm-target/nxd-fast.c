// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd direct log writes: a logged write of whole blocks is remapped by
 * map straight to free slots of the open log segment, so the submitter
 * pays what a plain remap costs (no copy, no checksum, no thread hop for
 * the data).  The writer thread writes each segment's header once all of
 * its data landed, with PREFLUSH so that the data is durable before the
 * header can be (NXD_SEG_ORDERED: no data checksums), then indexes the
 * blocks and completes the bios (end_io returned DM_ENDIO_INCOMPLETE).
 *
 * Ordering (docs/design.md, section 4):
 * - Segments, direct or the writer's own batch, are committed strictly in
 *   seq order by the writer; a bio is acknowledged only after its segment
 *   and every earlier one are committed, so a flush sent to the SSD after
 *   an acknowledgement covers the headers it needs.
 * - Blocks of uncommitted direct segments are not in the index.  Before
 *   the writer merges or fills a partial block it commits every direct
 *   segment holding a block of that region (nxd_fast_region_busy), and
 *   the merge counter keeps new direct writes out of the region meanwhile,
 *   so a merge never misses a newer copy.
 * - A failed data write, or a freeze of the log, makes every uncommitted
 *   segment void: their ring space is given back and their bios are redone
 *   on the degraded path; none of them was acknowledged.
 */
#include <linux/slab.h>
#include <linux/hash.h>
#include <linux/log2.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd fast"

u32 *nxd_region_ctr(u32 *ctrs, u64 block)
{
	return &ctrs[hash_64(block >> NXD_REGION_SHIFT, ilog2(NXD_MERGE_SLOTS))];
}

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
	f->fua = false;
	f->error = 0;
	bio_list_init(&f->bios);
	atomic_set(&f->pending, 1);
	nxd_ring_push(r, pos, NXD_SEG_MAX_DATA, 0);
	nc->fopen = f;
	return f;
}

bool nxd_fast_map(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb)
{
	sector_t s = bio->bi_iter.bi_sector, nr = bio_sectors(bio);
	u64 first = s >> 3, k = nr >> 3, i;
	struct nxd_fseg *f;
	u32 slot;

	if (((s | nr) & 7) || k > NXD_SEG_MAX_DATA || READ_ONCE(nc->log_full))
		return false;
	spin_lock(&nc->lock);
	/* nxd_fast_fail() relies on this check under the lock. */
	if (atomic_read(&nc->degraded) || nc->frozen_end ||
	    nxd_inval_overlap_locked(nc, first, first + k - 1) ||
	    nxd_merging_locked(nc, first, first + k - 1))
		goto slow;
	f = nc->fopen;
	if (!f || f->nr + k > NXD_SEG_MAX_DATA) {
		f = nxd_fast_open_locked(nc);
		if (!f)
			goto slow;
	}
	slot = f->pos + 1 + f->nr;
	for (i = 0; i < k; i++) {
		f->blocks[f->nr++] = first + i;
		(*nxd_region_ctr(nc->fast_blocks, first + i))++;
	}
	atomic_inc(&f->pending);
	if (bio->bi_opf & REQ_FUA)
		f->fua = true;
	spin_unlock(&nc->lock);

	pb->fast = NXD_FAST_INFLIGHT;
	pb->fseg = f;
	pb->fua = bio->bi_opf & REQ_FUA;
	pb->iter = bio->bi_iter;
	pb->route = NXD_H_SSD;
	/* The header's PREFLUSH (and FUA) covers the data. */
	bio->bi_opf &= ~REQ_FUA;
	bio_set_dev(bio, nc->ssd->bdev);
	bio->bi_iter.bi_sector = nxd_slot_sector(nc, slot);
	nxd_count(nc, NXD_CTR(writes_logged), 1);
	return true;
slow:
	spin_unlock(&nc->lock);
	return false;
}

/* end_io of a direct write's data: the writer completes it at commit. */
int nxd_fast_endio(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb,
		   blk_status_t *error)
{
	struct nxd_fseg *f = pb->fseg;
	unsigned long flags;

	if (*error)
		WRITE_ONCE(f->error, blk_status_to_errno(*error));
	spin_lock_irqsave(&nc->qlock, flags);
	bio_list_add(&f->bios, bio);
	spin_unlock_irqrestore(&nc->qlock, flags);
	/* The last one, or the last but the open reference: commit or close. */
	if (atomic_dec_return(&f->pending) <= 1)
		wake_up(&nc->wq);
	return DM_ENDIO_INCOMPLETE;
}

/* Does the oldest direct segment wait for the writer? */
bool nxd_fast_has_work(struct nxd_c *nc)
{
	struct nxd_fseg *f;
	bool r = false;

	spin_lock(&nc->lock);
	if (nc->fs_count) {
		f = nxd_fseg_at(nc, 0);
		r = atomic_read(&f->pending) <= (f == nc->fopen);
	}
	spin_unlock(&nc->lock);
	return r;
}

/* Does a direct segment not committed yet hold a block of @block's region? */
bool nxd_fast_region_busy(struct nxd_c *nc, u64 block)
{
	return nc->fs_count && *nxd_region_ctr(nc->fast_blocks, block);
}

/* Give back the ring space of segments never committed.  Under nc->lock. */
void nxd_uncommitted_drop_locked(struct nxd_c *nc)
{
	while (nc->ring.count && nc->ring.next_seq > nc->commit_seq)
		nxd_ring_unpush(&nc->ring);
}

/*
 * A data write failed, or the log froze (@err 0): no uncommitted segment
 * will ever be committed.  Wait for their data writes, then redo every
 * bio on the degraded path, or fail them if the log could not be frozen.
 */
void nxd_fast_fail(struct nxd_c *nc, int err)
{
	struct bio_list bios = BIO_EMPTY_LIST;
	struct bio *bio;
	int frz;
	u32 i;

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
	nxd_uncommitted_drop_locked(nc);
	spin_lock_irq(&nc->qlock);
	for (i = 0; i < nc->fs_count; i++)
		bio_list_merge(&bios, &nxd_fseg_at(nc, i)->bios);
	spin_unlock_irq(&nc->qlock);
	nc->fs_count = 0;
	nc->fs_first = 0;
	memset(nc->fast_blocks, 0, sizeof(nc->fast_blocks));
	spin_unlock(&nc->lock);

	while ((bio = bio_list_pop(&bios))) {
		struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

		/* As map saw it; the degraded path sends it to the HDD. */
		pb->fast = NXD_FAST_NONE;
		pb->fseg = NULL;
		bio->bi_iter = pb->iter;
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
 * and complete its bios.  Writer only.
 */
static void nxd_fast_commit(struct nxd_c *nc, struct nxd_fseg *f)
{
	void *hdr = nc->fhdr;
	struct bio_list bios;
	struct nxd_segd *sd;
	struct nxd_ient old;
	struct bio *bio;
	blk_opf_t opf = REQ_OP_WRITE | REQ_SYNC | REQ_PREFLUSH;
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
		nxd_seg_add_data(hdr, f->blocks[i], 0xff, 0);
	nxd_seg_seal(hdr);
	if (f->fua)
		opf |= REQ_FUA;
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
	for (i = 0; i < f->nr; i++) {
		u64 b = f->blocks[i];

		r = nxd_index_set(&nc->ix, b, f->pos + 1 + i, 0xff, &old);
		if (r == 1)
			nxd_seg_put_locked(nc, old.slot);
		if (!WARN_ON_ONCE(r < 0))
			nxd_index_find(&nc->ix, b)->flags |= NXD_IE_NOCRC;
		(*nxd_region_ctr(nc->fast_blocks, b))--;
	}
	nc->commit_seq = f->seq + 1;
	nc->fs_first = (nc->fs_first + 1) % NXD_FSEG_MAX;
	nc->fs_count--;
	spin_lock_irq(&nc->qlock);
	bios = f->bios;
	bio_list_init(&f->bios);
	spin_unlock_irq(&nc->qlock);
	spin_unlock(&nc->lock);

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

/*
 * Commit the direct segments whose data landed, oldest first, closing the
 * open one once all of its data is in (group commit: what arrived while
 * the previous header was written goes into one segment).
 */
void nxd_fast_ready(struct nxd_c *nc)
{
	for (;;) {
		struct nxd_fseg *f;
		bool ready;

		spin_lock(&nc->lock);
		if (!nc->fs_count) {
			spin_unlock(&nc->lock);
			return;
		}
		f = nxd_fseg_at(nc, 0);
		if (f == nc->fopen && atomic_read(&f->pending) == 1)
			nxd_fast_close_locked(nc);
		ready = !atomic_read(&f->pending) && f != nc->fopen;
		spin_unlock(&nc->lock);
		if (!ready)
			return;
		nxd_fast_commit(nc, f);
	}
}

/* Commit every direct segment older than @before, waiting for its data. */
void nxd_fast_sync(struct nxd_c *nc, u64 before)
{
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
		nxd_fast_commit(nc, f);
	}
}
