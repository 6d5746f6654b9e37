// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl: building an nxd table line from options and devices, and
 * loading it (create and assemble).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>

#include <libdevmapper.h>

#include "nxdctl.h"

int add_opt(struct create_opts *co, const char *key, const char *val)
{
	size_t l = strlen(co->extra);
	int n;

	n = snprintf(co->extra + l, sizeof(co->extra) - l, " %s%s%s", key,
		     val ? " " : "", val ? val : "");
	if (n < 0 || (size_t)n >= sizeof(co->extra) - l)
		return usage_error("create", "too many options");
	co->nargs += val ? 2 : 1;
	return 0;
}

const struct option table_opts[] = {
	TABLE_OPTS,
	{ "uuid", required_argument, NULL, O_UUID },
	{ "name", required_argument, NULL, O_NAME },
	{ "accept-log-loss", no_argument, NULL, O_ACCEPT_LOSS },
	{ "force", no_argument, NULL, O_FORCE },
	{ "all", no_argument, NULL, O_ALL },
	{ "auto", no_argument, NULL, O_AUTO },
	{ "config", required_argument, NULL, O_CONFIG },
	{ "take-over", no_argument, NULL, O_TAKEOVER },
	HELP_OPT, { 0 }
};

/*
 * The tunable option @o sets (--low-watermark: low_watermark), or NULL;
 * @flag gets the option as the user wrote it.
 */
static const struct nxd_tun_desc *opt_tun(int o, char *flag, size_t len)
{
	const struct option *p;
	char key[32];
	size_t i;

	*flag = '\0';
	for (p = table_opts; p->name; p++) {
		if (p->val != o)
			continue;
		snprintf(flag, len, "--%s", p->name);
		for (i = 0; p->name[i] && i < sizeof(key) - 1; i++)
			key[i] = p->name[i] == '-' ? '_' : p->name[i];
		key[i] = '\0';
		return nxd_tun_find(key);
	}
	return NULL;
}

int tun_value(const char *cmd, const char *what,
	      const struct nxd_tun_desc *d, const char *val, uint32_t *v)
{
	char range[NXD_TUN_RANGE_LEN];

	if (!nxd_tun_parse(d, val, v))
		return 0;
	return usage_error(cmd, "%s: expected %s, got '%s'", what,
			   nxd_tun_range(d, range), val);
}

/* One table option from getopt; 1 if @o is not one. */
int table_opt(const char *cmd, int o, const char *arg,
		     struct create_opts *co)
{
	const struct nxd_tun_desc *d;
	char buf[NXD_TUN_STR_LEN], flag[40];
	uint32_t v;
	int rc;

	switch (o) {
	case O_WTHR:
	case O_MODE:
	case O_LOWWM:
	case O_HIGHWM:
	case O_RATE:
	case O_DISCARD:
	case O_DRAIN:
	case O_AMIN:
	case O_AMAX:
	case O_SMIN:
	case O_SSIZE:
		/* Refused here, in the kernel's ranges (nxd_tuns[]). */
		d = opt_tun(o, flag, sizeof(flag));
		/* In a config file, the key as written there: no dashes. */
		rc = tun_value(cmd, err_where ? flag + 2 : flag, d, arg, &v);
		if (rc)
			return rc;
		*nxd_tun_field(&co->tun, d) = v;
		co->tun_given |= 1U << (d - nxd_tuns);
		return add_opt(co, d->name, nxd_tun_str(d, v, buf));
	case O_DRY:
		co->dry_run = true;
		return 0;
	default:
		return 1;
	}
}

/*
 * The tunables @co would give: its options over @co->base (the stored
 * ones) or the defaults.  The pairs' order and the stripe are the only
 * checks left.
 */
static int check_tun_order(const struct create_opts *co)
{
	const struct nxd_tun_desc *d;
	struct nxd_tun t;
	unsigned int i;

	if (co->base_valid)
		t = co->base;
	else
		nxd_tun_defaults(&t);
	for (i = 0; i < NXD_TUN_NR; i++) {
		d = &nxd_tuns[i];
		if (co->tun_given & (1U << i))
			*nxd_tun_field(&t, d) = nxd_tun_val(&co->tun, d);
	}
	return tun_pairs_check("create", &t);
}

int tun_pairs_check(const char *cmd, const struct nxd_tun *t)
{
	if (t->low_wm > t->high_wm)
		return usage_error(cmd, "low_watermark (%u) must not exceed "
				   "high_watermark (%u)", t->low_wm,
				   t->high_wm);
	if (t->auto_min_thr > t->auto_max_thr)
		return usage_error(cmd, "auto_min_threshold (%u) must not "
				   "exceed auto_max_threshold (%u)",
				   t->auto_min_thr, t->auto_max_thr);
	if (t->stripe_size % 4096)
		return usage_error(cmd, "stripe_size (%u) must be a multiple "
				   "of 4096", t->stripe_size);
	return 0;
}

int table_opt_default(const struct cmd *c, int o, char **argv,
		      struct create_opts *co)
{
	int rc;

	if (o < O_WTHR || o > O_DRY)
		return opt_default(c, o, argv);
	rc = table_opt(c->name, o, optarg, co);
	return rc ? rc : -1;
}

bool format_force_opt(int o, bool *format, bool *force)
{
	if (o == O_FORMAT)
		*format = true;
	else if (o == O_FORCE)
		*force = true;
	else
		return false;
	return true;
}

/* Size in bytes of a block device (or, for --dry-run, a regular file). */
int dev_size(const char *path, bool allow_file, uint64_t *bytes,
		    dev_t *rdev)
{
	struct stat st;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(errno == EACCES ? NXDCTL_EXIT_PERM :
			    NXDCTL_EXIT_NOVOL, "%s: %s", path,
			    strerror(errno));
	if (fstat(fd, &st)) {
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: %s", path, strerror(errno));
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, bytes))
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: BLKGETSIZE64: %s",
				  path, strerror(errno));
		if (rdev)
			*rdev = st.st_rdev;
	} else if (S_ISREG(st.st_mode) && allow_file) {
		*bytes = st.st_size;
		if (rdev)
			*rdev = 0;
	} else {
		rc = fail(NXDCTL_EXIT_NOVOL, "%s is not a block device",
			  path);
	}
	close(fd);
	return rc;
}

/*
 * The nxd volume (dm name in @name) holding block device @dev, if any.
 * Device-mapper lets several dm devices share an underlying device; two
 * nxd volumes over one SSD would share one log.
 */
bool nxd_holder(dev_t dev, char *name, size_t len)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/holders", sysfs_root,
		 major(dev), minor(dev));
	d = opendir(path);
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "dm-", 3))
			continue;
		snprintf(path, sizeof(path), "%s/block/%s/nxd", sysfs_root,
			 de->d_name);
		if (!is_dir(path))
			continue;
		snprintf(path, sizeof(path), "%s/block/%s/dm/name",
			 sysfs_root, de->d_name);
		if (sysfs_read(path, name, len))
			scopy(name, len, de->d_name);
		found = true;
	}
	closedir(d);
	return found;
}

bool valid_dm_name(const char *n)
{
	return *n && strlen(n) < NXD_NAME_LEN && !strchr(n, '/') &&
	       strcmp(n, ".") && strcmp(n, "..") && !strpbrk(n, " \t\n'\"");
}

/* ---- the data area: every table length comes from here ---- */

uint64_t hdd_io_opt(dev_t rdev)
{
	char path[PATH_MAX], buf[32];
	unsigned long long v;

	if (!rdev)
		return 0;
	/* A partition has no queue of its own: its disk's counts. */
	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/partition",
		 sysfs_root, major(rdev), minor(rdev));
	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/%squeue/"
		 "optimal_io_size", sysfs_root, major(rdev), minor(rdev),
		 access(path, F_OK) ? "" : "../");
	if (sysfs_read(path, buf, sizeof(buf)) ||
	    sscanf(buf, "%llu", &v) != 1)
		return 0;
	return v;
}

uint64_t new_data_offset(dev_t rdev)
{
	return nxd_hdd_data_offset(hdd_io_opt(rdev));
}

uint64_t volume_sectors(uint64_t bytes, uint64_t data_offset)
{
	return nxd_layout_data_sectors(bytes >> 9, data_offset);
}

int format_layout(const char *path, dev_t rdev, uint64_t bytes,
		  struct nxd_meta *label, bool *labelled, uint64_t *off)
{
	int fd, rc;

	fd = open_dev(path);
	if (fd < 0)
		return -errno;
	/* Hint 0: block 0 and the v1 end spot, as nxd_format_layout(). */
	rc = ondisk_read_label(fd, bytes, 0, label);
	close(fd);
	if (rc < 0 && rc != -EBADMSG && rc != -EINVAL &&
	    rc != -EPROTONOSUPPORT)
		return rc;
	*labelled = !rc;
	*off = *labelled ? label->data_offset : new_data_offset(rdev);
	return 0;
}

/*
 * Whose volume is it?  An existing one (the SSD holds its superblock):
 * owner_check().  A new one (*@fresh: the load formats): this host's
 * once active; an HDD labelled for another host's volume needs --force.
 */
static int create_owner(const char *name, const char *hdd, const char *ssd,
			const struct create_opts *co, bool *fresh)
{
	char me[NXD_LABEL_OWNER_LEN], u[40];
	struct nxd_meta od;
	uint64_t bytes;
	int e, rc;

	*fresh = co->format || probe_role(ssd, 0, &od, &bytes, &e) != ROLE_SSD;
	if (!*fresh)
		return owner_check(hdd, od.hdd_label_sector, name,
				   co->take_over, co->dry_run);
	rc = local_owner(me, sizeof(me));
	if (rc)
		return rc;
	if (!owner_read(hdd, 0, &od) && od.label.owner[0] &&
	    strcmp(od.label.owner, me)) {
		nxdctl_fmt_uuid(u, od.vol_uuid);
		if (!co->force)
			return fail(NXDCTL_EXIT_FOREIGN, "%s carries the label "
				    "of volume %s, which belongs to host "
				    "'%s': --force to replace it", hdd, u,
				    od.label.owner);
	}
	if (co->dry_run)
		printf("owner: '%s' (this host), recorded in the new HDD "
		       "label\n", me);
	return 0;
}

int create_volume(const char *name, const char *hdd, const char *ssd,
			 const struct create_opts *co)
{
	char u[40];
	uint8_t vol_uuid[16];
	bool uuid_later = false;
	char table[1024], params[1024], uuid[NXD_NAME_LEN];
	char holder[NXD_NAME_LEN];
	uint64_t hdd_bytes, ssd_bytes, len, off, bytes;
	struct nxd_meta sm, hm;
	struct dm_task *dmt;
	dev_t hdev, sdev;
	bool fresh, existing;
	int rc, n, e;

	if (!valid_dm_name(name))
		return usage_error("create", "bad volume name '%s'", name);
	rc = dev_size(hdd, co->dry_run, &hdd_bytes, &hdev);
	if (!rc)
		rc = dev_size(ssd, co->dry_run, &ssd_bytes, &sdev);
	if (rc)
		return rc;
	if (hdev && hdev == sdev)
		return usage_error("create", "HDD and SSD are the same device");
	if (nxd_holder(hdev, holder, sizeof(holder)) ||
	    nxd_holder(sdev, holder, sizeof(holder)))
		return fail(NXDCTL_EXIT_USAGE, "%s is already in use by the "
			    "nxd volume %s", nxd_holder(hdev, holder,
			    sizeof(holder)) ? hdd : ssd, holder);
	if (ssd_bytes < MIN_SSD_BYTES)
		return fail(NXDCTL_EXIT_USAGE, "%s is too small for an nxd "
			    "SSD log (%" PRIu64 " bytes, needs %llu)",
			    ssd, ssd_bytes, MIN_SSD_BYTES);
	/*
	 * The SSD's volume again (assemble): its layout.  A new volume: the
	 * version 2 layout, any old label cleared below, so that the kernel
	 * does not keep the old one.
	 */
	existing = !co->format &&
		   probe_role(ssd, 0, &sm, &bytes, &e) == ROLE_SSD;
	off = existing ? sm.data_offset : new_data_offset(hdev);
	len = volume_sectors(hdd_bytes, off);
	if (!len)
		return fail(NXDCTL_EXIT_USAGE, "%s is too small for an nxd "
			    "HDD (%" PRIu64 " bytes)", hdd, hdd_bytes);
	if (co->len && co->len < len)
		len = co->len;
	rc = check_tun_order(co);
	if (!rc && !existing && !co->format &&
	    probe_role(hdd, 0, &hm, &bytes, &e) == ROLE_HDD) {
		nxdctl_fmt_uuid(u, hm.vol_uuid);
		rc = fail(NXDCTL_EXIT_USAGE, "%s carries the label of volume "
			  "%s, and %s no log of it: assemble it with\nits "
			  "SSD, or create a new volume with --format (its "
			  "label is cleared)", hdd, u, ssd);
	}
	if (!rc)
		rc = create_checks(hdd, ssd, hdd_bytes, off, co->format,
				   co->force);
	if (rc)
		return rc;
	rc = create_owner(name, hdd, ssd, co, &fresh);
	if (rc)
		return rc;
	if (co->nargs)
		n = snprintf(params, sizeof(params), "%s %s %u%s", hdd, ssd,
			     co->nargs, co->extra);
	else
		n = snprintf(params, sizeof(params), "%s %s", hdd, ssd);
	if (n < 0 || (size_t)n >= sizeof(params))
		return usage_error("create", "device paths too long");
	n = snprintf(table, sizeof(table), "0 %" PRIu64 " %s %s", len,
		     TARGET_NAME, params);
	if (n < 0 || (size_t)n >= sizeof(table))
		return usage_error("create", "device paths too long");
	/*
	 * The DM UUID is NXD-<volume UUID>, whether the volume is created or
	 * assembled, so that udev links and tools keyed on it stay put.  An
	 * existing volume's is in its superblock; a new volume gets its UUID
	 * from the kernel at format time: set it once the table is live
	 * (device-mapper allows that once, on a device without a UUID).
	 */
	if (co->uuid) {
		snprintf(uuid, sizeof(uuid), "%s", co->uuid);
	} else if (existing) {
		nxdctl_fmt_uuid(u, sm.vol_uuid);
		snprintf(uuid, sizeof(uuid), "NXD-%s", u);
	} else {
		uuid_later = true;
	}

	/* A new volume: no old label may make the kernel keep its layout. */
	if (!existing) {
		rc = clear_labels(hdd, 0, co->dry_run, hdd);
		if (rc < 0)
			return -rc;
	}
	if (uuid_later)
		printf("dmsetup create %s --table '%s'\n", name, table);
	else
		printf("dmsetup create %s --uuid %s --table '%s'\n", name,
		       uuid, table);
	if (uuid_later && co->dry_run)
		printf("dmsetup rename %s --setuuid NXD-<volume UUID the "
		       "format makes>\n", name);
	fflush(stdout);
	if (co->dry_run)
		return 0;

	dmt = dm_task_create(DM_DEVICE_CREATE);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	rc = dm_run(dmt, dm_task_set_name(dmt, name) &&
		    (uuid_later || dm_task_set_uuid(dmt, uuid)) &&
		    dm_task_add_target(dmt, 0, len, TARGET_NAME, params),
		    true, "creating", name);
	if (rc) {
		if (rc == NXDCTL_EXIT_KERNEL)
			fprintf(stderr, "nxdctl: the kernel log (dmesg) says "
				"why dm-nxd refused the table\n");
		return rc;
	}
	rc = vol_uuid_of(name, vol_uuid);
	if (!rc && uuid_later) {
		nxdctl_fmt_uuid(u, vol_uuid);
		snprintf(uuid, sizeof(uuid), "NXD-%s", u);
		printf("dmsetup rename %s --setuuid %s\n", name, uuid);
		fflush(stdout);
		rc = dm_set_uuid(name, uuid);
	}
	if (rc && uuid_later)
		fprintf(stderr, "nxdctl: %s is active without a device-mapper "
			"UUID\n", name);
	/* A new volume belongs to this host. */
	if (!rc && fresh)
		rc = owner_record_new(hdd, name);
	/* Made by hand: automatic assembly may take it again. */
	if (!rc)
		removed_clear(vol_uuid);
	/* The kernel may have written a label and a superblock: re-probe. */
	udev_change(hdd);
	udev_change(ssd);
	return rc;
}
