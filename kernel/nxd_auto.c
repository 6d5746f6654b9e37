// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd routing that tunes itself: the automatic write threshold, the
 * stream detector across tasks and the stripe-aware split.  Built into
 * dm-nxd.ko and into userspace tests; uses only what nxd_shim.h provides.
 *
 * The threshold controller
 * ------------------------
 * Writes of at most the threshold go to the log, larger aligned ones to
 * the HDD (nxd_route_write_to_log()).  Each completed request is a sample:
 * device, size, service time.  Per size bucket (nxd_hist_bucket()) and
 * device, an EWMA of the service time (ns, 4 fraction bits, weight
 * 1/2^ewma_shift) and two counts: samples ever and "fresh" samples since
 * the last change (halved every epoch_ticks ticks, so old evidence fades).
 *
 * Only the boundary matters: lo, the largest bucket with fresh samples at
 * or below the threshold's, and hi, the smallest above it.  A tick votes
 *   - lower (hdd_faster) if in lo the HDD beats the log by margin_pct,
 *   - lower (destage_headroom) if the occupancy is above low_wm and the
 *     destager's headroom is below headroom_min,
 *   - raise (ssd_faster) if in hi the log beats the HDD by margin_pct, the
 *     destager keeps up, and the new threshold fits under the occupancy
 *     cap computed at occupancy + occ_hyst;
 * a latency vote needs min_samples fresh samples of both devices in its
 * bucket.  A vote changes the threshold once it has lasted hold_ticks
 * counted ticks (ticks closer than interval_ms are not counted): a raise
 * takes in bucket hi, a lower drops bucket lo.  So a change needs a
 * margin, fresh samples and time, and the margin on both sides is a dead
 * band.  A lower for headroom also bars raises to the old value or above
 * until the epoch ends, so that the latency vote does not undo it at once.
 *
 * The log must not starve the destager: log occupancy caps the threshold,
 * max_thr up to low_wm, halved per step of (high_wm - low_wm) / n above it
 * (n the number of halvings from max_thr to min_thr), min_thr from
 * high_wm.  A threshold above the cap drops to it at the next tick.
 *
 * Each boundary bucket holds samples of one device only, the one the
 * threshold picks; nxd_auto_probe() sends 1 in probe_every of the writes
 * of a boundary bucket to the other device while it has too few samples.
 * Every change is counted, by direction and reason, with the last one's
 * time, old and new value.
 */
#include "nxd_auto.h"

/* ---- automatic write threshold ---- */

void nxd_auto_cfg_default(struct nxd_auto_cfg *cfg)
{
	cfg->min_thr = 4096;
	cfg->max_thr = 1U << 20;
	cfg->low_wm = 25;
	cfg->high_wm = 75;
	cfg->occ_hyst = 5;
	cfg->headroom_min = 10;
	cfg->margin_pct = 20;
	cfg->min_samples = 16;
	cfg->hold_ticks = 3;
	cfg->epoch_ticks = 50;
	cfg->interval_ms = 100;
	cfg->ewma_shift = 3;
	cfg->probe_every = 32;
}

static bool nxd_auto_cfg_ok(const struct nxd_auto_cfg *c)
{
	return c->min_thr && c->min_thr <= c->max_thr &&
	       c->low_wm < c->high_wm && c->high_wm <= 100 &&
	       c->occ_hyst <= 100 && c->headroom_min <= 100 &&
	       c->margin_pct <= 1000 && c->min_samples &&
	       c->hold_ticks && c->epoch_ticks &&
	       c->ewma_shift >= 1 && c->ewma_shift <= 10;
}

/* The largest size of bucket @k: a threshold that logs all of it. */
static u32 nxd_auto_bucket_top(unsigned int k)
{
	if (k == 0)
		return 4095;
	if (k >= NXD_HIST_BUCKETS - 1)
		return NXD_U32_MAX;
	return 4096U << (k - 1);	/* 4K, 8K (k 2) ... 32M (k 14) */
}

/* Number of bits of @x (0 for 0). */
static u32 nxd_auto_bits(u32 x)
{
	return x ? 32 - __builtin_clz(x) : 0;
}

u32 nxd_auto_occ_cap(const struct nxd_auto_cfg *cfg, u32 occ_pct)
{
	u32 n, k, cap;

	if (occ_pct <= cfg->low_wm)
		return cfg->max_thr;
	if (occ_pct >= cfg->high_wm)
		return cfg->min_thr;
	n = nxd_auto_bits(cfg->max_thr) - nxd_auto_bits(cfg->min_thr);
	/* low_wm < occ < high_wm, n <= 31: k < n, no overflow */
	k = n * (occ_pct - cfg->low_wm) / (cfg->high_wm - cfg->low_wm);
	cap = cfg->max_thr >> k;
	return cap < cfg->min_thr ? cfg->min_thr : cap;
}

static u32 nxd_auto_clamp(const struct nxd_auto_cfg *cfg, u32 thr)
{
	if (thr < cfg->min_thr)
		return cfg->min_thr;
	if (thr > cfg->max_thr)
		return cfg->max_thr;
	return thr;
}

static bool nxd_auto_has_fresh(const struct nxd_auto_bucket *b)
{
	return b->fresh[NXD_AUTO_SSD] || b->fresh[NXD_AUTO_HDD];
}

/* The boundary buckets: the nearest ones with fresh samples. */
static void nxd_auto_boundary(struct nxd_auto *a)
{
	unsigned int t = nxd_hist_bucket(a->thr), k;

	a->lo = t;
	for (k = t + 1; k-- > 0;) {
		if (nxd_auto_has_fresh(&a->b[k])) {
			a->lo = k;
			break;
		}
	}
	a->hi = t + 1 < NXD_HIST_BUCKETS ? t + 1 : t;
	for (k = t + 1; k < NXD_HIST_BUCKETS; k++) {
		if (nxd_auto_has_fresh(&a->b[k])) {
			a->hi = k;
			break;
		}
	}
}

int nxd_auto_init(struct nxd_auto *a, const struct nxd_auto_cfg *cfg,
		  u32 thr)
{
	if (!nxd_auto_cfg_ok(cfg))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->cfg = *cfg;
	a->thr = nxd_auto_clamp(cfg, thr);
	a->headroom = 100;
	a->ceil = NXD_U32_MAX;
	nxd_auto_boundary(a);
	return 0;
}

static void nxd_auto_change(struct nxd_auto *a, u32 thr,
			    enum nxd_auto_reason why, u64 now_ns)
{
	unsigned int k;

	a->st.changes++;
	if (thr > a->thr)
		a->st.raises++;
	else
		a->st.lowers++;
	a->st.by_reason[why]++;
	a->st.last_ns = now_ns;
	a->st.last_from = a->thr;
	a->st.last_to = thr;
	a->st.last_reason = why;
	/* the destager fell behind at the old value: not again this epoch */
	if (why == NXD_AUTO_R_HEADROOM)
		a->ceil = a->thr;
	a->thr = thr;
	a->streak_dir = 0;
	a->streak = 0;
	a->epoch = 0;
	/* the boundary moved: the next change needs new evidence */
	for (k = 0; k < NXD_HIST_BUCKETS; k++) {
		a->b[k].fresh[NXD_AUTO_SSD] = 0;
		a->b[k].fresh[NXD_AUTO_HDD] = 0;
	}
	nxd_auto_boundary(a);
}

int nxd_auto_set_bounds(struct nxd_auto *a, u32 min, u32 max, u64 now_ns)
{
	u32 thr;

	if (!min || min > max)
		return -EINVAL;
	a->cfg.min_thr = min;
	a->cfg.max_thr = max;
	thr = nxd_auto_clamp(&a->cfg, a->thr);
	if (thr == a->thr)
		return 0;
	nxd_auto_change(a, thr, NXD_AUTO_R_BOUNDS, now_ns);
	return 1;
}

void nxd_auto_sample(struct nxd_auto *a, enum nxd_auto_dev dev, u64 bytes,
		     u64 ns)
{
	struct nxd_auto_bucket *b;
	unsigned int sh = a->cfg.ewma_shift;
	u64 v;

	if ((unsigned int)dev >= NXD_AUTO_DEVS) {
		a->st.dropped++;
		return;
	}
	a->st.samples[dev]++;
	b = &a->b[nxd_hist_bucket(bytes)];
	v = (ns < NXD_AUTO_NS_CAP ? ns : NXD_AUTO_NS_CAP) << NXD_AUTO_FP;
	if (!b->n[dev])
		b->ewma[dev] = v;
	else	/* e += (v - e) / 2^sh, without signed values */
		b->ewma[dev] = b->ewma[dev] - (b->ewma[dev] >> sh) + (v >> sh);
	if (b->n[dev] < NXD_U32_MAX)
		b->n[dev]++;
	if (b->fresh[dev] < NXD_U32_MAX)
		b->fresh[dev]++;
}

void nxd_auto_set_log(struct nxd_auto *a, u32 occ_pct, u32 headroom_pct)
{
	a->occ = occ_pct < 100 ? occ_pct : 100;
	a->headroom = headroom_pct < 100 ? headroom_pct : 100;
}

/* True if @fast beats @slow by the margin in @b, on enough samples. */
static bool nxd_auto_beats(const struct nxd_auto *a,
			   const struct nxd_auto_bucket *b,
			   enum nxd_auto_dev fast, enum nxd_auto_dev slow)
{
	/* ewma < 2^44 and the factors <= 1100: the products fit */
	return b->fresh[fast] >= a->cfg.min_samples &&
	       b->fresh[slow] >= a->cfg.min_samples &&
	       b->ewma[fast] * (100 + a->cfg.margin_pct) < b->ewma[slow] * 100;
}

bool nxd_auto_tick(struct nxd_auto *a, u64 now_ns)
{
	const struct nxd_auto_cfg *c = &a->cfg;
	enum nxd_auto_reason why = NXD_AUTO_R_NONE;
	bool behind, raise = false;
	u32 cap, occ_up, to = a->thr;
	unsigned int k;
	int dir = 0;

	if (a->ticked &&
	    now_ns - a->last_tick_ns < (u64)c->interval_ms * 1000000)
		return false;
	a->ticked = 1;
	a->last_tick_ns = now_ns;
	a->st.ticks++;
	if (++a->epoch >= c->epoch_ticks) {
		a->epoch = 0;
		a->ceil = NXD_U32_MAX;
		for (k = 0; k < NXD_HIST_BUCKETS; k++) {
			a->b[k].fresh[NXD_AUTO_SSD] >>= 1;
			a->b[k].fresh[NXD_AUTO_HDD] >>= 1;
		}
	}
	nxd_auto_boundary(a);

	/* the log filling is urgent: no vote, no hold */
	cap = nxd_auto_occ_cap(c, a->occ);
	if (a->thr > cap) {
		nxd_auto_change(a, cap, NXD_AUTO_R_LOG_FULL, now_ns);
		return true;
	}

	behind = a->occ > c->low_wm && a->headroom < c->headroom_min;
	if (a->thr > c->min_thr &&
	    nxd_auto_beats(a, &a->b[a->lo], NXD_AUTO_HDD, NXD_AUTO_SSD)) {
		dir = -1;
		why = NXD_AUTO_R_HDD_FASTER;
		to = a->lo ? nxd_auto_bucket_top(a->lo - 1) : 0;
	} else if (a->thr > c->min_thr && behind) {
		dir = -1;
		why = NXD_AUTO_R_HEADROOM;
		to = a->lo ? nxd_auto_bucket_top(a->lo - 1) : 0;
	} else if (!behind && a->hi > nxd_hist_bucket(a->thr)) {
		occ_up = a->occ + c->occ_hyst;
		to = nxd_auto_clamp(c, nxd_auto_bucket_top(a->hi));
		raise = to > a->thr && to < a->ceil &&
			to <= nxd_auto_occ_cap(c, occ_up < 100 ? occ_up : 100);
		if (raise &&
		    nxd_auto_beats(a, &a->b[a->hi], NXD_AUTO_SSD, NXD_AUTO_HDD)) {
			dir = 1;
			why = NXD_AUTO_R_SSD_FASTER;
		}
	}
	if (dir < 0)
		to = nxd_auto_clamp(c, to);

	if (!dir || dir != a->streak_dir || why != a->streak_why) {
		a->streak_dir = dir;
		a->streak_why = why;
		a->streak = 0;
	}
	if (!dir)
		return false;
	if (++a->streak < c->hold_ticks)
		return false;
	nxd_auto_change(a, to, why, now_ns);
	return true;
}

bool nxd_auto_probe(struct nxd_auto *a, u64 bytes)
{
	unsigned int k = nxd_hist_bucket(bytes);
	enum nxd_auto_dev other;

	if (!a->cfg.probe_every || (k != a->lo && k != a->hi))
		return false;
	other = bytes <= a->thr ? NXD_AUTO_HDD : NXD_AUTO_SSD;
	if (a->b[k].fresh[other] >= a->cfg.min_samples)
		return false;
	if (++a->probe_ctr < a->cfg.probe_every)
		return false;
	a->probe_ctr = 0;
	a->st.probes++;
	return true;
}

u64 nxd_auto_est_ns(const struct nxd_auto *a, enum nxd_auto_dev dev,
		    unsigned int bucket)
{
	if ((unsigned int)dev >= NXD_AUTO_DEVS || bucket >= NXD_HIST_BUCKETS)
		return 0;
	return a->b[bucket].ewma[dev] >> NXD_AUTO_FP;
}

static const char *const nxd_auto_reason_names[NXD_AUTO_R_MAX] = {
	[NXD_AUTO_R_NONE] = "none",
	[NXD_AUTO_R_SSD_FASTER] = "ssd_faster",
	[NXD_AUTO_R_HDD_FASTER] = "hdd_faster",
	[NXD_AUTO_R_LOG_FULL] = "log_occupancy",
	[NXD_AUTO_R_HEADROOM] = "destage_headroom",
	[NXD_AUTO_R_BOUNDS] = "bounds",
};

const char *nxd_auto_reason_name(enum nxd_auto_reason r)
{
	if ((unsigned int)r >= NXD_AUTO_R_MAX)
		return "unknown";
	return nxd_auto_reason_names[r];
}

/* ---- stream detection across tasks ---- */

/*
 * Page-cache writeback of one file arrives as small writes from several
 * tasks, slightly out of order.  An entry is a run [start, next): a write
 * at next extends it, a write ending at start extends it backwards, and a
 * write that closes the gap between two runs joins them.  A write that
 * starts a new entry at most NXD_STREAM_GAP sectors past a run's end is
 * counted with that run (a task ahead of the others), until the gap fills
 * and the two merge.  A linear scan of the 32 entries is cheaper than a
 * hash at this size.
 */

void nxd_stream_init(struct nxd_streams *s, u64 min_bytes)
{
	memset(s, 0, sizeof(*s));
	s->min_sectors = (min_bytes >> 9) + !!(min_bytes & 511);
}

static struct nxd_stream_ent *nxd_stream_find(struct nxd_streams *s,
					      bool by_next, u64 sector)
{
	unsigned int i;

	for (i = 0; i < NXD_STREAM_SLOTS; i++) {
		struct nxd_stream_ent *e = &s->e[i];

		if (e->used && (by_next ? e->next : e->start) == sector)
			return e;
	}
	return NULL;
}

/* A free entry, else the least recently used one (evicted). */
static struct nxd_stream_ent *nxd_stream_victim(struct nxd_streams *s)
{
	struct nxd_stream_ent *v = &s->e[0];
	unsigned int i;

	for (i = 0; i < NXD_STREAM_SLOTS; i++) {
		if (!s->e[i].used)
			return &s->e[i];
		if (s->e[i].used < v->used)
			v = &s->e[i];
	}
	s->evictions++;
	return v;
}

/* New entry @e just ahead of a run: the two lengths, else 0. */
static u64 nxd_stream_ahead(struct nxd_streams *s,
			    const struct nxd_stream_ent *e)
{
	unsigned int i;

	for (i = 0; i < NXD_STREAM_SLOTS; i++) {
		const struct nxd_stream_ent *l = &s->e[i];

		if (l != e && l->used && l->next < e->start &&
		    e->start - l->next <= NXD_STREAM_GAP) {
			s->ahead++;
			return l->next - l->start + (e->next - e->start);
		}
	}
	return 0;
}

bool nxd_stream_write(struct nxd_streams *s, u64 sector, u64 sectors)
{
	struct nxd_stream_ent *e, *f;
	u64 end, len = 0;

	if (!sectors || sectors > NXD_U64_MAX - sector)
		return false;
	end = sector + sectors;
	s->clock++;
	e = nxd_stream_find(s, true, sector);
	if (e) {
		s->hits++;
		e->next = end;
		f = nxd_stream_find(s, false, end);
		if (f && f != e) {
			/* the write closed the gap to the next run */
			e->next = f->next;
			f->used = 0;
			s->merges++;
		}
	} else {
		e = nxd_stream_find(s, false, end);
		if (e) {
			s->hits++;
			e->start = sector;
		} else {
			s->misses++;
			e = nxd_stream_victim(s);
			e->start = sector;
			e->next = end;
			e->used = s->clock;
			len = nxd_stream_ahead(s, e);
		}
	}
	e->used = s->clock;
	if (!len)
		len = e->next - e->start;
	if (len < s->min_sectors)
		return false;
	s->longs++;
	return true;
}

/* ---- stripe-aware split ---- */

bool nxd_split_stripes(u64 sector, u64 sectors, u32 stripe_bytes,
		       struct nxd_split *out)
{
	u32 ss = stripe_bytes >> 9, rem;
	u64 head, whole;

	out->head = sectors;
	out->mid = 0;
	out->tail = 0;
	if (!ss || (stripe_bytes & 511))
		return false;
	rem = nxd_rem_u64(sector, ss);
	head = rem ? ss - rem : 0;
	if (head >= sectors)
		return false;
	whole = sectors - head - nxd_rem_u64(sectors - head, ss);
	if (!whole)
		return false;
	out->head = head;
	out->mid = whole;
	out->tail = sectors - head - whole;
	return true;
}
