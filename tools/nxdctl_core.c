// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl's bridge to kernel/nxd_core.c (the same code the module runs:
 * size parser, HDD label placement, superblock and label codecs).
 *
 * Built with -DNXDCTL_NO_CORE when kernel/nxd_core.c is not in the tree:
 * then only the parser and the label placement are available, with local
 * copies, and assemble reports that it is unsupported.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nxdctl_core.h"

#ifndef NXDCTL_NO_CORE

#include "../kernel/nxd_core.h"

int nxdctl_parse_size(const char *s, uint64_t *out)
{
	u64 v;
	int rc = nxd_parse_size(s, &v);

	if (rc > 0)
		rc = -EINVAL;
	if (!rc)
		*out = v;
	return rc;
}

uint64_t nxdctl_hdd_data_sectors(uint64_t hdd_sectors)
{
	return nxd_hdd_data_sectors(hdd_sectors);
}

const char *nxdctl_core_hist_label(unsigned int b)
{
	return b < NXD_HIST_BUCKETS ? nxd_hist_labels[b] : NULL;
}

int nxdctl_core_hist_bucket(uint64_t bytes)
{
	return nxd_hist_bucket(bytes);
}

uint64_t nxdctl_min_ssd_bytes(void)
{
	return NXD_MIN_SSD_SECTORS * 512ULL;
}

int nxdctl_mode_parse(const char *s, uint32_t *mode)
{
	enum nxd_mode m;
	int rc = nxd_mode_parse(s, &m);

	if (!rc)
		*mode = m;
	return rc;
}

static int read_blk(int fd, uint64_t off, void **blk)
{
	ssize_t n;

	if (posix_memalign(blk, NXD_BLOCK_SIZE, NXD_BLOCK_SIZE))
		return -ENOMEM;
	n = pread(fd, *blk, NXD_BLOCK_SIZE, off);
	if (n == NXD_BLOCK_SIZE)
		return 0;
	free(*blk);
	*blk = NULL;
	return n < 0 ? -errno : -EIO;
}

int nxdctl_read_sb(int fd, uint64_t bytes, struct nxdctl_ondisk *out)
{
	struct nxd_sb_info sbs[2];
	int res[2], i, rc;
	void *blk;

	if (bytes < NXD_MIN_SSD_SECTORS * 512ULL)
		return 1;
	for (i = 0; i < 2; i++) {
		rc = read_blk(fd, (uint64_t)i * NXD_BLOCK_SIZE, &blk);
		if (rc)
			return rc;
		res[i] = nxd_sb_decode(blk, bytes / NXD_BLOCK_SIZE, &sbs[i]);
		free(blk);
	}
	i = nxd_sb_pick(res, sbs);
	if (i == NXD_SB_NONE)
		return 1;
	if (i < 0)
		return i;
	memset(out, 0, sizeof(*out));
	memcpy(out->vol_uuid, sbs[i].vol_uuid, 16);
	memcpy(out->hdd_uuid, sbs[i].hdd_uuid, 16);
	out->hdd_sectors = sbs[i].hdd_sectors;
	out->hdd_label_sector = sbs[i].hdd_label_sector;
	out->data_sectors = sbs[i].data_sectors;
	out->ring_blocks = sbs[i].ring_blocks;
	out->clean = sbs[i].flags & NXD_SB_CLEAN;
	return 0;
}

static int label_at(int fd, uint64_t sec, struct nxd_label_info *l)
{
	void *blk;
	int rc;

	rc = read_blk(fd, sec << 9, &blk);
	if (rc)
		return rc;
	rc = nxd_label_decode(blk, l);
	free(blk);
	return rc == NXD_ENOTNXD ? 1 : rc;
}

int nxdctl_read_label(int fd, uint64_t bytes, uint64_t hint,
		      struct nxdctl_ondisk *out)
{
	struct nxd_label_info l;
	uint64_t sec = nxd_hdd_data_sectors(bytes >> 9);
	int rc;

	if (!sec)
		return 1;
	rc = label_at(fd, sec, &l);
	/* The HDD grew since its volume was last grown: label not at the end. */
	if (rc == 1 && hint && hint != sec &&
	    hint + NXD_SECTORS_PER_BLOCK <= bytes >> 9)
		rc = label_at(fd, hint, &l);
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	memcpy(out->vol_uuid, l.vol_uuid, 16);
	memcpy(out->hdd_uuid, l.hdd_uuid, 16);
	out->hdd_sectors = l.hdd_sectors;
	return 0;
}

#else /* NXDCTL_NO_CORE */

#include <ctype.h>

int nxdctl_parse_size(const char *s, uint64_t *out)
{
	unsigned int shift = 0;
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	default:
		return -EINVAL;
	}
	if (shift && end[1])
		return -EINVAL;
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

uint64_t nxdctl_hdd_data_sectors(uint64_t hdd_sectors)
{
	uint64_t r = hdd_sectors & ~2047ULL;

	return r > 2048 ? r - 2048 : 0;
}

const char *nxdctl_core_hist_label(unsigned int b)
{
	(void)b;
	return NULL;
}

int nxdctl_core_hist_bucket(uint64_t bytes)
{
	(void)bytes;
	return -1;
}

uint64_t nxdctl_min_ssd_bytes(void)
{
	return (8 + 4 * 128) * 4096ULL;
}

int nxdctl_mode_parse(const char *s, uint32_t *mode)
{
	static const char *const names[] = { "auto", "passthrough", "log_all" };
	uint32_t i;

	for (i = 0; i < 3; i++) {
		if (!strcmp(s, names[i])) {
			*mode = i;
			return 0;
		}
	}
	return -EINVAL;
}

int nxdctl_read_sb(int fd, uint64_t bytes, struct nxdctl_ondisk *out)
{
	(void)fd; (void)bytes; (void)out;
	return -ENOSYS;
}

int nxdctl_read_label(int fd, uint64_t bytes, uint64_t hint,
		      struct nxdctl_ondisk *out)
{
	(void)fd; (void)bytes; (void)hint; (void)out;
	return -ENOSYS;
}

#endif /* NXDCTL_NO_CORE */
