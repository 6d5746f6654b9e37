// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd statistics: the NytroXD-style size histogram and counters, and
 * the names of the events.  The lowest layer: it calls no other file.
 *
 * Per-CPU atomic64 cells: the hot path touches only its own CPU's lines,
 * and read-and-clear (atomic64_xchg) neither loses nor doubles a count
 * racing with it.
 */
#include <linux/slab.h>
#include <linux/ktime.h>
#include <linux/percpu.h>

#include "nxd.h"

#define CREATE_TRACE_POINTS
#include "nxd_trace.h"

int nxd_stats_alloc(struct nxd_vol *vol)
{
	vol->pcpu = alloc_percpu(struct nxd_pcpu);
	return vol->pcpu ? 0 : -ENOMEM;
}

void nxd_stats_free(struct nxd_vol *vol)
{
	free_percpu(vol->pcpu);
	vol->pcpu = NULL;
}

/* Add @v to counter @ctr (NXD_CTR(name)) of @nc's volume; any context. */
void nxd_count(struct nxd_c *nc, unsigned int ctr, u64 v)
{
	struct nxd_pcpu *p = get_cpu_ptr(nc->vol->pcpu);

	atomic64_add(v, &p->ctr[ctr]);
	put_cpu_ptr(nc->vol->pcpu);
}

void nxd_hist_account(struct nxd_vol *vol, struct nxd_pb *pb)
{
	u64 ns = ktime_get_ns() - pb->start_ns;
	struct nxd_pcpu *p = get_cpu_ptr(vol->pcpu);
	atomic64_t *c = p->hist[pb->dir][nxd_hist_bucket(pb->bytes)][pb->route][pb->align];

	atomic64_inc(&c[0]);
	atomic64_add(pb->bytes, &c[1]);
	atomic64_add(ns, &c[2]);
	if (pb->dir == NXD_H_WRITE) {
		atomic64_inc(&p->auto_n[pb->route][nxd_hist_bucket(pb->bytes)]);
		atomic64_add(ns, &p->auto_ns[pb->route][nxd_hist_bucket(pb->bytes)]);
	}
	put_cpu_ptr(vol->pcpu);
	trace_nxd_io_done(vol->dev, pb->sector, pb->bytes, pb->dir, pb->route,
			  pb->align, ns);
}

/* Completed writes of @route in size bucket @k: count and total ns. */
void nxd_auto_sums(struct nxd_vol *vol, unsigned int route, unsigned int k,
		   u64 *n, u64 *ns)
{
	int cpu;

	*n = 0;
	*ns = 0;
	for_each_possible_cpu(cpu) {
		struct nxd_pcpu *p = per_cpu_ptr(vol->pcpu, cpu);

		*n += atomic64_read(&p->auto_n[route][k]);
		*ns += atomic64_read(&p->auto_ns[route][k]);
	}
}

/* Counter @ctr summed over the CPUs (a reset may make it go back). */
u64 nxd_ctr_sum(struct nxd_vol *vol, unsigned int ctr)
{
	u64 v = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		v += atomic64_read(&per_cpu_ptr(vol->pcpu, cpu)->ctr[ctr]);
	return v;
}

static u64 nxd_take(atomic64_t *a, bool reset)
{
	return reset ? atomic64_xchg(a, 0) : atomic64_read(a);
}

/*
 * Counters a reset leaves alone: the error counts are the volume's
 * health, not its workload, and an alert must not lose them to a reset
 * of the histogram.
 */
static bool nxd_ctr_kept(unsigned int i)
{
	return i == NXD_CTR(ssd_errors) || i == NXD_CTR(hdd_errors);
}

/*
 * Sum the per-CPU cells into @st; with @reset, clear what was read: the
 * histogram and the request counters, never the error counters.  The
 * event counters are the volume's, outside the per-CPU cells.
 */
void nxd_stats_fill(struct nxd_vol *vol, struct nxd_ioc_stats *st, bool reset)
{
	const unsigned int ncell = sizeof(st->hist) / sizeof(__u64);
	__u64 *h = (__u64 *)st->hist, *c = (__u64 *)&st->c;
	int cpu;
	unsigned int i;

	BUILD_BUG_ON(sizeof(((struct nxd_pcpu *)0)->hist) !=
		     sizeof(st->hist) / sizeof(__u64) * sizeof(atomic64_t));
	for_each_possible_cpu(cpu) {
		struct nxd_pcpu *p = per_cpu_ptr(vol->pcpu, cpu);
		atomic64_t *ph = (atomic64_t *)p->hist;

		for (i = 0; i < ncell; i++)
			h[i] += nxd_take(&ph[i], reset);
		for (i = 0; i < NXD_NCTR; i++)
			c[i] += nxd_take(&p->ctr[i], reset && !nxd_ctr_kept(i));
	}
	st->c.events = 0;
	for (i = 1; i < NXD_EV_NR; i++)
		st->c.events += atomic64_read(&vol->ev_count[i]);
	st->c.last_event = atomic_read(&vol->ev_last);
	st->c.events_degraded = atomic64_read(&vol->ev_count[NXD_EV_DEGRADED]);
	st->c.events_log_full = atomic64_read(&vol->ev_count[NXD_EV_LOG_FULL]);
	st->c.events_drain_done = atomic64_read(&vol->ev_count[NXD_EV_DRAIN_DONE]);
	st->c.events_acked_lost = atomic64_read(&vol->ev_count[NXD_EV_ACKED_LOST]);
}

/* Values that are state, not counts: never reset. */
void nxd_gauges_fill(struct nxd_c *nc, struct nxd_ioc_counters *c)
{
	spin_lock(&nc->lock);
	c->log_blocks = nc->ring.ring_blocks;
	c->log_used_blocks = nxd_ring_used(&nc->ring);
	c->index_entries = nc->ix.count;
	c->index_bytes = nxd_index_mem(&nc->ix) +
			 (u64)nc->ring.cap * sizeof(struct nxd_segd);
	spin_unlock(&nc->lock);
	c->recovered_segments = nc->rec_segments;
	c->recovered_blocks = nc->rec_blocks;
	c->recovery_us = nc->rec_us;
	c->degraded = atomic_read(&nc->degraded);
	c->log_full = READ_ONCE(nc->log_full);
	c->acked_lost = atomic_read(&nc->acked_lost);
	c->log_abandoned_blocks = READ_ONCE(nc->abandoned_blocks);
}

const char *nxd_event_name(unsigned int kind)
{
	switch (kind) {
	case NXD_EV_DEGRADED:
		return "degraded";
	case NXD_EV_LOG_FULL:
		return "log_full";
	case NXD_EV_DRAIN_DONE:
		return "drain_done";
	case NXD_EV_ACKED_LOST:
		return "acked_lost";
	default:
		return "none";
	}
}
