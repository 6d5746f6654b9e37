// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd destager: one kthread per volume copies the newest logged copy of
 * each block to the HDD, oldest segments first, and then frees log space.
 *
 * A round: read the oldest segments, pick their live blocks, write them
 * to the HDD sorted and merged, flush the HDD, persist the new tail in the
 * superblock, drop the index entries that still point at the destaged
 * copies, wait for reads of those slots, TRIM and only then reuse the
 * space.  An HDD write over any block of the round's copies waits until
 * those blocks' copies have landed (nxd_destage_busy_locked), so an older
 * copy never lands after it, even if the block was rewritten in the log
 * meanwhile; it does not wait for the rest of the round.
 *
 * SSD read errors never degrade the volume: the round stops before the
 * segment that cannot be read and is retried.  A segment whose header
 * reads back bad is destaged from the in-memory index.  A block that fails
 * its checksum (the SSD lost it) is never copied over the HDD.  Degraded
 * (the log frozen), the destager empties the log whatever the watermarks,
 * and the tail is recorded in the HDD label instead of the SSD superblock.
 */
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/sort.h>
#include <linux/delay.h>
#include <linux/sizes.h>
#include <linux/jiffies.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd destage"

/*
 * A round takes up to 2048 segments (16 MiB of log): at queue depth 1 each
 * small write is its own segment, and sorting needs many blocks to merge.
 */
#define NXD_ROUND_SEGS		2048
/*
 * Under log pressure (log full, or above high_watermark) a round takes at
 * most destage_pressure_blocks: writers wait for the space a round frees,
 * and a 16 MiB round of scattered 4 KiB blocks keeps an array of HDDs busy
 * for 10-20 s (the steady-state stalls in docs/performance.md).
 */
static unsigned int destage_pressure_blocks = 1024;
module_param(destage_pressure_blocks, uint, 0644);
MODULE_PARM_DESC(destage_pressure_blocks,
		 "log blocks a destage round takes at most under log pressure (default 1024)");
/*
 * Destage writes in flight at once: deep enough for md to fill stripes and
 * the drives to serve in address order, shallow enough that a foreground
 * HDD write is not queued behind a whole round (drives serve in order).
 */
static unsigned int destage_depth = 128;
module_param(destage_depth, uint, 0644);
MODULE_PARM_DESC(destage_depth, "destage writes in flight at most (default 128)");
#define NXD_READ_MAX_BLOCKS	256
#define NXD_DESTAGE_MAX_BIO	SZ_1M
#define NXD_IDLE_MS		100
#define NXD_YIELD_MS		20

/*
 * Clean ahead: a round also copies the logged blocks that share a stripe
 * with its oldest blocks, wherever they sit in the log, so the HDDs see
 * dense address-ordered runs rather than scattered blocks.  Those entries
 * stay, marked CLEAN once their copies are flushed, and the round that
 * reaches their segments later drops them without writing.
 */
static bool destage_clean_ahead = true;
module_param(destage_clean_ahead, bool, 0644);
MODULE_PARM_DESC(destage_clean_ahead,
		 "destage rounds also copy the oldest blocks' stripe neighbours (default Y)");

/*
 * Stripe fill: a round that holds at least destage_fill_min copies in one
 * stripe of the HDD (its optimal_io_size, at most 1 MiB) reads the rest of
 * the stripe from the HDD and writes the whole stripe, which md writes
 * without reading, instead of each copy on its own.  0: off.  Foreground
 * HDD writes to those stripes wait until the round's writes have landed,
 * and the round waits for those already in flight (HDD write epochs), so
 * the data read is never older than what it is written over.
 */
static unsigned int destage_fill_min;
module_param(destage_fill_min, uint, 0644);
MODULE_PARM_DESC(destage_fill_min,
		 "copies in one HDD stripe for a round to write the whole stripe (default 0: off)");

/* Stripes a round fills at most, and the HDD data read at a time for them. */
#define NXD_FILL_MAX		4096
#define NXD_FILL_BUF		SZ_4M

static unsigned int nxd_destage_depth(void)
{
	return max(READ_ONCE(destage_depth), 1U);
}

struct nxd_dblk {
	u64 block;
	u32 slot;
	u8 mask;
	bool copy;		/* false: superseded by a finished HDD write, or CLEAN */
	bool extra;		/* clean ahead: not in the round's segments */
	bool nocrc;		/* extra: ORDERED segment, no crc to check */
	bool filled;		/* written with its stripe (stripe fill) */
	u16 crc;		/* extra: nxd_ient.rsvd when taken */
	/*
	 * Destage bios holding this copy not yet completed, plus one until
	 * the last of them is built: 0 once the copy has landed on the HDD.
	 */
	atomic_t unlanded;
	void *data;
};

/* A destage bio knows which copies it carries: rd->blk[first..last]. */
struct nxd_dbio {
	u32 first, last;
	struct bio bio;
};

struct nxd_round {
	u64 first_seq;		/* of segs[0] */
	u32 nsegs;
	struct nxd_segd segs[NXD_ROUND_SEGS];
	/* segs[i] has a live copy that could not go to the HDD */
	u8 lossy[NXD_ROUND_SEGS];
	u32 nblk;
	bool sorted;		/* @blk sorted by block: bsearch in busy_locked */
	struct nxd_dblk *blk;	/* at most dbuf_blocks */
	/* Stripe fill: stripes being filled (sorted), their size in blocks */
	u32 nfill;
	u32 fill_blocks;
	u64 fill[NXD_FILL_MAX];
	u8 fill_err[NXD_FILL_MAX];	/* its HDD read failed */
	atomic_t fill_pending;
	void *fbuf;		/* NXD_FILL_BUF, allocated at the first fill */
};

static bool nxd_hdd_idle(struct nxd_c *nc)
{
	return !atomic_read(&nc->hdd_fg_inflight) &&
	       time_after(jiffies, READ_ONCE(nc->hdd_fg_last) +
			  msecs_to_jiffies(NXD_IDLE_MS));
}

static bool nxd_destage_wanted(struct nxd_c *nc)
{
	struct nxd_tun *t = &nc->vol->tun;
	u32 pct;
	bool empty;

	if (!READ_ONCE(nc->running))
		return false;
	spin_lock(&nc->lock);
	empty = !nc->ring.count ||
		(nc->ring.first_seq >= nc->commit_seq && !nc->frozen_end);
	spin_unlock(&nc->lock);
	if (empty)
		return false;
	if (atomic_read(&nc->drain_req) || READ_ONCE(nc->log_full))
		return true;
	/* Acknowledged writes only the SSD holds, with no header: go on. */
	if (nxd_fast_void_left(nc))
		return true;
	if (atomic_read(&nc->destage_paused))
		return false;
	/* Degraded, writes over logged blocks wait for the log to empty. */
	if (atomic_read(&nc->degraded))
		return true;
	pct = nxd_log_used_pct(nc);
	if (pct >= READ_ONCE(t->low_wm))
		return true;
	return nxd_hdd_idle(nc);
}

static int nxd_dblk_cmp(const void *a, const void *b)
{
	const struct nxd_dblk *x = a, *y = b;

	return x->block < y->block ? -1 : x->block > y->block;
}

static void nxd_destage_endio(struct bio *bio)
{
	struct nxd_dbio *db = container_of(bio, struct nxd_dbio, bio);
	struct nxd_c *nc = bio->bi_private;
	struct nxd_round *rd = nc->drd;
	bool landed = false;
	u32 i;

	if (bio->bi_status)
		WRITE_ONCE(nc->d_error, blk_status_to_errno(bio->bi_status));
	/* Failed too: it can no longer land after a newer write. */
	for (i = db->first; i <= db->last; i++)
		landed |= atomic_dec_and_test(&rd->blk[i].unlanded);
	/* HDD writes fenced behind these copies may go now. */
	if (landed && !list_empty(&nc->fenced))
		nxd_writer_wake(nc);
	bio_put(bio);
	/* The round's own reference keeps d_inflight at 1 until its end. */
	if (atomic_dec_return(&nc->d_inflight) <= nxd_destage_depth())
		wake_up_all(&nc->dwq);
}

static void nxd_destage_submit(struct nxd_c *nc, struct bio *bio)
{
	u32 stripe = nc->hdd_io_opt >> SECTOR_SHIFT;

	nxd_count(nc, NXD_CTR(destage_bios), 1);
	/* What md can write without reading: whole stripes, aligned. */
	if (stripe >= NXD_SECTORS_PER_BLOCK && !(bio->bi_iter.bi_sector % stripe) &&
	    !(bio_sectors(bio) % stripe))
		nxd_count(nc, NXD_CTR(destage_stripe_bios), 1);
	/* Waiting unplugs: what is queued so far goes down sorted first. */
	wait_event(nc->dwq, atomic_read(&nc->d_inflight) <= nxd_destage_depth());
	atomic_inc(&nc->d_inflight);
	submit_bio(bio);
}

static struct bio *nxd_destage_bio(struct nxd_c *nc, sector_t sec, u32 first)
{
	struct bio *bio = bio_alloc_bioset(nc->hdd->bdev, BIO_MAX_VECS,
					   REQ_OP_WRITE, GFP_NOIO, &nc->dbs);
	struct nxd_dbio *db = container_of(bio, struct nxd_dbio, bio);

	db->first = first;
	db->last = first;
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
static u32 nxd_fill_plan(struct nxd_c *nc, struct nxd_round *rd)
{
	u32 min = READ_ONCE(destage_fill_min), sb, i, j, n = 0;

	if (!min || atomic_read(&nc->degraded) || !nc->hdd_io_opt ||
	    nc->hdd_io_opt % NXD_BLOCK_SIZE ||
	    nc->hdd_io_opt > NXD_DESTAGE_MAX_BIO ||
	    nc->hdd_io_opt > NXD_FILL_BUF)
		return 0;
	sb = nc->hdd_io_opt / NXD_BLOCK_SIZE;
	if (sb < 2)
		return 0;
	for (i = 0; i < rd->nblk && n < NXD_FILL_MAX; i = j) {
		u64 st = div_u64(rd->blk[i].block, sb);
		u32 copies = 0;

		for (j = i; j < rd->nblk && div_u64(rd->blk[j].block, sb) == st; j++)
			copies += rd->blk[j].copy;
		if (copies >= min && copies < sb)
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

static struct bio *nxd_fill_bio(struct nxd_c *nc, struct bio *bio, void *buf,
				size_t len)
{
	size_t off;

	for (off = 0; off < len; off += PAGE_SIZE)
		__bio_add_page(bio, vmalloc_to_page(buf + off), PAGE_SIZE, 0);
	return bio;
}

/* Read stripes [k0, kn) of rd->fill from the HDD into fbuf; wait for them. */
static void nxd_fill_read(struct nxd_c *nc, struct nxd_round *rd, u32 k0, u32 kn)
{
	size_t len = (size_t)rd->fill_blocks * NXD_BLOCK_SIZE;
	struct blk_plug plug;
	u32 k;

	atomic_set(&rd->fill_pending, 1);
	blk_start_plug(&plug);
	for (k = k0; k < kn; k++) {
		struct bio *bio = bio_alloc_bioset(nc->hdd->bdev, len >> PAGE_SHIFT,
						   REQ_OP_READ, GFP_NOIO, &nc->dbs);
		struct nxd_dbio *db = container_of(bio, struct nxd_dbio, bio);

		db->first = k;
		rd->fill_err[k] = 0;
		bio->bi_iter.bi_sector = rd->fill[k] * rd->fill_blocks *
					 NXD_SECTORS_PER_BLOCK;
		bio->bi_end_io = nxd_fill_endio;
		bio->bi_private = nc;
		atomic_inc(&rd->fill_pending);
		submit_bio(nxd_fill_bio(nc, bio, rd->fbuf + (k - k0) * len, len));
	}
	blk_finish_plug(&plug);
	if (!atomic_dec_and_test(&rd->fill_pending))
		wait_event(nc->dwq, !atomic_read(&rd->fill_pending));
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
	u32 per = NXD_FILL_BUF / len, k0, k, i = 0;

	if (!rd->fbuf)
		rd->fbuf = __vmalloc(NXD_FILL_BUF, GFP_NOIO);
	if (!rd->fbuf)
		return;
	for (k0 = 0; k0 < rd->nfill; k0 += per) {
		u32 kn = min(rd->nfill, k0 + per);

		nxd_fill_read(nc, rd, k0, kn);
		for (k = k0; k < kn; k++) {
			u64 b0 = rd->fill[k] * rd->fill_blocks;
			void *buf = rd->fbuf + (k - k0) * len;
			struct nxd_dbio *db;
			struct bio *bio;
			u32 first, j;

			while (i < rd->nblk && rd->blk[i].block < b0)
				i++;
			first = i;
			while (i < rd->nblk && rd->blk[i].block < b0 + rd->fill_blocks)
				i++;
			if (rd->fill_err[k] || first == i) {
				nxd_count(nc, NXD_CTR(hdd_errors), rd->fill_err[k]);
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
			bio = nxd_destage_bio(nc, b0 * NXD_SECTORS_PER_BLOCK, first);
			db = container_of(bio, struct nxd_dbio, bio);
			db->last = i - 1;
			for (j = first; j < i; j++)
				atomic_inc(&rd->blk[j].unlanded);
			nxd_destage_submit(nc, nxd_fill_bio(nc, bio, buf, len));
			/* The build reference nxd_round_copy() gave each copy. */
			for (j = first; j < i; j++)
				if (rd->blk[j].copy)
					atomic_dec(&rd->blk[j].unlanded);
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
	spin_lock(&nc->lock);
	/* Only a published round is seen by the foreground's checks. */
	if (nc->dround == rd)
		rd->nfill = n;
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
	sector_t stripe = nc->hdd_io_opt >> SECTOR_SHIFT;
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
			sec = (d->block << 3) + a;
			p = d->data + (a << SECTOR_SHIFT);
			len = (b - a) << SECTOR_SHIFT;
			if (bio && (bio_end_sector(bio) != sec ||
				    bio->bi_iter.bi_size + len > NXD_DESTAGE_MAX_BIO ||
				    (stripe && !(sec % stripe)) ||
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
		rd->nfill = 0;
		spin_unlock(&nc->lock);
		atomic_set(&nc->kick, 1);
		nxd_writer_wake(nc);
	}
	return READ_ONCE(nc->d_error);
}

/* The first of rd->blk[0..n), sorted by block, at or past @block. */
static u32 nxd_round_lower(struct nxd_round *rd, u32 n, u64 block)
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

/* Does a round fill a stripe of [first, last] with HDD data?  Under nc->lock. */
bool nxd_fill_busy_locked(struct nxd_c *nc, u64 first, u64 last)
{
	struct nxd_round *rd = nc->dround;
	u32 lo = 0, hi;
	u64 sf;

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
	return lo < rd->nfill && rd->fill[lo] <= div_u64(last, rd->fill_blocks);
}

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

static void nxd_round_end_locked(struct nxd_c *nc, struct nxd_round *rd)
{
	if (nc->dround == rd)
		nc->dround = NULL;
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
	atomic_set(&nc->acked_lost, 1);
	DMERR_LIMIT("%s: logged block %llu (slot %u) %s: lost, not destaged",
		    dm_table_device_name(nc->ti->table), db->block, db->slot,
		    nocrc ? "has no header to vouch for it" : "fails its checksum");
	return false;
}

/*
 * A committed segment whose header no longer decodes: its live blocks are
 * the index entries pointing into it (a walk of the whole index, on this
 * rare path only); its data blocks were read with it.
 */
static bool nxd_collect_by_index(struct nxd_c *nc, struct nxd_round *rd,
				 u32 si, void *hdr, bool is_void)
{
	const struct nxd_segd *sd = &rd->segs[si];
	struct nxd_index *ix = &nc->ix;
	u32 i, lo = sd->pos + 1, hi = sd->pos + 1 + sd->nr_data;

	for (i = 0; i < ix->cap; i++) {
		struct nxd_ient *e = &ix->tab[i];
		struct nxd_dblk *db;
		int dec;

		if (e->block == NXD_IE_EMPTY || e->slot < lo || e->slot >= hi)
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

/* Read the chosen segments and pick their live blocks.  Returns segments kept. */
static int nxd_destage_collect(struct nxd_c *nc, struct nxd_round *rd, u64 first_seq)
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
		u32 j, d = 0, start = rd->nblk;
		bool cut = false;

		if (!sd->live)
			continue;
		r = nxd_seg_decode(hdr, nc->sb.vol_uuid, nc->sb.ring_blocks,
				   nc->sb.data_sectors >> 3, &si);
		if (r || si.seq != first_seq + i || si.pos != sd->pos) {
			bool is_void = nc->frozen_end && first_seq + i >= nc->frozen_end;

			if (!is_void) {
				nxd_count(nc, NXD_CTR(ssd_errors), 1);
				DMERR_LIMIT("%s: log segment %llu at %u unreadable (%d), use index",
					    dm_table_device_name(nc->ti->table),
					    first_seq + i, sd->pos, r);
			}
			spin_lock(&nc->lock);
			nc->dround = rd;
			cut = !nxd_collect_by_index(nc, rd, i, hdr, is_void);
			if (cut)
				rd->nblk = start;
			spin_unlock(&nc->lock);
			if (cut)
				return i;
			off += 1 + sd->nr_data;
			continue;
		}
		spin_lock(&nc->lock);
		nc->dround = rd;
		for (j = 0; j < si.nr_recs; j++) {
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
			if (dec == NXD_D_CUT) {
				cut = true;	/* an HDD write is on its way */
				break;
			}
			db = &rd->blk[rd->nblk++];
			db->block = rec.block;
			db->slot = e->slot;
			db->mask = e->mask;
			db->data = hdr + (size_t)(1 + d) * NXD_BLOCK_SIZE;
			db->extra = false;
			db->copy = dec == NXD_D_COPY && !(e->flags & NXD_IE_CLEAN) &&
				   nxd_destage_data_ok(nc, db, (si.flags & NXD_SEG_ORDERED) ||
						       nxd_block_crc(db->data) == rec.val, false);
			if (dec == NXD_D_COPY && !(e->flags & NXD_IE_CLEAN) && !db->copy)
				rd->lossy[i] = 1;
			d++;
		}
		if (cut)
			rd->nblk = start;
		spin_unlock(&nc->lock);
		if (cut)
			return i;
		off += 1 + sd->nr_data;
	}
	return nread;
}

static u64 nxd_clean_span(struct nxd_c *nc)
{
	u64 span = nc->hdd_io_opt >> NXD_BLOCK_SHIFT;

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

/* Read the extras rd->blk[from..nblk) from their slots, all at once. */
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
		__bio_add_page(bio, vmalloc_to_page(d->data), NXD_BLOCK_SIZE,
			       offset_in_page(d->data));
		atomic_inc(&nc->d_inflight);
		submit_bio(bio);
	}
	blk_finish_plug(&plug);
	if (!atomic_dec_and_test(&nc->d_inflight))
		wait_event(nc->dwq, !atomic_read(&nc->d_inflight));
	return READ_ONCE(nc->d_error);
}

/*
 * Clean ahead (see destage_clean_ahead): add to the round the logged blocks
 * of the stripes its own blocks touch, read into dbuf from block @used on.
 * Blocks under an HDD write or a lazy INVAL are left alone.  An extra
 * whose data fails its checksum is not copied: the round that reaches its
 * segment deals with it.  Sorts the round's blocks first.
 */
static void nxd_destage_extend(struct nxd_c *nc, struct nxd_round *rd, u32 used)
{
	u64 span = nxd_clean_span(nc), last_stripe = U64_MAX;
	u32 norig = rd->nblk, room = nc->dbuf_blocks - used, n = 0, i;
	void *base = nc->dbuf + (size_t)used * NXD_BLOCK_SIZE;

	spin_lock(&nc->lock);
	sort(rd->blk, rd->nblk, sizeof(*rd->blk), nxd_dblk_cmp, NULL);
	for (i = 0; i < norig && n < room; i++) {
		u64 first = rd->blk[i].block - rd->blk[i].block % span, b;

		if (first == last_stripe)
			continue;
		last_stripe = first;
		if (!nxd_index_maybe(&nc->ix, first, span))
			continue;
		for (b = first; b < first + span && n < room; b++) {
			struct nxd_ient *e = nxd_index_find(&nc->ix, b);
			struct nxd_dblk *d;

			if (!e || (e->flags & NXD_IE_CLEAN) ||
			    nxd_round_has(rd, norig, b) ||
			    nxd_inval_overlap_locked(nc, b, b) ||
			    nxd_lazy_overlap_locked(nc, b, b))
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
	}
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

static void nxd_trim(struct nxd_c *nc, struct nxd_round *rd)
{
	u64 start = 0, len = 0;
	u32 i;

	if (!READ_ONCE(nc->vol->tun.ssd_discard) || atomic_read(&nc->degraded) ||
	    !bdev_max_discard_sectors(nc->ssd->bdev))
		return;
	for (i = 0; i <= rd->nsegs; i++) {
		struct nxd_segd *sd = i < rd->nsegs ? &rd->segs[i] : NULL;

		if (sd && len && start + len == sd->pos) {
			len += 1 + sd->nr_data;
			continue;
		}
		if (len)
			blkdev_issue_discard(nc->ssd->bdev,
					     nxd_slot_sector(nc, start),
					     len << 3, GFP_NOIO);
		if (sd) {
			start = sd->pos;
			len = 1 + sd->nr_data;
		}
	}
}

/* Write the round's copies to the HDD in address order, then flush it. */
static int nxd_round_copy(struct nxd_c *nc, struct nxd_round *rd, u64 *bytes)
{
	u32 i;
	int r;

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
	if (!r)
		r = nxd_hdd_flush(nc);
	if (r)
		nxd_count(nc, NXD_CTR(hdd_errors), 1);
	return r;
}

/*
 * Degraded: copy the acknowledged blocks of the void segments (no header,
 * never replayed) to the HDD before any round passes the copies they
 * superseded, and keep them indexed, CLEAN, until one has.  A round may
 * then pass those older copies whatever lies between them and the void
 * segments.  Returns 0 once all are on the HDD, or -errno.
 */
static int nxd_destage_void(struct nxd_c *nc, struct nxd_round *rd)
{
	u64 first_seq, last_seq, bytes = 0;
	u32 i, from, blocks = 0;
	int n, r = 0;

	rd->nsegs = 0;
	rd->nblk = 0;
	rd->sorted = false;
	spin_lock(&nc->lock);
	last_seq = nxd_fast_first_seq_locked(nc);
	if (last_seq != U64_MAX) {
		/* nxd_fast_fail() has not indexed them all yet. */
		spin_unlock(&nc->lock);
		return -EAGAIN;
	}
	from = nc->frozen_end > nc->ring.first_seq ?
	       nc->frozen_end - nc->ring.first_seq : 0;
	first_seq = nc->ring.first_seq + from;
	for (i = from; i < nc->ring.count && rd->nsegs < NXD_ROUND_SEGS; i++) {
		struct nxd_segd *sd = nxd_ring_at(&nc->ring, i);

		if (sd->live)
			blocks += 1 + sd->nr_data;
		rd->segs[rd->nsegs++] = *sd;
	}
	spin_unlock(&nc->lock);
	/* At most NXD_FSEG_MAX segments: they always fit. */
	if (!rd->nsegs || WARN_ON_ONCE(blocks > nc->dbuf_blocks))
		return rd->nsegs ? -EIO : 0;
	rd->first_seq = first_seq;
	memset(rd->lossy, 0, rd->nsegs);
	n = nxd_destage_collect(nc, rd, first_seq);
	if (n >= 0 && (u32)n < rd->nsegs)
		r = -EAGAIN;	/* unreadable, or an HDD write on its way */
	else if (n < 0)
		r = n;
	for (i = 0; !r && i < rd->nsegs; i++)
		if (rd->lossy[i])
			r = -EIO;
	if (!r && rd->nblk)
		r = nxd_round_copy(nc, rd, &bytes);
	spin_lock(&nc->lock);
	nxd_round_end_locked(nc, rd);
	for (i = 0; !r && i < rd->nblk; i++) {
		struct nxd_dblk *d = &rd->blk[i];
		struct nxd_ient *e = nxd_index_find(&nc->ix, d->block);

		if (e && e->slot == d->slot && d->copy)
			e->flags |= NXD_IE_CLEAN;
	}
	rd->nblk = 0;
	rd->sorted = false;
	spin_unlock(&nc->lock);
	wake_up_all(&nc->ewq);
	nxd_writer_wake(nc);
	if (!r) {
		WRITE_ONCE(nc->void_on_hdd, true);
		nxd_count(nc, NXD_CTR(destaged_bytes), bytes);
	}
	return r;
}

/* One destage round.  Returns segments reclaimed or -errno. */
static int nxd_destage_round(struct nxd_c *nc, struct nxd_round *rd)
{
	u64 first_seq, last_seq, tail_pos, tail_seq, bytes = 0, copied = 0;
	u32 i, blocks = 0, max_blocks = nc->dbuf_blocks, short_by = 0;
	bool pressure = READ_ONCE(nc->log_full) ||
			nxd_log_used_pct(nc) >= READ_ONCE(nc->vol->tun.high_wm);
	bool ahead = READ_ONCE(destage_clean_ahead) &&
		     !atomic_read(&nc->degraded) && !nc->frozen_end &&
		     (!pressure || atomic_read(&nc->drain_req));
	int kept, r;

	if (atomic_read(&nc->degraded) && nc->frozen_end &&
	    !READ_ONCE(nc->void_on_hdd) && nxd_fast_void_left(nc)) {
		/* Failed: the round below passes none of their older copies. */
		r = nxd_destage_void(nc, rd);
		if (r && r != -EAGAIN)
			DMERR_LIMIT("%s: cannot copy the void segments' blocks to the HDD (%d)",
				    dm_table_device_name(nc->ti->table), r);
	}

	/*
	 * Under pressure, small rounds of the oldest blocks only: neighbours
	 * would make the round longer, and under an overwrite-heavy load many
	 * are rewritten before their segment is reached (the benchmark's
	 * steady state fell from 235 to 140 IOPS with them; its drain took
	 * 61 s with them and 94 s without).
	 */
	if (pressure && !ahead)
		max_blocks = min_t(u32, max_blocks,
				   max(READ_ONCE(destage_pressure_blocks), NXD_SEG_MAX_BLOCKS));
	else if (ahead)
		max_blocks /= 2;	/* room for the neighbours */

	rd->nsegs = 0;
	rd->nblk = 0;
	rd->sorted = false;
	spin_lock(&nc->lock);
	first_seq = nc->ring.first_seq;
	rd->first_seq = first_seq;
	/*
	 * Committed segments only: the newest may still be filling.
	 * Degraded, also the void ones (acknowledged direct writes whose
	 * header was never written), which only the HDD can keep now, once
	 * nxd_fast_fail() has indexed them (taken before, their live count
	 * of 0 would let the round reclaim them: the acknowledged blocks lost
	 * and the ring descriptor gone under nxd_fast_fail(), an oops seen
	 * on 6.12 in test_pcut_crash_slice).
	 */
	last_seq = nxd_fast_first_seq_locked(nc);
	for (i = 0; i < nc->ring.count && i < NXD_ROUND_SEGS &&
	     first_seq + i < last_seq &&
	     (first_seq + i < nc->commit_seq || nc->frozen_end); i++) {
		struct nxd_segd *sd = nxd_ring_at(&nc->ring, i);

		if (blocks + 1 + sd->nr_data > max_blocks)
			break;
		if (sd->live)
			blocks += 1 + sd->nr_data;
		rd->segs[rd->nsegs++] = *sd;
	}
	spin_unlock(&nc->lock);
	if (!rd->nsegs)
		return 0;

	memset(rd->lossy, 0, rd->nsegs);
	kept = nxd_destage_collect(nc, rd, first_seq);
	if (kept <= 0)
		goto unmark;
	rd->nsegs = kept;
	if (ahead) {
		u32 used = 0;

		for (i = 0; i < (u32)kept; i++)
			if (rd->segs[i].live)
				used += 1 + rd->segs[i].nr_data;
		nxd_destage_extend(nc, rd, used);
	}

	for (i = 0; i < rd->nblk; i++)
		copied += rd->blk[i].copy;
	if (copied) {
		r = nxd_round_copy(nc, rd, &bytes);
		if (r) {
			kept = r;
			goto unmark;
		}
	}
	/* The copies have landed: HDD writes over these blocks may go. */
	spin_lock(&nc->lock);
	nxd_round_end_locked(nc, rd);
	spin_unlock(&nc->lock);
	wake_up_all(&nc->ewq);
	nxd_writer_wake(nc);

	/*
	 * Degraded, no SSD superblock write flushes the SSD before the tail
	 * moves (nxd_sb_write_locked): pass only segments whose superseded
	 * blocks have their newer copies durable.  A flushed copy was lost
	 * when the tail passed it while the copy superseding it, neither
	 * flushed nor destaged, was gone with the SSD (6.1 crash campaign,
	 * seed 930 cut 0: a 68 KiB write read back as the one before it).
	 */
	if (atomic_read(&nc->degraded)) {
		u32 safe;

		nxd_ssd_flush(nc);
		spin_lock(&nc->lock);
		safe = nxd_ring_safe_prefix(&nc->ring, kept, nc->ssd_durable_seq,
					    READ_ONCE(nc->void_on_hdd) ?
					    nc->frozen_end : U64_MAX, rd->lossy);
		spin_unlock(&nc->lock);
		if (safe < (u32)kept) {
			DMERR_LIMIT("%s: frozen log: newer copies of seg %llu not durable",
				    dm_table_device_name(nc->ti->table), first_seq + safe);
			short_by = kept - safe;
			kept = safe;
			rd->nsegs = kept;
		}
	}

	/* The HDD has them durably: move the tail past these segments. */
	spin_lock(&nc->lock);
	if (!kept) {
		/* Nothing may be passed: keep the copies, as CLEAN, below. */
		tail_seq = 0;
		tail_pos = 0;
	} else if (kept < nc->ring.count) {
		tail_pos = nxd_ring_at(&nc->ring, kept)->pos;
		tail_seq = first_seq + kept;
	} else {
		tail_pos = nxd_next_seg_pos(nc->ring.ring_blocks, nc->ring.head);
		tail_seq = nc->ring.next_seq;
	}
	spin_unlock(&nc->lock);
	/* Degraded, the SSD takes no superblock: the HDD label keeps the tail. */
	if (!kept)
		r = 0;
	else if (atomic_read(&nc->degraded))
		r = nxd_log_frozen_tail(nc, tail_pos, tail_seq);
	else
		r = nxd_sb_commit(nc, 0, tail_pos, tail_seq);
	if (r) {
		kept = r;
		goto unmark;
	}

	spin_lock(&nc->lock);
	for (i = 0; i < rd->nblk; i++) {
		struct nxd_dblk *d = &rd->blk[i];
		struct nxd_ient *e = nxd_index_find(&nc->ix, d->block);
		u64 seq;

		if (!e || e->slot != d->slot)
			continue;	/* rewritten or invalidated meanwhile */
		/* Past the tail, a replay could bring an older copy back. */
		if (!d->extra && (!short_by ||
				  (nxd_ring_find(&nc->ring, d->slot, &seq) &&
				   seq < first_seq + kept)))
			nxd_drop_entry_locked(nc, d->block);
		else if (d->copy && !nxd_inval_overlap_locked(nc, d->block, d->block))
			e->flags |= NXD_IE_CLEAN;	/* flushed above */
	}
	spin_unlock(&nc->lock);
	wake_up_all(&nc->ewq);
	if (!kept) {
		nxd_count(nc, NXD_CTR(destaged_blocks), copied);
		nxd_count(nc, NXD_CTR(destaged_bytes), bytes);
		return -EAGAIN;
	}

	/* Nobody may still be reading these slots when they are trimmed and reused. */
	nxd_epoch_sync(&nc->rd_ep);
	nxd_trim(nc, rd);
	spin_lock(&nc->lock);
	for (i = 0; i < (u32)kept; i++) {
		WARN_ON_ONCE(nxd_ring_oldest(&nc->ring)->live);
		nxd_ring_pop(&nc->ring);
	}
	spin_unlock(&nc->lock);

	nxd_count(nc, NXD_CTR(destaged_blocks), copied);
	nxd_count(nc, NXD_CTR(destaged_bytes), bytes);
	nxd_count(nc, NXD_CTR(segments_reclaimed), kept);
	return kept;

unmark:
	spin_lock(&nc->lock);
	nxd_round_end_locked(nc, rd);
	rd->nblk = 0;
	rd->sorted = false;
	spin_unlock(&nc->lock);
	wake_up_all(&nc->ewq);
	nxd_writer_wake(nc);
	return kept;
}

static void nxd_destage_sleep(struct nxd_c *nc, unsigned int ms)
{
	nxd_count(nc, NXD_CTR(destage_throttled_ms), ms);
	wait_event_interruptible_timeout(nc->dwq, kthread_should_stop() ||
					 atomic_read(&nc->drain_req) ||
					 READ_ONCE(nc->log_full),
					 msecs_to_jiffies(ms));
}

/* After a failed round: a drain or a full log must not turn it into a busy loop. */
static void nxd_destage_backoff(struct nxd_c *nc, unsigned int ms)
{
	nxd_count(nc, NXD_CTR(destage_throttled_ms), ms);
	wait_event_interruptible_timeout(nc->dwq, kthread_should_stop(),
					 msecs_to_jiffies(ms));
}

int nxd_destage_alloc(struct nxd_c *nc)
{
	if (bioset_init(&nc->dbs, 16, offsetof(struct nxd_dbio, bio),
			BIOSET_NEED_BVECS))
		return -ENOMEM;
	nc->drd = kvzalloc(sizeof(*nc->drd), GFP_KERNEL);
	if (!nc->drd)
		return -ENOMEM;
	nc->drd->blk = kvcalloc(nc->dbuf_blocks, sizeof(*nc->drd->blk), GFP_KERNEL);
	return nc->drd->blk ? 0 : -ENOMEM;
}

void nxd_destage_free(struct nxd_c *nc)
{
	if (nc->drd) {
		kvfree(nc->drd->blk);
		vfree(nc->drd->fbuf);
	}
	kvfree(nc->drd);
	nc->drd = NULL;
	bioset_exit(&nc->dbs);
}

/*
 * After a round that freed space: re-arm the log_full event once the log
 * is below high_watermark, and raise drain_done when a degraded volume's
 * frozen log has all gone to the HDD (once per table).
 */
static void nxd_destage_events(struct nxd_c *nc)
{
	bool empty;

	spin_lock(&nc->lock);
	empty = !nc->ring.count;
	spin_unlock(&nc->lock);
	if (empty && atomic_read(&nc->degraded) &&
	    atomic_xchg(&nc->empty_armed, 0))
		nxd_event(nc, NXD_EV_DRAIN_DONE);
	if (!READ_ONCE(nc->log_full) &&
	    nxd_log_used_pct(nc) < READ_ONCE(nc->vol->tun.high_wm))
		atomic_set(&nc->full_armed, 1);
}

static int nxd_destager_fn(void *data)
{
	struct nxd_c *nc = data;
	struct nxd_tun *t = &nc->vol->tun;
	struct nxd_round *rd = nc->drd;

	while (!kthread_should_stop()) {
		unsigned long t0;
		u64 ns;
		int r;

		wait_event_interruptible_timeout(nc->dwq, kthread_should_stop() ||
						 nxd_destage_wanted(nc),
						 msecs_to_jiffies(NXD_IDLE_MS));
		if (kthread_should_stop())
			break;
		if (!nxd_destage_wanted(nc))
			continue;
		/* postsuspend clears running, then takes the lock: no round after. */
		mutex_lock(&nc->round_lock);
		if (!READ_ONCE(nc->running)) {
			mutex_unlock(&nc->round_lock);
			continue;
		}
		t0 = jiffies;
		ns = ktime_get_ns();
		r = nxd_destage_round(nc, rd);
		mutex_unlock(&nc->round_lock);
		nxd_count(nc, NXD_CTR(destage_busy_us),
			  div_u64(ktime_get_ns() - ns, NSEC_PER_USEC));
		/* What waits on the destager must not wait on a dead device. */
		atomic_set(&nc->stuck_err, r == -EAGAIN ? -EIO : min(r, 0));
		wake_up_all(&nc->drain_wait);
		nxd_writer_wake(nc);
		if (r == -EAGAIN) {
			/* Said why above; nothing failed. */
			nxd_destage_backoff(nc, 1000);
			continue;
		}
		if (r < 0) {
			nc->destage_errors++;
			DMERR_LIMIT("%s: destage failed (%d), will retry",
				    dm_table_device_name(nc->ti->table), r);
			nxd_destage_backoff(nc, 1000);
			continue;
		}
		if (!r) {
			/* Blocked behind an HDD write in flight. */
			nxd_destage_sleep(nc, 5);
			continue;
		}
		nxd_destage_events(nc);
		if (atomic_read(&nc->drain_req) || READ_ONCE(nc->log_full) ||
		    atomic_read(&nc->degraded))
			continue;
		if (READ_ONCE(t->destage_rate)) {
			u64 bytes = (u64)rd->nblk * NXD_BLOCK_SIZE;
			u64 ms = div64_u64(bytes * 1000, (u64)READ_ONCE(t->destage_rate) << 20);
			u64 spent = jiffies_to_msecs(jiffies - t0);

			if (ms > spent)
				nxd_destage_sleep(nc, ms - spent);
		}
		/* Between the watermarks, foreground HDD I/O goes first. */
		if (nxd_log_used_pct(nc) < READ_ONCE(t->high_wm) && !nxd_hdd_idle(nc))
			nxd_destage_sleep(nc, NXD_YIELD_MS);
	}
	return 0;
}

int nxd_destager_start(struct nxd_c *nc)
{
	return nxd_thread_start(nc, nxd_destager_fn, "nxd-d", &nc->destager);
}

void nxd_destager_stop(struct nxd_c *nc)
{
	nxd_thread_stop(&nc->destager);
}

/*
 * Destage everything logged before the call and wait; for detaching the
 * SSD or maintenance.  Newer writes may stay in the log, so that a drain
 * under a continuous write load still ends.  A drain that gets there
 * raises the drain_done event.
 */
int nxd_drain(struct nxd_c *nc)
{
	u64 target;
	int r = 0;

	spin_lock(&nc->lock);
	target = nc->ring.next_seq;
	spin_unlock(&nc->lock);
	atomic_inc(&nc->drain_req);
	nxd_destager_wake(nc);
	for (;;) {
		bool done;

		spin_lock(&nc->lock);
		done = !nc->ring.count || nc->ring.first_seq >= target;
		spin_unlock(&nc->lock);
		if (done)
			break;
		if (!READ_ONCE(nc->running)) {
			r = -EBUSY;
			break;
		}
		if (wait_event_interruptible_timeout(nc->drain_wait, false,
						     msecs_to_jiffies(50)) < 0) {
			r = -EINTR;
			break;
		}
	}
	atomic_dec(&nc->drain_req);
	if (!r)
		nxd_event(nc, NXD_EV_DRAIN_DONE);
	return r;
}
