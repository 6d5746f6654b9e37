// SPDX-License-Identifier: GPL-2.0
/*
 * nxdctl - administer dm-nxd volumes.
 *
 * Talks to the kernel through /dev/nxd-control (statistics, volume list),
 * sysfs /sys/block/dm-N/nxd/ (tunables) and libdevmapper (create, remove,
 * messages).  See nxdctl(8).
 *
 * Test hooks (not for production use): NXDCTL_SYSFS replaces "/sys" as the
 * sysfs root, NXDCTL_TEST_STATS names a file holding a raw struct
 * nxd_ioc_stats returned instead of calling NXD_IOC_GET_STATS.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>

#include <libdevmapper.h>

#include "nxdctl.h"

#ifndef NXDCTL_VERSION
#define NXDCTL_VERSION "0.1"
#endif

#define CONTROL_PATH	"/dev/" NXD_CONTROL_NAME
#define TARGET_NAME	"nxd"

static const char *sysfs_root = "/sys";
static const char *test_stats;

/* ---- errors ---- */

static int __attribute__((format(printf, 2, 3)))
fail(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("nxdctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

static int errno_code(int e)
{
	switch (e) {
	case EACCES:
	case EPERM:
		return NXDCTL_EXIT_PERM;
	case ENODEV:
	case ENXIO:
	case ENOENT:
		return NXDCTL_EXIT_NOVOL;
	default:
		return NXDCTL_EXIT_KERNEL;
	}
}

/* libdevmapper logs through here: errors only, with our prefix. */
static void __attribute__((format(printf, 5, 6)))
dm_log(int level, const char *file, int line, int dm_errno_or_class,
	const char *f, ...)
{
	va_list ap;

	(void)file;
	(void)line;
	(void)dm_errno_or_class;
	if ((level & 7) > 3)
		return;
	fputs("nxdctl: device-mapper: ", stderr);
	va_start(ap, f);
	vfprintf(stderr, f, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Copy @src into @dst of @len; false (and a truncated copy) if too long. */
static bool scopy(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);

	if (n >= len) {
		memcpy(dst, src, len - 1);
		dst[len - 1] = 0;
		return false;
	}
	memcpy(dst, src, n + 1);
	return true;
}

/* ---- sysfs ---- */

static int sysfs_read(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	close(fd);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static int sysfs_write(const char *path, const char *val)
{
	size_t len = strlen(val);
	ssize_t n;
	int fd;

	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, val, len);
	if (n < 0) {
		n = -errno;
		close(fd);
		return n;
	}
	if (close(fd))
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

/* ---- volumes ---- */

struct vol {
	const char *arg;		/* as the user gave it */
	char name[NXD_NAME_LEN];	/* dm name */
	char kname[64];			/* dm-N */
	unsigned int major, minor;
};

static void nxd_attr_path(const struct vol *v, const char *attr, char *p,
			  size_t len)
{
	snprintf(p, len, "%s/block/%s/nxd/%s", sysfs_root, v->kname, attr);
}

static int kname_of_dev(unsigned int ma, unsigned int mi, char *kn,
			size_t len)
{
	char path[PATH_MAX], link[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u", sysfs_root, ma, mi);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -errno;
	link[n] = 0;
	base = strrchr(link, '/');
	return scopy(kn, len, base ? base + 1 : link) ? 0 : -ENAMETOOLONG;
}

/* dm-N whose dm/name is @name, or -ENOENT. */
static int kname_of_dm_name(const char *name, char *kn, size_t len)
{
	char path[PATH_MAX], buf[NXD_NAME_LEN + 2];
	struct dirent *de;
	int rc = -ENOENT;
	DIR *d;

	snprintf(path, sizeof(path), "%s/block", sysfs_root);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "dm-", 3))
			continue;
		snprintf(path, sizeof(path), "%s/block/%s/dm/name",
			 sysfs_root, de->d_name);
		if (sysfs_read(path, buf, sizeof(buf)) || strcmp(buf, name))
			continue;
		rc = scopy(kn, len, de->d_name) ? 0 : -ENAMETOOLONG;
		break;
	}
	closedir(d);
	return rc;
}

static int dm_table_of(const char *name, char *target, size_t tlen,
		       char *params, size_t plen);

static bool is_dir(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/*
 * VOL: a dm name, /dev/mapper/NAME, /dev/nxd/NAME, /dev/dm-N, dm-N, or any
 * block device node of the volume.
 */
static int resolve_vol(const char *arg, struct vol *v)
{
	char path[PATH_MAX], buf[64];
	const char *base;
	struct stat st;
	int rc;

	memset(v, 0, sizeof(*v));
	v->arg = arg;
	if (test_stats) {
		snprintf(v->name, sizeof(v->name), "%s", arg);
		snprintf(v->kname, sizeof(v->kname), "dm-0");
		return 0;
	}

	base = strrchr(arg, '/');
	base = base ? base + 1 : arg;
	if (!*base)
		return fail(NXDCTL_EXIT_USAGE, "bad volume name '%s'", arg);
	if (!strncmp(base, "dm-", 3) && base[3] &&
	    strspn(base + 3, "0123456789") == strlen(base + 3) &&
	    (base == arg || !strncmp(arg, "/dev/", 5))) {
		snprintf(v->kname, sizeof(v->kname), "%s", base);
	} else if (arg[0] == '/' && !stat(arg, &st)) {
		if (!S_ISBLK(st.st_mode))
			return fail(NXDCTL_EXIT_NOVOL,
				    "%s is not a block device", arg);
		rc = kname_of_dev(major(st.st_rdev), minor(st.st_rdev),
				  v->kname, sizeof(v->kname));
		if (rc)
			return fail(NXDCTL_EXIT_NOVOL,
				    "%s: no such device in sysfs", arg);
	} else if (arg[0] == '/' && strncmp(arg, "/dev/mapper/", 12) &&
		   strncmp(arg, "/dev/nxd/", 9)) {
		return fail(NXDCTL_EXIT_NOVOL, "%s: %s", arg,
			    strerror(errno));
	} else {
		rc = kname_of_dm_name(base, v->kname, sizeof(v->kname));
		if (rc)
			return fail(NXDCTL_EXIT_NOVOL,
				    "volume '%s' not found", arg);
	}

	snprintf(path, sizeof(path), "%s/block/%s/dm/name", sysfs_root,
		 v->kname);
	if (sysfs_read(path, v->name, sizeof(v->name)))
		return fail(NXDCTL_EXIT_NOVOL,
			    "'%s' is not a device-mapper device", arg);
	snprintf(path, sizeof(path), "%s/block/%s/dev", sysfs_root, v->kname);
	if (sysfs_read(path, buf, sizeof(buf)) ||
	    sscanf(buf, "%u:%u", &v->major, &v->minor) != 2)
		return fail(NXDCTL_EXIT_NOVOL, "'%s': cannot read %s", arg,
			    path);

	snprintf(path, sizeof(path), "%s/block/%s/nxd", sysfs_root, v->kname);
	if (is_dir(path))
		return 0;
	/* No sysfs directory: ask device-mapper for the target type. */
	rc = dm_table_of(v->name, buf, sizeof(buf), NULL, 0);
	if (rc > 0)
		return rc;
	if (strcmp(buf, TARGET_NAME))
		return fail(NXDCTL_EXIT_NOVOL,
			    "'%s' is not an nxd volume (target %s)", arg,
			    buf[0] ? buf : "none");
	return 0;
}

/* ---- /dev/nxd-control ---- */

static int control_open(void)
{
	int fd = open(CONTROL_PATH, O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		return fd;
	if (errno == ENOENT)
		return -fail(NXDCTL_EXIT_KERNEL,
			     "cannot open %s: %s (is dm-nxd loaded?)",
			     CONTROL_PATH, strerror(errno));
	return -fail(errno_code(errno) == NXDCTL_EXIT_PERM ?
		     NXDCTL_EXIT_PERM : NXDCTL_EXIT_KERNEL,
		     "cannot open %s: %s", CONTROL_PATH, strerror(errno));
}

static void hdr_init(struct nxd_ioc_hdr *h, uint32_t size, uint32_t flags,
		     const struct vol *v)
{
	h->size = size;
	h->version = NXD_IOCTL_VERSION;
	h->flags = flags;
	if (v) {
		h->dev = nxdctl_encode_dev(v->major, v->minor);
		snprintf(h->name, sizeof(h->name), "%s", v->name);
	}
}

static int get_stats(const struct vol *v, uint32_t flags,
		     struct nxd_ioc_stats *st)
{
	int fd, rc;

	memset(st, 0, sizeof(*st));
	if (test_stats) {
		FILE *f = fopen(test_stats, "rb");

		if (!f)
			return fail(NXDCTL_EXIT_KERNEL, "%s: %s", test_stats,
				    strerror(errno));
		if (fread(st, 1, sizeof(*st), f) < sizeof(st->hdr)) {
			fclose(f);
			return fail(NXDCTL_EXIT_KERNEL, "%s: short file",
				    test_stats);
		}
		fclose(f);
		return 0;
	}

	hdr_init(&st->hdr, sizeof(*st), flags, v);
	fd = control_open();
	if (fd < 0)
		return -fd;
	rc = ioctl(fd, NXD_IOC_GET_STATS, st);
	if (rc) {
		int e = errno;

		close(fd);
		if ((e == EPERM || e == EACCES) && (flags & NXD_IOC_F_RESET))
			return fail(NXDCTL_EXIT_PERM,
				    "%s: resetting statistics needs "
				    "CAP_SYS_ADMIN", v->arg);
		if (errno_code(e) == NXDCTL_EXIT_NOVOL)
			return fail(NXDCTL_EXIT_NOVOL,
				    "%s: dm-nxd does not know this volume",
				    v->arg);
		return fail(errno_code(e), "%s: NXD_IOC_GET_STATS: %s",
			    v->arg, strerror(e));
	}
	close(fd);
	return 0;
}

static int get_list(struct nxd_ioc_list *l)
{
	int fd, rc;

	memset(l, 0, sizeof(*l));
	hdr_init(&l->hdr, sizeof(*l), 0, NULL);
	fd = control_open();
	if (fd < 0)
		return -fd;
	rc = ioctl(fd, NXD_IOC_LIST, l);
	if (rc) {
		int e = errno;

		close(fd);
		return fail(errno_code(e) == NXDCTL_EXIT_PERM ?
			    NXDCTL_EXIT_PERM : NXDCTL_EXIT_KERNEL,
			    "NXD_IOC_LIST: %s", strerror(e));
	}
	close(fd);
	if (l->count > NXD_IOC_MAX_VOLS)
		l->count = NXD_IOC_MAX_VOLS;
	return 0;
}

/* ---- libdevmapper ---- */

static int dm_fail(const char *what, const char *name)
{
	int e = errno;

	if (e == EACCES || e == EPERM || (geteuid() &&
	    access("/dev/mapper/control", R_OK | W_OK)))
		return fail(NXDCTL_EXIT_PERM, "%s %s: permission denied "
			    "(device-mapper needs root)", what, name);
	return fail(NXDCTL_EXIT_KERNEL, "%s %s failed%s%s", what, name,
		    e ? ": " : "", e ? strerror(e) : "");
}

/*
 * Type and parameters of the first target of @name.  0 or an exit code;
 * an empty @target if the device has no table.
 */
static int dm_table_of(const char *name, char *target, size_t tlen,
		       char *params, size_t plen)
{
	uint64_t start, length;
	char *type = NULL, *par = NULL;
	struct dm_task *dmt;

	target[0] = 0;
	dmt = dm_task_create(DM_DEVICE_TABLE);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, name) || !dm_task_run(dmt)) {
		dm_task_destroy(dmt);
		return dm_fail("reading the table of", name);
	}
	dm_get_next_target(dmt, NULL, &start, &length, &type, &par);
	if (type)
		snprintf(target, tlen, "%s", type);
	if (params)
		snprintf(params, plen, "%s", par ? par : "");
	dm_task_destroy(dmt);
	return 0;
}

static int dm_message(const struct vol *v, const char *msg)
{
	struct dm_task *dmt = dm_task_create(DM_DEVICE_TARGET_MSG);
	int rc = 0;

	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, v->name) || !dm_task_set_sector(dmt, 0) ||
	    !dm_task_set_message(dmt, msg) || !dm_task_run(dmt)) {
		int e = errno;

		if (e == EACCES || e == EPERM || geteuid())
			rc = fail(NXDCTL_EXIT_PERM, "%s: message '%s': "
				  "permission denied", v->arg, msg);
		else
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: message '%s' "
				  "failed%s%s (see dmesg)", v->arg, msg,
				  e ? ": " : "", e ? strerror(e) : "");
	}
	dm_task_destroy(dmt);
	return rc;
}

/* ---- option helpers ---- */

static int usage_error(const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fputs("nxdctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'nxdctl %s%s--help'.\n", cmd ? cmd : "",
		cmd ? " " : "");
	return NXDCTL_EXIT_USAGE;
}

static int parse_size_opt(const char *cmd, const char *opt, const char *s,
			  uint64_t max, uint64_t *out)
{
	int rc = nxdctl_parse_size(s, out);

	if (rc || *out > max)
		return usage_error(cmd, "%s: bad size '%s' (bytes, or with a "
				   "K, M or G suffix)", opt, s);
	return 0;
}

static int parse_uint_opt(const char *cmd, const char *opt, const char *s,
			  unsigned long min, unsigned long max,
			  unsigned long *out)
{
	char *end;

	errno = 0;
	*out = strtoul(s, &end, 10);
	if (!*s || *end || errno || *s == '-' || *out < min || *out > max)
		return usage_error(cmd, "%s: expected a number from %lu to "
				   "%lu, got '%s'", opt, min, max, s);
	return 0;
}

static int parse_pos_double(const char *cmd, const char *opt, const char *s,
			    double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	if (!*s || *end || errno || !(*out > 0) || *out > 1e12)
		return usage_error(cmd, "%s: expected a positive number, got "
				   "'%s'", opt, s);
	return 0;
}

/* ---- commands ---- */

struct cmd {
	const char *name;
	int (*fn)(const struct cmd *c, int argc, char **argv);
	const char *args;
	const char *summary;
	const char *help;
};

static void cmd_usage(const struct cmd *c, FILE *f)
{
	fprintf(f, "Usage: nxdctl %s %s\n\n%s\n\n%s", c->name, c->args,
		c->summary, c->help);
}

#define HELP_OPT { "help", no_argument, NULL, 'h' }

/* The default case of getopt loops: --help, or a bad option. */
static int opt_default(const struct cmd *c, int o, char **argv)
{
	if (o == 'h') {
		cmd_usage(c, stdout);
		return NXDCTL_EXIT_OK;
	}
	return usage_error(c->name, "bad option or missing value: '%s'",
			   argv[optind - 1]);
}

static int want_args(const struct cmd *c, int argc, char **argv, int n_min,
		     int n_max)
{
	int n = argc - optind;

	if (n < n_min)
		return usage_error(c->name, "missing argument (usage: nxdctl "
				   "%s %s)", c->name, c->args);
	if (n > n_max)
		return usage_error(c->name, "unexpected argument '%s'",
				   argv[optind + n_max]);
	return 0;
}

/* histogram */

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int print_hist(const struct nxd_ioc_stats *st, const struct vol *v,
		      bool json, bool routes, unsigned int interval)
{
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
			if (nxdctl_print_routes(stdout, st))
				return fail(NXDCTL_EXIT_KERNEL,
					    "cannot print the table");
		} else {
			nxdctl_print_histogram(stdout, st);
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
	rc = want_args(c, argc, argv, 1, 1);
	if (rc)
		return rc;
	rc = resolve_vol(argv[optind], &v);
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

static int do_stats(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "reset", no_argument, NULL, 'r' },
		HELP_OPT, { 0 }
	};
	bool json = false, reset = false;
	struct nxd_ioc_stats st;
	struct vol v;
	int o, rc;

	while ((o = getopt_long(argc, argv, "jrh", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			json = true;
			break;
		case 'r':
			reset = true;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc)
		rc = resolve_vol(argv[optind], &v);
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

/* sysfs tunables */

static int attr_fail(const struct vol *v, const char *attr, int e,
		     const char *val)
{
	if (e == -EACCES || e == -EPERM)
		return fail(NXDCTL_EXIT_PERM, "%s: %s: permission denied",
			    v->arg, attr);
	if (e == -ENOENT)
		return fail(NXDCTL_EXIT_KERNEL, "%s: dm-nxd exposes no %s in "
			    "sysfs", v->arg, attr);
	if (e == -EINVAL && val)
		return fail(NXDCTL_EXIT_USAGE, "%s: the kernel rejected %s "
			    "= %s", v->arg, attr, val);
	return fail(NXDCTL_EXIT_KERNEL, "%s: %s: %s", v->arg, attr,
		    strerror(-e));
}

static int attr_get(const struct vol *v, const char *attr, char *buf,
		    size_t len)
{
	char path[PATH_MAX];
	int rc;

	nxd_attr_path(v, attr, path, sizeof(path));
	rc = sysfs_read(path, buf, len);
	return rc ? attr_fail(v, attr, rc, NULL) : 0;
}

static int attr_set(const struct vol *v, const char *attr, const char *val)
{
	char path[PATH_MAX];
	int rc;

	nxd_attr_path(v, attr, path, sizeof(path));
	rc = sysfs_write(path, val);
	return rc ? attr_fail(v, attr, rc, val) : 0;
}

static int print_size_attr(const struct vol *v, const char *attr)
{
	char buf[64], sz[32];
	uint64_t n;
	int rc = attr_get(v, attr, buf, sizeof(buf));

	if (rc)
		return rc;
	if (nxdctl_parse_size(buf, &n)) {
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
		{ "read", required_argument, NULL, 'r' },
		{ "write", required_argument, NULL, 'w' },
		HELP_OPT, { 0 }
	};
	const char *rd = NULL, *wr = NULL;
	uint64_t rdv = 0, wrv = 0;
	char buf[32];
	struct vol v;
	int o, rc;

	while ((o = getopt_long(argc, argv, "r:w:h", opts, NULL)) != -1) {
		switch (o) {
		case 'r':
			rd = optarg;
			break;
		case 'w':
			wr = optarg;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc && rd)
		rc = parse_size_opt(c->name, "--read", rd, UINT32_MAX, &rdv);
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
	if (rd) {
		snprintf(buf, sizeof(buf), "%" PRIu64, rdv);
		rc = attr_set(&v, "read_threshold", buf);
		if (rc)
			return rc;
	}
	rc = print_size_attr(&v, "write_threshold");
	if (!rc)
		rc = print_size_attr(&v, "read_threshold");
	return rc;
}

static const char *const rw_attrs[] = {
	"write_threshold", "read_threshold", "mode", "low_watermark",
	"high_watermark", "destage_rate", "ssd_discard", "drain_on_suspend",
};
static const char *const ro_attrs[] = { "log_used_pct", "state" };

static bool known_attr(const char *a, bool rw)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE_NXDCTL(rw_attrs); i++)
		if (!strcmp(a, rw_attrs[i]))
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

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1 + ARRAY_SIZE_NXDCTL(rw_attrs) +
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
		for (i = 0; i < ARRAY_SIZE_NXDCTL(rw_attrs); i++) {
			rc = attr_get(&v, rw_attrs[i], buf, sizeof(buf));
			if (rc)
				return rc;
			printf("%s=%s\n", rw_attrs[i], buf);
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
		if (strstr(key, "threshold") && !nxdctl_parse_size(buf, &n))
			snprintf(buf, sizeof(buf), "%" PRIu64, n);
		rc = attr_set(&v, key, buf);
		if (rc)
			return rc;
		printf("%s=%s\n", key, buf);
	}
	return 0;
}

/* create / remove */

struct create_opts {
	const char *uuid;
	uint64_t len;		/* sectors; 0: all the HDD has room for */
	char extra[512];	/* key value pairs, space separated */
	unsigned int nargs;
	bool dry_run;
};

static int add_opt(struct create_opts *co, const char *key, const char *val)
{
	size_t l = strlen(co->extra);
	int n;

	n = snprintf(co->extra + l, sizeof(co->extra) - l, " %s%s%s", key,
		     val ? " " : "", val ? val : "");
	if (n < 0 || (size_t)n >= sizeof(co->extra) - l)
		return usage_error("create", "too many options");
	co->nargs += val ? 2 : 1;
	return 0;
}

enum {
	O_WTHR = 256, O_RTHR, O_MODE, O_LOWWM, O_HIGHWM, O_RATE, O_DISCARD,
	O_DRAIN, O_DRY, O_FORMAT, O_UUID, O_NAME, O_SSDIOPS, O_SSDMBPS,
	O_HDDIOPS, O_HDDMBPS, O_PROBE, O_RETRY, O_ACCEPT_LOSS,
};

/* Options of create and assemble; each refuses those that are not its own. */
static const struct option table_opts[] = {
	{ "write-threshold", required_argument, NULL, O_WTHR },
	{ "read-threshold", required_argument, NULL, O_RTHR },
	{ "mode", required_argument, NULL, O_MODE },
	{ "low-watermark", required_argument, NULL, O_LOWWM },
	{ "high-watermark", required_argument, NULL, O_HIGHWM },
	{ "destage-rate", required_argument, NULL, O_RATE },
	{ "ssd-discard", required_argument, NULL, O_DISCARD },
	{ "drain-on-suspend", required_argument, NULL, O_DRAIN },
	{ "dry-run", no_argument, NULL, O_DRY },
	{ "format", no_argument, NULL, O_FORMAT },
	{ "uuid", required_argument, NULL, O_UUID },
	{ "name", required_argument, NULL, O_NAME },
	{ "accept-log-loss", no_argument, NULL, O_ACCEPT_LOSS },
	HELP_OPT, { 0 }
};

/* One table option from getopt; 1 if @o is not one. */
static int table_opt(const char *cmd, int o, const char *arg,
		     struct create_opts *co)
{
	char buf[32];
	unsigned long n;
	uint64_t sz;
	uint32_t m;
	int rc;

	switch (o) {
	case O_WTHR:
	case O_RTHR:
		rc = parse_size_opt(cmd, o == O_WTHR ? "--write-threshold" :
				    "--read-threshold", arg, UINT32_MAX, &sz);
		if (rc)
			return rc;
		snprintf(buf, sizeof(buf), "%" PRIu64, sz);
		return add_opt(co, o == O_WTHR ? "write_threshold" :
			       "read_threshold", buf);
	case O_MODE:
		if (nxdctl_mode_parse(arg, &m))
			return usage_error(cmd, "--mode: expected auto, "
					   "passthrough or log_all, got '%s'",
					   arg);
		return add_opt(co, "mode", arg);
	case O_LOWWM:
	case O_HIGHWM:
		rc = parse_uint_opt(cmd, o == O_LOWWM ? "--low-watermark" :
				    "--high-watermark", arg, 0, 100, &n);
		if (rc)
			return rc;
		snprintf(buf, sizeof(buf), "%lu", n);
		return add_opt(co, o == O_LOWWM ? "low_watermark" :
			       "high_watermark", buf);
	case O_RATE:
		rc = parse_uint_opt(cmd, "--destage-rate", arg, 0, UINT32_MAX,
				    &n);
		if (rc)
			return rc;
		snprintf(buf, sizeof(buf), "%lu", n);
		return add_opt(co, "destage_rate", buf);
	case O_DISCARD:
	case O_DRAIN:
		rc = parse_uint_opt(cmd, o == O_DISCARD ? "--ssd-discard" :
				    "--drain-on-suspend", arg, 0, 1, &n);
		if (rc)
			return rc;
		return add_opt(co, o == O_DISCARD ? "ssd_discard" :
			       "drain_on_suspend", n ? "1" : "0");
	case O_DRY:
		co->dry_run = true;
		return 0;
	default:
		return 1;
	}
}

/* Size in bytes of a block device (or, for --dry-run, a regular file). */
static int dev_size(const char *path, bool allow_file, uint64_t *bytes,
		    dev_t *rdev)
{
	struct stat st;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(errno == EACCES ? NXDCTL_EXIT_PERM :
			    NXDCTL_EXIT_NOVOL, "%s: %s", path,
			    strerror(errno));
	if (fstat(fd, &st)) {
		rc = fail(NXDCTL_EXIT_KERNEL, "%s: %s", path, strerror(errno));
	} else if (S_ISBLK(st.st_mode)) {
		if (ioctl(fd, BLKGETSIZE64, bytes))
			rc = fail(NXDCTL_EXIT_KERNEL, "%s: BLKGETSIZE64: %s",
				  path, strerror(errno));
		if (rdev)
			*rdev = st.st_rdev;
	} else if (S_ISREG(st.st_mode) && allow_file) {
		*bytes = st.st_size;
		if (rdev)
			*rdev = 0;
	} else {
		rc = fail(NXDCTL_EXIT_NOVOL, "%s is not a block device",
			  path);
	}
	close(fd);
	return rc;
}

/*
 * The nxd volume (dm name in @name) holding block device @dev, if any.
 * Device-mapper lets several dm devices share an underlying device; two
 * nxd volumes over one SSD would share one log.
 */
static bool nxd_holder(dev_t dev, char *name, size_t len)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool found = false;
	DIR *d;

	snprintf(path, sizeof(path), "%s/dev/block/%u:%u/holders", sysfs_root,
		 major(dev), minor(dev));
	d = opendir(path);
	if (!d)
		return false;
	while (!found && (de = readdir(d))) {
		if (strncmp(de->d_name, "dm-", 3))
			continue;
		snprintf(path, sizeof(path), "%s/block/%s/nxd", sysfs_root,
			 de->d_name);
		if (!is_dir(path))
			continue;
		snprintf(path, sizeof(path), "%s/block/%s/dm/name",
			 sysfs_root, de->d_name);
		if (sysfs_read(path, name, len))
			scopy(name, len, de->d_name);
		found = true;
	}
	closedir(d);
	return found;
}

static bool valid_dm_name(const char *n)
{
	return *n && strlen(n) < NXD_NAME_LEN && !strchr(n, '/') &&
	       strcmp(n, ".") && strcmp(n, "..") && !strpbrk(n, " \t\n'\"");
}

static int create_volume(const char *name, const char *hdd, const char *ssd,
			 const struct create_opts *co)
{
	char table[1024], params[1024], uuid[NXD_NAME_LEN];
	char holder[NXD_NAME_LEN];
	uint64_t hdd_bytes, ssd_bytes, len;
	struct dm_task *dmt;
	uint32_t cookie = 0;
	dev_t hdev, sdev;
	int rc, n;

	if (!valid_dm_name(name))
		return usage_error("create", "bad volume name '%s'", name);
	rc = dev_size(hdd, co->dry_run, &hdd_bytes, &hdev);
	if (!rc)
		rc = dev_size(ssd, co->dry_run, &ssd_bytes, &sdev);
	if (rc)
		return rc;
	if (hdev && hdev == sdev)
		return usage_error("create", "HDD and SSD are the same device");
	if (nxd_holder(hdev, holder, sizeof(holder)) ||
	    nxd_holder(sdev, holder, sizeof(holder)))
		return fail(NXDCTL_EXIT_USAGE, "%s is already in use by the "
			    "nxd volume %s", nxd_holder(hdev, holder,
			    sizeof(holder)) ? hdd : ssd, holder);
	if (ssd_bytes < nxdctl_min_ssd_bytes())
		return fail(NXDCTL_EXIT_USAGE, "%s is too small for an nxd "
			    "SSD log (%" PRIu64 " bytes, needs %" PRIu64 ")",
			    ssd, ssd_bytes, nxdctl_min_ssd_bytes());
	len = nxdctl_hdd_data_sectors(hdd_bytes >> 9);
	if (!len)
		return fail(NXDCTL_EXIT_USAGE, "%s is too small for an nxd "
			    "HDD (%" PRIu64 " bytes)", hdd, hdd_bytes);
	if (co->len && co->len < len)
		len = co->len;
	if (co->nargs)
		n = snprintf(params, sizeof(params), "%s %s %u%s", hdd, ssd,
			     co->nargs, co->extra);
	else
		n = snprintf(params, sizeof(params), "%s %s", hdd, ssd);
	if (n < 0 || (size_t)n >= sizeof(params))
		return usage_error("create", "device paths too long");
	n = snprintf(table, sizeof(table), "0 %" PRIu64 " %s %s", len,
		     TARGET_NAME, params);
	if (n < 0 || (size_t)n >= sizeof(table))
		return usage_error("create", "device paths too long");
	if (co->uuid)
		snprintf(uuid, sizeof(uuid), "%s", co->uuid);
	else
		snprintf(uuid, sizeof(uuid), "NXD-%s", name);

	printf("dmsetup create %s --uuid %s --table '%s'\n", name, uuid,
	       table);
	fflush(stdout);
	if (co->dry_run)
		return 0;

	dmt = dm_task_create(DM_DEVICE_CREATE);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, name) || !dm_task_set_uuid(dmt, uuid) ||
	    !dm_task_add_target(dmt, 0, len, TARGET_NAME, params) ||
	    !dm_task_set_cookie(dmt, &cookie, 0) || !dm_task_run(dmt)) {
		rc = dm_fail("creating", name);
		if (rc == NXDCTL_EXIT_KERNEL)
			fprintf(stderr, "nxdctl: the kernel log (dmesg) says "
				"why dm-nxd refused the table\n");
		if (cookie)
			dm_udev_wait(cookie);
		dm_task_destroy(dmt);
		return rc;
	}
	dm_udev_wait(cookie);
	dm_task_destroy(dmt);
	return 0;
}

static int do_create(const struct cmd *c, int argc, char **argv)
{
	struct create_opts co = { 0 };
	bool format = false;
	int o, rc;

	while ((o = getopt_long(argc, argv, "h", table_opts, NULL)) != -1) {
		switch (o) {
		case O_NAME:
			return usage_error(c->name, "--name is for assemble; "
					   "create takes NAME as argument");
		case O_ACCEPT_LOSS:
			return usage_error(c->name, "--accept-log-loss is for assemble");
		case O_FORMAT:
			format = true;
			break;
		case O_UUID:
			if (!*optarg || strlen(optarg) >= NXD_NAME_LEN)
				return usage_error(c->name, "bad --uuid");
			co.uuid = optarg;
			break;
		default:
			return opt_default(c, o, argv);
		case O_WTHR ... O_DRY:
			rc = table_opt(c->name, o, optarg, &co);
			if (rc)
				return rc;
		}
	}
	if (format) {
		rc = add_opt(&co, "format", NULL);
		if (rc)
			return rc;
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

static int do_remove(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "retry", no_argument, NULL, O_RETRY },
		HELP_OPT, { 0 }
	};
	struct dm_task *dmt;
	uint32_t cookie = 0;
	bool retry = false;
	struct vol v;
	int o, rc;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case O_RETRY:
			retry = true;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc)
		rc = resolve_vol(argv[optind], &v);
	if (rc)
		return rc;
	printf("dmsetup remove %s%s\n", retry ? "--retry " : "", v.name);
	fflush(stdout);
	dmt = dm_task_create(DM_DEVICE_REMOVE);
	if (!dmt)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	errno = 0;
	if (!dm_task_set_name(dmt, v.name) ||
	    (retry && !dm_task_retry_remove(dmt)) ||
	    !dm_task_set_cookie(dmt, &cookie, 0) || !dm_task_run(dmt)) {
		if (errno == EBUSY)
			rc = fail(NXDCTL_EXIT_KERNEL, "%s is in use (mounted "
				  "or open)", v.name);
		else
			rc = dm_fail("removing", v.name);
		if (cookie)
			dm_udev_wait(cookie);
		dm_task_destroy(dmt);
		return rc;
	}
	dm_udev_wait(cookie);
	dm_task_destroy(dmt);
	return 0;
}

static int do_message_cmd(const struct cmd *c, int argc, char **argv,
			  const char *msg, const char *done)
{
	static const struct option opts[] = { HELP_OPT, { 0 } };
	struct vol v;
	int o, rc;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc)
		rc = resolve_vol(argv[optind], &v);
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
		HELP_OPT, { 0 }
	};
	struct nxd_ioc_list *l;
	bool json = false;
	int o, rc;

	while ((o = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			json = true;
			break;
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 0, 0);
	if (rc)
		return rc;
	l = malloc(sizeof(*l));
	if (!l)
		return fail(NXDCTL_EXIT_KERNEL, "out of memory");
	rc = get_list(l);
	if (!rc && nxdctl_print_list(stdout, l, json))
		rc = fail(NXDCTL_EXIT_KERNEL, "cannot print the list");
	if (!rc && l->total > l->count)
		fprintf(stderr, "nxdctl: showing %u of %u volumes\n",
			l->count, l->total);
	free(l);
	return rc;
}

/* suggest-threshold */

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

/* /dev path of block device "MAJ:MIN". */
static int devnode_of(const char *majmin, char *out, size_t len)
{
	char path[PATH_MAX], buf[512], *p;

	snprintf(path, sizeof(path), "/dev/block/%s", majmin);
	if (!access(path, F_OK)) {
		snprintf(out, len, "%s", path);
		return 0;
	}
	snprintf(path, sizeof(path), "%s/dev/block/%s/uevent", sysfs_root,
		 majmin);
	if (sysfs_read(path, buf, sizeof(buf)))
		return -ENOENT;
	p = strstr(buf, "DEVNAME=");
	if (!p)
		return -ENOENT;
	p += 8;
	p[strcspn(p, "\n")] = 0;
	snprintf(out, len, "/dev/%s", p);
	return 0;
}

static int do_suggest(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ssd-iops", required_argument, NULL, O_SSDIOPS },
		{ "ssd-mbps", required_argument, NULL, O_SSDMBPS },
		{ "hdd-iops", required_argument, NULL, O_HDDIOPS },
		{ "hdd-mbps", required_argument, NULL, O_HDDMBPS },
		{ "probe-seconds", required_argument, NULL, O_PROBE },
		HELP_OPT, { 0 }
	};
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
		default:
			return opt_default(c, o, argv);
		}
		rc = parse_pos_double(c->name, opts[o - O_SSDIOPS].name,
				      optarg, dst);
		if (rc)
			return rc;
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (!rc)
		rc = resolve_vol(argv[optind], &v);
	if (!rc)
		rc = get_stats(&v, 0, &st);
	if (rc)
		return rc;
	given = sp;

	if (!sp.ssd_iops || !sp.ssd_mbps || !sp.hdd_iops || !sp.hdd_mbps) {
		char target[32], params[512], hdd[PATH_MAX], ssd[PATH_MAX];
		char h[64], s[64];
		double i, m;

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
		if (!sp.ssd_iops || !sp.ssd_mbps) {
			rc = probe_dev(ssd, probe, &i, &m);
			if (rc)
				return rc;
			if (!sp.ssd_iops)
				sp.ssd_iops = i;
			if (!sp.ssd_mbps)
				sp.ssd_mbps = m;
		}
		if (!sp.hdd_iops || !sp.hdd_mbps) {
			rc = probe_dev(hdd, probe, &i, &m);
			if (rc)
				return rc;
			if (!sp.hdd_iops)
				sp.hdd_iops = i;
			if (!sp.hdd_mbps)
				sp.hdd_mbps = m;
		}
		printf("  SSD %s: %.0f IOPS (4K random)%s, %.0f MB/s "
		       "(1M sequential)%s\n", ssd, sp.ssd_iops,
		       given.ssd_iops ? " [given]" : "", sp.ssd_mbps,
		       given.ssd_mbps ? " [given]" : "");
		printf("  HDD %s: %.0f IOPS (4K random)%s, %.0f MB/s "
		       "(1M sequential)%s\n\n", hdd, sp.hdd_iops,
		       given.hdd_iops ? " [given]" : "", sp.hdd_mbps,
		       given.hdd_mbps ? " [given]" : "");
	} else {
		printf("Speeds given: SSD %.0f IOPS, %.0f MB/s; HDD %.0f "
		       "IOPS, %.0f MB/s\n\n", sp.ssd_iops, sp.ssd_mbps,
		       sp.hdd_iops, sp.hdd_mbps);
	}

	if (test_stats) {
		const char *e = getenv("NXDCTL_TEST_THRESHOLD");

		if (e && !nxdctl_parse_size(e, &n))
			cur = n;
	} else {
		char path[PATH_MAX];

		nxd_attr_path(&v, "write_threshold", path, sizeof(path));
		if (!sysfs_read(path, buf, sizeof(buf)) &&
		    !nxdctl_parse_size(buf, &n))
			cur = n;
	}
	nxdctl_suggest(&st, &sp, cur, &sg);
	nxdctl_print_suggestion(stdout, v.name, &sp, &sg);
	return 0;
}

/* assemble / udev-info */

static bool uuid_eq(const uint8_t *a, const uint8_t *b)
{
	return !memcmp(a, b, 16);
}

static int open_dev(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	return fd;
}

enum role { ROLE_NONE, ROLE_SSD, ROLE_HDD };

/*
 * What nxd metadata block device @path carries.  @hint: where an HDD label
 * may sit besides the end (the SSD superblock's hdd_label_sector), or 0.
 */
static enum role probe_role(const char *path, uint64_t hint,
			    struct nxdctl_ondisk *od, uint64_t *bytes, int *err)
{
	enum role r = ROLE_NONE;
	int fd, rc;

	*err = 0;
	fd = open_dev(path);
	if (fd < 0) {
		*err = -errno;
		return ROLE_NONE;
	}
	if (ioctl(fd, BLKGETSIZE64, bytes)) {
		struct stat st;

		if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			*err = -ENOTBLK;
			close(fd);
			return ROLE_NONE;
		}
		*bytes = st.st_size;
	}
	rc = nxdctl_read_sb(fd, *bytes, od);
	if (!rc) {
		r = ROLE_SSD;
	} else {
		if (rc < 0)
			*err = rc;
		rc = nxdctl_read_label(fd, *bytes, hint, od);
		if (!rc)
			r = ROLE_HDD;
		else if (rc < 0 && !*err)
			*err = rc;
	}
	close(fd);
	return r;
}

/* Block devices worth looking at: not nxd volumes, not held by md/dm. */
static bool candidate(const char *kn)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool held = false;
	DIR *d;

	snprintf(path, sizeof(path), "%s/class/block/%s/nxd", sysfs_root, kn);
	if (is_dir(path))
		return false;
	snprintf(path, sizeof(path), "%s/class/block/%s/holders", sysfs_root,
		 kn);
	d = opendir(path);
	if (d) {
		while ((de = readdir(d)))
			if (de->d_name[0] != '.')
				held = true;
		closedir(d);
	}
	return !held;
}

/*
 * Find the other half of volume @od among /sys/class/block: a device of
 * role @want whose metadata carries the same volume and HDD UUIDs.
 */
static int find_peer(const struct nxdctl_ondisk *od, enum role want,
		     const char *self, char *out, size_t len)
{
	char path[PATH_MAX], self_real[PATH_MAX], real[PATH_MAX];
	struct nxdctl_ondisk p;
	struct dirent *de;
	int found = 0, e;
	uint64_t bytes;
	DIR *d;

	if (!realpath(self, self_real))
		snprintf(self_real, sizeof(self_real), "%s", self);
	snprintf(path, sizeof(path), "%s/class/block", sysfs_root);
	d = opendir(path);
	if (!d)
		return fail(NXDCTL_EXIT_KERNEL, "%s: %s", path,
			    strerror(errno));
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !candidate(de->d_name))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		if (!realpath(path, real) || !strcmp(real, self_real))
			continue;
		if (probe_role(path, want == ROLE_HDD ? od->hdd_label_sector : 0,
			       &p, &bytes, &e) != want ||
		    !uuid_eq(p.vol_uuid, od->vol_uuid) ||
		    !uuid_eq(p.hdd_uuid, od->hdd_uuid))
			continue;
		if (found++) {
			fail(NXDCTL_EXIT_NOVOL, "both %s and %s match; "
			     "assemble by hand with nxdctl create", out,
			     path);
			break;
		}
		snprintf(out, len, "%s", path);
	}
	closedir(d);
	if (found == 1)
		return 0;
	return found ? NXDCTL_EXIT_NOVOL : -ENOENT;
}

/* Name of the active volume with @uuid, if any. */
static bool active_volume(const uint8_t *uuid, char *name, size_t len)
{
	struct nxd_ioc_list *l = calloc(1, sizeof(*l));
	bool found = false;
	unsigned int i;
	int fd;

	if (!l)
		return false;
	hdr_init(&l->hdr, sizeof(*l), 0, NULL);
	fd = open(CONTROL_PATH, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && !ioctl(fd, NXD_IOC_LIST, l)) {
		for (i = 0; i < l->count && i < NXD_IOC_MAX_VOLS; i++) {
			if (uuid_eq(l->vols[i].vol_uuid, uuid)) {
				snprintf(name, len, "%.*s", NXD_NAME_LEN,
					 l->vols[i].name);
				found = true;
			}
		}
	}
	if (fd >= 0)
		close(fd);
	free(l);
	return found;
}

static int assemble_one(const char *dev, const char *name,
			const struct create_opts *opts)
{
	struct create_opts co_copy = *opts, *co = &co_copy;
	char other[PATH_MAX], vname[NXD_NAME_LEN + 1], u[40], dm_uuid[48];
	const char *ssd, *hdd;
	struct nxdctl_ondisk od;
	enum role r;
	uint64_t bytes;
	int e, rc;

	r = probe_role(dev, 0, &od, &bytes, &e);
	if (r == ROLE_NONE) {
		if (e == -ENOSYS)
			return fail(NXDCTL_EXIT_KERNEL, "this nxdctl was "
				    "built without kernel/nxd_core.c");
		if (e && e != -EINVAL)
			return fail(errno_code(-e), "%s: %s", dev,
				    strerror(-e));
		return fail(NXDCTL_EXIT_NOVOL, "%s carries no nxd superblock "
			    "or HDD label", dev);
	}
	nxdctl_fmt_uuid(u, od.vol_uuid);
	if (active_volume(od.vol_uuid, vname, sizeof(vname))) {
		printf("volume %s is already active as %s\n", u, vname);
		return 0;
	}
	rc = find_peer(&od, r == ROLE_SSD ? ROLE_HDD : ROLE_SSD, dev, other,
		       sizeof(other));
	if (rc == -ENOENT)
		return fail(NXDCTL_EXIT_NOVOL, "volume %s: its %s is not "
			    "present (yet)", u, r == ROLE_SSD ? "HDD" : "SSD");
	if (rc)
		return rc;
	ssd = r == ROLE_SSD ? dev : other;
	hdd = r == ROLE_SSD ? other : dev;
	/* The volume's length, not the HDD's: growing is a separate step. */
	if (r == ROLE_HDD && probe_role(ssd, 0, &od, &bytes, &e) != ROLE_SSD)
		return fail(NXDCTL_EXIT_NOVOL, "%s: superblock vanished", ssd);
	co->len = od.data_sectors;
	if (name)
		snprintf(vname, sizeof(vname), "%s", name);
	else
		snprintf(vname, sizeof(vname), "nxd-%.8s", u);
	if (!co->uuid) {
		snprintf(dm_uuid, sizeof(dm_uuid), "NXD-%s", u);
		co->uuid = dm_uuid;
	}
	return create_volume(vname, hdd, ssd, co);
}

static int do_assemble(const struct cmd *c, int argc, char **argv)
{
	struct create_opts co = { 0 };
	const char *name = NULL;
	char path[PATH_MAX], real[PATH_MAX];
	struct dirent *de;
	int o, rc, worst = 0, n = 0;
	bool accept_loss = false;
	DIR *d;

	while ((o = getopt_long(argc, argv, "h", table_opts, NULL)) != -1) {
		switch (o) {
		case O_NAME:
			if (!valid_dm_name(optarg))
				return usage_error(c->name, "bad --name");
			name = optarg;
			break;
		case O_FORMAT:
		case O_UUID:
			return usage_error(c->name, "assemble takes no --format "
					   "or --uuid");
		case O_ACCEPT_LOSS:
			accept_loss = true;
			break;
		default:
			return opt_default(c, o, argv);
		case O_WTHR ... O_DRY:
			rc = table_opt(c->name, o, optarg, &co);
			if (rc)
				return rc;
		}
	}
	rc = want_args(c, argc, argv, 0, 1);
	if (rc)
		return rc;
	if (optind < argc) {
		const char *dev = argv[optind];

		if (!strchr(dev, '/')) {
			snprintf(path, sizeof(path), "/dev/%s", dev);
			dev = path;
		}
		if (!realpath(dev, real))
			return fail(NXDCTL_EXIT_NOVOL, "%s: %s", dev,
				    strerror(errno));
		if (accept_loss) {
			rc = add_opt(&co, "accept_log_loss", NULL);
			if (rc)
				return rc;
			fprintf(stderr, "nxdctl: --accept-log-loss: writes in the "
				"part of the log that cannot be read are lost\n");
		}
		return assemble_one(real, name, &co);
	}
	if (name)
		return usage_error(c->name, "--name needs a DEVICE");
	if (accept_loss)
		return usage_error(c->name, "--accept-log-loss needs a DEVICE");

	/* No device: every SSD with a superblock whose HDD is present. */
	snprintf(path, sizeof(path), "%s/class/block", sysfs_root);
	d = opendir(path);
	if (!d)
		return fail(NXDCTL_EXIT_KERNEL, "%s: %s", path,
			    strerror(errno));
	while ((de = readdir(d))) {
		struct nxdctl_ondisk od;
		uint64_t bytes;
		int e;

		if (de->d_name[0] == '.' || !candidate(de->d_name))
			continue;
		snprintf(path, sizeof(path), "/dev/%s", de->d_name);
		if (probe_role(path, 0, &od, &bytes, &e) != ROLE_SSD)
			continue;
		n++;
		rc = assemble_one(path, NULL, &co);
		if (rc > worst)
			worst = rc;
	}
	closedir(d);
	if (!n)
		printf("no nxd SSD found\n");
	return worst;
}

static int do_udev_info(const struct cmd *c, int argc, char **argv)
{
	static const struct option opts[] = { HELP_OPT, { 0 } };
	char path[PATH_MAX], buf[64], u[40];
	const char *kn;
	struct nxdctl_ondisk od;
	uint64_t bytes;
	unsigned int ma, mi, i, vma, vmi;
	int o, rc, e;

	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		default:
			return opt_default(c, o, argv);
		}
	}
	rc = want_args(c, argc, argv, 1, 1);
	if (rc)
		return rc;
	kn = strrchr(argv[optind], '/');
	kn = kn ? kn + 1 : argv[optind];

	snprintf(path, sizeof(path), "%s/class/block/%s/nxd", sysfs_root, kn);
	if (is_dir(path)) {
		struct nxd_ioc_list *l = calloc(1, sizeof(*l));

		snprintf(path, sizeof(path), "%s/class/block/%s/dev",
			 sysfs_root, kn);
		if (!l || sysfs_read(path, buf, sizeof(buf)) ||
		    sscanf(buf, "%u:%u", &ma, &mi) != 2) {
			free(l);
			return NXDCTL_EXIT_NOVOL;
		}
		rc = get_list(l);
		for (i = 0; !rc && i < l->count; i++) {
			nxdctl_decode_dev(l->vols[i].dev, &vma, &vmi);
			if (vma != ma || vmi != mi)
				continue;
			nxdctl_fmt_uuid(u, l->vols[i].vol_uuid);
			printf("NXD_ROLE=volume\nNXD_VOL_UUID=%s\n"
			       "NXD_VOL_NAME=%.*s\n", u, NXD_NAME_LEN,
			       l->vols[i].name);
			free(l);
			return 0;
		}
		free(l);
		return rc ? rc : NXDCTL_EXIT_NOVOL;
	}

	snprintf(path, sizeof(path), "/dev/%s", kn);
	switch (probe_role(path, 0, &od, &bytes, &e)) {
	case ROLE_SSD:
		puts("NXD_ROLE=ssd");
		break;
	case ROLE_HDD:
		puts("NXD_ROLE=hdd");
		break;
	default:
		return 0;	/* not ours: nothing to import */
	}
	nxdctl_fmt_uuid(u, od.vol_uuid);
	printf("NXD_VOL_UUID=%s\n", u);
	nxdctl_fmt_uuid(u, od.hdd_uuid);
	printf("NXD_HDD_UUID=%s\n", u);
	return 0;
}

/* ---- the command table and main ---- */

static int do_help(const struct cmd *c, int argc, char **argv);

#define VOL_HELP							\
	"VOL is a dm name, /dev/mapper/NAME, /dev/nxd/NAME or /dev/dm-N.\n"

static const struct cmd cmds[] = {
	{ "histogram", do_histogram,
	  "VOL [--json] [--reset] [--watch SECONDS] [--routes]",
	  "Show the request size histogram of VOL, in the layout of the "
	  "NytroXD\nmanagement utility: \"Num Reads <size> = N\" for every "
	  "size bucket,\nthen \"Num Writes <size> = N\".",
	  "Options:\n"
	  "  --routes           a table with, per bucket, the requests served "
	  "by the\n"
	  "                     SSD log and by the HDD, aligned and unaligned "
	  "ones\n"
	  "                     (4 KiB offset and length), and mean latencies\n"
	  "  --json             every cell (count, bytes, time_ns by route "
	  "and\n"
	  "                     alignment) as JSON\n"
	  "  --reset            clear the histogram and counters as they are "
	  "read\n"
	  "                     (needs CAP_SYS_ADMIN)\n"
	  "  --watch SECONDS    print what changed every SECONDS until "
	  "interrupted\n"
	  "                     (with --json: one JSON document per line)\n"
	  VOL_HELP },
	{ "stats", do_stats, "VOL [--json] [--reset]",
	  "Show all counters of VOL by name.",
	  "Options:\n"
	  "  --json     as a JSON object\n"
	  "  --reset    clear the counters as they are read (CAP_SYS_ADMIN)\n"
	  VOL_HELP },
	{ "threshold", do_threshold, "VOL [--read N] [--write N]",
	  "Show or set the size thresholds of VOL.  Writes up to the write\n"
	  "threshold (and unaligned writes) go to the SSD log, larger ones to "
	  "the HDD.",
	  "Options:\n"
	  "  --write N   set the write threshold, bytes or with a K/M/G "
	  "suffix (64K)\n"
	  "  --read N    set the read threshold\n"
	  "Without options, print both.\n" VOL_HELP },
	{ "config", do_config, "VOL [KEY[=VALUE]...]",
	  "Show all sysfs tunables of VOL, or show or set some.",
	  "KEY is one of write_threshold, read_threshold, mode, "
	  "low_watermark,\nhigh_watermark, destage_rate, ssd_discard, "
	  "drain_on_suspend, or the\nread-only log_used_pct and state.\n"
	  VOL_HELP },
	{ "create", do_create, "NAME HDD SSD [OPTIONS]",
	  "Create the nxd volume NAME over HDD (the backing device, e.g. an "
	  "md\nRAID) and SSD (the log).  Its length is the HDD size rounded "
	  "down to\n1 MiB, less 1 MiB for the label.  Prints the dmsetup "
	  "command it is\nequivalent to.",
	  "Options (table options of dm-nxd(4)):\n"
	  "  --write-threshold N   --read-threshold N   (bytes, K/M/G "
	  "suffixes)\n"
	  "  --mode auto|passthrough|log_all\n"
	  "  --low-watermark PCT   --high-watermark PCT\n"
	  "  --destage-rate MiB/s  (0: unlimited)\n"
	  "  --ssd-discard 0|1     --drain-on-suspend 0|1\n"
	  "  --format              create a new volume (new log and HDD "
	  "label): needed\n"
	  "                        if the SSD holds other data or the devices "
	  "belong\n"
	  "                        to another volume; an old log's contents are "
	  "lost\n"
	  "  --uuid UUID           device-mapper UUID (default NXD-NAME)\n"
	  "  --dry-run             only print the dmsetup command\n" },
	{ "remove", do_remove, "VOL [--retry]",
	  "Remove the nxd volume VOL (dmsetup remove).",
	  "Options:\n  --retry    retry while the device is briefly busy\n"
	  VOL_HELP },
	{ "drain", do_drain, "VOL",
	  "Destage the whole SSD log of VOL to the HDD; returns when it is "
	  "empty.", VOL_HELP },
	{ "pause-destage", do_pause, "VOL",
	  "Stop destaging the log of VOL (until resume-destage).", VOL_HELP },
	{ "resume-destage", do_resume, "VOL",
	  "Resume destaging the log of VOL.", VOL_HELP },
	{ "list", do_list, "[--json]",
	  "List the nxd volumes the kernel knows.",
	  "Options:\n  --json    as JSON\n" },
	{ "suggest-threshold", do_suggest,
	  "VOL [--ssd-iops N --ssd-mbps N --hdd-iops N --hdd-mbps N]",
	  "Propose a write threshold for VOL from its histogram and the "
	  "speeds of\nits two devices, and explain why.",
	  "A write sent to the HDD costs one positioning (1/IOPS) plus its "
	  "transfer;\nthrough the log it costs an SSD write plus its later "
	  "sequential destage.\nThe threshold is the largest size bucket "
	  "boundary up to which the first\nis at least twice the second.  "
	  "Speeds not given are measured with short\nO_DIRECT read probes "
	  "of the underlying devices.\n"
	  "Options:\n"
	  "  --ssd-iops N  --hdd-iops N   4 KiB random requests per second\n"
	  "  --ssd-mbps N  --hdd-mbps N   sequential MB/s (10^6 bytes)\n"
	  "  --probe-seconds S            probe length per device (default "
	  "2)\n" VOL_HELP },
	{ "assemble", do_assemble, "[DEVICE] [--name NAME] [OPTIONS]",
	  "Find the other half of an nxd volume and create it.  DEVICE "
	  "carries\nan nxd SSD superblock or HDD label; its peer is looked "
	  "for among\n/sys/class/block.  Without DEVICE, assemble every "
	  "volume whose SSD\nand HDD are both present.",
	  "Options:\n"
	  "  --name NAME   volume name (default nxd-<first 8 digits of the "
	  "UUID>)\n"
	  "  and the table options of create, but not --format.\n"
	  "  --accept-log-loss     the SSD log cannot be read (or was abandoned):\n"
	  "                        assemble without what it holds (one DEVICE)\n" },
	{ "udev-info", do_udev_info, "KERNEL_NAME",
	  "For udev IMPORT{program}: print NXD_ROLE (volume, ssd or hdd) "
	  "and\nNXD_VOL_UUID of the block device KERNEL_NAME (e.g. dm-3, "
	  "sdb), or\nnothing if it is not nxd.", "" },
	{ "help", do_help, "[COMMAND]", "Show help.", "" },
};

static void main_usage(FILE *f)
{
	unsigned int i;

	fprintf(f, "Usage: nxdctl COMMAND [ARGS]\n"
		"       nxdctl --help | --version\n\n"
		"Administer dm-nxd volumes (small writes to an SSD log, large "
		"ones to the HDD).\n\nCommands:\n");
	for (i = 0; i < ARRAY_SIZE_NXDCTL(cmds); i++)
		fprintf(f, "  %-18s %s\n", cmds[i].name, cmds[i].args);
	fprintf(f, "\nRun 'nxdctl COMMAND --help' for more.\n\n"
		"Exit status: 0 ok, 1 usage error, 2 volume not found or not "
		"nxd,\n3 permission denied, 4 kernel or ioctl error.\n");
}

static const struct cmd *find_cmd(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE_NXDCTL(cmds); i++)
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
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
