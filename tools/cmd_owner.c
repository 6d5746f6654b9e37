// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl takeover, set-owner: the host that owns a volume (owner.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nxdctl.h"

/* A volume found for takeover or set-owner. */
struct owned {
	char hdd[PATH_MAX];		/* its HDD */
	struct nxd_meta m;		/* the HDD's label */
	char active[NXD_NAME_LEN + 1];	/* active here as; "": not */
	char u[40];			/* volume UUID */
};

struct hdd_search {
	const uint8_t *uuid;
	char *out;
	size_t len;
};

static int hdd_one(void *arg, const char *path)
{
	struct hdd_search *hs = arg;
	struct nxd_meta od;
	uint64_t bytes;
	int e;

	if (probe_role(path, 0, &od, &bytes, &e) != ROLE_HDD ||
	    !uuid_eq(od.vol_uuid, hs->uuid))
		return 0;
	snprintf(hs->out, hs->len, "%s", path);
	return -1;	/* found: stop */
}

/* The HDD of inactive volume @uuid, its SSD's label hint in *@hint. */
static int find_hdd(const uint8_t *uuid, char *out, size_t len,
		    uint64_t *hint)
{
	struct hdd_search hs = { .uuid = uuid, .out = out, .len = len };
	int rc;

	out[0] = 0;
	*hint = 0;
	rc = for_each_candidate(hdd_one, &hs);
	if (rc > 0)
		return rc;
	return out[0] ? 0 : -ENOENT;
}

/* The devices of active volume @name from its table: HDD, and the hint. */
static int active_hdd(const char *name, char *hdd, size_t len, uint64_t *hint)
{
	char target[32], params[1024], h[64], s[64], ssd[PATH_MAX];
	struct nxd_meta od;
	uint64_t bytes;
	int e, rc;

	rc = dm_table_of(name, target, sizeof(target), params, sizeof(params));
	if (rc)
		return rc;
	if (strcmp(target, TARGET_NAME) || sscanf(params, "%63s %63s", h, s) != 2)
		return fail(NXDCTL_EXIT_NOVOL, "%s is not an nxd volume", name);
	if (devnode_of(h, hdd, len))
		return fail(NXDCTL_EXIT_NOVOL, "%s: no device node for its HDD "
			    "%s", name, h);
	*hint = 0;
	if (!devnode_of(s, ssd, sizeof(ssd)) &&
	    probe_role(ssd, 0, &od, &bytes, &e) == ROLE_SSD)
		*hint = od.hdd_label_sector;
	return 0;
}

/*
 * VOL or DEV: a device carrying nxd metadata (SSD or HDD), a NAME of the
 * config file, or an active volume.  0 or an exit code (reported).
 */
static int find_owned(const char *arg, struct owned *o)
{
	char path[PATH_MAX], real[PATH_MAX];
	const struct nxdtab_vol *tv;
	uint8_t uuid[16];
	struct nxd_meta od;
	struct nxdtab t;
	uint64_t bytes, hint = 0;
	bool have = false;
	unsigned int i;
	struct vol v;
	int e, rc;

	memset(o, 0, sizeof(*o));
	snprintf(path, sizeof(path), "%s%s", strchr(arg, '/') ? "" : "/dev/",
		 arg);
	if (realpath(path, real)) {
		enum role r = probe_role(real, 0, &od, &bytes, &e);

		if (r != ROLE_NONE) {
			memcpy(uuid, od.vol_uuid, 16);
			have = true;
		}
		if (r == ROLE_HDD)
			scopy(o->hdd, sizeof(o->hdd), real);
		if (r == ROLE_SSD) {
			hint = od.hdd_label_sector;
			if (find_peer(&od, ROLE_HDD, real, o->hdd,
				      sizeof(o->hdd)))
				o->hdd[0] = 0;
		}
	}
	if (!have && !strchr(arg, '/')) {
		rc = nxdtab_load(NULL, &t);
		if (rc)
			return rc;
		for (i = 0; i < t.n && !have; i++) {
			tv = &t.vols[i];
			if (!strcmp(tv->name, arg)) {
				memcpy(uuid, tv->uuid, 16);
				have = true;
			}
		}
		nxdtab_free(&t);
	}
	if (!have) {
		rc = resolve_vol(arg, &v);
		if (!rc)
			rc = vol_uuid_of(v.name, uuid);
		if (rc)
			return rc;
	}
	nxdctl_fmt_uuid(o->u, uuid);
	if (active_volume(uuid, o->active, sizeof(o->active))) {
		rc = active_hdd(o->active, o->hdd, sizeof(o->hdd), &hint);
		if (rc)
			return rc;
	} else if (!o->hdd[0] && find_hdd(uuid, o->hdd, sizeof(o->hdd), &hint)) {
		return fail(NXDCTL_EXIT_NOVOL, "volume %s: its HDD is not "
			    "present: the owner is in its label", o->u);
	}
	rc = owner_read(o->hdd, hint, &o->m);
	if (rc)
		return fail(rc == -ENODATA ? NXDCTL_EXIT_NOVOL : errno_code(-rc),
			    "%s: cannot read the HDD label of volume %s: %s",
			    o->hdd, o->u, rc == -ENODATA ? "none found" :
			    strerror(-rc));
	if (!uuid_eq(o->m.vol_uuid, uuid))
		return fail(NXDCTL_EXIT_NOVOL, "%s: its label is of volume "
			    "other than %s", o->hdd, o->u);
	return 0;
}

static const char *shown(const char *owner)
{
	return *owner ? owner : "(none)";
}

/* Write @to into @o's label (unless @dry_run), saying what it does. */
static int change_owner(const char *verb, const struct owned *o,
			const char *to, bool dry_run)
{
	int rc;

	printf("%s: volume %s: owner '%s' -> '%s' in the HDD label of %s "
	       "(sector %llu);\nnothing else changes%s\n", verb, o->u,
	       shown(o->m.label.owner), shown(to), o->hdd,
	       (unsigned long long)o->m.label_sector,
	       dry_run ? " (--dry-run: nothing written)" : "");
	if (dry_run)
		return 0;
	rc = owner_write(o->hdd, &o->m, to);
	if (rc)
		return fail(errno_code(-rc), "%s: cannot write the owner: %s",
			    o->hdd, rc == -ESTALE ? "the label changed "
			    "meanwhile" : strerror(-rc));
	return 0;
}

static int do_takeover(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, O_DRY },
		HELP_OPT, { 0 }
	};
	char me[NXD_LABEL_OWNER_LEN];
	bool dry_run = false;
	const struct simple_opt so[] = { { O_DRY, &dry_run, NULL }, { 0 } };
	struct owned o;
	int rc;

	rc = simple_opts(c, argc, argv, "h", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc)
		rc = local_owner(me, sizeof(me));
	if (!rc)
		rc = find_owned(argv[optind], &o);
	if (rc)
		return rc;
	if (!strcmp(o.m.label.owner, me)) {
		printf("volume %s already belongs to this host ('%s')%s%s\n",
		       o.u, me, o.active[0] ? ", active as " : "", o.active);
		return 0;
	}
	if (o.active[0])
		return fail(NXDCTL_EXIT_USAGE, "volume %s is active on this "
			    "host as %s, but its label names '%s': not "
			    "taking over a running volume (nxdctl set-owner "
			    "%s gives an unowned one to this host)", o.u,
			    o.active, shown(o.m.label.owner), o.active);
	rc = change_owner("takeover", &o, me, dry_run);
	if (!rc && !dry_run && o.m.label.owner[0])
		printf("host '%s' must not activate it again: until it is "
		       "given back, its\nnxdctl refuses it\n",
		       o.m.label.owner);
	return rc;
}

static int do_set_owner(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "clear", no_argument, NULL, 'c' },
		{ "dry-run", no_argument, NULL, O_DRY },
		HELP_OPT, { 0 }
	};
	char me[NXD_LABEL_OWNER_LEN];
	const char *to;
	bool dry_run = false, clear = false;
	const struct simple_opt so[] = {
		{ O_DRY, &dry_run, NULL }, { 'c', &clear, NULL }, { 0 }
	};
	struct owned o;
	int rc;

	rc = simple_opts(c, argc, argv, "h", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 2);
	if (rc)
		return rc;
	if (clear && argc - optind == 2)
		return usage_error(c->name, "HOST or --clear, not both");
	rc = local_owner(me, sizeof(me));
	if (rc)
		return rc;
	to = clear ? "" : argc - optind == 2 ? argv[optind + 1] : me;
	if (*to && !valid_owner(to))
		return usage_error(c->name, "bad HOST '%s' (1 to %d letters, "
				   "digits or ._:-)", to,
				   NXD_LABEL_OWNER_LEN - 1);
	rc = find_owned(argv[optind], &o);
	if (rc)
		return rc;
	if (!strcmp(o.m.label.owner, to)) {
		printf("volume %s: owner already '%s'\n", o.u, shown(to));
		return 0;
	}
	if (o.m.label.owner[0] && strcmp(o.m.label.owner, me))
		return fail(NXDCTL_EXIT_FOREIGN, "volume %s belongs to host "
			    "'%s', not to this host ('%s'): nxdctl takeover "
			    "%s first", o.u, o.m.label.owner, me, argv[optind]);
	if (o.active[0] && *to && strcmp(to, me))
		return fail(NXDCTL_EXIT_USAGE, "volume %s is active here as "
			    "%s: remove it first; given to '%s' while active "
			    "here, both hosts could activate it", o.u,
			    o.active, to);
	return change_owner("set-owner", &o, to, dry_run);
}

const struct cmd cmd_takeover = {
	"takeover", do_takeover, "VOL|DEVICE [--dry-run]",
	"Make this host the owner of a volume that belongs to another host "
	"(its HDD\nlabel names the owner; create records it, and assemble "
	"and the udev rule\nrefuse a volume of another host).  Rewrites the "
	"owner in the HDD label and\nnothing else; the volume is not "
	"activated.  Refused while the volume is\nactive on this host.  "
	"Whether it is active on the other host cannot be seen\nfrom here: "
	"make sure it is not (stopped, or that host is down or fenced);\n"
	"activating it on two hosts at once destroys it.",
	"Options:\n"
	"  --dry-run   only say what would change\n"
	"VOL|DEVICE: the volume's SSD or HDD, a NAME of the config file, or "
	"an\nactive volume.  This host is the first line of "
	SYSTEM_ID_PATH " if it\nexists, else the host name.\n",
};

const struct cmd cmd_set_owner = {
	"set-owner", do_set_owner, "VOL|DEVICE [HOST | --clear] [--dry-run]",
	"Set the owner recorded in the HDD label of a volume to HOST (default: "
	"this\nhost), or clear it (--clear: any host may activate it, as "
	"before owners\nexisted).  Only for a volume without an owner or "
	"owned by this host; one of\nanother host needs takeover.  A volume "
	"active here can be given to this\nhost or cleared, not given to "
	"another host.",
	"Options:\n"
	"  --clear     no owner\n"
	"  --dry-run   only say what would change\n"
	"VOL|DEVICE as for takeover.\n",
};
