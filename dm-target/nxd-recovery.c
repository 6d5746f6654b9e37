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
 */
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/random.h>
#include <linux/ktime.h>

#include "nxd.h"

#define DM_MSG_PREFIX "nxd recovery"

#define NXD_ERR_NOT_LOG \
	"SSD holds data that is not an nxd log: add 'format' to overwrite it"
#define NXD_ERR_HDD_LABELLED \
	"HDD belongs to an nxd volume but the SSD has no log: add 'format'"
#define NXD_ERR_SB_CORRUPT \
	"SSD superblock corrupt in both copies: 'format' reinitialises it"
#define NXD_ERR_LOG_ABANDONED \
	"SSD log abandoned after an SSD failure (HDD label): add 'format' to start a new log"

static int nxd_sb_write_locked(struct nxd_c *nc)
{
	int r;

	nc->sb.sb_seq++;
	nxd_sb_encode(&nc->sb, nc->sb_buf);
	/* Alternate copies so a torn write leaves the other one intact. */
	r = nxd_ssd_io(nc, REQ_OP_WRITE | REQ_SYNC | REQ_FUA, nc->sb.sb_seq & 1,
		       1, nc->sb_buf);
	if (r)
		nxd_ssd_failed(nc, r, "superblock write");
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
	return r;
}

int nxd_sb_write(struct nxd_c *nc, bool clean)
{
	u64 pos, seq;

	spin_lock(&nc->lock);
	nxd_ring_tail(&nc->ring, &pos, &seq);
	spin_unlock(&nc->lock);
	return nxd_sb_commit(nc, clean ? NXD_SB_CLEAN : 0, pos, seq);
}

static int nxd_hdd_io(struct nxd_c *nc, blk_opf_t opf, sector_t sector, void *buf)
{
	struct dm_io_region where = {
		.bdev = nc->hdd->bdev,
		.sector = sector,
		.count = NXD_SECTORS_PER_BLOCK,
	};
	struct dm_io_request req = {
		.bi_opf = opf,
		.mem.type = DM_IO_KMEM,
		.mem.ptr.addr = buf,
		.client = nc->dmio,
	};
	unsigned long err_bits = 0;

	return dm_io(&req, 1, &where, &err_bits, IOPRIO_DEFAULT);
}

/* Write the HDD label of the volume in nc->sb.  Under sb_lock or in ctr. */
static int nxd_label_write(struct nxd_c *nc, u32 flags)
{
	struct nxd_label_info l = { };

	memcpy(l.vol_uuid, nc->sb.vol_uuid, 16);
	memcpy(l.hdd_uuid, nc->sb.hdd_uuid, 16);
	l.hdd_sectors = nc->sb.hdd_sectors;
	l.flags = flags;
	if (flags & NXD_LABEL_LOG_ABANDONED)
		l.abandoned_gen = nc->sb.gen;
	nxd_label_encode(&l, nc->sb_buf);
	return nxd_hdd_io(nc, REQ_OP_WRITE | REQ_SYNC | REQ_FUA,
			  nc->sb.hdd_label_sector, nc->sb_buf);
}

/*
 * Degraded: the log can no longer record what the HDD overwrites (and a
 * failed segment may have landed all the same), so its older copies would
 * come back at the next load.  Mark the HDD label before anything that
 * depends on it is acknowledged: the next load refuses the log instead
 * ('format' starts a new one).
 */
int nxd_log_abandon(struct nxd_c *nc)
{
	int r = 0;

	if (READ_ONCE(nc->log_abandoned))
		return 0;
	mutex_lock(&nc->sb_lock);
	if (!nc->log_abandoned) {
		r = nxd_label_write(nc, NXD_LABEL_LOG_ABANDONED);
		if (!r) {
			WRITE_ONCE(nc->log_abandoned, true);
			DMERR("%s: SSD log abandoned (HDD label marked): reassembly needs 'format'",
			      dm_table_device_name(nc->ti->table));
		}
	}
	mutex_unlock(&nc->sb_lock);
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

static int nxd_format(struct nxd_c *nc)
{
	struct nxd_sb_info *sb = &nc->sb;
	int r;

	memset(sb, 0, sizeof(*sb));
	generate_random_uuid(sb->vol_uuid);
	generate_random_uuid(sb->hdd_uuid);
	sb->hdd_sectors = nc->hdd_sectors;
	sb->data_sectors = nxd_hdd_data_sectors(nc->hdd_sectors);
	sb->hdd_label_sector = sb->data_sectors;
	sb->ring_start = NXD_RING_START;
	sb->ring_blocks = min_t(u64, nc->ssd_blocks - NXD_RING_START, U32_MAX - 1);
	sb->tail_pos = 0;
	sb->tail_seq = 1;
	sb->gen = 1;
	sb->gen_start_seq = 1;
	sb->head_pos = 0;
	sb->head_seq = 1;

	r = nxd_label_write(nc, 0);
	if (r)
		return r;
	/* Both copies, so neither holds a previous volume's superblock. */
	r = nxd_sb_write_locked(nc);
	if (!r)
		r = nxd_sb_write_locked(nc);
	if (!r)
		DMINFO("%s: formatted volume %pU: log of %llu blocks, %llu data sectors",
		       dm_table_device_name(nc->ti->table), sb->vol_uuid,
		       sb->ring_blocks, sb->data_sectors);
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
		r = nxd_format(nc);
		if (r)
			ti->error = "Format failed: I/O error";
		return r;
	}
	r = nxd_read_sbs(nc, sbs, res, &blank);
	if (r) {
		ti->error = "Cannot read the SSD superblock";
		return r;
	}
	pick = nxd_sb_pick(res, sbs);
	if (pick == NXD_SB_NONE) {
		if (!blank) {
			ti->error = NXD_ERR_NOT_LOG;
			return -EINVAL;
		}
		r = nxd_hdd_io(nc, REQ_OP_READ,
			       nxd_hdd_data_sectors(nc->hdd_sectors), nc->sb_buf);
		if (r) {
			ti->error = "Cannot read the HDD label area";
			return r;
		}
		if (!nxd_label_decode(nc->sb_buf, &l)) {
			ti->error = NXD_ERR_HDD_LABELLED;
			return -EINVAL;
		}
		r = nxd_format(nc);
		if (r)
			ti->error = "Format failed: I/O error";
		return r;
	}
	if (pick < 0) {
		ti->error = NXD_ERR_SB_CORRUPT;
		return -EINVAL;
	}
	nc->sb = sbs[pick];
	if (nc->sb.hdd_label_sector + NXD_SECTORS_PER_BLOCK > nc->hdd_sectors) {
		ti->error = "HDD is smaller than this SSD log's volume: wrong HDD?";
		return -EINVAL;
	}
	r = nxd_hdd_io(nc, REQ_OP_READ, nc->sb.hdd_label_sector, nc->sb_buf);
	if (r) {
		ti->error = "Cannot read the HDD label";
		return r;
	}
	if (nxd_label_decode(nc->sb_buf, &l)) {
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
	if (l.flags & NXD_LABEL_LOG_ABANDONED) {
		ti->error = NXD_ERR_LOG_ABANDONED;
		DMERR("volume %pU: log of generation %llu abandoned after an SSD failure; "
		      "the HDD holds newer data for some logged blocks", l.vol_uuid,
		      l.abandoned_gen);
		return -EINVAL;
	}
	/* Longer than formatted: ctr checked that the HDD now has the room. */
	if (ti->len > nc->sb.data_sectors)
		nc->grow_to = nxd_hdd_data_sectors(nc->hdd_sectors);
	return 0;
}

/*
 * The HDD grew and the table asks for more: write the label at the HDD's
 * new end, then the superblock that points at it.  A crash in between
 * leaves the old superblock and the old label, both intact; the next load
 * of the longer table grows again.  Runs at preresume, after the previous
 * table's last superblock write; its failure fails the resume.
 */
static int nxd_grow(struct nxd_c *nc)
{
	const char *name = dm_table_device_name(nc->ti->table);
	sector_t old_label = nc->sb.hdd_label_sector;
	u64 old_data = nc->sb.data_sectors;
	int r;

	mutex_lock(&nc->sb_lock);
	nc->sb.hdd_sectors = nc->hdd_sectors;
	nc->sb.data_sectors = nc->grow_to;
	nc->sb.hdd_label_sector = nc->grow_to;
	r = nxd_label_write(nc, 0);
	if (r) {
		DMERR("%s: grow: cannot write the HDD label at %llu: %d", name,
		      (u64)nc->grow_to, r);
		goto out;
	}
	r = nxd_sb_write_locked(nc);
	if (r)
		goto out;
	/* Now data: a stale copy there would confuse label probes. */
	memset(nc->sb_buf, 0, NXD_BLOCK_SIZE);
	if (nxd_hdd_io(nc, REQ_OP_WRITE | REQ_SYNC, old_label, nc->sb_buf))
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

	spin_lock(&nc->lock);
	for (i = 0; i < si->nr_recs; i++) {
		struct nxd_rec rec;

		nxd_seg_rec(hdr, i, &rec);
		if (rec.type == NXD_REC_INVAL)
			nxd_inval_range_locked(nc, rec.block, rec.block + rec.val - 1);
	}
	nxd_ring_push(&nc->ring, si->pos, si->nr_data, si->nr_data);
	for (i = 0; i < si->nr_recs; i++) {
		struct nxd_rec rec;

		nxd_seg_rec(hdr, i, &rec);
		if (rec.type != NXD_REC_DATA)
			continue;
		if (nxd_index_set(&nc->ix, rec.block, si->pos + 1 + d, rec.mask,
				  &old) == 1)
			nxd_seg_put_locked(nc, old.slot);
		d++;
	}
	spin_unlock(&nc->lock);
}

/* Rebuild the index from the log; runs before the table goes live. */
int nxd_meta_load(struct nxd_c *nc)
{
	struct nxd_sb_info sbs[2];
	u64 t0 = ktime_get_ns(), pos, seq, rb;
	int res[2], pick, r;
	bool blank, clean, torn = false;

	r = nxd_read_sbs(nc, sbs, res, &blank);
	if (r)
		return r;
	pick = nxd_sb_pick(res, sbs);
	if (pick < 0 || pick == NXD_SB_NONE ||
	    memcmp(sbs[pick].vol_uuid, nc->sb.vol_uuid, 16)) {
		DMERR("%s: superblock changed under the table",
		      dm_table_device_name(nc->ti->table));
		return -EINVAL;
	}
	mutex_lock(&nc->sb_lock);
	nc->sb = sbs[pick];
	mutex_unlock(&nc->sb_lock);
	clean = nc->sb.flags & NXD_SB_CLEAN;
	rb = nc->sb.ring_blocks;

	/* Start from scratch: a failed earlier attempt may have left entries. */
	nxd_index_free(&nc->ix);
	r = nxd_index_init(&nc->ix, rb);
	if (r)
		return r;
	nxd_ring_free(&nc->ring);
	r = nxd_ring_init(&nc->ring, rb, nc->sb.tail_pos, nc->sb.tail_seq);
	if (r)
		return r;
	nc->rec_segments = 0;
	nc->rec_blocks = 0;
	pos = nc->sb.tail_pos;
	seq = nc->sb.tail_seq;
	for (;;) {
		struct nxd_seg_info si;
		void *hdr = nc->dbuf;
		u64 p;

		if (clean && seq == nc->sb.head_seq)
			break;
		r = nxd_ssd_io(nc, REQ_OP_READ, nc->sb.ring_start + pos, 1, hdr);
		if (r)
			return r;
		if (nxd_seg_decode(hdr, nc->sb.vol_uuid, rb,
				   nc->sb.data_sectors >> 3, &si) ||
		    si.seq != seq || si.pos != pos ||
		    !nxd_seg_gen_ok(&nc->sb, si.seq, si.gen) ||
		    nxd_ring_reserve(&nc->ring, si.nr_data, &p) || p != pos) {
			torn = true;
			break;
		}
		if (!clean && si.nr_data) {
			r = nxd_ssd_io(nc, REQ_OP_READ, nc->sb.ring_start + pos + 1,
				       si.nr_data, hdr + NXD_BLOCK_SIZE);
			if (r)
				return r;
			if (!nxd_seg_data_ok(hdr, &si)) {
				torn = true;
				break;
			}
		}
		nxd_seg_apply(nc, hdr, &si);
		nc->rec_segments++;
		nc->rec_blocks += si.nr_data;
		pos = nxd_next_seg_pos(rb, pos + 1 + si.nr_data);
		seq++;
		cond_resched();
	}
	if (clean && torn)
		DMWARN("%s: clean log ends early at segment %llu (expected %llu): corrupt?",
		       dm_table_device_name(nc->ti->table), seq, nc->sb.head_seq);
	nc->rec_clean = clean;
	nc->rec_us = div_u64(ktime_get_ns() - t0, 1000);
	if (nc->grow_to > nc->sb.data_sectors) {
		r = nxd_grow(nc);
		if (r)
			return r;
	}

	/* New generation: segments after ours from earlier runs are now stale. */
	mutex_lock(&nc->sb_lock);
	nc->sb.gen++;
	nc->sb.gen_start_seq = nc->ring.next_seq;
	mutex_unlock(&nc->sb_lock);
	r = nxd_sb_write(nc, false);
	if (r)
		return r;
	DMINFO("%s: recovered %llu segments, %llu blocks in %llu us (%s), %llu entries",
	       dm_table_device_name(nc->ti->table), nc->rec_segments,
	       nc->rec_blocks, nc->rec_us, clean ? "clean" : "unclean shutdown",
	       nc->ix.count);
	return 0;
}
