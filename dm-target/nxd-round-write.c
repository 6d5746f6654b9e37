// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd destager, the writes of a round: its copies to the HDD, sorted,
 * merged and cut at stripe bounds, under one plug and at most
 * destage_depth in flight; stripe fill (whole stripes, their gaps read
 * from the HDD first); and the fences HDD writes wait on while those are
 * on their way (nxd_destage_busy_locked, nxd_fill_busy_locked).
 */
#include <linux/vmalloc.h>
#include <linux/sort.h>
#include <linux/blkdev.h>
#include <linux/highmem.h>

#include "nxd-destage.h"

#define DM_MSG_PREFIX "nxd destage"

/*
 * Destage writes in flight at once: deep enough for md to fill stripes and
 * the drives to serve in address order, shallow enough that a foreground
 * HDD write is not queued behind a whole round (drives serve in order).
 */
static unsigned int destage_depth = 128;
module_param(destage_depth, uint, 0644);
MODULE_PARM_DESC(destage_depth, "destage writes in flight at most (default 128)");

/*
 * Stripe fill: a round that holds at least destage_fill_min copies in one
 * stripe of the HDD (its optimal_io_size, at most 1 MiB) reads the rest of
 * the stripe from the HDD and writes the whole stripe, which md writes
 * without reading, instead of each copy on its own.  0: off.  Foreground
 * HDD writes to those stripes wait until the stripe's write has landed,
 * and the round waits for those already in flight (HDD write epochs), so
 * the data read is never older than what it is written over.
 */
static unsigned int destage_fill_min = 2;
module_param(destage_fill_min, uint, 0644);
MODULE_PARM_DESC(destage_fill_min,
		 "copies in one HDD stripe for a round to write the whole stripe (default 2, 0: off)");

/* Stripes a fill batch reads, then writes: one positioning per run of them. */
static unsigned int destage_fill_stripes = 32;
module_param(destage_fill_stripes, uint, 0644);
MODULE_PARM_DESC(destage_fill_stripes, "stripes a fill batch reads at once, at most 8 MiB of them (default 32)");

static unsigned int nxd_destage_depth(void)
{
	return max(READ_ONCE(destage_depth), 1U);
}

int nxd_dblk_cmp(const void *a, const void *b)
{
	const struct nxd_dblk *x = a, *y = b;

	return x->block < y->block ? -1 : x->block > y->block;
}

/*
 * A round the destager started only because the HDD was idle submits no
 * more writes once foreground HDD I/O is in flight, or a foreground HDD
 * write waits for the round's fences (held, not yet counted in flight):
 * the streaming writer behind it would otherwise share the drives with a
 * whole round (issue 16's streaming right after small writes).  What it
 * wrote is still logged, and written again by a later round.
 */
static bool nxd_round_yields(struct nxd_c *nc, struct nxd_round *rd)
{
	if (rd->yield && !rd->yielded &&
	    (atomic_read(&nc->hdd_fg_inflight) || READ_ONCE(nc->fg_fenced)))
		rd->yielded = true;
	return rd->yielded;
}

/*
 * Stripe @k of the round's fill is on the HDD (or will not be written):
 * foreground HDD writes held for it may go, after it, without waiting for
 * the rest of the round (nxd_fill_busy_locked).
 */
static void nxd_fill_landed(struct nxd_c *nc, struct nxd_round *rd, u32 k)
{
	set_bit(k, rd->fill_landed);
	/* Seen by the writer's check under nc->lock once it is kicked. */
	smp_mb__after_atomic();
	nxd_writer_wake(nc);
}

static void nxd_destage_endio(struct bio *bio)
{
	struct nxd_dbio *db = container_of(bio, struct nxd_dbio, bio);
	struct nxd_c *nc = bio->bi_private;
	struct nxd_round *rd = nc->drd;
	bool landed = false;
	int half = db->half;
	u32 stripe = db->stripe, i;

	if (bio->bi_status)
		WRITE_ONCE(nc->d_error, blk_status_to_errno(bio->bi_status));
	/* Failed too: it can no longer land after a newer write. */
	for (i = db->first; i <= db->last; i++)
		landed |= atomic_dec_and_test(&rd->blk[i].unlanded);
	/* HDD writes fenced behind these copies may go now. */
	if (landed && !list_empty(&nc->fenced))
		nxd_writer_wake(nc);
	bio_put(bio);
	if (half >= 0) {
		nxd_fill_landed(nc, rd, stripe);
		/* That half of fbuf may take the next batch's reads. */
		if (atomic_dec_and_test(&rd->fill_wr[half]))
			wake_up_all(&nc->dwq);
	}
	/* The round's own reference keeps d_inflight at 1 until its end. */
	if (atomic_dec_return(&nc->d_inflight) <= nxd_destage_depth())
		wake_up_all(&nc->dwq);
}

static void nxd_destage_submit(struct nxd_c *nc, struct bio *bio)
{
	u32 stripe = nc->hdd_io_opt >> SECTOR_SHIFT;

	nxd_count(nc, NXD_CTR(destage_bios), 1);
	nxd_count(nc, NXD_CTR(destage_hdd_bytes), bio->bi_iter.bi_size);
	/* What md can write without reading: whole stripes, aligned. */
	if (stripe >= NXD_SECTORS_PER_BLOCK &&
	    !nxd_rem_u64(bio->bi_iter.bi_sector, stripe) &&
	    !(bio_sectors(bio) % stripe))
		nxd_count(nc, NXD_CTR(destage_stripe_bios), 1);
	/* Waiting unplugs: what is queued so far goes down sorted first. */
	wait_event(nc->dwq, atomic_read(&nc->d_inflight) <= nxd_destage_depth());
	atomic_inc(&nc->d_inflight);
	submit_bio(bio);
}

/* @sec: an HDD sector, already past the data offset. */
static struct bio *nxd_destage_bio(struct nxd_c *nc, sector_t sec, u32 first)
{
	struct bio *bio = bio_alloc_bioset(nc->hdd->bdev, BIO_MAX_VECS,
					   REQ_OP_WRITE, GFP_NOIO, &nc->dbs);
	struct nxd_dbio *db = container_of(bio, struct nxd_dbio, bio);

	db->first = first;
	db->last = first;
	db->half = -1;
	db->stripe = 0;
	bio->bi_iter.bi_sector = sec;
	bio->bi_end_io = nxd_destage_endio;
	bio->bi_private = nc;
	return bio;
}

/*
 * ---- stripe fill ----
 *
 * Which stripes of the HDD the round fills: those with at least
 * destage_fill_min of its copies, not all of it (a whole stripe of copies
 * is written whole anyway).  Sets rd->fill[] and rd->fill_blocks, sorted
 * as rd->blk is; the caller publishes rd->nfill.
 */
/* Whether rounds fill stripes: on, and the HDD's stripe fits the buffer. */
bool nxd_fill_on(struct nxd_c *nc)
{
	/* Whole pages: nxd_fill_bio() adds fbuf a page at a time. */
	return READ_ONCE(destage_fill_min) && !atomic_read(&nc->degraded) &&
	       nc->hdd_io_opt && !(nc->hdd_io_opt % NXD_BLOCK_SIZE) &&
	       !(nc->hdd_io_opt % PAGE_SIZE) &&
	       nc->hdd_io_opt <= NXD_DESTAGE_MAX_BIO &&
	       nc->hdd_io_opt <= NXD_FILL_BUF &&
	       nc->hdd_io_opt / NXD_BLOCK_SIZE >= 2;
}

static u32 nxd_fill_plan(struct nxd_c *nc, struct nxd_round *rd)
{
	u32 min = READ_ONCE(destage_fill_min), sb, i, j, n = 0;

	if (!min || !nxd_fill_on(nc))
		return 0;
	sb = nc->hdd_io_opt / NXD_BLOCK_SIZE;
	for (i = 0; i < rd->nblk && n < NXD_FILL_MAX; i = j) {
		u64 st = div_u64(rd->blk[i].block, sb);
		u32 copies = 0;

		for (j = i; j < rd->nblk && div_u64(rd->blk[j].block, sb) == st; j++)
			copies += rd->blk[j].copy;
		/*
		 * A stripe past the volume's end (io_opt need not divide its
		 * 1 MiB multiple) would rewrite the HDD label from a stale read.
		 */
		if (copies >= min && copies < sb && (st + 1) * sb <= nc->max_block)
			rd->fill[n++] = st;
	}
	rd->fill_blocks = sb;
	return n;
}

static void nxd_fill_endio(struct bio *bio)
{
	struct nxd_dbio *db = container_of(bio, struct nxd_dbio, bio);
	struct nxd_c *nc = bio->bi_private;
	struct nxd_round *rd = nc->drd;

	if (bio->bi_status)
		rd->fill_err[db->first] = 1;
	bio_put(bio);
	if (atomic_dec_and_test(&rd->fill_pending))
		wake_up_all(&nc->dwq);
}

static struct bio *nxd_fill_bio(struct bio *bio, void *buf, size_t len)
{
	size_t off;

	for (off = 0; off < len; off += PAGE_SIZE)
		__bio_add_page(bio, vmalloc_to_page(buf + off), PAGE_SIZE, 0);
	return bio;
}

/*
 * Read stripes [k0, kn) of rd->fill from the HDD into @buf; wait for them.
 * @buf is vmalloc'd (fbuf): its vmap alias is flushed before the reads and
 * invalidated after, as the I/O goes to the pages (VIVT caches).
 */
static void nxd_fill_read(struct nxd_c *nc, struct nxd_round *rd, u32 k0, u32 kn,
			  void *buf)
{
	size_t len = (size_t)rd->fill_blocks * NXD_BLOCK_SIZE;
	struct blk_plug plug;
	u32 k;

	flush_kernel_vmap_range(buf, (kn - k0) * len);
	atomic_set(&rd->fill_pending, 1);
	blk_start_plug(&plug);
	for (k = k0; k < kn; k++) {
		struct bio *bio = bio_alloc_bioset(nc->hdd->bdev, len >> PAGE_SHIFT,
						   REQ_OP_READ, GFP_NOIO, &nc->dbs);
		struct nxd_dbio *db = container_of(bio, struct nxd_dbio, bio);

		db->first = k;
		rd->fill_err[k] = 0;
		bio->bi_iter.bi_sector = nxd_hdd_sector(nc, rd->fill[k] *
					rd->fill_blocks * NXD_SECTORS_PER_BLOCK);
		bio->bi_end_io = nxd_fill_endio;
		bio->bi_private = nc;
		atomic_inc(&rd->fill_pending);
		submit_bio(nxd_fill_bio(bio, buf + (k - k0) * len, len));
	}
	blk_finish_plug(&plug);
	if (!atomic_dec_and_test(&rd->fill_pending))
		wait_event(nc->dwq, !atomic_read(&rd->fill_pending));
	invalidate_kernel_vmap_range(buf, (kn - k0) * len);
}

/*
 * Fill the published stripes: read each from the HDD, lay the round's
 * copies over it and write it whole.  A stripe whose read failed is left
 * to nxd_destage_write(), copy by copy.  Copies written here are marked
 * @filled; their bios hold a reference on every entry of the stripe.
 */
static void nxd_fill_write(struct nxd_c *nc, struct nxd_round *rd, u64 *bytes)
{
	size_t len = (size_t)rd->fill_blocks * NXD_BLOCK_SIZE;
	u32 per = min_t(u32, NXD_FILL_HALF / len, max(READ_ONCE(destage_fill_stripes), 1U));
	u32 k0, k, i = 0, h = 0;

	if (!rd->fbuf)
		rd->fbuf = __vmalloc(NXD_FILL_BUF, GFP_NOIO);
	if (!rd->fbuf)
		return;
	atomic_set(&rd->fill_wr[0], 0);
	atomic_set(&rd->fill_wr[1], 0);
	for (k0 = 0; k0 < rd->nfill; k0 += per, h ^= 1) {
		u32 kn = min(rd->nfill, k0 + per);
		void *half = rd->fbuf + h * NXD_FILL_HALF;

		if (nxd_round_yields(nc, rd))
			break;

		/*
		 * A half holds the data of its writes two batches back until
		 * they complete (a device may serve the next reads first, or
		 * copy the data late): read into it only once they have.  The
		 * other half's writes go on meanwhile.
		 */
		wait_event(nc->dwq, !atomic_read(&rd->fill_wr[h]));
		nxd_fill_read(nc, rd, k0, kn, half);
		for (k = k0; k < kn; k++) {
			u64 b0 = rd->fill[k] * rd->fill_blocks;
			void *buf = half + (k - k0) * len;
			struct nxd_dbio *db;
			struct bio *bio;
			u32 first, j;

			while (i < rd->nblk && rd->blk[i].block < b0)
				i++;
			first = i;
			while (i < rd->nblk && rd->blk[i].block < b0 + rd->fill_blocks)
				i++;
			if (rd->fill_err[k] || first == i) {
				/* Its copies go one by one, each fenced alone. */
				nxd_count(nc, NXD_CTR(hdd_errors), rd->fill_err[k]);
				nxd_fill_landed(nc, rd, k);
				continue;
			}
			for (j = first; j < i; j++) {
				struct nxd_dblk *d = &rd->blk[j];
				void *dst = buf + (d->block - b0) * NXD_BLOCK_SIZE;
				unsigned int a;

				if (!d->copy)
					continue;
				for (a = 0; a < NXD_SECTORS_PER_BLOCK; a++) {
					if (!(d->mask & (1U << a)))
						continue;
					memcpy(dst + (a << SECTOR_SHIFT),
					       d->data + (a << SECTOR_SHIFT), SECTOR_SIZE);
					*bytes += SECTOR_SIZE;
				}
				d->filled = true;
			}
			bio = nxd_destage_bio(nc, nxd_hdd_sector(nc, b0 * NXD_SECTORS_PER_BLOCK),
					      first);
			db = container_of(bio, struct nxd_dbio, bio);
			db->last = i - 1;
			/*
			 * The bio's reference on every entry of the stripe, for
			 * its end_io; then the copies drop the one
			 * nxd_round_copy() gave them, so that it is that end_io
			 * which lands them (and wakes the fenced HDD writes).
			 */
			for (j = first; j < i; j++) {
				atomic_inc(&rd->blk[j].unlanded);
				if (rd->blk[j].copy)
					atomic_dec(&rd->blk[j].unlanded);
			}
			db->half = h;
			db->stripe = k;
			atomic_inc(&rd->fill_wr[h]);
			/* The copies laid over it, through the vmap alias. */
			flush_kernel_vmap_range(buf, len);
			nxd_destage_submit(nc, nxd_fill_bio(bio, buf, len));
		}
	}
}

/*
 * Publish the stripes to fill, so that new foreground HDD writes to them
 * wait, then wait out those already in flight, and fill them.
 */
static void nxd_fill(struct nxd_c *nc, struct nxd_round *rd, u64 *bytes)
{
	u32 n = nxd_fill_plan(nc, rd);

	if (!n)
		return;
	bitmap_zero(rd->fill_landed, n);
	spin_lock(&nc->lock);
	/* Only a published round is seen by the foreground's checks. */
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
	if (nc->dround == rd)
		rd->nfill = n;
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	spin_unlock(&nc->lock);
	if (!rd->nfill)
		return;
	nxd_epoch_sync(&nc->hw_ep);
	nxd_fill_write(nc, rd, bytes);
}

/*
 * Write the sorted copies, merging adjacent sectors, cut at stripe bounds.
 * A bio holds a reference on each copy it carries (blocks in order, so a
 * range of rd->blk), and a copy's last run goes into the bio still open.
 */
static int nxd_destage_write(struct nxd_c *nc, struct nxd_round *rd, u64 *bytes)
{
	u32 stripe = nc->hdd_io_opt >> SECTOR_SHIFT;
	struct bio *bio = NULL;
	struct blk_plug plug;
	u32 i;

	atomic_set(&nc->d_inflight, 1);
	WRITE_ONCE(nc->d_error, 0);
	nxd_fill(nc, rd, bytes);
	/* md builds a full-stripe write from the bios of one plug. */
	blk_start_plug(&plug);
	for (i = 0; i < rd->nblk; i++) {
		struct nxd_dblk *d = &rd->blk[i];
		unsigned int a = 0;

		if (!d->copy || d->filled)
			continue;
		if (nxd_round_yields(nc, rd))
			break;
		/* d->data is in dbuf, vmalloc'd: the bios read its pages. */
		flush_kernel_vmap_range(d->data, NXD_BLOCK_SIZE);
		while (a < 8) {
			struct nxd_dbio *db;
			unsigned int b, len;
			sector_t sec;
			void *p;

			if (!(d->mask & (1U << a))) {
				a++;
				continue;
			}
			for (b = a; b < 8 && (d->mask & (1U << b)); b++)
				;
			/* HDD sectors: bios are compared and cut in the HDD's space. */
			sec = nxd_hdd_sector(nc, (d->block << 3) + a);
			p = d->data + (a << SECTOR_SHIFT);
			len = (b - a) << SECTOR_SHIFT;
			if (bio && (bio_end_sector(bio) != sec ||
				    bio->bi_iter.bi_size + len > NXD_DESTAGE_MAX_BIO ||
				    (stripe && !nxd_rem_u64(sec, stripe)) ||
				    bio_add_page(bio, vmalloc_to_page(p), len,
						 offset_in_page(p)) != len)) {
				nxd_destage_submit(nc, bio);
				bio = NULL;
			} else if (bio) {
				db = container_of(bio, struct nxd_dbio, bio);
				if (db->last != i) {
					db->last = i;
					atomic_inc(&d->unlanded);
				}
			}
			if (!bio) {
				bio = nxd_destage_bio(nc, sec, i);
				atomic_inc(&d->unlanded);
				__bio_add_page(bio, vmalloc_to_page(p), len,
					       offset_in_page(p));
			}
			*bytes += len;
			a = b;
		}
		/* The bio still open holds it: this never lands it. */
		atomic_dec(&d->unlanded);
	}
	if (bio)
		nxd_destage_submit(nc, bio);
	blk_finish_plug(&plug);
	if (!atomic_dec_and_test(&nc->d_inflight))
		wait_event(nc->dwq, !atomic_read(&nc->d_inflight));
	if (rd->nfill) {
		/* Landed: the held foreground writes to those stripes may go. */
		spin_lock(&nc->lock);
		nxd_shards_lock(nc, NXD_SHARDS_ALL);
		rd->nfill = 0;
		nxd_shards_unlock(nc, NXD_SHARDS_ALL);
		spin_unlock(&nc->lock);
		atomic_set(&nc->kick, 1);
		nxd_writer_wake(nc);
	}
	return READ_ONCE(nc->d_error);
}

/* The first of rd->blk[0..n), sorted by block, at or past @block. */
u32 nxd_round_lower(struct nxd_round *rd, u32 n, u64 block)
{
	u32 lo = 0, hi = n;

	while (lo < hi) {
		u32 mid = lo + (hi - lo) / 2;

		if (rd->blk[mid].block < block)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Are copies of blocks in [first, last] on their way to the HDD? */
bool nxd_destage_busy_locked(struct nxd_c *nc, u64 first, u64 last)
{
	struct nxd_round *rd = nc->dround;
	u32 i = 0;

	if (!rd)
		return false;
	if (rd->sorted) {
		i = nxd_round_lower(rd, rd->nblk, first);
		/* Written: only the copies not landed yet fence. */
		for (; i < rd->nblk && rd->blk[i].block <= last; i++)
			if (rd->blk[i].copy && atomic_read(&rd->blk[i].unlanded))
				return true;
		return false;
	}
	for (; i < rd->nblk; i++)
		if (rd->blk[i].copy && rd->blk[i].block >= first &&
		    rd->blk[i].block <= last)
			return true;
	return false;
}

/*
 * Does a round fill a stripe of [first, last] with HDD data, not yet
 * written?  Under nc->lock, or the range's shards.
 */
bool nxd_fill_busy_locked(struct nxd_c *nc, u64 first, u64 last)
{
	struct nxd_round *rd = nc->dround;
	u32 lo = 0, hi;
	u64 sf, sl;

	if (!rd || !rd->nfill)
		return false;
	sf = div_u64(first, rd->fill_blocks);
	hi = rd->nfill;
	while (lo < hi) {
		u32 mid = lo + (hi - lo) / 2;

		if (rd->fill[mid] < sf)
			lo = mid + 1;
		else
			hi = mid;
	}
	sl = div_u64(last, rd->fill_blocks);
	for (; lo < rd->nfill && rd->fill[lo] <= sl; lo++)
		if (!test_bit(lo, rd->fill_landed))
			return true;
	return false;
}

/* Write the round's copies to the HDD in address order, then flush it. */
int nxd_round_copy(struct nxd_c *nc, struct nxd_round *rd, u64 *bytes)
{
	u32 i;
	int r;

	/*
	 * A foreground HDD write mapped before these blocks were logged may
	 * still be queued below: a copy sent now could land before it, and
	 * the older data would win once the round drops the entries.
	 */
	nxd_epoch_sync(&nc->hw_ep);
	/* Sorted under the lock: nxd_destage_busy_locked() reads it. */
	spin_lock(&nc->lock);
	sort(rd->blk, rd->nblk, sizeof(*rd->blk), nxd_dblk_cmp, NULL);
	for (i = 0; i < rd->nblk; i++) {
		atomic_set(&rd->blk[i].unlanded, rd->blk[i].copy);
		rd->blk[i].filled = false;
	}
	rd->sorted = true;
	spin_unlock(&nc->lock);
	r = nxd_destage_write(nc, rd, bytes);
	if (!r && rd->yielded)
		return -EBUSY;	/* stopped for foreground I/O: nothing failed */
	if (!r && !nxd_fault(NXD_FAULT_ROUND_HDD_FLUSH))
		r = nxd_hdd_flush(nc);
	if (r)
		nxd_count(nc, NXD_CTR(hdd_errors), 1);
	return r;
}

