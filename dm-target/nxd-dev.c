// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd devices: the bottom layer every other file builds on.
 *
 * Synchronous I/O and flushes of the SSD and the HDD, foreground HDD
 * routing, read epochs (so that reclaim can wait for reads of log slots),
 * events, SSD failure, the completion of logged bios, and the wake-ups of
 * the two threads.  It calls nothing above it: the layers are listed in
 * docs/design.md, section 1.
 */
#include <linux/vmalloc.h>
#include <linux/jiffies.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd"

/* ---- synchronous I/O and flushes ---- */

sector_t nxd_slot_sector(struct nxd_c *nc, u64 slot)
{
	return (nc->sb.ring_start + slot) << 3;
}

static int nxd_dev_io(struct nxd_c *nc, struct block_device *bdev,
		      blk_opf_t opf, sector_t sector, sector_t count, void *buf)
{
	struct dm_io_region where = {
		.bdev = bdev,
		.sector = sector,
		.count = count,
	};
	struct dm_io_request req = {
		.bi_opf = opf,
		.mem.type = is_vmalloc_addr(buf) ? DM_IO_VMA : DM_IO_KMEM,
		.client = nc->dmio,
	};
	unsigned long err_bits = 0;

	if (is_vmalloc_addr(buf))
		req.mem.ptr.vma = buf;
	else
		req.mem.ptr.addr = buf;
	return dm_io(&req, 1, &where, &err_bits, IOPRIO_DEFAULT);
}

/* Synchronous I/O of whole 4 KiB blocks of the SSD. */
int nxd_ssd_io(struct nxd_c *nc, blk_opf_t opf, u64 ssd_block, u32 nr_blocks,
	       void *buf)
{
	return nxd_dev_io(nc, nc->ssd->bdev, opf, ssd_block << 3,
			  (sector_t)nr_blocks << 3, buf);
}

/* Synchronous I/O of one 4 KiB block of the HDD (its label area). */
int nxd_hdd_io(struct nxd_c *nc, blk_opf_t opf, sector_t sector, void *buf)
{
	return nxd_dev_io(nc, nc->hdd->bdev, opf, sector, NXD_SECTORS_PER_BLOCK,
			  buf);
}

static int nxd_dev_flush(struct nxd_c *nc, struct block_device *bdev)
{
	struct dm_io_region where = { .bdev = bdev, .sector = 0, .count = 0 };
	struct dm_io_request req = {
		.bi_opf = REQ_OP_WRITE | REQ_PREFLUSH | REQ_SYNC,
		.mem.type = DM_IO_KMEM,
		.mem.ptr.addr = NULL,
		.client = nc->dmio,
	};
	unsigned long err_bits = 0;

	return dm_io(&req, 1, &where, &err_bits, IOPRIO_DEFAULT);
}

int nxd_hdd_flush(struct nxd_c *nc)
{
	return nxd_dev_flush(nc, nc->hdd->bdev);
}

/*
 * Foreground HDD I/O begins and ends: the destager's idle rounds run only
 * after 100 ms with none in flight, and yield to it (nxd_hdd_idle).
 */
void nxd_fg_start(struct nxd_c *nc)
{
	atomic_inc(&nc->hdd_fg_inflight);
	WRITE_ONCE(nc->hdd_fg_last, jiffies);
}

/* Any context. */
void nxd_fg_end(struct nxd_c *nc)
{
	WRITE_ONCE(nc->hdd_fg_last, jiffies);
	if (atomic_dec_and_test(&nc->hdd_fg_inflight))
		wake_up(&nc->dwq);
}

/* An HDD flush for foreground writes: the HDD is not idle meanwhile. */
int nxd_hdd_flush_fg(struct nxd_c *nc)
{
	int r;

	nxd_fg_start(nc);
	r = nxd_hdd_flush(nc);
	nxd_fg_end(nc);
	return r;
}

/*
 * A flush of the SSD that succeeds makes every segment committed before
 * it started durable: the degraded destager's label tail may then pass
 * copies those segments superseded (nxd_ring_safe_prefix).
 */
u64 nxd_ssd_flush_start(struct nxd_c *nc)
{
	u64 seq;

	spin_lock(&nc->lock);
	seq = nc->commit_seq;
	spin_unlock(&nc->lock);
	return seq;
}

void nxd_ssd_flush_done(struct nxd_c *nc, u64 seq, int err)
{
	if (err)
		return;
	spin_lock(&nc->lock);
	if (seq > nc->ssd_durable_seq)
		nc->ssd_durable_seq = seq;
	spin_unlock(&nc->lock);
}

int nxd_ssd_flush(struct nxd_c *nc)
{
	u64 seq = nxd_ssd_flush_start(nc);
	int r = nxd_dev_flush(nc, nc->ssd->bdev);

	nxd_ssd_flush_done(nc, seq, r);
	return r;
}

/* ---- events and SSD failure ---- */

/*
 * An SSD write failed: stop logging, keep serving.  The caller freezes the
 * log (nxd_log_freeze) before acknowledging anything that depends on it.
 */
void nxd_ssd_failed(struct nxd_c *nc, int err, const char *what)
{
	nxd_count(nc, NXD_CTR(ssd_errors), 1);
	if (!atomic_xchg(&nc->degraded, 1))
		nxd_event(nc, NXD_EV_DEGRADED);
	if (!atomic_xchg(&nc->ssd_fail_reported, 1))
		DMERR("%s: SSD %s failed (%d): volume degraded, writes bypass the log",
		      dm_table_device_name(nc->ti->table), what, err);
}

/*
 * Record an event of @kind (NXD_EV_*) and have it raised.  Callable from
 * any context, IRQ included: atomics and schedule_work() only.  The
 * counters are updated before the work is queued, so a waiter woken by
 * the dm event reads them already counted.
 */
void nxd_event(struct nxd_c *nc, unsigned int kind)
{
	struct nxd_vol *vol = nc->vol;

	if (WARN_ON_ONCE(!kind || kind >= NXD_EV_NR))
		return;
	atomic64_inc(&vol->ev_count[kind]);
	atomic_set(&vol->ev_last, kind);
	atomic_or(BIT(kind), &nc->ev_pending);
	schedule_work(&nc->ev_work);
}

/*
 * ---- epochs: I/O in flight that a thread must wait out ----
 *
 * Read epochs: SSD reads of log slots, for reclaim.  HDD write epochs:
 * foreground HDD writes, for a destage round that fills stripes with HDD
 * data.  The I/O takes the epoch before it looks at the state the waiter
 * changes; the waiter changes it, flips, and waits for the old epoch.
 */
void nxd_epoch_init(struct nxd_epoch *ep)
{
	atomic_set(&ep->inflight[0], 0);
	atomic_set(&ep->inflight[1], 0);
	ep->cur = 0;
	init_waitqueue_head(&ep->wait);
}

int nxd_epoch_get(struct nxd_epoch *ep)
{
	int e;

	for (;;) {
		e = READ_ONCE(ep->cur);
		atomic_inc(&ep->inflight[e]);
		/* Count us before looking at the state; pairs with nxd_epoch_sync. */
		smp_mb__after_atomic();
		/* A flip in between: that sync may not have seen us.  Retry. */
		if (likely(READ_ONCE(ep->cur) == e))
			return e;
		nxd_epoch_put(ep, e);
	}
}

void nxd_epoch_put(struct nxd_epoch *ep, int e)
{
	if (atomic_dec_and_test(&ep->inflight[e]))
		wake_up(&ep->wait);
}

/* Wait until no I/O that may have seen the state before the change is in flight. */
void nxd_epoch_sync(struct nxd_epoch *ep)
{
	int old = ep->cur;

	WRITE_ONCE(ep->cur, !old);
	/* New I/O uses the new epoch before we sample the old count. */
	smp_mb();
	wait_event(ep->wait, !atomic_read(&ep->inflight[old]));
}

/* ---- bios ---- */

/* Foreground HDD I/O: the destager yields to it. */
void nxd_fg_hdd(struct nxd_c *nc, struct nxd_pb *pb)
{
	pb->fg_hdd = true;
	nxd_fg_start(nc);
}

/*
 * A bio a lower device completed, to be submitted again: as map got it.
 * A dm device below that split it (bio_inc_remaining() per remainder) left
 * it chained with no completion count: split again, it would complete
 * after its first piece and again after the next, and its second
 * completion could end another bio (6.12 crash campaign: a NULL bi_blkg
 * in the writer's submission).  dm_bio_restore() resets the same fields.
 */
void nxd_bio_reset(struct bio *bio, const struct bvec_iter *iter)
{
	bio->bi_iter = *iter;
	bio_clear_flag(bio, BIO_CHAIN);
	atomic_set(&bio->__bi_remaining, 1);
}

struct bio *nxd_bio_to_hdd(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

	WARN_ON_ONCE(bio_flagged(bio, BIO_CHAIN) ||
		     atomic_read(&bio->__bi_remaining) != 1);
	bio_set_dev(bio, nc->hdd->bdev);
	bio->bi_iter.bi_sector = nxd_hdd_sector(nc, bio->bi_iter.bi_sector);
	pb->route = NXD_H_HDD;
	nxd_fg_hdd(nc, pb);
	return bio;
}

/* Writer only.  A bio whose segment failed is redone, degraded. */
void nxd_bio_done(struct nxd_c *nc, struct bio *bio)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

	if (!atomic_dec_and_test(&pb->pending))
		return;
	if (pb->error == NXD_PB_RETRY) {
		pb->error = 0;
		nxd_hold(nc, bio, NXD_HOLD_RETRY);
		atomic_set(&nc->kick, 1);
		return;
	}
	if (pb->error)
		bio->bi_status = errno_to_blk_status(pb->error);
	bio_endio(bio);
}

/* ---- thread wake-ups: any layer may ask for one ---- */

/* A volume's thread, named <prefix>/<dm device> in ps. */
int nxd_thread_start(struct nxd_c *nc, int (*fn)(void *), const char *prefix,
		     struct task_struct **t)
{
	struct task_struct *k;

	k = kthread_run(fn, nc, "%s/%s", prefix, dm_table_device_name(nc->ti->table));
	if (IS_ERR(k))
		return PTR_ERR(k);
	*t = k;
	return 0;
}

void nxd_thread_stop(struct task_struct **t)
{
	if (*t) {
		kthread_stop(*t);
		*t = NULL;
	}
}

void nxd_writer_wake(struct nxd_c *nc)
{
	atomic_set(&nc->kick, 1);
	wake_up(&nc->wq);
}

void nxd_destager_wake(struct nxd_c *nc)
{
	wake_up_all(&nc->dwq);
}
