// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: naming a volume (VOL) and its sysfs tunables
 * (/sys/block/dm-N/nxd/).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "nxdctl.h"

void nxd_attr_path(const struct vol *v, const char *attr, char *p,
			  size_t len)
{
	snprintf(p, len, "%s/block/%s/nxd/%s", sysfs_root, v->kname, attr);
}

static int kname_of_dev(unsigned int ma, unsigned int mi, char *kn,
			size_t len)
{
	char path[PATH_MAX], link[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u", sysfs_root, ma, mi);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -errno;
	link[n] = 0;
	base = strrchr(link, '/');
	return scopy(kn, len, base ? base + 1 : link) ? 0 : -ENAMETOOLONG;
}

/* dm-N whose dm/name is @name, or -ENOENT. */
static int kname_of_dm_name(const char *name, char *kn, size_t len)
{
	char path[PATH_MAX], buf[NXD_NAME_LEN + 2];
	struct dirent *de;
	int rc = -ENOENT;
	DIR *d;

	snprintf(path, sizeof(path), "%s/block", sysfs_root);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "dm-", 3))
			continue;
		snprintf(path, sizeof(path), "%s/block/%s/dm/name",
			 sysfs_root, de->d_name);
		if (sysfs_read(path, buf, sizeof(buf)) || strcmp(buf, name))
			continue;
		rc = scopy(kn, len, de->d_name) ? 0 : -ENAMETOOLONG;
		break;
	}
	closedir(d);
	return rc;
}

int vol_start(const char *arg, struct vol *v, const char **base)
{
	const char *b = strrchr(arg, '/');

	memset(v, 0, sizeof(*v));
	v->arg = arg;
	*base = b ? b + 1 : arg;
	if (!**base)
		return fail(NXDCTL_EXIT_USAGE, "bad volume name '%s'", arg);
	return 0;
}

/*
 * VOL: a dm name, /dev/mapper/NAME, /dev/nxd/NAME, /dev/dm-N, dm-N, or any
 * block device node of the volume.
 */
int resolve_vol(const char *arg, struct vol *v)
{
	char path[PATH_MAX], buf[64];
	const char *base;
	struct stat st;
	int rc;

	memset(v, 0, sizeof(*v));
	v->arg = arg;
	if (test_stats) {
		snprintf(v->name, sizeof(v->name), "%s", arg);
		snprintf(v->kname, sizeof(v->kname), "dm-0");
		return 0;
	}

	base = strrchr(arg, '/');
	base = base ? base + 1 : arg;
	if (!*base)
		return fail(NXDCTL_EXIT_USAGE, "bad volume name '%s'", arg);
	if (!strncmp(base, "dm-", 3) && base[3] &&
	    strspn(base + 3, "0123456789") == strlen(base + 3) &&
	    (base == arg || !strncmp(arg, "/dev/", 5))) {
		snprintf(v->kname, sizeof(v->kname), "%s", base);
	} else if (arg[0] == '/' && !stat(arg, &st)) {
		if (!S_ISBLK(st.st_mode))
			return fail(NXDCTL_EXIT_NOVOL,
				    "%s is not a block device", arg);
		rc = kname_of_dev(major(st.st_rdev), minor(st.st_rdev),
				  v->kname, sizeof(v->kname));
		if (rc)
			return fail(NXDCTL_EXIT_NOVOL,
				    "%s: no such device in sysfs", arg);
	} else if (arg[0] == '/' && strncmp(arg, "/dev/mapper/", 12) &&
		   strncmp(arg, "/dev/nxd/", 9)) {
		return fail(NXDCTL_EXIT_NOVOL, "%s: %s", arg,
			    strerror(errno));
	} else {
		rc = kname_of_dm_name(base, v->kname, sizeof(v->kname));
		if (rc)
			return fail(NXDCTL_EXIT_NOVOL,
				    "volume '%s' not found", arg);
	}

	snprintf(path, sizeof(path), "%s/block/%s/dm/name", sysfs_root,
		 v->kname);
	if (sysfs_read(path, v->name, sizeof(v->name)))
		return fail(NXDCTL_EXIT_NOVOL,
			    "'%s' is not a device-mapper device", arg);
	snprintf(path, sizeof(path), "%s/block/%s/dev", sysfs_root, v->kname);
	if (sysfs_read(path, buf, sizeof(buf)) ||
	    sscanf(buf, "%u:%u", &v->major, &v->minor) != 2)
		return fail(NXDCTL_EXIT_NOVOL, "'%s': cannot read %s", arg,
			    path);

	snprintf(path, sizeof(path), "%s/block/%s/nxd", sysfs_root, v->kname);
	if (is_dir(path))
		return 0;
	/* No sysfs directory: ask device-mapper for the target type. */
	rc = dm_table_of(v->name, buf, sizeof(buf), NULL, 0);
	if (rc > 0)
		return rc;
	if (strcmp(buf, TARGET_NAME))
		return fail(NXDCTL_EXIT_NOVOL,
			    "'%s' is not an nxd volume (target %s)", arg,
			    buf[0] ? buf : "none");
	return 0;
}

int want_vol(const struct cmd *c, int argc, char **argv, struct vol *v)
{
	int rc = want_args(c, argc, argv, 1, 1);

	return rc ? rc : resolve_vol(argv[optind], v);
}

static int attr_fail(const struct vol *v, const char *attr, int e,
		     const char *val)
{
	if (e == -EACCES || e == -EPERM)
		return fail(NXDCTL_EXIT_PERM, "%s: %s: permission denied",
			    v->arg, attr);
	if (e == -ENOENT)
		return fail(NXDCTL_EXIT_KERNEL, "%s: dm-nxd exposes no %s in "
			    "sysfs", v->arg, attr);
	if (e == -EINVAL && val)
		return fail(NXDCTL_EXIT_USAGE, "%s: the kernel rejected %s "
			    "= %s", v->arg, attr, val);
	return fail(NXDCTL_EXIT_KERNEL, "%s: %s: %s", v->arg, attr,
		    strerror(-e));
}

int attr_get(const struct vol *v, const char *attr, char *buf,
		    size_t len)
{
	char path[PATH_MAX];
	int rc;

	nxd_attr_path(v, attr, path, sizeof(path));
	rc = sysfs_read(path, buf, len);
	return rc ? attr_fail(v, attr, rc, NULL) : 0;
}

int attr_set(const struct vol *v, const char *attr, const char *val)
{
	char path[PATH_MAX];
	int rc;

	nxd_attr_path(v, attr, path, sizeof(path));
	rc = sysfs_write(path, val);
	return rc ? attr_fail(v, attr, rc, val) : 0;
}
