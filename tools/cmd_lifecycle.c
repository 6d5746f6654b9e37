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
	uint64_t bytes, len, off;
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
	rc = lc_data_offset(hdd, ssd, &off);
	if (rc)
		return rc;
	len = volume_sectors(bytes, off);
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
	char hdd[PATH_MAX], hs[PATH_MAX + 32], hp[PATH_MAX], u[40];
	char params[PATH_MAX + 1024];
	uint64_t bytes, max, want;
	bool format = false, labelled;
	struct nxd_meta hm;
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
	rc = lc_dev_bytes(hdd, co.dry_run, &bytes, &hdev);
	if (rc)
		return rc;
	lc_dev_say(hdd, hs, sizeof(hs));
	lc_dev_path(hdd, hp, sizeof(hp));
	/* The kernel keeps the layout of the HDD's label, or makes a new one. */
	rc = format_layout(hp, hdev, bytes, &hm, &labelled, &want);
	if (rc)
		return fail(errno_code(-rc), "%s: reading its label area: %s",
			    hs, strerror(-rc));
	if (off != want && labelled) {
		nxdctl_fmt_uuid(u, hm.vol_uuid);
		return fail(NXDCTL_EXIT_USAGE, "%s maps HDD %s from sector %lu, "
			    "but the HDD's label (volume %s,\nformat %d) puts "
			    "the data area at sector %" PRIu64 ": attaching "
			    "would shift the data;\nnothing changed", v.name,
			    hs, off, u, hm.format_version, want);
	}
	if (off != want)
		return fail(NXDCTL_EXIT_USAGE, "%s maps HDD %s from sector %lu, "
			    "but HDD %s carries no nxd label, so a\nnew nxd "
			    "volume over it keeps its label in block 0 and its "
			    "data from sector %" PRIu64 "\n(format 2): %s cannot "
			    "be attached in place (back up its data, nxdctl "
			    "create,\nrestore); nothing changed", v.name, hs,
			    off, hs, want, v.name);
	max = volume_sectors(bytes, want);
	if (t.len > max)
		return fail(NXDCTL_EXIT_USAGE, "%s has %" PRIu64 " sectors, "
			    "but over HDD %s an nxd volume can have\nat most %"
			    PRIu64 " (format %d, data from sector %" PRIu64 "): "
			    "the volume would not fit\nits data area", v.name,
			    t.len, hs, max, nxd_layout_version(want), want);
	rc = lc_ssd_checks(ssd, hdd, hdev, NULL, co.dry_run, format, co.force);
	if (rc)
		return rc;
	if (want)
		fprintf(stderr, "nxdctl: a new log on %s and a new label in "
			"block 0 of %s (format 2,\ndata from sector %" PRIu64
			"); the data area is not touched\n", ssd, hs, want);
	else
		fprintf(stderr, "nxdctl: a new log on %s and a new label in "
			"the last MiB of %s (format 1,\ndata from sector 0); "
			"the data area is not touched\n", ssd, hs);
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
	char hs[PATH_MAX + 32], hp[PATH_MAX];
	struct detach_opts dopt = { 0 };
	bool format = false, force = false, labelled;
	struct nxd_meta hm;
	uint64_t off, want;
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
	/*
	 * The attach keeps the data area only if the kernel finds the label
	 * where it looks at format: block 0, or the end of a version 1 HDD
	 * (not there if the HDD grew since the volume last did).
	 */
	rc = lc_data_offset(hdd, ssd, &off);
	if (rc)
		return rc;
	lc_dev_path(hdd, hp, sizeof(hp));
	rc = format_layout(hp, hdev, bytes, &hm, &labelled, &want);
	if (rc)
		return fail(errno_code(-rc), "%s: reading its label area: %s",
			    hs, strerror(-rc));
	if (!labelled || want != off)
		return fail(NXDCTL_EXIT_USAGE, "%s: the label of HDD %s is not "
			    "where a new log would find it\n(its data area "
			    "starts at sector %" PRIu64 "): grow the volume "
			    "first (nxdctl grow %s),\nwhich moves the label to "
			    "the HDD's end; nothing changed", v.name, hs, off,
			    v.name);
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
	"length (its\ndata area: format 2, from the data offset to the HDD "
	"size rounded down to\n1 MiB; format 1, that size less 1 MiB for the "
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
	"HDD at the same\nlength, from the volume's data offset (format 1: "
	"0).  The file system stays mounted.  The "
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
	"Give the linear volume VOL (over an HDD, e.g. after nxdctl detach) "
	"the SSD\nlog SSD, online: VOL is reloaded as nxd at the same length "
	"with \"format\"\n(a new log on SSD, a new label on the HDD, a new "
	"volume UUID; the data area\nis not touched) and resumed.  The new "
	"volume keeps the layout of the HDD's\nlabel (format 2: label in "
	"block 0, data from its data offset; format 1:\ndata from sector 0, "
	"label at the end); an HDD without a label gets format\n2.  VOL must "
	"map the HDD from that data offset: a linear volume over a\nnever "
	"labelled HDD from sector 0 cannot be attached in place (back up, "
	"create,\nrestore).",
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
	"Refuses, changing nothing, a VOL that maps the HDD from another "
	"sector than\nthat data offset, and a VOL longer than the data area "
	"from there.\n" VOL_HELP,
};

const struct cmd cmd_replace_ssd = {
	"replace-ssd", do_replace, "VOL NEWSSD [--timeout S] [--format] "
	"[--force] [--accept-log-loss --yes] [--dry-run]",
	"Replace the SSD of the nxd volume VOL by NEWSSD, online: the checks "
	"of\nattach on NEWSSD first, then detach (drain, linear), then "
	"attach NEWSSD\nwith the options of the old table line; the volume "
	"keeps its layout\n(format 2 or 1).  If the attach fails, VOL stays "
	"online as linear over its\nHDD.  Refused first for a format 1 "
	"volume whose HDD grew since it did (its\nlabel is not at the end, "
	"where a new log looks): nxdctl grow it first.",
	"Options: --timeout, --nolockfs, --accept-log-loss, --yes as for "
	"detach;\n--format, --force as for attach;\n"
	"  --dry-run     print the dmsetup-equivalent steps only\n"
	"A degraded volume (its SSD failed a write) is replaced once its "
	"frozen log\nhas been copied to the HDD, read from the failed SSD; "
	"if it cannot be read,\nthe drain does not end (use --timeout) and "
	"the volume stays as it is, unless\n--accept-log-loss --yes gives "
	"the log up first.\n" VOL_HELP,
};
