// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl assemble, udev-info: volumes found by their metadata.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "nxdctl.h"

static int assemble_one(const char *dev, const char *name,
			const struct create_opts *opts)
{
	struct create_opts co_copy = *opts, *co = &co_copy;
	char other[PATH_MAX], vname[NXD_NAME_LEN + 1], u[40], dm_uuid[48];
	const char *ssd, *hdd;
	struct nxd_meta od;
	enum role r;
	uint64_t bytes;
	int e, rc;

	r = probe_role(dev, 0, &od, &bytes, &e);
	if (r == ROLE_NONE) {
		if (e == -ENOSYS)
			return fail(NXDCTL_EXIT_KERNEL, "this nxdctl was "
				    "built without kernel/nxd_core.c");
		if (e && e != -EINVAL)
			return fail(errno_code(-e), "%s: %s", dev,
				    strerror(-e));
		return fail(NXDCTL_EXIT_NOVOL, "%s carries no nxd superblock "
			    "or HDD label", dev);
	}
	nxdctl_fmt_uuid(u, od.vol_uuid);
	if (active_volume(od.vol_uuid, vname, sizeof(vname))) {
		printf("volume %s is already active as %s\n", u, vname);
		return 0;
	}
	rc = find_peer(&od, r == ROLE_SSD ? ROLE_HDD : ROLE_SSD, dev, other,
		       sizeof(other));
	if (rc == -ENOENT)
		return fail(NXDCTL_EXIT_NOVOL, "volume %s: its %s is not "
			    "present (yet)", u, r == ROLE_SSD ? "HDD" : "SSD");
	if (rc)
		return rc;
	ssd = r == ROLE_SSD ? dev : other;
	hdd = r == ROLE_SSD ? other : dev;
	/* The volume's length, not the HDD's: growing is a separate step. */
	if (r == ROLE_HDD && probe_role(ssd, 0, &od, &bytes, &e) != ROLE_SSD)
		return fail(NXDCTL_EXIT_NOVOL, "%s: superblock vanished", ssd);
	co->len = od.data_sectors;
	if (name)
		snprintf(vname, sizeof(vname), "%s", name);
	else
		snprintf(vname, sizeof(vname), "nxd-%.8s", u);
	if (!co->uuid) {
		snprintf(dm_uuid, sizeof(dm_uuid), "NXD-%s", u);
		co->uuid = dm_uuid;
	}
	return create_volume(vname, hdd, ssd, co);
}

static int do_assemble(const struct cmd *c, int argc, char **argv)
{
	struct create_opts co = { 0 };
	const char *name = NULL;
	char path[PATH_MAX], real[PATH_MAX];
	struct dirent *de;
	int o, rc, worst = 0, n = 0;
	bool accept_loss = false;
	DIR *d;

	while ((o = getopt_long(argc, argv, "h", table_opts, NULL)) != -1) {
		switch (o) {
		case O_NAME:
			if (!valid_dm_name(optarg))
				return usage_error(c->name, "bad --name");
			name = optarg;
			break;
		case O_FORMAT:
		case O_UUID:
			return usage_error(c->name, "assemble takes no --format "
					   "or --uuid");
		case O_ACCEPT_LOSS:
			accept_loss = true;
			break;
		default:
			return opt_default(c, o, argv);
		case O_WTHR ... O_DRY:
			rc = table_opt(c->name, o, optarg, &co);
			if (rc)
				return rc;
		}
	}
	rc = want_args(c, argc, argv, 0, 1);
	if (rc)
		return rc;
	if (optind < argc) {
		const char *dev = argv[optind];

		if (!strchr(dev, '/')) {
			snprintf(path, sizeof(path), "/dev/%s", dev);
			dev = path;
		}
		if (!realpath(dev, real))
			return fail(NXDCTL_EXIT_NOVOL, "%s: %s", dev,
				    strerror(errno));
		if (accept_loss) {
			rc = add_opt(&co, "accept_log_loss", NULL);
			if (rc)
				return rc;
			fprintf(stderr, "nxdctl: --accept-log-loss: writes in the "
				"part of the log that cannot be read are lost\n");
		}
		return assemble_one(real, name, &co);
	}
	if (name)
		return usage_error(c->name, "--name needs a DEVICE");
	if (accept_loss)
		return usage_error(c->name, "--accept-log-loss needs a DEVICE");

	/* No device: every SSD with a superblock whose HDD is present. */
	snprintf(path, sizeof(path), "%s/class/block", sysfs_root);
	d = opendir(path);
	if (!d)
		return fail(NXDCTL_EXIT_KERNEL, "%s: %s", path,
			    strerror(errno));
	while ((de = readdir(d))) {
		struct nxd_meta od;
		uint64_t bytes;
		int e;

		if (de->d_name[0] == '.' || !candidate(de->d_name))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		if (probe_role(path, 0, &od, &bytes, &e) != ROLE_SSD)
			continue;
		n++;
		rc = assemble_one(path, NULL, &co);
		if (rc > worst)
			worst = rc;
	}
	closedir(d);
	if (!n)
		printf("no nxd SSD found\n");
	return worst;
}

static int do_udev_info(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = { HELP_OPT, { 0 } };
	char path[PATH_MAX], buf[64], u[40];
	const char *kn;
	struct nxd_meta od;
	uint64_t bytes;
	unsigned int ma, mi, i, vma, vmi;
	int o, rc, e;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (rc)
		return rc;
	kn = strrchr(argv[optind], '/');
	kn = kn ? kn + 1 : argv[optind];

	snprintf(path, sizeof(path), "%s/class/block/%s/nxd", sysfs_root, kn);
	if (is_dir(path)) {
		struct nxd_ioc_list *l = calloc(1, sizeof(*l));

		snprintf(path, sizeof(path), "%s/class/block/%s/dev",
			 sysfs_root, kn);
		if (!l || sysfs_read(path, buf, sizeof(buf)) ||
		    sscanf(buf, "%u:%u", &ma, &mi) != 2) {
			free(l);
			return NXDCTL_EXIT_NOVOL;
		}
		rc = get_list(l);
		for (i = 0; !rc && i < l->count; i++) {
			nxdctl_decode_dev(l->vols[i].dev, &vma, &vmi);
			if (vma != ma || vmi != mi)
				continue;
			nxdctl_fmt_uuid(u, l->vols[i].vol_uuid);
			printf("NXD_ROLE=volume\nNXD_VOL_UUID=%s\n"
			       "NXD_VOL_NAME=%.*s\n", u, NXD_NAME_LEN,
			       l->vols[i].name);
			free(l);
			return 0;
		}
		free(l);
		return rc ? rc : NXDCTL_EXIT_NOVOL;
	}

	snprintf(path, sizeof(path), "/dev/%s", kn);
	/* Not ours: nothing to import. */
	ondisk_print_env(stdout, probe_role(path, 0, &od, &bytes, &e), &od,
			 false);
	return 0;
}

const struct cmd cmd_assemble = {
	"assemble", do_assemble, "[DEVICE] [--name NAME] [OPTIONS]",
	"Find the other half of an nxd volume and create it.  DEVICE "
	"carries\nan nxd SSD superblock or HDD label; its peer is looked "
	"for among\n/sys/class/block.  Without DEVICE, assemble every "
	"volume whose SSD\nand HDD are both present.",
	"Options:\n"
	"  --name NAME   volume name (default nxd-<first 8 digits of the "
	"UUID>)\n"
	"  and the table options of create, but not --format.\n"
	"  --accept-log-loss     the SSD log cannot be read (or was abandoned):\n"
	"                        assemble without what it holds (one DEVICE)\n",
};

const struct cmd cmd_udev_info = {
	"udev-info", do_udev_info, "KERNEL_NAME",
	"For udev IMPORT{program}: print NXD_ROLE (volume, ssd or hdd) "
	"and\nNXD_VOL_UUID of the block device KERNEL_NAME (e.g. dm-3, "
	"sdb), or\nnothing if it is not nxd.", "",
};
