/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * dm-nxd control device ABI: /dev/nxd-control.
 *
 * Every request starts with struct nxd_ioc_hdr.  The caller sets @size to
 * sizeof() of the whole request struct it was built with and @version to
 * NXD_IOCTL_VERSION; the kernel copies min(size, its own size), zero-fills
 * the rest, and writes back how many bytes it filled in @size.  New fields
 * are only ever appended.  Reserved fields must be zero.
 */
#ifndef _UAPI_NXD_IOCTL_H
#define _UAPI_NXD_IOCTL_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/ioctl.h>
#else
#include <linux/types.h>
#include <sys/ioctl.h>
#endif

#define NXD_IOCTL_VERSION	1
#define NXD_CONTROL_NAME	"nxd-control"
#define NXD_NAME_LEN		128

#define NXD_HIST_NBUCKETS	16	/* <4K, 4K, 4K+1-8K, ..., 16M+1-32M, >32M */

enum nxd_hist_dir { NXD_H_READ = 0, NXD_H_WRITE = 1, NXD_H_NDIR = 2 };
/* Where a bio went: SSD log (reads: any part served from the log) or HDD. */
enum nxd_hist_route { NXD_H_SSD = 0, NXD_H_HDD = 1, NXD_H_NROUTE = 2 };
/* Aligned: offset and length multiples of 4 KiB. */
enum nxd_hist_align { NXD_H_ALIGNED = 0, NXD_H_UNALIGNED = 1, NXD_H_NALIGN = 2 };

struct nxd_hist_cell {
	__u64 count;		/* bios */
	__u64 bytes;		/* their total size */
	__u64 time_ns;		/* total service time, submit to completion */
};

/* Selects a volume: by dm device number if @dev != 0, else by dm name. */
struct nxd_ioc_hdr {
	__u32 size;
	__u32 version;
	__u32 flags;
	__u32 reserved;
	__u64 dev;		/* new_encode_dev() of the dm device, or 0 */
	char name[NXD_NAME_LEN];
};

#define NXD_IOC_F_RESET		0x1U	/* read and clear atomically */

/* Counters, in the order status prints them; append only. */
struct nxd_ioc_counters {
	__u64 log_blocks;		/* ring capacity, 4 KiB blocks */
	__u64 log_used_blocks;		/* occupied, incl. headers */
	__u64 index_entries;
	__u64 index_bytes;
	__u64 writes_logged;		/* bios */
	__u64 writes_direct;		/* bios sent to the HDD by routing */
	__u64 writes_around_full;	/* small writes sent to the HDD, log full */
	__u64 reads_hdd;
	__u64 reads_ssd;		/* served at least partly from the log */
	__u64 segments_written;
	__u64 log_blocks_written;
	__u64 invalidations;		/* blocks invalidated by HDD writes/discards */
	__u64 rmw_reads;		/* partial-block merges read from the log */
	__u64 destaged_blocks;
	__u64 destaged_bytes;
	__u64 destage_bios;
	__u64 destage_throttled_ms;
	__u64 segments_reclaimed;
	__u64 ssd_errors;
	__u64 hdd_errors;
	__u64 flushes;
	__u64 discards;
	__u64 recovered_segments;
	__u64 recovered_blocks;
	__u64 recovery_us;
	__u64 degraded;			/* 1 if the SSD failed and writes bypass it */
	/* Events (dm_table_event): never reset, they survive table reloads. */
	__u64 events;			/* raised, all kinds */
	__u64 last_event;		/* NXD_EV_* of the latest, 0 if none */
	__u64 events_degraded;		/* the volume degraded (SSD write failed) */
	__u64 events_log_full;		/* writes began going round a full log */
	__u64 events_drain_done;	/* a drain finished, or a degraded log emptied */
	__u64 log_full;			/* 1 while writes go round a full log */
	/* Appended in target 2.2.0. */
	__u64 destage_stripe_bios;	/* destage bios of whole aligned stripes */
	__u64 destage_busy_us;		/* time spent in destage rounds */
	/* Appended in target 2.3.0. */
	__u64 destage_hdd_bytes;	/* bytes of destage write bios, fill's gaps included */
	__u64 acked_lost;		/* 1 once acknowledged log writes were found lost */
	__u64 events_acked_lost;	/* acked_lost was set, once per table; never reset */
	/* Appended in target 2.5.0. */
	__u64 log_abandoned_blocks;	/* blocks given up by abandon_log, 0 if not */
	__u64 reserved[26];
};

/* Event kinds, as in last_event and the events_* counters. */
#define NXD_EV_DEGRADED		1
#define NXD_EV_LOG_FULL		2
#define NXD_EV_DRAIN_DONE	3
#define NXD_EV_ACKED_LOST	4	/* target 2.3.0 */

struct nxd_ioc_stats {
	struct nxd_ioc_hdr hdr;
	struct nxd_ioc_counters c;
	struct nxd_hist_cell hist[NXD_H_NDIR][NXD_HIST_NBUCKETS][NXD_H_NROUTE][NXD_H_NALIGN];
};

struct nxd_ioc_vol {
	__u64 dev;
	char name[NXD_NAME_LEN];
	__u8 vol_uuid[16];
	__u64 sectors;
	__u32 write_threshold;
	__u32 reserved0;		/* was read_threshold, always 0, ignored */
	__u32 mode;
	__u32 reserved[5];
};

#define NXD_IOC_MAX_VOLS	64

struct nxd_ioc_list {
	struct nxd_ioc_hdr hdr;		/* name/dev ignored */
	__u32 count;			/* volumes filled in */
	__u32 total;			/* volumes that exist */
	struct nxd_ioc_vol vols[NXD_IOC_MAX_VOLS];
};

/*
 * Adaptive routing (mode adaptive): the threshold controller, its changes
 * by reason, the stream table.  Read-only; NXD_IOC_F_RESET is refused.
 */
/* none, ssd_faster, hdd_faster, log_occupancy, destage_headroom, bounds; 2 spare */
#define NXD_AUTO_NREASONS	8
#define NXD_AUTO_NSTREAMS	32

struct nxd_ioc_stream {
	__u64 start;		/* first sector of the run */
	__u64 next;		/* sector its next write starts at */
	__u64 idle;		/* writes seen since it was last used */
};

struct nxd_ioc_auto {
	struct nxd_ioc_hdr hdr;
	__u32 active;		/* 1 if the volume has a live table */
	__u32 mode;		/* enum nxd_mode of the volume */
	__u32 threshold;	/* the controller's, bytes */
	__u32 min_thr;		/* its bounds */
	__u32 max_thr;
	__u32 occ_pct;		/* log occupancy it last saw */
	__u32 headroom_pct;	/* destage headroom it last saw */
	__u32 stripe_bytes;	/* the split's stripe, 0 = none */
	__u32 stream_min;	/* bytes a run needs to bypass the log */
	__u32 last_from;	/* the last change: old, new value, reason */
	__u32 last_to;
	__u32 last_reason;
	__u32 nstreams;		/* entries in use, first in @streams */
	__u32 reserved0;
	__u64 ticks;
	__u64 changes;		/* threshold changes */
	__u64 raises;
	__u64 lowers;
	__u64 by_reason[NXD_AUTO_NREASONS];
	__u64 probes;		/* writes sent to the other device to measure it */
	__u64 samples[2];	/* completed writes measured: SSD, HDD */
	__u64 est_ns[2][NXD_HIST_NBUCKETS];	/* service-time EWMA, ns; 0 none */
	__u64 stream_writes;	/* small writes sent to the HDD in a long run */
	__u64 split_cuts;	/* cuts of large writes at stripe boundaries */
	__u64 split_log_bytes;	/* of those, partial stripes sent to the log */
	__u64 split_hdd_bytes;	/* and whole stripes sent to the HDD */
	__u64 stream_hits;
	__u64 stream_misses;
	__u64 stream_merges;
	__u64 stream_evictions;
	__u64 stream_longs;	/* writes the detector found in a long run */
	__u64 reserved[16];
	struct nxd_ioc_stream streams[NXD_AUTO_NSTREAMS];
};

#define NXD_IOC_MAGIC		0xDB
#define NXD_IOC_GET_STATS	_IOWR(NXD_IOC_MAGIC, 1, struct nxd_ioc_stats)
#define NXD_IOC_LIST		_IOWR(NXD_IOC_MAGIC, 2, struct nxd_ioc_list)
#define NXD_IOC_GET_AUTO	_IOWR(NXD_IOC_MAGIC, 3, struct nxd_ioc_auto)

#endif /* _UAPI_NXD_IOCTL_H */
