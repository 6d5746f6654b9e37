// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl wipe: remove the nxd metadata of devices that leave a volume (the
 * SSD's superblocks, the HDD's label), refusing while the log holds
 * writes that are not on the HDD.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "nxdctl.h"

/* Does @path hold an nxd SSD superblock copy (besides its label)? */
static bool stale_sb(const char *path)
{
	struct nxd_sb_info sbs[2];
	uint64_t bytes;
	int fd, res[2];
	bool r = false;

	fd = open_dev(path);
	if (fd < 0)
		return false;
	if (!fd_size(fd, &bytes) &&
	    !ondisk_read_sb_copies(fd, bytes, sbs, res))
		r = res[0] != NXD_ENOTNXD || res[1] != NXD_ENOTNXD;
	close(fd);
	return r;
}

static int wipe_one(const char *arg, bool force, bool dry_run)
{
	char path[PATH_MAX], holder[NXD_NAME_LEN], u[40];
	struct log_risk lr;
	struct nxd_meta m;
	struct stat st;
	uint64_t bytes, off;
	size_t len;
	enum role r;
	int e, rc;

	if (!strchr(arg, '/'))
		snprintf(path, sizeof(path), "/dev/%s", arg);
	else
		snprintf(path, sizeof(path), "%s", arg);
	if (stat(path, &st))
		return fail(NXDCTL_EXIT_NOVOL, "%s: %s", path, strerror(errno));
	r = probe_role(path, 0, &m, &bytes, &e);
	if (r == ROLE_NONE) {
		if (e && e != -EINVAL && e != -ENODATA)
			return fail(errno_code(-e), "%s: %s", path,
				    strerror(-e));
		printf("%s: no nxd signature\n", path);
		return 0;
	}
	nxdctl_fmt_uuid(u, m.vol_uuid);
	if (S_ISBLK(st.st_mode) && nxd_holder(st.st_rdev, holder,
					      sizeof(holder)))
		return fail(NXDCTL_EXIT_USAGE, "%s is in use by the nxd volume "
			    "%s: remove it first", path, holder);

	rc = log_risk(path, r, &m, &lr);
	if (rc < 0) {
		fprintf(stderr, "nxdctl: %s: cannot read the log of volume "
			"%s: %s\n", path, u, strerror(-rc));
		rc = 1;
	} else if (rc && !force) {
		log_risk_say(&lr, m.vol_uuid);
	}
	if (rc && !force) {
		return fail(NXDCTL_EXIT_USAGE, "%s: not wiped (--force to "
			    "wipe anyway, losing those writes)", path);
	}
	if (r == ROLE_HDD) {
		/* Every label nxd may have left: block 0 and the v1 end spot. */
		printf("%s: %s the nxd HDD label of volume %s (format %d, data "
		       "from sector %" PRIu64 ")%s\n", path, dry_run ?
		       "would wipe" : "wiping", u, m.format_version,
		       m.data_offset, rc ? ", with writes still in its log" :
		       "");
		rc = clear_labels(path, m.label_sector, dry_run, path);
		if (rc < 0)
			return -rc;
		/*
		 * Format 2: what precedes the data area is nxd's; a stale SSD
		 * superblock copy there would make the HDD look like an SSD.
		 */
		if (m.data_offset && stale_sb(path)) {
			printf("%s: %s a stale nxd SSD superblock (%d bytes at "
			       "offset 0, before the data area)\n", path,
			       dry_run ? "would clear" : "clearing",
			       NXD_RING_START * NXD_BLOCK_SIZE);
			fflush(stdout);
			if (!dry_run) {
				rc = zero_range(path, 0, NXD_RING_START *
						NXD_BLOCK_SIZE);
				if (rc)
					return rc;
			}
		}
		if (!dry_run)
			udev_change(path);
		return 0;
	}
	off = 0;
	len = NXD_RING_START * NXD_BLOCK_SIZE;
	printf("%s: %s the nxd SSD superblocks of volume %s (%zu bytes at "
	       "offset %" PRIu64 ")%s\n", path, dry_run ? "would wipe" :
	       "wiping", u, len, off,
	       rc ? ", with writes still in its log" : "");
	fflush(stdout);
	if (dry_run)
		return 0;
	rc = zero_range(path, off, len);
	if (!rc)
		udev_change(path);
	return rc;
}

static int do_wipe(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "force", no_argument, NULL, 'f' },
		{ "dry-run", no_argument, NULL, O_DRY },
		HELP_OPT, { 0 }
	};
	bool force = false, dry_run = false;
	const struct simple_opt so[] = {
		{ 'f', &force, NULL }, { O_DRY, &dry_run, NULL }, { 0 }
	};
	int o, rc, worst = 0;

	rc = simple_opts(c, argc, argv, "fh", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 64);
	if (rc)
		return rc;
	for (o = optind; o < argc; o++) {
		rc = wipe_one(argv[o], force, dry_run);
		if (rc > worst)
			worst = rc;
	}
	return worst;
}

const struct cmd cmd_wipe = {
	"wipe", do_wipe, "DEVICE... [--force] [--dry-run]",
	"Remove the nxd metadata of DEVICE: the two superblock copies of an "
	"SSD\n(its first 32 KiB), or the label of an HDD (a 4 KiB block: "
	"block 0 for\nformat 2, in the last MiB for format 1; both spots are "
	"cleared).  Refused while the device is part of an active "
	"volume, and while\nthe volume's log holds writes not yet on the HDD "
	"(or, for an HDD, while\nits SSD is not present to tell).",
	"Options:\n"
	"  -f, --force   wipe even if writes in the log are lost\n"
	"  --dry-run     only say what would be wiped\n"
	"Drain the volume first (nxdctl drain), then remove it.  After a "
	"wipe the HDD\nholds the volume's data from its data offset (format "
	"2: the sector\nshow-super printed; format 1: sector 0).\n" };
