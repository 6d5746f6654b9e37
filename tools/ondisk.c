// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: which block devices carry nxd metadata (SSD superblock, HDD
 * label), read with the module's own codec (kernel/nxd_core.c), and
 * finding the other half of a volume.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <linux/fs.h>

#include "nxdctl.h"

bool uuid_eq(const uint8_t *a, const uint8_t *b)
{
	return !memcmp(a, b, 16);
}

int open_dev(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	return fd;
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

int ondisk_read_sb(int fd, uint64_t bytes, struct nxd_meta *out)
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
	out->sb = sbs[i];
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

int ondisk_read_label(int fd, uint64_t bytes, uint64_t hint,
		      struct nxd_meta *out)
{
	struct nxd_label_info l;
	uint64_t sec = nxd_hdd_data_sectors(bytes >> 9);
	int rc;

	if (!sec)
		return 1;
	rc = label_at(fd, sec, &l);
	/* The HDD grew since its volume was last grown: label not at the end. */
	if (rc == 1 && hint && hint != sec &&
	    hint + NXD_SECTORS_PER_BLOCK <= bytes >> 9) {
		sec = hint;
		rc = label_at(fd, hint, &l);
	}
	if (rc)
		return rc;
	memset(out, 0, sizeof(*out));
	out->label = l;
	out->label_sector = sec;
	memcpy(out->vol_uuid, l.vol_uuid, 16);
	memcpy(out->hdd_uuid, l.hdd_uuid, 16);
	out->hdd_sectors = l.hdd_sectors;
	return 0;
}

/*
 * What nxd metadata block device @path carries.  @hint: where an HDD label
 * may sit besides the end (the SSD superblock's hdd_label_sector), or 0.
 */
enum role probe_role(const char *path, uint64_t hint, struct nxd_meta *od, uint64_t *bytes, int *err)
{
	enum role r = ROLE_NONE;
	int fd, rc;

	*err = 0;
	fd = open_dev(path);
	if (fd < 0) {
		*err = -errno;
		return ROLE_NONE;
	}
	if (ioctl(fd, BLKGETSIZE64, bytes)) {
		struct stat st;

		if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			*err = -ENOTBLK;
			close(fd);
			return ROLE_NONE;
		}
		*bytes = st.st_size;
	}
	rc = ondisk_read_sb(fd, *bytes, od);
	if (!rc) {
		r = ROLE_SSD;
	} else {
		if (rc < 0)
			*err = rc;
		rc = ondisk_read_label(fd, *bytes, hint, od);
		if (!rc)
			r = ROLE_HDD;
		else if (rc < 0 && !*err)
			*err = rc;
	}
	close(fd);
	return r;
}

/* Block devices worth looking at: not nxd volumes, not held by md/dm. */
bool candidate(const char *kn)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool held = false;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/block/%s/nxd", sysfs_root, kn);
	if (is_dir(path))
		return false;
	snprintf(path, sizeof(path), "%s/class/block/%s/holders", sysfs_root,
		 kn);
	d = opendir(path);
	if (d) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				held = true;
		closedir(d);
	}
	return !held;
}

/*
 * Find the other half of volume @od among /sys/class/block: a device of
 * role @want whose metadata carries the same volume and HDD UUIDs.
 */
int find_peer(const struct nxd_meta *od, enum role want,
		     const char *self, char *out, size_t len)
{
	char path[PATH_MAX], self_real[PATH_MAX], real[PATH_MAX];
	struct nxd_meta p;
	struct dirent *de;
	int found = 0, e;
	uint64_t bytes;
	DIR *d;

	if (!realpath(self, self_real))
		snprintf(self_real, sizeof(self_real), "%s", self);
	snprintf(path, sizeof(path), "%s/class/block", sysfs_root);
	d = opendir(path);
	if (!d)
		return fail(NXDCTL_EXIT_KERNEL, "%s: %s", path,
			    strerror(errno));
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !candidate(de->d_name))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		if (!realpath(path, real) || !strcmp(real, self_real))
			continue;
		if (probe_role(path, want == ROLE_HDD ? od->hdd_label_sector : 0,
			       &p, &bytes, &e) != want ||
		    !uuid_eq(p.vol_uuid, od->vol_uuid) ||
		    !uuid_eq(p.hdd_uuid, od->hdd_uuid))
			continue;
		if (found++) {
			fail(NXDCTL_EXIT_NOVOL, "both %s and %s match; "
			     "assemble by hand with nxdctl create", out,
			     path);
			break;
		}
		snprintf(out, len, "%s", path);
	}
	closedir(d);
	if (found == 1)
		return 0;
	return found ? NXDCTL_EXIT_NOVOL : -ENOENT;
}
