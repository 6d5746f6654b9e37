// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl create, remove, drain, pause-destage, resume-destage, list.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libdevmapper.h>

#include "nxdctl.h"

static int do_create(const struct cmd *c, int argc, char **argv)
{
	struct create_opts co = { 0 };
	bool format = false;
	int o, rc;

	while ((o = getopt_long(argc, argv, "h", table_opts, NULL)) != -1) {
		if (format_force_opt(o, &format, &co.force))
			continue;
		switch (o) {
		case O_NAME:
			return usage_error(c->name, "--name is for assemble; "
					   "create takes NAME as argument");
		case O_ACCEPT_LOSS:
			return usage_error(c->name, "--accept-log-loss is for assemble");
		case O_UUID:
			if (!*optarg || strlen(optarg) >= NXD_NAME_LEN)
				return usage_error(c->name, "bad --uuid");
			co.uuid = optarg;
			break;
		default:
			rc = table_opt_default(c, o, argv, &co);
			if (rc >= 0)
				return rc;
		}
	}
	if (format) {
		rc = add_opt(&co, "format", NULL);
		if (rc)
			return rc;
		co.format = true;
		fprintf(stderr, "nxdctl: --format: anything the SSD holds, "
			"including writes not yet destaged\nfrom an old log, "
			"is discarded\n");
	}
	rc = want_args(c, argc, argv, 3, 3);
	if (rc)
		return rc;
	return create_volume(argv[optind], argv[optind + 1],
			     argv[optind + 2], &co);
}

int remove_volume(const struct vol *v, bool retry, bool mark)
{
	struct nxd_ioc_stats st;
	struct dm_task *dmt;
	uint8_t uuid[16];
	bool marked = false;
	int rc;

	if (!peek_stats(nxdctl_encode_dev(v->major, v->minor), NULL, &st) &&
	    st.c.index_entries)
		fprintf(stderr, "nxdctl: note: the log of %s still holds %llu "
			"logged blocks that are not on the HDD:\nthey stay "
			"on the SSD and are replayed when the volume is "
			"created or\nassembled again; until then the HDD "
			"alone is not up to date (nxdctl drain\nempties the "
			"log)\n", v->name,
			(unsigned long long)st.c.index_entries);
	/*
	 * Marked before the removal: closing the devices may raise udev
	 * events, and the auto-assembly rule must already see the mark.
	 */
	if (mark && !test_stats && !vol_uuid_of(v->name, uuid)) {
		rc = removed_mark(uuid, v->name);
		if (rc)
			fprintf(stderr, "nxdctl: warning: cannot record the "
				"removal (%s): automatic assembly may bring "
				"%s back\n", strerror(-rc), v->name);
		marked = !rc;
	}
	printf("dmsetup remove %s%s\n", retry ? "--retry " : "", v->name);
	fflush(stdout);
	dmt = dm_task_create(DM_DEVICE_REMOVE);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	rc = dm_run(dmt, dm_task_set_name(dmt, v->name) &&
		    (!retry || dm_task_retry_remove(dmt)), true, "removing",
		    v->name);
	if (rc && marked)
		removed_clear(uuid);
	return rc;
}

static int do_remove(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "retry", no_argument, NULL, O_RETRY },
		HELP_OPT, { 0 }
	};
	bool retry = false;
	const struct simple_opt so[] = { { O_RETRY, &retry, NULL }, { 0 } };
	struct vol v;
	int rc;

	rc = simple_opts(c, argc, argv, "h", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_vol(c, argc, argv, &v);
	if (rc)
		return rc;
	return remove_volume(&v, retry, true);
}

static int do_message_cmd(const struct cmd *c, int argc, char **argv,
			  const char *msg, const char *done)
{
	static const struct option opts[] = { HELP_OPT, { 0 } };
	struct vol v;
	int rc;

	rc = simple_opts(c, argc, argv, "h", opts, NULL);
	if (rc >= 0)
		return rc;
	rc = want_vol(c, argc, argv, &v);
	if (!rc)
		rc = dm_message(&v, msg);
	if (!rc)
		printf("%s: %s\n", v.name, done);
	return rc;
}

static int do_drain(const struct cmd *c, int argc, char **argv)
{
	return do_message_cmd(c, argc, argv, "drain", "log drained");
}

static int do_pause(const struct cmd *c, int argc, char **argv)
{
	return do_message_cmd(c, argc, argv, "pause_destage",
			      "destage paused");
}

static int do_resume(const struct cmd *c, int argc, char **argv)
{
	return do_message_cmd(c, argc, argv, "resume_destage",
			      "destage resumed");
}

static int do_list(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "config", required_argument, NULL, O_CONFIG },
		HELP_OPT, { 0 }
	};
	struct nxdctl_status *s;
	unsigned int n, total, active;
	const char *config = NULL;
	bool json = false;
	const struct simple_opt so[] = {
		{ 'j', &json, NULL }, { O_CONFIG, NULL, &config }, { 0 }
	};
	int rc;

	rc = simple_opts(c, argc, argv, "jh", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 0, 0);
	if (rc)
		return rc;
	rc = collect_status(0, NULL, 0, false, &s, &n, &total);
	if (rc)
		return rc;
	active = n;
	rc = collect_missing(config, &s, &n);
	if (rc) {
		free(s);
		return rc;
	}
	/* The configured volumes not active count in "total" too. */
	if (nxdctl_print_health(stdout, s, n, total + n - active, json))
		rc = fail(NXDCTL_EXIT_KERNEL, "cannot print the list");
	if (!rc && total > active)
		fprintf(stderr, "nxdctl: showing %u of %u volumes\n", active,
			total);
	if (!rc)
		rc = health_exit(s, n);
	free(s);
	return rc;
}

const struct cmd cmd_create = {
	"create", do_create, "NAME HDD SSD [OPTIONS]",
	"Create the nxd volume NAME over HDD (the backing device, e.g. an "
	"md\nRAID) and SSD (the log).  A new volume is format 2: its label "
	"in HDD block\n0, its data area from the data offset (1 MiB, or a "
	"multiple of the HDD's\noptimal I/O size if larger) to the HDD size "
	"rounded down to 1 MiB; an\nold nxd label on the HDD is cleared "
	"first.  The volume of an SSD that\nholds one (no --format) keeps "
	"its own layout.  Prints the dmsetup command\nit is equivalent to.",
	"Options (table options of dm-nxd(4)):\n"
	"  --write-threshold N   (bytes, K/M/G suffixes)\n"
	"  --mode auto|passthrough|log_all|adaptive\n"
	"  --low-watermark PCT   --high-watermark PCT\n"
	"  --destage-rate MiB/s  (0: unlimited)\n"
	"  --ssd-discard 0|1     --drain-on-suspend 0|1\n"
	"  --auto-min-threshold N  --auto-max-threshold N   (mode adaptive's "
	"bounds)\n"
	"  --stream-min N        --stripe-size N   (bytes; stripe 0: the "
	"HDD's)\n"
	"  --format              create a new volume (new log and HDD "
	"label): needed\n"
	"                        if the SSD holds other data or the devices "
	"belong\n"
	"                        to another volume; an old log's contents are "
	"lost\n"
	"  --uuid UUID           device-mapper UUID (default NXD-<volume "
	"UUID>, as\n"
	"                        assemble gives it)\n"
	"  --force               go ahead although the checks below found "
	"something\n"
	"  --dry-run             only run the checks and print the dmsetup "
	"command\n"
	"For a new volume (or --format), create refuses if the HDD or SSD "
	"holds a\nsignature (file system, RAID, partition table: libblkid), "
	"if the HDD's\nblock 0 holds data (the label goes there), if an nxd "
	"log to be discarded\nholds writes not yet on its HDD, and if the "
	"HDD holds the data of a volume\nwhose data area starts elsewhere "
	"(format 1, or another offset): they would\nnot be in the new one.  "
	"Existing data cannot be converted in place: back\nup, create, "
	"restore (a new SSD for a volume: attach, replace-ssd).\n",
};

const struct cmd cmd_remove = {
	"remove", do_remove, "VOL [--retry]",
	"Remove the nxd volume VOL (dmsetup remove).  It stays removed: "
	"automatic\nassembly (assemble --all, the udev rule) skips it until "
	"the next boot or\nan 'nxdctl assemble DEVICE' or 'nxdctl create' "
	"by hand.",
	"Options:\n  --retry    retry while the device is briefly busy\n"
	VOL_HELP,
};

const struct cmd cmd_drain = {
	"drain", do_drain, "VOL",
	"Destage the whole SSD log of VOL to the HDD; returns when it is "
	"empty.", VOL_HELP,
};

const struct cmd cmd_pause_destage = {
	"pause-destage", do_pause, "VOL",
	"Stop destaging the log of VOL (until resume-destage).", VOL_HELP,
};

const struct cmd cmd_resume_destage = {
	"resume-destage", do_resume, "VOL",
	"Resume destaging the log of VOL.", VOL_HELP,
};

const struct cmd cmd_list = {
	"list", do_list, "[--json] [--config FILE]",
	"List the nxd volumes the kernel knows, with their health: state, "
	"log use,\nlogged data not yet on the HDD (DIRTY, an upper bound), "
	"I/O errors\n(SSD + HDD), write threshold, mode and volume UUID; "
	"and the volumes of the\nconfiguration file that are not active "
	"(state inactive).",
	"Options:\n  --json         as JSON\n"
	"  --config FILE  the configuration file (default $NXD_CONFIG or "
	"/etc/nxd/nxdtab)\n"
	"Exit status: 0 healthy, 2 a configured volume is not active, 5 a "
	"volume is\ndegraded or lost acknowledged writes; 1, 3, 4 errors.\n",
};
