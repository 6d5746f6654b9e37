/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What nxdctl takes from kernel/nxd_core.c, behind plain C types: a
 * separate file because the userspace nxd_shim.h typedefs of __le64 & co.
 * clash with <linux/types.h>, which nxd_ioctl.h needs.
 */
#ifndef NXDCTL_CORE_H
#define NXDCTL_CORE_H

#include <stdint.h>
#include <stdbool.h>

/* Parse "64K" / "1M" / "4096" (nxd_parse_size); 0 or -EINVAL / -ERANGE. */
int nxdctl_parse_size(const char *s, uint64_t *out);
/* Logical sectors usable on an HDD of @hdd_sectors; the label sits there. */
uint64_t nxdctl_hdd_data_sectors(uint64_t hdd_sectors);
/* The kernel's label for histogram bucket @b (nxd_hist_labels). */
const char *nxdctl_core_hist_label(unsigned int b);
/* The kernel's bucket for a request of @bytes (nxd_hist_bucket), or -1. */
int nxdctl_core_hist_bucket(uint64_t bytes);
/* Smallest SSD dm-nxd accepts, in bytes. */
uint64_t nxdctl_min_ssd_bytes(void);
/* 0 if the mode name is known, with its number in *mode. */
int nxdctl_mode_parse(const char *s, uint32_t *mode);

struct nxdctl_ondisk {
	uint8_t vol_uuid[16];
	uint8_t hdd_uuid[16];
	uint64_t hdd_sectors;		/* HDD size when labelled */
	uint64_t hdd_label_sector;	/* sb only */
	uint64_t data_sectors;		/* sb only */
	uint64_t ring_blocks;		/* sb only */
	bool clean;			/* sb only */
};

/*
 * Read the superblock of a would-be SSD (@fd, @bytes long).  0: found,
 * 1: no nxd superblock, < 0: -errno (damaged, I/O error, unsupported).
 */
int nxdctl_read_sb(int fd, uint64_t bytes, struct nxdctl_ondisk *out);
/*
 * The same for the HDD label at nxdctl_hdd_data_sectors(), or else at
 * sector @hint (the superblock's hdd_label_sector; 0: none).
 */
int nxdctl_read_label(int fd, uint64_t bytes, uint64_t hint,
		      struct nxdctl_ondisk *out);

#endif /* NXDCTL_CORE_H */
