// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: finding the devices of a volume among /sys/class/block by their
 * nxd metadata (ondisk.c).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nxdctl.h"

/* Block devices worth looking at: not nxd volumes, not held by md/dm. */
bool candidate(const char *kn)
{
	char path[PATH_MAX], buf[32];
	struct dirent *de;
	bool held = false;
	DIR *d;

	/* Optical and floppy drives, and empty devices (loop, md stopped). */
	if (!strncmp(kn, "sr", 2) || !strncmp(kn, "fd", 2))
		return false;
	snprintf(path, sizeof(path), "%s/class/block/%s/size", sysfs_root, kn);
	if (!sysfs_read(path, buf, sizeof(buf)) && !strcmp(buf, "0"))
		return false;
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

int for_each_candidate(int (*fn)(void *arg, const char *dev), void *arg)
{
	char path[PATH_MAX];
	struct dirent *de;
	int rc = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/block", sysfs_root);
	d = opendir(path);
	if (!d)
		return fail(NXDCTL_EXIT_KERNEL, "%s: %s", path,
			    strerror(errno));
	while (!rc && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !candidate(de->d_name))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		rc = fn(arg, path);
	}
	closedir(d);
	return rc;
}

struct peer_search {
	const struct nxd_meta *od;
	enum role want;
	char self_real[PATH_MAX];
	char *out;
	size_t len;
	int found;
};

static int peer_one(void *arg, const char *path)
{
	struct peer_search *ps = arg;
	const struct nxd_meta *od = ps->od;
	char real[PATH_MAX];
	struct nxd_meta p;
	uint64_t bytes;
	int e;

	if (!realpath(path, real) || !strcmp(real, ps->self_real))
		return 0;
	if (probe_role(path, ps->want == ROLE_HDD ? od->hdd_label_sector : 0,
		       &p, &bytes, &e) != ps->want ||
	    !uuid_eq(p.vol_uuid, od->vol_uuid) ||
	    !uuid_eq(p.hdd_uuid, od->hdd_uuid))
		return 0;
	if (ps->found++)
		return fail(NXDCTL_EXIT_NOVOL, "both %s and %s match; "
			    "assemble by hand with nxdctl create", ps->out,
			    path);
	snprintf(ps->out, ps->len, "%s", path);
	return 0;
}

/*
 * Find the other half of volume @od among /sys/class/block: a device of
 * role @want whose metadata carries the same volume and HDD UUIDs.
 */
int find_peer(const struct nxd_meta *od, enum role want,
	      const char *self, char *out, size_t len)
{
	struct peer_search ps = {
		.od = od, .want = want, .out = out, .len = len,
	};
	int rc;

	if (!realpath(self, ps.self_real))
		snprintf(ps.self_real, sizeof(ps.self_real), "%s", self);
	rc = for_each_candidate(peer_one, &ps);
	if (rc)
		return rc;
	return ps.found ? 0 : -ENOENT;
}

/* /dev path of block device "MAJ:MIN". */
int devnode_of(const char *majmin, char *out, size_t len)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/dev/block/%s", majmin);
	if (!access(path, F_OK)) {
		snprintf(out, len, "%s", path);
		return 0;
	}
	return devname_of(majmin, out, len);
}

int devname_of(const char *majmin, char *out, size_t len)
{
	char path[PATH_MAX], buf[512], *p;

	snprintf(path, sizeof(path), "%s/dev/block/%s/uevent", sysfs_root,
		 majmin);
	if (sysfs_read(path, buf, sizeof(buf)))
		return -ENOENT;
	p = strstr(buf, "DEVNAME=");
	if (!p)
		return -ENOENT;
	p += 8;
	p[strcspn(p, "\n")] = 0;
	snprintf(out, len, "/dev/%s", p);
	return 0;
}

/* Links under /dev/disk/by-id worth showing first: the hardware's own. */
static int by_id_rank(const char *n)
{
	static const char *const pref[] = {
		"wwn-", "nvme-eui.", "nvme-", "scsi-", "ata-", "md-uuid-",
		"dm-uuid-", "md-name-", "dm-name-",
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE_NXDCTL(pref); i++)
		if (!strncmp(n, pref[i], strlen(pref[i])))
			return i;
	return ARRAY_SIZE_NXDCTL(pref);
}

int by_id_of(const char *dev, char *out, size_t len)
{
	char real[PATH_MAX], p[PATH_MAX], r[PATH_MAX];
	int best = -1, rank;
	struct dirent *de;
	DIR *d;

	if (!realpath(dev, real))
		return -errno;
	d = opendir("/dev/disk/by-id");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/dev/disk/by-id/%s", de->d_name);
		if (!realpath(p, r) || strcmp(r, real))
			continue;
		rank = by_id_rank(de->d_name);
		if (best >= 0 && (rank > best || (rank == best &&
		    strcmp(p, out) >= 0)))
			continue;
		best = rank;
		snprintf(out, len, "%s", p);
	}
	closedir(d);
	return best >= 0 ? 0 : -ENOENT;
}
