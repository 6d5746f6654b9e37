// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl assemble, udev-info: volumes found by their metadata.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nxdctl.h"

/*
 * The tunables the superblock stored at its last write (the module's
 * own at that time), as table options into @co.
 */
static int stored_opts(const struct nxd_sb_info *sb, struct create_opts *co)
{
	char buf[NXD_TUN_STR_LEN];
	unsigned int i;
	int rc = 0;

	for (i = 0; !rc && i < NXD_TUN_NR; i++)
		rc = add_opt(co, nxd_tuns[i].name,
			     nxd_tun_str(&nxd_tuns[i],
					 nxd_tun_val(&sb->tun, &nxd_tuns[i]),
					 buf));
	return rc;
}

/*
 * Assemble the volume of @dev (an SSD or HDD).  @by_hand: an explicit
 * DEVICE, which takes back an earlier nxdctl remove; automatic assembly
 * leaves a volume so removed alone.  Without @name, the name the
 * superblock stored, else nxd-<UUID prefix>; with @sb_tun (no config
 * line and no table options given), the tunables it stored, written out.
 * Otherwise the kernel takes the stored ones for the tunables that no
 * option names.
 */
static int assemble_one(const char *dev, const char *name,
			const struct create_opts *opts, bool by_hand,
			bool sb_tun)
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
				    "built without kernel/nxd_codec.c");
		if (e && e != -EINVAL)
			return fail(errno_code(-e), "%s: %s", dev,
				    strerror(-e));
		return fail(NXDCTL_EXIT_NOVOL, "%s carries no nxd superblock "
			    "or HDD label", dev);
	}
	nxdctl_fmt_uuid(u, od.vol_uuid);
	if (active_volume(od.vol_uuid, vname, sizeof(vname))) {
		printf("volume %s is already active as %s\n", u, vname);
		if (by_hand && !co->dry_run)
			removed_clear(od.vol_uuid);
		return 0;
	}
	if (!by_hand && removed_marked(od.vol_uuid)) {
		printf("volume %s was removed with nxdctl remove: not "
		       "assembled automatically (nxdctl assemble DEVICE "
		       "does)\n", u);
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
	else if (valid_dm_name(od.sb.name))
		snprintf(vname, sizeof(vname), "%s", od.sb.name);
	else
		snprintf(vname, sizeof(vname), "nxd-%.8s", u);
	/* The kernel keeps the stored tunables that no option names. */
	co->base = od.sb.tun;
	co->base_valid = od.sb.tun_valid;
	if (sb_tun && od.sb.tun_valid) {
		rc = stored_opts(&od.sb, co);
		if (rc)
			return rc;
	}
	if (!co->uuid) {
		snprintf(dm_uuid, sizeof(dm_uuid), "NXD-%s", u);
		co->uuid = dm_uuid;
	}
	return create_volume(vname, hdd, ssd, co);
}

/*
 * A device carrying volume @uuid's metadata: its SSD, else its HDD (so
 * that assemble_one names the half that is missing).  0, -ENOENT, or an
 * exit code (two SSDs claim the volume).
 */
struct member_search {
	const uint8_t *uuid;
	char *out;
	size_t len;
	int ssds, hdds;
};

static int member_one(void *arg, const char *path)
{
	struct member_search *ms = arg;
	struct nxd_meta od;
	uint64_t bytes;
	enum role r;
	char u[40];
	int e;

	r = probe_role(path, 0, &od, &bytes, &e);
	if (r == ROLE_NONE || !uuid_eq(od.vol_uuid, ms->uuid))
		return 0;
	if (r == ROLE_SSD && ms->ssds++) {
		nxdctl_fmt_uuid(u, ms->uuid);
		return fail(NXDCTL_EXIT_NOVOL, "volume %s: both %s and %s "
			    "carry its SSD superblock", u, ms->out, path);
	}
	if (r == ROLE_SSD || (!ms->ssds && !ms->hdds++))
		snprintf(ms->out, ms->len, "%s", path);
	return 0;
}

static int find_member(const uint8_t *uuid, char *out, size_t len)
{
	struct member_search ms = { .uuid = uuid, .out = out, .len = len };
	int rc = for_each_candidate(member_one, &ms);

	if (rc)
		return rc;
	return ms.ssds || ms.hdds ? 0 : -ENOENT;
}

/* Every volume of config @t but noauto ones. */
static int assemble_tab(const struct nxdtab *t, bool dry_run)
{
	char dev[PATH_MAX], vname[NXD_NAME_LEN + 1], u[40];
	int worst = t->bad ? NXDCTL_EXIT_USAGE : 0, rc;
	unsigned int i;

	for (i = 0; i < t->n; i++) {
		const struct nxdtab_vol *v = &t->vols[i];
		struct create_opts co = v->co;

		nxdctl_fmt_uuid(u, v->uuid);
		if (v->noauto) {
			printf("%s: noauto in %s: not assembled\n", v->name,
			       t->path);
			continue;
		}
		if (active_volume(v->uuid, vname, sizeof(vname))) {
			printf("%s: volume %s is already active as %s\n",
			       v->name, u, vname);
			continue;
		}
		rc = find_member(v->uuid, dev, sizeof(dev));
		if (rc == -ENOENT)
			rc = fail(NXDCTL_EXIT_NOVOL, "%s: neither the SSD nor "
				  "the HDD of volume %s is present (%s:%u)",
				  v->name, u, t->path, v->line);
		if (!rc) {
			co.dry_run = dry_run;
			rc = assemble_one(dev, v->name, &co, false, false);
		}
		if (rc > worst)
			worst = rc;
	}
	return worst;
}

struct found_ssds {
	const struct create_opts *co;
	int worst, n;
};

static int found_one(void *arg, const char *path)
{
	struct found_ssds *f = arg;
	struct nxd_meta od;
	uint64_t bytes;
	int rc, e;

	if (probe_role(path, 0, &od, &bytes, &e) != ROLE_SSD)
		return 0;
	f->n++;
	rc = assemble_one(path, NULL, f->co, false, !f->co->nargs);
	if (rc > f->worst)
		f->worst = rc;
	return 0;
}

/* No config: every SSD with a superblock (whose HDD is present). */
static int assemble_found(const struct create_opts *co)
{
	struct found_ssds f = { .co = co };
	int rc = for_each_candidate(found_one, &f);

	if (rc)
		return rc;
	if (!f.n)
		printf("no nxd SSD found\n");
	return f.worst;
}

/*
 * --auto DEVICE (the udev rule): as assemble --all would for the volume
 * of DEVICE.  The config names it and gives its options; without a
 * config, the defaults.
 */
static int assemble_auto(const char *dev, const struct nxdtab *t,
			 const struct create_opts *co)
{
	const struct nxdtab_vol *v;
	struct create_opts vco;
	struct nxd_meta od;
	uint64_t bytes;
	char u[40];
	int e;

	if (t->missing)
		return assemble_one(dev, NULL, co, false, !co->nargs);
	if (probe_role(dev, 0, &od, &bytes, &e) == ROLE_NONE)
		return assemble_one(dev, NULL, co, false, false); /* says why */
	nxdctl_fmt_uuid(u, od.vol_uuid);
	v = nxdtab_find(t, od.vol_uuid);
	if (!v) {
		printf("volume %s is not in %s: not assembled\n", u, t->path);
		return t->bad ? NXDCTL_EXIT_USAGE : 0;
	}
	if (v->noauto) {
		printf("%s: noauto in %s: not assembled\n", v->name, t->path);
		return 0;
	}
	vco = v->co;
	vco.dry_run = co->dry_run;
	return assemble_one(dev, v->name, &vco, false, false);
}

/*
 * The config's line for the volume of @dev, if any: its options into @co
 * and its name into @name (kept in @buf).  0 or an exit code.
 */
static int tab_entry(const char *dev, const char *config,
		     struct create_opts *co, const char **name, char *buf,
		     size_t len)
{
	const struct nxdtab_vol *v;
	struct nxd_meta od;
	struct nxdtab t;
	uint64_t bytes;
	int rc, e;

	if (probe_role(dev, 0, &od, &bytes, &e) == ROLE_NONE)
		return 0;			/* assemble_one says why */
	rc = nxdtab_load(config, &t);
	if (rc)
		return rc;
	v = nxdtab_find(&t, od.vol_uuid);
	if (v) {
		bool dry = co->dry_run;

		*co = v->co;
		co->dry_run = dry;
		scopy(buf, len, v->name);
		*name = buf;
	}
	nxdtab_free(&t);
	return 0;
}

static int do_assemble(const struct cmd *c, int argc, char **argv)
{
	struct create_opts co = { 0 };
	const char *name = NULL, *config = NULL;
	char path[PATH_MAX], real[PATH_MAX];
	bool accept_loss = false, all = false, autom = false, take_over = false;
	struct nxdtab t;
	int o, rc;

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
		case O_ALL:
			all = true;
			break;
		case O_AUTO:
			autom = true;
			break;
		case O_CONFIG:
			config = optarg;
			break;
		case O_TAKEOVER:
			take_over = true;
			break;
		default:
			rc = table_opt_default(c, o, argv, &co);
			if (rc >= 0)
				return rc;
		}
	}
	rc = want_args(c, argc, argv, 0, all ? 0 : 1);
	if (rc)
		return rc;
	/* A --config FILE that is not there is an error, used or not. */
	if (config) {
		rc = nxdtab_load(config, &t);
		if (rc)
			return rc;
		nxdtab_free(&t);
	}
	if (optind < argc) {
		const char *dev = argv[optind];

		if (!strchr(dev, '/')) {
			snprintf(path, sizeof(path), "/dev/%s", dev);
			dev = path;
		}
		if (!realpath(dev, real))
			return fail(NXDCTL_EXIT_NOVOL, "%s: %s", dev,
				    strerror(errno));
		if (!autom) {
			bool line = false, sb_tun = !co.nargs;

			/* By hand, unnamed: the config's NAME and options. */
			if (!name && !co.nargs) {
				rc = tab_entry(real, config, &co, &name,
					       path, sizeof(path));
				line = name != NULL;
			}
			if (rc)
				return rc;
			/* Else what the superblock stored. */
			sb_tun = sb_tun && !line;
			if (accept_loss) {
				rc = add_opt(&co, "accept_log_loss", NULL);
				if (rc)
					return rc;
				fprintf(stderr, "nxdctl: --accept-log-loss: "
					"writes in the part of the log that "
					"cannot be read are lost\n");
			}
			co.take_over = take_over;
			return assemble_one(real, name, &co, true, sb_tun);
		}
	} else if (autom) {
		return usage_error(c->name, "--auto needs a DEVICE");
	}
	/* Automatic: --all, no DEVICE, or --auto DEVICE. */
	if (name)
		return usage_error(c->name, "--name needs a DEVICE (without "
				   "--auto); the config names volumes");
	if (accept_loss)
		return usage_error(c->name, "--accept-log-loss needs a DEVICE");
	if (take_over)
		return usage_error(c->name, "--take-over needs a DEVICE (without "
				   "--auto): one volume at a time");
	rc = nxdtab_load(config, &t);
	if (rc)
		return rc;
	if (!t.missing && co.nargs) {
		nxdtab_free(&t);
		return usage_error(c->name, "table options come from %s",
				   t.path);
	}
	if (autom)
		rc = assemble_auto(real, &t, &co);
	else if (t.missing)
		rc = assemble_found(&co);
	else
		rc = assemble_tab(&t, co.dry_run);
	nxdtab_free(&t);
	return rc;
}

/* Remove (and, with drain-on-stop in the config, first drain) @name. */
static int stop_one(const char *name, const struct nxdtab *t)
{
	const struct nxdtab_vol *tv;
	uint8_t uuid[16];
	struct vol v;
	int rc, worst = 0;

	rc = resolve_vol(name, &v);
	if (rc)
		return rc;
	tv = vol_uuid_of(v.name, uuid) ? NULL : nxdtab_find(t, uuid);
	if (tv && tv->drain_on_stop) {
		printf("%s: drain-on-stop: draining the log\n", v.name);
		fflush(stdout);
		/* The log survives a failed drain: remove the volume anyway. */
		worst = dm_message(&v, "drain");
	}
	rc = remove_volume(&v, true, false);
	return rc > worst ? rc : worst;
}

static int do_stop(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, O_ALL },
		{ "config", required_argument, NULL, O_CONFIG },
		HELP_OPT, { 0 }
	};
	struct nxd_ioc_list *l = NULL;
	const char *config = NULL;
	bool all = false;
	const struct simple_opt so[] = {
		{ O_ALL, &all, NULL }, { O_CONFIG, NULL, &config }, { 0 }
	};
	struct nxdtab t;
	unsigned int i;
	int rc, worst;

	rc = simple_opts(c, argc, argv, "h", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, all ? 0 : 1, all ? 0 : INT_MAX);
	if (rc)
		return rc;
	rc = nxdtab_load(config, &t);
	if (rc)
		return rc;
	worst = t.bad ? NXDCTL_EXIT_USAGE : 0;
	if (all && access(CONTROL_PATH, F_OK) && errno == ENOENT) {
		/* Nothing to stop, and no error at a shutdown without it. */
		printf("no nxd volume is active (dm-nxd is not loaded)\n");
	} else if (all) {
		l = calloc(1, sizeof(*l));
		rc = l ? get_list(l) : fail(NXDCTL_EXIT_KERNEL,
					    "out of memory");
		if (rc) {
			free(l);
			nxdtab_free(&t);
			return rc;
		}
		if (!l->count)
			printf("no nxd volume is active\n");
		for (i = 0; i < l->count; i++) {
			char n[NXD_NAME_LEN + 1];

			snprintf(n, sizeof(n), "%.*s", NXD_NAME_LEN,
				 l->vols[i].name);
			rc = stop_one(n, &t);
			if (rc > worst)
				worst = rc;
		}
		free(l);
	} else {
		for (; optind < argc; optind++) {
			rc = stop_one(argv[optind], &t);
			if (rc > worst)
				worst = rc;
		}
	}
	nxdtab_free(&t);
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
	int rc, e;

	rc = simple_opts(c, argc, argv, "h", opts, NULL);
	if (rc >= 0)
		return rc;
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
	"assemble", do_assemble,
	"[DEVICE [--name NAME] | --all | --auto DEVICE] [OPTIONS]",
	"Find the other half of an nxd volume and create it.  DEVICE "
	"carries\nan nxd SSD superblock or HDD label; its peer is looked "
	"for among\n/sys/class/block.  Assembling a DEVICE by hand takes "
	"back an earlier\n'nxdctl remove'.\n"
	"With --all (or without DEVICE): every volume of the config file "
	"(" NXDTAB_PATH ")\nbut those marked noauto, with its NAME and "
	"options; without a config\nfile, every volume whose SSD and HDD "
	"are both present.  --auto DEVICE:\nthe same for the volume of "
	"DEVICE (the udev rule).  Automatic assembly\nskips volumes removed "
	"with 'nxdctl remove' since the last boot.\n"
	"A volume whose HDD label names another host as its owner is "
	"refused\n(exit status 6): see nxdctl takeover.",
	"Options:\n"
	"  --name NAME   volume name (default: its config line's NAME and "
	"options,\n"
	"                else the name and tunables its superblock stored "
	"at its\n"
	"                last write, else nxd-<first 8 digits of the UUID>)\n"
	"  --all         assemble what the config file lists\n"
	"  --auto        as --all, for the volume of DEVICE only\n"
	"  --config FILE the config file (default $NXD_CONFIG, else "
	NXDTAB_PATH ")\n"
	"  and the table options of create, but not --format (with --all "
	"or --auto:\n  only without a config file).\n"
	"  --accept-log-loss     the SSD log cannot be read (or was abandoned):\n"
	"                        assemble without what it holds (one DEVICE)\n"
	"  --take-over           make this host the owner first, also of a "
	"volume\n"
	"                        another host owns (one DEVICE; see "
	"takeover)\n",
};

const struct cmd cmd_stop = {
	"stop", do_stop, "VOL... | --all [--config FILE]",
	"Remove nxd volumes (all active ones with --all) at shutdown: a "
	"volume\nmarked drain-on-stop in the config file is drained first.  "
	"Unlike\n'nxdctl remove', automatic assembly brings them back.",
	"Options:\n"
	"  --all         every active nxd volume\n"
	"  --config FILE the config file (default $NXD_CONFIG, else "
	NXDTAB_PATH ")\n"
	VOL_HELP,
};

const struct cmd cmd_udev_info = {
	"udev-info", do_udev_info, "KERNEL_NAME",
	"For udev IMPORT{program}: print NXD_ROLE (volume, ssd or hdd) "
	"and\nNXD_VOL_UUID of the block device KERNEL_NAME (e.g. dm-3, "
	"sdb), or\nnothing if it is not nxd.", "",
};
