// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: which block devices carry nxd metadata (SSD superblock, HDD
 * label), and finding the other half of a volume.
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

/*
 * What nxd metadata block device @path carries.  @hint: where an HDD label
 * may sit besides the end (the SSD superblock's hdd_label_sector), or 0.
 */
enum role probe_role(const char *path, uint64_t hint,
			    struct nxdctl_ondisk *od, uint64_t *bytes, int *err)
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
	rc = nxdctl_read_sb(fd, *bytes, od);
	if (!rc) {
		r = ROLE_SSD;
	} else {
		if (rc < 0)
			*err = rc;
		rc = nxdctl_read_label(fd, *bytes, hint, od);
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
int find_peer(const struct nxdctl_ondisk *od, enum role want,
		     const char *self, char *out, size_t len)
{
	char path[PATH_MAX], self_real[PATH_MAX], real[PATH_MAX];
	struct nxdctl_ondisk p;
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
