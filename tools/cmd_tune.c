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

/* One KEY=VALUE of nxdctl config: checked, not yet written. */
struct tun_change {
	const struct nxd_tun_desc *d;
	uint32_t old, v;
};

static int tun_write(const struct vol *v, const struct nxd_tun_desc *d,
		     uint32_t x)
{
	char buf[NXD_TUN_STR_LEN];

	return attr_set(v, d->name, nxd_tun_str(d, x, buf));
}

/*
 * Raising the low one of a pair above the current high one: the high one
 * goes first (the kernel checks the pair at every write).
 */
static void order_pair(struct tun_change *ch, unsigned int n, size_t lo_off,
		       size_t hi_off)
{
	unsigned int i, lo = n, hi = n;
	struct tun_change tmp;

	for (i = 0; i < n; i++) {
		if (ch[i].d->off == lo_off)
			lo = i;
		if (ch[i].d->off == hi_off)
			hi = i;
	}
	if (lo < n && hi < n && (lo < hi) == (ch[lo].v > ch[hi].old)) {
		tmp = ch[lo];
		ch[lo] = ch[hi];
		ch[hi] = tmp;
	}
}

/*
 * Write @n checked changes, all or none: in an order that keeps
 * low_watermark <= high_watermark (and the adaptive bounds) at every step, and on a refusal the
 * ones written are put back.  Then ask the kernel to store them in the
 * superblock, where the next activation reads them.
 */
static int tun_apply(const struct vol *v, struct tun_change *ch,
		     unsigned int n, bool dry_run, bool quiet)
{
	char buf[NXD_TUN_STR_LEN];
	struct nxd_tun t;
	unsigned int i;
	int rc = 0;

	for (i = 0; i < NXD_TUN_NR; i++) {
		const struct nxd_tun_desc *d = &nxd_tuns[i];
		char cur[64];

		rc = attr_get(v, d->name, cur, sizeof(cur));
		if (!rc && nxd_tun_parse(d, cur, nxd_tun_field(&t, d)))
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: %s reads '%s'",
				  v->arg, d->name, cur);
		if (rc)
			return rc;
	}
	for (i = 0; i < n; i++)
		ch[i].old = nxd_tun_val(&t, ch[i].d);
	for (i = 0; i < n; i++)
		*nxd_tun_field(&t, ch[i].d) = ch[i].v;
	rc = tun_pairs_check("config", &t);
	if (rc)
		return rc;
	order_pair(ch, n, offsetof(struct nxd_tun, low_wm),
		   offsetof(struct nxd_tun, high_wm));
	order_pair(ch, n, offsetof(struct nxd_tun, auto_min_thr),
		   offsetof(struct nxd_tun, auto_max_thr));
	for (i = 0; i < n; i++) {
		if (!dry_run)
			rc = tun_write(v, ch[i].d, ch[i].v);
		if (rc)
			break;
		if (!quiet)
			printf("%s=%s\n", ch[i].d->name,
			       nxd_tun_str(ch[i].d, ch[i].v, buf));
	}
	if (rc) {
		while (i--)
			if (tun_write(v, ch[i].d, ch[i].old))
				fprintf(stderr, "nxdctl: %s: could not put "
					"back %s\n", v->arg, ch[i].d->name);
		fprintf(stderr, "nxdctl: %s: nothing changed\n", v->arg);
		return rc;
	}
	if (dry_run || !n)
		return 0;
	/* A fake sysfs tree (tests) has no device to message. */
	if (strcmp(sysfs_root, "/sys"))
		return 0;
	if (dm_message(v, "save_tunables"))
		fprintf(stderr, "nxdctl: %s: the change is live; the "
			"superblock stores it at its next write (at the "
			"latest when the volume stops)\n", v->arg);
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
	struct tun_change ch = { nxd_tun_find("write_threshold"), 0, 0 };
	struct vol v;
	int rc;

	rc = simple_opts(c, argc, argv, "w:h", opts, so);
	if (rc >= 0)
		return rc;
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc && wr)
		rc = tun_value(c->name, "--write", ch.d, wr, &ch.v);
	if (!rc)
		rc = resolve_vol(argv[optind], &v);
	if (rc)
		return rc;
	if (wr) {
		rc = tun_apply(&v, &ch, 1, false, true);
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

static int show_attr(const struct vol *v, const char *key)
{
	char buf[256];
	int rc = attr_get(v, key, buf, sizeof(buf));

	if (!rc)
		printf("%s=%s\n", key, buf);
	return rc;
}

static int do_config(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		HELP_OPT, { 0 }
	};
	bool dry_run = false;
	const struct simple_opt so[] = { { 'n', &dry_run, NULL }, { 0 } };
	struct tun_change ch[NXD_TUN_NR];
	unsigned int i, n = 0, shown = 0;
	uint32_t seen = 0;
	char key[64];
	struct vol v;
	int o, rc;

	rc = simple_opts(c, argc, argv, "h", opts, so);
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
		const struct nxd_tun_desc *d;

		snprintf(key, sizeof(key), "%.*s", (int)kl, argv[o]);
		if (!known_attr(key, !!eq))
			return usage_error(c->name, "unknown %sattribute "
					   "'%s'", eq ? "writable " : "", key);
		if (!eq) {
			shown++;
			continue;
		}
		d = tun_attr(key);
		if (seen & (1U << (d - nxd_tuns)))
			return usage_error(c->name, "%s given twice", key);
		seen |= 1U << (d - nxd_tuns);
		ch[n].d = d;
		rc = tun_value(c->name, d->name, d, eq + 1, &ch[n].v);
		if (rc)
			return rc;
		n++;
	}
	if (dry_run && shown)
		return usage_error(c->name, "--dry-run takes KEY=VALUE only");
	rc = resolve_vol(argv[optind], &v);
	if (rc)
		return rc;
	if (optind + 1 == argc) {
		for (i = 0; !rc && i < NXD_TUN_NR; i++)
			rc = show_attr(&v, nxd_tuns[i].name);
		for (i = 0; !rc && i < ARRAY_SIZE_NXDCTL(ro_attrs); i++)
			rc = show_attr(&v, ro_attrs[i]);
		return rc;
	}
	/* Shown keys first, then the changes (all or none). */
	for (o = optind + 1; !rc && o < argc; o++)
		if (!strchr(argv[o], '='))
			rc = show_attr(&v, argv[o]);
	return rc ? rc : tun_apply(&v, ch, n, dry_run, false);
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
	"config", do_config, "VOL [--dry-run] [KEY[=VALUE]...]",
	"Show all sysfs tunables of VOL, or show or set some.  Every value "
	"is checked\nfirst; then all are set or none, and stored in the "
	"superblock for the next\nassembly.",
	"KEY is one of write_threshold, mode, low_watermark, "
	"high_watermark,\ndestage_rate, ssd_discard, drain_on_suspend, "
	"auto_min_threshold,\nauto_max_threshold, stream_min, stripe_size, "
	"stream_share, or the read-only\nlog_used_pct and state.\n"
	"  --dry-run   check the values and print them; change nothing\n"
	VOL_HELP,
};
