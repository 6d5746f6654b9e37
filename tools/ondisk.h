/* SPDX-License-Identifier: GPL-2.0 */
/*
 * nxd metadata on block devices, read with the module's own codec
 * (kernel/nxd_codec.c): the SSD superblock, the HDD label and the log's
 * live segments.  No sysfs, no device-mapper: nxd-probe (the udev helper)
 * links this file and the core only.
 */
#ifndef NXDCTL_ONDISK_H
#define NXDCTL_ONDISK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../kernel/nxd_core.h"

enum role { ROLE_NONE, ROLE_SSD, ROLE_HDD };

/* What a device's nxd metadata says: the SSD superblock or the HDD label. */
struct nxd_meta {
	uint8_t vol_uuid[16];
	uint8_t hdd_uuid[16];
	uint64_t hdd_sectors;		/* HDD size when labelled */
	uint64_t hdd_label_sector;	/* sb only */
	uint64_t data_sectors;		/* sb only */
	uint64_t ring_blocks;		/* sb only */
	bool clean;			/* sb only */
	struct nxd_sb_info sb;		/* sb only: the copy in use */
	int sb_copy;			/* sb only: its index, 0 or 1 */
	struct nxd_label_info label;	/* label only */
	uint64_t label_sector;		/* label only: where it was found */
	uint64_t data_offset;		/* HDD sector of the data area's start */
	int format_version;		/* 1 or 2, as on the device */
};

/*
 * The format version of a volume whose data area starts at @data_offset:
 * the codec writes version 2 for a non-zero offset, version 1 for 0, and
 * decodes nothing else.
 */
static inline int nxd_layout_version(uint64_t data_offset)
{
	return data_offset ? NXD_FORMAT_VERSION : NXD_FORMAT_V1;
}

bool uuid_eq(const uint8_t *a, const uint8_t *b);
/* Open for reading: O_DIRECT where the device allows it. */
int open_dev(const char *path);
/* Size in bytes of block device or regular file @fd, or -errno. */
int fd_size(int fd, uint64_t *bytes);
/* One 4 KiB block at byte @off into a fresh aligned buffer (free()). */
int read_blk(int fd, uint64_t off, void **blk);

/*
 * Read the superblock of a would-be SSD (@fd, @bytes long).  0: found,
 * 1: no nxd superblock, < 0: -errno (damaged, I/O error, unsupported).
 */
int ondisk_read_sb(int fd, uint64_t bytes, struct nxd_meta *out);
/* Both copies as decoded (res: nxd_sb_decode's results), for show-super. */
int ondisk_read_sb_copies(int fd, uint64_t bytes, struct nxd_sb_info sbs[2],
			  int res[2]);
/*
 * The same for the HDD label: in block 0 (version 2), else at
 * nxd_hdd_data_sectors() (version 1), else at sector @hint (the
 * superblock's hdd_label_sector, for a version 1 HDD that grew; 0: none,
 * block 0 being tried anyway).  The first two are where the kernel looks
 * when it formats.
 */
int ondisk_read_label(int fd, uint64_t bytes, uint64_t hint,
		      struct nxd_meta *out);
/* Where ondisk_read_label() looks without a hint: block 0, the v1 end spot. */
#define NXD_LABEL_SPOTS 2
void ondisk_label_spots(uint64_t bytes, uint64_t spot[NXD_LABEL_SPOTS]);
/*
 * Whether the 4 KiB block at sector @sec of @fd starts with the HDD label
 * magic (a label, valid or not): 1 yes, 0 no, < 0 -errno.
 */
int ondisk_label_magic_at(int fd, uint64_t sec);

/*
 * What nxd metadata block device @path carries.  @hint: where an HDD label
 * may sit besides block 0 and the version 1 end spot (the SSD
 * superblock's hdd_label_sector), or 0.  A valid label in block 0 makes
 * an HDD whatever follows it.
 */
enum role probe_role(const char *path, uint64_t hint, struct nxd_meta *od,
		     uint64_t *bytes, int *err);

/* What the log of an SSD holds: the segments recovery would replay. */
struct nxd_log_scan {
	uint64_t segments;	/* live segments found */
	uint64_t data_blocks;	/* their data blocks (logged writes) */
	uint64_t first_seq;	/* seq of the first one */
	bool abandoned;		/* the label says: never replayed */
	bool frozen;		/* the label froze it after an SSD failure */
	bool complete;		/* false: stopped at @max_segs */
};

/*
 * Walk the log of SSD @fd (superblock in @ssd) the way recovery does,
 * from the tail to the first segment that does not follow; @label is the
 * HDD's label (its frozen window), or NULL if the HDD is not at hand.
 * Stops after @max_segs segments, or at the first data block if
 * @stop_at_data.  0 or -errno (an unreadable header).
 */
int ondisk_log_scan(int fd, const struct nxd_meta *ssd,
		    const struct nxd_label_info *label, uint64_t max_segs,
		    bool stop_at_data, struct nxd_log_scan *out);

/*
 * The udev environment of a device of role @r (nothing for ROLE_NONE):
 * NXD_ROLE, NXD_VOL_UUID, NXD_HDD_UUID; with @fs also what
 * 64-nxd-members.rules turns into ID_FS_* (nxd-probe(8) in nxdctl(8)).
 */
void ondisk_print_env(FILE *f, enum role r, const struct nxd_meta *m,
		      bool fs);

#endif /* NXDCTL_ONDISK_H */
