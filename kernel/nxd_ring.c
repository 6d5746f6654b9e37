// SPDX-License-Identifier: GPL-2.0
/*
 * dm-nxd log ring accounting: where the next segment goes, which live
 * segment holds a ring slot, the tail recovery starts from.  Built into
 * dm-nxd.ko and into userspace tests; uses only what nxd_shim.h provides.
 */
#include "nxd_ring.h"
#include "nxd_codec.h"

int nxd_ring_init(struct nxd_ring *r, u64 ring_blocks, u64 head, u64 next_seq)
{
	u64 cap;

	memset(r, 0, sizeof(*r));
	/* Positions and index slots are u32. */
	if (ring_blocks < NXD_SEG_MAX_BLOCKS ||
	    ring_blocks > (u64)NXD_U32_MAX + 1 || head > ring_blocks)
		return -EINVAL;
	cap = ring_blocks / 2 + 1;
	if (cap > SIZE_MAX / sizeof(*r->fifo))
		return -ENOMEM;
	r->fifo = nxd_zalloc_big((size_t)(cap * sizeof(*r->fifo)));
	if (!r->fifo)
		return -ENOMEM;
	r->ring_blocks = ring_blocks;
	r->head = head;
	r->next_seq = next_seq;
	r->first_seq = next_seq;
	r->cap = (u32)cap;
	return 0;
}

void nxd_ring_reset(struct nxd_ring *r, u64 head, u64 next_seq)
{
	r->head = head;
	r->next_seq = next_seq;
	r->first_seq = next_seq;
	r->first = 0;
	r->count = 0;
}

void nxd_ring_free(struct nxd_ring *r)
{
	nxd_free_big(r->fifo);
	memset(r, 0, sizeof(*r));
}

int nxd_ring_reserve(const struct nxd_ring *r, u32 nr_data, u64 *pos)
{
	u64 p, t, need;

	if (nr_data > NXD_SEG_MAX_DATA)
		return -EINVAL;
	if (r->count >= r->cap)
		return -ENOSPC;
	need = 1 + (u64)nr_data;
	p = nxd_next_seg_pos(r->ring_blocks, r->head);
	if (r->count) {
		t = r->fifo[r->first].pos;
		if (r->head > t) {
			/* Live span [t, head): room after head or before t. */
			if (p != r->head && need > t)
				return -ENOSPC;
		} else {
			/* Wrapped (or full): room only in [head, t). */
			if (p != r->head || r->head + need > t)
				return -ENOSPC;
		}
	}
	*pos = p;
	return 0;
}

void nxd_ring_push(struct nxd_ring *r, u64 pos, u32 nr_data, u32 live)
{
	struct nxd_segd *s;
	u32 i;

	if (r->count >= r->cap)
		return;
	i = r->first + r->count;
	if (i >= r->cap)
		i -= r->cap;
	s = &r->fifo[i];
	s->pos = (u32)pos;
	s->nr_data = (u16)nr_data;
	s->live = (u16)live;
	s->clean = 0;
	s->sup = 0;
	r->count++;
	r->head = pos + 1 + nr_data;
	r->next_seq++;
}

struct nxd_segd *nxd_ring_at(struct nxd_ring *r, u32 i)
{
	if (i >= r->count)
		return NULL;
	i = r->first + i;
	if (i >= r->cap)
		i -= r->cap;
	return &r->fifo[i];
}

/* Distance from ring offset @from forward to @to. */
static u64 nxd_ring_dist(const struct nxd_ring *r, u64 from, u64 to)
{
	return to >= from ? to - from : r->ring_blocks - from + to;
}

struct nxd_segd *nxd_ring_find(struct nxd_ring *r, u64 slot, u64 *seq)
{
	struct nxd_segd *s;
	u32 lo, hi, mid;
	u64 t, d;

	if (!r->count || slot >= r->ring_blocks)
		return NULL;
	t = r->fifo[r->first].pos;
	d = nxd_ring_dist(r, t, slot);
	/* Last segment whose header lies at or before @slot. */
	lo = 0;
	hi = r->count;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (nxd_ring_dist(r, t, nxd_ring_at(r, mid)->pos) <= d)
			lo = mid;
		else
			hi = mid;
	}
	s = nxd_ring_at(r, lo);
	if (d - nxd_ring_dist(r, t, s->pos) > s->nr_data)
		return NULL;
	if (seq)
		*seq = r->first_seq + lo;
	return s;
}

bool nxd_ring_put(struct nxd_ring *r, u64 slot, u64 new_seq, bool clean)
{
	struct nxd_segd *s;
	u64 seq, gap;

	s = nxd_ring_find(r, slot, &seq);
	if (!s || !s->live)
		return false;
	s->live--;
	if (clean && s->clean)
		s->clean--;
	if (new_seq > seq) {
		gap = new_seq - seq;
		if (gap > NXD_U32_MAX)
			gap = NXD_U32_MAX;
		if (gap > s->sup)
			s->sup = (u32)gap;
	}
	return true;
}

bool nxd_ring_clean(struct nxd_ring *r, u64 slot)
{
	struct nxd_segd *s = nxd_ring_find(r, slot, NULL);

	if (!s || s->clean >= s->live)
		return false;
	s->clean++;
	return true;
}

u32 nxd_ring_safe_prefix(struct nxd_ring *r, u32 n, u64 durable_below,
			 u64 durable_from, const u8 *lossy)
{
	u64 need = 0, s, end;
	u32 i, ok = 0;

	if (n > r->count)
		n = r->count;
	for (i = 0; i < n; i++) {
		const struct nxd_segd *sd = nxd_ring_at(r, i);

		if (sd->sup) {
			s = r->first_seq + i + sd->sup;
			/* Saturated: somewhere beyond; never durable by seq. */
			if (sd->sup == NXD_U32_MAX)
				s = NXD_U64_MAX;
			if (s < durable_below ||
			    (s >= durable_from && s != NXD_U64_MAX))
				s = 0;
			else if (s - r->first_seq < n && lossy[s - r->first_seq])
				s = NXD_U64_MAX;
			if (s > need)
				need = s;
		}
		end = r->first_seq + i + 1;
		if (need < end)
			ok = i + 1;
	}
	return ok;
}

void nxd_ring_pop(struct nxd_ring *r)
{
	if (!r->count)
		return;
	r->first++;
	if (r->first == r->cap)
		r->first = 0;
	r->count--;
	r->first_seq++;
}

void nxd_ring_trim_newest(struct nxd_ring *r, u32 nr_data)
{
	struct nxd_segd *s = r->count ? nxd_ring_at(r, r->count - 1) : NULL;

	if (!s || nr_data > s->nr_data)
		return;
	s->nr_data = (u16)nr_data;
	r->head = s->pos + 1 + nr_data;
}

void nxd_ring_unpush(struct nxd_ring *r)
{
	struct nxd_segd *s = r->count ? nxd_ring_at(r, r->count - 1) : NULL;

	if (!s)
		return;
	/* It was placed at next_seg_pos(old head), which is its own pos. */
	r->head = s->pos;
	r->count--;
	r->next_seq--;
}

u64 nxd_ring_used(const struct nxd_ring *r)
{
	u64 t;

	if (!r->count)
		return 0;
	t = r->fifo[r->first].pos;
	return r->head > t ? r->head - t : r->ring_blocks - t + r->head;
}

void nxd_ring_tail(const struct nxd_ring *r, u64 *pos, u64 *seq)
{
	if (r->count) {
		*pos = r->fifo[r->first].pos;
		*seq = r->first_seq;
	} else {
		*pos = nxd_next_seg_pos(r->ring_blocks, r->head);
		*seq = r->next_seq;
	}
}
