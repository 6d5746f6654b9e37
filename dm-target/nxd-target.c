// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd: target methods, table parsing and bio routing.
 *
 * Small or unaligned writes are appended to a log on the SSD (nxd-writer.c),
 * large aligned writes go straight to the HDD, a thread destages the log
 * to the HDD (nxd-destage.c).  Reads take each sector from wherever its
 * newest copy lives.
 */
#include <linux/module.h>
#include <linux/init.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/ktime.h>
#include <linux/blk_types.h>
#include <linux/sched/mm.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd"

static LIST_HEAD(nxd_targets);	/* every constructed table, under nxd_vols_lock */

/* ---- table parsing ---- */

/*
 * read_threshold (until target 2.0.0) was stored and shown but routed
 * nothing: a line that still names it is refused, not silently accepted.
 */
#define NXD_ERR_RT_REMOVED \
	"read_threshold was removed: small reads are served from the log only when logged"

static int nxd_parse_opts(struct nxd_c *nc, struct dm_arg_set *as, char **error)
{
	static const struct dm_arg _args[] = {
		{0, 32, "Invalid number of optional arguments"},
	};
	const struct nxd_tun_desc *d;
	unsigned int argc;
	const char *key, *val;
	int r;

	if (!as->argc)
		return 0;
	r = dm_read_arg_group(_args, as, &argc, error);
	if (r)
		return r;
	while (argc) {
		key = dm_shift_arg(as);
		argc--;
		if (!strcasecmp(key, "format")) {
			nc->opt_format = true;
			continue;
		}
		if (!strcasecmp(key, "accept_log_loss")) {
			nc->opt_accept_loss = true;
			continue;
		}
		if (!strcasecmp(key, "read_threshold")) {
			*error = NXD_ERR_RT_REMOVED;
			return -EINVAL;
		}
		if (!argc) {
			*error = "Option is missing its value";
			return -EINVAL;
		}
		val = dm_shift_arg(as);
		argc--;
		d = nxd_tun_find(key);
		if (!d) {
			*error = "Unknown option";
			return -EINVAL;
		}
		if (nxd_tun_parse(d, val, nxd_tun_field(&nc->opt, d))) {
			*error = (char *)nxd_tun_err(d);
			return -EINVAL;
		}
		nc->opt_given |= BIT(d - nxd_tuns);
	}
	if (as->argc) {
		*error = "Too many arguments";
		return -EINVAL;
	}
	return 0;
}

/*
 * dm lets several mapped devices share a component device; two volumes on
 * one log would corrupt it.  Tables of the same dm device may share (reload).
 */
static int nxd_claim(struct nxd_c *nc)
{
	struct nxd_c *o;

	list_for_each_entry(o, &nxd_targets, node) {
		struct block_device *ob[2] = { o->hdd->bdev, o->ssd->bdev };
		int i;

		if (o->vol == nc->vol)
			continue;
		for (i = 0; i < 2; i++)
			if (ob[i] == nc->hdd->bdev || ob[i] == nc->ssd->bdev)
				return -EBUSY;
	}
	list_add_tail(&nc->node, &nxd_targets);
	return 0;
}

static void nxd_dtr(struct dm_target *ti)
{
	struct nxd_c *nc = ti->private;

	if (!nc)
		return;
	mutex_lock(&nxd_vols_lock);
	if (!list_empty(&nc->node))
		list_del_init(&nc->node);
	mutex_unlock(&nxd_vols_lock);
	nxd_auto_stop(nc);
	nxd_destager_stop(nc);
	nxd_writer_stop(nc);
	/* Nothing raises events any more; the table is unbound already. */
	cancel_work_sync(&nc->ev_work);
	if (nc->vol)
		nxd_vol_put(nc);
	nxd_index_free(&nc->ix);
	nxd_ring_free(&nc->ring);
	nxd_batch_free(&nc->batch);
	nxd_fast_free(nc);
	nxd_destage_free(nc);
	vfree(nc->dbuf);
	kfree(nc->sb_buf);
	bioset_exit(&nc->bs);
	if (nc->dmio)
		dm_io_client_destroy(nc->dmio);
	if (nc->ssd)
		dm_put_device(ti, nc->ssd);
	if (nc->hdd)
		dm_put_device(ti, nc->hdd);
	kfree(nc);
	ti->private = NULL;
}

/* Destage read buffer: 16 MiB, a round of 2048 one-block segments. */
#define NXD_DBUF_BLOCKS	(32 * NXD_SEG_MAX_BLOCKS)

/*
 * nxd <hdd_dev> <ssd_dev> [<#opt_args> <opt_args>...]
 */
static int nxd_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	struct dm_arg_set as = { .argc = argc, .argv = argv };
	struct nxd_c *nc;
	const char *hdd_path, *ssd_path;
	bool vol_active;
	int r, i;

	if (argc < 2) {
		ti->error = "Usage: nxd <hdd_dev> <ssd_dev> [<#opt_args> <opt_args>...]";
		return -EINVAL;
	}
	nc = kzalloc(sizeof(*nc), GFP_KERNEL);
	if (!nc) {
		ti->error = "Cannot allocate context";
		return -ENOMEM;
	}
	ti->private = nc;
	nc->ti = ti;
	INIT_WORK(&nc->ev_work, nxd_event_work);
	atomic_set(&nc->full_armed, 1);
	atomic_set(&nc->empty_armed, 1);
	INIT_LIST_HEAD(&nc->node);
	nxd_tun_defaults(&nc->opt);
	mutex_init(&nc->sb_lock);
	mutex_init(&nc->round_lock);
	INIT_LIST_HEAD(&nc->parked);
	INIT_LIST_HEAD(&nc->fenced);
	spin_lock_init(&nc->lock);
	for (i = 0; i < NXD_SHARDS; i++)
		spin_lock_init(&nc->shard[i].lock);
	spin_lock_init(&nc->qlock);
	INIT_LIST_HEAD(&nc->invals);
	INIT_LIST_HEAD(&nc->done_invals);
	bio_list_init(&nc->queue);
	bio_list_init(&nc->held);
	init_waitqueue_head(&nc->wq);
	init_waitqueue_head(&nc->ewq);
	init_waitqueue_head(&nc->dwq);
	nxd_epoch_init(&nc->rd_ep);
	nxd_epoch_init(&nc->hw_ep);
	init_waitqueue_head(&nc->drain_wait);

	hdd_path = dm_shift_arg(&as);
	ssd_path = dm_shift_arg(&as);
	r = nxd_parse_opts(nc, &as, &ti->error);
	if (r)
		goto bad;
	nxd_auto_setup(nc);

	r = dm_get_device(ti, hdd_path, dm_table_get_mode(ti->table), &nc->hdd);
	if (r) {
		ti->error = "Cannot open HDD device";
		goto bad;
	}
	r = dm_get_device(ti, ssd_path, dm_table_get_mode(ti->table), &nc->ssd);
	if (r) {
		ti->error = "Cannot open SSD device";
		goto bad;
	}
	r = -EINVAL;
	if (nc->hdd->bdev == nc->ssd->bdev) {
		ti->error = "HDD and SSD are the same device";
		goto bad;
	}
	if (bdev_nr_sectors(nc->ssd->bdev) < NXD_MIN_SSD_SECTORS) {
		ti->error = "SSD smaller than the minimum log size (2080 KiB)";
		goto bad;
	}
	if (bdev_logical_block_size(nc->ssd->bdev) > NXD_BLOCK_SIZE ||
	    bdev_logical_block_size(nc->hdd->bdev) > NXD_BLOCK_SIZE) {
		ti->error = "Device logical block size above 4096 is not supported";
		goto bad;
	}
	nc->ssd_blocks = bdev_nr_sectors(nc->ssd->bdev) >> 3;
	nc->hdd_sectors = bdev_nr_sectors(nc->hdd->bdev);
	if (ti->len > nxd_hdd_data_sectors(nc->hdd_sectors)) {
		ti->error = "Volume larger than the HDD less its 1 MiB label area";
		goto bad;
	}
	nc->hdd_io_min = bdev_io_min(nc->hdd->bdev);
	nc->hdd_io_opt = bdev_io_opt(nc->hdd->bdev);
	nc->max_block = DIV_ROUND_UP_ULL(ti->len, NXD_SECTORS_PER_BLOCK);

	r = -ENOMEM;
	ti->error = "Cannot allocate memory";
	nc->dmio = dm_io_client_create();
	if (IS_ERR(nc->dmio)) {
		r = PTR_ERR(nc->dmio);
		nc->dmio = NULL;
		goto bad;
	}
	/* map() may take several clones of one bio: needs the rescuer. */
	if (bioset_init(&nc->bs, BIO_POOL_SIZE, 0, BIOSET_NEED_RESCUER))
		goto bad;
	nc->sb_buf = kmalloc(NXD_BLOCK_SIZE, GFP_KERNEL);
	nc->dbuf_blocks = NXD_DBUF_BLOCKS;
	nc->dbuf = vmalloc((size_t)NXD_DBUF_BLOCKS * NXD_BLOCK_SIZE);
	/* All the destager needs, so that it never runs short later. */
	if (!nc->sb_buf || !nc->dbuf || nxd_batch_init(&nc->batch) ||
	    nxd_fast_alloc(nc) || nxd_destage_alloc(nc))
		goto bad;

	nc->vol = nxd_vol_get(ti, &nc->opt);
	if (!nc->vol)
		goto bad;
	mutex_lock(&nxd_vols_lock);
	vol_active = !!nc->vol->active;
	r = nxd_claim(nc);
	mutex_unlock(&nxd_vols_lock);
	if (r) {
		ti->error = "HDD or SSD already used by another nxd volume";
		goto bad;
	}

	r = nxd_meta_check(nc, vol_active);
	if (r)
		goto bad;	/* ti->error set */
	nxd_tun_merge(nc, vol_active);
	/* Each value was checked: only the pairs and the stripe can fail. */
	r = -EINVAL;
	if (!nxd_tun_valid(&nc->opt)) {
		ti->error = (char *)nxd_tun_pair_err(&nc->opt);
		goto bad;
	}

	ti->error = "Cannot allocate the log's index (32 bytes a log block)";
	r = nxd_index_init(&nc->ix, nc->sb.ring_blocks);
	if (!r)
		r = nxd_ring_init(&nc->ring, nc->sb.ring_blocks, nc->sb.tail_pos,
				  nc->sb.tail_seq);
	if (r) {
		DMERR("%s: no memory for the index of a log of %llu blocks (%llu MiB)",
		      dm_table_device_name(ti->table), nc->sb.ring_blocks,
		      nc->sb.ring_blocks >> 15);
		goto bad;
	}
	nc->commit_seq = nc->sb.tail_seq;

	ti->error = "Cannot start threads";
	r = nxd_writer_start(nc);
	if (r)
		goto bad;
	r = nxd_destager_start(nc);
	if (r)
		goto bad;

	ti->num_flush_bios = 2;		/* 0: HDD, 1: SSD */
	ti->flush_supported = true;
	ti->num_discard_bios = 1;
	ti->discards_supported = true;
	ti->per_io_data_size = sizeof(struct nxd_pb);
	ti->error = NULL;
	return 0;
bad:
	nxd_dtr(ti);
	return r;
}

/* ---- bio mapping ---- */

static void nxd_pb_init(struct nxd_pb *pb, struct bio *bio, u8 dir)
{
	sector_t s = bio->bi_iter.bi_sector;

	pb->start_ns = ktime_get_ns();
	pb->sector = s;
	pb->bytes = bio->bi_iter.bi_size;
	pb->dir = dir;
	pb->route = NXD_H_HDD;
	pb->align = ((s | bio_sectors(bio)) & 7) ? NXD_H_UNALIGNED : NXD_H_ALIGNED;
	pb->epoch = -1;
	pb->hw_epoch = -1;
	pb->fg_hdd = false;
	pb->hold = NXD_HOLD_NONE;
	pb->error = 0;
	pb->fast = NXD_FAST_NONE;
	pb->fseg = NULL;
	pb->queued = false;
	atomic_set(&pb->pending, 0);
}

static int nxd_remap_hdd(struct nxd_c *nc, struct bio *bio)
{
	nxd_bio_to_hdd(nc, bio);
	return DM_MAPIO_REMAPPED;
}

#ifdef NXD_FAULT_INJECT
unsigned int nxd_fault_skip;
module_param_named(fault_skip, nxd_fault_skip, uint, 0644);
MODULE_PARM_DESC(fault_skip,
		 "TEST BUILD ONLY: ordering steps left out (1: PREFLUSH of direct segment headers, 2: HDD flush of a destage round; 8: direct HDD writes held 2 s)");

/* NXD_FAULT_HDD_WRITE_LATE: an HDD that keeps a write queued for a second. */
static DEFINE_SPINLOCK(nxd_late_lock);
static struct bio_list nxd_late_bios = BIO_EMPTY_LIST;

static void nxd_late_fn(struct work_struct *w)
{
	struct bio_list bl;
	struct bio *bio;

	spin_lock_irq(&nxd_late_lock);
	bl = nxd_late_bios;
	bio_list_init(&nxd_late_bios);
	spin_unlock_irq(&nxd_late_lock);
	while ((bio = bio_list_pop(&bl)))
		submit_bio_noacct(bio);
}

static DECLARE_DELAYED_WORK(nxd_late_work, nxd_late_fn);

static int nxd_late_submit(struct bio *bio)
{
	unsigned long flags;

	spin_lock_irqsave(&nxd_late_lock, flags);
	bio_list_add(&nxd_late_bios, bio);
	spin_unlock_irqrestore(&nxd_late_lock, flags);
	schedule_delayed_work(&nxd_late_work, 2 * HZ);
	return DM_MAPIO_SUBMITTED;
}

static void nxd_late_flush(void)
{
	flush_delayed_work(&nxd_late_work);
}
#else
static int nxd_late_submit(struct bio *bio)
{
	return DM_MAPIO_REMAPPED;
}

static void nxd_late_flush(void)
{
}
#endif

/* Where the newest copy of @blk is: a log slot and its sectors, or none. */
struct nxd_src {
	u32 slot;
	u8 mask;
};

static void nxd_block_src(struct nxd_c *nc, u64 blk, struct nxd_src *src)
{
	struct nxd_ient *e;

	src->mask = 0;
	if (nxd_fast_lookup_locked(nc, blk, &src->slot, &src->mask))
		return;
	e = nxd_index_find(&nc->ix, blk);
	if (e) {
		src->slot = e->slot;
		src->mask = e->mask;
	}
}

static bool nxd_src_valid(const struct nxd_src *src, sector_t s)
{
	return src->mask & (1U << (s & 7));
}

/*
 * Length of the run of sectors from @s (at most @max) that come from one
 * place: the log (contiguous slots) or the HDD.  Under the range's shards.
 */
static sector_t nxd_read_piece(struct nxd_c *nc, sector_t s, sector_t max,
			       bool *ssd, sector_t *target)
{
	u64 blk = s >> 3;
	struct nxd_src src;
	sector_t len = 0, t0;

	nxd_block_src(nc, blk, &src);
	*ssd = nxd_src_valid(&src, s);
	t0 = *ssd ? nxd_slot_sector(nc, src.slot) + (s & 7) : nxd_hdd_sector(nc, s);
	*target = t0;
	while (len < max) {
		sector_t c = s + len;
		bool v;

		if ((c >> 3) != blk) {
			blk = c >> 3;
			nxd_block_src(nc, blk, &src);
		}
		v = nxd_src_valid(&src, c);
		if (v != *ssd)
			break;
		if (v && nxd_slot_sector(nc, src.slot) + (c & 7) != t0 + len)
			break;
		len++;
	}
	return len;
}

static int nxd_map_read(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb)
{
	sector_t s = bio->bi_iter.bi_sector, nr = bio_sectors(bio), off = 0;
	bool maybe;
	u32 m;

	if (!nr)
		return nxd_remap_hdd(nc, bio);
	/* Reads take only the shards of their range, never nc->lock. */
	m = nxd_shard_mask(s >> 3, (s + nr - 1) >> 3);
	nxd_shards_lock(nc, m);
	maybe = nxd_index_first(&nc->ix, s >> 3, (s + nr - 1) >> 3) ||
		nxd_fast_range_busy(nc, s >> 3, (s + nr - 1) >> 3);
	nxd_shards_unlock(nc, m);
	if (!maybe) {
		nxd_count(nc, NXD_CTR(reads_hdd), 1);
		return nxd_remap_hdd(nc, bio);
	}

	/* Log slots we read stay valid until we drop the epoch in end_io. */
	pb->epoch = nxd_epoch_get(&nc->rd_ep);
	while (off < nr) {
		sector_t len, target;
		struct block_device *bdev;
		struct bio *clone;
		bool ssd;

		m = nxd_shard_mask((s + off) >> 3, (s + nr - 1) >> 3);
		nxd_shards_lock(nc, m);
		len = nxd_read_piece(nc, s + off, nr - off, &ssd, &target);
		nxd_shards_unlock(nc, m);
		if (ssd)
			pb->route = NXD_H_SSD;
		bdev = ssd ? nc->ssd->bdev : nc->hdd->bdev;
		if (off + len == nr) {
			/* The last piece is the bio itself. */
			if (off)
				bio_trim(bio, off, len);
			bio_set_dev(bio, bdev);
			if (!ssd)
				nxd_fg_hdd(nc, pb);
			bio->bi_iter.bi_sector = target;
			break;
		}
		clone = bio_alloc_clone(bdev, bio, GFP_NOIO, &nc->bs);
		bio_trim(clone, off, len);
		clone->bi_iter.bi_sector = target;
		bio_chain(clone, bio);
		submit_bio_noacct(clone);
		off += len;
	}
	nxd_count(nc, pb->route == NXD_H_SSD ? NXD_CTR(reads_ssd) : NXD_CTR(reads_hdd), 1);
	return DM_MAPIO_REMAPPED;
}

static int nxd_map_write(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb)
{
	struct nxd_tun *t = &nc->vol->tun;
	sector_t s = bio->bi_iter.bi_sector, nr = bio_sectors(bio);
	enum nxd_mode mode = READ_ONCE(t->mode);
	bool to_log, owned, busy = false;
	u64 first, last, run, cut;
	u32 m;

	if (!nr)
		return nxd_remap_hdd(nc, bio);
	/*
	 * Flushes fail once acknowledged log writes are known lost (nxd_map),
	 * but dm core sends the data of a PREFLUSH write whatever its flush
	 * returned: fail FUA data too, or a journal commit (PREFLUSH|FUA)
	 * would succeed over the loss.
	 */
	if ((bio->bi_opf & REQ_FUA) && atomic_read(&nc->acked_lost))
		return DM_MAPIO_KILL;
	/* The rest of a write cut at the log's edges is routed as it was. */
	cut = atomic64_read(&nc->own_cut);
	if (cut == s + 1 && atomic64_cmpxchg(&nc->own_cut, cut, 0) == cut) {
		to_log = false;
	} else if (atomic_read(&nc->degraded)) {
		to_log = false;
	} else if (mode == NXD_MODE_ADAPTIVE) {
		/* it may cut the bio at a stripe boundary */
		to_log = nxd_auto_map(nc, bio, pb);
		nr = bio_sectors(bio);
	} else {
		to_log = nxd_route_write_to_log(s, (u64)nr << 9,
						READ_ONCE(t->write_threshold),
						nc->hdd_io_min, mode);
	}
	if (!to_log) {
		int ep = nxd_epoch_get(&nc->hw_ep);

		/*
		 * The log owns the blocks it holds: the part of the write
		 * over them is logged, the rest goes to the HDD (dm core
		 * sends the remainder to map again).  A merge in the writer
		 * must be indexed first, and a destage round filling these
		 * stripes must have written them: the writer waits for both.
		 */
		first = s >> 3;
		last = (s + nr - 1) >> 3;
		m = nxd_shard_mask(first, last);
		nxd_shards_lock(nc, m);
		run = nxd_owned_run_locked(nc, first, last, &owned);
		if (run <= last - first)
			last = first + run - 1;
		if (!owned)
			busy = nxd_merging_locked(nc, first, last) ||
			       nxd_fill_busy_locked(nc, first, last);
		nxd_shards_unlock(nc, m);
		if ((last + 1) << 3 < s + nr) {
			nxd_accept_partial(bio, pb, ((last + 1) << 3) - s);
			nr = bio_sectors(bio);
			atomic64_set(&nc->own_cut, s + nr + 1);
		}
		/* Degraded, the writer orders it after the frozen copies. */
		to_log = owned && !atomic_read(&nc->degraded);
		if (!owned && !busy) {
			pb->hw_epoch = ep;
			nxd_count(nc, NXD_CTR(writes_direct), 1);
			if (nxd_fault(NXD_FAULT_HDD_WRITE_LATE)) {
				nxd_bio_to_hdd(nc, bio);
				return nxd_late_submit(bio);
			}
			return nxd_remap_hdd(nc, bio);
		}
		nxd_epoch_put(&nc->hw_ep, ep);
	}
	if (to_log && nxd_fast_map(nc, bio, pb))
		return DM_MAPIO_REMAPPED;
	pb->route = to_log ? NXD_H_SSD : NXD_H_HDD;
	nxd_queued_get(nc, pb, s >> 3, (s + nr - 1) >> 3);
	nxd_writer_queue(nc, bio);
	return DM_MAPIO_SUBMITTED;
}

static int nxd_map_discard(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb)
{
	sector_t s = bio->bi_iter.bi_sector, nr = bio_sectors(bio);
	bool logged = false;
	u32 m;
	int ep;

	pb->bytes = 0;		/* not a read or write: no histogram */
	nxd_count(nc, NXD_CTR(discards), 1);
	ep = nxd_epoch_get(&nc->hw_ep);
	if (nr) {
		m = nxd_shard_mask(s >> 3, (s + nr - 1) >> 3);
		nxd_shards_lock(nc, m);
		logged = nxd_range_logged(nc, s >> 3, (s + nr - 1) >> 3) ||
			 nxd_merging_locked(nc, s >> 3, (s + nr - 1) >> 3) ||
			 nxd_fast_range_busy(nc, s >> 3, (s + nr - 1) >> 3) ||
			 nxd_fill_busy_locked(nc, s >> 3, (s + nr - 1) >> 3);
		nxd_shards_unlock(nc, m);
	}
	if (!logged) {
		if (!bdev_max_discard_sectors(nc->hdd->bdev)) {
			nxd_epoch_put(&nc->hw_ep, ep);
			bio_endio(bio);
			return DM_MAPIO_SUBMITTED;
		}
		pb->hw_epoch = ep;
		return nxd_remap_hdd(nc, bio);
	}
	nxd_epoch_put(&nc->hw_ep, ep);
	nxd_queued_get(nc, pb, s >> 3, (s + nr - 1) >> 3);
	nxd_writer_queue(nc, bio);
	return DM_MAPIO_SUBMITTED;
}

static int nxd_map(struct dm_target *ti, struct bio *bio)
{
	struct nxd_c *nc = ti->private;
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));
	unsigned long now;
	bool open;

	nxd_pb_init(pb, bio, op_is_write(bio_op(bio)) ? NXD_H_WRITE : NXD_H_READ);
	bio->bi_iter.bi_sector = dm_target_offset(ti, bio->bi_iter.bi_sector);
	/* A shared line: written once a jiffy, not once a bio. */
	now = jiffies;
	if (READ_ONCE(nc->fg_last) != now)
		WRITE_ONCE(nc->fg_last, now);

	if (bio->bi_opf & REQ_PREFLUSH) {
		/* dm core splits data off flushes: these are empty, one per device. */
		pb->bytes = 0;
		if (dm_bio_get_target_bio_nr(bio) == 0)
			nxd_count(nc, NXD_CTR(flushes), 1);
		/*
		 * The destager found acknowledged log writes lost: no flush
		 * may say again that the volume holds what was written
		 * before it, until the table is reloaded (dm-writecache
		 * likewise keeps its error).  Degraded, the writer fails it
		 * once the HDD has all that is left (nxd_degraded_bio).
		 */
		if (atomic_read(&nc->acked_lost) && !atomic_read(&nc->degraded))
			return DM_MAPIO_KILL;
		if (dm_bio_get_target_bio_nr(bio) == 0)
			return nxd_remap_hdd(nc, bio);
		/*
		 * Degraded: the writer holds it until the HDD has every logged
		 * write.  Direct log writes not committed yet: the writer
		 * commits them first (they are acknowledged, so they must be
		 * durable after this flush).
		 */
		spin_lock(&nc->lock);
		open = nc->fs_count;
		spin_unlock(&nc->lock);
		if (atomic_read(&nc->degraded) || open) {
			nxd_writer_queue(nc, bio);
			return DM_MAPIO_SUBMITTED;
		}
		bio_set_dev(bio, nc->ssd->bdev);
		return DM_MAPIO_REMAPPED;
	}

	switch (bio_op(bio)) {
	case REQ_OP_READ:
		return nxd_map_read(nc, bio, pb);
	case REQ_OP_WRITE:
		return nxd_map_write(nc, bio, pb);
	case REQ_OP_DISCARD:
		return nxd_map_discard(nc, bio, pb);
	default:
		return DM_MAPIO_KILL;
	}
}

static int nxd_end_io(struct dm_target *ti, struct bio *bio, blk_status_t *error)
{
	struct nxd_c *nc = ti->private;
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

	if (pb->fast == NXD_FAST_INFLIGHT &&
	    nxd_fast_endio(nc, bio, pb, error) == DM_ENDIO_INCOMPLETE)
		return DM_ENDIO_INCOMPLETE;
	if (pb->epoch >= 0)
		nxd_epoch_put(&nc->rd_ep, pb->epoch);
	if (pb->hw_epoch >= 0)
		nxd_epoch_put(&nc->hw_ep, pb->hw_epoch);
	if (pb->fg_hdd)
		nxd_fg_end(nc);
	if (pb->queued)
		nxd_queued_put(nc, pb);
	if (*error)
		nxd_count(nc, pb->route == NXD_H_SSD ? NXD_CTR(ssd_errors) :
			  NXD_CTR(hdd_errors), 1);
	if (pb->bytes)
		nxd_hist_account(nc->vol, pb);
	return DM_ENDIO_DONE;
}

/* ---- suspend / resume ---- */

/*
 * drain_on_suspend drains twice: here, while I/O still flows, for the bulk,
 * and in postsuspend for what came after, e.g. the writes of dm's lockfs.
 */
static void nxd_presuspend(struct dm_target *ti)
{
	struct nxd_c *nc = ti->private;

	/* Before dm waits for the ioctls in the table: see nxd_drain(). */
	WRITE_ONCE(nc->suspending, true);
	wake_up_all(&nc->drain_wait);
	if (nc->running && READ_ONCE(nc->vol->tun.drain_on_suspend))
		nxd_drain(nc, false);
}

/* The suspend failed after presuspend: drain messages work again. */
static void nxd_presuspend_undo(struct dm_target *ti)
{
	struct nxd_c *nc = ti->private;

	WRITE_ONCE(nc->suspending, false);
}

static void nxd_postsuspend(struct dm_target *ti)
{
	struct nxd_c *nc = ti->private;
	int r, ssd_r;

	if (!nc->running)
		return;
	/* Direct log writes are acknowledged before their segment's header. */
	nxd_fast_wait_committed(nc);
	/*
	 * dm core waited for our bios: the writer holds nothing now, and the
	 * file system, if any, is frozen.  The destager writes to the HDD
	 * directly, so it can still empty the log before a switch to linear.
	 */
	if (READ_ONCE(nc->vol->tun.drain_on_suspend) && !atomic_read(&nc->degraded))
		nxd_drain(nc, false);
	WRITE_ONCE(nc->running, false);
	nxd_auto_stop(nc);
	/* A round that saw running still set ends before we go on. */
	mutex_lock(&nc->round_lock);
	mutex_unlock(&nc->round_lock);
	r = nxd_hdd_flush(nc);
	if (!atomic_read(&nc->degraded)) {
		/* CLEAN skips the data checksums at the next load: only if true. */
		ssd_r = nxd_ssd_flush(nc);
		nxd_sb_write(nc, !r && !ssd_r);
	}
}

/*
 * The device is suspended: an allocation here must not wait on its I/O.
 * Degraded, the SSD takes no superblock, and a resume must still work.
 */
static int nxd_preresume(struct dm_target *ti)
{
	struct nxd_c *nc = ti->private;
	unsigned int noio = memalloc_noio_save();
	int r = 0;

	if (!nc->loaded) {
		r = nxd_meta_load(nc);
		if (!r)
			nc->loaded = true;
	} else if (!atomic_read(&nc->degraded)) {
		/* A failure degrades and freezes the log; serve all the same. */
		if (nxd_sb_new_gen(nc) && !nc->frozen)
			r = -EIO;
	}
	memalloc_noio_restore(noio);
	return r;
}

static void nxd_resume(struct dm_target *ti)
{
	struct nxd_c *nc = ti->private;
	struct nxd_vol *vol = nc->vol;

	mutex_lock(&nxd_vols_lock);
	if (vol->active != nc) {
		/* A new table's options take over; sysfs changes since load stay. */
		if (!nc->resumed)
			nxd_tun_put(vol, &nc->opt);
		vol->active = nc;
	}
	nc->resumed = true;
	memcpy(vol->vol_uuid, nc->sb.vol_uuid, sizeof(vol->vol_uuid));
	mutex_unlock(&nxd_vols_lock);
	if (!vol->kobj_added) {
		/*
		 * dm still holds this device's I/O: reclaim must not write to
		 * it from kobject_add()'s allocations.
		 */
		unsigned int noio = memalloc_noio_save();
		int r = nxd_sysfs_add(vol);

		memalloc_noio_restore(noio);
		/* The volume works without it; a later resume tries again. */
		if (r)
			DMWARN("%s: no sysfs nxd/ until the next resume: %d",
			       dm_table_device_name(ti->table), r);
		else
			/* Pairs with the acquire in nxd_sysfs_notify(). */
			smp_store_release(&vol->kobj_added, true);
	}
	WRITE_ONCE(nc->suspending, false);
	WRITE_ONCE(nc->running, true);
	nxd_auto_start(nc);
	nxd_writer_wake(nc);
	nxd_destager_wake(nc);
}

/* ---- status, messages, limits ---- */

static const char *nxd_state(struct nxd_c *nc)
{
	if (atomic_read(&nc->degraded))
		return "degraded";
	return nc->running ? "ok" : "suspended";
}

static void nxd_status(struct dm_target *ti, status_type_t type,
		       unsigned int status_flags, char *result, unsigned int maxlen)
{
	struct nxd_c *nc = ti->private;
	struct nxd_tun *t = &nc->vol->tun;
	const struct nxd_tun_desc *d;
	char s[NXD_TUN_STR_LEN];
	struct nxd_ioc_stats *st;
	unsigned int sz = 0, i;
	const __u64 *c;

	switch (type) {
	case STATUSTYPE_INFO:
		st = kzalloc(sizeof(*st), GFP_NOIO);
		if (!st) {
			DMEMIT("error");
			break;
		}
		nxd_stats_fill(nc->vol, st, false);
		nxd_gauges_fill(nc, &st->c);
		c = (const __u64 *)&st->c;
		DMEMIT("%s", nxd_state(nc));
		for (i = 0; i <= NXD_CTR(events_acked_lost); i++)
			DMEMIT(" %llu", (unsigned long long)c[i]);
		kfree(st);
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%s %s %u", nc->hdd->name, nc->ssd->name,
		       2 * NXD_TUN_NR);
		for (i = 0; i < NXD_TUN_NR; i++) {
			d = &nxd_tuns[i];
			DMEMIT(" %s %s", d->name,
			       nxd_tun_str(d, READ_ONCE(*nxd_tun_field(t, d)), s));
		}
		break;
	case STATUSTYPE_IMA:
		DMEMIT_TARGET_NAME_VERSION(ti->type);
		DMEMIT(",hdd=%s,ssd=%s,write_threshold=%u,mode=%s;", nc->hdd->name,
		       nc->ssd->name, READ_ONCE(t->write_threshold),
		       nxd_mode_name(READ_ONCE(t->mode)));
		break;
	}
}

/*
 * "blocks B ranges R S+N ...": 4 KiB blocks at risk, the ranges they form,
 * then the first ranges in sectors (start+count), as many as fit.
 */
static void nxd_risk_emit(const struct nxd_risk *rk, char *result,
			  unsigned int maxlen)
{
	unsigned int sz = 0;
	u32 i;

	if (!maxlen)
		return;
	sz += scnprintf(result + sz, maxlen - sz, "blocks %llu ranges %u",
			rk->blocks, rk->ranges);
	for (i = 0; i < rk->listed; i++) {
		char one[48];
		int n = scnprintf(one, sizeof(one), " %llu+%llu",
				  rk->r[i][0] << 3, rk->r[i][1] << 3);

		if (sz + n + 1 >= maxlen)
			break;
		memcpy(result + sz, one, n + 1);
		sz += n;
	}
}

/* log_at_risk, abandon_log: a reply built from struct nxd_risk. */
static int nxd_risk_message(struct nxd_c *nc, bool abandon, char *result,
			    unsigned int maxlen)
{
	struct nxd_risk *rk = kzalloc(sizeof(*rk), GFP_KERNEL);
	int r;

	if (!rk)
		return -ENOMEM;
	r = abandon ? nxd_log_abandon(nc, rk) : nxd_log_at_risk(nc, rk);
	if (!r)
		nxd_risk_emit(rk, result, maxlen);
	kfree(rk);
	/* 1: dm-ioctl passes @result to userspace only then. */
	return r ? r : 1;
}

static int nxd_message(struct dm_target *ti, unsigned int argc, char **argv,
		       char *result, unsigned int maxlen)
{
	struct nxd_c *nc = ti->private;

	if (argc == 1 && !strcasecmp(argv[0], "log_at_risk"))
		return nxd_risk_message(nc, false, result, maxlen);
	if (argc == 1 && !strcasecmp(argv[0], "abandon_log"))
		return nxd_risk_message(nc, true, result, maxlen);

	if (argc == 1 && !strcasecmp(argv[0], "drain")) {
		if (!nc->running)
			return -EBUSY;
		return nxd_drain(nc, true);
	}
	if (argc == 1 && !strcasecmp(argv[0], "save_tunables")) {
		if (!nc->running || READ_ONCE(nc->frozen) ||
		    atomic_read(&nc->degraded))
			return -EBUSY;
		return nxd_sb_save(nc);
	}
	if (argc == 1 && !strcasecmp(argv[0], "pause_destage")) {
		atomic_set(&nc->destage_paused, 1);
		return 0;
	}
	if (argc == 1 && !strcasecmp(argv[0], "resume_destage")) {
		atomic_set(&nc->destage_paused, 0);
		nxd_destager_wake(nc);
		return 0;
	}
	DMWARN("%s: unrecognised message", dm_table_device_name(ti->table));
	return -EINVAL;
}

static int nxd_iterate_devices(struct dm_target *ti,
			       iterate_devices_callout_fn fn, void *data)
{
	struct nxd_c *nc = ti->private;
	int r;

	r = fn(ti, nc->hdd, nc->sb.data_offset, ti->len, data);
	if (!r)
		r = fn(ti, nc->ssd, 0, bdev_nr_sectors(nc->ssd->bdev), data);
	return r;
}

static void nxd_io_hints(struct dm_target *ti, struct queue_limits *limits)
{
	struct nxd_c *nc = ti->private;

	/* mkfs reads the RAID geometry from these: the HDD's, not the SSD's. */
	limits->io_min = max_t(unsigned int, nc->hdd_io_min, limits->logical_block_size);
	limits->io_opt = nc->hdd_io_opt;
	nxd_set_discard_limits(limits, UINT_MAX >> SECTOR_SHIFT, NXD_BLOCK_SIZE);
}

static struct target_type nxd_target = {
	.name = "nxd",
	.version = {2, 5, 0},
	.features = DM_TARGET_SINGLETON,
	.module = THIS_MODULE,
	.ctr = nxd_ctr,
	.dtr = nxd_dtr,
	.map = nxd_map,
	.end_io = nxd_end_io,
	.presuspend = nxd_presuspend,
	.presuspend_undo = nxd_presuspend_undo,
	.postsuspend = nxd_postsuspend,
	.preresume = nxd_preresume,
	.resume = nxd_resume,
	.status = nxd_status,
	.message = nxd_message,
	.iterate_devices = nxd_iterate_devices,
	.io_hints = nxd_io_hints,
};

static int __init dm_nxd_init(void)
{
	int r;

#ifdef NXD_FAULT_INJECT
	pr_warn("dm-nxd: fault injection build (fault_skip=%u): not for real data\n",
		nxd_fault_skip);
#endif
	nxd_sysfs_init();
	r = nxd_ctl_init();
	if (r)
		return r;
	r = dm_register_target(&nxd_target);
	if (r) {
		DMERR("register failed %d", r);
		nxd_ctl_exit();
	}
	return r;
}

static void __exit dm_nxd_exit(void)
{
	nxd_late_flush();
	dm_unregister_target(&nxd_target);
	nxd_ctl_exit();
}

module_init(dm_nxd_init);
module_exit(dm_nxd_exit);

MODULE_DESCRIPTION(DM_NAME " hybrid SSD log + HDD target (NytroXD-style)");
MODULE_AUTHOR("dm-nxd developers");
MODULE_LICENSE("GPL");
MODULE_VERSION(NXD_VERSION_STR);
