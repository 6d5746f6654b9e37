// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd mode adaptive: the glue of the routing that tunes itself
 * (kernel/nxd_auto.c) to the target.
 *
 * map asks nxd_auto_map() where a write goes.  It reads the controller's
 * threshold without a lock; under @auto_lock (only in mode adaptive) it
 * feeds the stream table and asks for probes.  end_io counts completed
 * writes per device and size bucket in per-CPU cells (nxd_hist_account);
 * a delayed work, every interval_ms, turns their deltas into samples,
 * reads the log's occupancy and the destager's headroom, applies the
 * admin bounds and runs the controller's tick.
 */
#include <linux/slab.h>
#include <linux/ktime.h>
#include <linux/workqueue.h>

#include "nxd.h"

/* A tick feeds at most this many samples per device and bucket. */
#define NXD_AUTO_FEED_MAX	64
/* The tick's period while the mode is not adaptive (ms). */
#define NXD_AUTO_IDLE_MS	1000

static u32 nxd_auto_stripe(struct nxd_c *nc)
{
	u32 s = READ_ONCE(nc->vol->tun.stripe_size);

	return s ? s : nc->hdd_io_opt;
}

/* The controller takes the volume's bounds, watermarks and stream size. */
static void nxd_auto_sync_tun(struct nxd_c *nc, u64 now)
{
	struct nxd_tun *t = &nc->vol->tun;
	u32 lo = READ_ONCE(t->auto_min_thr), hi = READ_ONCE(t->auto_max_thr);
	u32 lw = READ_ONCE(t->low_wm), hw = READ_ONCE(t->high_wm);
	u32 sm = READ_ONCE(t->stream_min);

	/* A sysfs write checks min <= max; the pair is read in two loads. */
	if (lo <= hi && (lo != nc->at.cfg.min_thr || hi != nc->at.cfg.max_thr))
		nxd_auto_set_bounds(&nc->at, lo, hi, now);
	if (lw < hw) {
		nc->at.cfg.low_wm = lw;
		nc->at.cfg.high_wm = hw;
	}
	nc->streams.min_sectors = (sm + 511) >> 9;
}

/* Set up at ctr: the threshold starts at the table's write_threshold. */
void nxd_auto_setup(struct nxd_c *nc)
{
	struct nxd_auto_cfg cfg;

	spin_lock_init(&nc->auto_lock);
	nxd_auto_cfg_default(&cfg);
	cfg.min_thr = nc->opt.auto_min_thr;
	cfg.max_thr = nc->opt.auto_max_thr;
	if (nc->opt.low_wm < nc->opt.high_wm) {
		cfg.low_wm = nc->opt.low_wm;
		cfg.high_wm = nc->opt.high_wm;
	}
	/* nxd_tun_valid() held at parse: min <= max, so this cannot fail */
	if (nxd_auto_init(&nc->at, &cfg, nc->opt.write_threshold))
		nxd_auto_init(&nc->at, &cfg, cfg.min_thr);
	nc->auto_thr = nxd_auto_threshold(&nc->at);
	nxd_stream_init(&nc->streams, nc->opt.stream_min);
	atomic64_set(&nc->split_tail, 0);
}

/* Deltas of the per-CPU sums since the last tick, as samples. */
static void nxd_auto_feed(struct nxd_c *nc)
{
	unsigned int d, k;
	u64 n, ns, dn, dns, i, mean;

	for (d = 0; d < NXD_H_NROUTE; d++) {
		for (k = 0; k < NXD_HIST_BUCKETS; k++) {
			nxd_auto_sums(nc->vol, d, k, &n, &ns);
			dn = n - nc->auto_prev_n[d][k];
			dns = ns - nc->auto_prev_ns[d][k];
			nc->auto_prev_n[d][k] = n;
			nc->auto_prev_ns[d][k] = ns;
			if (!dn || dn > n)
				continue;
			mean = div64_u64(dns, dn);
			/* bytes: the bucket's top, for nxd_hist_bucket() */
			for (i = 0; i < min_t(u64, dn, NXD_AUTO_FEED_MAX); i++)
				nxd_auto_sample(&nc->at, d, k ? 4096ULL << (k - 1) : 512,
						mean);
		}
	}
}

/* Occupancy, and headroom: 100 * (drained - filled) / drained. */
static void nxd_auto_log(struct nxd_c *nc)
{
	u64 written = nxd_ctr_sum(nc->vol, NXD_CTR(log_blocks_written));
	u64 used, fill, drain;
	u32 occ, head;

	spin_lock(&nc->lock);
	used = nxd_ring_used(&nc->ring);
	spin_unlock(&nc->lock);
	occ = div64_u64(used * 100, nc->ring.ring_blocks);
	fill = written - nc->auto_prev_written;
	/* a reset of the counters: no headroom this tick */
	if (written < nc->auto_prev_written ||
	    nc->auto_prev_used > used + fill) {
		head = nc->at.headroom;
	} else {
		drain = nc->auto_prev_used + fill - used;
		if (!drain)
			head = fill ? 0 : 100;
		else if (drain <= fill)
			head = 0;
		else
			head = div64_u64((drain - fill) * 100, drain);
	}
	nc->auto_prev_written = written;
	nc->auto_prev_used = used;
	nxd_auto_set_log(&nc->at, occ, head);
}

static void nxd_auto_work(struct work_struct *w)
{
	struct nxd_c *nc = container_of(to_delayed_work(w), struct nxd_c,
					auto_work);
	unsigned long delay = msecs_to_jiffies(NXD_AUTO_IDLE_MS);
	u64 now = ktime_get_ns();

	if (READ_ONCE(nc->vol->tun.mode) == NXD_MODE_ADAPTIVE &&
	    !atomic_read(&nc->degraded)) {
		spin_lock(&nc->auto_lock);
		nxd_auto_sync_tun(nc, now);
		nxd_auto_feed(nc);
		nxd_auto_log(nc);
		nxd_auto_tick(&nc->at, now);
		WRITE_ONCE(nc->auto_thr, nxd_auto_threshold(&nc->at));
		delay = msecs_to_jiffies(nc->at.cfg.interval_ms);
		spin_unlock(&nc->auto_lock);
	}
	queue_delayed_work(system_power_efficient_wq, &nc->auto_work,
			   delay ? delay : 1);
}

/* At resume; the first one also arms the work. */
void nxd_auto_start(struct nxd_c *nc)
{
	if (!nc->auto_on) {
		INIT_DELAYED_WORK(&nc->auto_work, nxd_auto_work);
		nc->auto_on = true;
	}
	queue_delayed_work(system_power_efficient_wq, &nc->auto_work, 0);
}

/* At postsuspend and dtr: the tick is not running, nor armed. */
void nxd_auto_stop(struct nxd_c *nc)
{
	if (nc->auto_on)
		cancel_delayed_work_sync(&nc->auto_work);
}

/* The piece of @bio that map handles is now its first @n sectors. */
/* Map only the first @n sectors of @bio: dm core sends the rest to map. */
void nxd_accept_partial(struct bio *bio, struct nxd_pb *pb, sector_t n)
{
	dm_accept_partial_bio(bio, n);
	pb->bytes = bio->bi_iter.bi_size;
	pb->align = ((bio->bi_iter.bi_sector | n) & 7) ? NXD_H_UNALIGNED :
			NXD_H_ALIGNED;
}

/*
 * Mode adaptive, not degraded: true if @bio goes to the log.  It may cut
 * @bio at a stripe boundary first (dm sends the rest to map again).  A
 * write routed to the HDD takes map's HDD path, which sends it through
 * the writer when it covers logged blocks, as any large write.
 */
bool nxd_auto_map(struct nxd_c *nc, struct bio *bio, struct nxd_pb *pb)
{
	sector_t s = bio->bi_iter.bi_sector, nr = bio_sectors(bio);
	u32 thr = READ_ONCE(nc->auto_thr), stripe;
	u64 bytes = (u64)nr << 9, tail;
	bool blocks = !((s | nr) & 7), to_log, run, probe;
	struct nxd_split sp;

	tail = atomic64_read(&nc->split_tail);
	if (tail == s + 1 && atomic64_cmpxchg(&nc->split_tail, tail, 0) == tail) {
		/* the partial stripe after a split's whole ones */
		atomic64_add(bytes, &nc->auto_split_log);
		to_log = true;
		goto feed;
	}
	stripe = nxd_auto_stripe(nc);
	if (bytes > thr && blocks && stripe >= NXD_BLOCK_SIZE &&
	    nxd_split_stripes(s, nr, stripe, &sp) && (sp.head || sp.tail)) {
		atomic64_inc(&nc->auto_split_cuts);
		if (sp.head) {
			/* the partial stripe first; the rest comes back */
			nxd_accept_partial(bio, pb, sp.head);
			atomic64_add((u64)sp.head << 9, &nc->auto_split_log);
			to_log = true;
		} else {
			nxd_accept_partial(bio, pb, sp.mid);
			atomic64_add((u64)sp.mid << 9, &nc->auto_split_hdd);
			atomic64_set(&nc->split_tail, s + sp.mid + 1);
			to_log = false;
		}
		nr = bio_sectors(bio);
		goto feed;
	}
	to_log = nxd_route_write_to_log(s, bytes, thr, nc->hdd_io_min,
					NXD_MODE_ADAPTIVE);
	spin_lock(&nc->auto_lock);
	/* every write extends the runs; a small one may then bypass */
	run = nxd_stream_write(&nc->streams, s, nr) && to_log && blocks;
	probe = !run && blocks && nxd_auto_probe(&nc->at, bytes);
	spin_unlock(&nc->auto_lock);
	if (run) {
		/* a proven sequential run: md merges it into whole stripes */
		atomic64_inc(&nc->auto_stream_writes);
		return false;
	}
	return probe ? !to_log : to_log;

feed:
	spin_lock(&nc->auto_lock);
	nxd_stream_write(&nc->streams, s, nr);
	spin_unlock(&nc->auto_lock);
	return to_log;
}

void nxd_auto_fill(struct nxd_c *nc, struct nxd_ioc_auto *ia)
{
	const struct nxd_auto_stats *st = &nc->at.st;
	unsigned int i, k, n = 0;
	u64 clock;

	ia->stripe_bytes = nxd_auto_stripe(nc);
	ia->stream_writes = atomic64_read(&nc->auto_stream_writes);
	ia->split_cuts = atomic64_read(&nc->auto_split_cuts);
	ia->split_log_bytes = atomic64_read(&nc->auto_split_log);
	ia->split_hdd_bytes = atomic64_read(&nc->auto_split_hdd);
	spin_lock(&nc->auto_lock);
	ia->threshold = nxd_auto_threshold(&nc->at);
	ia->min_thr = nc->at.cfg.min_thr;
	ia->max_thr = nc->at.cfg.max_thr;
	ia->occ_pct = nc->at.occ;
	ia->headroom_pct = nc->at.headroom;
	ia->stream_min = nc->streams.min_sectors << 9;
	ia->last_from = st->last_from;
	ia->last_to = st->last_to;
	ia->last_reason = st->last_reason;
	ia->ticks = st->ticks;
	ia->changes = st->changes;
	ia->raises = st->raises;
	ia->lowers = st->lowers;
	for (i = 0; i < NXD_AUTO_R_MAX && i < NXD_AUTO_NREASONS; i++)
		ia->by_reason[i] = st->by_reason[i];
	ia->probes = st->probes;
	for (i = 0; i < NXD_AUTO_DEVS; i++) {
		ia->samples[i] = st->samples[i];
		for (k = 0; k < NXD_HIST_BUCKETS; k++)
			ia->est_ns[i][k] = nxd_auto_est_ns(&nc->at, i, k);
	}
	ia->stream_hits = nc->streams.hits;
	ia->stream_misses = nc->streams.misses;
	ia->stream_merges = nc->streams.merges;
	ia->stream_evictions = nc->streams.evictions;
	ia->stream_longs = nc->streams.longs;
	clock = nc->streams.clock;
	for (i = 0; i < NXD_STREAM_SLOTS && n < NXD_AUTO_NSTREAMS; i++) {
		const struct nxd_stream_ent *e = &nc->streams.e[i];

		if (!e->used)
			continue;
		ia->streams[n].start = e->start;
		ia->streams[n].next = e->next;
		ia->streams[n].idle = clock - e->used;
		n++;
	}
	spin_unlock(&nc->auto_lock);
	ia->nstreams = n;
}
