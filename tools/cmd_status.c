// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl status: the health of volumes at a glance (state, devices, log
 * use, writes not yet on the HDD, destage rate, errors, memory), and the
 * collection of that model (status.h) that list and stats --prometheus
 * share.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nxdctl.h"

/* sysfs attribute @attr of the volume with device number ma:mi. */
static int vol_attr(const struct nxdctl_status *s, const char *attr,
		    char *buf, size_t len)
{
	char path[PATH_MAX];

	if (test_stats)
		snprintf(path, sizeof(path), "%s/block/dm-0/nxd/%s",
			 sysfs_root, attr);
	else
		snprintf(path, sizeof(path), "%s/dev/block/%u:%u/nxd/%s",
			 sysfs_root, s->major, s->minor, attr);
	return sysfs_read(path, buf, len);
}

static void fill_devices(struct nxdctl_status *s)
{
	char target[32], params[1024], h[64], d[64];

	if (test_stats || dm_table_of(s->name, target, sizeof(target),
				      params, sizeof(params)))
		return;
	if (sscanf(params, "%63s %63s", h, d) != 2)
		return;
	if (devname_of(h, s->hdd, sizeof(s->hdd)))
		snprintf(s->hdd, sizeof(s->hdd), "%s", h);
	if (devname_of(d, s->ssd, sizeof(s->ssd)))
		snprintf(s->ssd, sizeof(s->ssd), "%s", d);
	if (by_id_of(s->hdd, s->hdd_id, sizeof(s->hdd_id)))
		s->hdd_id[0] = 0;
	if (by_id_of(s->ssd, s->ssd_id, sizeof(s->ssd_id)))
		s->ssd_id[0] = 0;
}

/* The owner in the HDD label of the live table's HDD. */
static void fill_owner(struct nxdctl_status *s)
{
	char target[32], params[1024], h[64], hdd[PATH_MAX];
	struct nxd_meta m;

	if (test_stats || dm_table_of(s->name, target, sizeof(target),
				      params, sizeof(params)) ||
	    sscanf(params, "%63s", h) != 1 || devnode_of(h, hdd, sizeof(hdd)))
		return;
	/* Where the superblock says the label is: at the end unless grown. */
	if (owner_read(hdd, s->size_bytes >> 9, &m) ||
	    !uuid_eq(m.vol_uuid, s->uuid))
		return;
	scopy(s->owner, sizeof(s->owner), m.label.owner);
	s->owner_known = true;
}

static void fill_live(struct nxdctl_status *s)
{
	char buf[64];
	char *end;
	long v;

	s->have_stats = !peek_stats(nxdctl_encode_dev(s->major, s->minor),
				    s->name, &s->st);
	if (vol_attr(s, "state", s->state, sizeof(s->state)))
		s->state[0] = 0;
	/* The test hook's list entry has no threshold: sysfs's. */
	if (test_stats && !vol_attr(s, "write_threshold", buf, sizeof(buf))) {
		v = strtol(buf, &end, 10);
		if (!*end && v >= 0)
			s->write_threshold = (uint32_t)v;
	}
	if (!vol_attr(s, "destage_rate", buf, sizeof(buf))) {
		v = strtol(buf, &end, 10);
		if (!*end && v >= 0)
			s->destage_limit = v;
	}
	if (!vol_attr(s, "low_watermark", buf, sizeof(buf))) {
		v = strtol(buf, &end, 10);
		if (!*end && v >= 0 && v <= 100)
			s->low_wm = (int)v;
	}
	if (!vol_attr(s, "high_watermark", buf, sizeof(buf))) {
		v = strtol(buf, &end, 10);
		if (!*end && v >= 0 && v <= 100)
			s->high_wm = (int)v;
	}
	if (!vol_attr(s, "stream_share", buf, sizeof(buf))) {
		v = strtol(buf, &end, 10);
		if (!*end && v >= 0 && v <= 100)
			s->stream_share = (int)v;
	}
}

int collect_status(int nvols, char **vols, double interval, bool devices,
		   struct nxdctl_status **out, unsigned int *n,
		   unsigned int *total)
{
	struct nxd_ioc_list *l = NULL;
	struct nxdctl_status *s;
	unsigned int i, k;
	struct vol v;
	int rc = 0;

	*out = NULL;
	*n = *total = 0;
	s = calloc(nvols ? nvols : NXD_IOC_MAX_VOLS, sizeof(*s));
	l = calloc(1, sizeof(*l));
	if (!s || !l) {
		rc = fail(NXDCTL_EXIT_KERNEL, "out of memory");
		goto out;
	}
	if (test_stats && !nvols) {
		/* The test hook, every volume: dm-0 of the fake sysfs. */
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/block/dm-0/dm/name",
			 sysfs_root);
		if (sysfs_read(path, l->vols[0].name, NXD_NAME_LEN))
			snprintf(l->vols[0].name, NXD_NAME_LEN, "vol0");
		l->vols[0].dev = nxdctl_encode_dev(253, 0);
		l->count = l->total = 1;
	} else if (test_stats) {
		/* The test hook: VOLs named, statistics from the file. */
		for (k = 0; (int)k < nvols; k++) {
			snprintf(l->vols[k].name, NXD_NAME_LEN, "%s", vols[k]);
			l->vols[k].dev = nxdctl_encode_dev(253, k);
		}
		l->count = l->total = nvols;
	} else {
		rc = get_list(l);
		if (rc)
			goto out;
	}
	*total = l->total;
	if (!nvols) {
		for (i = 0; i < l->count; i++)
			nxdctl_status_from_vol(&s[(*n)++], &l->vols[i]);
	}
	for (k = 0; (int)k < nvols; k++) {
		uint64_t dev;

		rc = resolve_vol(vols[k], &v);
		if (rc)
			goto out;
		dev = test_stats ? l->vols[k].dev :
		      nxdctl_encode_dev(v.major, v.minor);
		for (i = 0; i < l->count && l->vols[i].dev != dev; i++)
			;
		if (i == l->count) {
			rc = fail(NXDCTL_EXIT_NOVOL, "%s: dm-nxd does not know "
				  "this volume", vols[k]);
			goto out;
		}
		nxdctl_status_from_vol(&s[(*n)++], &l->vols[i]);
	}
	for (i = 0; i < *n; i++) {
		fill_live(&s[i]);
		fill_owner(&s[i]);
		if (devices)
			fill_devices(&s[i]);
	}
	if (interval > 0) {
		struct timespec ts = {
			.tv_sec = (time_t)interval,
			.tv_nsec = (long)((interval - (time_t)interval) * 1e9),
		};

		for (i = 0; i < *n; i++)
			s[i].prev = s[i].st.c;
		while (nanosleep(&ts, &ts))
			;
		for (i = 0; i < *n; i++) {
			if (!s[i].have_stats)
				continue;
			s[i].have_stats = !peek_stats(nxdctl_encode_dev(
				s[i].major, s[i].minor), s[i].name, &s[i].st);
			s[i].interval_s = interval;
		}
	}
	*out = s;
	s = NULL;
out:
	free(s);
	free(l);
	return rc;
}

int collect_missing(const char *config, struct nxdctl_status **s,
		    unsigned int *n)
{
	struct nxdctl_status *ns;
	struct nxdtab t;
	unsigned int i, k;
	int rc;

	rc = nxdtab_load(config, &t);
	if (rc || !t.n)
		return rc;
	ns = realloc(*s, (*n + t.n) * sizeof(*ns));
	if (!ns) {
		nxdtab_free(&t);
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	}
	*s = ns;
	for (i = 0; i < t.n; i++) {
		/* noauto: assembled by hand (or an HA manager), when wanted. */
		if (t.vols[i].noauto)
			continue;
		for (k = 0; k < *n && !uuid_eq(ns[k].uuid, t.vols[i].uuid); k++)
			;
		if (k < *n)
			continue;
		k = (*n)++;
		memset(&ns[k], 0, sizeof(ns[k]));
		scopy(ns[k].name, sizeof(ns[k].name), t.vols[i].name);
		memcpy(ns[k].uuid, t.vols[i].uuid, 16);
		ns[k].destage_limit = -1;
		ns[k].low_wm = -1;
		ns[k].high_wm = -1;
		ns[k].stream_share = -1;
		ns[k].missing = true;
	}
	nxdtab_free(&t);
	return 0;
}

int health_exit(const struct nxdctl_status *s, unsigned int n)
{
	switch (nxdctl_status_worst(s, n)) {
	case NXDCTL_HEALTH_MISSING:
		return NXDCTL_EXIT_NOVOL;
	case NXDCTL_HEALTH_DEGRADED:
		return NXDCTL_EXIT_DEGRADED;
	default:
		return 0;
	}
}

/*
 * VOL arguments that name a volume of the configuration file that is not
 * active: moved to *@miss as inactive entries (exit status 2, "configured
 * but not active"), the others kept in @vols.
 */
static int split_inactive(const char *config, int *nvols, char **vols,
			  struct nxdctl_status **miss, unsigned int *nmiss)
{
	struct nxdctl_status *act = NULL, *m;
	unsigned int na, tot, i, j;
	struct nxdtab t;
	int k, kept = 0, rc;

	rc = nxdtab_load(config, &t);
	if (rc || !t.n)
		goto out;
	rc = collect_status(0, NULL, 0, false, &act, &na, &tot);
	if (rc)
		goto out;
	*miss = calloc(*nvols, sizeof(**miss));
	if (!*miss) {
		rc = fail(NXDCTL_EXIT_KERNEL, "out of memory");
		goto out;
	}
	for (k = 0; k < *nvols; k++) {
		for (i = 0; i < t.n && strcmp(t.vols[i].name, vols[k]); i++)
			;
		for (j = 0; i < t.n && j < na; j++)
			if (uuid_eq(act[j].uuid, t.vols[i].uuid) ||
			    !strcmp(act[j].name, vols[k]))
				break;
		if (i == t.n || j < na) {
			vols[kept++] = vols[k];
			continue;
		}
		m = &(*miss)[(*nmiss)++];
		scopy(m->name, sizeof(m->name), t.vols[i].name);
		memcpy(m->uuid, t.vols[i].uuid, 16);
		m->destage_limit = -1;
		m->low_wm = -1;
		m->high_wm = -1;
		m->stream_share = -1;
		m->missing = true;
	}
	*nvols = kept;
out:
	free(act);
	nxdtab_free(&t);
	return rc;
}

static int do_status(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "interval", required_argument, NULL, 'i' },
		{ "config", required_argument, NULL, O_CONFIG },
		HELP_OPT, { 0 }
	};
	struct nxdctl_status *s = NULL, *miss = NULL, *m;
	unsigned int n = 0, total = 0, i, nmiss = 0;
	const char *config = NULL;
	int nvols;
	double interval = 1.0;
	bool json = false;
	int o, rc;

	while ((o = getopt_long(argc, argv, "ji:h", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			json = true;
			break;
		case O_CONFIG:
			config = optarg;
			break;
		case 'i':
			if (!strcmp(optarg, "0")) {
				interval = 0;
				break;
			}
			rc = parse_pos_double(c->name, "--interval", optarg,
					      &interval);
			if (rc)
				return rc;
			if (interval > 3600)
				return usage_error(c->name, "--interval: at "
						   "most 3600 seconds");
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 0, NXD_IOC_MAX_VOLS);
	if (rc)
		return rc;
	nvols = argc - optind;
	if (nvols) {
		rc = split_inactive(config, &nvols, argv + optind, &miss,
				    &nmiss);
		if (rc)
			return rc;
	}
	if (nvols || !nmiss)
		rc = collect_status(nvols, argv + optind, interval, true, &s,
				    &n, &total);
	if (!rc && nmiss) {
		m = realloc(s, (n + nmiss) * sizeof(*s));
		if (!m)
			rc = fail(NXDCTL_EXIT_KERNEL, "out of memory");
		else
			s = m;
	}
	if (rc) {
		free(miss);
		free(s);
		return rc;
	}
	for (i = 0; i < nmiss; i++)
		s[n++] = miss[i];
	free(miss);
	/* Without VOL: the configured volumes that are not active too. */
	if (argc == optind) {
		rc = collect_missing(config, &s, &n);
		if (rc) {
			free(s);
			return rc;
		}
	}
	if (json) {
		nxdctl_json_status(stdout, s, n, (uint64_t)time(NULL));
	} else {
		for (i = 0; i < n; i++) {
			if (i)
				putchar('\n');
			nxdctl_print_status(stdout, &s[i]);
		}
		if (!n)
			printf("no nxd volumes\n");
	}
	if (total > n && argc == optind)
		fprintf(stderr, "nxdctl: showing %u of %u volumes\n", n,
			total);
	rc = health_exit(s, n);
	free(s);
	return rc;
}

const struct cmd cmd_status = {
	"status", do_status,
	"[VOL...] [--json] [--interval SECONDS] [--config FILE]",
	"Show the health of VOL (or of every nxd volume): state, HDD and SSD "
	"(with\ntheir /dev/disk/by-id names), log use, logged blocks not yet "
	"on the HDD,\ndestage rate, write routing, errors, index memory and "
	"the last recovery;\nfor a volume that is not healthy, an action "
	"line with the way out.\nWithout VOL, the volumes of the "
	"configuration file that are not active\ntoo (state inactive); a VOL of "
	"the configuration file that is not active\nis shown so.",
	"Options:\n"
	"  --interval S   measure the destage rate over S seconds (default "
	"1; 0: not)\n"
	"  --json         as JSON, with a \"time\" member\n"
	"  --config FILE  the configuration file (default $NXD_CONFIG or "
	"/etc/nxd/nxdtab)\n"
	"Exit status: 0 healthy, 2 a configured volume (or VOL) is not active "
	"(or VOL\nnot found), 5 a volume is degraded or lost acknowledged writes; "
	"1, 3, 4 errors.\n"
	VOL_HELP };
