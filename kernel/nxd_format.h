/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-nxd on-disk format (see docs/on-disk-format.md).
 *
 * SSD, in 4 KiB blocks:  0: superblock copy A, 1: copy B, 2..7 reserved,
 * 8..end: the log ring of variable-length segments.  A segment is one
 * header block followed by up to NXD_SEG_MAX_DATA data blocks.
 *
 * HDD, format version 2: block 0 holds a label carrying the volume and HDD
 * UUIDs; the data area starts at data_offset (at least 1 MiB, a multiple
 * of the HDD's optimal I/O size), so that the raw array never shows the
 * file system on the volume.  Version 1 (older volumes, still activated):
 * data from sector 0, the label in the last MiB below the 1 MiB-rounded
 * size.
 *
 * All integers are little endian.
 */
#ifndef NXD_FORMAT_H
#define NXD_FORMAT_H

#include "nxd_shim.h"

#define NXD_BLOCK_SIZE		4096
#define NXD_BLOCK_SHIFT		12
#define NXD_SECTORS_PER_BLOCK	8
/* Versions of the superblock and label: 2 new volumes, 1 still read. */
#define NXD_FORMAT_VERSION	2
#define NXD_FORMAT_V1		1

#define NXD_SB_MAGIC		0x3142535f44584e00ULL	/* "\0NXD_SB1" */
#define NXD_SEG_MAGIC		0x3147455344584e00ULL	/* "\0NXDSEG1" */
#define NXD_LABEL_MAGIC		0x314c4448445f584eULL	/* bytes "NX_DHDL1" */

#define NXD_SB_BLOCKS		2
#define NXD_RING_START		8	/* first ring block on the SSD */
#define NXD_SEG_MAX_BLOCKS	128	/* header + data, 512 KiB */
#define NXD_SEG_MAX_DATA	(NXD_SEG_MAX_BLOCKS - 1)
#define NXD_MIN_RING_BLOCKS	(4 * NXD_SEG_MAX_BLOCKS)
#define NXD_MIN_SSD_SECTORS	((NXD_RING_START + NXD_MIN_RING_BLOCKS) * NXD_SECTORS_PER_BLOCK)
/*
 * Largest log a format makes: 128 GiB.  The index and the ring FIFO are
 * sized for a full log, 53 bytes a block (1.66 GiB here); the rest of a
 * larger SSD stays unused.
 */
#define NXD_MAX_RING_BLOCKS	(32ULL << 20)

/* HDD space we keep for the label: 1 MiB at the end (version 1). */
#define NXD_HDD_RESERVED_SECTORS 2048ULL
/*
 * Version 2: the data area starts at least this far in (1 MiB), and at
 * most NXD_DATA_OFFSET_MAX (a larger optimal I/O size is not followed).
 */
#define NXD_DATA_OFFSET_MIN	2048ULL
#define NXD_DATA_OFFSET_MAX	524288ULL

#define NXD_SB_CLEAN		BIT(0)	/* written at clean shutdown */
#define NXD_SB_FLAGS_KNOWN	NXD_SB_CLEAN

/*
 * Volume name and tunables (in what used to be reserved bytes, so a
 * superblock written before they existed has them all zero): the dm
 * name and the tunables at the time of the write.  tun_flags
 * NXD_SB_TUN_VALID: the tunable fields hold values; without it (an older
 * superblock) nothing is stored.  An empty name: none stored.
 */
#define NXD_SB_NAME_LEN		128
#define NXD_SB_TUN_VALID	BIT(0)
/*
 * The adaptive routing tunables (auto_min_thr .. stripe_size) hold
 * values; without it they take their defaults.
 */
#define NXD_SB_TUN_AUTO		BIT(1)
/* stream_share holds a value; without it, its default. */
#define NXD_SB_TUN_SHARE	BIT(2)

struct nxd_sb {
	__le64 magic;
	__le32 crc;		/* crc32c of the block with crc = 0 */
	__le32 version;
	__le64 sb_seq;		/* bumped by every write; newest valid copy wins */
	u8 vol_uuid[16];
	u8 hdd_uuid[16];
	__le64 hdd_sectors;	/* HDD size when labelled */
	__le64 hdd_label_sector;
	__le64 data_sectors;	/* largest logical size the volume may have */
	__le32 block_size;
	__le32 seg_max_blocks;
	__le64 ring_start;	/* in blocks */
	__le64 ring_blocks;
	__le64 tail_pos;	/* ring offset of the oldest live segment */
	__le64 tail_seq;	/* and its sequence number */
	__le64 gen;		/* bumped at every activation */
	__le64 gen_start_seq;	/* first seq written by generation @gen */
	__le64 head_pos;	/* next segment position, valid if CLEAN */
	__le64 head_seq;
	__le32 flags;
	__le32 reserved0;
	char name[NXD_SB_NAME_LEN];	/* dm name, NUL-padded; "" = unknown */
	__le32 tun_flags;	/* NXD_SB_TUN_* */
	__le32 mode;		/* enum nxd_mode */
	__le64 write_threshold;	/* bytes */
	__le32 destage_rate;	/* MB/s, 0 = unlimited */
	u8 low_wm;		/* % log occupancy */
	u8 high_wm;
	u8 ssd_discard;
	u8 drain_on_suspend;
	__le32 auto_min_thr;	/* bytes, with NXD_SB_TUN_AUTO */
	__le32 auto_max_thr;
	__le32 stream_min;
	__le32 stripe_size;
	__le64 data_offset;	/* version 2: HDD sector of logical sector 0 */
	u8 stream_share;	/* %, with NXD_SB_TUN_SHARE */
	u8 reserved[3759];
} __packed;

/*
 * Segment flags.  ORDERED: the data blocks were written, and flushed by
 * the header write's PREFLUSH, before the header; DATA records carry no
 * checksum (val 0) and recovery does not read the data.  Without it the
 * segment was written in one I/O and every DATA record has the crc32c of
 * its block.
 */
#define NXD_SEG_ORDERED		BIT(0)
#define NXD_SEG_FLAGS_KNOWN	NXD_SEG_ORDERED

#define NXD_REC_DATA	1
#define NXD_REC_INVAL	2

struct nxd_seg_rec {
	__le64 block;		/* DATA: logical block; INVAL: first block */
	__le32 val;		/* DATA: crc32c of data block; INVAL: block count */
	u8 type;
	u8 mask;		/* DATA: valid 512 B sectors of the block */
	__le16 reserved;
} __packed;

#define NXD_SEG_HDR_BYTES	64
#define NXD_SEG_MAX_RECS	((NXD_BLOCK_SIZE - NXD_SEG_HDR_BYTES) / 16)

struct nxd_seg_hdr {
	__le64 magic;
	__le32 crc;		/* crc32c of the block with crc = 0 */
	__le32 flags;
	__le64 seq;
	__le64 gen;
	__le64 pos;		/* ring offset of this header */
	__le32 nr_data;		/* data blocks after the header */
	__le32 nr_recs;
	u8 vol_uuid[16];
	struct nxd_seg_rec recs[NXD_SEG_MAX_RECS];
} __packed;

/*
 * Label flags.  ABANDONED: the log must not be replayed (written by
 * versions before 0.2 after an SSD failure, and by the abandon_log
 * message, which records the blocks it gave up in lost_*).
 * FROZEN: an SSD write failed; the log is valid only in the window
 * [frozen_tail_seq, frozen_end_seq): recovery replays that window and
 * nothing after it, and the destager moves frozen_tail while the SSD
 * cannot take a superblock.
 */
#define NXD_LABEL_LOG_ABANDONED	BIT(0)
#define NXD_LABEL_LOG_FROZEN	BIT(1)
#define NXD_LABEL_FLAGS_KNOWN	(NXD_LABEL_LOG_ABANDONED | NXD_LABEL_LOG_FROZEN)

/*
 * The host that owns the volume (nxdctl's system id), in what used to be
 * reserved bytes: a label written before it existed has no owner.  The
 * kernel never interprets it, only keeps it across its label rewrites.
 */
#define NXD_LABEL_OWNER_LEN	64

/*
 * ABANDONED by the abandon_log message: the logged blocks given up, as
 * ranges of 4 KiB blocks in ascending order, the first NXD_LABEL_LOST_MAX
 * of them.  Reserved (zero) bytes before: an older label lists none.
 */
#define NXD_LABEL_LOST_MAX	240

struct nxd_lost_range {
	__le64 first;		/* 4 KiB block */
	__le64 nr;		/* blocks */
} __packed;

struct nxd_hdd_label {
	__le64 magic;
	__le32 crc;
	__le32 version;
	u8 vol_uuid[16];
	u8 hdd_uuid[16];
	__le64 hdd_sectors;	/* HDD size when labelled */
	__le32 flags;		/* NXD_LABEL_* */
	__le32 reserved0;
	__le64 abandoned_gen;	/* generation whose log was abandoned */
	__le64 frozen_end_seq;	/* FROZEN: first segment not to replay */
	__le64 frozen_tail_pos;	/* FROZEN: replay from here if newer than */
	__le64 frozen_tail_seq;	/*   the superblock's tail */
	char owner[NXD_LABEL_OWNER_LEN];	/* host, NUL-padded; "" = none */
	__le64 lost_blocks;	/* ABANDONED: 4 KiB blocks given up */
	__le32 lost_ranges;	/* ABANDONED: ranges they form, all of them */
	__le32 lost_listed;	/*   of which in lost[] (the first ones) */
	struct nxd_lost_range lost[NXD_LABEL_LOST_MAX];
	__le64 data_offset;	/* version 2: as the superblock's */
	u8 reserved[72];
} __packed;

static_assert(sizeof(struct nxd_sb) == NXD_BLOCK_SIZE, "sb size");
static_assert(offsetof(struct nxd_sb, name) == 160, "sb name offset");
static_assert(offsetof(struct nxd_sb, auto_min_thr) == 312, "sb auto offset");
static_assert(offsetof(struct nxd_sb, data_offset) == 328, "sb data_offset offset");
static_assert(offsetof(struct nxd_sb, reserved) == 337, "sb reserved offset");
static_assert(sizeof(struct nxd_seg_hdr) == NXD_BLOCK_SIZE, "seg hdr size");
static_assert(sizeof(struct nxd_hdd_label) == NXD_BLOCK_SIZE, "label size");
static_assert(offsetof(struct nxd_hdd_label, owner) == 96, "label owner offset");
static_assert(offsetof(struct nxd_hdd_label, lost) == 176, "label lost offset");
static_assert(offsetof(struct nxd_hdd_label, data_offset) == 4016, "label data_offset offset");
static_assert(sizeof(struct nxd_seg_rec) == 16, "rec size");

#endif /* NXD_FORMAT_H */
