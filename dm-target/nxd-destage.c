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
#include <linux/delay.h>
#include <linux/jiffies.h>

#include "nxd-destage.h"

#define DM_MSG_PREFIX "nxd destage"

/*
 * Under log pressure (log full, or above high_watermark) a round takes at
 * most destage_pressure_blocks: writers wait for the space a round frees,
 * and a 16 MiB round of scattered 4 KiB blocks keeps an array of HDDs busy
 * for 10-20 s (the steady-state stalls in
 * docs/bench/runs/performance-history.md).
 */
static unsigned int destage_pressure_blocks = 1024;
module_param(destage_pressure_blocks, uint, 0644);
MODULE_PARM_DESC(destage_pressure_blocks,
		 "log blocks a destage round takes at most under log pressure (default 1024)");
#define NXD_IDLE_MS		100

/*
 * The destager's share of the HDD's time at low_watermark while
 * foreground I/O uses the HDD (nxd_destage_pace()).
 */
static unsigned int destage_min_duty = 10;
module_param(destage_min_duty, uint, 0644);
MODULE_PARM_DESC(destage_min_duty,
		 "percent of the HDD's time the destager takes at low_watermark under foreground load, rising to 100 at high_watermark (default 10)");
#define NXD_PACE_STEP_MS	50

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
 * A round started only because the HDD was idle (below low_watermark)
 * stops writing as soon as foreground HDD I/O is in flight again.
 */
static bool destage_idle_yield = true;
module_param(destage_idle_yield, bool, 0644);
MODULE_PARM_DESC(destage_idle_yield,
		 "a round started while the HDD was idle stops at its next foreground I/O (default Y)");

/*
 * The sweep, while draining or while the volume is idle: a round takes
 * few of the oldest blocks (at most destage_sweep_oldest not yet CLEAN,
 * and their stripe neighbours),
 * then fills its buffer with whole stripes in address order from where
 * the last round stopped (nxd_destage_extend).  Adjacent stripes cost the
 * HDDs one positioning per run, not one per stripe; the tail moves once
 * the sweep has made the oldest segments CLEAN.
 */
static bool destage_sweep = true;
module_param(destage_sweep, bool, 0644);
MODULE_PARM_DESC(destage_sweep,
		 "while draining or idle, destage rounds sweep whole stripes by address (default Y)");
static unsigned int destage_sweep_oldest = 128;
module_param(destage_sweep_oldest, uint, 0644);
MODULE_PARM_DESC(destage_sweep_oldest,
		 "blocks not yet clean a sweeping round takes from the oldest segments (default 128)");

/*
 * Clean ahead under log pressure too, when stripe fill is on: a stripe's
 * neighbours then cost one full-stripe write, not one RAID6
 * read-modify-write each, and the rounds that reach their segments later
 * free them without writing.  The oldest part of such a round stops at an
 * eighth of destage_pressure_blocks blocks not yet CLEAN, so that the
 * neighbours of most of its stripes fit in the buffer; its CLEAN blocks
 * cost an SSD read only.
 */
static bool destage_pressure_ahead = true;
module_param(destage_pressure_ahead, bool, 0644);
MODULE_PARM_DESC(destage_pressure_ahead,
		 "clean ahead under log pressure too, when stripe fill is on (default Y)");

/*
 * A round that cleans ahead, neither under pressure nor sweeping, takes
 * at most destage_ahead_oldest blocks not yet CLEAN from the oldest
 * segments, so that the neighbours of its stripes fit in the buffer: a
 * round that took half the buffer of oldest blocks (1,833) had room for
 * the neighbours of some of their stripes only, and wrote 756 of them
 * alone, each a RAID6 read-modify-write
 * (docs/bench/runs/performance-history.md).  Smaller rounds between the
 * watermarks also fill fewer stripes that the writes still arriving dirty
 * again.  0: half the buffer.
 */
static unsigned int destage_ahead_oldest = 128;
module_param(destage_ahead_oldest, uint, 0644);
MODULE_PARM_DESC(destage_ahead_oldest,
		 "blocks not yet clean a round that cleans ahead takes from the oldest segments (default 128, 0: half the buffer)");

static bool nxd_hdd_idle(struct nxd_c *nc)
{
	return !atomic_read(&nc->hdd_fg_inflight) && !READ_ONCE(nc->fg_fenced) &&
	       time_after(jiffies, READ_ONCE(nc->hdd_fg_last) +
			  msecs_to_jiffies(NXD_IDLE_MS));
}

/* Neither the HDD nor the volume has seen foreground I/O for NXD_IDLE_MS. */
static bool nxd_volume_idle(struct nxd_c *nc)
{
	return nxd_hdd_idle(nc) &&
	       time_after(jiffies, READ_ONCE(nc->fg_last) + msecs_to_jiffies(NXD_IDLE_MS));
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
	/*
	 * Below low_watermark nothing presses: wait until the whole volume
	 * is idle, not only the HDD, so that a burst of small writes does not
	 * share the CPU and the SSD with a round (issue 16).
	 */
	return nxd_volume_idle(nc);
}

static void nxd_round_end_locked(struct nxd_c *nc, struct nxd_round *rd)
{
	if (nc->dround == rd) {
		/* map's fill look-ups read it under their shards */
		nxd_shards_lock(nc, NXD_SHARDS_ALL);
		nc->dround = NULL;
		nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	}
	/*
	 * The writes it fenced go now, and count as in flight.  They waited
	 * for the round, so the HDD was busy for them all along: the idle
	 * clock restarts here, else the next idle round starts before they
	 * reach the HDD (a stream behind rounds every 110 ms, issue 16).
	 */
	if (nc->fg_fenced)
		WRITE_ONCE(nc->hdd_fg_last, jiffies);
	WRITE_ONCE(nc->fg_fenced, false);
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
			nxd_mark_clean_locked(nc, e);
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
	u32 dirty = 0, max_dirty = U32_MAX;
	bool pressure = READ_ONCE(nc->log_full) ||
			nxd_log_used_pct(nc) >= READ_ONCE(nc->vol->tun.high_wm);
	bool pahead = pressure && READ_ONCE(destage_pressure_ahead) &&
		      nxd_fill_on(nc);
	bool ahead = READ_ONCE(destage_clean_ahead) &&
		     !atomic_read(&nc->degraded) && !nc->frozen_end &&
		     (!pressure || pahead || atomic_read(&nc->drain_req));
	int kept, r;

	rd->yield = false;
	rd->yielded = false;
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
	/* Idle, nothing arrives to dirty the swept stripes again. */
	rd->sweep = ahead && READ_ONCE(destage_sweep) &&
		    (atomic_read(&nc->drain_req) || (!pressure && nxd_volume_idle(nc)));
	if (pahead && ahead && !atomic_read(&nc->drain_req))
		max_dirty = max(READ_ONCE(destage_pressure_blocks) / 8, 1U);
	else if (rd->sweep)
		max_dirty = max(READ_ONCE(destage_sweep_oldest), 1U);
	else if (ahead && READ_ONCE(destage_ahead_oldest))
		max_dirty = READ_ONCE(destage_ahead_oldest);

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

		if (blocks + 1 + sd->nr_data > max_blocks ||
		    (i && dirty + nxd_segd_dirty(sd) > max_dirty))
			break;
		if (sd->live)
			blocks += 1 + sd->nr_data;
		dirty += nxd_segd_dirty(sd);
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
	/*
	 * Started only because the HDD was idle (nxd_destage_wanted), or
	 * sweeping only because the volume was: once I/O comes back, neither
	 * reason holds, and the round would keep the HDD from it.
	 */
	rd->yield = READ_ONCE(destage_idle_yield) && !pressure &&
		    !atomic_read(&nc->drain_req) &&
		    !atomic_read(&nc->degraded) && !nc->frozen_end &&
		    (rd->sweep || nxd_log_used_pct(nc) < READ_ONCE(nc->vol->tun.low_wm));
	/*
	 * A round that copies nothing needs no HDD flush: a copy it passes
	 * was superseded by a newer logged copy (the log owns its blocks),
	 * or killed by a discard's INVAL, logged after an HDD flush.
	 */
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
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
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
			nxd_mark_clean_locked(nc, e);	/* flushed above */
	}
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
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

/*
 * Whether a pause must end now: a drain, a degraded volume, and a full
 * log unless stream_share keeps part of the HDD from the destager then.
 */
static bool nxd_pace_over(struct nxd_c *nc)
{
	return kthread_should_stop() || atomic_read(&nc->drain_req) ||
	       atomic_read(&nc->degraded) ||
	       (READ_ONCE(nc->log_full) && !READ_ONCE(nc->vol->tun.stream_share));
}

/*
 * Pacing while foreground I/O uses the HDD: a pause after each round
 * gives the destager the share of the HDD's time that nxd_pace_duty()
 * gives the log's occupancy, from destage_min_duty at low_watermark to
 * 100 - stream_share % at high_watermark and above.  A light load keeps
 * most of the HDD while the log has room, and a sustained load the HDDs
 * can absorb settles the log below high_watermark.  With stream_share 0
 * a full log takes the whole HDD; otherwise the foreground keeps that
 * share and writes wait longer for room (docs/design.md, section 8).
 * The share is taken again every NXD_PACE_STEP_MS, so the pause ends
 * early when it changes or the HDD goes idle.
 */
static void nxd_destage_pace(struct nxd_c *nc, u32 busy_ms)
{
	struct nxd_tun *t = &nc->vol->tun;
	u32 slept = 0;

	while (!nxd_pace_over(nc) && !nxd_hdd_idle(nc)) {
		u32 share = min(READ_ONCE(t->stream_share), 90U);
		u32 duty = nxd_pace_duty(nxd_log_used_pct(nc), READ_ONCE(t->low_wm),
					 READ_ONCE(t->high_wm),
					 min(READ_ONCE(destage_min_duty), 100U) * 10,
					 1000 - share * 10);
		u32 pause = nxd_pace_pause_ms(busy_ms, duty);

		if (slept >= pause)
			break;
		pause = min_t(u32, pause - slept, NXD_PACE_STEP_MS);
		nxd_count(nc, NXD_CTR(destage_throttled_ms), pause);
		wait_event_interruptible_timeout(nc->dwq, nxd_pace_over(nc),
						 msecs_to_jiffies(pause));
		slept += pause;
	}
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
		atomic_set(&nc->stuck_err, r == -EAGAIN ? -EIO :
			   r == -EBUSY ? 0 : min(r, 0));
		wake_up_all(&nc->drain_wait);
		nxd_writer_wake(nc);
		if (r == -EBUSY)
			continue;	/* yielded to foreground HDD I/O */
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
		if (nxd_pace_over(nc))
			continue;
		/* Not on a full log (a stream_share may still pace it, below). */
		if (READ_ONCE(t->destage_rate) && !READ_ONCE(nc->log_full)) {
			u64 bytes = (u64)rd->nblk * NXD_BLOCK_SIZE;
			u64 ms = div64_u64(bytes * 1000, (u64)READ_ONCE(t->destage_rate) << 20);
			u64 spent = jiffies_to_msecs(jiffies - t0);

			if (ms > spent)
				nxd_destage_sleep(nc, ms - spent);
		}
		nxd_destage_pace(nc, jiffies_to_msecs(jiffies - t0));
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
 * raises the drain_done event.  The drain message (@for_message) runs
 * inside dm's live-table SRCU, which a suspend waits for with the
 * device's I/O held, so it gives up (-EBUSY) once a suspend begins.
 */
int nxd_drain(struct nxd_c *nc, bool for_message)
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
		if (!READ_ONCE(nc->running) ||
		    (for_message && READ_ONCE(nc->suspending))) {
			r = -EBUSY;
			break;
		}
		if (wait_event_interruptible_timeout(nc->drain_wait,
						     for_message && READ_ONCE(nc->suspending),
						     msecs_to_jiffies(50)) < 0) {
			r = -EINTR;
			break;
		}
	}
	atomic_dec(&nc->drain_req);
	if (!r)
		nxd_event(nc, NXD_EV_DRAIN_DONE);
	else if (for_message && READ_ONCE(nc->suspending))
		DMINFO("%s: drain stopped: the device is being suspended",
		       dm_table_device_name(nc->ti->table));
	return r;
}
