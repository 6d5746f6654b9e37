// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl histogram, stats: the request size histogram and the counters.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nxdctl.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* The write threshold and mode routing uses now; thr -1 if unknown. */
static void routing_of(const struct vol *v, int64_t *thr, uint32_t *mode)
{
	char path[PATH_MAX], buf[64];
	enum nxd_mode m;
	uint64_t n;

	*thr = -1;
	*mode = NXD_MODE_AUTO;
	if (test_stats) {
		const char *e = getenv("NXDCTL_TEST_THRESHOLD");

		if (e && !nxd_parse_size(e, &n))
			*thr = n;
		e = getenv("NXDCTL_TEST_MODE");
		if (e && !nxd_mode_parse(e, &m))
			*mode = m;
		return;
	}
	nxd_attr_path(v, "write_threshold", path, sizeof(path));
	if (!sysfs_read(path, buf, sizeof(buf)) && !nxd_parse_size(buf, &n))
		*thr = n;
	nxd_attr_path(v, "mode", path, sizeof(path));
	if (!sysfs_read(path, buf, sizeof(buf)) && !nxd_mode_parse(buf, &m))
		*mode = m;
}

static bool compat;

static int print_hist(const struct nxd_ioc_stats *st, const struct vol *v,
		      bool json, bool routes, unsigned int interval)
{
	int64_t thr;
	uint32_t mode;

	struct nxdctl_meta m = {
		.vol = v->name,
		.interval_s = interval,
		.time = (uint64_t)time(NULL),
	};

	if (json) {
		nxdctl_json_histogram(stdout, st, &m, !interval);
	} else {
		if (interval) {
			char tbuf[64];
			time_t now = time(NULL);

			strftime(tbuf, sizeof(tbuf), "%Y-%m-%d %H:%M:%S",
				 localtime(&now));
			printf("--- %s  %s, last %u s ---\n", tbuf, v->name,
			       interval);
		}
		if (routes) {
			routing_of(v, &thr, &mode);
			if (nxdctl_print_routes_why(stdout, st, thr, mode))
				return fail(NXDCTL_EXIT_KERNEL,
					    "cannot print the table");
		} else {
			nxdctl_print_histogram_compat(stdout, st, compat);
		}
		if (interval)
			putchar('\n');
	}
	fflush(stdout);
	return 0;
}

static int do_histogram(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "reset", no_argument, NULL, 'r' },
		{ "watch", required_argument, NULL, 'w' },
		{ "routes", no_argument, NULL, 'R' },
		{ "compat", no_argument, NULL, 'C' },
		HELP_OPT, { 0 }
	};
	struct nxd_ioc_stats prev, now, delta;
	bool json = false, reset = false, routes = false;
	unsigned long watch = 0;
	struct sigaction sa;
	struct vol v;
	int o, rc;

	while ((o = getopt_long(argc, argv, "jrw:Rh", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			json = true;
			break;
		case 'r':
			reset = true;
			break;
		case 'R':
			routes = true;
			break;
		case 'C':
			compat = true;
			break;
		case 'w':
			rc = parse_uint_opt(c->name, "--watch", optarg, 1,
					    86400, &watch);
			if (rc)
				return rc;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_vol(c, argc, argv, &v);
	if (rc)
		return rc;
	rc = get_stats(&v, reset ? NXD_IOC_F_RESET : 0, &prev);
	if (rc)
		return rc;
	if (!watch)
		return print_hist(&prev, &v, json, routes, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop) {
		struct timespec ts = { .tv_sec = watch };

		while (!stop && nanosleep(&ts, &ts))
			;
		if (stop)
			break;
		rc = get_stats(&v, 0, &now);
		if (rc)
			return rc;
		nxdctl_stats_delta(&now, &prev, &delta);
		prev = now;
		rc = print_hist(&delta, &v, json, routes, watch);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Without dm-nxd loaded: nxd_up 0 (and the configured volumes, inactive)
 * and exit 0; a control device that cannot be read: nxd_up 0 too, and
 * the error.
 */
static int prometheus(int nvols, char **vols, const char *config)
{
	struct nxdctl_status *s = NULL;
	unsigned int n = 0, total;
	bool up = true;
	int rc;

	if (!test_stats && access(CONTROL_PATH, F_OK) && errno == ENOENT) {
		up = false;
		rc = 0;
	} else {
		rc = collect_status(nvols, vols, 0, true, &s, &n, &total);
		up = !rc;
	}
	if (rc && rc != NXDCTL_EXIT_KERNEL && rc != NXDCTL_EXIT_PERM)
		return rc;	/* a VOL not found */
	if (!nvols) {
		int mrc = collect_missing(config, &s, &n);

		if (mrc) {
			free(s);
			return mrc;
		}
	}
	nxdctl_prometheus(stdout, s, n, up);
	free(s);
	if (fflush(stdout))
		return fail(NXDCTL_EXIT_KERNEL, "write: %s", strerror(errno));
	return rc;
}

static int do_stats(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "reset", no_argument, NULL, 'r' },
		{ "prometheus", no_argument, NULL, 'P' },
		{ "config", required_argument, NULL, O_CONFIG },
		HELP_OPT, { 0 }
	};
	bool json = false, reset = false, prom = false;
	const char *config = NULL;
	const struct simple_opt so[] = {
		{ 'j', &json, NULL }, { 'r', &reset, NULL },
		{ 'P', &prom, NULL }, { O_CONFIG, NULL, &config }, { 0 }
	};
	struct nxd_ioc_stats st;
	struct vol v;
	int rc;

	rc = simple_opts(c, argc, argv, "jrh", opts, so);
	if (rc >= 0)
		return rc;
	if (prom) {
		if (json || reset)
			return usage_error(c->name, "--prometheus takes no "
					   "--json or --reset");
		rc = want_args(c, argc, argv, 0, NXD_IOC_MAX_VOLS);
		if (!rc && config && optind < argc)
			rc = usage_error(c->name, "--config is for every "
					 "volume (without VOL)");
		return rc ? rc : prometheus(argc - optind, argv + optind,
					    config);
	}
	if (config)
		return usage_error(c->name, "--config goes with --prometheus");
	rc = want_vol(c, argc, argv, &v);
	if (!rc)
		rc = get_stats(&v, reset ? NXD_IOC_F_RESET : 0, &st);
	if (rc)
		return rc;
	if (json) {
		struct nxdctl_meta m = { .vol = v.name };

		nxdctl_json_stats(stdout, &st, &m, true);
	} else {
		nxdctl_print_stats(stdout, &st);
	}
	return 0;
}

const struct cmd cmd_histogram = {
	"histogram", do_histogram,
	"VOL [--json] [--reset] [--watch SECONDS] [--routes] [--compat]",
	"Show the request size histogram of VOL, in the layout of the "
	"NytroXD\nmanagement utility: \"Num Reads <size> = N\" for every "
	"size bucket,\nthen \"Num Writes <size> = N\".",
	"Options:\n"
	"  --routes           a table with, per bucket, the requests served "
	"by the\n"
	"                     SSD log and by the HDD, aligned and unaligned "
	"ones\n"
	"                     (4 KiB offset and length), mean latencies, and "
	"for\n"
	"                     writes why they went there: size (against the "
	"current\n"
	"                     write threshold), unaligned (4 KiB), chunk "
	"(not aligned\n"
	"                     to the array's minimum I/O size), full (the log "
	"was\n"
	"                     full), mode\n"
	"  --compat           NytroXD's 15 buckets a direction: the last, "
	"16M+1 - 32M,\n"
	"                     also counts requests above 32M\n"
	"  --json             every cell (count, bytes, time_ns by route "
	"and\n"
	"                     alignment) as JSON\n"
	"  --reset            clear the histogram and counters as they are "
	"read\n"
	"                     (needs CAP_SYS_ADMIN)\n"
	"  --watch SECONDS    print what changed every SECONDS until "
	"interrupted\n"
	"                     (with --json: one JSON document per line)\n"
	VOL_HELP,
};

const struct cmd cmd_stats = {
	"stats", do_stats,
	"VOL [--json] [--reset] | [VOL...] --prometheus [--config FILE]",
	"Show all counters of VOL by name.",
	"Options:\n"
	"  --json         as a JSON object\n"
	"  --reset        clear the counters as they are read (CAP_SYS_ADMIN)\n"
	"  --prometheus   every counter, the state, the settings and the "
	"histogram of\n"
	"                 VOL (or of every volume, and the configured ones "
	"not active)\n"
	"                 in the Prometheus text format, for node_exporter's "
	"textfile\n"
	"                 collector; nxd_up 0 (exit 0) without dm-nxd\n"
	"  --config FILE  (with --prometheus) the configuration file\n"
	VOL_HELP,
};
