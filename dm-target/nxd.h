/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd: hybrid SSD-log + HDD device-mapper target.
 * Shared declarations of the module's role files.
 */
#ifndef DM_NXD_H
#define DM_NXD_H

#include <linux/device-mapper.h>
#include <linux/dm-io.h>
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/kthread.h>
#include <linux/kobject.h>
#include <linux/percpu.h>
#include <linux/wait.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/atomic.h>
#include <linux/workqueue.h>

#include "nxd_core.h"
#include "nxd_ioctl.h"
#include "nxd-compat.h"

#define NXD_VERSION_STR	"0.1.0"

#define NXD_NCTR	(sizeof(struct nxd_ioc_counters) / sizeof(__u64))
#define NXD_CTR(name)	(offsetof(struct nxd_ioc_counters, name) / sizeof(__u64))

struct nxd_pcpu {
	atomic64_t hist[NXD_H_NDIR][NXD_HIST_NBUCKETS][NXD_H_NROUTE][NXD_H_NALIGN][3];
	atomic64_t ctr[NXD_NCTR];
	/* Completed writes by device and size for nxd-auto.c: never reset. */
	atomic64_t auto_n[NXD_H_NROUTE][NXD_HIST_NBUCKETS];
	atomic64_t auto_ns[NXD_H_NROUTE][NXD_HIST_NBUCKETS];
};

struct nxd_c;

/* Event kinds are NXD_EV_* (nxd_ioctl.h), 1..4; index 0 is unused. */
#define NXD_EV_NR	(NXD_EV_ACKED_LOST + 1)

/* One per dm device; outlives table reloads. */
struct nxd_vol {
	struct list_head node;		/* nxd_vols, under nxd_vols_lock */
	struct mapped_device *md;
	dev_t dev;
	struct nxd_tun tun;
	struct nxd_pcpu __percpu *pcpu;
	struct kobject kobj;		/* /sys/block/dm-N/nxd; owns the lifetime */
	bool kobj_added;
	struct nxd_c *active;		/* resumed table, under nxd_vols_lock */
	int ntables;			/* tables holding it, under nxd_vols_lock */
	u8 vol_uuid[16];
	/* Events raised, by NXD_EV_* kind, and the latest; never reset. */
	atomic64_t ev_count[NXD_EV_NR];
	atomic_t ev_last;
};

/* Two counters of I/O in flight and the current one (nxd-dev.c). */
struct nxd_epoch {
	atomic_t inflight[2];
	int cur;
	wait_queue_head_t wait;
};

/*
 * An in-flight discard (or degraded HDD write) that must invalidate logged
 * copies.  It lives in its bio's per-bio data: gone once the bio ends.
 */
struct nxd_inval {
	struct list_head node;		/* nc->invals, under nc->lock */
	struct list_head bnode;		/* nc->done_invals, then the batch */
	struct nxd_c *nc;
	struct bio *bio;		/* the dm bio */
	u64 first, last;		/* logical blocks touched [first, last] */
	u64 full_first, full_last;	/* wholly covered; full_first > full_last if none */
	int error;
	int hdd_state;			/* NXD_HDD_*, set at HDD completion */
	int hw_epoch;			/* HDD write epoch of its clone, or -1 */
};

#define NXD_HDD_INFLIGHT	0
#define NXD_HDD_OK		1	/* HDD copy durable: logged copy stale */
#define NXD_HDD_FAILED		2	/* logged copy still the newest */

struct nxd_fseg;

/* pb->fast: a logged write remapped straight to its log slots (nxd-fast.c). */
#define NXD_FAST_NONE		0
#define NXD_FAST_INFLIGHT	1	/* data on its way to the SSD */
#define NXD_FAST_DONE		2	/* completed by the writer: end_io again */

/* Per-bio data. */
struct nxd_pb {
	u64 start_ns;
	sector_t sector;	/* where it began, for the trace event */
	u32 bytes;
	u8 dir;
	u8 route;
	u8 align;
	s8 epoch;		/* read epoch held, or -1 */
	s8 hw_epoch;		/* HDD write epoch held, or -1 */
	bool fg_hdd;		/* counted in hdd_fg_inflight */
	u8 hold;		/* NXD_HOLD_*: why it is on nc->held */
	atomic_t pending;	/* segments a logged write still waits for */
	int error;		/* -errno, or NXD_PB_RETRY */
	/* a discard's or degraded write's inval op (nxd-writer.c), no allocation */
	struct nxd_inval inval;
	u8 fast;		/* NXD_FAST_* */
	bool fua;		/* had REQ_FUA before it was remapped */
	u8 fidx, fnr;		/* its slots in the segment: data index, count */
	struct nxd_fseg *fseg;	/* NXD_FAST_INFLIGHT: its segment */
	struct bvec_iter iter;	/* as mapped: redone from here if it fails */
	bool queued;		/* counted in nxd_c.queued from map to end_io */
	u64 qfirst, qlast;	/* its blocks */
};

/*
 * Why a bio waits on nc->held.  A failed destage round fails only the bios
 * waiting for destage progress; the others are tried again.
 */
enum {
	NXD_HOLD_NONE,
	NXD_HOLD_RETRY,		/* a fence or an INVAL in flight, or a redo */
	NXD_HOLD_DESTAGE,	/* log room, a logged block's copy, the log empty */
};

#define NXD_MERGE_SLOTS	64
#define NXD_REGION_SHIFT	8	/* the counters' regions: 256 blocks = 1 MiB */

/*
 * Range locks: 1 MiB region r belongs to shard r % NXD_SHARDS, and so do
 * its counters (slot r % NXD_MERGE_SLOTS).  Eight, so that taking them
 * all nests within lockdep's eight subclasses.
 */
#define NXD_SHARDS	8

struct nxd_shard {
	spinlock_t lock;	/* the shard's part of what map looks up */
} ____cacheline_aligned_in_smp;

#define NXD_SHARDS_ALL	((1U << NXD_SHARDS) - 1)

/* Space kept for INVAL-only segments and wrap waste. */
#define NXD_LOG_RESERVE		(3 * NXD_SEG_MAX_BLOCKS)

/* Direct log segments in flight at once (nxd-fast.c). */
#define NXD_FSEG_MAX		16

/*
 * A log segment that map fills with remapped whole-block writes.  Its
 * ring descriptor is pushed when it opens (reserving a full segment) and
 * trimmed when it closes.  A write is acknowledged when its data lands
 * (a FUA write, or one that failed, waits for the commit); the writer
 * writes the header, PREFLUSH first, once every data write landed, then
 * moves the blocks into the index.  Until then reads find acknowledged
 * blocks here (nxd_fast_lookup_locked).
 */
struct nxd_fseg {
	u64 seq;
	u32 pos;
	u32 nr;				/* data slots handed out, under nc->lock */
	u32 seen;			/* nr when the writer last looked */
	bool fua;			/* a bio had REQ_FUA: header FUA too */
	int error;			/* a data write failed */
	atomic_t pending;		/* data writes in flight, +1 while open */
	struct bio_list bios;		/* FUA or failed, landed; under nc->qlock */
	DECLARE_BITMAP(acked, NXD_SEG_MAX_DATA);	/* landed, acknowledged */
	u64 blocks[NXD_SEG_MAX_DATA];
	u8 masks[NXD_SEG_MAX_DATA];	/* sectors written; partial only at a bio's ends */
	u64 hkeys[256];			/* block -> newest data index */
	u8 hvals[256];
};

/*
 * The index keeps 16 bits of each logged block's crc32c (nxd_ient.rsvd),
 * so that a block destaged without its segment header (unreadable) is
 * checked before it overwrites the HDD.
 */
static inline u16 nxd_crc16(u32 crc)
{
	return (u16)(crc ^ (crc >> 16));
}

/* pb->error: its segment failed; redo the bio on the degraded path. */
#define NXD_PB_RETRY	1

/* A log segment being assembled by the writer. */
struct nxd_batch {
	void *buf;			/* header + NXD_SEG_MAX_DATA blocks */
	u32 nr_data;
	u32 nr_inval;
	bool fua;			/* PREFLUSH|FUA the segment */
	u64 blocks[NXD_SEG_MAX_DATA];
	u8 masks[NXD_SEG_MAX_DATA];
	u32 crcs[NXD_SEG_MAX_DATA];	/* of the data blocks, at commit */
	/* merged with a logged copy: counted in nxd_c.merging until indexed */
	DECLARE_BITMAP(merged, NXD_SEG_MAX_DATA);
	/* block -> data index + 1 for merging writes to one block */
	u64 hkeys[256];
	u8 hvals[256];
	struct bio_list bios;		/* complete when committed */
	struct bio *last_bio;
	struct list_head invals;	/* nxd_inval to finish when committed */
};

/*
 * One per table.  Grouped by what guards them: each lock stands first in
 * the group of fields it guards (docs/design.md, section 14).
 */
struct nxd_c {
	/* Set in ctr, then read-only. */
	struct list_head node;		/* nxd_targets, under nxd_vols_lock */
	struct dm_target *ti;
	struct nxd_vol *vol;
	struct dm_dev *hdd;
	struct dm_dev *ssd;
	struct dm_io_client *dmio;
	struct bio_set bs;		/* clones */
	struct bio_set dbs;		/* destage writes */
	struct nxd_tun opt;		/* table options */
	u32 opt_given;			/* BIT(i): the table named nxd_tuns[i] */
	bool opt_format;
	bool opt_accept_loss;		/* replay what is readable, drop the rest */
	u64 ssd_blocks;
	sector_t hdd_sectors;
	sector_t grow_to;		/* new data_sectors, set at preresume */
	u32 hdd_io_min;
	u32 hdd_io_opt;
	u64 max_block;			/* logical blocks of the volume */

	/* Life cycle: dm serialises the methods that write these. */
	bool loaded;
	bool resumed;			/* has been live once; under nxd_vols_lock */
	bool running;			/* between resume and postsuspend */
	/*
	 * From presuspend to resume (or presuspend_undo): a drain message
	 * gives up, since dm's suspend waits for every ioctl in the table.
	 */
	bool suspending;
	atomic_t degraded;		/* SSD write failed: log frozen, bypassed */
	/*
	 * The destager found a logged copy the SSD lost (checksum, or no
	 * header to vouch for it): degraded flushes fail from then on.
	 */
	atomic_t acked_lost;
	atomic_t ssd_fail_reported;

	/*
	 * Events, atomics: nxd_event() records them and queues @ev_work,
	 * which raises dm_table_event() and sysfs_notify() in process context.
	 */
	struct work_struct ev_work;
	atomic_t ev_pending;		/* BIT(NXD_EV_*) not yet raised */
	atomic_t full_armed;		/* next log-full transition raises one */
	atomic_t empty_armed;		/* degraded: raise drain_done when empty */

	/* Superblock and label writes; nests outside @lock. */
	struct mutex sb_lock;
	struct nxd_sb_info sb;
	void *sb_buf;			/* superblock or label being written */
	char owner[NXD_LABEL_OWNER_LEN];	/* label's owner: kept, not used */
	bool frozen;			/* label says FROZEN; READ_ONCE outside */
	/* label says ABANDONED (abandon_log): no label write after it */
	bool abandoned;
	u64 abandoned_blocks;		/* what it gave up, for the gauge */

	/*
	 * The in-memory log: map, the writer, the destager, recovery.  What
	 * map's reads, HDD writes and discards look up (the index, the
	 * direct segments' blocks, the region counters, the round's fill
	 * list) changes only under @lock and the shards of the blocks
	 * concerned, so those look-ups take the shards alone (section 14).
	 */
	spinlock_t lock;
	struct nxd_shard shard[NXD_SHARDS];
	struct nxd_index ix;
	struct nxd_ring ring;
	u64 commit_seq;			/* first seq not committed */
	u64 frozen_end;			/* degraded: first seq not in the log, or 0 */
	u64 frozen_end_pos;		/* where segment @frozen_end lies */
	u64 ssd_durable_seq;		/* segments before it flushed on the SSD */
	bool void_on_hdd;		/* void blocks all copied to the HDD */
	struct list_head invals;	/* in-flight nxd_inval */
	/*
	 * Blocks of the open batch merged with a logged copy, per hashed
	 * 1 MiB region: until the merged block is indexed, a write must not
	 * go round the writer to the HDD (nxd_merging_locked).
	 */
	u32 merging[NXD_MERGE_SLOTS];
	atomic_t nr_merging;		/* their sum: map skips the look-up at 0 */
	/*
	 * Direct log writes.  Segments are committed (header written, blocks
	 * indexed) strictly in seq order; those from @commit_seq on are still
	 * uncommitted, and the destager leaves them.
	 */
	struct nxd_fseg *fsegs;		/* NXD_FSEG_MAX, used as a ring */
	u32 fs_first, fs_count;
	struct nxd_fseg *fopen;		/* taking blocks, or NULL */
	/* uncommitted direct blocks per hashed 1 MiB region (as @merging) */
	u32 fast_blocks[NXD_MERGE_SLOTS];
	/*
	 * Writes and discards map sent to the writer, per hashed region (a
	 * bio over more regions than slots counts in @queued_wide), until
	 * they end: a direct partial block keeps off them (nxd_fast_map).
	 * Atomic, since end_io may run in interrupt context.
	 */
	atomic_t queued[NXD_MERGE_SLOTS];
	atomic_t queued_wide;
	struct nxd_round *dround;	/* destage copies in flight */

	/* SSD reads of log slots hold an epoch so reclaim can wait for them. */
	struct nxd_epoch rd_ep;
	/* So do foreground HDD writes, for a round that fills stripes. */
	struct nxd_epoch hw_ep;

	/* The writer's inbox; taken in endio (irqsave). */
	spinlock_t qlock;
	struct bio_list queue;		/* from map */
	struct list_head done_invals;	/* HDD part completed */
					/* and each nxd_fseg's @bios */

	/* Writer: the thread's own, atomics, or READ_ONCE outside it. */
	struct task_struct *writer;
	wait_queue_head_t wq;
	wait_queue_head_t ewq;		/* index entries released */
	atomic_t kick;			/* retry held bios */
	atomic_t stuck_err;		/* a destage round failed: see nxd_fail_waiters */
	struct bio_list held;
	/* degraded HDD writes waiting for their logged copies */
	struct list_head parked;
	/* inval ops waiting for a destage round's copies to land */
	struct list_head fenced;
	bool log_full;
	bool room_wait;			/* a held bio waits for log space */
	struct nxd_batch batch;
	void *fhdr;			/* direct segment header buffer */

	/*
	 * Destager: held for a whole round; postsuspend takes it to wait
	 * one out.  The rest is the thread's own, or atomics.
	 */
	struct mutex round_lock;
	struct task_struct *destager;
	struct nxd_round *drd;		/* the round's buffers, from ctr */
	wait_queue_head_t dwq;
	atomic_t drain_req;
	atomic_t destage_paused;
	atomic_t hdd_fg_inflight;
	unsigned long hdd_fg_last;	/* jiffies: last foreground HDD start or end */
	unsigned long fg_last;		/* jiffies: last bio mapped (nxd_fg_touch) */
	bool fg_fenced;		/* a foreground HDD write waits for the round */
	void *dbuf;			/* destage read buffer */
	u32 dbuf_blocks;
	wait_queue_head_t drain_wait;
	atomic_t d_inflight;
	int d_error;
	u64 destage_errors;

	/*
	 * Mode adaptive (nxd-auto.c).  @auto_lock guards the controller and
	 * the stream table; map reads @auto_thr without it, the tick alone
	 * writes it.  @split_tail: 1 + the first sector of the tail of the
	 * last write split at stripes, which map then logs (0: none).
	 */
	spinlock_t auto_lock;
	struct nxd_auto at;
	struct nxd_streams streams;
	u32 auto_thr;
	bool auto_on;			/* the tick is armed */
	struct delayed_work auto_work;
	u64 auto_prev_n[NXD_H_NROUTE][NXD_HIST_NBUCKETS];
	u64 auto_prev_ns[NXD_H_NROUTE][NXD_HIST_NBUCKETS];
	u64 auto_prev_written;
	u64 auto_prev_used;
	atomic64_t split_tail;
	/* 1 + the first sector of the rest of a write map cut (0: none) */
	atomic64_t own_cut;
	atomic64_t auto_stream_writes;
	atomic64_t auto_split_cuts;
	atomic64_t auto_split_log;
	atomic64_t auto_split_hdd;

	/* Recovery report, written at the first preresume. */
	u64 rec_segments;
	u64 rec_blocks;
	u64 rec_us;
	bool rec_clean;
};

/*
 * The files, bottom layer first (docs/design.md, section 1; Kbuild lists
 * them in this order).  A file calls only the files listed before it,
 * never one after: scripts/callgraph.py checks it in make check.
 */

/* Writer only (nc->held is the writer's). */
static inline void nxd_hold(struct nxd_c *nc, struct bio *bio, u8 why)
{
	struct nxd_pb *pb = dm_per_bio_data(bio, sizeof(*pb));

	pb->hold = why;
	bio_list_add(&nc->held, bio);
}

/* nxd-stats.c */
int nxd_stats_alloc(struct nxd_vol *vol);
void nxd_stats_free(struct nxd_vol *vol);
void nxd_count(struct nxd_c *nc, unsigned int ctr, u64 v);
void nxd_hist_account(struct nxd_vol *vol, struct nxd_pb *pb);
void nxd_auto_sums(struct nxd_vol *vol, unsigned int route, unsigned int k,
		   u64 *n, u64 *ns);
u64 nxd_ctr_sum(struct nxd_vol *vol, unsigned int ctr);
void nxd_stats_fill(struct nxd_vol *vol, struct nxd_ioc_stats *st, bool reset);
void nxd_gauges_fill(struct nxd_c *nc, struct nxd_ioc_counters *c);
const char *nxd_event_name(unsigned int kind);

/* nxd-dev.c */
sector_t nxd_slot_sector(struct nxd_c *nc, u64 slot);
int nxd_ssd_io(struct nxd_c *nc, blk_opf_t opf, u64 ssd_block, u32 nr_blocks,
	       void *buf);
int nxd_hdd_io(struct nxd_c *nc, blk_opf_t opf, sector_t sector, void *buf);
int nxd_hdd_flush(struct nxd_c *nc);
int nxd_hdd_flush_fg(struct nxd_c *nc);
void nxd_fg_start(struct nxd_c *nc);
void nxd_fg_end(struct nxd_c *nc);
int nxd_ssd_flush(struct nxd_c *nc);
u64 nxd_ssd_flush_start(struct nxd_c *nc);
void nxd_ssd_flush_done(struct nxd_c *nc, u64 seq, int err);
void nxd_ssd_failed(struct nxd_c *nc, int err, const char *what);
void nxd_event(struct nxd_c *nc, unsigned int kind);
void nxd_epoch_init(struct nxd_epoch *ep);
int nxd_epoch_get(struct nxd_epoch *ep);
void nxd_epoch_put(struct nxd_epoch *ep, int epoch);
void nxd_epoch_sync(struct nxd_epoch *ep);
void nxd_fg_hdd(struct nxd_c *nc, struct nxd_pb *pb);
void nxd_bio_reset(struct bio *bio, const struct bvec_iter *iter);
struct bio *nxd_bio_to_hdd(struct nxd_c *nc, struct bio *bio);
void nxd_bio_done(struct nxd_c *nc, struct bio *bio);
int nxd_thread_start(struct nxd_c *nc, int (*fn)(void *), const char *prefix,
		     struct task_struct **t);
void nxd_thread_stop(struct task_struct **t);
void nxd_writer_wake(struct nxd_c *nc);
void nxd_destager_wake(struct nxd_c *nc);

/* nxd-lookup.c */
u32 nxd_shard_mask(u64 first, u64 last);
void nxd_shards_lock(struct nxd_c *nc, u32 mask);
void nxd_shards_unlock(struct nxd_c *nc, u32 mask);
void nxd_shards_assert(struct nxd_c *nc, u32 mask);
u32 *nxd_region_ctr(u32 *ctrs, u64 block);
void nxd_merge_get_locked(struct nxd_c *nc, u64 block);
void nxd_merge_put_locked(struct nxd_c *nc, u64 block);
int nxd_blk_hash_lookup(const u64 *keys, const u8 *vals, u64 block);
void nxd_blk_hash_set(u64 *keys, u8 *vals, u64 block, u8 idx);
bool nxd_range_logged(struct nxd_c *nc, u64 first, u64 last);
void nxd_seg_put_locked(struct nxd_c *nc, const struct nxd_ient *old);
void nxd_seg_supersede_locked(struct nxd_c *nc, const struct nxd_ient *old,
			      u64 seq);
void nxd_mark_clean_locked(struct nxd_c *nc, struct nxd_ient *e);
void nxd_drop_entry_locked(struct nxd_c *nc, u64 block);
u64 nxd_inval_range_locked(struct nxd_c *nc, u64 first, u64 last);
bool nxd_merging_locked(struct nxd_c *nc, u64 first, u64 last);
bool nxd_fast_range_busy(struct nxd_c *nc, u64 first, u64 last);
void nxd_queued_get(struct nxd_c *nc, struct nxd_pb *pb, u64 first, u64 last);
void nxd_queued_put(struct nxd_c *nc, struct nxd_pb *pb);
bool nxd_queued_busy(struct nxd_c *nc, u64 block);
bool nxd_inval_overlap_locked(struct nxd_c *nc, u64 first, u64 last);
u32 nxd_log_used_pct(struct nxd_c *nc);

/* nxd-vol.c */
extern struct mutex nxd_vols_lock;
extern struct list_head nxd_vols;
void nxd_tun_get(struct nxd_vol *vol, struct nxd_tun *t);
void nxd_tun_put(struct nxd_vol *vol, const struct nxd_tun *t);
void nxd_tun_merge(struct nxd_c *nc, bool vol_active);
const char *nxd_tun_err(const struct nxd_tun_desc *d);
/* Why a set of tunables, each in its range, fails nxd_tun_valid(). */
const char *nxd_tun_pair_err(const struct nxd_tun *t);
void nxd_sysfs_init(void);
int nxd_sysfs_add(struct nxd_vol *vol);
void nxd_event_work(struct work_struct *w);
struct nxd_vol *nxd_vol_get(struct dm_target *ti, const struct nxd_tun *tun);
void nxd_vol_put(struct nxd_c *nc);

/* nxd-meta.c */
int nxd_meta_check(struct nxd_c *nc, bool vol_active);
int nxd_meta_load(struct nxd_c *nc);
int nxd_sb_write(struct nxd_c *nc, bool clean);
int nxd_sb_commit(struct nxd_c *nc, u32 flags, u64 tail_pos, u64 tail_seq);
int nxd_sb_new_gen(struct nxd_c *nc);
int nxd_sb_save(struct nxd_c *nc);
int nxd_log_freeze(struct nxd_c *nc);
int nxd_log_frozen_tail(struct nxd_c *nc, u64 tail_pos, u64 tail_seq);

/* Logged blocks not on the HDD: what an abandoned log gives up. */
struct nxd_risk {
	u64 blocks;
	u32 ranges;			/* all of them */
	u32 listed;			/* in r[], the first ones */
	u64 r[NXD_LABEL_LOST_MAX][2];	/* first block, blocks */
};

int nxd_log_at_risk(struct nxd_c *nc, struct nxd_risk *rk);
int nxd_log_abandon(struct nxd_c *nc, struct nxd_risk *rk);

/* nxd-fast.c */
int nxd_fast_alloc(struct nxd_c *nc);
void nxd_fast_free(struct nxd_c *nc);
bool nxd_fast_map(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb);
u64 nxd_owned_run_locked(struct nxd_c *nc, u64 first, u64 last, bool *owned);
void nxd_fast_close_locked(struct nxd_c *nc);
u64 nxd_fast_first_seq_locked(struct nxd_c *nc);
int nxd_fast_endio(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb,
		   blk_status_t *error);
bool nxd_fast_has_work(struct nxd_c *nc);
void nxd_fast_ready(struct nxd_c *nc);
void nxd_fast_sync(struct nxd_c *nc, u64 before);
void nxd_fast_fail(struct nxd_c *nc, int err);
bool nxd_fast_lookup_locked(struct nxd_c *nc, u64 block, u32 *slot, u8 *mask);
bool nxd_fast_void_left(struct nxd_c *nc);
void nxd_fast_wait_committed(struct nxd_c *nc);

/* nxd-destage.c */
struct nxd_round;
int nxd_destage_alloc(struct nxd_c *nc);
void nxd_destage_free(struct nxd_c *nc);
bool nxd_destage_busy_locked(struct nxd_c *nc, u64 first, u64 last);
bool nxd_fill_busy_locked(struct nxd_c *nc, u64 first, u64 last);
int nxd_destager_start(struct nxd_c *nc);
void nxd_destager_stop(struct nxd_c *nc);
int nxd_drain(struct nxd_c *nc, bool for_message);

/* nxd-batch.c */
int nxd_batch_init(struct nxd_batch *b);
void nxd_batch_free(struct nxd_batch *b);
bool nxd_batch_fits(struct nxd_batch *b, u32 data, u32 recs);
void nxd_inval_ack(struct nxd_c *nc, struct nxd_inval *op);
void nxd_inval_park(struct nxd_c *nc, struct nxd_inval *op);
int nxd_batch_commit(struct nxd_c *nc);
void nxd_log_full_set(struct nxd_c *nc, bool full);
void *nxd_batch_block(struct nxd_c *nc, struct bio *bio, u64 blk, u8 mask);

/* nxd-writer.c */
int nxd_writer_start(struct nxd_c *nc);
void nxd_writer_stop(struct nxd_c *nc);
void nxd_writer_queue(struct nxd_c *nc, struct bio *bio);

/* nxd-auto.c */
void nxd_auto_setup(struct nxd_c *nc);
void nxd_auto_start(struct nxd_c *nc);
void nxd_auto_stop(struct nxd_c *nc);
bool nxd_auto_map(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb);
void nxd_accept_partial(struct bio *bio, struct nxd_pb *pb, sector_t n);
void nxd_auto_fill(struct nxd_c *nc, struct nxd_ioc_auto *ia);

/* nxd-ctl.c */
int nxd_ctl_init(void);
void nxd_ctl_exit(void);

/*
 * Fault injection, for the negative controls of the crash tests
 * (tests/vm/test_controls.py): only a build with NXD_FAULT_INJECT defined
 * (build/<kver>/fault/dm-nxd.ko, never installed) has the module parameter
 * fault_skip, a mask of ordering steps to leave out.  Elsewhere
 * nxd_fault() is false at compile time.
 */
/* direct segment header: no PREFLUSH */
#define NXD_FAULT_COMMIT_PREFLUSH	1
/* destage round: no HDD flush before the tail moves */
#define NXD_FAULT_ROUND_HDD_FLUSH	2
/* map: a direct HDD write is held 2 s before it goes down (a slow HDD queue) */
#define NXD_FAULT_HDD_WRITE_LATE	8
/* format: the version 1 layout (data from HDD sector 0), for its tests */
#define NXD_FAULT_FORMAT_V1		16
/* HDD sector of a logical sector: past the label in the version 2 layout. */
static inline sector_t nxd_hdd_sector(const struct nxd_c *nc, sector_t s)
{
	return s + nc->sb.data_offset;
}

#ifdef NXD_FAULT_INJECT
extern unsigned int nxd_fault_skip;
static inline bool nxd_fault(unsigned int step)
{
	return READ_ONCE(nxd_fault_skip) & step;
}
#else
static inline bool nxd_fault(unsigned int step)
{
	return false;
}
#endif

#endif /* DM_NXD_H */
