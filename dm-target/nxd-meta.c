// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd metadata: superblock and HDD label checks at table load, format,
 * and log recovery (rebuilding the index) before the table goes live.
 *
 * Recovery walks the ring from the persisted tail.  A segment is accepted
 * only if its header checksum, volume, sequence (exactly the next one),
 * position (exactly where the previous one ended) and generation are right,
 * and, after an unclean stop, its data checksums too.  The first segment
 * that fails ends the log.  The generation rule (nxd_seg_gen_ok) keeps
 * stale segments written before an earlier crash from being replayed.
 *
 * After an SSD write failure the log is frozen: the HDD label records the
 * window [tail, end) that may still be replayed, and the tail the
 * destager reaches while the SSD takes no superblock (docs/design.md,
 * degraded mode).
 */
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/random.h>
#include <linux/ktime.h>
#include <linux/dm-ioctl.h>
#include <linux/mm.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd recovery"

#define NXD_ERR_NOT_LOG \
	"SSD holds data that is not an nxd log: add 'format' to overwrite it"
#define NXD_ERR_HDD_LABELLED \
	"HDD belongs to an nxd volume but the SSD has no log: add 'format'"
#define NXD_ERR_SB_CORRUPT \
	"SSD superblock corrupt in both copies: 'format' reinitialises it"
#define NXD_ERR_NEWER_FORMAT \
	"nxd metadata of a format this module does not know: load a newer dm-nxd, do not 'format'"
#define NXD_ERR_PAST_DATA_AREA \
	"Volume larger than the HDD less its label and data offset (1 MiB, or a stripe if larger)"
#define NXD_ERR_LOG_ABANDONED \
	"SSD log abandoned (HDD label): add 'accept_log_loss' to start a new log without it"

/*
 * The dm name and the tunables go into every superblock write: the next
 * activation starts from them (nxd_tun_merge).  A table not yet resumed
 * stores its own options: they take over at its first resume.  A tunable
 * changed in sysfs is stored by the next write (destage round, suspend,
 * removal, or the save_tunables message that nxdctl config sends).
 *
 * The name is the ioctl interface's (dm_device_name() is "MAJ:MIN").  At
 * removal the device has left the name hash before the last postsuspend:
 * the name of the previous write stays.
 */
static void nxd_sb_fill_meta(struct nxd_c *nc)
{
	struct nxd_sb_info *sb = &nc->sb;
	char name[DM_NAME_LEN];
	struct nxd_tun t;

	if (READ_ONCE(nc->resumed))
		nxd_tun_get(nc->vol, &t);
	else
		t = nc->opt;
	if (!dm_copy_name_and_uuid(dm_table_get_md(nc->ti->table), name, NULL))
		strscpy_pad(sb->name, name, sizeof(sb->name));
	sb->tun_valid = true;
	sb->tun = t;
}

/*
 * PREFLUSH: a tail that moves past a segment whose blocks newer segments
 * superseded must not be durable before those segments are, or a crash
 * loses both copies (crash campaign, 6.1, seed 507 cut 7).
 */
static int nxd_sb_write_locked(struct nxd_c *nc)
{
	u64 seq = nxd_ssd_flush_start(nc);
	int r;

	nc->sb.sb_seq++;
	nxd_sb_fill_meta(nc);
	nxd_sb_encode(&nc->sb, nc->sb_buf);
	/* Alternate copies so a torn write leaves the other one intact. */
	r = nxd_ssd_io(nc, REQ_OP_WRITE | REQ_SYNC | REQ_PREFLUSH | REQ_FUA,
		       nc->sb.sb_seq & 1, 1, nc->sb_buf);
	nxd_ssd_flush_done(nc, seq, r);
	return r;
}

/* A failed superblock write degrades the volume and freezes the log. */
static int nxd_sb_failed(struct nxd_c *nc, int r)
{
	if (r) {
		nxd_ssd_failed(nc, r, "superblock write");
		nxd_log_freeze(nc);
	}
	return r;
}

int nxd_sb_commit(struct nxd_c *nc, u32 flags, u64 tail_pos, u64 tail_seq)
{
	int r;

	mutex_lock(&nc->sb_lock);
	nc->sb.tail_pos = tail_pos;
	nc->sb.tail_seq = tail_seq;
	nc->sb.flags = flags;
	spin_lock(&nc->lock);
	nc->sb.head_pos = nxd_next_seg_pos(nc->ring.ring_blocks, nc->ring.head);
	nc->sb.head_seq = nc->ring.next_seq;
	spin_unlock(&nc->lock);
	r = nxd_sb_write_locked(nc);
	mutex_unlock(&nc->sb_lock);
	return nxd_sb_failed(nc, r);
}

int nxd_sb_write(struct nxd_c *nc, bool clean)
{
	u64 pos, seq;

	spin_lock(&nc->lock);
	nxd_ring_tail(&nc->ring, &pos, &seq);
	spin_unlock(&nc->lock);
	return nxd_sb_commit(nc, clean ? NXD_SB_CLEAN : 0, pos, seq);
}

/*
 * Store the tunables now (message save_tunables, after a sysfs change):
 * the rest of the superblock as last committed, so the tail it records
 * does not move.
 */
int nxd_sb_save(struct nxd_c *nc)
{
	int r;

	mutex_lock(&nc->sb_lock);
	r = nxd_sb_write_locked(nc);
	mutex_unlock(&nc->sb_lock);
	return nxd_sb_failed(nc, r);
}

/*
 * Start a new generation: segments after ours from earlier runs are stale
 * from now on (nxd_seg_gen_ok).  At activation after recovery, and at each
 * later resume.  A failed write degrades the volume as nxd_sb_commit().
 */
int nxd_sb_new_gen(struct nxd_c *nc)
{
	mutex_lock(&nc->sb_lock);
	nc->sb.gen++;
	nc->sb.gen_start_seq = nc->ring.next_seq;
	mutex_unlock(&nc->sb_lock);
	return nxd_sb_write(nc, false);
}

/*
 * The owner field belongs to nxdctl, which may rewrite it while the
 * volume is active: take the one on disk at @where if that is still this
 * volume's label, else keep the copy read at load.
 */
static void nxd_label_owner_fetch(struct nxd_c *nc, sector_t where)
{
	struct nxd_label_info l;

	if (nxd_hdd_io(nc, REQ_OP_READ, where, nc->sb_buf) ||
	    nxd_label_decode(nc->sb_buf, &l) ||
	    memcmp(l.vol_uuid, nc->sb.vol_uuid, 16) ||
	    memcmp(l.hdd_uuid, nc->sb.hdd_uuid, 16))
		return;
	memcpy(nc->owner, l.owner, sizeof(nc->owner));
}

static int nxd_label_put(struct nxd_c *nc, const struct nxd_label_info *in)
{
	struct nxd_label_info l = *in;

	l.data_offset = nc->sb.data_offset;
	nxd_label_encode(&l, nc->sb_buf);
	/*
	 * A frozen window's tail passes copies the HDD now holds in their
	 * place: those HDD writes durable first.
	 */
	return nxd_hdd_io(nc, REQ_OP_WRITE | REQ_SYNC | REQ_FUA |
			  (l.flags & NXD_LABEL_LOG_FROZEN ? REQ_PREFLUSH : 0),
			  nc->sb.hdd_label_sector, nc->sb_buf);
}

/*
 * Write the HDD label of the volume in nc->sb, plain or FROZEN with its
 * replay window, with the owner in nc->owner.  Under sb_lock or in ctr.
 */
static int __nxd_label_write(struct nxd_c *nc, u32 flags, u64 tail_pos,
			     u64 tail_seq)
{
	struct nxd_label_info l = { };

	memcpy(l.owner, nc->owner, sizeof(l.owner));
	memcpy(l.vol_uuid, nc->sb.vol_uuid, 16);
	memcpy(l.hdd_uuid, nc->sb.hdd_uuid, 16);
	l.hdd_sectors = nc->sb.hdd_sectors;
	l.flags = flags;
	if (flags & NXD_LABEL_LOG_FROZEN) {
		l.frozen_end_seq = nc->frozen_end;
		l.frozen_tail_pos = tail_pos;
		l.frozen_tail_seq = tail_seq;
	}
	return nxd_label_put(nc, &l);
}

/* Rewrite the label in place: read-modify-write, the owner kept. */
static int nxd_label_write(struct nxd_c *nc, u32 flags, u64 tail_pos,
			   u64 tail_seq)
{
	nxd_label_owner_fetch(nc, nc->sb.hdd_label_sector);
	return __nxd_label_write(nc, flags, tail_pos, tail_seq);
}

static int nxd_label_read(struct nxd_c *nc, sector_t where,
			  struct nxd_label_info *l)
{
	int r = nxd_hdd_io(nc, REQ_OP_READ, where, nc->sb_buf);

	return r ? r : nxd_label_decode(nc->sb_buf, l);
}

/*
 * The SSD failed a write: freeze the log where it ends now.  Whatever it
 * holds stays valid and is destaged from the SSD; nothing more is logged.
 * The HDD label records the window, so that a failed segment that landed
 * all the same is never replayed over newer HDD data, and so that the
 * next load needs no superblock write to know it.  Until it is durable,
 * nothing that depends on it may be acknowledged.
 */
int nxd_log_freeze(struct nxd_c *nc)
{
	u64 pos, seq;
	int r = 0;

	mutex_lock(&nc->sb_lock);
	if (nc->frozen)
		goto out;
	spin_lock(&nc->lock);
	/*
	 * The writer commits no segment past this; uncommitted ones (direct
	 * segments filling, a batch in flight) are void from now on.
	 */
	if (!nc->frozen_end) {
		nc->frozen_end = nc->commit_seq;
		nc->frozen_end_pos = nc->commit_seq < nc->ring.next_seq ?
			nxd_ring_at(&nc->ring, nc->commit_seq - nc->ring.first_seq)->pos :
			nxd_next_seg_pos(nc->ring.ring_blocks, nc->ring.head);
	}
	nxd_ring_tail(&nc->ring, &pos, &seq);
	spin_unlock(&nc->lock);
	r = nxd_label_write(nc, NXD_LABEL_LOG_FROZEN, pos, seq);
	if (!r) {
		WRITE_ONCE(nc->frozen, true);
		DMERR("%s: SSD log frozen at segment %llu (HDD label), %llu to destage",
		      dm_table_device_name(nc->ti->table), nc->frozen_end,
		      nc->frozen_end - seq);
	} else {
		DMERR("%s: cannot freeze the SSD log: HDD label write failed (%d)",
		      dm_table_device_name(nc->ti->table), r);
	}
out:
	mutex_unlock(&nc->sb_lock);
	return r;
}

/* Frozen: the destager moved the tail; the SSD cannot record it. */
int nxd_log_frozen_tail(struct nxd_c *nc, u64 tail_pos, u64 tail_seq)
{
	int r = nxd_log_freeze(nc);

	if (r)
		return r;
	/*
	 * Past the window's end lie void segments (acknowledged direct
	 * writes never committed): the window is empty once they are on the
	 * HDD, and a label's tail never passes its end.
	 */
	if (tail_seq > nc->frozen_end) {
		tail_seq = nc->frozen_end;
		tail_pos = nc->frozen_end_pos;
	}
	/*
	 * The superseding copies are durable: the destager passes only
	 * segments whose newer copies are (nxd_ring_safe_prefix).
	 */
	mutex_lock(&nc->sb_lock);
	/* Abandoned: the label says never replay; nothing may undo that. */
	if (!nc->abandoned)
		r = nxd_label_write(nc, NXD_LABEL_LOG_FROZEN, tail_pos, tail_seq);
	mutex_unlock(&nc->sb_lock);
	return r;
}

/*
 * Has an HDD write, not yet acknowledged (parked), already put newer data
 * over all of block @b?  Under nc->lock.
 */
static bool nxd_block_rewritten_locked(struct nxd_c *nc, u64 b)
{
	struct nxd_inval *op;

	list_for_each_entry(op, &nc->invals, node)
		if (READ_ONCE(op->hdd_state) == NXD_HDD_OK &&
		    op->full_first <= b && b <= op->full_last)
			return true;
	return false;
}

/*
 * The logged blocks the HDD does not hold (index entries not CLEAN, and
 * not wholly rewritten on the HDD since), as sorted ranges: what dropping
 * the log would lose.  A block only partly logged counts whole.
 */
int nxd_log_at_risk(struct nxd_c *nc, struct nxd_risk *rk)
{
	struct nxd_ient *e;
	u64 *blk, cap, n = 0, i;

	spin_lock(&nc->lock);
	cap = nc->ix.count;
	spin_unlock(&nc->lock);
	blk = kvmalloc_array(max_t(u64, cap, 1), sizeof(*blk), GFP_KERNEL);
	if (!blk)
		return -ENOMEM;
	spin_lock(&nc->lock);
	/* In address order, so the ranges need no sort. */
	for (e = nxd_index_first(&nc->ix, 0, NXD_IE_EMPTY - 1); e;
	     e = nxd_index_next(e, NXD_IE_EMPTY - 1)) {
		if (n >= cap)
			break;
		if (e->flags & NXD_IE_CLEAN)
			continue;
		if (!list_empty(&nc->invals) &&
		    nxd_block_rewritten_locked(nc, e->block))
			continue;
		blk[n++] = e->block;
	}
	spin_unlock(&nc->lock);
	rk->blocks = n;
	rk->ranges = 0;
	for (i = 0; i < n; i++) {
		if (i && blk[i] == blk[i - 1] + 1) {
			if (rk->ranges <= NXD_LABEL_LOST_MAX)
				rk->r[rk->ranges - 1][1]++;
			continue;
		}
		if (rk->ranges < NXD_LABEL_LOST_MAX) {
			rk->r[rk->ranges][0] = blk[i];
			rk->r[rk->ranges][1] = 1;
		}
		if (rk->ranges < U32_MAX)
			rk->ranges++;
	}
	rk->listed = min_t(u32, rk->ranges, NXD_LABEL_LOST_MAX);
	kvfree(blk);
	return 0;
}

/*
 * The SSD is dead: give its log up online (the abandon_log message).  The
 * label says ABANDONED first, durably, with what is given up: the log is
 * then never replayed without 'accept_log_loss', so nothing written to the
 * HDD from now on can be overwritten by an older logged copy.  Then the
 * index and the ring are emptied: reads and writes all go to the HDD, and
 * what waited for the destager (parked writes, held bios, flushes waiting
 * for the log to empty) goes on.  The volume stays degraded: nothing is
 * logged again in this table.  Held off while a destage round runs.
 */
int nxd_log_abandon(struct nxd_c *nc, struct nxd_risk *rk)
{
	const char *name = dm_table_device_name(nc->ti->table);
	struct nxd_label_info l = { };
	bool ready;
	u32 i;
	int r;

	if (!atomic_read(&nc->degraded)) {
		DMERR("%s: abandon_log refused: the SSD has not failed (drain instead)",
		      name);
		return -EINVAL;
	}
	mutex_lock(&nc->round_lock);
	if (!READ_ONCE(nc->running)) {
		r = -EBUSY;
		goto out;
	}
	/* The freeze, and nxd_fast_fail() indexing the void blocks, are done. */
	spin_lock(&nc->lock);
	ready = nc->frozen_end && !nc->fs_count;
	spin_unlock(&nc->lock);
	if (!ready || !READ_ONCE(nc->frozen)) {
		DMERR("%s: abandon_log: the log is not frozen yet, try again", name);
		r = -EAGAIN;
		goto out;
	}
	r = nxd_log_at_risk(nc, rk);
	if (r)
		goto out;
	mutex_lock(&nc->sb_lock);
	if (nc->abandoned) {
		/* Done before: the label lists what it gave up. */
		mutex_unlock(&nc->sb_lock);
		rk->blocks = READ_ONCE(nc->abandoned_blocks);
		rk->ranges = 0;
		rk->listed = 0;
		goto out;
	}
	nxd_label_owner_fetch(nc, nc->sb.hdd_label_sector);
	memcpy(l.owner, nc->owner, sizeof(l.owner));
	memcpy(l.vol_uuid, nc->sb.vol_uuid, 16);
	memcpy(l.hdd_uuid, nc->sb.hdd_uuid, 16);
	l.hdd_sectors = nc->sb.hdd_sectors;
	l.flags = NXD_LABEL_LOG_ABANDONED;
	l.abandoned_gen = nc->sb.gen;
	l.lost_blocks = rk->blocks;
	l.lost_ranges = rk->ranges;
	l.lost_listed = rk->listed;
	l.data_offset = nc->sb.data_offset;
	nxd_label_encode(&l, nc->sb_buf);
	for (i = 0; i < rk->listed; i++)
		nxd_label_set_lost(nc->sb_buf, i, rk->r[i][0], rk->r[i][1]);
	nxd_label_seal(nc->sb_buf);
	/* The parked HDD writes durable too before they are acknowledged. */
	r = nxd_hdd_io(nc, REQ_OP_WRITE | REQ_SYNC | REQ_PREFLUSH | REQ_FUA,
		       nc->sb.hdd_label_sector, nc->sb_buf);
	if (!r) {
		nc->abandoned = true;
		WRITE_ONCE(nc->abandoned_blocks, rk->blocks);
	}
	mutex_unlock(&nc->sb_lock);
	if (r) {
		DMERR("%s: abandon_log: HDD label write failed (%d): nothing changed",
		      name, r);
		goto out;
	}
	spin_lock(&nc->lock);
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
	nxd_index_clear(&nc->ix);
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	nxd_ring_reset(&nc->ring, nc->ring.head, nc->ring.next_seq);
	nc->commit_seq = nc->ring.next_seq;
	WRITE_ONCE(nc->void_on_hdd, true);
	spin_unlock(&nc->lock);
	/* The loss is known and accepted: flushes are not failed for it. */
	atomic_set(&nc->acked_lost, 0);
	DMERR("%s: SSD log abandoned (generation %llu): %llu blocks in %u ranges lost",
	      name, nc->sb.gen, rk->blocks, rk->ranges);
	for (i = 0; i < rk->listed; i++)
		DMERR_LIMIT("%s: lost sectors %llu-%llu", name, rk->r[i][0] << 3,
			    ((rk->r[i][0] + rk->r[i][1]) << 3) - 1);
out:
	mutex_unlock(&nc->round_lock);
	if (!r) {
		wake_up_all(&nc->ewq);
		atomic_set(&nc->kick, 1);
		nxd_writer_wake(nc);
		wake_up_all(&nc->drain_wait);
		nxd_destager_wake(nc);
	}
	return r;
}

static int nxd_read_sbs(struct nxd_c *nc, struct nxd_sb_info sbs[2], int res[2],
			bool *blank)
{
	int i, r;

	*blank = true;
	for (i = 0; i < 2; i++) {
		r = nxd_ssd_io(nc, REQ_OP_READ, i, 1, nc->sb_buf);
		if (r)
			return r;
		res[i] = nxd_sb_decode(nc->sb_buf, nc->ssd_blocks, &sbs[i]);
		if (memchr_inv(nc->sb_buf, 0, NXD_BLOCK_SIZE))
			*blank = false;
	}
	return 0;
}

/*
 * Where a label of the HDD may be: block 0 (version 2) and the end area
 * (version 1).  Returns 0 and the label if either holds a valid one
 * (block 0 first), else the read error or a decode result.
 */
static int nxd_label_find(struct nxd_c *nc, struct nxd_label_info *l,
			  sector_t *where)
{
	sector_t at[2] = { 0, nxd_hdd_data_sectors(nc->hdd_sectors) };
	int i, r = NXD_ENOTNXD;

	for (i = 0; i < 2; i++) {
		r = nxd_label_read(nc, at[i], l);
		if (!r) {
			*where = at[i];
			return 0;
		}
		if (r < 0 && r != -EBADMSG && r != -EINVAL &&
		    r != -EPROTONOSUPPORT)
			return r;
	}
	return r;
}

/*
 * The data area of a new log's volume.  An HDD that has a label (a new
 * SSD for it: attach, replace-ssd) keeps its layout, so that its data
 * stay where they are; else the version 2 layout, past a stripe-aligned
 * offset.
 */
static void nxd_format_layout(struct nxd_c *nc, struct nxd_sb_info *sb)
{
	struct nxd_label_info l;
	sector_t where;
	bool v1 = nxd_fault(NXD_FAULT_FORMAT_V1);

	sb->hdd_sectors = nc->hdd_sectors;
	if (!nxd_label_find(nc, &l, &where)) {
		v1 = !l.data_offset;
		sb->data_offset = l.data_offset;
	} else if (!v1) {
		sb->data_offset = nxd_hdd_data_offset(nc->hdd_io_opt);
	}
	if (v1) {
		sb->data_sectors = nxd_hdd_data_sectors(nc->hdd_sectors);
		sb->hdd_label_sector = sb->data_sectors;
		return;
	}
	sb->data_sectors = nxd_layout_data_sectors(nc->hdd_sectors,
						   sb->data_offset);
	sb->hdd_label_sector = 0;
}

static int nxd_format(struct nxd_c *nc)
{
	struct nxd_sb_info *sb = &nc->sb;
	struct nxd_label_info l;
	sector_t old = 0;
	bool found;
	int r;

	/*
	 * The owner belongs to the HDD: a new log for it (attach,
	 * replace-ssd) keeps the one of the label it replaces, if any.
	 */
	memset(nc->owner, 0, sizeof(nc->owner));
	found = !nxd_label_find(nc, &l, &old);
	if (found)
		memcpy(nc->owner, l.owner, sizeof(nc->owner));
	memset(sb, 0, sizeof(*sb));
	generate_random_uuid(sb->vol_uuid);
	generate_random_uuid(sb->hdd_uuid);
	nxd_format_layout(nc, sb);
	sb->ring_start = NXD_RING_START;
	sb->ring_blocks = min_t(u64, nc->ssd_blocks - NXD_RING_START, NXD_MAX_RING_BLOCKS);
	sb->tail_pos = 0;
	sb->tail_seq = 1;
	sb->gen = 1;
	sb->gen_start_seq = 1;
	sb->head_pos = 0;
	sb->head_seq = 1;

	r = __nxd_label_write(nc, 0, 0, 0);
	if (r)
		return r;
	/* An older label elsewhere would name a volume that is gone. */
	if (found && old != sb->hdd_label_sector) {
		memset(nc->sb_buf, 0, NXD_BLOCK_SIZE);
		r = nxd_hdd_io(nc, REQ_OP_WRITE | REQ_SYNC, old, nc->sb_buf);
		if (r)
			return r;
	}
	/* Both copies, so neither holds a previous volume's superblock. */
	r = nxd_sb_write_locked(nc);
	if (!r)
		r = nxd_sb_write_locked(nc);
	if (!r)
		DMINFO("%s: formatted volume %pU: log %llu blocks, data %llu sectors at %llu",
		       dm_table_device_name(nc->ti->table), sb->vol_uuid,
		       sb->ring_blocks, sb->data_sectors, sb->data_offset);
	if (!r && nc->ssd_blocks - NXD_RING_START > sb->ring_blocks)
		DMINFO("%s: the log uses %llu of the SSD's %llu blocks (the largest log)",
		       dm_table_device_name(nc->ti->table), sb->ring_blocks,
		       nc->ssd_blocks);
	return r;
}

/*
 * A format stores the table's tunables (defaults for the rest): a set the
 * constructor would refuse afterwards must not have written anything.
 */
static int nxd_format_checked(struct nxd_c *nc)
{
	struct nxd_sb_info sb = { };
	int r;

	if (!nxd_tun_valid(&nc->opt)) {
		nc->ti->error = (char *)nxd_tun_pair_err(&nc->opt);
		return -EINVAL;
	}
	nxd_format_layout(nc, &sb);
	if (nc->ti->len > sb.data_sectors) {
		nc->ti->error = sb.data_offset ? NXD_ERR_PAST_DATA_AREA :
			"Volume larger than the HDD less its 1 MiB label area";
		DMERR("format: %llu sectors asked, the data area has %llu from HDD sector %llu",
		      (u64)nc->ti->len, sb.data_sectors, sb.data_offset);
		return -EINVAL;
	}
	r = nxd_format(nc);
	if (r)
		nc->ti->error = "Format failed: I/O error";
	return r;
}

/* Table-load checks: is this SSD log ours, for this HDD?  Formats if asked. */
int nxd_meta_check(struct nxd_c *nc, bool vol_active)
{
	struct dm_target *ti = nc->ti;
	struct nxd_sb_info sbs[2];
	struct nxd_label_info l;
	int res[2], pick, r;
	bool blank;

	if (nc->opt_format) {
		if (vol_active) {
			ti->error = "Refusing to format the log of an active volume";
			return -EBUSY;
		}
		return nxd_format_checked(nc);
	}
	r = nxd_read_sbs(nc, sbs, res, &blank);
	if (r) {
		ti->error = "Cannot read the SSD superblock";
		return r;
	}
	pick = nxd_sb_pick(res, sbs);
	if (pick == NXD_SB_NONE) {
		sector_t where;

		if (!blank) {
			ti->error = NXD_ERR_NOT_LOG;
			return -EINVAL;
		}
		r = nxd_label_find(nc, &l, &where);
		if (r < 0 && r != -EBADMSG && r != -EINVAL &&
		    r != -EPROTONOSUPPORT) {
			ti->error = "Cannot read the HDD label area";
			return r;
		}
		if (!r) {
			ti->error = NXD_ERR_HDD_LABELLED;
			return -EINVAL;
		}
		return nxd_format_checked(nc);
	}
	if (pick < 0) {
		/* A newer module's log: a 'format' would throw it away. */
		if (res[0] == -EPROTONOSUPPORT || res[1] == -EPROTONOSUPPORT)
			ti->error = NXD_ERR_NEWER_FORMAT;
		else
			ti->error = NXD_ERR_SB_CORRUPT;
		return -EINVAL;
	}
	nc->sb = sbs[pick];
	if (nc->sb.hdd_label_sector + NXD_SECTORS_PER_BLOCK > nc->hdd_sectors ||
	    nc->sb.data_offset + nc->sb.data_sectors > nc->hdd_sectors) {
		ti->error = "HDD is smaller than this SSD log's volume: wrong HDD?";
		return -EINVAL;
	}
	r = nxd_hdd_io(nc, REQ_OP_READ, nc->sb.hdd_label_sector, nc->sb_buf);
	if (r) {
		ti->error = "Cannot read the HDD label";
		return r;
	}
	r = nxd_label_decode(nc->sb_buf, &l);
	if (r == -EPROTONOSUPPORT) {
		ti->error = NXD_ERR_NEWER_FORMAT;
		return -EINVAL;
	}
	if (r) {
		ti->error = "HDD has no nxd label: this SSD log belongs to a different HDD";
		return -EINVAL;
	}
	if (memcmp(l.vol_uuid, nc->sb.vol_uuid, 16) ||
	    memcmp(l.hdd_uuid, nc->sb.hdd_uuid, 16)) {
		ti->error = "SSD log and HDD label belong to different volumes";
		DMERR("SSD log is volume %pU, HDD label is volume %pU",
		      nc->sb.vol_uuid, l.vol_uuid);
		return -EINVAL;
	}
	if (l.data_offset != nc->sb.data_offset) {
		ti->error = "SSD log and HDD label disagree on the data offset";
		return -EINVAL;
	}
	if (ti->len > nxd_layout_data_sectors(nc->hdd_sectors, nc->sb.data_offset)) {
		ti->error = NXD_ERR_PAST_DATA_AREA;
		return -EINVAL;
	}
	memcpy(nc->owner, l.owner, sizeof(nc->owner));
	if ((l.flags & NXD_LABEL_LOG_ABANDONED) && !nc->opt_accept_loss) {
		ti->error = NXD_ERR_LOG_ABANDONED;
		DMERR("volume %pU: log of generation %llu abandoned", l.vol_uuid,
		      l.abandoned_gen);
		return -EINVAL;
	}
	/* Longer than formatted: ctr checked that the HDD now has the room. */
	if (ti->len > nc->sb.data_sectors)
		nc->grow_to = nxd_layout_data_sectors(nc->hdd_sectors,
						      nc->sb.data_offset);
	return 0;
}

/*
 * The HDD grew and the table asks for more: write the label at the HDD's
 * new end, then the superblock that points at it.  A crash in between
 * leaves the old superblock and the old label, both intact; the next load
 * of the longer table grows again.  Runs at preresume, after the previous
 * table's last superblock write; its failure fails the resume.
 */
static int nxd_grow(struct nxd_c *nc, const struct nxd_label_info *old)
{
	const char *name = dm_table_device_name(nc->ti->table);
	sector_t old_label = nc->sb.hdd_label_sector;
	u64 old_data = nc->sb.data_sectors;
	struct nxd_label_info l = *old;
	int r;

	mutex_lock(&nc->sb_lock);
	/* The new label, at the new end, keeps the old one's owner. */
	nxd_label_owner_fetch(nc, old_label);
	nc->sb.hdd_sectors = nc->hdd_sectors;
	nc->sb.data_sectors = nc->grow_to;
	/* Version 2: the label stays in block 0, rewritten in place. */
	if (!nc->sb.data_offset)
		nc->sb.hdd_label_sector = nc->grow_to;
	/*
	 * The old label's FROZEN window or ABANDONED flag, and its owner, move
	 * with it: until the new generation is written, a crash must find
	 * them there.
	 */
	l.hdd_sectors = nc->hdd_sectors;
	memcpy(l.owner, nc->owner, sizeof(l.owner));
	r = nxd_label_put(nc, &l);
	if (r) {
		DMERR("%s: grow: cannot write the HDD label at %llu: %d", name,
		      (u64)nc->grow_to, r);
		goto out;
	}
	r = nxd_sb_write_locked(nc);
	if (r) {
		DMERR("%s: grow: cannot write the SSD superblock: %d", name, r);
		goto out;
	}
	/* Now data: a stale copy there would confuse label probes. */
	memset(nc->sb_buf, 0, NXD_BLOCK_SIZE);
	if (old_label != nc->sb.hdd_label_sector &&
	    nxd_hdd_io(nc, REQ_OP_WRITE | REQ_SYNC, old_label, nc->sb_buf))
		DMWARN("%s: grow: cannot clear the old HDD label at %llu", name,
		       (u64)old_label);
	DMINFO("%s: grew volume %pU from %llu to %llu data sectors", name,
	       nc->sb.vol_uuid, old_data, nc->sb.data_sectors);
out:
	mutex_unlock(&nc->sb_lock);
	return r;
}

/* Check every data block of a segment against its record checksum. */
static bool nxd_seg_data_ok(void *hdr, const struct nxd_seg_info *si)
{
	u32 i, d = 0;

	for (i = 0; i < si->nr_recs; i++) {
		struct nxd_rec rec;

		nxd_seg_rec(hdr, i, &rec);
		if (rec.type != NXD_REC_DATA)
			continue;
		if (nxd_block_crc(hdr + (size_t)(1 + d) * NXD_BLOCK_SIZE) != rec.val)
			return false;
		d++;
	}
	return true;
}

static void nxd_seg_apply(struct nxd_c *nc, void *hdr, const struct nxd_seg_info *si)
{
	struct nxd_ient old;
	u32 i, d = 0;
	int r;

	/* Before any map: the shards only keep the locking rule whole. */
	spin_lock(&nc->lock);
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
	for (i = 0; i < si->nr_recs; i++) {
		struct nxd_rec rec;

		nxd_seg_rec(hdr, i, &rec);
		if (rec.type == NXD_REC_INVAL)
			nxd_inval_range_locked(nc, rec.block, rec.block + rec.val - 1);
	}
	nxd_ring_push(&nc->ring, si->pos, si->nr_data, si->nr_data);
	nc->commit_seq = nc->ring.next_seq;
	for (i = 0; i < si->nr_recs; i++) {
		struct nxd_rec rec;
		struct nxd_ient *e;

		nxd_seg_rec(hdr, i, &rec);
		if (rec.type != NXD_REC_DATA)
			continue;
		r = nxd_index_set(&nc->ix, rec.block, si->pos + 1 + d, rec.mask,
				  &old);
		if (r == 1)
			nxd_seg_supersede_locked(nc, &old, si->seq);
		/* A slot holds one block: another there is a bug of ours. */
		e = !WARN_ON_ONCE(r < 0) ? nxd_index_find(&nc->ix, rec.block) : NULL;
		if (e && (si->flags & NXD_SEG_ORDERED))
			e->flags |= NXD_IE_NOCRC;
		else if (e)
			e->rsvd = nxd_crc16(rec.val);
		d++;
	}
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	spin_unlock(&nc->lock);
}

/*
 * Rebuild the index from the log; runs at the first preresume, after the
 * previous table's postsuspend, so the label is read again here: that
 * table may have frozen the log after our constructor looked.  Runs in a
 * noio scope with the device suspended: nothing is allocated here.
 */
int nxd_meta_load(struct nxd_c *nc)
{
	const char *name = dm_table_device_name(nc->ti->table);
	struct nxd_label_info l;
	struct nxd_sb_info sbs[2];
	u64 t0 = ktime_get_ns(), pos, seq, end, rb;
	int res[2], pick, r;
	bool blank, clean, torn = false, was_frozen, drop_log;

	r = nxd_read_sbs(nc, sbs, res, &blank);
	if (r)
		return r;
	pick = nxd_sb_pick(res, sbs);
	if (pick < 0 || pick == NXD_SB_NONE ||
	    memcmp(sbs[pick].vol_uuid, nc->sb.vol_uuid, 16) ||
	    sbs[pick].ring_blocks != nc->ring.ring_blocks) {
		DMERR("%s: superblock changed under the table", name);
		return -EINVAL;
	}
	r = nxd_label_read(nc, sbs[pick].hdd_label_sector, &l);
	if (r || memcmp(l.vol_uuid, sbs[pick].vol_uuid, 16)) {
		DMERR("%s: HDD label unreadable or changed under the table (%d)", name, r);
		return r < 0 ? r : -EINVAL;
	}
	drop_log = l.flags & NXD_LABEL_LOG_ABANDONED;
	if (drop_log && !nc->opt_accept_loss) {
		DMERR("%s: %s", name, NXD_ERR_LOG_ABANDONED);
		return -EINVAL;
	}
	was_frozen = l.flags & (NXD_LABEL_LOG_FROZEN | NXD_LABEL_LOG_ABANDONED);
	mutex_lock(&nc->sb_lock);
	nc->sb = sbs[pick];
	memcpy(nc->owner, l.owner, sizeof(nc->owner));
	mutex_unlock(&nc->sb_lock);
	clean = (nc->sb.flags & NXD_SB_CLEAN) && !was_frozen;
	rb = nc->sb.ring_blocks;
	nxd_replay_window(&nc->sb, &l, &pos, &seq, &end);

	/* Start from scratch: a failed earlier attempt may have left entries. */
	spin_lock(&nc->lock);
	nxd_shards_lock(nc, NXD_SHARDS_ALL);
	nxd_index_clear(&nc->ix);
	nxd_shards_unlock(nc, NXD_SHARDS_ALL);
	nxd_ring_reset(&nc->ring, pos, seq);
	nc->commit_seq = seq;
	spin_unlock(&nc->lock);
	nc->rec_segments = 0;
	nc->rec_blocks = 0;
	for (;;) {
		struct nxd_seg_info si;
		void *hdr = nc->dbuf;
		u64 p;

		if (drop_log || seq >= end || (clean && seq == nc->sb.head_seq))
			break;
		r = nxd_ssd_io(nc, REQ_OP_READ, nc->sb.ring_start + pos, 1, hdr);
		if (!r) {
			if (nxd_seg_decode(hdr, nc->sb.vol_uuid, rb,
					   nc->sb.data_sectors >> 3, &si) ||
			    si.seq != seq || si.pos != pos ||
			    !nxd_seg_gen_ok(&nc->sb, si.seq, si.gen) ||
			    nxd_ring_reserve(&nc->ring, si.nr_data, &p) || p != pos) {
				torn = true;
				break;
			}
			/* ORDERED: the header landed after its data. */
			if (!clean && si.nr_data && !(si.flags & NXD_SEG_ORDERED))
				r = nxd_ssd_io(nc, REQ_OP_READ,
					       nc->sb.ring_start + pos + 1,
					       si.nr_data, hdr + NXD_BLOCK_SIZE);
		}
		if (r) {
			/* Name the range at risk: the admin decides. */
			DMERR("%s: SSD log unreadable at seg %llu (%d): segs %llu-%llu at risk",
			      name, seq, r, seq,
			      end == ~0ULL ? nc->sb.head_seq : end - 1);
			if (!nc->opt_accept_loss) {
				DMERR("%s: reload with 'accept_log_loss' to continue without them",
				      name);
				return r;
			}
			DMERR("%s: 'accept_log_loss': continuing without them", name);
			break;
		}
		if (!clean && !(si.flags & NXD_SEG_ORDERED) &&
		    !nxd_seg_data_ok(hdr, &si)) {
			torn = true;
			break;
		}
		nxd_seg_apply(nc, hdr, &si);
		nc->rec_segments++;
		nc->rec_blocks += si.nr_data;
		pos = nxd_next_seg_pos(rb, pos + 1 + si.nr_data);
		seq++;
		cond_resched();
	}
	if (clean && torn) {
		/*
		 * CLEAN vouches for every segment up to head_seq: a chain that
		 * ends before it lost acknowledged writes or has corrupt
		 * metadata.  Nothing is written until the admin decides.
		 */
		DMERR("%s: clean SSD log ends early at seg %llu (pos %llu): segs %llu-%llu lost",
		      name, seq, pos, seq, nc->sb.head_seq - 1);
		if (!nc->opt_accept_loss) {
			DMERR("%s: reload with 'accept_log_loss' to continue without them",
			      name);
			return -EUCLEAN;
		}
		DMERR("%s: 'accept_log_loss': continuing without them", name);
	}
	/*
	 * The replayed segments are durable on the SSD: after a restart the
	 * replay read what its media kept, after a reload the previous
	 * table's postsuspend flushed it.  So if the new generation cannot
	 * be written (degraded), the destager may still pass the copies they
	 * superseded (nxd_ring_safe_prefix).  Not after a freeze: that table
	 * may have logged segments it could never flush; the destager's own
	 * SSD flushes decide then.
	 */
	if (!was_frozen) {
		spin_lock(&nc->lock);
		nc->ssd_durable_seq = nc->commit_seq;
		spin_unlock(&nc->lock);
	}
	nc->rec_clean = clean;
	nc->rec_us = div_u64(ktime_get_ns() - t0, 1000);
	if (nc->grow_to > nc->sb.data_sectors) {
		r = nxd_grow(nc, &l);
		if (r)
			return r;
	}

	r = nxd_sb_new_gen(nc);
	if (r) {
		/*
		 * The SSD still takes no writes: come up degraded, serving and
		 * destaging what was replayed (nxd_sb_commit froze the log).
		 */
		if (!nc->frozen)
			return r;
		DMERR("%s: SSD superblock write failed (%d): degraded, the log is destaged",
		      name, r);
	} else if (was_frozen) {
		/* The new superblock bounds the log by generation now. */
		mutex_lock(&nc->sb_lock);
		r = nxd_label_write(nc, 0, 0, 0);
		mutex_unlock(&nc->sb_lock);
		if (r)
			return r;
		DMINFO("%s: SSD log %s after an SSD failure: writes are logged again",
		       name, drop_log ? "restarted" : "unfrozen");
	}
	DMINFO("%s: recovered %llu segments, %llu blocks in %llu us (%s), %llu entries",
	       name, nc->rec_segments, nc->rec_blocks, nc->rec_us,
	       clean ? "clean" : was_frozen ? "frozen log" : "unclean shutdown",
	       nc->ix.count);
	return 0;
}
