/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd destager: what its three files share (nxd-round-write.c,
 * nxd-round-read.c, nxd-destage.c).  The round's buffers are allocated
 * once per table (nxd_destage_alloc).
 */
#ifndef NXD_DESTAGE_H
#define NXD_DESTAGE_H

#include <linux/sizes.h>

#include "nxd.h"

/*
 * A round takes up to 2048 segments (16 MiB of log): at queue depth 1 each
 * small write is its own segment, and sorting needs many blocks to merge.
 */
#define NXD_ROUND_SEGS		2048
#define NXD_DESTAGE_MAX_BIO	SZ_1M

/*
 * Stripes a round fills at most, and the HDD data read for them: two
 * halves, one read into while the other's writes are in flight.
 */
#define NXD_FILL_MAX		4096
#define NXD_FILL_BUF		SZ_16M
#define NXD_FILL_HALF		(NXD_FILL_BUF / 2)

/* Stripes a sweeping round looks at, at most (index lookups under the lock). */
#define NXD_SWEEP_STRIPES	1024

struct nxd_dblk {
	u64 block;
	u32 slot;
	u8 mask;
	bool copy;		/* false: superseded by a finished HDD write, or CLEAN */
	bool extra;		/* clean ahead: not in the round's segments */
	bool nocrc;		/* extra: ORDERED segment, no crc to check */
	bool filled;		/* written with its stripe (stripe fill) */
	u16 crc;		/* extra: nxd_ient.rsvd when taken */
	/*
	 * Destage bios holding this copy not yet completed, plus one until
	 * the last of them is built: 0 once the copy has landed on the HDD.
	 */
	atomic_t unlanded;
	void *data;
};

/*
 * A destage bio knows which copies it carries: rd->blk[first..last], and
 * for a fill write the half of fbuf its data is in (else -1).
 */
struct nxd_dbio {
	u32 first, last;
	s8 half;
	u32 stripe;		/* a fill write's index in rd->fill */
	struct bio bio;
};

struct nxd_round {
	u64 first_seq;		/* of segs[0] */
	u32 nsegs;
	struct nxd_segd segs[NXD_ROUND_SEGS];
	/* segs[i] has a live copy that could not go to the HDD */
	u8 lossy[NXD_ROUND_SEGS];
	u32 nblk;
	bool sorted;		/* @blk sorted by block: bsearch in busy_locked */
	/* Destaging only because the HDD was idle: stop for its next I/O. */
	bool yield;
	bool yielded;		/* it did: some copies were never written */
	/* Clean ahead also sweeps stripes by address, from sweep_next on. */
	bool sweep;
	u64 sweep_next;		/* block: the destager's alone, kept across rounds */
	struct nxd_dblk *blk;	/* at most dbuf_blocks */
	/* Stripe fill: stripes being filled (sorted), their size in blocks */
	u32 nfill;
	u32 fill_blocks;
	u64 fill[NXD_FILL_MAX];
	u8 fill_err[NXD_FILL_MAX];	/* its HDD read failed */
	/* Its write completed, or none will come: HDD writes to it may go. */
	DECLARE_BITMAP(fill_landed, NXD_FILL_MAX);
	atomic_t fill_pending;
	atomic_t fill_wr[2];	/* fill writes in flight from each half of fbuf */
	void *fbuf;		/* NXD_FILL_BUF, allocated at the first fill */
};

/* nxd-round-write.c */
int nxd_dblk_cmp(const void *a, const void *b);
u32 nxd_round_lower(struct nxd_round *rd, u32 n, u64 block);
int nxd_round_copy(struct nxd_c *nc, struct nxd_round *rd, u64 *bytes);
bool nxd_fill_on(struct nxd_c *nc);

/* nxd-round-read.c */
int nxd_destage_collect(struct nxd_c *nc, struct nxd_round *rd, u64 first_seq);
void nxd_destage_extend(struct nxd_c *nc, struct nxd_round *rd, u32 used);

#endif
