// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl threshold, config: the sysfs tunables of a volume.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "nxdctl.h"

static int print_size_attr(const struct vol *v, const char *attr)
{
	char buf[64], sz[32];
	uint64_t n;
	int rc = attr_get(v, attr, buf, sizeof(buf));

	if (rc)
		return rc;
	if (nxd_parse_size(buf, &n)) {
		printf("%s %s\n", attr, buf);
	} else {
		nxdctl_fmt_size(sz, sizeof(sz), n);
		printf("%s %" PRIu64 " (%s)\n", attr, n, sz);
	}
	return 0;
}

static int do_threshold(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "write", required_argument, NULL, 'w' },
		HELP_OPT, { 0 }
	};
	const char *wr = NULL;
	const struct simple_opt so[] = { { 'w', NULL, &wr }, { 0 } };
	uint64_t wrv = 0;
	char buf[32];
	struct vol v;
	int rc;

	rc = simple_opts(c, argc, argv, "w:h", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc && wr)
		rc = parse_size_opt(c->name, "--write", wr, UINT32_MAX, &wrv);
	if (!rc)
		rc = resolve_vol(argv[optind], &v);
	if (rc)
		return rc;
	if (wr) {
		snprintf(buf, sizeof(buf), "%" PRIu64, wrv);
		rc = attr_set(&v, "write_threshold", buf);
		if (rc)
			return rc;
	}
	return print_size_attr(&v, "write_threshold");
}

/* The writable attributes are the tunables (nxd_tuns[]). */
static const char *const ro_attrs[] = { "log_used_pct", "state" };

/* sysfs file names are exact: the table line's any-case match is not. */
static const struct nxd_tun_desc *tun_attr(const char *a)
{
	unsigned int i;

	for (i = 0; i < NXD_TUN_NR; i++)
		if (!strcmp(a, nxd_tuns[i].name))
			return &nxd_tuns[i];
	return NULL;
}

static bool known_attr(const char *a, bool rw)
{
	unsigned int i;

	if (tun_attr(a))
		return true;
	for (i = 0; !rw && i < ARRAY_SIZE_NXDCTL(ro_attrs); i++)
		if (!strcmp(a, ro_attrs[i]))
			return true;
	return false;
}

static int do_config(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = { HELP_OPT, { 0 } };
	char buf[256];
	unsigned int i;
	struct vol v;
	int o, rc;

	rc = simple_opts(c, argc, argv, "h", opts, NULL);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 1 + NXD_TUN_NR +
		       ARRAY_SIZE_NXDCTL(ro_attrs));
	if (rc)
		return rc;
	/* Check every KEY[=VALUE] before touching anything. */
	for (o = optind + 1; o < argc; o++) {
		char *eq = strchr(argv[o], '=');
		size_t kl = eq ? (size_t)(eq - argv[o]) : strlen(argv[o]);

		snprintf(buf, sizeof(buf), "%.*s", (int)kl, argv[o]);
		if (!known_attr(buf, !!eq))
			return usage_error(c->name, "unknown %sattribute "
					   "'%s'", eq ? "writable " : "", buf);
	}
	rc = resolve_vol(argv[optind], &v);
	if (rc)
		return rc;
	if (optind + 1 == argc) {
		for (i = 0; i < NXD_TUN_NR; i++) {
			rc = attr_get(&v, nxd_tuns[i].name, buf, sizeof(buf));
			if (rc)
				return rc;
			printf("%s=%s\n", nxd_tuns[i].name, buf);
		}
		for (i = 0; i < ARRAY_SIZE_NXDCTL(ro_attrs); i++) {
			rc = attr_get(&v, ro_attrs[i], buf, sizeof(buf));
			if (rc)
				return rc;
			printf("%s=%s\n", ro_attrs[i], buf);
		}
		return 0;
	}
	for (o = optind + 1; o < argc; o++) {
		char *eq = strchr(argv[o], '=');
		const struct nxd_tun_desc *d;
		char key[64];
		uint64_t n;

		snprintf(key, sizeof(key), "%.*s",
			 (int)(eq ? eq - argv[o] : (int)strlen(argv[o])),
			 argv[o]);
		if (!eq) {
			rc = attr_get(&v, key, buf, sizeof(buf));
			if (rc)
				return rc;
			printf("%s=%s\n", key, buf);
			continue;
		}
		snprintf(buf, sizeof(buf), "%s", eq + 1);
		/* Sizes may carry a suffix; the kernel wants bytes. */
		d = tun_attr(key);
		if (d && d->kind == NXD_TUN_BYTES && !nxd_parse_size(buf, &n))
			snprintf(buf, sizeof(buf), "%" PRIu64, n);
		rc = attr_set(&v, key, buf);
		if (rc)
			return rc;
		printf("%s=%s\n", key, buf);
	}
	return 0;
}

const struct cmd cmd_threshold = {
	"threshold", do_threshold, "VOL [--write N]",
	"Show or set the write threshold of VOL.  Writes up to the write\n"
	"threshold (and unaligned writes) go to the SSD log, larger ones to "
	"the HDD.",
	"Options:\n"
	"  --write N   set the write threshold, bytes or with a K/M/G "
	"suffix (64K)\n"
	"Without options, print it.\n" VOL_HELP,
};

const struct cmd cmd_config = {
	"config", do_config, "VOL [KEY[=VALUE]...]",
	"Show all sysfs tunables of VOL, or show or set some.",
	"KEY is one of write_threshold, mode, low_watermark, "
	"high_watermark,\ndestage_rate, ssd_discard, drain_on_suspend, "
	"auto_min_threshold,\nauto_max_threshold, stream_min, stripe_size, "
	"or the read-only log_used_pct\nand state.\n"
	VOL_HELP,
};
