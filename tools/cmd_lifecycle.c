// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl grow, detach, attach, replace-ssd: the online lifecycle of a
 * volume's SSD and HDD (docs/admin-guide.md, sections 7 and 8), done as
 * the dmsetup recipes there do it, with the checks in between.
 *
 *   grow:        reload the live nxd line at the length the HDD has room
 *                for now (the kernel moves the label at resume).
 *   detach:      drain (with progress), drain_on_suspend=1, load a linear
 *                table over the HDD at the same length, suspend (lockfs:
 *                the suspend drains again with the file system frozen),
 *                check the old table's log is empty, resume.  Anything
 *                wrong before the resume: the nxd table is resumed again.
 *   attach:      a linear volume over an HDD gets an SSD: the nxd line
 *                with "format" at the same length, suspend, resume.
 *   replace-ssd: detach, then attach the new SSD with the old options.
 *
 * The options and the help are here; the steps the verbs share, and the
 * test hooks (NXDCTL_TEST_TABLE, NXDCTL_TEST_STATUS), in lifecycle.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <libdevmapper.h>

#include "nxdctl.h"

enum {
	O_TIMEOUT = 512, O_NOLOCKFS, O_YES,
};

/* ---- grow ---- */

static int do_grow(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, O_DRY }, HELP_OPT, { 0 }
	};
	char hdd[PATH_MAX], ssd[PATH_MAX], hs[PATH_MAX + 32];
	struct dm_line t, now;
	struct dm_nxd_status s;
	bool dry_run = false;
	const struct simple_opt so[] = { { O_DRY, &dry_run, NULL }, { 0 } };
	uint64_t bytes, len;
	struct vol v;
	int rc;

	lc_hooks();
	rc = simple_opts(c, argc, argv, "h", opts, so);
	if (rc >= 0)
		return rc;
	rc = lc_nxd_volume(c, argc, argv, 1, dry_run, &v, &t);
	if (rc)
		return rc;
	rc = lc_nxd_devs(t.params, hdd, ssd, sizeof(hdd), NULL);
	if (!rc)
		rc = lc_status(v.name, &s);
	if (!rc)
		rc = lc_dev_bytes(hdd, dry_run, &bytes, NULL);
	if (rc)
		return rc;
	lc_dev_say(hdd, hs, sizeof(hs));
	if (s.degraded || !strcmp(s.state, "degraded"))
		return fail(NXDCTL_EXIT_USAGE, "%s is degraded (its SSD "
			    "failed a write): growing writes a new SSD "
			    "superblock;\nreplace the SSD first (nxdctl "
			    "replace-ssd)", v.name);
	if (strcmp(s.state, "ok"))
		return fail(NXDCTL_EXIT_USAGE, "%s is %s: resume it first",
			    v.name, s.state);
	len = nxd_hdd_data_sectors(bytes >> 9);
	if (len <= t.len)
		return fail(NXDCTL_EXIT_USAGE, "%s: nothing to grow: the "
			    "volume has %" PRIu64 " sectors, the HDD %s "
			    "(%" PRIu64 " sectors) has room for %" PRIu64,
			    v.name, t.len, hs, bytes >> 9, len);
	printf("%s: %" PRIu64 " -> %" PRIu64 " sectors (%.1f -> %.1f GiB), "
	       "HDD %s\n", v.name, t.len, len, t.len / 2097152.0,
	       len / 2097152.0, hs);
	t.len = len;
	printf("dmsetup load %s --table '0 %" PRIu64 " %s %s'\n"
	       "dmsetup resume %s\n", v.name, t.len, t.type, t.params, v.name);
	fflush(stdout);
	if (dry_run)
		return 0;
	rc = dm_op(DM_DEVICE_RELOAD, v.name, &t, false);
	if (rc) {
		fprintf(stderr, "nxdctl: %s keeps its old table and size\n",
			v.name);
		return rc;
	}
	rc = dm_op(DM_DEVICE_RESUME, v.name, NULL, false);
	if (rc) {
		fprintf(stderr, "nxdctl: %s: the resume failed: see dmesg and "
			"'dmsetup info %s' (it may be\nleft suspended with "
			"the longer table)\n", v.name, v.name);
		return rc;
	}
	rc = lc_table(v.name, &now);
	if (rc)
		return rc;
	if (now.len != len)
		return fail(NXDCTL_EXIT_KERNEL, "%s: the live table has %"
			    PRIu64 " sectors, not %" PRIu64, v.name, now.len,
			    len);
	printf("%s: grown to %" PRIu64 " sectors; now grow the file system: "
	       "xfs_growfs MOUNTPOINT\n(ext4/ldiskfs: resize2fs "
	       "/dev/mapper/%s)\n", v.name, len, v.name);
	return 0;
}

/* ---- detach ---- */

/*
 * The default case of the getopt loops of detach and replace-ssd:
 * --timeout, --nolockfs, --dry-run, else opt_default()'s.  -1 when @o was
 * one of those, taken; else the exit code (0 after --help).
 */
static int detach_opt(const struct cmd *c, int o, char **argv,
		      struct detach_opts *d)
{
	int rc;

	switch (o) {
	case O_TIMEOUT:
		rc = parse_uint_opt(c->name, "--timeout", optarg, 0, INT_MAX,
				    &d->timeout);
		return rc ? rc : -1;
	case O_NOLOCKFS:
		d->nolockfs = true;
		return -1;
	case O_DRY:
		d->dry_run = true;
		return -1;
	case O_ACCEPT_LOSS:
		d->accept_loss = true;
		return -1;
	case O_YES:
		d->yes = true;
		return -1;
	default:
		return opt_default(c, o, argv);
	}
}

static int do_detach(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "nolockfs", no_argument, NULL, O_NOLOCKFS },
		{ "accept-log-loss", no_argument, NULL, O_ACCEPT_LOSS },
		{ "yes", no_argument, NULL, O_YES },
		{ "dry-run", no_argument, NULL, O_DRY }, HELP_OPT, { 0 }
	};
	struct detach_opts dopt = { 0 };
	struct dm_line t;
	struct vol v;
	int o, rc;

	lc_hooks();
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		rc = detach_opt(c, o, argv, &dopt);
		if (rc >= 0)
			return rc;
	}
	if (dopt.yes && !dopt.accept_loss)
		return usage_error(c->name, "--yes goes with --accept-log-loss");
	rc = lc_nxd_volume(c, argc, argv, 1, dopt.dry_run, &v, &t);
	if (rc)
		return rc;
	return lc_detach(&v, &t, &dopt);
}

/* ---- attach ---- */

static const struct option attach_opts[] = {
	TABLE_OPTS,
	{ "force", no_argument, NULL, O_FORCE },
	HELP_OPT, { 0 }
};

static int do_attach(const struct cmd *c, int argc, char **argv)
{
	struct create_opts co = { 0 };
	char hdd[PATH_MAX], hs[PATH_MAX + 32];
	char params[PATH_MAX + 1024];
	uint64_t bytes, max;
	bool format = false;
	struct dm_line t;
	const char *ssd;
	unsigned long off;
	dev_t hdev;
	struct vol v;
	int o, rc, n = 0;

	lc_hooks();
	while ((o = getopt_long(argc, argv, "h", attach_opts, NULL)) != -1) {
		if (format_force_opt(o, &format, &co.force))
			continue;
		rc = table_opt_default(c, o, argv, &co);
		if (rc >= 0)
			return rc;
	}
	rc = want_args(c, argc, argv, 2, 2);
	if (rc)
		return rc;
	if (lc_test() && !co.dry_run)
		return usage_error(c->name, "the test hooks need --dry-run");
	ssd = argv[optind + 1];
	rc = lc_resolve_any(argv[optind], &v);
	if (!rc)
		rc = lc_table(v.name, &t);
	if (rc)
		return rc;
	if (t.ntargets == 1 && !strcmp(t.type, TARGET_NAME))
		return fail(NXDCTL_EXIT_USAGE, "%s is an nxd volume already: "
			    "nxdctl replace-ssd %s %s", v.name, v.name, ssd);
	if (t.ntargets != 1 || strcmp(t.type, "linear") || t.start ||
	    sscanf(t.params, "%4095s %lu %n", hdd, &off, &n) < 2 || !n ||
	    t.params[n])
		return fail(NXDCTL_EXIT_NOVOL, "%s is not a one-target linear "
			    "volume (%u targets, %s %s)", v.name, t.ntargets,
			    t.type, t.params);
	if (off)
		return fail(NXDCTL_EXIT_USAGE, "%s maps its HDD from sector "
			    "%lu: the data area of an nxd volume starts at 0",
			    v.name, off);
	rc = lc_dev_bytes(hdd, co.dry_run, &bytes, &hdev);
	if (rc)
		return rc;
	lc_dev_say(hdd, hs, sizeof(hs));
	max = nxd_hdd_data_sectors(bytes >> 9);
	if (t.len > max)
		return fail(NXDCTL_EXIT_USAGE, "%s has %" PRIu64 " sectors, "
			    "but over HDD %s an nxd volume can have\nat most %"
			    PRIu64 " (the last MiB holds the label): the "
			    "label would overwrite the\nend of the volume",
			    v.name, t.len, hs, max);
	rc = lc_ssd_checks(ssd, hdd, hdev, NULL, co.dry_run, format, co.force);
	if (rc)
		return rc;
	fprintf(stderr, "nxdctl: a new log on %s and a new label in the "
		"last MiB of %s; the\ndata area is not touched\n", ssd, hs);
	rc = lc_attach_params(params, sizeof(params), hdd, ssd, co.nargs,
			      co.extra);
	if (!rc)
		rc = lc_attach_load(&v, t.len, params, co.dry_run);
	if (rc) {
		if (!co.dry_run)
			fprintf(stderr, "nxdctl: %s stays linear over %s\n",
				v.name, hs);
		return rc;
	}
	if (!co.dry_run)
		lc_attach_done(ssd, hdd);
	return 0;
}

/* ---- replace-ssd ---- */

static int do_replace(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "nolockfs", no_argument, NULL, O_NOLOCKFS },
		{ "dry-run", no_argument, NULL, O_DRY },
		{ "format", no_argument, NULL, O_FORMAT },
		{ "force", no_argument, NULL, O_FORCE },
		{ "accept-log-loss", no_argument, NULL, O_ACCEPT_LOSS },
		{ "yes", no_argument, NULL, O_YES },
		HELP_OPT, { 0 }
	};
	char hdd[PATH_MAX], ssd[PATH_MAX], old[PATH_MAX];
	char params[PATH_MAX + 1024];
	char hs[PATH_MAX + 32];
	struct detach_opts dopt = { 0 };
	bool format = false, force = false;
	const char *rest, *newssd;
	unsigned long nopts = 0;
	struct dm_line t;
	dev_t hdev;
	uint64_t bytes;
	struct vol v;
	char *end;
	int o, rc;

	lc_hooks();
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (format_force_opt(o, &format, &force))
			continue;
		rc = detach_opt(c, o, argv, &dopt);
		if (rc >= 0)
			return rc;
	}
	if (dopt.yes && !dopt.accept_loss)
		return usage_error(c->name, "--yes goes with --accept-log-loss");
	rc = lc_nxd_volume(c, argc, argv, 2, dopt.dry_run, &v, &t);
	if (rc)
		return rc;
	newssd = argv[optind + 1];
	rc = lc_nxd_devs(t.params, hdd, ssd, sizeof(hdd), &rest);
	if (!rc)
		rc = lc_dev_bytes(hdd, dopt.dry_run, &bytes, &hdev);
	if (rc)
		return rc;
	lc_dev_say(hdd, hs, sizeof(hs));
	lc_dev_path(ssd, old, sizeof(old));
	/* The live line's options (count first) go to the new line. */
	if (*rest) {
		errno = 0;
		nopts = strtoul(rest, &end, 10);
		if (errno || end == rest)
			return fail(NXDCTL_EXIT_KERNEL, "%s: unexpected table "
				    "'%s'", v.name, t.params);
		rest = end;
	}
	/* Everything about the new SSD before the old one goes. */
	rc = lc_ssd_checks(newssd, hdd, hdev, old, dopt.dry_run, format, force);
	if (!rc)
		rc = lc_attach_params(params, sizeof(params), hdd, newssd,
				      nopts, rest);
	if (rc)
		return rc;
	rc = lc_detach(&v, &t, &dopt);
	if (rc)
		return rc;
	rc = lc_attach_load(&v, t.len, params, dopt.dry_run);
	if (rc) {
		if (!dopt.dry_run)
			fprintf(stderr, "nxdctl: %s is online, linear over %s "
				"(no SSD); try again with\n'nxdctl attach %s "
				"%s'\n", v.name, hs, v.name, newssd);
		return rc;
	}
	if (!dopt.dry_run)
		lc_attach_done(newssd, hdd);
	return 0;
}

const struct cmd cmd_grow = {
	"grow", do_grow, "VOL [--dry-run]",
	"Grow the nxd volume VOL to what its HDD has room for now, after the "
	"HDD\n(an md array) grew: the live table is reloaded at the new "
	"length (the\nHDD size rounded down to 1 MiB, less 1 MiB for the "
	"label), with the same\ndevices and options, and resumed; the file "
	"system stays mounted.  Then\ngrow the file system (xfs_growfs, "
	"resize2fs).",
	"Options:\n"
	"  --dry-run   print the old and new sizes and the dmsetup "
	"commands only\n"
	"Refuses (exit 1) when the HDD has no room for more, and while the "
	"volume\nis degraded or suspended.\n" VOL_HELP,
};

const struct cmd cmd_detach = {
	"detach", do_detach, "VOL [--timeout S] [--nolockfs] "
	"[--accept-log-loss --yes] [--dry-run]",
	"Take the SSD out of the nxd volume VOL online: drain its log "
	"(progress on\nstderr), then switch VOL to a linear table over the "
	"HDD at the same\nlength.  The file system stays mounted.  The "
	"suspend of the switch drains\nagain after device-mapper froze the "
	"file system (drain_on_suspend=1);\nthe switch happens only if the "
	"old table's log is then empty, else the\nnxd table is resumed.  "
	"The SSD keeps its superblock (nxdctl wipe).",
	"Options:\n"
	"  --timeout S   give up the drain after S seconds (default 0: "
	"no limit);\n"
	"                SIGINT does the same.  The volume stays nxd.\n"
	"  --nolockfs    suspend without freezing the file system (it is "
	"frozen\n"
	"                already: fsfreeze -f; a lockfs nested in an "
	"fsfreeze left\n"
	"                the device frozen on 6.12)\n"
	"  --accept-log-loss\n"
	"                degraded volume only: give up the frozen log "
	"(abandon_log)\n"
	"                instead of waiting for it; prints the sectors "
	"lost, and\n"
	"                needs --yes to go ahead\n"
	"  --yes         confirm --accept-log-loss\n"
	"  --dry-run     print the dmsetup-equivalent steps only\n"
	"A degraded volume (failed SSD writes) is detached once the destager "
	"has\ncopied its frozen log to the HDD, which needs the SSD to be "
	"readable; if it\ncannot be read, --accept-log-loss --yes drops the "
	"log online (the sectors\nit held read back older data).\n" VOL_HELP,
};

const struct cmd cmd_attach = {
	"attach", do_attach, "VOL SSD [--format] [--force] [OPTIONS]",
	"Give the linear volume VOL (over an HDD from sector 0, e.g. after "
	"nxdctl\ndetach) the SSD log SSD, online: VOL is reloaded as nxd at "
	"the same\nlength with \"format\" (a new log on SSD, a new label in "
	"the HDD's last\nMiB, a new volume UUID; the data area is not "
	"touched) and resumed.",
	"Options:\n"
	"  --format      SSD may carry an nxd superblock (its old log is "
	"discarded)\n"
	"  --force       go ahead although SSD holds a signature (file "
	"system, RAID,\n"
	"                partition table) or a log with writes not on its "
	"HDD\n"
	"  --dry-run     run the checks and print the dmsetup commands only\n"
	"  and the table options of create (--write-threshold, --mode, "
	"...).\n"
	"Refuses a VOL longer than an nxd volume over its HDD can be (the "
	"label\nwould overwrite its end).\n" VOL_HELP,
};

const struct cmd cmd_replace_ssd = {
	"replace-ssd", do_replace, "VOL NEWSSD [--timeout S] [--format] "
	"[--force] [--accept-log-loss --yes] [--dry-run]",
	"Replace the SSD of the nxd volume VOL by NEWSSD, online: the checks "
	"of\nattach on NEWSSD first, then detach (drain, linear), then "
	"attach NEWSSD\nwith the options of the old table line.  If the "
	"attach fails, VOL stays\nonline as linear over its HDD.",
	"Options: --timeout, --nolockfs, --accept-log-loss, --yes as for "
	"detach;\n--format, --force as for attach;\n"
	"  --dry-run     print the dmsetup-equivalent steps only\n"
	"A degraded volume (its SSD failed a write) is replaced once its "
	"frozen log\nhas been copied to the HDD, read from the failed SSD; "
	"if it cannot be read,\nthe drain does not end (use --timeout) and "
	"the volume stays as it is, unless\n--accept-log-loss --yes gives "
	"the log up first.\n" VOL_HELP,
};
