// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl's statistics model (stats.h).  No output, no kernel access:
 * unit-tested by tools/tests/test_fmt.c.
 */
#include <string.h>

#include "../kernel/nxd_core.h"
#include "stats.h"

static_assert(NXD_HIST_BUCKETS == NXD_HIST_NBUCKETS, "histogram buckets");

const char *const nxdctl_dir_key[NXD_H_NDIR] = { "read", "write" };
const char *const nxdctl_route_key[NXD_H_NROUTE] = { "ssd", "hdd" };
const char *const nxdctl_align_key[NXD_H_NALIGN] = { "aligned", "unaligned" };

void nxdctl_bucket_range(unsigned int b, uint64_t *lo, uint64_t *hi)
{
	if (b == 0) {
		*lo = 0;
		*hi = 4095;
	} else if (b == 1) {
		*lo = *hi = 4096;
	} else if (b < NXD_HIST_NBUCKETS - 1) {
		*lo = (4096ULL << (b - 2)) + 1;
		*hi = 4096ULL << (b - 1);
	} else {
		*lo = (4096ULL << (NXD_HIST_NBUCKETS - 3)) + 1;
		*hi = UINT64_MAX;
	}
}

int nxdctl_bucket_of_bound(uint64_t bytes)
{
	unsigned int b;
	uint64_t lo, hi;

	for (b = 0; b < NXD_HIST_NBUCKETS; b++) {
		nxdctl_bucket_range(b, &lo, &hi);
		if (hi == bytes)
			return b;
	}
	return -1;
}

void nxdctl_cell_sum(const struct nxd_ioc_stats *st, int dir, unsigned int b,
		     int route, int align, struct nxd_hist_cell *out)
{
	int r, a;

	memset(out, 0, sizeof(*out));
	for (r = 0; r < NXD_H_NROUTE; r++) {
		if (route >= 0 && r != route)
			continue;
		for (a = 0; a < NXD_H_NALIGN; a++) {
			const struct nxd_hist_cell *c = &st->hist[dir][b][r][a];

			if (align >= 0 && a != align)
				continue;
			out->count += c->count;
			out->bytes += c->bytes;
			out->time_ns += c->time_ns;
		}
	}
}

#define CNT(n, g, h) { #n, offsetof(struct nxd_ioc_counters, n), g, h }
const struct nxdctl_counter nxdctl_counters[] = {
	CNT(log_blocks, true,
	    "Capacity of the SSD log ring, in 4 KiB blocks."),
	CNT(log_used_blocks, true,
	    "Log ring blocks from the oldest live segment to the head."),
	CNT(index_entries, true,
	    "Logical 4 KiB blocks with a logged copy not yet destaged."),
	CNT(index_bytes, true,
	    "Kernel memory of the index and the segment list."),
	CNT(writes_logged, false,
	    "Write bios copied into the SSD log."),
	CNT(writes_direct, false,
	    "Write bios routed to the HDD."),
	CNT(writes_around_full, false,
	    "Write bios sent to the HDD because the log was full."),
	CNT(reads_hdd, false,
	    "Read bios served entirely by the HDD."),
	CNT(reads_ssd, false,
	    "Read bios served at least partly from the log."),
	CNT(segments_written, false,
	    "Log segments written."),
	CNT(log_blocks_written, false,
	    "Log blocks written, headers included."),
	CNT(invalidations, false,
	    "Logged blocks invalidated by discards over them."),
	CNT(rmw_reads, false,
	    "Partial-block merges that read the logged block."),
	CNT(destaged_blocks, false,
	    "Blocks copied from the log to the HDD."),
	CNT(destaged_bytes, false,
	    "Bytes copied from the log to the HDD."),
	CNT(destage_bios, false,
	    "Write bios issued to the HDD by the destager."),
	CNT(destage_throttled_ms, false,
	    "Milliseconds the destager waited for its rate limit or HDD idleness."),
	CNT(segments_reclaimed, false,
	    "Log segments freed after destaging."),
	CNT(ssd_errors, false,
	    "Failed I/O to the SSD; a reset leaves it."),
	CNT(hdd_errors, false,
	    "Failed I/O to the HDD; a reset leaves it."),
	CNT(flushes, false,
	    "Flush requests."),
	CNT(discards, false,
	    "Discard requests."),
	CNT(recovered_segments, true,
	    "Segments replayed at the last activation."),
	CNT(recovered_blocks, true,
	    "Blocks replayed at the last activation."),
	CNT(recovery_us, true,
	    "Microseconds the last recovery took."),
	CNT(degraded, true,
	    "1 if the SSD failed and writes bypass the log."),
	CNT(events, false,
	    "Device-mapper events raised (degraded, log full, drain done, acked lost); never reset."),
	CNT(last_event, true,
	    "Kind of the latest event: 0 none, 1 degraded, 2 log_full, 3 drain_done, 4 acked_lost."),
	CNT(events_degraded, false,
	    "Times the volume degraded (an SSD write failed); never reset."),
	CNT(events_log_full, false,
	    "Times writes began going round a full log; never reset."),
	CNT(events_drain_done, false,
	    "Drains that finished, and degraded logs that emptied; never reset."),
	CNT(log_full, true,
	    "1 while writes go round a full log."),
	CNT(destage_stripe_bios, false,
	    "Destage write bios covering whole aligned stripes of the HDD (io_opt)."),
	CNT(destage_busy_us, false,
	    "Microseconds the destager spent in rounds (reading, writing, flushing)."),
	CNT(destage_hdd_bytes, false,
	    "Bytes of destage write bios, the stripe fill's gaps included."),
	CNT(acked_lost, true,
	    "1 once acknowledged log writes were found lost: flushes and FUA writes fail."),
	CNT(events_acked_lost, false,
	    "Times acknowledged log writes were found lost (once per table); never reset."),
};
#undef CNT
const unsigned int nxdctl_nr_counters = ARRAY_SIZE_NXDCTL(nxdctl_counters);

/* Before target 2.3.0 there is no destage_hdd_bytes: the copies' bytes. */
static uint64_t destage_mean_bio(const struct nxd_ioc_counters *c)
{
	uint64_t b = c->destage_hdd_bytes ? c->destage_hdd_bytes : c->destaged_bytes;

	return c->destage_bios ? b / c->destage_bios : 0;
}

static uint64_t destage_stripe_pct(const struct nxd_ioc_counters *c)
{
	return c->destage_bios ? c->destage_stripe_bios * 100 / c->destage_bios : 0;
}

static uint64_t destage_rate(const struct nxd_ioc_counters *c)
{
	return c->destage_busy_us ?
	       (uint64_t)((double)c->destaged_bytes * 1e6 / (double)c->destage_busy_us) : 0;
}

const struct nxdctl_derived nxdctl_derived[] = {
	{ "destage_mean_bio_bytes", destage_mean_bio },
	{ "destage_stripe_full_pct", destage_stripe_pct },
	{ "destage_busy_bytes_per_s", destage_rate },
};
const unsigned int nxdctl_nr_derived = ARRAY_SIZE_NXDCTL(nxdctl_derived);

uint64_t nxdctl_counter_get(const struct nxd_ioc_counters *c, unsigned int i)
{
	uint64_t v;

	memcpy(&v, (const char *)c + nxdctl_counters[i].off, sizeof(v));
	return v;
}

static void counter_set(struct nxd_ioc_counters *c, unsigned int i,
			uint64_t v)
{
	memcpy((char *)c + nxdctl_counters[i].off, &v, sizeof(v));
}

void nxdctl_stats_delta(const struct nxd_ioc_stats *now,
			const struct nxd_ioc_stats *prev,
			struct nxd_ioc_stats *out)
{
	const struct nxd_hist_cell *n = &now->hist[0][0][0][0];
	const struct nxd_hist_cell *p = &prev->hist[0][0][0][0];
	struct nxd_hist_cell *o;
	unsigned int i, ncells = sizeof(now->hist) / sizeof(*n);

	*out = *now;
	o = &out->hist[0][0][0][0];
	/* A counter going backwards means someone reset: show it as is. */
	for (i = 0; i < ncells; i++) {
		if (n[i].count < p[i].count)
			continue;
		o[i].count = n[i].count - p[i].count;
		o[i].bytes = n[i].bytes - p[i].bytes;
		o[i].time_ns = n[i].time_ns - p[i].time_ns;
	}
	for (i = 0; i < nxdctl_nr_counters; i++) {
		uint64_t a = nxdctl_counter_get(&now->c, i);
		uint64_t b = nxdctl_counter_get(&prev->c, i);

		if (!nxdctl_counters[i].gauge && a >= b)
			counter_set(&out->c, i, a - b);
	}
}

void nxdctl_route_why(const struct nxd_ioc_stats *st, unsigned int b,
		      uint64_t thr, uint32_t mode, struct nxdctl_why *w)
{
	struct nxd_hist_cell sa, su, h;
	uint64_t lo, hi;

	memset(w, 0, sizeof(*w));
	nxdctl_bucket_range(b, &lo, &hi);
	nxdctl_cell_sum(st, NXD_H_WRITE, b, NXD_H_SSD, NXD_H_ALIGNED, &sa);
	nxdctl_cell_sum(st, NXD_H_WRITE, b, NXD_H_SSD, NXD_H_UNALIGNED, &su);
	nxdctl_cell_sum(st, NXD_H_WRITE, b, NXD_H_HDD, -1, &h);
	if (mode == NXD_MODE_LOG_ALL) {
		w->ssd_mode = sa.count + su.count;
		w->hdd_full = h.count;
		return;
	}
	if (mode == NXD_MODE_ADAPTIVE) {
		/* its threshold moves, runs and stripe cuts: nxdctl routing */
		w->ssd_mode = sa.count + su.count;
		w->hdd_mode = h.count;
		return;
	}
	if (mode == NXD_MODE_PASSTHROUGH || !thr) {
		w->hdd_mode = h.count;
		w->ssd_either = sa.count + su.count;
		return;
	}
	if (hi <= thr) {
		w->ssd_size = sa.count + su.count;
		w->hdd_full = h.count;
	} else if (lo > thr) {
		w->ssd_unaligned = su.count;
		w->ssd_chunk = sa.count;
		w->hdd_size = h.count;
	} else {
		w->ssd_unaligned = su.count;
		w->ssd_either = sa.count;
		w->hdd_either = h.count;
	}
}
