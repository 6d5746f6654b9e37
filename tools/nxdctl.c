// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl - administer dm-nxd volumes: the command table and main().
 * Each command family lives in its own cmd_*.c; see nxdctl.h for the
 * files behind them, and nxdctl(8).
 *
 * Talks to the kernel through /dev/nxd-control (statistics, volume list),
 * sysfs /sys/block/dm-N/nxd/ (tunables) and libdevmapper (create, remove,
 * messages).
 *
 * Test hooks (not for production use): NXDCTL_SYSFS replaces "/sys" as the
 * sysfs root, NXDCTL_TEST_STATS names a file holding a raw struct
 * nxd_ioc_stats returned instead of calling NXD_IOC_GET_STATS.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <libdevmapper.h>

#include "nxdctl.h"

#ifndef NXDCTL_VERSION
#define NXDCTL_VERSION "0.1"
#endif

static int do_help(const struct cmd *c, int argc, char **argv);

const struct cmd cmd_help = {
	"help", do_help, "[COMMAND]", "Show help.", "",
};

static const struct cmd *const cmds[] = {
	&cmd_status, &cmd_list, &cmd_histogram, &cmd_stats, &cmd_threshold,
	&cmd_config, &cmd_suggest_threshold, &cmd_routing,
	&cmd_create, &cmd_assemble,
	&cmd_activate, &cmd_remove, &cmd_stop, &cmd_drain,
	&cmd_pause_destage, &cmd_resume_destage, &cmd_show_super, &cmd_wipe,
	&cmd_udev_info, &cmd_monitor, &cmd_grow, &cmd_detach, &cmd_attach,
	&cmd_replace_ssd, &cmd_takeover, &cmd_set_owner, &cmd_help,
};

static void main_usage(FILE *f)
{
	unsigned int i;

	fprintf(f, "Usage: nxdctl COMMAND [ARGS]\n"
		"       nxdctl --help | --version\n\n"
		"Administer dm-nxd volumes (small writes to an SSD log, large "
		"ones to the HDD).\n\nCommands:\n");
	for (i = 0; i < ARRAY_SIZE_NXDCTL(cmds); i++)
		fprintf(f, "  %-18s %s\n", cmds[i]->name, cmds[i]->args);
	fprintf(f, "\nRun 'nxdctl COMMAND --help' for more.\n\n"
		"Exit status: 0 ok, 1 usage error, 2 volume not found or not "
		"nxd,\n3 permission denied, 4 kernel or ioctl error; status, "
		"list and\nmonitor --oneshot: 2 a configured volume not active, "
		"5 a volume degraded;\ncreate, assemble, set-owner: 6 the volume "
		"belongs to another host.\n");
}

static const struct cmd *find_cmd(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE_NXDCTL(cmds); i++)
		if (!strcmp(cmds[i]->name, name))
			return cmds[i];
	return NULL;
}

static int do_help(const struct cmd *c, int argc, char **argv)
{
	const struct cmd *t;

	if (argc >= 2 && (!strcmp(argv[1], "--help") ||
			  !strcmp(argv[1], "-h"))) {
		cmd_usage(c, stdout);
		return 0;
	}
	if (argc < 2) {
		main_usage(stdout);
		return 0;
	}
	t = find_cmd(argv[1]);
	if (!t)
		return usage_error(NULL, "unknown command '%s'", argv[1]);
	cmd_usage(t, stdout);
	return 0;
}

int main(int argc, char **argv)
{
	const struct cmd *c;
	const char *e;

	e = getenv("NXDCTL_SYSFS");
	if (e && *e)
		sysfs_root = e;
	e = getenv("NXDCTL_TEST_STATS");
	if (e && *e)
		test_stats = e;
	dm_log_with_errno_init(dm_log);

	if (argc < 2) {
		main_usage(stderr);
		return NXDCTL_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		main_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("nxdctl %s (dm-nxd ioctl ABI %d)\n", NXDCTL_VERSION,
		       NXD_IOCTL_VERSION);
		return 0;
	}
	c = find_cmd(argv[1]);
	if (!c)
		return usage_error(NULL, "unknown command '%s'", argv[1]);
	optind = 0;
	opterr = 0;
	return c->fn(c, argc - 1, argv + 1);
}
