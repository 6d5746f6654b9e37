// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl suggest-threshold: device speed probes and the cost model
 * (suggest.c) over the volume's histogram.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nxdctl.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * QD1 O_DIRECT probe: random 4 KiB reads for @secs / 2 (positioning
 * cost), then 1 MiB sequential reads for @secs / 2 (bandwidth).
 */
static int probe_dev(const char *path, double secs, double *iops,
		     double *mbps)
{
	const size_t big = 1 << 20;
	uint64_t bytes, blocks, x, n = 0, off;
	double t0, t;
	void *buf;
	int fd, rc = 0;

	rc = dev_size(path, false, &bytes, NULL);
	if (rc)
		return rc;
	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0)
		return fail(errno_code(errno), "%s: %s", path,
			    strerror(errno));
	if (posix_memalign(&buf, 4096, big)) {
		close(fd);
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	}
	blocks = bytes / 4096;
	if (blocks < 256 || bytes < 4 * big) {
		rc = fail(NXDCTL_EXIT_NOVOL, "%s: too small to probe", path);
		goto out;
	}
	x = (uint64_t)time(NULL) * 2654435761ULL | 1;
	t0 = now_s();
	do {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (pread(fd, buf, 4096, (x % blocks) * 4096) != 4096) {
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: read: %s", path,
				  strerror(errno));
			goto out;
		}
		n++;
		t = now_s() - t0;
	} while (t < secs / 2 && n < 200000);
	*iops = n / t;

	off = (x % (bytes / big / 2)) * big;
	n = 0;
	t0 = now_s();
	do {
		if (off + big > bytes)
			off = 0;
		if (pread(fd, buf, big, off) != (ssize_t)big) {
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: read: %s", path,
				  strerror(errno));
			goto out;
		}
		off += big;
		n++;
		t = now_s() - t0;
	} while (t < secs / 2);
	*mbps = n * (double)big / t / 1e6;
out:
	free(buf);
	close(fd);
	return rc;
}

/* probe_dev() @dev for the speeds not given (still 0) in @iops, @mbps. */
static int probe_missing(const char *dev, double secs, double *iops,
			 double *mbps)
{
	double i = 0, m = 0;
	int rc;

	if (*iops && *mbps)
		return 0;
	rc = probe_dev(dev, secs, &i, &m);
	if (rc)
		return rc;
	if (!*iops)
		*iops = i;
	if (!*mbps)
		*mbps = m;
	return 0;
}

static void say_speeds(const char *role, const char *dev, double iops,
		       double mbps, bool iops_given, bool mbps_given)
{
	printf("  %s %s: %.0f IOPS (4K random)%s, %.0f MB/s (1M "
	       "sequential)%s\n", role, dev, iops,
	       iops_given ? " [given]" : "", mbps,
	       mbps_given ? " [given]" : "");
}

static int do_suggest(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ssd-iops", required_argument, NULL, O_SSDIOPS },
		{ "ssd-mbps", required_argument, NULL, O_SSDMBPS },
		{ "hdd-iops", required_argument, NULL, O_HDDIOPS },
		{ "hdd-mbps", required_argument, NULL, O_HDDMBPS },
		{ "probe-seconds", required_argument, NULL, O_PROBE },
		{ "stripe", required_argument, NULL, O_STRIPE },
		{ "chunk", required_argument, NULL, O_CHUNK },
		{ "no-stripe-cap", no_argument, NULL, O_NOCAP },
		HELP_OPT, { 0 }
	};
	bool stripe_given = false, chunk_given = false;
	struct nxdctl_speeds sp = { 0 }, given;
	struct nxdctl_suggestion sg;
	struct nxd_ioc_stats st;
	int64_t cur = -1;
	double probe = 2.0;
	char buf[64];
	struct vol v;
	uint64_t n;
	int o, rc;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		double *dst = NULL;

		switch (o) {
		case O_SSDIOPS:
			dst = &sp.ssd_iops;
			break;
		case O_SSDMBPS:
			dst = &sp.ssd_mbps;
			break;
		case O_HDDIOPS:
			dst = &sp.hdd_iops;
			break;
		case O_HDDMBPS:
			dst = &sp.hdd_mbps;
			break;
		case O_PROBE:
			dst = &probe;
			break;
		case O_STRIPE:
		case O_CHUNK:
			rc = parse_size_opt(c->name, o == O_STRIPE ? "--stripe" :
					    "--chunk", optarg, 1ULL << 40,
					    o == O_STRIPE ? &sp.stripe :
					    &sp.chunk);
			if (rc)
				return rc;
			stripe_given |= o == O_STRIPE;
			chunk_given |= o == O_CHUNK;
			continue;
		case O_NOCAP:
			sp.no_stripe_cap = true;
			continue;
		default:
			return opt_default(c, o, argv);
		}
		rc = parse_pos_double(c->name, opts[o - O_SSDIOPS].name,
				      optarg, dst);
		if (rc)
			return rc;
	}
	rc = want_vol(c, argc, argv, &v);
	if (!rc)
		rc = get_stats(&v, 0, &st);
	if (rc)
		return rc;
	/* The volume exports the array's geometry (dm-nxd(4), io_hints). */
	if (!test_stats && (!stripe_given || !chunk_given)) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/block/%s/queue/optimal_io_size",
			 sysfs_root, v.kname);
		if (!stripe_given && !sysfs_read(path, buf, sizeof(buf)))
			sp.stripe = strtoull(buf, NULL, 10);
		snprintf(path, sizeof(path), "%s/block/%s/queue/minimum_io_size",
			 sysfs_root, v.kname);
		if (!chunk_given && !sysfs_read(path, buf, sizeof(buf)))
			sp.chunk = strtoull(buf, NULL, 10);
	}
	/* An optimal size that is no multiple of the minimum is no stripe. */
	if (sp.stripe && sp.chunk && (sp.stripe % sp.chunk ||
				      sp.stripe <= sp.chunk) && !stripe_given)
		sp.stripe = 0;
	given = sp;

	if (!sp.ssd_iops || !sp.ssd_mbps || !sp.hdd_iops || !sp.hdd_mbps) {
		char target[32], params[512], hdd[PATH_MAX], ssd[PATH_MAX];
		char h[64], s[64];

		if (test_stats)
			return usage_error(c->name, "give all four speeds");
		rc = dm_table_of(v.name, target, sizeof(target), params,
				 sizeof(params));
		if (rc)
			return rc;
		if (sscanf(params, "%63s %63s", h, s) != 2 ||
		    devnode_of(h, hdd, sizeof(hdd)) ||
		    devnode_of(s, ssd, sizeof(ssd)))
			return fail(NXDCTL_EXIT_KERNEL, "%s: cannot find the "
				    "devices of table '%s'", v.arg, params);
		printf("Probing with O_DIRECT reads, %.1f s per device...\n",
		       probe);
		fflush(stdout);
		rc = probe_missing(ssd, probe, &sp.ssd_iops, &sp.ssd_mbps);
		if (!rc)
			rc = probe_missing(hdd, probe, &sp.hdd_iops,
					   &sp.hdd_mbps);
		if (rc)
			return rc;
		say_speeds("SSD", ssd, sp.ssd_iops, sp.ssd_mbps,
			   given.ssd_iops, given.ssd_mbps);
		say_speeds("HDD", hdd, sp.hdd_iops, sp.hdd_mbps,
			   given.hdd_iops, given.hdd_mbps);
		putchar('\n');
	} else {
		printf("Speeds given: SSD %.0f IOPS, %.0f MB/s; HDD %.0f "
		       "IOPS, %.0f MB/s\n\n", sp.ssd_iops, sp.ssd_mbps,
		       sp.hdd_iops, sp.hdd_mbps);
	}

	if (test_stats) {
		const char *e = getenv("NXDCTL_TEST_THRESHOLD");

		if (e && !nxd_parse_size(e, &n))
			cur = n;
	} else {
		char path[PATH_MAX];

		nxd_attr_path(&v, "write_threshold", path, sizeof(path));
		if (!sysfs_read(path, buf, sizeof(buf)) &&
		    !nxd_parse_size(buf, &n))
			cur = n;
	}
	if (sp.stripe) {
		char a[32], b[32];

		nxdctl_fmt_size(a, sizeof(a), sp.stripe);
		nxdctl_fmt_size(b, sizeof(b), sp.chunk);
		printf("Array: full stripe %s, chunk %s%s\n\n", a, b,
		       stripe_given ? " [given]" : "");
	}
	nxdctl_suggest(&st, &sp, cur, &sg);
	nxdctl_print_suggestion(stdout, v.name, &sp, &sg);
	return 0;
}

const struct cmd cmd_suggest_threshold = {
	"suggest-threshold", do_suggest,
	"VOL [--ssd-iops N --ssd-mbps N --hdd-iops N --hdd-mbps N] "
	"[--stripe N --chunk N]",
	"Propose a write threshold for VOL from its histogram and the "
	"speeds of\nits two devices, and explain why.",
	"A write sent to the HDD costs one positioning (1/IOPS) plus its "
	"transfer,\ntwice that on a RAID5/6 array if it is not a whole "
	"number of stripes\n(read-modify-write); through the log it costs "
	"an SSD write plus its later\nsequential destage.  The threshold is "
	"the largest size bucket boundary up\nto which the first is at least "
	"twice the second, and never above a full\nstripe.  "
	"Speeds not given are measured with short\nO_DIRECT read probes "
	"of the underlying devices.\n"
	"Options:\n"
	"  --ssd-iops N  --hdd-iops N   4 KiB random requests per second\n"
	"  --ssd-mbps N  --hdd-mbps N   sequential MB/s (10^6 bytes)\n"
	"  --probe-seconds S            probe length per device (default "
	"2)\n"
	"  --stripe N  --chunk N        the array's full stripe and chunk "
	"(default: the\n"
	"                               volume's optimal_io_size and "
	"minimum_io_size)\n"
	"  --no-stripe-cap              let the threshold exceed a full "
	"stripe\n" VOL_HELP,
};
