// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd destager, the reads of a round: the chosen segments read back
 * from the log, their headers and checksums checked, and their live
 * blocks picked (nxd_destage_collect), cut before a block an HDD write in
 * flight covers; clean ahead adds the stripe neighbours of those blocks
 * (nxd_destage_extend).
 */
#include <linux/sort.h>
#include <linux/blkdev.h>
#include <linux/highmem.h>

#include "nxd-destage.h"

#define DM_MSG_PREFIX "nxd destage"

#define NXD_READ_MAX_BLOCKS	256

enum { NXD_D_COPY, NXD_D_DEAD, NXD_D_CUT };

/*
 * What to do with a live block that HDD writes or discards in flight cover
 * wholly: wait (cut the round here) while one is on its way, so the older
 * copy cannot land after it; a finished one made the logged copy stale; a
 * failed one left it the newest.  Partly covered blocks are discard edges
 * (HDD writes over logged data are whole blocks): copying them is safe, the
 * discard leaves their other sectors alone and the discarded ones get the
 * zeros logged for them.  Never waiting on those, or on anything the
 * writer must do, keeps a full log from deadlocking.
 */
static int nxd_op_decision(struct nxd_c *nc, u64 block)
{
	struct nxd_inval *op;
	int d = NXD_D_COPY;

	list_for_each_entry(op, &nc->invals, node) {
		int st;

		if (block < op->full_first || block > op->full_last)
			continue;
		st = READ_ONCE(op->hdd_state);
		if (st == NXD_HDD_INFLIGHT)
			return NXD_D_CUT;
		if (st == NXD_HDD_OK)
			d = NXD_D_DEAD;
	}
	return d;
}

/* Read segments [i, j) of the round, adjacent in the ring, into dbuf. */
static int nxd_destage_read_run(struct nxd_c *nc, struct nxd_round *rd, u32 i,
				u32 j, u32 off)
{
	u32 len = rd->segs[j - 1].pos + 1 + rd->segs[j - 1].nr_data - rd->segs[i].pos;

	return nxd_ssd_io(nc, REQ_OP_READ, nc->sb.ring_start + rd->segs[i].pos,
			  len, nc->dbuf + (size_t)off * NXD_BLOCK_SIZE);
}

/*
 * Read the live segments into dbuf, adjacent ones in one I/O.  Returns how
 * many segments from the first were read; a run that fails is retried one
 * segment at a time, so a bad block costs only the segments from its own.
 */
static u32 nxd_destage_read(struct nxd_c *nc, struct nxd_round *rd, int *err)
{
	u32 i = 0, off = 0;

	*err = 0;
	while (i < rd->nsegs) {
		struct nxd_segd *sd = &rd->segs[i];
		u32 j, k, len, o;

		if (!sd->live) {
			i++;
			continue;
		}
		len = 1 + sd->nr_data;
		for (j = i + 1; j < rd->nsegs; j++) {
			struct nxd_segd *p = &rd->segs[j - 1], *n = &rd->segs[j];

			if (!n->live || n->pos != p->pos + 1 + p->nr_data ||
			    len + 1 + n->nr_data > NXD_READ_MAX_BLOCKS)
				break;
			len += 1 + n->nr_data;
		}
		if (nxd_destage_read_run(nc, rd, i, j, off)) {
			for (k = i, o = off; k < j; k++) {
				*err = nxd_destage_read_run(nc, rd, k, k + 1, o);
				if (*err) {
					nxd_count(nc, NXD_CTR(ssd_errors), 1);
					DMERR_LIMIT("%s: SSD read of seg %llu at %u failed (%d)",
						    dm_table_device_name(nc->ti->table),
						    rd->first_seq + k, rd->segs[k].pos, *err);
					return k;
				}
				o += 1 + rd->segs[k].nr_data;
			}
		}
		off += len;
		i = j;
	}
	return rd->nsegs;
}

/*
 * A logged block read back for destaging that fails its checksum: the SSD
 * lost it (a dropped or torn write).  Never copy it over the HDD, which
 * holds older but good data; the entry is dropped with the round, as a
 * replay would have stopped before it.  Under nc->lock.
 */
static bool nxd_destage_data_ok(struct nxd_c *nc, const struct nxd_dblk *db,
				bool ok, bool nocrc)
{
	if (ok)
		return true;
	nxd_count(nc, NXD_CTR(ssd_errors), 1);
	if (!atomic_xchg(&nc->acked_lost, 1))
		nxd_event(nc, NXD_EV_ACKED_LOST);
	DMERR_LIMIT("%s: logged block %llu (slot %u) %s: lost, not destaged",
		    dm_table_device_name(nc->ti->table), db->block, db->slot,
		    nocrc ? "has no header to vouch for it" : "fails its checksum");
	return false;
}

/*
 * A committed segment whose header no longer decodes: its live blocks are
 * the index entries of its slots; its data blocks were read with it.
 */
static bool nxd_collect_by_index(struct nxd_c *nc, struct nxd_round *rd,
				 u32 si, void *hdr, bool is_void)
{
	const struct nxd_segd *sd = &rd->segs[si];
	u32 i, lo = sd->pos + 1, hi = sd->pos + 1 + sd->nr_data;

	for (i = lo; i < hi; i++) {
		struct nxd_ient *e = nxd_index_at(&nc->ix, i);
		struct nxd_dblk *db;
		int dec;

		if (!e)
			continue;
		dec = nxd_op_decision(nc, e->block);
		if (dec == NXD_D_CUT)
			return false;
		db = &rd->blk[rd->nblk++];
		db->block = e->block;
		db->slot = e->slot;
		db->mask = e->mask;
		db->data = hdr + (size_t)(e->slot - sd->pos) * NXD_BLOCK_SIZE;
		/*
		 * ORDERED, header lost: nothing vouches for the data.  Void
		 * (no header ever written): acknowledged data that landed.
		 */
		db->extra = false;
		db->copy = dec == NXD_D_COPY && !(e->flags & NXD_IE_CLEAN) &&
			   (is_void ||
			    nxd_destage_data_ok(nc, db, !(e->flags & NXD_IE_NOCRC) &&
						nxd_crc16(nxd_block_crc(db->data)) == e->rsvd,
						e->flags & NXD_IE_NOCRC));
		if (dec == NXD_D_COPY && !(e->flags & NXD_IE_CLEAN) && !db->copy)
			rd->lossy[si] = 1;
	}
	return true;
}

/*
 * A segment whose header decodes: its live blocks are the records the
 * index still points at.  False if an HDD write on its way cuts the round.
 */
static bool nxd_collect_by_recs(struct nxd_c *nc, struct nxd_round *rd,
				u32 si, void *hdr, const struct nxd_seg_info *inf)
{
	const struct nxd_segd *sd = &rd->segs[si];
	u32 j, d = 0;

	for (j = 0; j < inf->nr_recs; j++) {
		struct nxd_rec rec;
		struct nxd_ient *e;
		struct nxd_dblk *db;
		int dec;

		nxd_seg_rec(hdr, j, &rec);
		if (rec.type != NXD_REC_DATA)
			continue;
		e = nxd_index_find(&nc->ix, rec.block);
		if (!e || e->slot != sd->pos + 1 + d) {
			d++;
			continue;	/* superseded */
		}
		dec = nxd_op_decision(nc, rec.block);
		if (dec == NXD_D_CUT)
			return false;	/* an HDD write is on its way */
		db = &rd->blk[rd->nblk++];
		db->block = rec.block;
		db->slot = e->slot;
		db->mask = e->mask;
		db->data = hdr + (size_t)(1 + d) * NXD_BLOCK_SIZE;
		db->extra = false;
		db->copy = dec == NXD_D_COPY && !(e->flags & NXD_IE_CLEAN) &&
			   nxd_destage_data_ok(nc, db, (inf->flags & NXD_SEG_ORDERED) ||
					       nxd_block_crc(db->data) == rec.val, false);
		if (dec == NXD_D_COPY && !(e->flags & NXD_IE_CLEAN) && !db->copy)
			rd->lossy[si] = 1;
		d++;
	}
	return true;
}

/* Read the chosen segments and pick their live blocks.  Returns segments kept. */
int nxd_destage_collect(struct nxd_c *nc, struct nxd_round *rd, u64 first_seq)
{
	u32 i, off = 0, nread;
	int r;

	nread = nxd_destage_read(nc, rd, &r);
	if (!nread)
		return r;
	for (i = 0; i < nread; i++) {
		struct nxd_segd *sd = &rd->segs[i];
		void *hdr = nc->dbuf + (size_t)off * NXD_BLOCK_SIZE;
		struct nxd_seg_info si;
		u32 start = rd->nblk;
		bool is_void = false, bad, kept;

		if (!sd->live)
			continue;
		r = nxd_seg_decode(hdr, nc->sb.vol_uuid, nc->sb.ring_blocks,
				   nc->sb.data_sectors >> 3, &si);
		bad = r || si.seq != first_seq + i || si.pos != sd->pos;
		if (bad) {
			is_void = nc->frozen_end && first_seq + i >= nc->frozen_end;
			if (!is_void) {
				nxd_count(nc, NXD_CTR(ssd_errors), 1);
				DMERR_LIMIT("%s: log segment %llu at %u unreadable (%d), use index",
					    dm_table_device_name(nc->ti->table),
					    first_seq + i, sd->pos, r);
			}
		}
		spin_lock(&nc->lock);
		if (nc->dround != rd) {
			/* map's fill look-ups read it under their shards */
			nxd_shards_lock(nc, NXD_SHARDS_ALL);
			nc->dround = rd;
			nxd_shards_unlock(nc, NXD_SHARDS_ALL);
		}
		kept = bad ? nxd_collect_by_index(nc, rd, i, hdr, is_void) :
			     nxd_collect_by_recs(nc, rd, i, hdr, &si);
		if (!kept)
			rd->nblk = start;
		spin_unlock(&nc->lock);
		if (!kept)
			return i;
		off += 1 + sd->nr_data;
	}
	return nread;
}

static u32 nxd_clean_span(struct nxd_c *nc)
{
	u32 span = nc->hdd_io_opt >> NXD_BLOCK_SHIFT;

	/* No stripe (a plain disk): 256 KiB neighbourhoods still seek less. */
	return span >= 8 ? span : 64;
}

/* Is @block among the round's own blocks rd->blk[0..n), sorted? */
static bool nxd_round_has(struct nxd_round *rd, u32 n, u64 block)
{
	u32 i = nxd_round_lower(rd, n, block);

	return i < n && rd->blk[i].block == block;
}

static void nxd_extra_endio(struct bio *bio)
{
	struct nxd_c *nc = bio->bi_private;

	if (bio->bi_status)
		WRITE_ONCE(nc->d_error, blk_status_to_errno(bio->bi_status));
	bio_put(bio);
	if (atomic_dec_and_test(&nc->d_inflight))
		wake_up_all(&nc->dwq);
}

/*
 * Read the extras rd->blk[from..nblk) from their slots, all at once.  Their
 * buffers are vmalloc'd (dbuf): the I/O goes to the pages, so the vmap
 * alias is flushed before and invalidated after (VIVT caches).
 */
static int nxd_extra_read(struct nxd_c *nc, struct nxd_round *rd, u32 from)
{
	struct blk_plug plug;
	u32 i;

	atomic_set(&nc->d_inflight, 1);
	WRITE_ONCE(nc->d_error, 0);
	blk_start_plug(&plug);
	for (i = from; i < rd->nblk; i++) {
		struct nxd_dblk *d = &rd->blk[i];
		struct bio *bio = bio_alloc_bioset(nc->ssd->bdev, 1, REQ_OP_READ,
						   GFP_NOIO, &nc->dbs);

		bio->bi_iter.bi_sector = nxd_slot_sector(nc, d->slot);
		bio->bi_end_io = nxd_extra_endio;
		bio->bi_private = nc;
		flush_kernel_vmap_range(d->data, NXD_BLOCK_SIZE);
		__bio_add_page(bio, vmalloc_to_page(d->data), NXD_BLOCK_SIZE,
			       offset_in_page(d->data));
		atomic_inc(&nc->d_inflight);
		submit_bio(bio);
	}
	blk_finish_plug(&plug);
	if (!atomic_dec_and_test(&nc->d_inflight))
		wait_event(nc->dwq, !atomic_read(&nc->d_inflight));
	for (i = from; i < rd->nblk; i++)
		invalidate_kernel_vmap_range(rd->blk[i].data, NXD_BLOCK_SIZE);
	return READ_ONCE(nc->d_error);
}

/*
 * Clean ahead (see destage_clean_ahead): add to the round the logged blocks
 * of the stripes its own blocks touch, read into dbuf from block @used on.
 * Blocks under a discard or a degraded HDD write are left alone.  An extra
 * whose data fails its checksum is not copied: the round that reaches its
 * segment deals with it.  Sorts the round's blocks first.  A sweeping
 * round (rd->sweep) then adds whole stripes in address order
 * (nxd_extend_sweep).
 */
/* Take the logged, not yet CLEAN blocks of stripe [first, first + span). */
static u32 nxd_extend_stripe(struct nxd_c *nc, struct nxd_round *rd, u32 norig,
			     u64 first, u64 span, void *base, u32 n, u32 room)
{
	u64 last = first + span - 1;
	struct nxd_ient *e;

	for (e = nxd_index_first(&nc->ix, first, last); e && n < room;
	     e = nxd_index_next(e, last)) {
		u64 b = e->block;
		struct nxd_dblk *d;

		if ((e->flags & NXD_IE_CLEAN) ||
		    nxd_round_has(rd, norig, b) ||
		    nxd_inval_overlap_locked(nc, b, b))
			continue;
		d = &rd->blk[rd->nblk++];
		d->block = b;
		d->slot = e->slot;
		d->mask = e->mask;
		d->copy = true;
		d->extra = true;
		d->nocrc = e->flags & NXD_IE_NOCRC;
		d->crc = e->rsvd;
		d->data = base + (size_t)n++ * NXD_BLOCK_SIZE;
	}
	return n;
}

/* Does any of the round's own blocks rd->blk[0..n), sorted, lie in [first, first + span)? */
static bool nxd_round_has_range(struct nxd_round *rd, u32 n, u64 first, u64 span)
{
	u32 i = nxd_round_lower(rd, n, first);

	return i < n && rd->blk[i].block < first + span;
}

/*
 * The sweep: then, while there is room, the stripes from rd->sweep_next on
 * in address order, wrapping at the volume's end, at most
 * NXD_SWEEP_STRIPES of them a round.  Only whole stripes, so that each is
 * filled once; the HDDs see runs of adjacent stripes, which cost one
 * positioning per run rather than one per stripe.
 */
static u32 nxd_extend_sweep(struct nxd_c *nc, struct nxd_round *rd, u32 norig,
			    u32 span, void *base, u32 n, u32 room)
{
	u64 end = nc->max_block - nxd_rem_u64(nc->max_block, span);
	u64 first = rd->sweep_next;
	u32 k, most;

	if (!end)
		return n;
	/* One pass at most: the extras are not looked up again. */
	most = min_t(u64, NXD_SWEEP_STRIPES, div_u64(end, span));
	for (k = 0; k < most && n < room; k++, first += span) {
		struct nxd_ient *e;
		u32 want = 0;

		if (first >= end)
			first = 0;
		e = nxd_index_first(&nc->ix, first, first + span - 1);
		if (!e || nxd_round_has_range(rd, norig, first, span))
			continue;
		for (; e; e = nxd_index_next(e, first + span - 1))
			want += !(e->flags & NXD_IE_CLEAN);
		if (n + want > room)
			break;
		n = nxd_extend_stripe(nc, rd, norig, first, span, base, n, room);
		cond_resched_lock(&nc->lock);
	}
	rd->sweep_next = first >= end ? 0 : first;
	return n;
}

void nxd_destage_extend(struct nxd_c *nc, struct nxd_round *rd, u32 used)
{
	u64 last_stripe = U64_MAX;
	u32 span = nxd_clean_span(nc);
	u32 norig = rd->nblk, room = nc->dbuf_blocks - used, n = 0, i;
	void *base = nc->dbuf + (size_t)used * NXD_BLOCK_SIZE;

	spin_lock(&nc->lock);
	sort(rd->blk, rd->nblk, sizeof(*rd->blk), nxd_dblk_cmp, NULL);
	for (i = 0; i < norig && n < room; i++) {
		u64 first = rd->blk[i].block - nxd_rem_u64(rd->blk[i].block, span);

		/*
		 * Only the stripes of blocks this round copies: what is dirty
		 * beside a CLEAN block was written after it was copied, frees
		 * no log space yet, and made the steady state's rounds, whose
		 * oldest segments were all CLEAN, fill for seconds instead of
		 * passing them (docs/bench/runs/performance-history.md).
		 */
		if (!rd->blk[i].copy)
			continue;
		if (first == last_stripe)
			continue;
		last_stripe = first;
		if (!nxd_index_first(&nc->ix, first, first + span - 1))
			continue;
		n = nxd_extend_stripe(nc, rd, norig, first, span, base, n, room);
		/*
		 * Up to thousands of stripes of index look-ups: let foreground
		 * I/O in between.  Each stripe's extras are whole when the lock
		 * drops, which is all nxd_destage_busy_locked() needs.
		 */
		cond_resched_lock(&nc->lock);
	}
	if (rd->sweep)
		n = nxd_extend_sweep(nc, rd, norig, span, base, n, room);
	spin_unlock(&nc->lock);
	if (!n)
		return;
	if (nxd_extra_read(nc, rd, norig)) {
		/* The round goes on without them. */
		spin_lock(&nc->lock);
		rd->nblk = norig;
		spin_unlock(&nc->lock);
		return;
	}
	for (i = norig; i < rd->nblk; i++) {
		struct nxd_dblk *d = &rd->blk[i];

		if (!d->nocrc && nxd_crc16(nxd_block_crc(d->data)) != d->crc)
			d->copy = false;
	}
}

